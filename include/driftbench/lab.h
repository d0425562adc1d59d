/* lab.h - the lab stage: the paper's study on the embedded engine, as steps
 * a caller drives (the CLI prints between them):
 *
 *   drift_lab_models_find     the models (models/ *.gguf, else the fixtures)
 *   drift_lab_safety_check    can safety be judged (a guard that opens)?
 *   drift_lab_design          the matrix: models x numeric profiles x suites
 *   drift_lab_plan_size       configurations x prompts, what is stored already
 *   drift_lab_plan_estimate   the cost model measured on this machine -> seconds
 *   (the matrix is run and scored: drift_matrix_run, pipeline.h)
 *   drift_lab_stochastic_design / _run / _compare   the temperature-0.7 leg
 *
 * Each step takes its inputs, returns a drift_status and fills a struct that
 * holds what the caller prints or writes; nothing here prints or exits.
 * drift_lab_run (src/pipeline/lab.c) is the whole study in one call: those
 * steps, the matrix and its long-context subset, the stochastic leg beside
 * the latter, the cut answers, the flip table and its analyses, reported
 * phase by phase through the progress callback (drift_lab_phase), into a
 * drift_lab_result. The report layer renders a study without knowing this
 * stage: the data it reads (drift_lab_cuts, drift_lab_stochastic, the
 * drift_lab_report view) and its renderers are in lab_result.h, which this
 * header includes; drift_lab_result_report takes the view of a result, and
 * drift_lab_result_summary_render / drift_lab_note_render do that and
 * render (src/pipeline/lab.c).
 * The cost model's arithmetic (drift_lab_fit_solve, drift_lab_suite_seconds,
 * drift_lab_plan_apply) is pure, so tests check it without timing anything. */
#ifndef DRIFTBENCH_LAB_H
#define DRIFTBENCH_LAB_H

#include <stddef.h>

#include "driftbench/analysis.h"
#include "driftbench/eval.h"
#include "driftbench/lab_result.h"
#include "driftbench/matrix.h"
#include "driftbench/pipeline.h"
#include "driftbench/status.h"
#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DRIFT_LAB_MAX_MODELS 16
#define DRIFT_LAB_MAX_SUITES 32
/* --full warns (and still runs) on fewer cores than this */
#define DRIFT_LAB_FEW_CORES 8
/* --quick's sizes: models (fragile ones first), prompts per workload, new
 * tokens; long context runs on a subset of configurations
 * (drift_lab_design_long_json): its prompts x 4 levels = 64 pairs, which
 * cannot tell 0 from the paper's 1.55% (that takes 256 pairs: 64 prompts,
 * at ~8 CPU-s per prompt at the baseline's prefill, about 40 CPU-min); the
 * report says so */
#define DRIFT_LAB_QUICK_MODELS 3
#define DRIFT_LAB_QUICK_MATH 60
#define DRIFT_LAB_QUICK_CODE 40
#define DRIFT_LAB_QUICK_SAFETY 60
#define DRIFT_LAB_QUICK_CHAT 30
#define DRIFT_LAB_QUICK_LONG 16
/* The baseline's levels (engine presets, profile.h): the paper's FP16 on
 * H100 with vLLM, as a reduced-precision serving profile */
#define LAB_BASE_PRECISION "w16a16"
#define LAB_BASE_FRAMEWORK "vllm"
#define LAB_BASE_HARDWARE "avx2"
/* top-k logprobs stored with the baseline's answers (flip risk) */
#define DRIFT_LAB_BASE_LOGPROBS 5
#define DRIFT_LAB_QUICK_TOKENS 192
#define DRIFT_LAB_FULL_TOKENS 256
/* the stochastic leg: math prompts and replicates per run */
#define DRIFT_LAB_STOCH_PROMPTS 100
#define DRIFT_LAB_STOCH_REPLICATES 5
/* the seed of the null run (the baseline stack again); its replicate r uses
 * this + r, far from the leg's own 42 + r */
