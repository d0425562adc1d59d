/* alarm.c - the stream alarm (alarm.h): an anytime-valid confidence
 * sequence on a flip rate, from two counts, tested against a budget after
 * every observation.
 *
 * Setting. Observations x_1, x_2, ... in {0,1} (flipped or not) arrive one
 * at a time, without end. After n of them, S are flips and F = n - S are
 * not. For a rate m and an alternative theta in [0,1] the likelihood ratio
 *     L_n(theta; m) = (theta/m)^S ((1-theta)/(1-m))^F
 * is, step by step, the product of 1 + l (x_i - m) with the constant bet
 * l = (theta - m)/(m(1 - m)): with x in {0,1}, 1 + l(1 - m) = theta/m and
 * 1 - l m = (1 - theta)/(1 - m). So this is the sequential gate's betting
 * construction (sequential.c: Waudby-Smith & Ramdas, "Estimating means of
 * bounded random variables by betting", JRSS-B 2024, arXiv 2010.09686)
 * against a constant mean m (a stream: sampling with replacement, not the
 * suite's without-replacement mean), with constant bets mixed over a
 * Beta(a, b) distribution of theta instead of one predictable stake:
 *     M_n(m) = int L_n(theta; m) Beta(theta; a, b) dtheta
 *            = B(a + S, b + F) / (B(a, b) m^S (1 - m)^F).            (1)
 * This is the conjugate (beta-binomial) mixture of Robbins (1970) and
 * Howard, Ramdas, McAuliffe & Sekhon, "Time-uniform, nonparametric,
 * nonasymptotic confidence sequences", Ann. Statist. 49(2), 2021, arXiv
 * 1810.08240 (their beta-binomial mixture boundary for Bernoulli
 * observations; the equation number was not checked against the paper's
 * text, none being at hand here). (1) depends on (S, F) only: two
 * integers are the whole state, a restart resumes it exactly, and the
 * value is recomputed from lgamma at every step rather than accumulated,
 * so it does not drift over millions of observations (each term is ~n,
 * the cancellation costs ~n * 1e-16 of log(1/alpha) ~ 3).
 *
 * Confidence sequence. C_n = { m : M_n(m) < 1/alpha }. If every x_t has
 * mean p given the past, each L_n(theta; p) is a nonnegative martingale of
 * mean 1, so is their mixture M_n(p), and Ville's inequality gives
 * P(exists n: M_n(p) >= 1/alpha) <= alpha: C_n covers p at every n at
 * once with probability >= 1 - alpha. log M_n(m) = const - S log m -
 * F log(1 - m) is convex in m with its minimum at S/n, where M_n <= 1 (a
 * mixture of likelihoods is at most the largest), so C_n is an interval
 * around S/n that bisection finds (drift_alarm_bounds).
 *
 * Alarm. Fire the first time the budget b is out of C_n below it: S/n > b
 * and M_n(b) >= 1/alpha, i.e. the lower bound above b. The guarantee
 * holds for more than a constant rate: let every x_t have a mean p_t <= b
 * given the past, p_t changing as it likes. For theta >= b one step of
 * L(theta; b) has conditional mean
 *     p_t theta/b + (1 - p_t)(1 - theta)/(1 - b)
 *         = 1 + (p_t - b)(theta - b)/(b(1 - b)) <= 1,
 * so M+_n = int_{theta >= b} L_n(theta; b) Beta(dtheta) is a nonnegative
 * supermartingale starting at w = P(theta >= b). When the alarm fires,
 * S/n > b and the log-likelihood S log theta + F log(1 - theta) increases
 * on [0, S/n], so every theta < b has L_n(theta; b) < 1 and the rest of
 * the mixture is < 1 - w: M+_n > 1/alpha - (1 - w). Ville's inequality for
 * supermartingales then bounds the false alarm over the whole stream:
 *     P(ever fire) <= w / (1/alpha - 1 + w) = alpha w / (1 - alpha (1 - w))
 *                  <= alpha.
 * "Clear" (S/n < b and M_n(b) >= 1/alpha: the upper bound under b) is the
 * mirror image: shown ever with probability <= alpha when every p_t >= b.
 * Neither needs the observations to be independent, only each one's
 * chance given the past to be on the null's side; what the guarantee does
 * not cover is in docs/alarm.md (the rate is the average since the
 * alarm's start, a change late in a long stream is seen late).
 *
 * The mixing distribution moves where the sequence is tightest, never its
 * validity; the default Beta(1, 1/m - 1) has its mean m at twice the
 * budget (bench/alarm_bench.c measures the delays of the alternatives). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/alarm.h"
#include "driftbench/prom.h"

#define BISECT_TOL 1e-13
#define NAME_MAX_BYTES 63

/* log B(x, y), thread-safe (lgamma_r: lgamma writes the global signgam). */
static double lbeta(double x, double y) {
    int s1, s2, s3;
    return lgamma_r(x, &s1) + lgamma_r(y, &s2) - lgamma_r(x + y, &s3);
}

