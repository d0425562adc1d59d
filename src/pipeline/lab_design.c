/* lab_design.c - the lab's study design: which models, whether safety can
 * be judged, and the matrix (a spec JSON, so `driftbench matrix` can re-run
 * or shard it).
 *
 * Per model the `ref` profile is the baseline ("ref@{model}") and the
 * numeric profiles are the three axes the paper varies:
 *   precision  weight format f32 bf16 fp8 int8 int4 mxfp4 (+ f16 nvfp4 full)
 *   framework  kernel variant: reduction order / split-K / attention algo
 *   hardware   the vector ISA the fast kernels use (auto = best, avx2, ...),
 *              and the GPU (backend=cuda, level = its name, e.g. h200)
 *              when the build has CUDA and a GPU is visible
 * --quick: at most three models, those whose file name holds "-fragile-"
 * first (trained to meet near-ties as real models do), then the others by
 * name; from f32/seq on the best ISA it moves one axis at a time (6
 * precisions, split-K 4, avx2; f32/seq itself keeps the ANOVA design
 * identifiable): 9 runs per model with math 150, all 164 code tasks, safety
 * 100 (with a guard), chat 100 prompts, 128 new tokens. Long context (20
 * prompts, each a prefill of ~2,000 tokens) runs on a subset only: the
 * first model's ref baseline, f32, fp8 and int4 (drift_lab_design_long_json),
 * as a second spec whose runs are the same labels, so its rows join the
 * same flip table. --full crosses everything (3 ISAs x 8 formats x 5 kernel
 * variants) on every model and every suite. */
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "driftbench/lab.h"
#include "driftbench/profile.h"
#include "pipeline/lab_internal.h"
#include "util/util.h"

void drift_lab_opts_default(drift_lab_opts *o) {
    memset(o, 0, sizeof *o);
    o->limit = -1;
    o->max_tokens = -1;
    o->threads = 1;
}

/* 1 when the model's name marks it fragile ("-fragile-"). */
static int is_fragile(const drift_lab_model *m) { return m->name && strstr(m->name, "-fragile-") != NULL; }

/* Stable order: fragile models first, each group in name order (as glob
 * sorted them). */
static void order_models(drift_lab_study *s) {
    drift_lab_model tmp[DRIFT_LAB_MAX_MODELS];
    size_t k = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (size_t i = 0; i < s->n_models; i++)
            if (is_fragile(&s->models[i]) == pass) tmp[k++] = s->models[i];
    memcpy(s->models, tmp, k * sizeof *tmp);
}

/* Appends the models of dir (sorted, as glob sorts) to s, up to the cap. */
static size_t find_models(const char *dir, drift_lab_study *s) {
    char pat[PATH_MAX];
    snprintf(pat, sizeof pat, "%s/*.gguf", dir);
    glob_t g;
    size_t n = 0;
    if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && s->n_models < DRIFT_LAB_MAX_MODELS; i++) {
            char real[PATH_MAX];
            if (!realpath(g.gl_pathv[i], real)) continue;
            const char *base = strrchr(real, '/');
            base = base ? base + 1 : real;
            size_t len = strlen(base) - strlen(".gguf");
            drift_lab_model *m = &s->models[s->n_models++];
            m->path = util_strdup(real);
            m->name = util_strndup(base, len);
            for (char *c = m->name; *c; c++)
                if (*c == ',' || *c == '=' || *c == '{' || *c == '}') *c = '_';
            n++;
        }
    }
    globfree(&g);
    return n;
}

/* The fixtures: ./tests/data/models, $DRIFT_SOURCE/..., or next to the executable's build dir. */
static size_t find_fixtures(drift_lab_study *s) {
    size_t n = find_models("tests/data/models", s);
    if (n) return n;
    const char *src = getenv("DRIFT_SOURCE");
    if (src) {
        char d[PATH_MAX];
        snprintf(d, sizeof d, "%s/tests/data/models", src);
        if ((n = find_models(d, s))) return n;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char d[PATH_MAX + 32];
            snprintf(d, sizeof d, "%s/../tests/data/models", exe);
            if ((n = find_models(d, s))) return n;
        }
    }
    return 0;
}

