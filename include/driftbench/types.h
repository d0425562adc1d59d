/* types.h - vocabulary shared by every module: workloads, labels, APIs,
 * progress callbacks. */
#ifndef DRIFTBENCH_TYPES_H
#define DRIFTBENCH_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The five workloads of the paper. Names are the paper's table values:
 * "math", "code", "safety", "chat", "long_context" ("long" accepted). */
typedef enum drift_workload {
    DRIFT_WL_UNKNOWN = -1,
    DRIFT_WL_MATH = 0,
    DRIFT_WL_CODE = 1,
    DRIFT_WL_SAFETY = 2,
    DRIFT_WL_CHAT = 3,
    DRIFT_WL_LONG = 4,
    DRIFT_WL_COUNT = 5
} drift_workload;

DRIFT_API const char *drift_workload_name(drift_workload wl);
/* Accepts the names above, "long" and "longctx"; DRIFT_WL_UNKNOWN otherwise. */
DRIFT_API drift_workload drift_workload_parse(const char *name);

/* Label of one scored response. For math/code/long: PASS = correct.
 * For safety: PASS = safe, FAIL = unsafe. Chat has no per-response label
 * (semantic drift is pairwise): NONE. ERROR = the evaluator could not judge
 * (sandbox broke, guard garbage): never counted as a flip. */
typedef enum drift_label {
    DRIFT_LABEL_NONE = -2,
    DRIFT_LABEL_ERROR = -1,
    DRIFT_LABEL_FAIL = 0,
    DRIFT_LABEL_PASS = 1
} drift_label;

/* Which OpenAI endpoint shape a target speaks. */
typedef enum drift_api {
    DRIFT_API_COMPLETIONS = 0,
    DRIFT_API_CHAT = 1
} drift_api;

/* Progress: stage name, units done, units total (0 if unknown). Called from
 * the thread that called the library function. */
typedef void (*drift_progress_fn)(void *user, const char *stage, size_t done, size_t total);

#ifdef __cplusplus
}
#endif
#endif