/* log M_n(m) of (1); +inf where the counts make m impossible. */
static double log_mix(const drift_alarm *a, double m) {
    int64_t s = a->flips, f = a->n - a->flips;
    if ((s > 0 && m <= 0) || (f > 0 && m >= 1)) return INFINITY;
    double ll = (s > 0 ? (double)s * log(m) : 0.0) + (f > 0 ? (double)f * log1p(-m) : 0.0);
    return lbeta(a->prior_a + (double)s, a->prior_b + (double)f) - lbeta(a->prior_a, a->prior_b) - ll;
}

double drift_alarm_log_evidence(const drift_alarm *a, double m) {
    if (!(m >= 0 && m <= 1)) return NAN;
    return log_mix(a, m);
}

static drift_status check_name(const char *name, drift_error *err) {
    if (!name || !*name) return drift_error_set(err, DRIFT_ERR_INVALID, "alarm: empty class name");
    if (strlen(name) > NAME_MAX_BYTES)
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm: class name over %d bytes", NAME_MAX_BYTES);
    return DRIFT_OK;
}

drift_status drift_alarm_init(drift_alarm *a, const char *name, double budget, double alpha, drift_error *err) {
    memset(a, 0, sizeof *a);
    drift_status rc = check_name(name, err);
    if (rc) return rc;
    if (!(budget >= 0 && budget <= 1))
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm %s: budget %g is not a rate in [0, 1]", name, budget);
    if (!(alpha > 0 && alpha < 1))
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm %s: alpha %g is not in (0, 1)", name, alpha);
    strcpy(a->name, name);
    a->budget = budget;
    a->alpha = alpha;
    double m = 2.0 * (budget > 1e-4 ? budget : 1e-4);
    if (m > 0.5) m = 0.5;
    a->prior_a = 1.0;
    a->prior_b = 1.0 / m - 1.0;
    a->state = DRIFT_ALARM_OPEN;
    return DRIFT_OK;
}

static int prior_ok(double pa, double pb) { return isfinite(pa) && isfinite(pb) && pa > 0 && pb > 0; }

drift_status drift_alarm_set_prior(drift_alarm *a, double pa, double pb, drift_error *err) {
    if (a->n > 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm %s: the prior is fixed once observations came",
                               a->name);
    if (!prior_ok(pa, pb))
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm %s: prior Beta(%g, %g) needs both > 0 and finite",
                               a->name, pa, pb);
    a->prior_a = pa;
    a->prior_b = pb;
    return DRIFT_OK;
}