drift_status drift_lab_models_find(drift_lab_study *s, const drift_lab_opts *opts, drift_error *err) {
    s->opts = *opts;
    s->max_tokens = opts->max_tokens > 0 ? opts->max_tokens : opts->full ? DRIFT_LAB_FULL_TOKENS : DRIFT_LAB_QUICK_TOKENS;
    s->stoch_prompts = opts->limit > 0 ? opts->limit : DRIFT_LAB_STOCH_PROMPTS;
    size_t n = find_models(opts->models_dir ? opts->models_dir : "models", s);
    if (!n) {
        if (opts->models_dir) return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "no *.gguf model in %s", opts->models_dir);
        if (!find_fixtures(s))
            return drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                                   "no shipped models in models/ and no test fixtures (tests/data/models) found; run "
                                   "from the repository root or give --models DIR");
        s->fixtures = 1;
    }
    s->n_found = s->n_models;
    order_models(s);
    if (!opts->full && s->n_models > DRIFT_LAB_QUICK_MODELS) {
        for (size_t i = DRIFT_LAB_QUICK_MODELS; i < s->n_models; i++) {
            free(s->models[i].path);
            free(s->models[i].name);
            s->models[i].path = s->models[i].name = NULL;
        }
        s->n_models = DRIFT_LAB_QUICK_MODELS;
    }
    for (size_t i = 0; i < s->n_models; i++) s->n_fragile += (size_t)is_fragile(&s->models[i]);
    for (size_t i = 0; i < s->n_models; i++)
        if (!s->models[i].path || !s->models[i].name) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

drift_status drift_lab_safety_check(drift_lab_study *s, drift_error *err) {
    drift_guard *g = NULL;
    s->with_safety = 0;
    s->safety_reason[0] = 0;
    if (s->opts.guard_spec) {
        drift_status rc = drift_guard_open(s->opts.guard_spec, &g, err);
        if (rc) return rc;
        drift_guard_close(g);
        s->with_safety = 1;
        return DRIFT_OK;
    }
    drift_error gerr = {0};
    if (drift_guard_open(NULL, &g, &gerr) == DRIFT_OK && g) {
        drift_guard_close(g);
        s->with_safety = 1;
    } else {
        snprintf(s->safety_reason, sizeof s->safety_reason, "%s", gerr.msg[0] ? gerr.msg : "no guard");
    }
    return DRIFT_OK;
}

void lab_config_target(char *out, size_t cap, const char *model_path, const char *prec, const char *hw_spec,
                       const char *fw_spec, int threads) {
    snprintf(out, cap, "embedded:%s?profile=cpu-f32&weights=%s&%s&%s&threads=%d", model_path, prec, hw_spec, fw_spec,
             threads);
}

typedef struct lab_variant {
    const char *name;   /* level name */
    const char *spec;   /* profile keys */
} lab_variant;

static void add_config(json_t *configs, const drift_lab_model *m, const char *hw_name, const char *hw_spec,
                       const char *prec, const char *fw_name, const char *fw_spec, int threads) {
    char label[512], target[PATH_MAX + 512];
    snprintf(label, sizeof label, "%s/%s/%s/%s", m->name, hw_name, prec, fw_name);
    lab_config_target(target, sizeof target, m->path, prec, hw_spec, fw_spec, threads);
    json_array_append_new(configs, json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", label, "target", target,
                                             "dims", "model", m->name, "hardware", hw_name, "precision", prec,
                                             "framework", fw_name));
}

/* The ref baseline of model m. */
static void add_ref(json_t *configs, const drift_lab_model *m) {
    char label[512], target[PATH_MAX + 64];
    snprintf(label, sizeof label, "ref@%s", m->name);
    snprintf(target, sizeof target, "embedded:%s?profile=ref", m->path);
    json_array_append_new(configs, json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", label, "target", target,
                                             "dims", "model", m->name, "hardware", "ref", "precision", "f32",
                                             "framework", "ref"));
}