#define DRIFT_LAB_STOCH_NULL_SEED 1042
/* the leg's other stack: the baseline with this precision */
#define DRIFT_LAB_STOCH_ALT "w4a16-mxfp4"

typedef struct drift_lab_opts {
    int full;                  /* 1 = --full: every axis crossed on every model; 0 = --quick (lab_design.c) */
    const char *models_dir;    /* NULL: models/ under the data roots, then the test fixtures */
    long limit;                /* prompts per suite; <= 0: the mode's sizes */
    long long_prompts;         /* --quick's long-context prompts (--long N); <= 0: limit, else DRIFT_LAB_QUICK_LONG */
    int max_tokens;            /* new tokens per answer; <= 0: DRIFT_LAB_FULL_TOKENS / _QUICK_TOKENS */
    int threads;               /* engine threads per configuration (0 = the engine's default) */
    const char *guard_spec;    /* safety guard; NULL: the built-in guard */
    const char *embedder_spec; /* chat embedder; NULL: the first robust (not -fragile-) model, cpu-f32/avx2 */
    /* Events of stage "lab" (may be NULL): the calibration's timed batches
     * (BEGIN, STEP per batch, END; label = the profile's target); in
     * drift_lab_run also one ITEM per phase (label = the phase's name,
     * summary = the drift_lab_result; see drift_lab_phase) and the matrix
     * legs' own events (stages "matrix" and "run", drift_matrix_run's). */
    drift_progress_cb progress;
    void *progress_user;
    /* ---- drift_lab_run only ---- */
    const char *db;            /* the store (the CLI: DIR/lab.db); required */
    const char *spec_name;     /* the matrix's name in parse messages (DIR/matrix.json); NULL: "matrix.json" */
    int dry_run;               /* 1: stop after the estimate; the store is opened only when it exists */
    int jobs;                  /* configurations side by side; <= 0: online cores / threads (at least 1) */
    /* Polled between configurations, inside runs, by the stochastic leg and
     * after each phase event; nonzero stops the study with
     * DRIFT_ERR_CANCELLED (NULL: never). */
    int (*cancel)(void *cancel_user);
    void *cancel_user;
} drift_lab_opts;

/* Sets the defaults above (quick, 1 engine thread). */
DRIFT_API void drift_lab_opts_default(drift_lab_opts *o);

/* The levels of each axis (engine preset names, the baseline's first). */
typedef struct drift_lab_levels_t {
    const char *const *hardware, *const *precision, *const *framework;
    size_t n_hardware, n_precision, n_framework;
} drift_lab_levels_t;

/* The design's levels of --full (full = 1) or --quick. Static strings. */
DRIFT_API void drift_lab_levels(int full, drift_lab_levels_t *out);

/* The kind of a configuration label of the lab's design. */
typedef enum drift_lab_role {
    DRIFT_LAB_ROLE_LEVEL = 0,  /* a level of the axes: a row of the analyses */
    DRIFT_LAB_ROLE_BASE = 1,   /* "base@MODEL": the baseline */
    DRIFT_LAB_ROLE_AA = 2,     /* "aa@MODEL": the A/A control */
    DRIFT_LAB_ROLE_REF = 3     /* "ref@MODEL": the ref oracle */
} drift_lab_role;

/* The role of a run label (by its prefix). */
DRIFT_API drift_lab_role drift_lab_label_role(const char *label);

/* A model path as the lab's spec records it (malloc'd): relative to the
 * working directory when abs_path is under it, else abs_path. */
DRIFT_API char *drift_lab_portable_path(const char *abs_path);

typedef struct drift_lab_model {
    char *path;                /* relative to the working directory when under it, else absolute */
    char *name;                /* file stem, with ",={}" made '_' */
} drift_lab_model;

/* The study: what drift_lab_models_find, drift_lab_safety_check and
 * drift_lab_design decided. Zero it before the first step; free it with
 * drift_lab_study_clear. */
