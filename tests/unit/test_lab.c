/* test_lab.c - the lab stage without the CLI: the study design for given
 * models (configurations, labels, targets, suites, with and without the
 * GPU), finding models in a folder, the cost model's fit and pricing
 * checked against values computed by hand, the plan's size from the
 * built-in suites, and the stochastic leg's design and comparison on a
 * store with known labels; its runs on the tiny fixture model; the whole
 * study (drift_lab_run) on the fixtures at the smallest size, its phases
 * and its result's renderers. Nothing here checks a timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driftbench/lab.h"
#include "driftbench/matrix.h"
#include "driftbench/pipeline.h"
#include "driftbench/suite.h"

#include "labelled_runs.h"

#define TOL 1e-12

static const drift_lab_model MODELS[2] = {{"/m/a.gguf", "a"}, {"/m/b.gguf", "b"}};

static drift_matrix_spec *design(const drift_lab_model *models, size_t n, int full, long limit, int max_tokens,
                                 int with_safety, int threads, const char *gpu) {
    char *json = drift_lab_design_json(models, n, full, limit, max_tokens, with_safety, threads, gpu);
    assert_non_null(json);
    drift_matrix_spec *spec = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(json, strlen(json), "matrix.json", &spec, &err), DRIFT_OK);
    free(json);
    return spec;
}

static const drift_matrix_config *find_config(const drift_matrix_spec *s, const char *label) {
    for (size_t i = 0; i < s->n_configs; i++)
        if (!strcmp(s->configs[i].label, label)) return &s->configs[i];
    return NULL;
}

/* --quick: per model the baseline (w16a16/vllm/avx2 presets, logprobs),
 * framework x precision crossed at the baseline hardware, hardware x
 * precision crossed on the first model (the hardware levels at the
 * baseline precision on the others), the A/A run and the ref oracle. */
static void test_design_quick(void **state) {
    (void)state;
    drift_matrix_spec *s = design(MODELS, 2, 0, -1, 32, 1, 1, NULL);
    assert_string_equal(s->name, "driftbench lab --quick");
    assert_string_equal(s->baseline, "base@{model}");
    assert_int_equal(s->baseline_logprobs, DRIFT_LAB_BASE_LOGPROBS);
    /* 2 baselines + a: 8 (framework x precision) + 6 (hardware x precision) + b: 8 + 2 + 2 A/A + 2 ref */
    assert_int_equal(s->n_configs, 2 + 14 + 10 + 2 + 2);
    assert_int_equal(s->n_suites, 4);
    assert_string_equal(s->suites[0], "builtin:math?n=60");
    assert_string_equal(s->suites[1], "builtin:code?n=40");
    assert_string_equal(s->suites[2], "builtin:safety?n=60");
    assert_string_equal(s->suites[3], "builtin:chat?n=30");
    assert_int_equal(s->max_tokens, 32);
    assert_int_equal(s->seed, 42);
    assert_true(s->temperature == 0.0);
    /* the baselines first: the presets of the paper's FP16 / vLLM / H100 */
    assert_string_equal(s->configs[0].label, "base@a");
    assert_string_equal(s->configs[0].target,
                        "embedded:/m/a.gguf?precision=w16a16&framework=vllm&hardware=avx2&threads=1");
    assert_string_equal(s->configs[1].label, "base@b");
    char *dims = drift_matrix_config_dims(&s->configs[0]);
    assert_string_equal(dims, "model=a,hardware=avx2,precision=w16a16,framework=vllm");
    free(dims);
    /* crossed: every framework x precision on both models, every hardware x
     * precision on a, each a level swapped from the baseline's presets */
    drift_lab_levels_t lv;
    drift_lab_levels(0, &lv);
    assert_int_equal(lv.n_hardware, 3);
    assert_int_equal(lv.n_precision, 3);
    assert_int_equal(lv.n_framework, 3);
    char label[128];
    for (size_t p = 0; p < lv.n_precision; p++) {
        for (size_t f = 0; f < lv.n_framework; f++)
            for (int m = 0; m < 2; m++) {
                snprintf(label, sizeof label, "%s/avx2/%s/%s", m ? "b" : "a", lv.precision[p], lv.framework[f]);
                assert_true((find_config(s, label) != NULL) == !(p == 0 && f == 0));
            }
        for (size_t h = 0; h < lv.n_hardware; h++) {
            snprintf(label, sizeof label, "a/%s/%s/vllm", lv.hardware[h], lv.precision[p]);
            assert_true((find_config(s, label) != NULL) == !(p == 0 && h == 0));
            snprintf(label, sizeof label, "b/%s/%s/vllm", lv.hardware[h], lv.precision[p]);
            assert_true((find_config(s, label) != NULL) == ((h > 0 && p == 0) || (h == 0 && p > 0)));
        }
    }
    assert_string_equal(find_config(s, "a/avx512/w8a8-fp8/vllm")->target,
                        "embedded:/m/a.gguf?precision=w8a8-fp8&framework=vllm&hardware=avx512&threads=1");
    /* the controls: A/A = the baseline's target at another thread count; ref */
    const drift_matrix_config *aa = find_config(s, "aa@b");
    assert_non_null(aa);
    assert_string_equal(aa->target, "embedded:/m/b.gguf?precision=w16a16&framework=vllm&hardware=avx2&threads=2");
    dims = drift_matrix_config_dims(aa);
    assert_string_equal(dims, "model=b,hardware=avx2,precision=w16a16,framework=vllm");
    free(dims);
    assert_string_equal(find_config(s, "ref@a")->target, "embedded:/m/a.gguf?profile=ref");
    assert_int_equal(drift_lab_label_role("base@a"), DRIFT_LAB_ROLE_BASE);
    assert_int_equal(drift_lab_label_role("aa@a"), DRIFT_LAB_ROLE_AA);
    assert_int_equal(drift_lab_label_role("ref@a"), DRIFT_LAB_ROLE_REF);
    assert_int_equal(drift_lab_label_role("a/avx2/w8a8-fp8/vllm"), DRIFT_LAB_ROLE_LEVEL);
    drift_matrix_spec_free(s);

    /* no guard: no safety suite; --limit sizes every suite; threads travel
     * (the A/A run then takes 2: another count) */
    s = design(MODELS, 1, 0, 3, 12, 0, 4, NULL);
    assert_int_equal(s->n_configs, 1 + 14 + 2);
    assert_int_equal(s->n_suites, 3);
    assert_string_equal(s->suites[0], "builtin:math?n=3");
    assert_string_equal(s->suites[1], "builtin:code?n=3");
    assert_string_equal(s->suites[2], "builtin:chat?n=3");
    assert_int_equal(s->max_tokens, 12);
    assert_non_null(strstr(s->configs[1].target, "&threads=4"));
    assert_non_null(strstr(find_config(s, "aa@a")->target, "&threads=2"));
    drift_matrix_spec_free(s);

    /* the long-context subset: the first model's baseline and 4 levels, the same labels and targets */
    char *lj = drift_lab_design_long_json(MODELS, 2, -1, 32, 1);
    assert_non_null(lj);
    drift_matrix_spec *ls = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(lj, strlen(lj), "matrix_long.json", &ls, &err), DRIFT_OK);
    free(lj);
    s = design(MODELS, 2, 0, -1, 32, 1, 1, NULL);
    assert_int_equal(ls->n_configs, 5);
    assert_string_equal(ls->suites[0], "builtin:long?n=16");
    for (size_t i = 0; i < ls->n_configs; i++) {
        const drift_matrix_config *c = find_config(s, ls->configs[i].label);
        assert_non_null(c);
        assert_string_equal(c->target, ls->configs[i].target);
    }
    drift_matrix_spec_free(ls);
    drift_matrix_spec_free(s);
}

