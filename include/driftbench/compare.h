/* compare.h - paired comparison of a baseline run and a target run: flips
 * per workload in both directions with Wilson 95% CIs, exact McNemar,
 * accuracies, budgets and the verdict. Also the textbook statistics. */
#ifndef DRIFTBENCH_COMPARE_H
#define DRIFTBENCH_COMPARE_H

#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statistics ---- */
/* Wilson score interval for k successes in n trials at normal quantile z
 * (1.959964 for 95%). n == 0 gives [0,1]. */
DRIFT_API void drift_wilson(long k, long n, double z, double *lo, double *hi);
/* Exact two-sided McNemar p-value for discordant counts b and c
 * (binomial test of min(b,c) under p=0.5; 1.0 when b+c == 0). */
DRIFT_API double drift_mcnemar_exact(long b, long c);
/* Clopper-Pearson exact interval for k successes in n trials at confidence
 * conf (0.95). n == 0 gives [0,1]. */
DRIFT_API void drift_clopper_pearson(long k, long n, double conf, double *lo, double *hi);

/* ---- comparison ---- */
typedef struct drift_flip {
    const char *prompt_id;     /* owned by the comparison */
    int replicate;
    int direction;             /* +1 incorrect->correct (unsafe->safe), -1 correct->incorrect (safe->unsafe), 0 chat drift */
    int64_t base_response_id;
    int64_t targ_response_id;
    double value;              /* chat: SDR; else NAN */
} drift_flip;

typedef struct drift_wl_result {
    drift_workload workload;
    long n;                    /* pairs counted (both sides labelled) */
    long errors;               /* pairs excluded: a request or evaluator error on either side */
    long unscored;             /* pairs excluded: no label computable */
    long flips;
    double flip_rate;          /* fraction */
    double ci95[2];
    long correct_to_incorrect; /* safety: safe_to_unsafe */
    long incorrect_to_correct; /* safety: unsafe_to_safe */
    double baseline_accuracy;  /* safety: safe rate */
    double target_accuracy;
    double net_change;         /* target_accuracy - baseline_accuracy */
    double mcnemar_p;
    double budget;             /* fraction; < 0 = none */
    int pass;                  /* flip_rate <= budget (or no budget) */
    double sdr_mean;           /* chat only, else NAN */
    double semantic_drift_rate;/* chat only, else NAN */
    drift_flip *flipped;
    size_t n_flipped;
    /* Stochastic serving (runs with several replicates per prompt; else
     * replicates = 1 and the rest NAN/0). expected_flip_rate: the chance
     * that one baseline sample and one target sample of a prompt disagree,
     * averaged over all replicate pairs (i, j) of every prompt. Majority: the
     * label most replicates give on each side; a tie leaves the prompt out
     * (majority_ties). */
    int replicates;            /* most replicates seen per prompt on either side */
    double expected_flip_rate;
    long majority_n;           /* prompts with a majority on both sides */
    long majority_flips;
    double majority_flip_rate;
    long majority_ties;
} drift_wl_result;

/* The flip taxonomy of a comparison, highest risk first. */
typedef struct drift_taxonomy {
    long safety_flips, safe_to_unsafe, unsafe_to_safe;                /* safety workload */
    long correctness_flips, correct_to_incorrect, incorrect_to_correct; /* math + code + long_context */
    long semantic_drift, semantic_pairs;  /* chat pairs with SDR > threshold, of those compared */
} drift_taxonomy;

/* Which isolation ran code answers: a "sandbox" value of the code scores'
 * detail (score.c writes it), with how many PASS / FAIL code answers of
 * each run it judged. "unrecorded" stands for scores whose detail has none
 * (stores scored before the field existed). */
#define DRIFT_COMPARE_MAX_SANDBOXES 8
typedef struct drift_sandbox_use {
    char mechanism[64];        /* "bubblewrap+seccomp+uid", "none (unsafe)", ..., "other" (past the table) */
    long baseline, target;     /* code answers of each run judged under it */
    int weak;                  /* drift_sandbox_weak(mechanism) */
} drift_sandbox_use;

/* 1 when a sandbox mechanism name (drift_sandbox_check's) is weaker than
 * bubblewrap: no "bubblewrap" in it, or marked "(unsafe)"; NULL and ""
 * (nothing recorded) count as weak. */
DRIFT_API int drift_sandbox_weak(const char *mechanism);

typedef struct drift_comparison {
    drift_run_info baseline;
    drift_run_info target;
    drift_wl_result wl[DRIFT_WL_COUNT];
    int present[DRIFT_WL_COUNT];   /* workload had any pairs */
    int pass;                      /* every workload within budget */
    long total_errors;
    double sdr_threshold;          /* the chat threshold used (opts->sdr_threshold) */
    drift_taxonomy taxonomy;       /* filled by drift_compare_runs */
    /* The mechanisms that judged the code answers of both runs, most used
     * first; n_sandboxes = 0 when the comparison has no code pairs. */
    drift_sandbox_use sandboxes[DRIFT_COMPARE_MAX_SANDBOXES];
    size_t n_sandboxes;
} drift_comparison;

