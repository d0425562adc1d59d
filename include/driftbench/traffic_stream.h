/* traffic_stream.h - judging traffic pairs as a stream (issue 39): every
 * pair of answers is judged the moment it is complete (traffic.h's
 * classes, and the guard and SDR when given), counted, and fed to one
 * alarm per gated class (alarm.h: an anytime-valid confidence sequence on
 * the flip rate against the class's budget), so that a replay (in log
 * order) or a shadow proxy (in completion order) says the moment the
 * evidence is enough. docs/monitoring.md.
 *
 *   drift_traffic_stream *s;
 *   drift_traffic_stream_new(&stats, 0.05, NULL, NULL, &s, &err);
 *   for each pair:
 *     drift_traffic_stream_add(s, req, base_msg, targ_msg, base_err, targ_err, 1, t_ms, &pair, &err);
 *     events = drift_traffic_stream_events(s, &n);   // log each
 *   drift_traffic_stream_write_prom(s, &prom, &err);  // a /metrics page
 *   char *snap = drift_traffic_stream_to_json(s);     // resume exactly later
 *
 * A stream is plain data with no lock: a caller with several threads
 * serialises the calls on one stream. The library never prints: the
 * caller logs the events. */
#ifndef DRIFTBENCH_TRAFFIC_STREAM_H
#define DRIFTBENCH_TRAFFIC_STREAM_H

#include <stdint.h>

#include "driftbench/alarm.h"
#include "driftbench/eval.h"
#include "driftbench/prom.h"
#include "driftbench/traffic.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_traffic_stream drift_traffic_stream;

/* What one pair changed in one class's alarm. */
typedef struct drift_traffic_stream_event {
    int cls;                 /* drift_traffic_class */
    drift_alarm_event event; /* raised, cleared, reopened */
    int64_t pair;            /* 1-based number of the pair (every pair added, errors included) */
    int64_t observed;        /* the class's observations then (the alarm's n) */
    int64_t flips;           /* and its flips */
    double lo, hi;           /* the confidence sequence after it */
    double budget;
    int64_t t_unix_ms;       /* the pair's time */
} drift_traffic_stream_event;

/* Per class counts. */
typedef struct drift_traffic_stream_class {
    int gated;               /* budget >= 0: the class has an alarm */
    int64_t n, flips;        /* counted pairs (the alarm's observations when gated) */
    int64_t worse, better;   /* directional classes */
    int64_t left_out;        /* request errors where it applies, and pairs it could not judge */
    int64_t raised_pair;     /* the pair (1-based, as the event's) at which the alarm was raised; 0 never */
} drift_traffic_stream_class;

/* One time window: pairs whose time falls in [start, start + window). */
typedef struct drift_traffic_window {
    int64_t start_ms;        /* unix ms, a multiple of the window size */
    int64_t pairs;           /* every pair added in it */
    int64_t compared;        /* of them, both answered and comparable */
    int64_t flips[DRIFT_TC_COUNT];
    int64_t left_out[DRIFT_TC_COUNT];
    double lo[DRIFT_TC_COUNT], hi[DRIFT_TC_COUNT]; /* the alarm's bounds after the window's last pair
                                                    * (NAN for a class without an alarm) */
    int state[DRIFT_TC_COUNT];                     /* drift_alarm_state then (-1: no alarm) */
} drift_traffic_window;

#define DRIFT_TRAFFIC_STREAM_MAX_WINDOWS 4096 /* the oldest are dropped beyond (counted) */

/* A new stream: stats gives the budgets (< 0: counted, no alarm), the SDR
 * threshold (NULL: drift_traffic_opts_default); alpha (0, 1) each alarm's
 * error level. guard and embedder are borrowed (may be NULL: the guard or
 * semantic class is off); they must outlive the stream. DRIFT_ERR_INVALID
 * on a bad alpha or budget. */
DRIFT_API drift_status drift_traffic_stream_new(const drift_traffic_opts *stats, double alpha, drift_guard *guard,
                                                drift_embedder *embedder, drift_traffic_stream **out,
                                                drift_error *err);
DRIFT_API void drift_traffic_stream_free(drift_traffic_stream *s);

/* Windows of window_ms (> 0; 0: none, the default) over the pairs' times.
 * DRIFT_ERR_INVALID after the first pair or on a negative size. */
DRIFT_API drift_status drift_traffic_stream_set_window(drift_traffic_stream *s, int64_t window_ms,
                                                       drift_error *err);