/* --full: 3 hardware x 4 precision x 3 framework crossed per model (35
 * levels besides the baseline: 105 with three models), whole suites with
 * long context; a GPU adds one configuration per precision and model. */
static void test_design_full_gpu(void **state) {
    (void)state;
    drift_matrix_spec *s = design(MODELS, 2, 1, -1, 128, 1, 1, NULL);
    assert_string_equal(s->name, "driftbench lab --full");
    assert_int_equal(s->n_configs, 2 + 2 * 35 + 2 * 2);
    assert_int_equal(s->n_suites, 5);
    assert_string_equal(s->suites[0], "builtin:math");
    assert_string_equal(s->suites[4], "builtin:long");
    assert_non_null(find_config(s, "b/avx512/w8a8-int8/trtllm"));
    assert_null(find_config(s, "b/avx2/w16a16/vllm")); /* the baseline is base@b */
    drift_matrix_spec_free(s);
    drift_lab_model three[3] = {{"/m/a.gguf", "a"}, {"/m/b.gguf", "b"}, {"/m/c.gguf", "c"}};
    s = design(three, 3, 1, -1, 128, 1, 1, NULL);
    size_t levels = 0;
    for (size_t i = 0; i < s->n_configs; i++) levels += drift_lab_label_role(s->configs[i].label) == DRIFT_LAB_ROLE_LEVEL;
    assert_int_equal(levels, 105);
    drift_matrix_spec_free(s);

    s = design(MODELS, 1, 1, -1, 128, 1, 1, "h200");
    assert_int_equal(s->n_configs, 1 + 35 + 4 + 2);
    const drift_matrix_config *c = find_config(s, "a/h200/w8a8-fp8/vllm");
    assert_non_null(c);
    assert_string_equal(c->target, "embedded:/m/a.gguf?precision=w8a8-fp8&framework=vllm&backend=cuda&threads=1");
    drift_matrix_spec_free(s);

    s = design(MODELS, 2, 0, -1, 32, 1, 1, "h200");
    assert_int_equal(s->n_configs, 2 + 24 + 2 + 4);
    assert_non_null(find_config(s, "b/h200/w16a16/vllm"));
    drift_matrix_spec_free(s);
}

/* Model paths: relative to the working directory when under it. */
static void test_portable_path(void **state) {
    (void)state;
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char abs[4200];
    snprintf(abs, sizeof abs, "%s/models/x.gguf", cwd);
    char *p = drift_lab_portable_path(abs);
    assert_string_equal(p, "models/x.gguf");
    free(p);
    p = drift_lab_portable_path("/elsewhere-not-under-cwd/x.gguf");
    assert_string_equal(p, "/elsewhere-not-under-cwd/x.gguf");
    free(p);
    snprintf(abs, sizeof abs, "%sx/y.gguf", cwd); /* a sibling whose name starts like cwd */
    p = drift_lab_portable_path(abs);
    assert_string_equal(p, abs);
    free(p);
}

