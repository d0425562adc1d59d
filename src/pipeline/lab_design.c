/* lab_design.c - the lab's study design: which models, whether safety can
 * be judged, and the matrix (a spec JSON, so `driftbench matrix` can re-run
 * or shard it; model paths relative to the working directory when the
 * models are under it, so the spec travels with the repository).
 *
 * The baseline of each model is a reduced-precision serving profile as the
 * paper's (FP16 on H100 with vLLM): "base@{model}" = precision=w16a16
 * (bf16 weights, activations, KV cache; f32 accumulation),
 * framework=vllm, hardware=avx2 (the engine's presets, profile.h), with
 * logprobs stored so the report can rank flips by risk. Each level swaps
 * one preset; the axes are what separates serving stacks:
 *   precision  w16a16 w8a8-fp8 w4a16-mxfp4 (--full: + w8a8-int8); w4a16
 *              (int4 g128) is left out: its groups do not divide the rows
 *              of small models (the test fixtures: 64 columns)
 *   framework  vllm sglang trtllm (rounding points, fusion, attention blocks,
 *              split-K)
 *   hardware   avx2 sse2 avx512 (lanes, reduction tree, FMA), and the GPU
 *              (backend=cuda, level = its name) when one is visible
 * --quick crosses framework x precision at the baseline hardware on every
 * model, hardware x precision at the baseline framework on the first model
 * and the hardware levels at the baseline precision on the others; at most
 * three models ("-fragile-" first). --full crosses the three axes on every
 * model (3 x 4 x 3 = 36 per model, 35 besides the baseline: 105 with three
 * models, the paper's count). Three levels on each axis and three models,
 * so PRI can hold each out.
 * Controls, rows against the baseline that are no part of the axes (the
 * report shows them apart): "aa@{model}", the baseline again at another
 * thread count (zero flips by construction: the engine is thread- and
 * batch-invariant), and "ref@{model}", the float64 reference kernels (how
 * far is the baseline from exact).
 * Long context (each prompt a prefill of ~2,000 tokens) runs in --quick on
 * the first model's baseline and four levels only (drift_lab_design_long_json),
 * as a second spec whose runs are the same labels, so its rows join the
 * same flip table; --full runs it on every configuration. */
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "driftbench/install.h"
#include "driftbench/lab.h"
#include "driftbench/profile.h"
#include "pipeline/lab_internal.h"
#include "util/util.h"

void drift_lab_opts_default(drift_lab_opts *o) {
    memset(o, 0, sizeof *o);
    o->limit = -1;
    o->long_prompts = -1;
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

/* See lab.h. */
char *drift_lab_portable_path(const char *abs_path) {
    char cwd[PATH_MAX];
    if (abs_path[0] == '/' && getcwd(cwd, sizeof cwd)) {
        size_t n = strlen(cwd);
        if (n > 1 && !strncmp(abs_path, cwd, n) && abs_path[n] == '/' && abs_path[n + 1]) return util_strdup(abs_path + n + 1);
    }
    return util_strdup(abs_path);
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
            m->path = drift_lab_portable_path(real);
            m->name = util_strndup(base, len);
            for (char *c = m->name; *c; c++)
                if (*c == ',' || *c == '=' || *c == '{' || *c == '}') *c = '_';
            n++;
        }
    }
    globfree(&g);
    return n;
}

/* Records where the study's models came from. */
static void models_from(drift_lab_study *s, const char *dir, const char *from) {
    char real[PATH_MAX];
    snprintf(s->models_dir, sizeof s->models_dir, "%s", realpath(dir, real) ? real : dir);
    s->models_from = from;
}

/* The fixtures: ./tests/data/models, $DRIFT_SOURCE/..., or next to the executable's build dir. */
static size_t find_fixtures(drift_lab_study *s) {
    size_t n = find_models("tests/data/models", s);
    if (n) return models_from(s, "tests/data/models", "test fixtures"), n;
    const char *src = getenv("DRIFT_SOURCE");
    if (src) {
        char d[PATH_MAX];
        snprintf(d, sizeof d, "%s/tests/data/models", src);
        if ((n = find_models(d, s))) return models_from(s, d, "test fixtures"), n;
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
            if ((n = find_models(d, s))) return models_from(s, d, "test fixtures"), n;
        }
    }
    return 0;
}

/* The shipped models: models/ under the data roots (util/datadir.c's
 * order), the test fixtures coming before the source tree's roots (a
 * build-tree binary run from elsewhere gets the fixtures, as before the
 * install rules). 1 with s->fixtures set when the fixtures were taken. */
