/* report_internal.h - helpers the renderers of src/report/ share (not
 * exported; report.h is the public side). */
#ifndef DRIFT_REPORT_INTERNAL_H
#define DRIFT_REPORT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

/* An R^2 as the reports say it: with `decimals` decimals when finite;
 * otherwise why it is not defined (drift_r2's two cases): "too few rows"
 * when it was computed over fewer than two rows (n < 2), else "no
 * variance" (the rows share one flip rate: nothing to predict). Returns buf
 * or a literal. */
const char *report_r2_text(double r2, size_t n, int decimals, char *buf, size_t cap);

/* A number for the JSON outputs: v, or null when it is not finite (NaN or
 * an infinity). A new reference. */
json_t *report_json_num(double v);

#endif