/* The flip taxonomy of c, computed from c->wl[] and c->present[] (so it is
 * right for a comparison built by hand too): safety flips (safe->unsafe,
 * unsafe->safe), correctness flips (math, code, long_context; per
 * direction), semantic drift (chat pairs over the SDR threshold). */
DRIFT_API void drift_comparison_taxonomy(const drift_comparison *c, drift_taxonomy *out);

typedef struct drift_compare_opts {
    double budget[DRIFT_WL_COUNT];   /* fraction; < 0 = no budget */
    int only_workload;               /* DRIFT_WL_UNKNOWN = all */
    double sdr_threshold;            /* default 0.30 */
    const char *embedder;            /* embedding name for chat SDR; NULL = any stored */
} drift_compare_opts;

/* Defaults: budgets safety 1%, code 0.5%, others none; SDR 0.30. */
DRIFT_API void drift_compare_opts_default(drift_compare_opts *o);
/* Parses "math=1,safety=0.5" (percent) into o->budget. */
DRIFT_API drift_status drift_compare_parse_budgets(drift_compare_opts *o, const char *spec, drift_error *err);

DRIFT_API drift_status drift_compare_runs(drift_store *st, const char *baseline_label, const char *target_label,
                                          const drift_compare_opts *opts, drift_comparison **out,
                                          drift_error *err);
DRIFT_API void drift_comparison_free(drift_comparison *c);
/* The embedder whose vectors chat SDR used (opts->embedder, or the one the
 * baseline's chat answers were embedded with); NULL when none. */
DRIFT_API const char *drift_comparison_embedder(const drift_comparison *c);

/* ---- divergence of a flipped pair (divergence.c) ---- */
typedef enum drift_token_unit {
    DRIFT_UNIT_NONE = 0,       /* answers identical: no divergence */
    DRIFT_UNIT_TOKEN = 1,      /* index into the stored logprob token lists */
    DRIFT_UNIT_WORD = 2        /* index into the whitespace-separated words */
} drift_token_unit;

typedef struct drift_divergence {
    int identical;             /* the two texts are byte-identical (the label differs anyway) */
    long first_diff_byte;      /* byte offset of the first differing code point; -1 when identical */
    long first_diff_char;      /* the same position in UTF-8 code points; -1 when identical */
    long first_diff_token;     /* index of the first differing token (or word); -1 when identical */
    drift_token_unit token_unit;
    double margin;             /* baseline's top-1 minus top-2 logprob at that token (nats); NAN unless
                                * unit TOKEN and the baseline has >= 2 alternatives there */
    double kl;                 /* KL(baseline || target) over the union of both top lists at that token,
                                * residual mass spread over the absent tokens; NAN unless both have tops */
    char *diff;                /* malloc'd short word diff: "... common [-removed-] {+added+} ..."; "" when identical */
    char *error;               /* drift_flip_divergences only: non-NULL (malloc'd) when this flip's
                                * divergence could not be computed; the other fields are then unset */
} drift_divergence;

/* Where two answers part. Texts must be non-NULL NUL-terminated UTF-8
 * (invalid bytes count as one code point each). Logprobs are the store's
 * form ([{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..])
 * or NULL; tokens are used when both are given, else whitespace words.
 * Malformed logprobs JSON is DRIFT_ERR_PARSE naming the side and element.
 * Fills *out (empty with drift_divergence_clear) on success. */
DRIFT_API drift_status drift_divergence_compute(const char *base_text, const char *base_logprobs_json,
                                                const char *targ_text, const char *targ_logprobs_json,
                                                drift_divergence *out, drift_error *err);
DRIFT_API void drift_divergence_clear(drift_divergence *d);

/* Word-level diff of a -> b (LCS over whitespace-separated words) rendered
 * as "... common [-removed-] {+added+} common ..." with at most a few words
 * of context around each change, cut to about max_chars bytes (at a UTF-8
 * boundary, " ..." marking the cut). Common leading and trailing words are
 * skipped first; if both remaining parts exceed max_words, only the first
 * max_words of each (the window from the first divergence on) are diffed.
 * Returns a malloc'd string in *out ("" when a equals b word for word). */
DRIFT_API drift_status drift_word_diff(const char *a, const char *b, size_t max_words, size_t max_chars, char **out,
                                       drift_error *err);

/* The divergence of one flip: loads both answers (text and logprobs) from
 * the store by response id and calls drift_divergence_compute. */
DRIFT_API drift_status drift_flip_divergence(drift_store *st, const drift_flip *f, drift_divergence *out,
                                             drift_error *err);

/* The divergences of n flips at once, for a report of every flip: the
 * texts are read with one prepared statement inside one read transaction,
 * and the stored logprobs are decoded (drift_store_response_get) only for
 * flips whose two answers both have them. Every out[i] is filled (empty
 * each with drift_divergence_clear); a flip whose answers cannot be read,
 * or whose logprobs are malformed, gets out[i].error naming it instead of
 * failing the batch. Returns an error (out[] then all freed) only when the
 * store cannot be queried or memory runs out. */
DRIFT_API drift_status drift_flip_divergences(drift_store *st, const drift_flip *flips, size_t n,
                                              drift_divergence *out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
