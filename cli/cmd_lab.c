/* cmd_lab.c - `driftbench lab`: the paper's study on the embedded engine, on
 * a machine without servers or GPUs.
 *
 * 1. models: models/ *.gguf files (or --models DIR); when there are none, the tiny
 *    test fixtures, and the output says their answers are noise.
 * 2. the matrix (written to DIR/matrix.json, so `driftbench matrix` can re-run
 *    or shard it): per model, the `ref` profile as baseline ("ref@{model}")
 *    and the numeric profiles as the three axes the paper varies:
 *      precision  weight format f32 bf16 fp8 int8 int4 mxfp4 (+ f16 nvfp4 full)
 *      framework  kernel variant: reduction order / split-K / attention algo
 *      hardware   the vector ISA the fast kernels use (auto = best, avx2, ...),
 *                 and the GPU (backend=cuda, level = its name, e.g. h200)
 *                 when the build has CUDA and a GPU is visible
 *    --quick: at most two models; from f32/seq on the best ISA it moves one
 *    axis at a time (6 precisions, split-K 4, avx2; f32/seq itself keeps
 *    the ANOVA design identifiable): 9 runs per model with
 *    math 16, code 6, safety 12 (with a guard), chat 12 prompts and 32 new
 *    tokens; long context is left out: its prompts are prefills of 1-3k
 *    tokens; 4 of them on the 9 quick configurations of one model took
 *    391 s (2 cores, load ~5, 2026-11-30: 30-52 s per cpu configuration,
 *    83 s on ref), so ~13 minutes for the 18, against a 5-minute budget;
 *    the output says so with the figure estimated on the machine at hand. --full crosses everything (3 ISAs x 8 formats x 5
 *    kernel variants) on every model and every suite.
 * 2b. before anything runs: the size (configurations x prompts) and an
 *    estimate of the generation time from a cost measured on this machine
 *    (lab_plan); --full on fewer than 8 cores adds a WARNING with how to cut
 *    or shard it (it still runs). --dry-run stops here.
 * 3. run + score every configuration (resumable: DIR/lab.db), with the chat
 *    embedder on the first model with one fixed cpu-f32/avx2 profile (one
 *    judge for every configuration) and the
 *    safety guard given by --guard, else the built-in guard (models/guard/);
 *    when neither can be opened, safety is left out and the output says why.
 * 3b. the stochastic leg: the first model's f32 and int4 configurations at
 *    temperature 0.7 with 5 replicates on math; expected and majority-vote
 *    flip rates, and their ratio to the deterministic figure of the same pair
 *    (the paper's ~0.23x) -> DIR/stochastic.txt. These runs are no rows of
 *    the flip table (their decoding differs from the baseline's).
 * 4. flip table -> DIR/flip_rates.csv, ANOVA -> DIR/anova.txt, PRI held-out
 *    evaluations -> DIR/pri.txt (when there are enough rows), the HTML
 *    report -> DIR/report.html; the summaries are printed too. */
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_matrix.h"
#include "driftbench/analysis.h"
#include "driftbench/eval.h"
#include "driftbench/matrix.h"
#include "driftbench/profile.h"
#include "driftbench/report_html.h"
#include "pipeline.h"
#include "util/util.h"

static const char lab_usage[] =
    "usage: driftbench lab [--quick|--full] [--out DIR] [--models DIR] [options]\n"
    "\n"
    "Runs the embedded matrix (models x numeric profiles x workloads, baseline = the ref\n"
    "profile of each model), then writes DIR/lab.db, DIR/matrix.json, DIR/flip_rates.csv,\n"
    "DIR/anova.txt, DIR/pri.txt and DIR/report.html and prints the flip table, the ANOVA\n"
    "and the PRI held-out summary. Re-running resumes what is stored.\n"
    "\n"
    "  --quick            at most 2 models x 9 profiles; math 16, code 6, safety 12, chat 12\n"
    "                     prompts; 32 new tokens (default; under 5 minutes on 2 cores). No long\n"
    "                     context: 4 of its prompts would add ~13 minutes on 2 cores (the run\n"
    "                     prints the figure measured on this machine)\n"
    "  --full             every profile axis crossed, every prompt of each suite\n"
    "  --out DIR          output directory (default lab)\n"
    "  --models DIR       GGUF models (default models/; the test fixtures when empty)\n"
    "  --limit N          prompts per suite (overrides the mode's)\n"
    "  --max-tokens N     new tokens per answer (overrides the mode's)\n"
    "  --guard SPEC       safety guard (LlamaGuard-3 over HTTP, or builtin[:PATH]); default: the\n"
    "                     built-in guard model; safety is skipped (and said so) if none opens\n"
    "  --embedder SPEC    chat embedder (default: the first model, one fixed cpu-f32/avx2 profile)\n"
    "  --threads N        engine threads per configuration (default 1: best on shared machines)\n"
    "  --jobs N           parallel evaluations when scoring (default: cores)\n"
    "  --dry-run          print the size and the time estimate, write DIR/matrix.json, run nothing\n"
    "\n"
    "Before it starts, lab prints the size (configurations x prompts) and an estimate of the\n"
    "generation time from tokens/s measured on this machine; --full on fewer than 8 cores\n"
    "also prints a WARNING (on stderr) with the estimate and how to cut or shard the run.\n";

/* --full warns (and still runs) on fewer cores than this */
#define LAB_FEW_CORES 8
/* requests per calibration batch (the matrix sends 8 at a time) */
#define LAB_CALIB_BATCH 8
/* long_context prompts --quick would take, for the estimate that says why it does not */
#define LAB_QUICK_LONG_N 4

typedef struct lab_model {
    char *path;   /* absolute */
    char *name;   /* file stem */
} lab_model;

static int mkdir_p(const char *dir) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
    return 0;
}