static size_t find_default_models(drift_lab_study *s) {
    char root[PATH_MAX], d[PATH_MAX + 16];
    const char *from = NULL;
    int fixtures_tried = 0;
    for (int i = 0; !drift_data_root(i, root, sizeof root, &from); i++) {
        if (!fixtures_tried && !strcmp(from, "source tree")) {
            fixtures_tried = 1;
            size_t n = find_fixtures(s);
            if (n) return s->fixtures = 1, n;
        }
        if (!root[0]) continue;
        snprintf(d, sizeof d, "%s/models", root);
        size_t n = find_models(d, s);
        if (n) return models_from(s, d, from), n;
    }
    if (!fixtures_tried) {
        size_t n = find_fixtures(s);
        if (n) return s->fixtures = 1, n;
    }
    return 0;
}

drift_status drift_lab_models_find(drift_lab_study *s, const drift_lab_opts *opts, drift_error *err) {
    s->opts = *opts;
    s->max_tokens = opts->max_tokens > 0 ? opts->max_tokens : opts->full ? DRIFT_LAB_FULL_TOKENS : DRIFT_LAB_QUICK_TOKENS;
    s->stoch_prompts = opts->limit > 0 ? opts->limit : DRIFT_LAB_STOCH_PROMPTS;
    /* the stochastic leg's figures are over the math prompts the main leg's
     * deterministic runs answered too: --quick samples no more than those */
    if (!opts->full && opts->limit <= 0 && s->stoch_prompts > DRIFT_LAB_QUICK_MATH) s->stoch_prompts = DRIFT_LAB_QUICK_MATH;
    if (opts->models_dir) {
        if (!find_models(opts->models_dir, s))
            return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "no *.gguf model in %s", opts->models_dir);
        models_from(s, opts->models_dir, "--models");
    } else if (!find_default_models(s)) {
        return drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                               "no shipped models found (models/ under $DRIFT_DATA_DIR, the working directory, the "
                               "installed datadir %s or the source tree) and no test fixtures (tests/data/models); "
                               "give --models DIR or set DRIFT_DATA_DIR",
                               drift_data_dir_installed());
    }
    s->n_found = s->n_models;
    order_models(s);
    if (s->n_models > DRIFT_LAB_QUICK_MODELS) { /* --full too: the paper's three models */
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

void lab_config_target(char *out, size_t cap, const char *model_path, const char *prec, const char *hw,
                       const char *fw, int threads) {
    snprintf(out, cap, "embedded:%s?precision=%s&framework=%s&hardware=%s&threads=%d", model_path, prec, fw, hw,
             threads);
}

/* ---- the levels ----
 * Each level is an engine preset (profile.h: precision=, framework=,
 * hardware=), named as the preset, so a run records the level's own name;
 * a level is the baseline with one preset swapped. The baseline is listed
 * first in each axis. */
static const char *const hw_quick[] = {LAB_BASE_HARDWARE, "sse2", "avx512"};
static const char *const hw_full[] = {LAB_BASE_HARDWARE, "sse2", "avx512"};
static const char *const prec_quick[] = {LAB_BASE_PRECISION, "w8a8-fp8", "w4a16-mxfp4"};
static const char *const prec_full[] = {LAB_BASE_PRECISION, "w8a8-fp8", "w8a8-int8", "w4a16-mxfp4"};
static const char *const fw_quick[] = {LAB_BASE_FRAMEWORK, "sglang", "trtllm"};
static const char *const fw_full[] = {LAB_BASE_FRAMEWORK, "sglang", "trtllm"};
#define NELEM(a) (sizeof(a) / sizeof *(a))

/* --quick's long-context configurations of the first model (labels of the
 * main spec): precision and framework levels at the baseline hardware */
static const struct {
    const char *prec, *fw;
} long_quick[] = {{"w8a8-fp8", LAB_BASE_FRAMEWORK},
                  {"w4a16-mxfp4", LAB_BASE_FRAMEWORK},
                  {LAB_BASE_PRECISION, "sglang"},
                  {LAB_BASE_PRECISION, "trtllm"}};

void drift_lab_levels(int full, drift_lab_levels_t *out) {
    memset(out, 0, sizeof *out);
    out->hardware = full ? hw_full : hw_quick;
    out->n_hardware = full ? NELEM(hw_full) : NELEM(hw_quick);
    out->precision = full ? prec_full : prec_quick;
    out->n_precision = full ? NELEM(prec_full) : NELEM(prec_quick);
    out->framework = full ? fw_full : fw_quick;
    out->n_framework = full ? NELEM(fw_full) : NELEM(fw_quick);
}

static void add_config_role(json_t *configs, const char *label, const drift_lab_model *m, const char *hw,
                            const char *prec, const char *fw, int threads) {
    char target[PATH_MAX + 512];
    lab_config_target(target, sizeof target, m->path, prec, hw, fw, threads);
    json_array_append_new(configs, json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", label, "target", target,
                                             "dims", "model", m->name, "hardware", hw, "precision", prec,
                                             "framework", fw));
}