/* The size stated before the run: roles, levels, pairs and what they resolve. */
static void test_design_size(void **state) {
    (void)state;
    drift_lab_study st;
    memset(&st, 0, sizeof st);
    st.spec = design(MODELS, 2, 0, 3, 12, 1, 1, NULL);
    char *lj = drift_lab_design_long_json(MODELS, 2, 3, 12, 1);
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(lj, strlen(lj), "matrix_long.json", &st.long_spec, &err), DRIFT_OK);
    free(lj);
    drift_lab_plan p;
    memset(&p, 0, sizeof p);
    p.n_suites = 2;
    snprintf(p.suites[0].name, sizeof p.suites[0].name, "math");
    p.suites[0].n = 3;
    snprintf(p.suites[1].name, sizeof p.suites[1].name, "code");
    p.suites[1].n = 5;
    snprintf(p.long_suite.name, sizeof p.long_suite.name, "long_context");
    p.long_suite.n = 7;
    drift_lab_design_size d;
    drift_lab_design_size_of(&st, &p, &d);
    assert_int_equal(d.levels, 24);
    assert_int_equal(d.bases, 2);
    assert_int_equal(d.aa, 2);
    assert_int_equal(d.ref, 2);
    assert_int_equal(d.n_model, 2);
    assert_int_equal(d.n_hardware, 3);
    assert_int_equal(d.n_precision, 3);
    assert_int_equal(d.n_framework, 3);
    assert_int_equal(d.n_wl, 3);
    assert_int_equal(d.wl[0].pairs, 72);
    assert_int_equal(d.wl[1].pairs, 120);
    assert_string_equal(d.wl[2].name, "long_context");
    assert_int_equal(d.wl[2].configs, 4);
    assert_int_equal(d.wl[2].pairs, 28);
    /* 0 of n: Wilson's upper end z^2 / (n + z^2) */
    const double z2 = 1.959963984540054 * 1.959963984540054;
    assert_true(fabs(d.wl[0].resolve_pairs - z2 / (72 + z2)) < TOL);
    assert_true(fabs(d.wl[0].resolve_prompts - z2 / (3 + z2)) < TOL);
    /* 256 pairs tell 0 from the paper's 1.55% long-context rate, 250 do not quite reach 1.5% */
    assert_true(drift_lab_resolvable(256) < 0.015);
    assert_true(drift_lab_resolvable(250) > 0.015);
    assert_true(drift_lab_resolvable(0) == 1);
    drift_matrix_spec_free(st.spec);
    drift_matrix_spec_free(st.long_spec);
}

static void touch(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
}

/* Models: *.gguf sorted, "-fragile-" ones first, names made safe for
 * labels; --quick keeps three. */
static void test_models_find(void **state) {
    (void)state;
    char dir[] = "/tmp/drift_test_lab_XXXXXX";
    assert_non_null(mkdtemp(dir));
    touch(dir, "c.gguf");
    touch(dir, "a,x=1.gguf");
    touch(dir, "b.gguf");
    touch(dir, "z-fragile-1.gguf");
    touch(dir, "notes.txt");
    drift_lab_opts o;
    drift_lab_opts_default(&o);
    assert_int_equal(o.threads, 1);
    o.models_dir = dir;
    drift_lab_study s;
    memset(&s, 0, sizeof s);
    drift_error err = {0};
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_OK);
    assert_int_equal(s.n_found, 4);
    assert_int_equal(s.n_models, 3);
    assert_int_equal(s.n_fragile, 1);
    assert_int_equal(s.fixtures, 0);
    assert_string_equal(s.models[0].name, "z-fragile-1");
    assert_string_equal(s.models[1].name, "a_x_1");
    assert_string_equal(s.models[2].name, "b");
    assert_non_null(strstr(s.models[2].path, "/b.gguf"));
    assert_int_equal(s.max_tokens, DRIFT_LAB_QUICK_TOKENS);
    /* --quick: the stochastic leg samples the main leg's math prompts, no more */
    assert_int_equal(s.stoch_prompts, DRIFT_LAB_STOCH_PROMPTS < DRIFT_LAB_QUICK_MATH ? DRIFT_LAB_STOCH_PROMPTS : DRIFT_LAB_QUICK_MATH);
    drift_lab_study_clear(&s);

    o.full = 1;
    o.limit = 5;
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_OK);
    assert_int_equal(s.n_models, 3); /* --full too: the paper's three models */
    assert_int_equal(s.n_found, 4);
    assert_int_equal(s.max_tokens, DRIFT_LAB_FULL_TOKENS);
    assert_int_equal(s.stoch_prompts, 5);
    drift_lab_study_clear(&s);

    char p[512];
    const char *names[] = {"a,x=1.gguf", "b.gguf", "c.gguf", "z-fragile-1.gguf", "notes.txt"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_ERR_NOT_FOUND);
    snprintf(p, sizeof p, "no *.gguf model in %s", dir);
    assert_string_equal(err.msg, p);
    drift_lab_study_clear(&s);
    rmdir(dir);
}

/* a = prefill / tokens; d = (generate - prefill) / (G - 1); b from the long
 * prefill beyond its linear part. */