/* Models of dir (sorted, as glob sorts). */
static size_t find_models(const char *dir, lab_model *out, size_t cap) {
    char pat[PATH_MAX];
    snprintf(pat, sizeof pat, "%s/*.gguf", dir);
    glob_t g;
    size_t n = 0;
    if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && n < cap; i++) {
            char real[PATH_MAX];
            if (!realpath(g.gl_pathv[i], real)) continue;
            const char *base = strrchr(real, '/');
            base = base ? base + 1 : real;
            size_t len = strlen(base) - strlen(".gguf");
            out[n].path = drift_strdup(real);
            out[n].name = drift_strndup(base, len);
            for (char *c = out[n].name; *c; c++)
                if (*c == ',' || *c == '=' || *c == '{' || *c == '}') *c = '_';
            n++;
        }
    }
    globfree(&g);
    return n;
}

/* The fixtures: ./tests/data/models, $DRIFT_SOURCE/..., or next to the binary's build dir. */
static size_t find_fixtures(lab_model *out, size_t cap) {
    size_t n = find_models("tests/data/models", out, cap);
    if (n) return n;
    const char *src = getenv("DRIFT_SOURCE");
    if (src) {
        char d[PATH_MAX];
        snprintf(d, sizeof d, "%s/tests/data/models", src);
        if ((n = find_models(d, out, cap))) return n;
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
            if ((n = find_models(d, out, cap))) return n;
        }
    }
    return 0;
}

typedef struct lab_variant {
    const char *name;   /* level name */
    const char *spec;   /* profile keys */
} lab_variant;

/* The embedded target of one configuration: weight format, ISA and kernel
 * variant over the cpu-f32 profile. */
static void config_target(char *out, size_t cap, const char *model_path, const char *prec, const char *hw_spec,
                          const char *fw_spec, int threads) {
    snprintf(out, cap, "embedded:%s?profile=cpu-f32&weights=%s&%s&%s&threads=%d", model_path, prec, hw_spec, fw_spec,
             threads);
}

static void add_config(json_t *configs, const lab_model *m, const char *hw_name, const char *hw_spec, const char *prec,
                       const char *fw_name, const char *fw_spec, int threads) {
    char label[512], target[PATH_MAX + 512];
    snprintf(label, sizeof label, "%s/%s/%s/%s", m->name, hw_name, prec, fw_name);
    config_target(target, sizeof target, m->path, prec, hw_spec, fw_spec, threads);
    json_array_append_new(configs, json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", label, "target", target,
                                             "dims", "model", m->name, "hardware", hw_name, "precision", prec,
                                             "framework", fw_name));
}

/* The lab's matrix as a spec JSON object. */
static json_t *build_spec(const lab_model *models, size_t n_models, int full, long limit, int max_tokens, int with_safety,
                          int threads, const char *gpu) {
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
    } suite_sizes[] = {{"math", 16}, {"code", 6}, {"safety", 12}, {"chat", 12}, {"long", 0}};
    json_t *suites = json_array();
    for (size_t i = 0; i < sizeof suite_sizes / sizeof suite_sizes[0]; i++) {
        if (!with_safety && !strcmp(suite_sizes[i].name, "safety")) continue;
        /* --quick leaves long-context out: each of its prompts is a prefill
         * of thousands of tokens (seconds per prompt and configuration) */
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
    for (size_t m = 0; m < n_models; m++) {
        char label[512], target[PATH_MAX + 64];
        snprintf(label, sizeof label, "ref@%s", models[m].name);
        snprintf(target, sizeof target, "embedded:%s?profile=ref", models[m].path);
        json_array_append_new(configs, json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}}", "label", label, "target", target,
                                                 "dims", "model", models[m].name, "hardware", "ref", "precision", "f32",
                                                 "framework", "ref"));
    }
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

/* ---- what a lab run will cost, said before it starts ----
 * Size: configurations x prompts per configuration (per suite), plus the
 * stochastic leg. Time: a cost model measured right now on this machine
 * with the first model and the matrix's engine threads: a request of P
 * prompt tokens and G new tokens takes
 *     a*P + b*P^2 + G*(d + 2*b*P)   seconds
 * (prefill per token a, attention growing with the context b, decode per
 * token d, each new token attending over the prompt), fitted per profile:
 * on the cpu-f32 configuration (for every cpu profile), a batch of 8 copies
 * of a short prompt prefilled gives a, the same batch with the run's new
 * tokens gives d (the matrix also sends 8 at a time), and a ~400-token
 * piece of a long-context document prefilled gives b (shorter when the
 * model's context is); the ref profile (reference kernels: slow matmuls,
 * attention less so) gets its own a, d, b from a 2-request batch and a
 * ~200-token piece. Short timings are the least of two tries. Prompt tokens
 * come from the rendered characters at the measured tokens per character.
 * The requests take a few seconds; on a loaded machine they are noisy, and
 * so is the estimate (the end of the run prints it beside the measured
 * generation time). */

/* seconds = a*P + b*P^2 + G*(d + 2*b*P) for a request of P prompt and G new tokens */
typedef struct lab_fit {
    double a, b, d;          /* per prompt token, per token^2, per new token */
} lab_fit;

typedef struct lab_cost {
    lab_fit cpu, ref;        /* the cpu profiles (measured on cpu-f32) and the ref profile */
    double tokens_per_char;  /* prompt tokens per rendered character (short prompts) */
    double long_tokens_per_char; /* the same on the long-context document */
} lab_cost;

typedef struct lab_suite_size {
    char name[32];           /* the workload's name */
    size_t n;                /* prompts */
    double c1, c2;           /* sums of rendered characters and of their squares */
} lab_suite_size;

/* Prompts and rendered characters of suite `spec` (first `limit` prompts when
 * limit > 0); *first: its first rendered prompt (malloc'd) when first != NULL. */
