/* prom.h - a writer of the Prometheus text exposition format, version
 * 0.0.4 (what a `/metrics` endpoint answers, Content-Type
 * "text/plain; version=0.0.4; charset=utf-8"): counters, gauges and
 * histograms with fixed buckets.
 *
 * A family is declared once (its "# HELP" and "# TYPE" lines) and its
 * samples follow it, so every family is one contiguous group as the
 * format requires; a name declared twice is refused. Names, label names
 * and label values are checked or escaped by the format's rules
 * (prom_text.c lists them); values are written so they read back exactly
 * ("NaN", "+Inf", "-Inf", else the shortest decimal that round-trips).
 *
 *   drift_prom p;
 *   drift_prom_init(&p);
 *   drift_prom_family(&p, "driftbench_mirrored_total", DRIFT_PROM_COUNTER, "Requests mirrored.", err);
 *   drift_prom_sample(&p, NULL, 0, 1027, err);
 *   char *text = drift_prom_steal(&p);   // then drift_prom_free(&p) */
#ifndef DRIFTBENCH_PROM_H
#define DRIFTBENCH_PROM_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/text.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DRIFT_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef enum drift_prom_type {
    DRIFT_PROM_COUNTER = 0,
    DRIFT_PROM_GAUGE = 1,
    DRIFT_PROM_HISTOGRAM = 2,
    DRIFT_PROM_UNTYPED = 3
} drift_prom_type;

typedef struct drift_prom_label {
    const char *name;   /* [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" */
    const char *value;  /* any text; escaped on output, bad UTF-8 bytes become U+FFFD */
} drift_prom_label;

typedef struct drift_prom {
    drift_buf out;            /* the exposition so far */
    drift_buf names;          /* "\nname\n" for every family declared */
    char family[128];         /* the family samples now go to; "" before the first */
    drift_prom_type type;
    int failed;               /* an allocation failed: out is incomplete */
} drift_prom;

DRIFT_API void drift_prom_init(drift_prom *p);
DRIFT_API void drift_prom_free(drift_prom *p);
/* The text written so far (the caller frees it; "" if none) and an empty
 * writer; NULL if an allocation failed on the way. */
DRIFT_API char *drift_prom_steal(drift_prom *p);

/* Starts family `name` ([a-zA-Z_:][a-zA-Z0-9_:]*, at most 127 bytes, not
 * declared before in this writer) with its HELP text (any text, escaped;
 * may be NULL: no HELP line) and TYPE. DRIFT_ERR_INVALID naming the rule
 * broken; DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_prom_family(drift_prom *p, const char *name, drift_prom_type type, const char *help,
                                         drift_error *err);
/* One sample of the current counter, gauge or untyped family, with
 * n_labels labels (distinct valid names). A counter's value must be >= 0
 * (not NaN). DRIFT_ERR_INVALID when there is no such family, on a bad
 * label or value. */
DRIFT_API drift_status drift_prom_sample(drift_prom *p, const drift_prom_label *labels, size_t n_labels,
                                         double value, drift_error *err);

/* ---- histograms with fixed buckets ---- */
#define DRIFT_PROM_MAX_BUCKETS 32

typedef struct drift_prom_hist {
    size_t n_bounds;                              /* finite upper bounds, strictly increasing */
    double bounds[DRIFT_PROM_MAX_BUCKETS];
    uint64_t counts[DRIFT_PROM_MAX_BUCKETS + 1];  /* per bucket (not cumulative): counts[i] holds
                                                     bounds[i-1] < x <= bounds[i]; the last, x > every bound */
    double sum;                                   /* of the observations */
    uint64_t count;                               /* observations */
} drift_prom_hist;

/* An empty histogram over n (1..DRIFT_PROM_MAX_BUCKETS) finite, strictly
 * increasing upper bounds; the +Inf bucket is implicit. DRIFT_ERR_INVALID. */
DRIFT_API drift_status drift_prom_hist_init(drift_prom_hist *h, const double *bounds, size_t n, drift_error *err);
/* Counts x in its bucket (x <= bound, as Prometheus's "le"); a NaN is not
 * counted (returns -1), else 0. */
DRIFT_API int drift_prom_hist_observe(drift_prom_hist *h, double x);
/* The fixed buckets of an SDR histogram (1 - cosine of two answers'
 * embeddings; compare's drift threshold 0.30 is one of them). */
DRIFT_API const double *drift_prom_sdr_bounds(size_t *n);
/* The current histogram family's series for one label set: the
 * cumulative name_bucket{...,le="..."} lines, +Inf last, then name_sum
 * and name_count. "le" is not allowed among the labels. DRIFT_ERR_INVALID
 * when the current family is not a histogram or on a bad label. */
DRIFT_API drift_status drift_prom_histogram(drift_prom *p, const drift_prom_label *labels, size_t n_labels,
                                            const drift_prom_hist *h, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