/* The budget test after the counts changed. */
static drift_alarm_event step(drift_alarm *a) {
    if (a->state == DRIFT_ALARM_FIRING || a->n == 0) return DRIFT_ALARM_EV_NONE;
    double s = (double)a->flips, n = (double)a->n, b = a->budget;
    int out = log_mix(a, b) >= log(1.0 / a->alpha);
    if (out && s > b * n) {
        a->state = DRIFT_ALARM_FIRING;
        a->raised_at = a->n;
        return DRIFT_ALARM_EV_RAISED;
    }
    if (out && s < b * n) {
        if (a->state == DRIFT_ALARM_CLEAR) return DRIFT_ALARM_EV_NONE;
        a->state = DRIFT_ALARM_CLEAR;
        if (!a->cleared_at) a->cleared_at = a->n;
        return DRIFT_ALARM_EV_CLEARED;
    }
    if (a->state == DRIFT_ALARM_CLEAR) {
        a->state = DRIFT_ALARM_OPEN;
        return DRIFT_ALARM_EV_REOPENED;
    }
    return DRIFT_ALARM_EV_NONE;
}

drift_alarm_event drift_alarm_add(drift_alarm *a, int flipped) { return drift_alarm_add_counts(a, 1, flipped != 0); }

drift_alarm_event drift_alarm_add_counts(drift_alarm *a, int64_t n, int64_t flips) {
    if (n < 0 || flips < 0 || flips > n || a->n > INT64_MAX - n) return DRIFT_ALARM_EV_NONE;
    if (n == 0) return DRIFT_ALARM_EV_NONE;
    a->n += n;
    a->flips += flips;
    return step(a);
}

/* The root of log M_n(m) = log(1/alpha) between `in` (inside C_n) and
 * `out` (outside), by bisection: convexity makes the crossing unique. */
static double bisect(const drift_alarm *a, double in, double out, double thr) {
    for (int i = 0; i < 200 && fabs(in - out) > BISECT_TOL; i++) {
        double mid = 0.5 * (in + out);
        if (log_mix(a, mid) >= thr) out = mid;
        else in = mid;
    }
    return 0.5 * (in + out);
}

void drift_alarm_bounds(const drift_alarm *a, double *lo, double *hi) {
    *lo = 0.0;
    *hi = 1.0;
    if (a->n <= 0) return;
    double thr = log(1.0 / a->alpha), phat = (double)a->flips / (double)a->n;
    if (a->flips > 0) *lo = bisect(a, phat, 0.0, thr);
    if (a->flips < a->n) *hi = bisect(a, phat, 1.0, thr);
}

const char *drift_alarm_state_name(drift_alarm_state s) {
    switch (s) {
    case DRIFT_ALARM_OPEN: return "open";
    case DRIFT_ALARM_FIRING: return "alarm";
    case DRIFT_ALARM_CLEAR: return "clear";
    }
    return "?";
}

const char *drift_alarm_event_name(drift_alarm_event e) {
    switch (e) {
    case DRIFT_ALARM_EV_NONE: return "none";
    case DRIFT_ALARM_EV_RAISED: return "raised";
    case DRIFT_ALARM_EV_CLEARED: return "cleared";
    case DRIFT_ALARM_EV_REOPENED: return "reopened";
    }
    return "?";
}

int drift_alarm_describe(const drift_alarm *a, drift_buf *out) {
    double lo, hi;
    drift_alarm_bounds(a, &lo, &hi);
    double rate = a->n ? (double)a->flips / (double)a->n : 0.0;
    int firing = a->state == DRIFT_ALARM_FIRING;
    if (drift_buf_printf(out, "%s: %s after %lld pairs: %lld flips, rate %.2f%%, %g%% confidence sequence "
                              "[%.2f%%, %.2f%%]",
                         a->name, firing ? "ALARM" : drift_alarm_state_name(a->state), (long long)a->n,
                         (long long)a->flips, 100 * rate, 100 * (1 - a->alpha), 100 * lo, 100 * hi))
        return -1;
    if (firing)
        return drift_buf_printf(out, " (raised at %lld pairs) > budget %.2f%%", (long long)a->raised_at,
                                100 * a->budget);
    return drift_buf_printf(out, " %s budget %.2f%%", a->state == DRIFT_ALARM_CLEAR ? "<" : "holds",
                            100 * a->budget);
}