static drift_status lab_suite_size_of(const char *spec, long limit, lab_suite_size *out, char **first,
                                      drift_error *err) {
    drift_suite *s = NULL;
    memset(out, 0, sizeof *out);
    drift_status rc = drift_suite_load(spec, &s, err);
    if (rc) return rc;
    size_t n = limit > 0 && s->n > (size_t)limit ? (size_t)limit : s->n;
    out->n = n;
    snprintf(out->name, sizeof out->name, "%s", n ? drift_workload_name(s->prompts[0].workload) : spec);
    for (size_t i = 0; i < n; i++) {
        const char *tid = NULL;
        char *r = drift_prompt_render(&s->prompts[i], DRIFT_API_COMPLETIONS, &tid);
        if (!r) {
            drift_suite_free(s);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        double c = (double)strlen(r);
        out->c1 += c;
        out->c2 += c * c;
        if (first && i == 0) *first = r;
        else free(r);
    }
    drift_suite_free(s);
    return DRIFT_OK;
}

/* Seconds to generate a suite on one configuration under cost c. */
static double lab_suite_seconds(const lab_cost *c, const lab_suite_size *s, int max_tokens, int replicates, int ref) {
    const lab_fit *f = ref ? &c->ref : &c->cpu;
    double tpc = strcmp(s->name, "long_context") ? c->tokens_per_char : c->long_tokens_per_char;
    double p1 = s->c1 * tpc, p2 = s->c2 * tpc * tpc, g = max_tokens;
    double t = f->a * p1 + f->b * p2 + g * (f->d * (double)s->n + 2 * f->b * p1);
    return t * (replicates > 0 ? replicates : 1);
}

typedef struct lab_calib {
    size_t answers;
    int prompt_tokens;
} lab_calib;

static int lab_calib_cb(void *user, const drift_gen_request *req, drift_gen_result *res) {
    (void)req;
    lab_calib *c = user;
    if (!res->error && res->prompt_tokens > 0) {
        c->answers++;
        c->prompt_tokens = res->prompt_tokens;
    }
    return 0;
}

/* `copies` requests of one prompt at once on an open target (a batch, as the
 * matrix sends them): seconds per request, the least of `tries` (other jobs
 * on the machine only ever add time); 0 on failure. */
static double lab_time(drift_target *t, const char *prompt, size_t copies, int max_tokens, int tries,
                       int *prompt_tokens) {
    drift_gen_request req[LAB_CALIB_BATCH];
    if (copies > LAB_CALIB_BATCH) copies = LAB_CALIB_BATCH;
    for (size_t i = 0; i < copies; i++) req[i] = (drift_gen_request){i, prompt, 0};
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.max_tokens = max_tokens;
    double best = 0;
    for (int k = 0; k < tries; k++) {
        lab_calib c = {0, 0};
        drift_error err = {0};
        double t0 = drift_now_ms();
        if (drift_target_generate(t, req, copies, &gp, lab_calib_cb, &c, &err) || c.answers != copies) return 0;
        double s = (drift_now_ms() - t0) / 1000.0 / (double)copies;
        if (k == 0 || s < best) best = s;
        if (prompt_tokens) *prompt_tokens = c.prompt_tokens;
    }
    return best;
}

/* Fits a, b, d of one profile: `batch` copies of the short prompt prefilled
 * (a) and with max_tokens new tokens (d), then the long prompt prefilled
 * (b), cut in halves until the model takes it (its context). Returns 0 and
 * the prompt token counts, or -1. */
static int lab_fit_profile(const char *spec, const char *short_prompt, char *long_prompt, size_t batch,
                           int max_tokens, lab_fit *f, int *ps, int *pl, size_t *long_len) {
    drift_target_opts to;
    drift_target_opts_default(&to);
    drift_target *t = NULL;
    drift_error err = {0};
    if (drift_target_open(spec, &to, &t, &err)) return -1;
    lab_time(t, short_prompt, 1, 1, 1, NULL); /* warm-up */
    double t_pre = lab_time(t, short_prompt, batch, 1, 2, ps);
    double t_gen = lab_time(t, short_prompt, batch, max_tokens, 2, NULL);
    double t_long = 0;
    size_t len = strlen(long_prompt);
    for (; len >= 100; len /= 2) {
        long_prompt[len] = 0;
        if ((t_long = lab_time(t, long_prompt, 1, 1, 1, pl)) > 0) break;
    }
    drift_target_close(t);
    if (t_pre <= 0 || t_gen <= 0 || t_long <= 0 || *ps <= 0 || *pl <= 0) return -1;
    f->a = t_pre / *ps;
    f->d = max_tokens > 1 ? fmax(0, t_gen - t_pre) / (max_tokens - 1) : f->a;
    /* no attention term when the piece is no longer than the short prompt
     * (a model with a tiny context) */
    f->b = *pl > *ps ? fmax(0, (t_long - f->a * *pl) / ((double)*pl * *pl)) : 0;
    *long_len = len;
    return 0;
}

/* Measures the cost model (see above); 0 on success. */
static int lab_calibrate(const char *model_path, int threads, const char *short_prompt, int max_tokens, lab_cost *c) {
    memset(c, 0, sizeof *c);
    char cpu_spec[PATH_MAX + 160], ref_spec[PATH_MAX + 64];
    config_target(cpu_spec, sizeof cpu_spec, model_path, "f32", "isa=auto", "reduce=sequential", threads);
    snprintf(ref_spec, sizeof ref_spec, "embedded:%s?profile=ref", model_path);
    /* a piece of a long-context document: ~400 tokens on cpu-f32, ~200 on
     * the slower ref profile */
    drift_suite *ls = NULL;
    drift_error err = {0};
    char long_prompt[1601] = "";
    if (drift_suite_load("builtin:long?n=1", &ls, &err) == DRIFT_OK && ls->n) {
        const char *tid = NULL;
        char *r = drift_prompt_render(&ls->prompts[0], DRIFT_API_COMPLETIONS, &tid);
        if (r) snprintf(long_prompt, sizeof long_prompt, "%s", r);
        free(r);
    }
    drift_suite_free(ls);
    if (!long_prompt[0]) return -1;
    int ps = 0, pl = 0;
    size_t len = 0;
    if (lab_fit_profile(cpu_spec, short_prompt, long_prompt, LAB_CALIB_BATCH, max_tokens, &c->cpu, &ps, &pl, &len))
        return -1;
    c->tokens_per_char = (double)ps / (double)strlen(short_prompt);
    c->long_tokens_per_char = (double)pl / (double)len;
    long_prompt[len / 2] = 0;
    if (lab_fit_profile(ref_spec, short_prompt, long_prompt, 2, max_tokens, &c->ref, &ps, &pl, &len)) return -1;
    return 0;
}

static void fmt_duration(char *out, size_t cap, double s) {
    if (s < 120) snprintf(out, cap, "%.0f s", s);
    else if (s < 7200) snprintf(out, cap, "%.1f min", s / 60);
    else if (s < 3 * 86400) snprintf(out, cap, "%.1f h", s / 3600);
    else snprintf(out, cap, "%.1f days", s / 86400);
}

static int lab_config_done(drift_store *st, const char *label) {
    if (!st) return 0;
    drift_run_info info;
    memset(&info, 0, sizeof info);
    drift_error err = {0};
    int done = drift_store_run_get(st, label, &info, &err) == DRIFT_OK && info.finished_at;
    drift_run_info_free(&info);
    return done;
}

/* Prints the size of the run and the time estimate; *gen_s: the estimated
 * seconds of generation left (0 when nothing is left or nothing measured).
 * st may be NULL (no store yet: every configuration is to run). For
 * --quick, long_note gets why long_context is left out, with what it would
 * cost here. */
static void lab_plan(const drift_matrix_spec *spec, drift_store *st, const char *model_path, int threads, int full,
                     const char *matrix_path, long quick_long_n, long stoch_n, double *gen_s, char *long_note,
                     size_t long_note_cap) {
    *gen_s = 0;
    long_note[0] = 0;
    drift_error err = {0};
    lab_suite_size sizes[CLI_MAX_SUITES];
    size_t ns = spec->n_suites < CLI_MAX_SUITES ? spec->n_suites : CLI_MAX_SUITES, per_config = 0, todo = 0;
    char *first = NULL;
    for (size_t i = 0; i < ns; i++) {
        if (lab_suite_size_of(spec->suites[i], spec->limit, &sizes[i], i == 0 ? &first : NULL, &err)) {
            printf("size: not known (%s)\n", err.msg);
            free(first);
            return;
        }
        per_config += sizes[i].n;
    }
    for (size_t c = 0; c < spec->n_configs; c++) todo += !lab_config_done(st, spec->configs[c].label);
    printf("size: %zu configurations x %zu prompts (", spec->n_configs, per_config);
    for (size_t i = 0; i < ns; i++) printf("%s%s %zu", i ? ", " : "", sizes[i].name, sizes[i].n);
    printf(") = %zu answers of at most %d new tokens, + 2 x %ld x 5 sampled answers (stochastic leg)\n",
           spec->n_configs * per_config, spec->max_tokens, stoch_n);
    if (todo == 0) {
        printf("estimate: every configuration is stored already: nothing to generate but what the stochastic leg "
               "lacks\n");
        free(first);
        return;
    }
    lab_cost cost;
    int cal = first ? lab_calibrate(model_path, threads, first, spec->max_tokens, &cost) : -1;
    free(first);
    if (cal) {
        printf("estimate: not available (the calibration requests failed)\n");
        return;
    }
    double secs = 0, long_s = 0;
    for (size_t c = 0; c < spec->n_configs; c++) {
        if (lab_config_done(st, spec->configs[c].label)) continue;
        int ref = strstr(spec->configs[c].target, "profile=ref") != NULL;
        for (size_t i = 0; i < ns; i++) {
            double s = lab_suite_seconds(&cost, &sizes[i], spec->max_tokens, spec->replicates, ref);
            secs += s;
            if (!strcmp(sizes[i].name, "long_context")) long_s += s;
        }
    }
    /* the stochastic leg: 2 cpu configurations x stoch_n math prompts x 5 replicates */
    for (size_t i = 0; i < ns; i++)
        if (!strcmp(sizes[i].name, "math") && sizes[i].n) {
            lab_suite_size m = sizes[i];
            double scale = (double)stoch_n / (double)m.n;
            m.c1 *= scale;
            m.c2 *= scale;
            m.n = (size_t)stoch_n;
            secs += 2 * lab_suite_seconds(&cost, &m, spec->max_tokens, 5, 0);
        }
    *gen_s = secs;
    char d[32], dl[32];
    fmt_duration(d, sizeof d, secs);
    fmt_duration(dl, sizeof dl, long_s);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("estimate: %zu configurations to run: about %s of generation%s%s%s, from a cost measured just now on %d "
           "engine thread%s (%ld cores): prefill %.0f tokens/s, decode %.0f tokens/s, attention +%.2g s per "
           "token^2 on cpu-f32 (ref: %.0f, %.0f, %.2g); scoring comes on top\n",
           todo, d, long_s > 0 ? " (long_context " : "", long_s > 0 ? dl : "", long_s > 0 ? ")" : "", threads,
           threads == 1 ? "" : "s", cores, 1 / cost.cpu.a, cost.cpu.d > 0 ? 1 / cost.cpu.d : 0.0, cost.cpu.b,
           1 / cost.ref.a, cost.ref.d > 0 ? 1 / cost.ref.d : 0.0, cost.ref.b);
    if (full && cores < LAB_FEW_CORES) {
        fflush(stdout);
        fprintf(stderr,
                "WARNING: --full is large for a %ld-core machine: %zu configurations x %zu prompts, about %s of "
                "generation here (an estimate). It is not refused: it resumes where it stops (run the same command "
                "again). To make it smaller use --limit N; to spread it, shard %s over machines (driftbench matrix "
                "--spec %s --db M.db --shard I/N, then driftbench merge).\n",
                cores, todo, per_config, d, matrix_path, matrix_path);
    }
    if (!full && quick_long_n > 0) {
        /* what long_context would add to --quick, from the same cost */
        char spec_s[64];
        lab_suite_size ls;
        snprintf(spec_s, sizeof spec_s, "builtin:long?n=%ld", quick_long_n);
        if (lab_suite_size_of(spec_s, 0, &ls, NULL, &err) == DRIFT_OK && ls.n) {
            double add = 0;
            for (size_t c = 0; c < spec->n_configs; c++)
                add += lab_suite_seconds(&cost, &ls, spec->max_tokens, spec->replicates,
                                         strstr(spec->configs[c].target, "profile=ref") != NULL);
            char d2[32];
            fmt_duration(d2, sizeof d2, add);
            snprintf(long_note, long_note_cap,
                     "long_context is left out: %zu of its prompts (~%.0f tokens each) on the %zu configurations "
                     "would add about %s of generation here, on top of the rest, against the 5-minute budget of "
                     "--quick on 2 cores; --full runs it",
                     ls.n, ls.c1 / (double)ls.n * cost.long_tokens_per_char, spec->n_configs, d2);
        }
    }
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "driftbench lab: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fputs(text, f);
    fclose(f);
}

static char *anova_text(const drift_table *t) {
    drift_buf b = {0};
    size_t params = 0;
    char *formula = drift_table_varying_formula(t, &params);
    if (!formula || t->n_rows < params + 2) {
        buf_printf(&b, "ANOVA: too few rows (%zu) for the %zu parameters of the factors that vary plus two residual "
                       "degrees of freedom; skipped.\n",
                   t->n_rows, params);
        free(formula);
        return buf_steal(&b);
    }
    for (int type = 1; type <= 3; type++) {
        drift_anova_table *a = NULL;
        drift_error err = {0};
        if (drift_anova_run(t, formula, type, &a, &err)) {
            buf_printf(&b, "ANOVA type %d: not computable: %s\n", type, err.msg);
            continue;
        }
        buf_printf(&b, "ANOVA type %d  %s  (n=%zu, rank %zu of %zu columns)\n", type, formula, a->nobs, a->rank,
                   a->n_columns);
        buf_printf(&b, "  %-34s %5s %12s %10s %10s %10s %7s\n", "term", "df", "sum_sq", "F", "p", "p_BH", "eta^2");
        for (size_t i = 0; i < a->n_rows; i++) {
            const drift_anova_row *r = &a->rows[i];
            buf_printf(&b, "  %-34s %5.0f %12.5g %10.4g %10.3g %10.3g %7.3f\n", r->term, r->df, r->sum_sq, r->F, r->p,
                       r->p_bh, r->eta_sq);
        }
        buf_puts(&b, "\n");
        drift_anova_free(a);
    }
    free(formula);
    return buf_steal(&b);
}

#define LAB_PRI_MIN_ROWS 20

static char *pri_text(const drift_table *t, drift_pri_eval **keep) {
    drift_buf b = {0};
    if (t->n_rows < LAB_PRI_MIN_ROWS) {
        buf_printf(&b, "PRI: too few rows (%zu, need %d) to fit and evaluate; skipped.\n", t->n_rows, LAB_PRI_MIN_ROWS);
        return buf_steal(&b);
    }
    drift_pri_options o;
    drift_pri_options_init(&o);
    long cores = sysconf(_SC_NPROCESSORS_ONLN); /* evaluations side by side; same results */
    o.nthread = cores > 1 ? (int)(cores < 64 ? cores : 64) : 1;
    drift_pri_eval *ev = NULL;
    drift_error err = {0};
    if (drift_pri_evaluate(t, &o, &ev, &err)) {
        buf_printf(&b, "PRI: not computable: %s\n", err.msg);
        return buf_steal(&b);
    }
    buf_printf(&b, "PRI (xgboost, %zu features, hyper-parameters by inner CV)\n", ev->n_features);
    buf_printf(&b, "  random 80/20 split: test R^2 %.3f, MAE %.3f points (train %zu, test %zu)\n", ev->random_split.test_r2,
               ev->random_split.test_mae, ev->random_split.n_train, ev->random_split.n_test);
    char *cv = drift_pri_cv_summary(ev, "R^2", "+-");
    buf_printf(&b, "  %s\n", cv ? cv : "5-fold CV: out of memory");
    free(cv);
    buf_printf(&b, "  ablations (test R^2): hardware-only %.3f, linear %.3f, no interactions %.3f, full %.3f\n",
               ev->abl_hardware_only, ev->abl_linear, ev->abl_no_interactions, ev->abl_full);
    buf_printf(&b, "  held-out level                     train  test   test R^2  MAE\n");
    for (size_t i = 0; i < ev->n_levels; i++) {
        const drift_pri_holdout *h = &ev->levels[i];
        buf_printf(&b, "  %-34s %5zu %5zu %10.3f %6.3f\n", h->name, h->n_train, h->n_test, h->test_r2, h->test_mae);
    }
    buf_puts(&b, "  (R^2 is NAN where the held-out rows have constant flip rate)\n");
    if (ev->n_importance) {
        buf_puts(&b, "  top features by gain:");
        for (size_t i = 0; i < ev->n_importance && i < 5; i++)
            buf_printf(&b, " %s (%.2f)%s", ev->importance[i].name, ev->importance[i].gain_share,
                       i + 1 < ev->n_importance && i < 4 ? "," : "");
        buf_puts(&b, "\n");
    }
    *keep = ev;
    return buf_steal(&b);
}

/* The stochastic-serving leg (the paper's temperature 0.7, N=5 check): the
 * first model's f32 and int4 configurations again at temperature 0.7 with 5
 * replicates on math, compared as the expected flip rate over replicate
 * pairs, beside the deterministic flip rate of the same pair from the
 * matrix; the ratio is what the paper reports as ~0.23x. Writes
 * DIR/stochastic.txt and appends a sentence to note. */
static int stochastic_leg(drift_store *st, const char *model_path, const char *model_name, long n_prompts,
                          int max_tokens, int threads, const char *out, drift_buf *note) {
    char spec_f32[PATH_MAX + 160], spec_int4[PATH_MAX + 160], lab_f32[300], lab_int4[300], det_f32[300],
        det_int4[300], suite[64];
    /* the same targets as the matrix's "cpu-best/f32/seq" and "cpu-best/int4/seq" */
    config_target(spec_f32, sizeof spec_f32, model_path, "f32", "isa=auto", "reduce=sequential", threads);
    config_target(spec_int4, sizeof spec_int4, model_path, "int4", "isa=auto", "reduce=sequential", threads);
    snprintf(lab_f32, sizeof lab_f32, "stochastic/%s/f32", model_name);
    snprintf(lab_int4, sizeof lab_int4, "stochastic/%s/int4", model_name);
    snprintf(det_f32, sizeof det_f32, "%s/cpu-best/f32/seq", model_name);
    snprintf(det_int4, sizeof det_int4, "%s/cpu-best/int4/seq", model_name);
    snprintf(suite, sizeof suite, "builtin:math?n=%ld", n_prompts);
    const int reps = 5;
    const double temperature = 0.7;
    printf("\n== stochastic serving (temperature %.1f, %d replicates, math, %s: f32 -> int4) ==\n", temperature, reps,
           model_name);
    fflush(stdout);
    cli_run_args a;
    cli_run_args_default(&a);
    a.suites[0] = suite;
    a.n_suites = 1;
    a.replicates = reps;
    a.params.temperature = temperature;
    a.params.max_tokens = max_tokens;
    a.topts.concurrency = 8;
    const char *labels[2] = {lab_f32, lab_int4}, *specs[2] = {spec_f32, spec_int4};
    drift_score_opts so;
    drift_score_opts_default(&so);
    for (int k = 0; k < 2; k++) {
        a.label = labels[k];
        a.target = specs[k];
        int rc = cli_do_run("lab", st, &a);
        if (rc == CLI_EXIT_PASS) rc = cli_do_score("lab", st, labels[k], &so);
        if (rc != CLI_EXIT_PASS) return rc;
    }
    drift_error err = {0};
    drift_comparison *sc = NULL, *dc = NULL;
    if (drift_compare_runs(st, lab_f32, lab_int4, NULL, &sc, &err)) return cli_error_lib("lab", &err);
    drift_status drc = drift_compare_runs(st, det_f32, det_int4, NULL, &dc, &err);
    const drift_wl_result *sw = &sc->wl[DRIFT_WL_MATH];
    drift_buf txt = {0};
    buf_printf(&txt, "expected flip rate over replicate pairs: ");
    if (isnan(sw->expected_flip_rate)) buf_puts(&txt, "-");
    else buf_printf(&txt, "%.2f%%", 100 * sw->expected_flip_rate);
    buf_puts(&txt, "; majority-vote flip rate: ");
    if (isnan(sw->majority_flip_rate)) buf_puts(&txt, "-");
    else buf_printf(&txt, "%.2f%% (%ld of %ld, %ld ties)", 100 * sw->majority_flip_rate, sw->majority_flips,
                    sw->majority_n, sw->majority_ties);
    buf_puts(&txt, "\n");
    double ratio = NAN;
    if (drc == DRIFT_OK && dc->present[DRIFT_WL_MATH]) {
        const drift_wl_result *dw = &dc->wl[DRIFT_WL_MATH];
        buf_printf(&txt, "deterministic flip rate (temperature 0, same pair, %ld prompts): %.2f%%\n", dw->n,
                   100 * dw->flip_rate);
        if (dw->flip_rate > 0 && !isnan(sw->expected_flip_rate)) ratio = sw->expected_flip_rate / dw->flip_rate;
        if (isnan(ratio))
            buf_puts(&txt, "ratio stochastic / deterministic: - (no deterministic flips to compare with)\n");
        else
            buf_printf(&txt, "ratio stochastic / deterministic: %.2fx (the paper: 0.23x)\n", ratio);
    } else {
        buf_printf(&txt, "deterministic flip rate: not available (%s)\n", drc ? err.msg : "no math pairs");
    }
    fputs(txt.data, stdout);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/stochastic.txt", out);
    write_text(path, txt.data);
    if (!isnan(ratio))
        buf_printf(note, "Stochastic serving (temperature 0.7, 5 replicates, math, %s f32 -> int4): expected flip rate "
                         "%.2f%%, %.2fx the deterministic figure (the paper: 0.23x). ",
                   model_name, 100 * sw->expected_flip_rate, ratio);
    buf_free(&txt);
    drift_comparison_free(sc);
    drift_comparison_free(dc);
    return CLI_EXIT_PASS;
}

static int cmd_lab(int argc, char **argv) {
    const char *out = "lab", *models_dir = NULL, *guard = NULL, *embedder = NULL;
    int full = 0, dry_run = 0;
    long limit = -1, max_tokens = -1, threads = 1, jobs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(lab_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            full = 0;
            continue;
        }
        if (!strcmp(a, "--full")) {
            full = 1;
            continue;
        }
        if (!strcmp(a, "--dry-run")) {
            dry_run = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_error("lab", "unknown option or missing value '%s' (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--models")) models_dir = v;
        else if (!strcmp(a, "--guard")) guard = v;
        else if (!strcmp(a, "--embedder")) embedder = v;
        else if (!strcmp(a, "--limit")) {
            if (cli_parse_int("lab", "--limit", v, 1, 1000000, &limit)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--max-tokens")) {
            if (cli_parse_int("lab", "--max-tokens", v, 1, 100000, &max_tokens)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_int("lab", "--threads", v, 0, 1024, &threads)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--jobs")) {
            if (cli_parse_int("lab", "--jobs", v, 0, 1024, &jobs)) return CLI_EXIT_ERROR;
        } else return cli_error("lab", "unknown option '%s' (see --help)", a);
    }
    if (max_tokens < 0) max_tokens = full ? 128 : 32;
    double t_start = drift_now_ms();

    /* 1. models */
    lab_model models[16];
    memset(models, 0, sizeof models);
    size_t n_models = find_models(models_dir ? models_dir : "models", models, 16);
    int fixtures = 0;
    if (!n_models) {
        if (models_dir) return cli_error("lab", "no *.gguf model in %s", models_dir);
        n_models = find_fixtures(models, 16);
        if (!n_models)
            return cli_error("lab", "no shipped models in models/ and no test fixtures (tests/data/models) found; run from "
                                    "the repository root or give --models DIR");
        fixtures = 1;
        printf("NOTE: no shipped models found in models/: using the test fixtures, whose answers are noise\n");
    }
    size_t found_models = n_models;
    if (!full && n_models > 2) {
        for (size_t i = 2; i < n_models; i++) {
            free(models[i].path);
            free(models[i].name);
        }
        n_models = 2;
    }
    printf("lab (%s): %zu model(s):", full ? "full" : "quick", n_models);
    for (size_t i = 0; i < n_models; i++) printf(" %s", models[i].name);
    if (found_models > n_models) printf(" (%zu found; --full uses all)", found_models);
    printf("\n");

    /* evaluators: say up front what can and cannot be judged */
    drift_error err = {0};
    int with_safety = 0;
    char safety_reason[512] = "";
    if (guard) {
        drift_guard *g = NULL;
        if (drift_guard_open(guard, &g, &err)) return cli_error_lib("lab", &err);
        drift_guard_close(g);
        with_safety = 1;
    } else {
        drift_guard *g = NULL;
        if (drift_guard_open(NULL, &g, &err) == DRIFT_OK && g) {
            drift_guard_close(g);
            with_safety = 1;
        } else {
            snprintf(safety_reason, sizeof safety_reason, "%s", err.msg[0] ? err.msg : "no guard");
            printf("safety: not computable, so not run: %s\n", safety_reason);
        }
    }
    char emb_spec[PATH_MAX + 64];
    if (!embedder) {
        snprintf(emb_spec, sizeof emb_spec, "embedded:%s?profile=cpu-f32&isa=avx2&threads=1", models[0].path);
        embedder = emb_spec;
    }

    /* 2. the matrix */
    if (mkdir_p(out)) return cli_error("lab", "cannot create %s: %s", out, strerror(errno));
    char gpu[32];
    const char *gpu_level = drift_cuda_device_name(gpu, sizeof gpu) == 0 && gpu[0] ? gpu : NULL;
    if (gpu_level) printf("hardware: the GPU (%s) joins the matrix beside the CPU\n", gpu_level);
    json_t *spec_j = build_spec(models, n_models, full, limit, (int)max_tokens, with_safety, (int)threads, gpu_level);
    char *spec_s = json_dumps(spec_j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(spec_j);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/matrix.json", out);
    write_text(path, spec_s ? spec_s : "");
    drift_matrix_spec *spec = NULL;
    drift_status prc = drift_matrix_spec_parse(spec_s, spec_s ? strlen(spec_s) : 0, path, &spec, &err);
    free(spec_s);
    char *stoch_path = drift_strdup(models[0].path), *stoch_name = drift_strdup(models[0].name);
    for (size_t i = 0; i < n_models; i++) {
        free(models[i].path);
        free(models[i].name);
    }
    if (prc || !stoch_path || !stoch_name) {
        free(stoch_path);
        free(stoch_name);
        drift_matrix_spec_free(spec);
        if (!prc) return cli_error("lab", "out of memory");
        return cli_error_lib("lab", &err);
    }
    printf("matrix: %zu configurations x %zu suites, %s, %d new tokens (%s)\n", spec->n_configs, spec->n_suites,
           limit > 0 ? "--limit prompts per suite" : full ? "whole suites" : "quick suite sizes", spec->max_tokens, path);
    fflush(stdout);
    char matrix_path[PATH_MAX + 32];
    snprintf(matrix_path, sizeof matrix_path, "%s", path);

    /* 3. the size and the time estimate, then run + score (a dry run opens
     * the store only when it exists, to count what is stored) */
    snprintf(path, sizeof path, "%s/lab.db", out);
    drift_store *st = NULL;
    if ((!dry_run || access(path, F_OK) == 0) && drift_store_open(path, &st, &err)) {
        drift_matrix_spec_free(spec);
        free(stoch_path);
        free(stoch_name);
        return cli_error_lib("lab", &err);
    }
    double gen_s = 0;
    char long_note[512];
    lab_plan(spec, st, stoch_path, (int)threads, full, matrix_path, full ? 0 : LAB_QUICK_LONG_N,
             limit > 0 ? limit : 16, &gen_s, long_note, sizeof long_note);
    if (!full) {
        if (long_note[0]) printf("quick: %s\n", long_note);
        else printf("quick: long_context is left out (each prompt is a prefill of thousands of tokens); --full runs it\n");
    }
    fflush(stdout);
    if (dry_run) {
        printf("dry run: nothing generated (the matrix is in %s)\n", matrix_path);
        drift_store_close(st);
        drift_matrix_spec_free(spec);
        free(stoch_path);
        free(stoch_name);
        return CLI_EXIT_PASS;
    }
    cli_install_signal_handlers();
    int64_t tok0 = 0, tok1 = 0;
    drift_matrix_store_tokens(st, &tok0, &err);
    cli_matrix_opts mo;
    cli_matrix_opts_default(&mo);
    mo.progress_lines = 1;
    mo.score.guard_spec = guard;
    mo.score.embedder_spec = embedder;
    mo.score.jobs = (int)jobs;
    cli_matrix_stats ms;
    int rc = cli_matrix_run("lab", st, spec, &mo, &ms);
    drift_matrix_store_tokens(st, &tok1, &err);
    int spec_max_tokens = spec->max_tokens;
    drift_matrix_spec_free(spec);
    drift_buf stoch_note = {0};
    if (rc == CLI_EXIT_PASS)
        rc = stochastic_leg(st, stoch_path, stoch_name, limit > 0 ? limit : 16, spec_max_tokens, (int)threads, out,
                            &stoch_note);
    free(stoch_path);
    free(stoch_name);
    if (rc != CLI_EXIT_PASS) {
        buf_free(&stoch_note);
        drift_store_close(st);
        return rc;
    }

    /* 4. table, anova, pri, report */
    drift_table *t = NULL;
    if (drift_matrix_flip_table(st, "ref@{model}", &t, &err)) {
        drift_store_close(st);
        return cli_error_lib("lab", &err);
    }
    snprintf(path, sizeof path, "%s/flip_rates.csv", out);
    if (drift_table_write_csv(t, path, &err)) rc = cli_error_lib("lab", &err);
    printf("\n== flip rate by workload (percent, 95%% Wilson CI; baseline = ref profile of the same model) ==");
    cli_print_flip_table(stdout, t);
    drift_store_health health;
    drift_buf why = {0};
    if (drift_matrix_store_health(st, &health, &err) == DRIFT_OK)
        for (int w = 0; w < DRIFT_WL_COUNT; w++)
            if (health.errors[w])
                buf_printf(&why, "%s: %zu of %zu requests failed (e.g. \"%s\"): failed requests are never pairs%s. ",
                           drift_workload_name((drift_workload)w), health.errors[w], health.errors[w] + health.answers[w],
                           health.common_error[w], health.answers[w] ? "" : ", so this workload has no rows");
    if (why.data) printf("%s\n", why.data);
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (ms.score.not_computable[w])
            printf("%s: %zu answers not computable: %s\n", drift_workload_name((drift_workload)w), ms.score.not_computable[w],
                   ms.score.reason[w]);
    printf("(written to %s)\n\n== ANOVA ==\n", path);
    fflush(stdout);
    char *at = anova_text(t);
    fputs(at, stdout);
    snprintf(path, sizeof path, "%s/anova.txt", out);
    write_text(path, at);
    free(at);
    printf("== PRI held-out evaluation ==\n");
    fflush(stdout);
    drift_pri_eval *pev = NULL;
    char *pt = pri_text(t, &pev);
    fputs(pt, stdout);
    if (t->n_rows >= LAB_PRI_MIN_ROWS) {
        snprintf(path, sizeof path, "%s/pri.txt", out);
        write_text(path, pt);
    }
    free(pt);
    size_t n_rows = t->n_rows;

    drift_html_opts ho;
    drift_html_opts_default(&ho);
    ho.title = full ? "DriftBench lab (full matrix)" : "DriftBench lab (quick matrix)";
    ho.baseline = "ref@{model}";
    drift_buf note = {0};
    if (fixtures) buf_puts(&note, "No shipped models were found in models/: this report uses the test fixtures, whose "
                                  "answers are noise, so it shows the machinery rather than real drift. ");
    if (!with_safety) buf_printf(&note, "Safety was not run: %s. ", safety_reason);
    if (!full && long_note[0]) buf_printf(&note, "The quick matrix: %s. ", long_note);
    else if (!full)
        buf_puts(&note, "The quick matrix leaves long-context out (each prompt is a prefill of thousands of "
                        "tokens); `driftbench lab --full` runs it. ");
    if (ms.score.not_computable[DRIFT_WL_CHAT]) buf_printf(&note, "%s. ", ms.score.reason[DRIFT_WL_CHAT]);
    if (why.data) buf_puts(&note, why.data);
    if (stoch_note.data) buf_puts(&note, stoch_note.data);
    buf_free(&stoch_note);
    ho.note = note.data;
    ho.pri = pev;
    char *page = NULL;
    if (drift_report_html(st, &ho, &page, &err)) rc = cli_error_lib("lab", &err);
    else {
        snprintf(path, sizeof path, "%s/report.html", out);
        write_text(path, page);
    }
    free(page);
    buf_free(&note);
    buf_free(&why);
    drift_pri_eval_free(pev);
    drift_table_free(t);
    drift_store_close(st);

    double wall_s = (drift_now_ms() - t_start) / 1000.0, run_s = ms.run_ms / 1000.0;
    int64_t tokens = tok1 - tok0;
    char est[48] = "";
    if (gen_s > 0) snprintf(est, sizeof est, ", estimated %.0f s", gen_s);
    printf("\nlab: %zu configurations, %zu table rows; wall %.1f s (generation %.1f s%s, scoring %.1f s); %lld tokens "
           "generated now, %.0f tokens/s\n",
           ms.configs, n_rows, wall_s, run_s, est, ms.score_ms / 1000.0, (long long)tokens,
           run_s > 0 ? (double)tokens / run_s : 0.0);
    printf("report: %s/report.html\n", out);
    return rc;
}
CLI_COMMAND(lab, "lab", "the embedded study: matrix, flip table, ANOVA, PRI, report", cmd_lab)