/* The lab's matrix as a spec JSON object. */
static json_t *build_spec(const drift_lab_model *models, size_t n_models, int full, long limit, int max_tokens,
                          int with_safety, int threads, const char *gpu) {
    static const char *const prec_quick[] = {"f32", "bf16", "fp8", "int8", "int4", "mxfp4"};
    static const char *const prec_full[] = {"f32", "bf16", "f16", "fp8", "int8", "int4", "mxfp4", "nvfp4"};
    static const lab_variant fw_quick[] = {{"seq", "reduce=sequential"}, {"splitk4", "reduce=blocked:4"}};
    static const lab_variant fw_full[] = {{"seq", "reduce=sequential"},
                                          {"pairwise", "reduce=pairwise"},
                                          {"splitk4", "reduce=blocked:4"},
                                          {"online64", "attn=online:64"},
                                          {"fastexp", "exp=fast"}};
    static const lab_variant hw_full[] = {{"cpu-best", "isa=auto"}, {"cpu-avx2", "isa=avx2"}, {"cpu-scalar", "isa=scalar"}};
    json_t *spec = json_object();
    json_object_set_new(spec, "name", json_string(full ? "driftbench lab --full" : "driftbench lab --quick"));
    /* --quick sizes each suite by what it costs (a code answer runs a
     * sandboxed program, a long-context prompt is a long prefill); --limit
     * sets every size. Sizes travel in the suite spec ("?n=N"). */
    static const struct {
        const char *name;
        int quick_n;
    } suite_sizes[] = {{"math", DRIFT_LAB_QUICK_MATH},
                       {"code", DRIFT_LAB_QUICK_CODE},
                       {"safety", DRIFT_LAB_QUICK_SAFETY},
                       {"chat", DRIFT_LAB_QUICK_CHAT},
                       {"long", 0}};
    json_t *suites = json_array();
    for (size_t i = 0; i < sizeof suite_sizes / sizeof suite_sizes[0]; i++) {
        if (!with_safety && !strcmp(suite_sizes[i].name, "safety")) continue;
        /* --quick runs long-context in its own spec on a subset (each of
         * its prompts is a prefill of thousands of tokens) */
        if (!full && !suite_sizes[i].quick_n) continue;
        long n = limit > 0 ? limit : full ? 0 : suite_sizes[i].quick_n;
        char spec_s[64];
        if (n > 0) snprintf(spec_s, sizeof spec_s, "builtin:%s?n=%ld", suite_sizes[i].name, n);
        else snprintf(spec_s, sizeof spec_s, "builtin:%s", suite_sizes[i].name);
        json_array_append_new(suites, json_string(spec_s));
    }
    json_object_set_new(spec, "suites", suites);
    json_object_set_new(spec, "decoding", json_pack("{s:f, s:i, s:i}", "temperature", 0.0, "seed", 42, "max_tokens", max_tokens));
    json_object_set_new(spec, "baseline", json_string("ref@{model}"));
    json_t *configs = json_array();
    for (size_t m = 0; m < n_models; m++) add_ref(configs, &models[m]);
    for (size_t m = 0; m < n_models; m++) {
        if (full) {
            for (size_t h = 0; h < sizeof hw_full / sizeof hw_full[0]; h++)
                for (size_t p = 0; p < sizeof prec_full / sizeof prec_full[0]; p++)
                    for (size_t f = 0; f < sizeof fw_full / sizeof fw_full[0]; f++)
                        add_config(configs, &models[m], hw_full[h].name, hw_full[h].spec, prec_full[p], fw_full[f].name,
                                   fw_full[f].spec, threads);
        } else {
            /* one axis at a time from f32/seq on the best ISA: every
             * precision, one kernel variant, one other ISA */
            for (size_t p = 0; p < sizeof prec_quick / sizeof prec_quick[0]; p++)
                add_config(configs, &models[m], "cpu-best", "isa=auto", prec_quick[p], fw_quick[0].name, fw_quick[0].spec,
                           threads);
            add_config(configs, &models[m], "cpu-best", "isa=auto", "f32", fw_quick[1].name, fw_quick[1].spec, threads);
            add_config(configs, &models[m], "cpu-avx2", "isa=avx2", "f32", "seq", "reduce=sequential", threads);
        }
        /* the GPU, when this build has CUDA and one is visible: hardware level
         * = the device ("h200"); --quick moves only the hardware (f32, the
         * fixed-order kernels), --full crosses it with every precision and
         * both GPU kernel families (DriftBench's, the vendor's) */
        if (gpu) {
            if (full) {
                for (size_t p = 0; p < sizeof prec_full / sizeof prec_full[0]; p++) {
                    add_config(configs, &models[m], gpu, "backend=cuda", prec_full[p], "seq", "gemm=kernel", threads);
                    add_config(configs, &models[m], gpu, "backend=cuda", prec_full[p], "vendor", "gemm=vendor", threads);
                }
            } else {
                add_config(configs, &models[m], gpu, "backend=cuda", "f32", "seq", "gemm=kernel", threads);
            }
        }
    }
    json_object_set_new(spec, "configs", configs);
    return spec;
}