typedef struct drift_lab_study {
    drift_lab_opts opts;       /* copied by drift_lab_models_find (strings borrowed) */
    int max_tokens;            /* resolved */
    long stoch_prompts;        /* math prompts of the stochastic leg */
    drift_lab_model models[DRIFT_LAB_MAX_MODELS];
    size_t n_models;           /* in the study (at most DRIFT_LAB_QUICK_MODELS) */
    size_t n_found;            /* found in the folder */
    size_t n_fragile;          /* of the study's, those named "-fragile-" (they come first) */
    int fixtures;              /* 1: the test fixtures, whose answers are noise */
    char models_dir[4096];     /* the folder the models came from (absolute) */
    const char *models_from;   /* how it was found: "--models", "DRIFT_DATA_DIR", "working directory",
                                * "installed", "test fixtures" or "source tree" (drift_data_find) */
    int with_safety;           /* 1: a guard opens, safety is a suite */
    char safety_reason[512];   /* why not, when with_safety == 0 */
    char *embedder;            /* the chat embedder spec (malloc'd) */
    char gpu[32];              /* hardware level of the visible GPU; "" = none */
    char *spec_json;           /* the matrix spec JSON (DIR/matrix.json's text; malloc'd) */
    drift_matrix_spec *spec;   /* the same, parsed */
    /* --quick: long context on a subset of the same runs (DIR/matrix_long.json); NULL with --full */
    char *long_spec_json;
    drift_matrix_spec *long_spec;
} drift_lab_study;

/* Finds the models: opts->models_dir's *.gguf, or when it is NULL
 * models/ under the data roots (drift_data_find's order: $DRIFT_DATA_DIR,
 * the working directory, the installed datadir), else the test fixtures
 * (./tests/data/models, $DRIFT_SOURCE/tests/data/models, or
 * ../tests/data/models beside the executable; s->fixtures = 1), else the
 * source tree's models/; s->models_dir and s->models_from say which. Ordered: names holding "-fragile-" first,
 * then the others, each group by name; both modes keep the first
 * DRIFT_LAB_QUICK_MODELS (the paper's three models). Copies opts
 * into s. DRIFT_ERR_NOT_FOUND with the message the user reads when there
 * are none. */
DRIFT_API drift_status drift_lab_models_find(drift_lab_study *s, const drift_lab_opts *opts, drift_error *err);

/* Whether safety can be judged: s->opts.guard_spec must open (its error is
 * returned); with none given, the built-in guard is tried and, when it
 * does not open, s->with_safety = 0 and s->safety_reason says why (not an
 * error). */
DRIFT_API drift_status drift_lab_safety_check(drift_lab_study *s, drift_error *err);

/* The matrix of the study (after drift_lab_models_find and
 * drift_lab_safety_check): per model the ref baseline "ref@{model}" and the
 * profiles labelled MODEL/HARDWARE/PRECISION/FRAMEWORK (--quick: every
 * precision, split-K 4 and avx2 from f32/seq on the best ISA; --full: 3
 * ISAs x 8 formats x 5 kernel variants), plus the visible GPU; suites math,
 * code, safety (when with_safety), chat and, with --full, long context
 * (--quick: s->long_spec, drift_lab_design_long_json).
 * Fills s->embedder, s->gpu, s->spec_json, s->long_spec_json and then the
 * parsed specs; on a parse failure the JSON is kept so the caller can
 * still write it.
 * spec_name: the file name parse messages give (NULL: "matrix.json"). */
DRIFT_API drift_status drift_lab_design(drift_lab_study *s, const char *spec_name, drift_error *err);

/* The same design for given models without looking for them: what
 * drift_lab_design builds, for tests and callers with their own models.
 * gpu: the GPU's hardware level or NULL. Returns the spec JSON (malloc'd)
 * or NULL on nomem. */
DRIFT_API char *drift_lab_design_json(const drift_lab_model *models, size_t n_models, int full, long limit,
                                      int max_tokens, int with_safety, int threads, const char *gpu);

/* --quick's long-context spec: suite builtin:long?n=DRIFT_LAB_QUICK_LONG
 * (limit when > 0) on the first model only: its ref baseline and
 * cpu-best f32, fp8 and int4 (seq), labelled as in the main spec, so these
 * runs gain long-context answers and rows. NULL on nomem or no model. */
