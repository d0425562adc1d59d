/* alarm_bench.c - the stream alarm (alarm.h) by simulation: its false
 * alarms over whole streams with no drift, its delay on drifting ones, and
 * what one observation costs, each beside a peer or a limit in the same
 * run.
 *
 *   bench_alarm_bench [--budget B] [--alpha A] [--streams R] [--horizon T] [--seed S]
 *
 * 1. False alarms: R streams of T observations whose flips are independent
 *    at 0.8x and 1.0x the budget (the worst null), and R whose chance moves
 *    with the past (the budget after a non-flip, half of it after a flip), each with
 *    the Clopper-Pearson 95% interval of its false-alarm rate. Beside it,
 *    in the same streams: the sequential gate's bettor (sequential.c's
 *    Kelly stake from the shrunk rate, the budget as a with-replacement
 *    mean; also anytime-valid) and the usual Wilson 95% interval looked at
 *    after every observation from the 10th on (not anytime-valid: the
 *    control). "Clear" errors on the streams at 1.0x and 1.25x.
 * 2. Delay: R streams at 1.5x, 2x and 5x the budget, until the alarm (or
 *    T: censored): mean, median and 90th percentile of the observations
 *    asked, beside the bettor's and the limit log(1/alpha) / KL(p || b),
 *    the expected sample size of Wald's sequential probability ratio test
 *    that knows p (no level-alpha test that does not know it does better
 *    as alpha -> 0): the ratio says what not knowing p costs. Priors: the
 *    default Beta(1, 1/(2b) - 1) and the uniform Beta(1, 1).
 * 3. A late change: 20000 observations at 0.5x, then 2x: the delay after
 *    the change, against the same drift from the start (the alarm tests
 *    the rate since its start, docs/alarm.md).
 * 4. Cost: ns per drift_alarm_add, us per drift_alarm_bounds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/alarm.h"
#include "driftbench/compare.h"
#include "util/util.h"

static double g_budget = 0.05, g_alpha = 0.05;

/* sequential.c's bettor against a with-replacement mean b: the stake is
 * Kelly's at the past rate shrunk towards b by 4 pseudo-outcomes, clipped
 * to [0, 0.9]; alarm once the log capital reaches log(1/alpha). */
typedef struct bettor {
    double logcap;
    long n, s;
    int fired;
} bettor;

static void bettor_add(bettor *k, int x) {
    double b = g_budget, p = ((double)k->s + 4.0 * b) / ((double)k->n + 4.0);
    double l = p > b ? (p - b) / (b * (1 - b)) : 0.0;
    if (l > 0.9) l = 0.9;
    k->logcap += log1p(l * ((double)x - b));
    k->n++;
    k->s += x;
    if (k->logcap >= log(1.0 / g_alpha)) k->fired = 1;
}

static double wilson_lo(long s, long n) {
    double z = 1.959963984540054, p = (double)s / (double)n, d = 1 + z * z / n;
    return (p + z * z / (2.0 * n) - z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n))) / d;
}

static void new_alarm(drift_alarm *a, int uniform) {
    drift_error err = {0};
    if (drift_alarm_init(a, "bench", g_budget, g_alpha, &err) ||
        (uniform && drift_alarm_set_prior(a, 1.0, 1.0, &err))) {
        fprintf(stderr, "alarm: %s\n", err.msg);
        exit(2);
    }
}

static void ci_row(const char *what, long k, long n) {
    double lo, hi;
    drift_clopper_pearson(k, n, 0.95, &lo, &hi);
    printf(" %-28s %5ld/%-5ld %6.2f%% [%5.2f%%, %5.2f%%]", what, k, n, 100.0 * k / n, 100 * lo, 100 * hi);
}