static void add_config(json_t *configs, const drift_lab_model *m, const char *hw, const char *prec, const char *fw,
                       int threads) {
    char label[512];
    snprintf(label, sizeof label, "%s/%s/%s/%s", m->name, hw, prec, fw);
    add_config_role(configs, label, m, hw, prec, fw, threads);
}

/* The ref oracle of model m (float64 reference kernels): a row against the
 * baseline, reported apart from the axes. */
static void add_ref(json_t *configs, const drift_lab_model *m) {
    char label[512], target[PATH_MAX + 64];
    snprintf(label, sizeof label, "ref@%s", m->name);
    snprintf(target, sizeof target, "embedded:%s?profile=ref", m->path);
    json_array_append_new(configs, json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", label, "target", target,
                                             "dims", "model", m->name, "hardware", "ref", "precision", "ref",
                                             "framework", "ref"));
}

/* 1 when (hw, prec, fw) is the baseline's levels. */
static int is_base(const char *hw, const char *prec, const char *fw) {
    return !strcmp(hw, LAB_BASE_HARDWARE) && !strcmp(prec, LAB_BASE_PRECISION) && !strcmp(fw, LAB_BASE_FRAMEWORK);
}

static json_t *decoding(int max_tokens) {
    return json_pack("{s:f, s:i, s:i, s:i}", "temperature", 0.0, "seed", 42, "max_tokens", max_tokens,
                     "baseline_logprobs", DRIFT_LAB_BASE_LOGPROBS);
}

/* The lab's matrix as a spec JSON object (see the top of the file). */
static json_t *build_spec(const drift_lab_model *models, size_t n_models, int full, long limit, int max_tokens,
                          int with_safety, int threads, const char *gpu) {
    json_t *spec = json_object();
    json_object_set_new(spec, "name", json_string(full ? "driftbench lab --full" : "driftbench lab --quick"));
    /* --quick sizes each suite by what it costs; --limit sets every size.
     * Sizes travel in the suite spec ("?n=N"). */
    static const struct {
        const char *name;
        int quick_n;
    } suite_sizes[] = {{"math", DRIFT_LAB_QUICK_MATH},
                       {"code", DRIFT_LAB_QUICK_CODE},
                       {"safety", DRIFT_LAB_QUICK_SAFETY},
                       {"chat", DRIFT_LAB_QUICK_CHAT},
                       {"long", 0}};
    json_t *suites = json_array();
    for (size_t i = 0; i < NELEM(suite_sizes); i++) {
        if (!with_safety && !strcmp(suite_sizes[i].name, "safety")) continue;
        /* --quick runs long context in its own spec on a subset (each of its
         * prompts is a prefill of thousands of tokens) */
        if (!full && !suite_sizes[i].quick_n) continue;
        long n = limit > 0 ? limit : full ? 0 : suite_sizes[i].quick_n;
        char spec_s[64];
        if (n > 0) snprintf(spec_s, sizeof spec_s, "builtin:%s?n=%ld", suite_sizes[i].name, n);
        else snprintf(spec_s, sizeof spec_s, "builtin:%s", suite_sizes[i].name);
        json_array_append_new(suites, json_string(spec_s));
    }
    json_object_set_new(spec, "suites", suites);
    json_object_set_new(spec, "decoding", decoding(max_tokens));
    json_object_set_new(spec, "baseline", json_string("base@{model}"));
    drift_lab_levels_t lv;
    drift_lab_levels(full, &lv);
    json_t *configs = json_array();
    for (size_t m = 0; m < n_models; m++) {
        char label[512];
        snprintf(label, sizeof label, "base@%s", models[m].name);
        add_config_role(configs, label, &models[m], LAB_BASE_HARDWARE, LAB_BASE_PRECISION, LAB_BASE_FRAMEWORK, threads);
    }
    for (size_t m = 0; m < n_models; m++) {
        const drift_lab_model *md = &models[m];
        if (full) {
            /* every axis crossed */
            for (size_t h = 0; h < lv.n_hardware; h++)
                for (size_t p = 0; p < lv.n_precision; p++)
                    for (size_t f = 0; f < lv.n_framework; f++)
                        if (!is_base(lv.hardware[h], lv.precision[p], lv.framework[f]))
                            add_config(configs, md, lv.hardware[h], lv.precision[p], lv.framework[f], threads);
        } else {
            /* framework x precision at the baseline hardware, on every model */
            for (size_t f = 0; f < lv.n_framework; f++)
                for (size_t p = 0; p < lv.n_precision; p++)
                    if (!is_base(LAB_BASE_HARDWARE, lv.precision[p], lv.framework[f]))
                        add_config(configs, md, LAB_BASE_HARDWARE, lv.precision[p], lv.framework[f], threads);
            /* hardware x precision at the baseline framework: crossed on the
             * first model, the hardware levels at the baseline precision on
             * the others (a hardware level costs 2.5-4x a baseline run) */
            for (size_t h = 1; h < lv.n_hardware; h++)
                for (size_t p = 0; p < (m == 0 ? lv.n_precision : 1); p++)
                    add_config(configs, md, lv.hardware[h], lv.precision[p], LAB_BASE_FRAMEWORK, threads);
        }
        /* the GPU, when this build has CUDA and one is visible: hardware
         * level = the device ("h200"), at every precision with the baseline
         * framework */
        if (gpu) {
            char hw[64];
            snprintf(hw, sizeof hw, "%s", gpu);
            for (size_t p = 0; p < (full ? lv.n_precision : 1); p++) {
                char lbl[512], target[PATH_MAX + 512];
                snprintf(lbl, sizeof lbl, "%s/%s/%s/%s", md->name, hw, lv.precision[p], LAB_BASE_FRAMEWORK);
                snprintf(target, sizeof target, "embedded:%s?precision=%s&framework=%s&backend=cuda&threads=%d",
                         md->path, lv.precision[p], LAB_BASE_FRAMEWORK, threads);
                json_array_append_new(configs,
                                      json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", lbl, "target", target,
                                                "dims", "model", md->name, "hardware", hw, "precision",
                                                lv.precision[p], "framework", LAB_BASE_FRAMEWORK));
            }
        }
    }
    /* the controls: the A/A run (the baseline again at another thread
     * count: zero flips by the engine's thread invariance) and the ref
     * oracle (how far the baseline is from exact) */
    for (size_t m = 0; m < n_models; m++) {
        char label[512];
        snprintf(label, sizeof label, "aa@%s", models[m].name);
        add_config_role(configs, label, &models[m], LAB_BASE_HARDWARE, LAB_BASE_PRECISION, LAB_BASE_FRAMEWORK,
                        threads == 2 ? 1 : 2);
        add_ref(configs, &models[m]);
    }
    json_object_set_new(spec, "configs", configs);
    return spec;
}

