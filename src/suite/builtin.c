/* builtin.c - built-in suites generated with ground truth (issue 4).
 * Placeholder until that issue lands: reports that they are not available. */
#include "driftbench/suite.h"

drift_status drift_suite_builtin(const char *spec, drift_suite **out, drift_error *err) {
    if (out) *out = NULL;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: built-in suites are not available yet (issue 4)",
                           spec ? spec : "builtin");
}
