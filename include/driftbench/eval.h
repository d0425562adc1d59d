/* eval.h - evaluators: one per workload, each turning (answer, reference)
 * into a label with the evidence kept in detail_json, so a user can see why
 * an answer was judged as it was. An evaluator that cannot judge returns
 * DRIFT_LABEL_ERROR (never a fail, never a flip). */
#ifndef DRIFTBENCH_EVAL_H
#define DRIFTBENCH_EVAL_H

#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_eval_result {
    int label;          /* drift_label */
    double value;       /* math: 1/0; long: F1; code: 1/0; chat: NAN */
    char *detail_json;  /* malloc'd JSON object, e.g. {"extracted":"540","rule":"strict","expected":"540"} */
} drift_eval_result;

DRIFT_API void drift_eval_result_clear(drift_eval_result *r);

/* ---- math ---- */
/* Extracts the final number from an answer: lm-eval strict "#### N", then
 * \boxed{N}, then "the answer is N", then flexible (last number). Normalizes
 * commas, "$", trailing "." and ".0". Writes the normalized number to out and
 * returns the rule name ("strict", "boxed", "answer-is", "flexible"), or
 * NULL when nothing is found ("[invalid]"). */
DRIFT_API const char *drift_math_extract(const char *answer, char *out, size_t cap);
/* Compares an extraction with the reference numerically. */
DRIFT_API drift_status drift_eval_math(const char *answer, const char *reference_json, drift_eval_result *out,
                                       drift_error *err);

/* ---- long-context QA ---- */
/* SQuAD-style token F1: lower-case, strip punctuation and articles (a, an,
 * the), split on whitespace. */
DRIFT_API double drift_token_f1(const char *prediction, const char *gold);
/* Max F1 over the reference answers; PASS when F1 >= threshold (default 0.5). */
DRIFT_API drift_status drift_eval_long(const char *answer, const char *reference_json, double threshold,
                                       drift_eval_result *out, drift_error *err);

/* ---- scoring a run ---- */
typedef struct drift_score_opts {
    double long_f1_threshold;     /* default 0.5 */
    const char *guard_spec;       /* safety guard target (NULL: built-in if available) */
    const char *embedder_spec;    /* chat embedder target (NULL: built-in if available) */
    int unsafe_code_exec;         /* run code without isolation (explicit opt-in) */
    const char *python;           /* interpreter for code; default /usr/bin/python3 */
    int jobs;                     /* parallel evaluations; 0 = number of cores */
    int rescore;                  /* recompute existing scores */
    drift_progress_fn progress;
    void *progress_user;
} drift_score_opts;

DRIFT_API void drift_score_opts_default(drift_score_opts *o);

typedef struct drift_score_summary {
    size_t scored[DRIFT_WL_COUNT];        /* labels computed now */
    size_t already[DRIFT_WL_COUNT];       /* already scored before */
    size_t eval_errors[DRIFT_WL_COUNT];   /* evaluator could not judge */
    size_t not_computable[DRIFT_WL_COUNT];/* no evaluator available (reason below) */
    char reason[DRIFT_WL_COUNT][256];     /* why not computable, e.g. "no --guard given" */
} drift_score_summary;

/* Scores every answered, unscored response of run `label` (NULL: all runs). */
DRIFT_API drift_status drift_score_run(drift_store *st, const char *label, const drift_score_opts *opts,
                                       drift_score_summary *summary, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