DRIFT_API char *drift_lab_design_long_json(const drift_lab_model *models, size_t n_models, long limit, int max_tokens,
                                           int threads);

/* Frees what the steps allocated and zeroes s. */
DRIFT_API void drift_lab_study_clear(drift_lab_study *s);

/* ---- the cost model ----
 * A request of P prompt tokens and G new tokens takes
 *     a*P + b*P^2 + G*(d + 2*b*P)   seconds
 * (prefill per token a, attention growing with the context b, decode per
 * token d, each new token attending over the prompt), fitted per profile
 * from timed batches on this machine. */
typedef struct drift_lab_fit {
    double a, b, d;            /* per prompt token, per token^2, per new token */
} drift_lab_fit;

#define DRIFT_LAB_MAX_HW 8
typedef struct drift_lab_cost {
    drift_lab_fit cpu, ref;    /* the cpu profiles (measured on the baseline) and the ref profile */
    /* hardware levels other than the baseline's: seconds of a short batch
     * on the level / on the baseline (a configuration of another level
     * costs its fit times its factor) */
    char hw_name[DRIFT_LAB_MAX_HW][32];
    double hw_factor[DRIFT_LAB_MAX_HW];
    size_t n_hw;
    double tokens_per_char;    /* prompt tokens per rendered character (short prompts) */
    double long_tokens_per_char; /* the same on the long-context document */
} drift_lab_cost;

/* One profile's timings: seconds per request of a batch of short prompts
 * prefilled (1 new token), the same batch with max_tokens new tokens, and
 * one long prompt prefilled; and the prompt tokens of each prompt. */
typedef struct drift_lab_timing {
    double prefill_s, generate_s, long_s;
    int short_tokens, long_tokens;
    int max_tokens;
} drift_lab_timing;

/* Fits a, b, d from t: a = prefill_s / short_tokens; d = (generate_s -
 * prefill_s) / (max_tokens - 1) (not below 0; a when max_tokens <= 1);
 * b = (long_s - a * long_tokens) / long_tokens^2 (not below 0; 0 when the
 * long prompt is no longer than the short one). DRIFT_ERR_INVALID when a
 * time or a token count is not positive. */
DRIFT_API drift_status drift_lab_fit_solve(const drift_lab_timing *t, drift_lab_fit *f, drift_error *err);

/* The cost factor of configuration cfg (its hardware level's; 1 when
 * unknown or the baseline's). */
DRIFT_API double drift_lab_cost_factor(const drift_lab_cost *c, const drift_matrix_config *cfg);

/* A suite's size: its prompts and their rendered characters. */
typedef struct drift_lab_suite_size {
    char name[32];             /* the workload's name ("long_context" prices with long_tokens_per_char) */
    size_t n;                  /* prompts */
    double c1, c2;             /* sums of rendered characters and of their squares */
} drift_lab_suite_size;

/* Prompts and rendered characters of suite `spec` (its first `limit`
 * prompts when limit > 0); *first: its first rendered prompt (malloc'd)
 * when first != NULL. */
DRIFT_API drift_status drift_lab_suite_size_of(const char *spec, long limit, drift_lab_suite_size *out, char **first,
                                               drift_error *err);

/* Seconds to generate suite s on one configuration (ref: the ref profile's
 * fit) at max_tokens new tokens, times replicates (at least 1). */
DRIFT_API double drift_lab_suite_seconds(const drift_lab_cost *c, const drift_lab_suite_size *s, int max_tokens,
                                         int replicates, int ref);

/* What the study will cost. drift_lab_plan_size fills the size part,
 * drift_lab_plan_estimate the rest. Free with drift_lab_plan_clear. */