static void nulls(long streams, long horizon, util_rng *rng) {
    static const struct {
        const char *name;
        double mult;
        int moving;
    } rows[] = {{"0.8x budget", 0.8, 0}, {"1.0x budget", 1.0, 0}, {"moving, <= budget", 1.0, 1},
                {"1.25x budget", 1.25, 0}};
    printf("1. false alarms over whole streams (%ld streams of %ld observations, budget %.2f%%, alpha %.2f)\n",
           streams, horizon, 100 * g_budget, g_alpha);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        long alarms = 0, clears = 0, bets = 0, naive = 0;
        for (long i = 0; i < streams; i++) {
            drift_alarm a;
            new_alarm(&a, 0);
            bettor k = {0};
            int cleared = 0, wil = 0, last = 0;
            for (long t = 0; t < horizon; t++) {
                double p = rows[r].moving ? (last ? g_budget / 2 : g_budget) : rows[r].mult * g_budget;
                last = util_rng_uniform(rng) < p;
                if (a.state != DRIFT_ALARM_FIRING) drift_alarm_add(&a, last);
                cleared |= a.state == DRIFT_ALARM_CLEAR;
                if (!k.fired) bettor_add(&k, last);
                if (!wil && t >= 9) wil = wilson_lo(a.flips, a.n) > g_budget;
                if (a.state == DRIFT_ALARM_FIRING && ((k.fired && wil) || rows[r].mult > 1)) break; /* nothing left to see */
            }
            alarms += a.state == DRIFT_ALARM_FIRING;
            clears += cleared;
            bets += k.fired;
            naive += wil;
        }
        printf("  %s\n", rows[r].name);
        if (rows[r].mult <= 1.0) {
            ci_row("alarm (this)", alarms, streams);
            printf("\n");
            ci_row("bettor (sequential.c)", bets, streams);
            printf("\n");
            ci_row("Wilson, every step (control)", naive, streams);
            printf("\n");
        }
        if (rows[r].mult >= 1.0 && !rows[r].moving) {
            ci_row("clear shown (this)", clears, streams);
            printf("\n");
        }
        fflush(stdout);
    }
}

static int cmp_long(const void *x, const void *y) {
    long a = *(const long *)x, b = *(const long *)y;
    return (a > b) - (a < b);
}

static void summary(long *d, long n, double *mean, long *med, long *p90) {
    qsort(d, (size_t)n, sizeof *d, cmp_long);
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)d[i];
    *mean = s / (double)n;
    *med = d[n / 2];
    *p90 = d[(long)(0.9 * (double)(n - 1))];
}

static double kl(double p, double b) { return p * log(p / b) + (1 - p) * log((1 - p) / (1 - b)); }

static void delays(long streams, long horizon, util_rng *rng) {
    static const double mult[] = {1.5, 2.0, 5.0};
    long *dm = malloc((size_t)streams * sizeof *dm), *du = malloc((size_t)streams * sizeof *du),
         *dk = malloc((size_t)streams * sizeof *dk);
    printf("\n2. detection delay, observations until the alarm (%ld streams, censored at %ld)\n", streams, horizon);
    printf("  %-6s %-7s | %-26s | %-26s | %-26s | %s\n", "rate", "limit", "this: mean  median  p90", "uniform prior",
           "bettor (sequential.c)", "this/limit");
    for (size_t m = 0; m < sizeof mult / sizeof mult[0]; m++) {
        double p = mult[m] * g_budget;
        long cens = 0;
        for (long i = 0; i < streams; i++) {
            drift_alarm a, u;
            new_alarm(&a, 0);
            new_alarm(&u, 1);
            bettor k = {0};
            dm[i] = du[i] = dk[i] = horizon;
            for (long t = 1; t <= horizon; t++) {
                int x = util_rng_uniform(rng) < p;
                if (a.state != DRIFT_ALARM_FIRING && drift_alarm_add(&a, x) == DRIFT_ALARM_EV_RAISED) dm[i] = t;
                if (u.state != DRIFT_ALARM_FIRING && drift_alarm_add(&u, x) == DRIFT_ALARM_EV_RAISED) du[i] = t;
                if (!k.fired) {
                    bettor_add(&k, x);
                    if (k.fired) dk[i] = t;
                }
                if (a.state == DRIFT_ALARM_FIRING && u.state == DRIFT_ALARM_FIRING && k.fired) break;
            }
            cens += a.state != DRIFT_ALARM_FIRING;
        }
        double limit = log(1.0 / g_alpha) / kl(p, g_budget), mm, mu, mk;
        long med, p90, medu, p90u, medk, p90k;
        summary(dm, streams, &mm, &med, &p90);
        summary(du, streams, &mu, &medu, &p90u);
        summary(dk, streams, &mk, &medk, &p90k);
        printf("  %4.1fx  %7.0f | %8.0f %7ld %7ld   | %8.0f %7ld %7ld   | %8.0f %7ld %7ld   | %.2f%s\n", mult[m],
               limit, mm, med, p90, mu, medu, p90u, mk, medk, p90k, mm / limit,
               cens ? " (some censored)" : "");
        fflush(stdout);
    }
    free(dm);
    free(du);
    free(dk);
}