static void test_fit_solve(void **state) {
    (void)state;
    drift_lab_timing t = {.prefill_s = 0.01, .generate_s = 0.04, .long_s = 0.3,
                          .short_tokens = 20, .long_tokens = 200, .max_tokens = 11};
    drift_lab_fit f;
    drift_error err = {0};
    assert_int_equal(drift_lab_fit_solve(&t, &f, &err), DRIFT_OK);
    assert_float_equal(f.a, 5e-4, TOL);
    assert_float_equal(f.d, 3e-3, TOL);          /* 0.03 s over 10 more tokens */
    assert_float_equal(f.b, 5e-6, TOL);          /* (0.3 - 5e-4 * 200) / 200^2 */
    /* one new token: decode priced as prefill */
    t.max_tokens = 1;
    assert_int_equal(drift_lab_fit_solve(&t, &f, &err), DRIFT_OK);
    assert_float_equal(f.d, f.a, TOL);
    /* noise: generation faster than prefill, long prefill below its linear part */
    t.max_tokens = 11;
    t.generate_s = 0.005;
    t.long_s = 0.05;
    assert_int_equal(drift_lab_fit_solve(&t, &f, &err), DRIFT_OK);
    assert_float_equal(f.d, 0, TOL);
    assert_float_equal(f.b, 0, TOL);
    /* a long piece no longer than the short prompt: no attention term */
    t.long_s = 0.3;
    t.long_tokens = 20;
    assert_int_equal(drift_lab_fit_solve(&t, &f, &err), DRIFT_OK);
    assert_float_equal(f.b, 0, TOL);
    t.prefill_s = 0;
    assert_int_equal(drift_lab_fit_solve(&t, &f, &err), DRIFT_ERR_INVALID);
}

static const drift_lab_cost COST = {
    .cpu = {.a = 1e-3, .b = 1e-6, .d = 2e-3},
    .ref = {.a = 4e-3, .b = 0, .d = 8e-3},
    .tokens_per_char = 0.25,
    .long_tokens_per_char = 0.5,
};

/* Two prompts of 100 and 300 characters = 25 and 75 tokens, 10 new tokens:
 * per request a*P + b*P^2 + G*(d + 2*b*P) =
 *   25: 0.025 + 0.000625 + 10*(0.002 + 0.00005) = 0.046125
 *   75: 0.075 + 0.005625 + 10*(0.002 + 0.00015) = 0.102125   sum 0.14825 */
static void test_suite_seconds(void **state) {
    (void)state;
    drift_lab_suite_size m = {"math", 2, 100 + 300, 100 * 100 + 300 * 300};
    assert_float_equal(drift_lab_suite_seconds(&COST, &m, 10, 1, 0), 0.14825, TOL);
    assert_float_equal(drift_lab_suite_seconds(&COST, &m, 10, 3, 0), 3 * 0.14825, TOL);
    assert_float_equal(drift_lab_suite_seconds(&COST, &m, 10, 0, 0), 0.14825, TOL);
    /* ref: 4e-3 * 100 tokens + 10 * 8e-3 * 2 prompts */
    assert_float_equal(drift_lab_suite_seconds(&COST, &m, 10, 1, 1), 0.56, TOL);
    /* long_context prices its characters at 0.5 tokens: one of 1000 = 500 tokens
     *   0.5 + 1e-6 * 250000 + 10 * (0.002 + 2e-6 * 500) = 0.78 */
    drift_lab_suite_size l = {"long_context", 1, 1000, 1000 * 1000};
    assert_float_equal(drift_lab_suite_seconds(&COST, &l, 10, 1, 0), 0.78, TOL);
}

/* The estimate over a 1-model quick design (ref + 8 profiles), one profile
 * stored already:
 *   chat (one prompt of 200 chars = 50 tokens): cpu 0.05 + 0.0025 + 10 * 0.0021 = 0.0735,
 *                                              ref 0.2 + 0.08 = 0.28
 *   ref config: 0.56 + 0.28 = 0.84; 7 cpu configs: 7 * (0.14825 + 0.0735) = 1.55225
 *   stochastic: math scaled to 4 prompts (c1 800, c2 200000, 200 tokens):
 *     0.2 + 0.0125 + 10 * (0.008 + 0.0004) = 0.2965, x 5 replicates x 3 runs = 4.4475
 *   the long spec (ref, f32, fp8, int4 of the model; f32's stored): ref 2.08 + 2 * 0.78 = 3.64
 *   gen_s = 0.84 + 1.55225 + 4.4475 + 3.64; wall over 2 jobs: half */