typedef struct drift_lab_plan {
    size_t n_suites;
    drift_lab_suite_size suites[DRIFT_LAB_MAX_SUITES];
    size_t n_configs;          /* configurations of the matrix */
    size_t per_config;         /* prompts per configuration */
    size_t todo;               /* configurations not stored complete */
    unsigned char *done;       /* (n_configs,) 1 = stored complete */
    int max_tokens;
    long stoch_prompts;        /* the stochastic leg: 4 runs x stoch_prompts x stoch_replicates */
    int stoch_replicates;
    /* --quick's long-context spec (borrowed from the study; NULL: none) */
    const drift_matrix_spec *long_spec;
    unsigned char *long_done;  /* (long_spec->n_configs,) 1 = its long-context answers are stored */
    size_t long_todo;
    char *first_prompt;        /* the first suite's first prompt: the calibration's short prompt */
    /* the estimate */
    drift_lab_cost cost;
    double gen_s;              /* seconds of generation left (one engine thread each), with the stochastic leg */
    double long_s;             /* of which long_context */
    double stoch_s;            /* of which the stochastic leg */
    long cores;                /* online CPUs */
    int jobs;                  /* configurations side by side (set by the caller; <= 1: one at a time) */
    double wall_s;             /* gen_s spread over min(jobs, configurations left) */
    int warn_large;            /* --full on fewer than DRIFT_LAB_FEW_CORES cores */
    drift_lab_suite_size long_suite; /* the long spec's suite (n = 0: none) */
} drift_lab_plan;

/* The size of the study's matrix: every suite's prompts (as the matrix
 * limits them) and which configurations st holds complete (st may be NULL:
 * none); with a long spec, its suite and which of its runs hold every
 * long-context outcome. Zeroes p first. */
DRIFT_API drift_status drift_lab_plan_size(const drift_lab_study *s, drift_store *st, drift_lab_plan *p,
                                           drift_error *err);

/* Measures the cost model on this machine (a few seconds: the first model
 * on cpu-f32/seq at the study's engine threads with batches of 8 copies of
 * p->first_prompt and a ~400-token long-context piece, and on ref with
 * batches of 2 and a ~200-token piece; each short timing the least of two
 * tries), then drift_lab_plan_apply. Only when p->todo > 0. Reports the
 * requests through s->opts.progress. DRIFT_ERR_MODEL when the calibration
 * requests fail. */
DRIFT_API drift_status drift_lab_plan_estimate(const drift_lab_study *s, drift_lab_plan *p, drift_error *err);

/* The estimate from p's sizes and p->cost, no timing: gen_s over the
 * configurations not done (ref ones, by their target's profile=ref, with
 * the ref fit) and the long spec's runs not done (long_s), plus the
 * stochastic leg (3 cpu runs of stoch_prompts math prompts, their
 * characters scaled from the math suite's, x stoch_replicates: stoch_s);
 * wall_s = gen_s / min(jobs, configurations left) (at least 1). */
DRIFT_API void drift_lab_plan_apply(drift_lab_plan *p, const drift_matrix_spec *spec);

/* Seconds configuration i of spec costs by p's cost model (0 when done):
 * of the main spec its suites, of p->long_spec its long-context suite;
 * what a progress bar weighs configurations by. */
DRIFT_API double drift_lab_plan_config_seconds(const drift_lab_plan *p, const drift_matrix_spec *spec, size_t i);

DRIFT_API void drift_lab_plan_clear(drift_lab_plan *p);

/* ---- the design's size, stated before the run ---- */
typedef struct drift_lab_size_wl {
    char name[32];             /* the workload */
    size_t prompts;            /* its prompts per configuration */
    size_t configs;            /* level configurations that answer them */
    size_t pairs;              /* prompts x configs: the pooled pairs */
    /* the smallest pooled rate that 0 flips would exclude (the upper end
     * of the 95% Wilson interval of 0 of n): with n = pairs (pairs
     * independent) and n = prompts (every configuration flipping the same
     * prompts); fractions */
    double resolve_pairs, resolve_prompts;
} drift_lab_size_wl;

typedef struct drift_lab_design_size {
    size_t levels;             /* configurations that are levels of the axes (rows of the analyses) */
    size_t bases, aa, ref;     /* the baselines and the controls */
    size_t n_model, n_hardware, n_precision, n_framework; /* distinct levels of each axis (baseline's included) */
    size_t n_wl;
    drift_lab_size_wl wl[DRIFT_LAB_MAX_SUITES + 1];
} drift_lab_design_size;

