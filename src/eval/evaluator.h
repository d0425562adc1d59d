/* evaluator.h - the evaluator method table (internal): one method struct per
 * evaluator file (math.c, code.c, safety.c, chat.c, longctx.c), one row per
 * workload in evaluator.c, as the workload traits are one row per workload
 * (suite/workload.h). The score stage (pipeline/score.c) opens, names, keys
 * and runs an evaluator through its row and never switches on the workload:
 * a sixth workload is a traits row, a row here and one evaluator file.
 *
 * How a method judges (eval_how) decides how the score stage feeds it:
 *   EVAL_EACH     judge() one answer at a time (math, long_context)
 *   EVAL_THREADS  judge() one answer at a time on the stage's worker threads
 *                 (code: each answer runs in a sandbox); DRIFT_ERR_UNSUPPORTED
 *                 makes the evaluator unavailable, another error is an
 *                 error label (never a fail)
 *   EVAL_BATCH    judge_batch() on batches of requests + answers (safety's
 *                 guard); a failed batch makes the evaluator unavailable
 *   EVAL_EMBED    embed() batches of answers; the stage stores the vectors
 *                 and a NONE score row (chat: the verdict is pairwise, at
 *                 compare time) */
#ifndef DRIFT_EVAL_EVALUATOR_H
#define DRIFT_EVAL_EVALUATOR_H

#include "driftbench/eval.h"
#include "driftbench/types.h"

/* What the score stage's options say to the evaluators. */
typedef struct eval_config {
    const char *guard_spec;       /* safety: the guard (NULL: none) */
    const char *embedder_spec;    /* chat: the embedder (NULL: none) */
    double long_f1_threshold;     /* long_context: F1 >= this is correct */
    const drift_code_opts *code;  /* code: the sandbox's settings */
} eval_config;

typedef enum eval_how { EVAL_EACH = 0, EVAL_THREADS, EVAL_BATCH, EVAL_EMBED } eval_how;

/* What of the prompt a verdict depends on besides the answer (the verdict
 * cache's key). */
typedef enum eval_key_input { EVAL_KEY_REFERENCE = 0, EVAL_KEY_REQUEST, EVAL_KEY_NONE } eval_key_input;

/* Appends one field to a cache key (the stage's length-prefixed encoding). */
typedef void (*eval_key_add)(void *key, const char *field);

typedef struct eval_method {
    const char *name;          /* the evaluator name stored with each score; NULL: the opened
                                  state names itself (state_name) */
    eval_how how;
    eval_key_input key_input;
    const char *unavailable;   /* the reason's prefix when open fails: "safety: no guard available: " */
    const char *no_spec;       /* the reason when open fails without a message */
    const char *failed;        /* the reason's prefix when a batch fails: "safety: guard failed: " */
    /* Opens the evaluator (NULL: nothing to open). *state may stay NULL. */
    drift_status (*open)(const eval_config *cfg, void **state, drift_error *err);
    const char *(*state_name)(const void *state);
    /* The isolation an answer ran in (runs_code workloads; NULL: none). */
    const char *(*isolation)(const void *state);
    /* Appends the settings a verdict depends on (NULL: none). */
    void (*key)(const eval_config *cfg, const void *state, eval_key_add add, void *k);
    drift_status (*judge)(const eval_config *cfg, void *state, const char *answer, const char *reference_json,
                          drift_eval_result *out, drift_error *err);
    drift_status (*judge_batch)(void *state, const char *const *requests, const char *const *answers, size_t n,
                                drift_eval_result *out, drift_error *err);
    drift_status (*embed)(void *state, const char *const *texts, size_t n, float **vecs, int *dim,
                          drift_error *err);
    void (*close)(void *state); /* NULL: nothing to close */
} eval_method;

/* The methods, one per evaluator file. */
extern const eval_method eval_math_method;      /* math.c */
extern const eval_method eval_code_method;      /* code.c (state: the isolation's name, char[128]) */
extern const eval_method eval_safety_method;    /* safety.c (state: drift_guard) */
extern const eval_method eval_chat_method;      /* chat.c (state: drift_embedder) */
extern const eval_method eval_longctx_method;   /* longctx.c */

/* The row of wl; NULL for DRIFT_WL_UNKNOWN or out of range. */
const eval_method *eval_method_of(drift_workload wl);

/* The name the evaluator of m records (its fixed name or its state's). */
const char *eval_method_name(const eval_method *m, const void *state);

#endif