/* One pair. request_json: the request body; base_msg / targ_msg the two
 * answers in drift_traffic_reply_message's form (ignored on that side's
 * error); err_base / err_targ nonzero: that side's request failed (the pair
 * is left out where a class applies, never a flip); comparable 0: the pair
 * is only counted as not comparable (e.g. the two sides were asked
 * differently); t_unix_ms the pair's time (<= 0: now). The pair is judged
 * (drift_traffic_pair_judge, the code class by drift_traffic_pair_set_code
 * with the default sandbox, synchronously here: up to two sandbox runs
 * for a pair whose Python blocks differ; then the guard and the SDR when
 * the stream has them), counted, and each gated class's alarm gets the outcome; the
 * events it caused are drift_traffic_stream_events until the next add.
 * out_pair (may be NULL) gets the judgement. DRIFT_ERR_PARSE when a
 * message is not the message form (nothing is counted); a guard's or
 * embedder's failure is not an error: the class is left out for the pair
 * (counted). The signature takes a shadow proxy's on_pair arguments
 * as they are. */
DRIFT_API drift_status drift_traffic_stream_add(drift_traffic_stream *s, const char *request_json,
                                                const char *base_msg, const char *targ_msg, int err_base,
                                                int err_targ, int comparable, int64_t t_unix_ms,
                                                drift_traffic_pair *out_pair, drift_error *err);
/* The same for a pair already judged (a replay judges guard and SDR in
 * batches): pair may be NULL when either side failed or it is not
 * comparable. request_json is read only for an error pair (which classes
 * apply). */
DRIFT_API drift_status drift_traffic_stream_add_judged(drift_traffic_stream *s, const char *request_json,
                                                       const drift_traffic_pair *pair, int err_base, int err_targ,
                                                       int comparable, int64_t t_unix_ms, drift_error *err);

/* The events of the last add (NULL, 0 when none). */
DRIFT_API const drift_traffic_stream_event *drift_traffic_stream_events(const drift_traffic_stream *s, size_t *n);

/* Counters and state. */
DRIFT_API int64_t drift_traffic_stream_pairs(const drift_traffic_stream *s);        /* every pair added */
DRIFT_API int64_t drift_traffic_stream_compared(const drift_traffic_stream *s);     /* both answered, comparable */
DRIFT_API int64_t drift_traffic_stream_not_comparable(const drift_traffic_stream *s);
DRIFT_API int64_t drift_traffic_stream_errors(const drift_traffic_stream *s);       /* either side failed */
DRIFT_API const drift_traffic_stream_class *drift_traffic_stream_class_get(const drift_traffic_stream *s, int cls);
/* The class's alarm, NULL when the class is not gated. */
DRIFT_API const drift_alarm *drift_traffic_stream_alarm(const drift_traffic_stream *s, int cls);
DRIFT_API const drift_prom_hist *drift_traffic_stream_sdr_hist(const drift_traffic_stream *s);
DRIFT_API const drift_traffic_window *drift_traffic_stream_windows(const drift_traffic_stream *s, size_t *n,
                                                                    int64_t *dropped);

/* One line for a log about an event, no newline, e.g. "alarm raised:
 * json at pair 183 (20 flips in 183 pairs; 95% confidence sequence
 * [5.25%, 19.18%] > budget 5.00%)". -1 on nomem. */
DRIFT_API int drift_traffic_stream_describe_event(const drift_traffic_stream *s, const drift_traffic_stream_event *e,
                                                  drift_buf *out);

/* Appends the stream's metric families (names in docs/monitoring.md):
 *   driftbench_traffic_pairs_total            counter  every pair
 *   driftbench_traffic_compared_total         counter  both answered and comparable
 *   driftbench_traffic_not_comparable_total   counter
 *   driftbench_traffic_errors_total           counter  pairs with a request error
 *   driftbench_traffic_flips_total{class}     counter  every class with a pair it applies to
 *   driftbench_traffic_left_out_total{class}  counter
 *   driftbench_traffic_sdr                    histogram (when an embedder is on)
 * then the alarms of the gated classes (drift_alarm_write_prom: the
 * driftbench_compared_total, ..._flip_rate_lower/upper, driftbench_alarm_firing
 * families labelled class=). Fits a metrics hook
 * int (*)(void *user, drift_prom *p) through a one-line wrapper. */
DRIFT_API drift_status drift_traffic_stream_write_prom(const drift_traffic_stream *s, drift_prom *p,
                                                       drift_error *err);

/* Exact resume: the whole state (settings, counts, alarms, histogram,
 * windows) as JSON {"driftbench_traffic_stream":1,...}; from_json
 * restores it (the guard and embedder are given again: the snapshot
 * records whether they were on, and a different choice is
 * DRIFT_ERR_INVALID). A stream restored and fed the rest gives the same
 * JSON as one fed everything. to_json: malloc'd, NULL on nomem. from_json:
 * DRIFT_ERR_PARSE on malformed input, DRIFT_ERR_INVALID on inconsistent
 * values. */
DRIFT_API char *drift_traffic_stream_to_json(const drift_traffic_stream *s);
DRIFT_API drift_status drift_traffic_stream_from_json(const char *text, drift_guard *guard, drift_embedder *embedder,
                                                      drift_traffic_stream **out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