/* The size of the study's design from its specs and p's suite sizes
 * (after drift_lab_plan_size): configurations by role, levels per axis,
 * pairs per workload and the rate each can resolve. Pure. */
DRIFT_API void drift_lab_design_size_of(const drift_lab_study *s, const drift_lab_plan *p, drift_lab_design_size *out);

/* The upper end of the 95% Wilson interval of 0 successes in n (1 when
 * n is 0): the smallest rate n trials with none can tell from 0. */
DRIFT_API double drift_lab_resolvable(double n);

/* ---- answers cut by the token limit (drift_lab_cuts, lab_result.h) ---- */
/* Counts the answers of every configuration of spec in st, per workload,
 * and those the token limit cut (drift_store_count_run per label; a label
 * not in the store counts nothing). */
DRIFT_API drift_status drift_lab_count_cuts(drift_store *st, const drift_matrix_spec *spec, drift_lab_cuts *out,
                                            drift_error *err);

/* ---- drift beyond the sampling null (drift_lab_beyond, lab_result.h) ---- */
/* Computes out from the per-prompt figures (see lab_result.h) with `resamples`
 * bootstrap resamples (at least 200) drawn from seed. DRIFT_ERR_INVALID
 * when n < 2, a figure is outside [0, 1] or not a number. */
DRIFT_API drift_status drift_lab_beyond_null(const double *cross, const double *null_d, const double *det, size_t n,
                                             int resamples, uint64_t seed, drift_lab_beyond *out, drift_error *err);

/* ---- the stochastic leg (drift_lab_stochastic, lab_result.h) ---- */
/* The leg's runs for the study's first model (its labels, targets, suite
 * and decoding). */
DRIFT_API void drift_lab_stochastic_design(const drift_lab_study *s, drift_lab_stochastic *out);

typedef struct drift_lab_stochastic_opts {
    int concurrency;                  /* in-flight requests per target; default 8 (as the matrix) */
    drift_score_opts score;           /* how the two runs are scored; default drift_score_opts_default */
    int (*cancel)(void *cancel_user); /* NULL: never; given to the run stage */
    void *cancel_user;
    /* The run stage's events of each run (stage "run") pass through; after
     * each run is scored, an ITEM of stage "lab" (label = the run, done =
     * runs scored of total 3, summary = the drift_lab_stochastic_summary). */
    drift_progress_cb progress;
    void *progress_user;
} drift_lab_stochastic_opts;

/* Fills o with the defaults above. */
DRIFT_API void drift_lab_stochastic_opts_default(drift_lab_stochastic_opts *o);

typedef struct drift_lab_stochastic_summary {
    size_t done;                      /* runs run and scored (0..3) */
    const char *label, *target;       /* the run being worked on (point into the design) */
    int failed_in_run;                /* on failure: 1 the run stage failed (see run), 0 its scoring */
    drift_run_summary run;            /* the run stage of that run */
    drift_score_summary score;        /* its scoring */
} drift_lab_stochastic_summary;

/* Runs (or resumes: drift_run_execute) and scores (one drift_scorer with
 * o->score for the four, each label as drift_score_run would) the leg's
 * four runs of x into st, f32, int4, then both again at null_seed
 * (the nulls), at x's temperature, replicates and new tokens. Stops at the first failure, returning its error with sum
 * saying which run and which step (sum required, filled in every case).
 * Then drift_lab_stochastic_compare gives the figures. */
DRIFT_API drift_status drift_lab_stochastic_run(drift_store *st, const drift_lab_stochastic *x,
                                                const drift_lab_stochastic_opts *o,
                                                drift_lab_stochastic_summary *sum, drift_error *err);

/* Compares the two stochastic runs (their error is returned) and the
 * deterministic pair (a failure is recorded in det_reason) in st, then the
 * drift beyond the null (drift_lab_beyond_null over the math prompts
 * labelled in all five runs; when not computable, null_ok = 0 and
 * null_reason says why). */
