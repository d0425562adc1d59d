/* alarm.h - an alarm on a stream of paired outcomes: per drift class, an
 * anytime-valid confidence sequence on the flip (disagreement) rate,
 * checked against a budget after every observation.
 *
 * Each observation is one paired comparison of a class ("exact", "json",
 * "tool", ...): flipped or not. The alarm keeps two counts (O(1) memory,
 * exact integers, so a JSON snapshot resumes bit for bit) and a state:
 *   open    the confidence sequence still holds the budget
 *   alarm   its lower bound went above the budget (latched: the evidence,
 *           once enough, stays enough; a new candidate gets a new alarm)
 *   clear   its upper bound is under the budget now (not latched: more
 *           flips can reopen it, and an alarm can still follow)
 * Guarantee (alarm.c proves it, docs/alarm.md says it for operators): if
 * every observation's chance of a flip, given all before it, is at most
 * the budget, the alarm ever fires with probability <= alpha, over the
 * whole stream however long; likewise "clear" ever shows with probability
 * <= alpha if every chance is at least the budget. For a constant rate p,
 * [lo, hi] covers p at every step at once with probability >= 1 - alpha.
 * Classes are separate alarms, each at its own alpha (k classes: up to
 * k * alpha for any of them, by the union bound). An alarm is plain data
 * with no lock: a caller with several threads serialises the calls on one
 * alarm (the functions touch no global state: lgamma_r, not lgamma). */
#ifndef DRIFTBENCH_ALARM_H
#define DRIFTBENCH_ALARM_H

#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum drift_alarm_state {
    DRIFT_ALARM_OPEN = 0,
    DRIFT_ALARM_FIRING = 1,
    DRIFT_ALARM_CLEAR = 2
} drift_alarm_state;

/* What one observation changed: the caller logs it the moment it happens. */
typedef enum drift_alarm_event {
    DRIFT_ALARM_EV_NONE = 0,
    DRIFT_ALARM_EV_RAISED = 1,   /* open or clear -> alarm */
    DRIFT_ALARM_EV_CLEARED = 2,  /* open -> clear */
    DRIFT_ALARM_EV_REOPENED = 3  /* clear -> open (the upper bound is back over the budget) */
} drift_alarm_event;

typedef struct drift_alarm {
    char name[64];             /* the drift class, as the caller names it */
    double budget;             /* the flip rate allowed, in [0, 1] */
    double alpha;              /* error level, in (0, 1) */
    double prior_a, prior_b;   /* Beta(a, b) mixing distribution (alarm.c) */
    int64_t n;                 /* observations so far */
    int64_t flips;             /* of them, flipped */
    drift_alarm_state state;
    int64_t raised_at;         /* n when the alarm fired; 0: never */
    int64_t cleared_at;        /* n when it first showed clear; 0: never */
} drift_alarm;

/* A new alarm for class `name` (at most 63 bytes, not empty) at `budget`
 * (a rate in [0, 1]) and `alpha` (in (0, 1)), with the default mixing
 * distribution Beta(1, 1/m - 1), m = min(2 * max(budget, 1e-4), 1/2): its
 * mean at twice the budget (alarm.c, bench/alarm_bench.c compares).
 * DRIFT_ERR_INVALID naming the bad value. */
DRIFT_API drift_status drift_alarm_init(drift_alarm *a, const char *name, double budget, double alpha,
                                        drift_error *err);
/* Another mixing distribution Beta(pa, pb), both > 0 and finite, before
 * the first observation (else DRIFT_ERR_INVALID): it moves where the
 * sequence is tightest, never its validity. */
DRIFT_API drift_status drift_alarm_set_prior(drift_alarm *a, double pa, double pb, drift_error *err);

/* One observation (flipped: nonzero = a flip), then the budget test. */
DRIFT_API drift_alarm_event drift_alarm_add(drift_alarm *a, int flipped);
/* n observations with `flips` flips at once (0 <= flips <= n), tested
 * only after the last: the guarantee holds (a subset of the times is
 * looked at), the alarm can come later than one at a time would say.
 * DRIFT_ALARM_EV_NONE without change on bad counts or an overflow. */
DRIFT_API drift_alarm_event drift_alarm_add_counts(drift_alarm *a, int64_t n, int64_t flips);

/* The confidence sequence now: every rate m with log M_n(m) < log(1/alpha)
 * (an interval around flips/n; [0, 1] before any observation). Not the
 * running intersection: the latched alarm is what remembers. Accurate to
 * 1e-12 (bisection). */
DRIFT_API void drift_alarm_bounds(const drift_alarm *a, double *lo, double *hi);
/* log M_n(m): the mixture martingale (the evidence against rate m) after
 * the observations so far; +inf where a count makes m impossible (a flip
 * at m = 0). The alarm compares log M_n(budget) with log(1/alpha). */
DRIFT_API double drift_alarm_log_evidence(const drift_alarm *a, double m);

/* "open", "alarm", "clear". */
DRIFT_API const char *drift_alarm_state_name(drift_alarm_state s);
/* "raised", "cleared", "reopened", "none". */
DRIFT_API const char *drift_alarm_event_name(drift_alarm_event e);

/* One line for the log, no newline, e.g.
 * "json: ALARM after 1200 pairs: 81 flips, rate 6.75%, 95% confidence
 *  sequence [5.03%, 8.94%] > budget 5.00%". -1 on nomem. */
DRIFT_API int drift_alarm_describe(const drift_alarm *a, drift_buf *out);

/* The alarm as one JSON object (malloc'd text; NULL on nomem):
 *   {"driftbench_alarm": 1, "class": ..., "method": "beta-binomial mixture",
 *    "budget": ..., "alpha": ..., "prior_a": ..., "prior_b": ...,
 *    "n": ..., "flips": ..., "state": "open", "raised_at": ...,
 *    "cleared_at": ...}
 * Reals are written to round-trip; from_json restores exactly what was
 * written, so a restarted process resumes the same sequence. from_json:
 * DRIFT_ERR_PARSE on malformed JSON or a missing or wrong-typed member,
 * DRIFT_ERR_INVALID on values out of range or inconsistent (flips > n,
 * an alarm state without raised_at, a version other than 1). */
DRIFT_API char *drift_alarm_to_json(const drift_alarm *a);
DRIFT_API drift_status drift_alarm_from_json(const char *text, drift_alarm *a, drift_error *err);

struct drift_prom;
/* The alarms' metric families into a Prometheus text writer (prom.h), one
 * sample per alarm labelled class="<name>":
 *   driftbench_compared_total      counter  observations
 *   driftbench_flips_total         counter  flips
 *   driftbench_flip_budget         gauge    the budget
 *   driftbench_flip_rate_lower     gauge    the confidence sequence's bounds
 *   driftbench_flip_rate_upper     gauge
 *   driftbench_alarm_firing        gauge    1 while the alarm is latched
 *   driftbench_alarm_clear         gauge    1 while clear
 * The writer's error (prom.h) on failure. */
DRIFT_API drift_status drift_alarm_write_prom(const drift_alarm *alarms, int n_alarms, struct drift_prom *p,
                                              drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