static void test_plan_apply(void **state) {
    (void)state;
    drift_matrix_spec *s = design(MODELS, 1, 0, -1, 10, 0, 1, NULL);
    /* base@a, 14 levels, aa@a, ref@a */
    assert_int_equal(s->n_configs, 17);
    assert_string_equal(s->configs[16].label, "ref@a");
    char *lj = drift_lab_design_long_json(MODELS, 1, -1, 10, 1);
    assert_non_null(lj);
    drift_matrix_spec *ls = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(lj, strlen(lj), "matrix_long.json", &ls, &err), DRIFT_OK);
    free(lj);
    assert_int_equal(ls->n_configs, 5);
    assert_string_equal(ls->suites[0], "builtin:long?n=16");
    assert_string_equal(ls->configs[0].label, "base@a");
    assert_string_equal(ls->configs[1].label, "a/avx2/w8a8-fp8/vllm");
    assert_string_equal(ls->configs[2].label, "a/avx2/w4a16-mxfp4/vllm");
    assert_string_equal(ls->configs[3].label, "a/avx2/w16a16/sglang");
    assert_string_equal(ls->configs[4].label, "a/avx2/w16a16/trtllm");
    unsigned char done[17] = {0}, long_done[5] = {0, 1, 0, 0, 0};
    done[1] = 1;
    drift_lab_plan p;
    memset(&p, 0, sizeof p);
    p.n_suites = 2;
    p.suites[0] = (drift_lab_suite_size){"math", 2, 400, 100000};
    p.suites[1] = (drift_lab_suite_size){"chat", 1, 200, 40000};
    p.n_configs = 17;
    p.done = done;
    p.max_tokens = 10;
    p.stoch_prompts = 4;
    p.stoch_replicates = 5;
    p.cost = COST;
    p.jobs = 2;
    p.long_spec = ls;
    p.long_done = long_done;
    p.long_todo = 4;
    p.long_suite = (drift_lab_suite_size){"long_context", 1, 1000, 1000000};
    drift_lab_plan_apply(&p, s);
    /* 15 cpu configurations left at 0.22175 s, ref 0.84, 4 long runs at 0.78, the stochastic leg 5.93 */
    assert_float_equal(p.gen_s, 15 * 0.22175 + 0.84 + 4 * 0.78 + 5.93, 1e-9);
    assert_float_equal(p.long_s, 4 * 0.78, 1e-9);
    assert_float_equal(p.stoch_s, 5.93, 1e-9); /* 4 runs x 1.4825 s */
    assert_float_equal(p.wall_s, p.gen_s / 2, 1e-9);
    /* per configuration: the main spec's suites, or the long spec's */
    assert_float_equal(drift_lab_plan_config_seconds(&p, s, 0), 0.14825 + 0.0735, 1e-9);
    assert_float_equal(drift_lab_plan_config_seconds(&p, s, 1), 0, TOL);
    assert_float_equal(drift_lab_plan_config_seconds(&p, s, 16), 0.84, 1e-9);
    assert_float_equal(drift_lab_plan_config_seconds(&p, ls, 0), 0.78, 1e-9);
    assert_float_equal(drift_lab_plan_config_seconds(&p, ls, 1), 0, TOL);
    assert_float_equal(drift_lab_plan_config_seconds(&p, ls, 4), 0.78, 1e-9);
    /* a hardware level costs its measured factor */
    p.cost.n_hw = 1;
    snprintf(p.cost.hw_name[0], sizeof p.cost.hw_name[0], "sse2");
    p.cost.hw_factor[0] = 2.5;
    size_t sse2 = 0;
    for (size_t i = 0; i < s->n_configs; i++)
        if (strstr(s->configs[i].label, "/sse2/")) {
            assert_float_equal(drift_lab_cost_factor(&p.cost, &s->configs[i]), 2.5, TOL);
            assert_float_equal(drift_lab_plan_config_seconds(&p, s, i), 2.5 * (0.14825 + 0.0735), 1e-9);
            sse2++;
        }
    assert_int_equal(sse2, 3);
    assert_float_equal(drift_lab_cost_factor(&p.cost, &s->configs[0]), 1, TOL);
    drift_lab_plan_apply(&p, s);
    assert_float_equal(p.gen_s, 15 * 0.22175 + 3 * 1.5 * 0.22175 + 0.84 + 4 * 0.78 + 5.93, 1e-9);
    p.cost.n_hw = 0;

    /* long_context in the matrix counts in long_s too (nothing stored, no math:
     * no stochastic leg, no long spec): 16 cpu configs at 0.78, the ref one at 2.08 */
    memset(done, 0, sizeof done);
    p.n_suites = 1;
    p.suites[0] = p.long_suite;
    p.long_spec = NULL;
    p.jobs = 0;
    drift_lab_plan_apply(&p, s);
    assert_float_equal(p.gen_s, 16 * 0.78 + 2.08, 1e-9);
    assert_float_equal(p.long_s, 16 * 0.78 + 2.08, 1e-9);
    assert_float_equal(p.wall_s, 16 * 0.78 + 2.08, 1e-9);
    drift_matrix_spec_free(ls);
    drift_matrix_spec_free(s);
}

/* The size from the built-in suites without a store: every configuration to
 * run, the first prompt kept for the calibration; an estimate with nothing
 * to run measures nothing. */
static void test_plan_size(void **state) {
    (void)state;
    drift_lab_study st;
    memset(&st, 0, sizeof st);
    drift_lab_opts_default(&st.opts);
    st.stoch_prompts = 3;
    st.spec = design(MODELS, 2, 0, 3, 12, 0, 1, NULL);
    drift_lab_plan p;
    drift_error err = {0};
    assert_int_equal(drift_lab_plan_size(&st, NULL, &p, &err), DRIFT_OK);
    assert_int_equal(p.n_configs, 30); /* 2 baselines, 24 levels, 2 A/A, 2 ref */
    assert_int_equal(p.todo, 30);
    assert_int_equal(p.n_suites, 3);
    assert_string_equal(p.suites[0].name, "math");
    assert_string_equal(p.suites[1].name, "code");
    assert_string_equal(p.suites[2].name, "chat");
    assert_int_equal(p.per_config, 9);
    assert_int_equal(p.max_tokens, 12);
    assert_int_equal(p.stoch_prompts, 3);
    assert_int_equal(p.stoch_replicates, 5);
    assert_non_null(p.first_prompt);
    /* the characters are those of the rendered prompts */
    drift_lab_suite_size m;
    char *first = NULL;
    assert_int_equal(drift_lab_suite_size_of("builtin:math?n=5", 3, &m, &first, &err), DRIFT_OK);
    assert_int_equal(m.n, 3);
    assert_string_equal(first, p.first_prompt);
    assert_float_equal(m.c1, p.suites[0].c1, TOL);
    assert_float_equal(m.c2, p.suites[0].c2, TOL);
    assert_true(m.c1 >= (double)strlen(first) && m.c2 * 3 >= m.c1 * m.c1);
    free(first);
    p.todo = 0;
    assert_int_equal(drift_lab_plan_estimate(&st, &p, &err), DRIFT_OK);
    assert_float_equal(p.gen_s, 0, TOL);
    drift_lab_plan_clear(&p);
    assert_null(p.done);
    drift_lab_study_clear(&st);
}