static void late_change(long streams, util_rng *rng) {
    long *d = malloc((size_t)streams * sizeof *d), pre = 20000, cap = 400000;
    for (long i = 0; i < streams; i++) {
        drift_alarm a;
        new_alarm(&a, 0);
        d[i] = cap;
        for (long t = 1; t <= pre + cap; t++) {
            int x = util_rng_uniform(rng) < (t <= pre ? 0.5 : 2.0) * g_budget;
            if (drift_alarm_add(&a, x) == DRIFT_ALARM_EV_RAISED) {
                d[i] = t - pre;
                break;
            }
        }
    }
    double mean;
    long med, p90;
    summary(d, streams, &mean, &med, &p90);
    printf("\n3. a late change: %ld observations at 0.5x, then 2x (%ld streams)\n", pre, streams);
    printf("  delay after the change: mean %.0f, median %ld, p90 %ld (from the start at 2x: see 2.)%s\n", mean, med,
           p90, d[0] <= 0 ? " (some alarms before the change)" : "");
    free(d);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cost(util_rng *rng) {
    drift_alarm a;
    new_alarm(&a, 0);
    long n = 5000000;
    double t0 = now_s();
    for (long i = 0; i < n; i++) drift_alarm_add(&a, util_rng_uniform(rng) < g_budget);
    double t1 = now_s();
    double lo, hi, sink = 0;
    int nb = 20000;
    for (int i = 0; i < nb; i++) {
        drift_alarm_add(&a, 0);
        drift_alarm_bounds(&a, &lo, &hi);
        sink += lo;
    }
    double t2 = now_s();
    drift_alarm_bounds(&a, &lo, &hi);
    printf("\n4. cost: %.0f ns per drift_alarm_add (%ld observations), %.1f us per drift_alarm_bounds\n"
           "  after %lld observations: %lld flips, sequence [%.5f, %.5f]%s\n",
           1e9 * (t1 - t0) / (double)n, n, 1e6 * (t2 - t1) / nb, (long long)a.n, (long long)a.flips, lo, hi,
           sink < 0 ? "?" : "");
}

int main(int argc, char **argv) {
    long streams = 2000, horizon = 100000;
    uint64_t seed = 39;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--budget") && v) g_budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--alpha") && v) g_alpha = atof(argv[++i]);
        else if (!strcmp(argv[i], "--streams") && v) streams = atol(argv[++i]);
        else if (!strcmp(argv[i], "--horizon") && v) horizon = atol(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && v) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--budget B] [--alpha A] [--streams R] [--horizon T] [--seed S]\n", argv[0]);
            return 2;
        }
    }
    if (!(g_budget > 0 && g_budget < 0.2) || !(g_alpha > 0 && g_alpha < 1) || streams < 10 || horizon < 100) {
        fprintf(stderr, "alarm_bench: budget in (0, 0.2), alpha in (0, 1), streams >= 10, horizon >= 100\n");
        return 2;
    }
    util_rng rng;
    util_rng_seed(&rng, seed);
    double t0 = now_s();
    nulls(streams, horizon, &rng);
    delays(streams, horizon, &rng);
    late_change(streams / 4, &rng);
    cost(&rng);
    printf("\n(seed %llu, %.0f s)\n", (unsigned long long)seed, now_s() - t0);
    return 0;
}