char *drift_lab_design_long_json(const drift_lab_model *models, size_t n_models, long limit, int max_tokens,
                                 int threads) {
    if (!n_models) return NULL;
    static const char *const prec_long[] = {"f32", "fp8", "int4"};
    json_t *spec = json_object();
    json_object_set_new(spec, "name", json_string("driftbench lab --quick: long context"));
    char suite[64];
    snprintf(suite, sizeof suite, "builtin:long?n=%ld", limit > 0 ? limit : (long)DRIFT_LAB_QUICK_LONG);
    json_object_set_new(spec, "suites", json_pack("[s]", suite));
    json_object_set_new(spec, "decoding", json_pack("{s:f, s:i, s:i}", "temperature", 0.0, "seed", 42, "max_tokens", max_tokens));
    json_object_set_new(spec, "baseline", json_string("ref@{model}"));
    json_t *configs = json_array();
    add_ref(configs, &models[0]);
    for (size_t p = 0; p < sizeof prec_long / sizeof prec_long[0]; p++)
        add_config(configs, &models[0], "cpu-best", "isa=auto", prec_long[p], "seq", "reduce=sequential", threads);
    json_object_set_new(spec, "configs", configs);
    char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(spec);
    return text;
}

char *drift_lab_design_json(const drift_lab_model *models, size_t n_models, int full, long limit, int max_tokens,
                            int with_safety, int threads, const char *gpu) {
    json_t *spec = build_spec(models, n_models, full, limit, max_tokens, with_safety, threads, gpu);
    char *text = spec ? json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(spec);
    return text;
}

drift_status drift_lab_design(drift_lab_study *s, const char *spec_name, drift_error *err) {
    if (!s->n_models) return drift_error_set(err, DRIFT_ERR_INVALID, "lab design: no models (drift_lab_models_find first)");
    free(s->embedder);
    s->embedder = NULL;
    if (s->opts.embedder_spec) {
        s->embedder = util_strdup(s->opts.embedder_spec);
    } else {
        /* the first robust model: a fragile one's embeddings would work too,
         * but chat scores should not change with which fragile models exist */
        const drift_lab_model *e = &s->models[0];
        for (size_t i = 0; i < s->n_models; i++)
            if (!is_fragile(&s->models[i])) {
                e = &s->models[i];
                break;
            }
        char emb[PATH_MAX + 64];
        snprintf(emb, sizeof emb, "embedded:%s?profile=cpu-f32&isa=avx2&threads=1", e->path);
        s->embedder = util_strdup(emb);
    }
    if (drift_cuda_device_name(s->gpu, sizeof s->gpu) != 0) s->gpu[0] = 0;
    free(s->spec_json);
    s->spec_json = drift_lab_design_json(s->models, s->n_models, s->opts.full, s->opts.limit, s->max_tokens,
                                         s->with_safety, s->opts.threads, s->gpu[0] ? s->gpu : NULL);
    free(s->long_spec_json);
    s->long_spec_json = NULL;
    if (!s->opts.full)
        s->long_spec_json = drift_lab_design_long_json(s->models, s->n_models, s->opts.limit, s->max_tokens, s->opts.threads);
    if (!s->embedder || !s->spec_json || (!s->opts.full && !s->long_spec_json))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_matrix_spec_free(s->spec);
    drift_matrix_spec_free(s->long_spec);
    s->spec = s->long_spec = NULL;
    drift_status rc = drift_matrix_spec_parse(s->spec_json, strlen(s->spec_json), spec_name ? spec_name : "matrix.json",
                                              &s->spec, err);
    if (!rc && s->long_spec_json)
        rc = drift_matrix_spec_parse(s->long_spec_json, strlen(s->long_spec_json), "matrix_long.json", &s->long_spec, err);
    return rc;
}

void drift_lab_study_clear(drift_lab_study *s) {
    if (!s) return;
    for (size_t i = 0; i < DRIFT_LAB_MAX_MODELS; i++) {
        free(s->models[i].path);
        free(s->models[i].name);
    }
    free(s->embedder);
    free(s->spec_json);
    drift_matrix_spec_free(s->spec);
    free(s->long_spec_json);
    drift_matrix_spec_free(s->long_spec);
    memset(s, 0, sizeof *s);
}
