/* lab_render.c - the lab's own text blocks (report.h), pure: each a
 * function of what the lab stage or the store computed.
 *
 *   drift_lab_stochastic_render   the stochastic leg (drift_lab_stochastic
 *                                 after _compare): expected and majority-vote
 *                                 flip rates, the deterministic rate of the
 *                                 same pair and the ratio, or why not; what
 *                                 the lab prints and writes to stochastic.txt.
 *   drift_store_outcomes_render   the failed requests of a store, one
 *                                 sentence per workload with failures; the lab
 *                                 prints it under the flip table and puts it
 *                                 in the report's note. */
#include <math.h>
#include <stdlib.h>

#include "driftbench/report.h"
#include "util/util.h"

/* See report.h. */
drift_status drift_lab_stochastic_render(const drift_lab_stochastic *x, char **out, drift_error *err) {
    *out = NULL;
    if (!x) return drift_error_set(err, DRIFT_ERR_INVALID, "no stochastic leg to render");
    util_buf b = {0};
    buf_printf(&b, "expected flip rate over replicate pairs: ");
    if (isnan(x->expected_flip_rate)) buf_puts(&b, "-");
    else buf_printf(&b, "%.2f%%", 100 * x->expected_flip_rate);
    buf_puts(&b, "; majority-vote flip rate: ");
    if (isnan(x->majority_flip_rate)) buf_puts(&b, "-");
    else buf_printf(&b, "%.2f%% (%ld of %ld, %ld ties)", 100 * x->majority_flip_rate, x->majority_flips,
                    x->majority_n, x->majority_ties);
    buf_puts(&b, "\n");
    if (x->det_ok) {
        buf_printf(&b, "deterministic flip rate (temperature 0, same pair, %ld prompts): %.2f%%\n", x->det_n,
                   100 * x->det_flip_rate);
        if (isnan(x->ratio))
            buf_puts(&b, "ratio stochastic / deterministic: - (no deterministic flips to compare with)\n");
        else
            buf_printf(&b, "ratio stochastic / deterministic: %.2fx (the paper: 0.23x)\n", x->ratio);
    } else {
        buf_printf(&b, "deterministic flip rate: not available (%s)\n", x->det_reason);
    }
    *out = buf_steal(&b);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the stochastic leg");
}

/* See report.h. */
drift_status drift_store_outcomes_render(const drift_store_outcomes *o, char **out, drift_error *err) {
    *out = NULL;
    if (!o) return drift_error_set(err, DRIFT_ERR_INVALID, "no store outcomes to render");
    util_buf b = {0};
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (o->errors[w])
            buf_printf(&b, "%s: %zu of %zu requests failed (e.g. \"%s\"): failed requests are never pairs%s. ",
                       drift_workload_name((drift_workload)w), o->errors[w], o->errors[w] + o->answers[w],
                       o->common_error[w], o->answers[w] ? "" : ", so this workload has no rows");
    *out = buf_steal(&b);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the failed requests");
}