/* ---- JSON snapshot ---- */

#define ALARM_JSON_VERSION 1

char *drift_alarm_to_json(const drift_alarm *a) {
    json_t *o = json_pack("{s:i, s:s, s:s, s:f, s:f, s:f, s:f, s:I, s:I, s:s, s:I, s:I}", "driftbench_alarm",
                          ALARM_JSON_VERSION, "class", a->name, "method", "beta-binomial mixture", "budget",
                          a->budget, "alpha", a->alpha, "prior_a", a->prior_a, "prior_b", a->prior_b, "n",
                          (json_int_t)a->n, "flips", (json_int_t)a->flips, "state", drift_alarm_state_name(a->state),
                          "raised_at", (json_int_t)a->raised_at, "cleared_at", (json_int_t)a->cleared_at);
    if (!o) return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}

static int get_real(json_t *o, const char *k, double *v) {
    json_t *x = json_object_get(o, k);
    if (!json_is_number(x)) return -1;
    *v = json_number_value(x);
    return 0;
}

static int get_int(json_t *o, const char *k, int64_t *v) {
    json_t *x = json_object_get(o, k);
    if (!json_is_integer(x)) return -1;
    *v = (int64_t)json_integer_value(x);
    return 0;
}

static drift_status from_obj(json_t *o, drift_alarm *a, drift_error *err) {
    int64_t ver = 0;
    double budget, alpha, pa, pb;
    const char *name = json_string_value(json_object_get(o, "class"));
    const char *state = json_string_value(json_object_get(o, "state"));
    const char *method = json_string_value(json_object_get(o, "method"));
    drift_alarm t;
    memset(&t, 0, sizeof t);
    if (!json_is_object(o) || get_int(o, "driftbench_alarm", &ver) || !name || !state || !method ||
        get_real(o, "budget", &budget) || get_real(o, "alpha", &alpha) || get_real(o, "prior_a", &pa) ||
        get_real(o, "prior_b", &pb) || get_int(o, "n", &t.n) || get_int(o, "flips", &t.flips) ||
        get_int(o, "raised_at", &t.raised_at) || get_int(o, "cleared_at", &t.cleared_at))
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "alarm snapshot: a member is missing or of the wrong type (driftbench_alarm, class, "
                               "method, budget, alpha, prior_a, prior_b, n, flips, state, raised_at, cleared_at)");
    if (ver != ALARM_JSON_VERSION)
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm snapshot: version %lld (this build reads %d)",
                               (long long)ver, ALARM_JSON_VERSION);
    if (strcmp(method, "beta-binomial mixture"))
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm snapshot: method \"%s\" (this build has "
                                                       "\"beta-binomial mixture\")", method);
    int64_t n = t.n, flips = t.flips, raised = t.raised_at, cleared = t.cleared_at;
    drift_status rc = drift_alarm_init(&t, name, budget, alpha, err); /* checks the name, budget, alpha */
    if (rc) return rc;
    t.n = n;
    t.flips = flips;
    t.raised_at = raised;
    t.cleared_at = cleared;
    if (!prior_ok(pa, pb))
        return drift_error_set(err, DRIFT_ERR_INVALID, "alarm snapshot %s: prior Beta(%g, %g) needs both > 0",
                               name, pa, pb);
    t.prior_a = pa;
    t.prior_b = pb;
    if (t.n < 0 || t.flips < 0 || t.flips > t.n || t.raised_at < 0 || t.raised_at > t.n || t.cleared_at < 0 ||
        t.cleared_at > t.n)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "alarm snapshot %s: inconsistent counts (n %lld, flips %lld, raised_at %lld, "
                               "cleared_at %lld)",
                               name, (long long)t.n, (long long)t.flips, (long long)t.raised_at,
                               (long long)t.cleared_at);
    if (!strcmp(state, "open")) t.state = DRIFT_ALARM_OPEN;
    else if (!strcmp(state, "alarm")) t.state = DRIFT_ALARM_FIRING;
    else if (!strcmp(state, "clear")) t.state = DRIFT_ALARM_CLEAR;
    else return drift_error_set(err, DRIFT_ERR_INVALID, "alarm snapshot %s: state \"%s\"", name, state);
    if ((t.state == DRIFT_ALARM_FIRING) != (t.raised_at > 0) || (t.state == DRIFT_ALARM_CLEAR && !t.cleared_at))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "alarm snapshot %s: state %s does not match raised_at %lld, cleared_at %lld", name,
                               state, (long long)t.raised_at, (long long)t.cleared_at);
    memcpy(a, &t, sizeof t); /* padding too: a snapshot read back compares equal byte for byte */
    return DRIFT_OK;
}