/* Removes store NAME (with its WAL files) and the temporary directory. */
static void remove_store(const char *name) {
    char p[512], side[600];
    db_path(p, sizeof p, name);
    unlink(p);
    snprintf(side, sizeof side, "%s-wal", p);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", p);
    unlink(side);
    rmdir(tmpdir);
}

/* The stochastic leg: its runs, and its comparison on known labels. */
static void test_stochastic(void **state) {
    (void)state;
    drift_lab_study s;
    memset(&s, 0, sizeof s);
    drift_lab_opts_default(&s.opts);
    s.opts.threads = 2;
    s.stoch_prompts = 10;
    s.max_tokens = 12;
    s.models[0].path = strdup("/m/a.gguf");
    s.models[0].name = strdup("a");
    s.n_models = 1;
    drift_lab_stochastic x;
    drift_lab_stochastic_design(&s, &x);
    /* the baseline against w4a16-mxfp4, the same targets as the matrix's runs of the pair */
    assert_string_equal(x.label_base, "stochastic/a/w16a16");
    assert_string_equal(x.label_alt, "stochastic/a/w4a16-mxfp4");
    assert_string_equal(x.label_null_base, "stochastic/a/w16a16-null");
    assert_string_equal(x.det_base, "base@a");
    assert_string_equal(x.det_alt, "a/avx2/w4a16-mxfp4/vllm");
    assert_string_equal(x.pair, "w16a16 -> w4a16-mxfp4");
    assert_string_equal(x.target_base, "embedded:/m/a.gguf?precision=w16a16&framework=vllm&hardware=avx2&threads=2");
    assert_string_equal(x.target_alt,
                        "embedded:/m/a.gguf?precision=w4a16-mxfp4&framework=vllm&hardware=avx2&threads=2");
    assert_string_equal(x.suite, "builtin:math?n=10");
    assert_int_equal(x.replicates, 5);
    assert_float_equal(x.temperature, 0.7, TOL);
    assert_int_equal(x.max_tokens, 12);
    drift_lab_study_clear(&s);

    make_tmpdir();
    drift_store *st = open_store("lab.db");
    drift_error err = {0};
    /* the stochastic runs missing: an error */
    assert_int_not_equal(drift_lab_stochastic_compare(st, &x, &err), DRIFT_OK);
    const char *cfg = "{\"model\":\"a\"}";
    add_run(st, x.label_base, "t", cfg, 0x0);
    add_run(st, x.label_alt, "t", cfg, 0x3);
    /* no deterministic pair: said why, no ratio */
    assert_int_equal(drift_lab_stochastic_compare(st, &x, &err), DRIFT_OK);
    assert_int_equal(x.det_ok, 0);
    assert_true(x.det_reason[0] != 0);
    assert_true(isnan(x.ratio));
    /* deterministic pair: 2 of 10 prompts flip; one replicate each, so no
     * expected rate and no ratio */
    add_run(st, x.det_base, "t", cfg, 0x1);
    add_run(st, x.det_alt, "t", cfg, 0x7);
    assert_int_equal(drift_lab_stochastic_compare(st, &x, &err), DRIFT_OK);
    assert_int_equal(x.det_ok, 1);
    assert_int_equal(x.det_n, 10);
    assert_float_equal(x.det_flip_rate, 0.2, TOL);
    assert_true(isnan(x.expected_flip_rate));
    assert_true(isnan(x.ratio));
    drift_store_close(st);
    remove_store("lab.db");
}

typedef struct events {
    int run_begin, run_end, items;
    size_t last_done;
} events;

static void count_events(void *user, const drift_progress *p) {
    events *e = user;
    if (!strcmp(p->stage, "run")) {
        e->run_begin += p->event == DRIFT_PROGRESS_BEGIN;
        e->run_end += p->event == DRIFT_PROGRESS_END;
    } else if (!strcmp(p->stage, "lab") && p->event == DRIFT_PROGRESS_ITEM) {
        const drift_lab_stochastic_summary *s = p->summary;
        e->items++;
        e->last_done = s->done;
        assert_int_equal(p->total, 4);
        assert_string_equal(p->label, s->label);
    }
}

/* The leg's four runs (f32, int4, each again at the null seed) on the tiny fixture (2
 * math prompts x 5 replicates, 4 new tokens): stored, scored, compared
 * without a deterministic pair (so no null figures, said why); run again,
 * nothing is asked. */