DRIFT_API drift_status drift_lab_stochastic_compare(drift_store *st, drift_lab_stochastic *x, drift_error *err);

/* ---- the whole study ---- */

/* Sequences decoded together per configuration and in the stochastic leg:
 * the engine is batch-invariant (the same answers at any batch), and a step
 * of 32 rows does about twice the work per CPU-second of a step of 8. */
#define DRIFT_LAB_BATCH 32

/* The phases drift_lab_run reports (an ITEM of stage "lab" each, after the
 * phase, in this order; r->phase is the last one reached). */
typedef enum drift_lab_phase {
    DRIFT_LAB_PHASE_NONE = 0,
    DRIFT_LAB_PHASE_MODELS,      /* r->study's models (drift_lab_models_find) */
    DRIFT_LAB_PHASE_SAFETY,      /* r->study.with_safety / safety_reason */
    DRIFT_LAB_PHASE_DESIGN,      /* r->study.spec_json, long_spec_json and the parsed specs, or design_rc:
                                    reported before a failed design is returned, so its JSON can be kept */
    DRIFT_LAB_PHASE_SIZE,        /* r->plan's size, or size_rc / size_err */
    DRIFT_LAB_PHASE_ESTIMATE,    /* r->plan's estimate, or estimate_rc (only when the size is known) */
    DRIFT_LAB_PHASE_PLANNED,     /* weights, long_n, long_tokens; a dry run returns after it */
    DRIFT_LAB_PHASE_LEG_BEGIN,   /* a matrix leg starts (r->leg; its spec and weights) */
    DRIFT_LAB_PHASE_LEG_END,     /* it returned leg_rc (leg_err), its summary in r->main or r->lng */
    DRIFT_LAB_PHASE_STOCHASTIC,  /* the stochastic leg's runs ended: stoch_rc, stoch_scores, stoch_wall_s */
    DRIFT_LAB_PHASE_COMPARED,    /* r->stochastic compared (stoch_ran = 1) */
    DRIFT_LAB_PHASE_CUTS,        /* r->cuts and r->cache counted */
    DRIFT_LAB_PHASE_DONE         /* the flip table and its analyses: drift_lab_run returns */
} drift_lab_phase;

/* The phase's name ("models", "safety", "design", "size", "estimate",
 * "planned", "leg_begin", "leg_end", "stochastic", "compared", "cuts",
 * "done"). */
DRIFT_API const char *drift_lab_phase_name(drift_lab_phase p);

typedef enum drift_lab_leg {
    DRIFT_LAB_LEG_MAIN = 0,      /* the matrix (study.spec) */
    DRIFT_LAB_LEG_LONG = 1       /* --quick's long-context subset (study.long_spec) */
} drift_lab_leg;

/* What the study did, filled as it goes (the progress callback may read it
 * during a phase event; the stochastic leg's fields, stoch_* and
 * stochastic, are its thread's until the STOCHASTIC phase). Free with
 * drift_lab_result_clear. */