char *drift_lab_design_long_json(const drift_lab_model *models, size_t n_models, long limit, int max_tokens,
                                 int threads) {
    if (!n_models) return NULL;
    json_t *spec = json_object();
    json_object_set_new(spec, "name", json_string("driftbench lab --quick: long context"));
    char suite[64];
    snprintf(suite, sizeof suite, "builtin:long?n=%ld", limit > 0 ? limit : (long)DRIFT_LAB_QUICK_LONG);
    json_object_set_new(spec, "suites", json_pack("[s]", suite));
    json_object_set_new(spec, "decoding", decoding(max_tokens));
    json_object_set_new(spec, "baseline", json_string("base@{model}"));
    json_t *configs = json_array();
    char label[512];
    snprintf(label, sizeof label, "base@%s", models[0].name);
    add_config_role(configs, label, &models[0], LAB_BASE_HARDWARE, LAB_BASE_PRECISION, LAB_BASE_FRAMEWORK, threads);
    for (size_t i = 0; i < NELEM(long_quick); i++)
        add_config(configs, &models[0], LAB_BASE_HARDWARE, long_quick[i].prec, long_quick[i].fw, threads);
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
        s->long_spec_json = drift_lab_design_long_json(s->models, s->n_models,
                                                       s->opts.long_prompts > 0 ? s->opts.long_prompts : s->opts.limit,
                                                       s->max_tokens, s->opts.threads);
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

/* See lab.h. */
drift_lab_role drift_lab_label_role(const char *label) {
    if (!label) return DRIFT_LAB_ROLE_LEVEL;
    if (!strncmp(label, "base@", 5)) return DRIFT_LAB_ROLE_BASE;
    if (!strncmp(label, "aa@", 3)) return DRIFT_LAB_ROLE_AA;
    if (!strncmp(label, "ref@", 4)) return DRIFT_LAB_ROLE_REF;
    return DRIFT_LAB_ROLE_LEVEL;
}