static void test_stochastic_run(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    if (!src) src = ".";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tests/data/models", src);
    drift_lab_opts o;
    drift_lab_opts_default(&o);
    o.models_dir = dir;
    o.limit = 2;
    o.max_tokens = 4;
    drift_lab_study s;
    memset(&s, 0, sizeof s);
    drift_error err = {0};
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_OK);
    drift_lab_stochastic x;
    drift_lab_stochastic_design(&s, &x);
    assert_string_equal(x.suite, "builtin:math?n=2");
    assert_int_equal(x.max_tokens, 4);

    make_tmpdir();
    drift_store *st = open_store("stoch.db");
    drift_lab_stochastic_opts so;
    drift_lab_stochastic_opts_default(&so);
    assert_int_equal(so.concurrency, 8);
    events ev = {0};
    so.progress = count_events;
    so.progress_user = &ev;
    drift_lab_stochastic_summary sum;
    assert_int_equal(drift_lab_stochastic_run(st, &x, &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.done, 4);
    assert_string_equal(sum.label, x.label_null_alt);
    assert_int_equal(x.null_seed, DRIFT_LAB_STOCH_NULL_SEED);
    assert_int_equal(sum.run.requested, 2 * 5);
    assert_int_equal(sum.run.answers + sum.run.errors, 2 * 5);
    assert_int_equal(sum.score.scored[DRIFT_WL_MATH] + sum.score.eval_errors[DRIFT_WL_MATH], sum.run.answers);
    assert_int_equal(ev.run_begin, 4);
    assert_int_equal(ev.run_end, 4);
    assert_int_equal(ev.items, 4);
    assert_int_equal(ev.last_done, 4);
    assert_int_equal(drift_lab_stochastic_compare(st, &x, &err), DRIFT_OK);
    assert_int_equal(x.det_ok, 0);
    assert_true(isnan(x.ratio));
    assert_int_equal(x.null_ok, 0);
    assert_true(x.null_reason[0] != 0);
    if (sum.run.answers == 10) assert_false(isnan(x.expected_flip_rate));
    /* resumed: nothing left to ask or score */
    assert_int_equal(drift_lab_stochastic_run(st, &x, &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.run.requested, 0);
    assert_int_equal(sum.score.scored[DRIFT_WL_MATH], 0);
    drift_store_close(st);
    drift_lab_study_clear(&s);
    remove_store("stoch.db");
}

/* drift_lab_run's phases as the caller sees them: their order, the
 * matrix's own events in between, a stop asked after one of them. */
typedef struct phases {
    drift_lab_phase seen[64];
    size_t n;
    int matrix_events;
    drift_lab_phase stop_after;       /* NONE: never stop */
} phases;

static void record_phase(void *user, const drift_progress *p) {
    phases *ph = user;
    if (!strcmp(p->stage, "matrix")) ph->matrix_events++;
    if (strcmp(p->stage, "lab") || p->event != DRIFT_PROGRESS_ITEM || ph->n == 64) return;
    const drift_lab_result *r = p->summary;
    assert_string_equal(p->label, drift_lab_phase_name(r->phase));
    ph->seen[ph->n++] = r->phase;
}

static int stop_phase(void *user) {
    const phases *ph = user;
    return ph->stop_after != DRIFT_LAB_PHASE_NONE && ph->n && ph->seen[ph->n - 1] == ph->stop_after;
}

static void lab_run_opts(drift_lab_opts *o, char *models, size_t mcap, char *db, size_t dcap, phases *ph) {
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(models, mcap, "%s/tests/data/models", src ? src : ".");
    db_path(db, dcap, "lab.db");
    drift_lab_opts_default(o);
    o->models_dir = models;
    o->limit = 1;
    o->max_tokens = 2;
    o->jobs = 1;
    o->db = db;
    o->progress = record_phase;
    o->progress_user = ph;
    o->cancel = stop_phase;
    o->cancel_user = ph;
}

/* The whole study on the fixtures (1 prompt per suite, 2 new tokens): a dry
 * run stops after the estimate and makes no store; a stop asked after the
 * design is DRIFT_ERR_CANCELLED; the run reports every phase in order,
 * passes the matrix's events through and leaves a flip table, its
 * analyses, the stochastic comparison and the cut answers in the result,
 * which the note and the summary render. */
static void test_lab_run(void **state) {
    (void)state;
    make_tmpdir();
    char models[512], db[512];
    drift_lab_opts o;
    phases ph;
    memset(&ph, 0, sizeof ph);
    lab_run_opts(&o, models, sizeof models, db, sizeof db, &ph);
    drift_lab_result *r = calloc(1, sizeof *r);
    assert_non_null(r);
    drift_error err = {0};

    o.dry_run = 1;
    assert_int_equal(drift_lab_run(&o, r, &err), DRIFT_OK);
    assert_int_equal(r->dry_run, 1);
    assert_int_equal(r->phase, DRIFT_LAB_PHASE_PLANNED);
    assert_null(r->store);
    assert_int_equal(access(db, F_OK), -1);
    assert_true(r->jobs == 1);
    drift_lab_result_clear(r);

    o.dry_run = 0;
    memset(&ph, 0, sizeof ph);
    ph.stop_after = DRIFT_LAB_PHASE_DESIGN;
    assert_int_equal(drift_lab_run(&o, r, &err), DRIFT_ERR_CANCELLED);
    assert_int_equal(r->phase, DRIFT_LAB_PHASE_DESIGN);
    assert_non_null(r->study.spec_json);
    drift_lab_result_clear(r);

    memset(&ph, 0, sizeof ph);
    assert_int_equal(drift_lab_run(&o, r, &err), DRIFT_OK);
    const drift_lab_phase want[] = {DRIFT_LAB_PHASE_MODELS,    DRIFT_LAB_PHASE_SAFETY,    DRIFT_LAB_PHASE_DESIGN,
                                    DRIFT_LAB_PHASE_SIZE,      DRIFT_LAB_PHASE_ESTIMATE,  DRIFT_LAB_PHASE_PLANNED,
                                    DRIFT_LAB_PHASE_LEG_BEGIN, DRIFT_LAB_PHASE_LEG_END,   DRIFT_LAB_PHASE_LEG_BEGIN,
                                    DRIFT_LAB_PHASE_LEG_END,   DRIFT_LAB_PHASE_STOCHASTIC, DRIFT_LAB_PHASE_COMPARED,
                                    DRIFT_LAB_PHASE_CUTS,      DRIFT_LAB_PHASE_DONE};
    assert_int_equal(ph.n, sizeof want / sizeof *want);
    for (size_t i = 0; i < ph.n; i++) assert_int_equal(ph.seen[i], want[i]);
    assert_true(ph.matrix_events > 0);
    assert_non_null(r->store);
    assert_int_equal(r->main.configs, r->study.spec->n_configs);
    assert_int_equal(r->leg, DRIFT_LAB_LEG_LONG);
    assert_int_equal(r->stoch_ran, 1);
    assert_int_equal(r->n_stoch_scores, 4);
    assert_non_null(r->table);
    assert_true(r->table->n_rows > 0);
    /* the table holds the axes' levels only; the controls are apart: the
     * A/A runs flip nothing, each model has a ref row */
    for (size_t i = 0; i < r->table->n_rows; i++)
        assert_int_equal(drift_lab_label_role(r->table->rows[i].experiment_id), DRIFT_LAB_ROLE_LEVEL);
    const drift_lab_findings *f = &r->findings;
    assert_int_equal(f->computed, 1);
    assert_int_equal(f->aa_runs, r->study.n_models);
    assert_int_equal(f->aa_flips, 0);
    assert_true(f->aa_sdr_max <= DRIFT_LAB_AA_SDR_TOL);
    size_t refs = 0;
    for (size_t k = 0; k < f->n_controls; k++) refs += f->controls[k].role == DRIFT_LAB_ROLE_REF;
    assert_int_equal(refs, r->study.n_models);
    /* the pooled statistics are over the same pairs as the table's rows */
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        long long flips = 0, pairs = 0;
        for (size_t i = 0; i < r->table->n_rows; i++)
            if (!strcmp(r->table->rows[i].dims[DRIFT_DIM_WORKLOAD], drift_workload_name((drift_workload)w))) {
                flips += r->table->rows[i].num_flips;
                pairs += r->table->rows[i].num_comparisons;
            }
        if (!pairs) continue;
        assert_int_equal(f->wl[w].present, 1);
        assert_int_equal(f->wl[w].flips, flips);
        assert_int_equal(f->wl[w].n_pairs, pairs);
        if (f->wl[w].boot_ok) assert_float_equal(f->wl[w].boot.flip.est, (double)flips / (double)pairs, 1e-12);
        /* the baseline's answers carry logprobs: every pair has a risk (none when no token had two alternatives) */
        assert_true(f->wl[w].risk_n <= (size_t)pairs);
    }
    assert_int_equal(f->desc_ok, 1); /* every level described by its presets */
    /* the baselines' answer shape: over the base@MODEL runs, the answers and cuts the store counts */
    assert_int_equal(f->shape_ok, 1);
    assert_int_equal(f->shape_runs, r->study.n_models);
    assert_int_equal(f->max_tokens, 2);
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        size_t answers = 0, cut = 0, failed = 0;
        for (size_t m = 0; m < r->study.n_models; m++) {
            char label[300];
            snprintf(label, sizeof label, "base@%s", r->study.models[m].name);
            drift_store_run_counts rc;
            assert_int_equal(drift_store_count_run(r->store, label, &rc, &err), DRIFT_OK);
            answers += rc.answers[w];
            cut += rc.cut[w];
            failed += rc.errors[w];
        }
        const drift_answer_shape *x = &f->shape[w];
        assert_int_equal(x->answers, answers);
        assert_int_equal(x->cut, cut);
        assert_int_equal(x->failed, failed);
        assert_int_equal(x->no_logprobs, 0); /* the baseline stores its logprobs */
        assert_int_equal(x->with_gap + x->no_gap + x->bad_logprobs, answers);
        if (x->n_len) assert_true(x->len_max <= 2 && x->len_median <= x->len_p90);
    }
    assert_true(f->shape[DRIFT_WL_MATH].answers > 0);
    assert_int_equal(r->cuts.max_tokens, 2);
    assert_true(r->cuts.answers[DRIFT_WL_MATH] > 0);
    assert_true(r->tokens_after > r->tokens_before);
    char *note = NULL, *text = NULL, *html = NULL;
    assert_int_equal(drift_lab_note_render(r, &note, &err), DRIFT_OK);
    assert_int_equal(r->study.fixtures, 0); /* a folder given: its models, whatever they are */
    assert_null(strstr(note, "this report uses the test fixtures"));
    assert_non_null(strstr(note, "Answers cut by the 2-token limit: math "));
    assert_int_equal(drift_lab_result_summary_render(r, &text, &html, &err), DRIFT_OK);
    assert_non_null(strstr(text, "== summary: what this lab found =="));
    assert_non_null(strstr(text, "Answer shape at the baseline"));
    assert_non_null(strstr(html, "<section id=\"summary\">"));
    free(note);
    free(text);
    free(html);
    drift_lab_result_clear(r);
    assert_null(r->store);
    free(r);
    remove_store("lab.db");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_quick), cmocka_unit_test(test_design_full_gpu), cmocka_unit_test(test_portable_path),
        cmocka_unit_test(test_design_size),
        cmocka_unit_test(test_models_find),  cmocka_unit_test(test_fit_solve),
        cmocka_unit_test(test_suite_seconds), cmocka_unit_test(test_plan_apply),
        cmocka_unit_test(test_plan_size),    cmocka_unit_test(test_stochastic),
        cmocka_unit_test(test_stochastic_run), cmocka_unit_test(test_lab_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