drift_status drift_alarm_from_json(const char *text, drift_alarm *a, drift_error *err) {
    json_error_t je;
    json_t *o = text ? json_loads(text, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!o)
        return drift_error_set(err, DRIFT_ERR_PARSE, "alarm snapshot: not JSON (%s)",
                               text ? je.text : "no text");
    drift_status rc = from_obj(o, a, err);
    json_decref(o);
    return rc;
}

/* ---- Prometheus families ---- */

typedef enum alarm_metric { M_COMPARED, M_FLIPS, M_BUDGET, M_LOWER, M_UPPER, M_FIRING, M_CLEAR, M_COUNT } alarm_metric;

static const struct {
    const char *name, *help;
    drift_prom_type type;
} metrics[M_COUNT] = {
    [M_COMPARED] = {"driftbench_compared_total", "Paired outcomes compared, per drift class.", DRIFT_PROM_COUNTER},
    [M_FLIPS] = {"driftbench_flips_total", "Paired outcomes that flipped, per drift class.", DRIFT_PROM_COUNTER},
    [M_BUDGET] = {"driftbench_flip_budget", "Flip rate the alarm allows, per drift class.", DRIFT_PROM_GAUGE},
    [M_LOWER] = {"driftbench_flip_rate_lower",
                 "Lower end of the anytime-valid confidence sequence on the flip rate.", DRIFT_PROM_GAUGE},
    [M_UPPER] = {"driftbench_flip_rate_upper",
                 "Upper end of the anytime-valid confidence sequence on the flip rate.", DRIFT_PROM_GAUGE},
    [M_FIRING] = {"driftbench_alarm_firing", "1 once the flip rate is over the budget with confidence (latched).",
                  DRIFT_PROM_GAUGE},
    [M_CLEAR] = {"driftbench_alarm_clear", "1 while the flip rate is under the budget with confidence.",
                 DRIFT_PROM_GAUGE},
};

static double metric_value(const drift_alarm *a, alarm_metric m) {
    double lo, hi;
    switch (m) {
    case M_COMPARED: return (double)a->n;
    case M_FLIPS: return (double)a->flips;
    case M_BUDGET: return a->budget;
    case M_LOWER: drift_alarm_bounds(a, &lo, &hi); return lo;
    case M_UPPER: drift_alarm_bounds(a, &lo, &hi); return hi;
    case M_FIRING: return a->state == DRIFT_ALARM_FIRING;
    case M_CLEAR: return a->state == DRIFT_ALARM_CLEAR;
    case M_COUNT: break;
    }
    return NAN;
}

drift_status drift_alarm_write_prom(const drift_alarm *alarms, int n_alarms, drift_prom *p, drift_error *err) {
    for (int m = 0; m < M_COUNT; m++) {
        drift_status rc = drift_prom_family(p, metrics[m].name, metrics[m].type, metrics[m].help, err);
        if (rc) return rc;
        for (int i = 0; i < n_alarms; i++) {
            drift_prom_label l = {"class", alarms[i].name};
            rc = drift_prom_sample(p, &l, 1, metric_value(&alarms[i], (alarm_metric)m), err);
            if (rc) return rc;
        }
    }
    return DRIFT_OK;
}
