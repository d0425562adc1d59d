/* workload.c - names of the workloads and of the paper's dimensions
 * (types.h). Everything else about a workload is in the traits table
 * (suite/workload.c), which repeats each name and alias beside the
 * workload's other traits; test_workload checks that the two agree. */
#include "driftbench/types.h"

#include <string.h>
#include <strings.h>

static const char *const wl_names[DRIFT_WL_COUNT] = {"math", "code", "safety", "chat", "long_context"};

const char *const drift_dim_names[DRIFT_DIM_COUNT] = {"model", "hardware", "precision", "framework", "workload"};

const char *drift_workload_name(drift_workload wl) {
    if (wl < 0 || wl >= DRIFT_WL_COUNT) return "unknown";
    return wl_names[wl];
}

drift_workload drift_workload_parse(const char *name) {
    if (!name) return DRIFT_WL_UNKNOWN;
    for (int i = 0; i < DRIFT_WL_COUNT; i++)
        if (strcasecmp(name, wl_names[i]) == 0) return (drift_workload)i;
    if (strcasecmp(name, "long") == 0 || strcasecmp(name, "longctx") == 0 ||
        strcasecmp(name, "long-context") == 0)
        return DRIFT_WL_LONG;
    return DRIFT_WL_UNKNOWN;
}