typedef struct drift_lab_result {
    drift_lab_phase phase;       /* the last phase reached */
    drift_lab_study study;       /* models, evaluators, design */
    /* the session's store, open from before the size until
     * drift_lab_result_clear (the report reads it); NULL in a dry run
     * without a store */
    drift_store *store;
    long cores;                  /* online CPUs */
    int jobs;                    /* configurations side by side (resolved) */
    /* size and estimate */
    drift_lab_plan plan;
    drift_status design_rc, size_rc, estimate_rc;
    drift_error size_err;
    double *weights;             /* (spec->n_configs,) the cost model's seconds per configuration (0: unknown) */
    double *long_weights;        /* (long_spec->n_configs,) the same for the long-context subset */
    double est_main_s, est_long_s; /* their sums */
    size_t long_n;               /* long-context prompts */
    double long_tokens;          /* prompt tokens of a long-context prompt, by the cost model (0: unknown) */
    double gen_s;                /* the estimate's generation seconds (0: none) */
    int dry_run;                 /* 1: stopped after the estimate */
    /* the matrix legs */
    drift_lab_leg leg;           /* the leg of the last LEG_BEGIN / LEG_END */
    drift_status leg_rc;         /* its status, with leg_err */
    drift_error leg_err;
    drift_matrix_summary main, lng; /* drift_matrix_run's summaries */
    double main_wall_s, long_wall_s, side_wall_s; /* side: long_context with the stochastic leg beside it */
    /* the stochastic leg */
    drift_status stoch_rc;       /* its runs' status, with stoch_err and stoch_sum saying where */
    drift_error stoch_err;
    drift_lab_stochastic_summary stoch_sum;
    drift_score_summary stoch_scores[4]; /* each run's scoring, in run order */
    size_t n_stoch_scores;
    double stoch_wall_s;
    drift_lab_stochastic stochastic; /* the design, then the comparison */
    int stoch_ran;               /* 1: compared */
    /* the analyses */
    drift_score_cache_stats cache; /* the verdict cache every scoring call shared */
    drift_lab_cuts cuts;         /* over the matrix's runs */
    drift_table *table;          /* the flip table against "base@{model}": the axes' levels only */
    drift_lab_findings findings; /* the pooled intervals, the logistic model, flip risk, the controls */
    drift_table_analyses analyses; /* ANOVA types 1-3 and the PRI held-out evaluation */
    int outcomes_ok;             /* outcomes counted */
    drift_store_outcomes outcomes; /* every run's failed requests */
    /* measurements */
    int64_t tokens_before, tokens_after; /* completion tokens stored before the matrix and after the legs */
    double cpu_before_s, cpu_matrix_s, cpu_side_s; /* drift_lab_cpu_s before the matrix, after it, after the side legs */
} drift_lab_result;

/* The study (see the top of this file): drift_lab_models_find,
 * drift_lab_safety_check, drift_lab_design, opening o->db, the size and
 * the estimate (o->dry_run returns there), then the matrix (scored with
 * o->guard_spec and the study's embedder, one verdict cache for every
 * scoring call, o->jobs side by side, DRIFT_LAB_BATCH sequences per
 * step), then the long-context subset (recheck: the same runs gain
 * long-context answers; a configuration whose every request fails is no
 * error) with the stochastic leg on a thread of its own beside it (its own
 * store handle), the stochastic comparison, the cut answers, the flip
 * table against "ref@{model}", its ANOVA (types 1-3) and PRI held-out
 * evaluation on every core, and the store's failed requests. Reports each
 * phase through o->progress and stops at the first failure, returning it
 * (r->phase says how far it came; a leg's failure is also in leg_rc /
 * leg_err, the stochastic runs' in stoch_rc / stoch_err). r is zeroed
 * first and filled in every case; free it with drift_lab_result_clear.
 * Prints nothing, writes nothing but the store. */
DRIFT_API drift_status drift_lab_run(const drift_lab_opts *o, drift_lab_result *r, drift_error *err);

/* Closes the store and frees what r holds; zeroes r. */
DRIFT_API void drift_lab_result_clear(drift_lab_result *r);

/* CPU seconds (user + system) this process and its waited-for children
 * (the code sandbox's programs) have used so far: the lab's readings. */
DRIFT_API double drift_lab_cpu_s(void);

/* ---- the lab's report sentences (lab_result.h's renderers) ---- */

/* The report layer's view of r (lab_result.h): the fixtures flag, safety
 * and why not, --quick's long-context size, the cut answers, why chat was
 * not computable (the main leg's scoring), the store's failed requests
 * (when counted), the stochastic leg (when compared), the flip table and
 * its analyses. out points into r: valid while r is. */
DRIFT_API void drift_lab_result_report(const drift_lab_result *r, drift_lab_report *out);

/* drift_lab_report_summary_render of r's view (drift_lab_result_report). */
DRIFT_API drift_status drift_lab_result_summary_render(const drift_lab_result *r, char **text, char **html,
                                                       drift_error *err);

/* drift_lab_report_note_render of r's view (drift_lab_result_report). */
DRIFT_API drift_status drift_lab_note_render(const drift_lab_result *r, char **out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
