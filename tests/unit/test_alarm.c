/* test_alarm.c - the stream alarm (alarm.h, alarm.c).
 *
 * Known values: the evidence at the budget and both bounds against
 * tests/data/alarm/alarm_ref.tsv (mpmath at 30 digits: quadrature of the
 * mixture for n <= 2000, the Beta function for streams up to 1e7).
 * False alarms by simulation (fixed seed): 400 streams of 10000
 * observations at exactly the budget (the worst null), and 200 whose
 * flip chance moves with the past but never exceeds the budget: the alarm
 * fires in at most qbinom(0.999, n, alpha) of them; "clear" likewise on
 * the streams at the budget. A control shows the harness can fail: the
 * usual Wilson interval looked at after every observation fires in far
 * more. Power: at 5x the budget every stream alarms, and early. The JSON
 * snapshot resumes the same sequence; bad snapshots are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/alarm.h"
#include "util/util.h"

#define ALPHA 0.05
#define BUDGET 0.05

static void near(double got, double want, double tol, const char *what) {
    if (!(fabs(got - want) <= tol)) fail_msg("%s: got %.15g want %.15g (tol %g)", what, got, want, tol);
}

static void test_known_values(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/alarm/alarm_ref.tsv", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s (set DRIFT_SOURCE)", path);
    char line[1024];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        double pa, pb, alpha, budget, le, lo, hi;
        long long n, s;
        if (sscanf(line, "%lf %lf %lf %lf %lld %lld %lf %lf %lf", &pa, &pb, &alpha, &budget, &n, &s, &le, &lo, &hi) !=
            9)
            fail_msg("bad reference line: %s", line);
        drift_alarm a;
        drift_error err = {0};
        assert_int_equal(drift_alarm_init(&a, "ref", budget, alpha, &err), DRIFT_OK);
        assert_int_equal(drift_alarm_set_prior(&a, pa, pb, &err), DRIFT_OK);
        drift_alarm_add_counts(&a, n, s);
        double glo, ghi;
        drift_alarm_bounds(&a, &glo, &ghi);
        char what[128];
        snprintf(what, sizeof what, "n %lld flips %lld evidence", n, s);
        near(drift_alarm_log_evidence(&a, budget), le, 1e-6, what);
        snprintf(what, sizeof what, "n %lld flips %lld lower", n, s);
        near(glo, lo, 1e-9, what);
        snprintf(what, sizeof what, "n %lld flips %lld upper", n, s);
        near(ghi, hi, 1e-9, what);
        /* the state follows the bounds */
        if (lo > budget + 1e-9) assert_int_equal(a.state, DRIFT_ALARM_FIRING);
        if (hi < budget - 1e-9) assert_int_equal(a.state, DRIFT_ALARM_CLEAR);
        if (lo < budget - 1e-9 && hi > budget + 1e-9) assert_int_equal(a.state, DRIFT_ALARM_OPEN);
        rows++;
    }
    fclose(f);
    assert_true(rows >= 15);
}

/* The smallest k with P(Bin(n, p) <= k) >= q: the bound a count of
 * false alarms at rate <= p stays under with probability >= q. */
static int qbinom(int n, double p, double q) {
    double cdf = 0;
    for (int k = 0; k <= n; k++) {
        cdf += exp(lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) + k * log(p) + (n - k) * log1p(-p));
        if (cdf >= q) return k;
    }
    return n;
}

/* The Wilson interval's lower (side -1) or upper (+1) end at z = 1.96. */
static double wilson(long s, long n, int side) {
    double z = 1.959963984540054, p = (double)s / (double)n, d = 1 + z * z / n;
    double c = p + z * z / (2.0 * n), h = z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n));
    return (c + side * h) / d;
}

typedef struct null_run {
    int alarms, clears, naive;
} null_run;

/* streams of len observations; the flip chance of each is rate, or with
 * moving = 1, the budget after a non-flip and half of it after a flip. */
static null_run nulls(int streams, long len, double rate, int moving, util_rng *rng) {
    null_run r = {0, 0, 0};
    for (int i = 0; i < streams; i++) {
        drift_alarm a;
        drift_error err = {0};
        assert_int_equal(drift_alarm_init(&a, "null", BUDGET, ALPHA, &err), DRIFT_OK);
        int cleared = 0, naive = 0, last = 0;
        for (long t = 0; t < len && a.state != DRIFT_ALARM_FIRING; t++) {
            double p = moving ? (last ? BUDGET / 2 : BUDGET) : rate;
            last = util_rng_uniform(rng) < p;
            drift_alarm_add(&a, last);
            cleared |= a.state == DRIFT_ALARM_CLEAR;
            if (t >= 9 && !naive && wilson(a.flips, a.n, -1) > BUDGET) naive = 1;
        }
        r.alarms += a.state == DRIFT_ALARM_FIRING;
        r.clears += cleared;
        r.naive += naive;
    }
    return r;
}

static void test_false_alarms(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 39);
    int bound = qbinom(400, ALPHA, 0.999);
    null_run at = nulls(400, 10000, BUDGET, 0, &rng);
    print_message("at the budget: %d alarms, %d clears, %d naive Wilson alarms in 400 streams (bound %d)\n", at.alarms,
                  at.clears, at.naive, bound);
    assert_true(at.alarms <= bound);
    assert_true(at.clears <= bound);
    /* the control: peeking at a fixed-size interval fails the same bound */
    assert_true(at.naive > bound);
    int bound2 = qbinom(200, ALPHA, 0.999);
    null_run mv = nulls(200, 10000, 0, 1, &rng);
    print_message("moving chance <= budget: %d alarms in 200 streams (bound %d)\n", mv.alarms, bound2);
    assert_true(mv.alarms <= bound2);
}

static void test_detects(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 7);
    long worst = 0;
    for (int i = 0; i < 100; i++) {
        drift_alarm a;
        drift_error err = {0};
        assert_int_equal(drift_alarm_init(&a, "drift", BUDGET, ALPHA, &err), DRIFT_OK);
        drift_alarm_event ev = DRIFT_ALARM_EV_NONE;
        while (a.n < 5000 && ev != DRIFT_ALARM_EV_RAISED) ev = drift_alarm_add(&a, util_rng_uniform(&rng) < 5 * BUDGET);
        assert_int_equal(ev, DRIFT_ALARM_EV_RAISED);
        assert_int_equal(a.raised_at, a.n);
        double lo, hi;
        drift_alarm_bounds(&a, &lo, &hi);
        assert_true(lo > BUDGET);
        if (a.n > worst) worst = a.n;
        /* latched: flips stopping does not silence it */
        for (int k = 0; k < 1000; k++) assert_int_equal(drift_alarm_add(&a, 0), DRIFT_ALARM_EV_NONE);
        assert_int_equal(a.state, DRIFT_ALARM_FIRING);
    }
    print_message("5x budget: every stream alarmed, the slowest after %ld\n", worst);
    assert_true(worst <= 300);
}

static void test_clear_and_reopen(void **state) {
    (void)state;
    drift_alarm a;
    drift_error err = {0};
    assert_int_equal(drift_alarm_init(&a, "json", 0.10, ALPHA, &err), DRIFT_OK);
    drift_alarm_event ev = DRIFT_ALARM_EV_NONE;
    while (ev != DRIFT_ALARM_EV_CLEARED && a.n < 1000) ev = drift_alarm_add(&a, 0);
    assert_int_equal(ev, DRIFT_ALARM_EV_CLEARED);
    assert_int_equal(a.cleared_at, a.n);
    double lo, hi;
    drift_alarm_bounds(&a, &lo, &hi);
    assert_true(hi < 0.10 && lo == 0.0);
    long at = (long)a.n;
    while (ev != DRIFT_ALARM_EV_REOPENED && a.n < 2000) ev = drift_alarm_add(&a, 1);
    assert_int_equal(ev, DRIFT_ALARM_EV_REOPENED);
    assert_int_equal(a.state, DRIFT_ALARM_OPEN);
    assert_int_equal(a.cleared_at, at);
    while (ev != DRIFT_ALARM_EV_RAISED && a.n < 3000) ev = drift_alarm_add(&a, 1);
    assert_int_equal(ev, DRIFT_ALARM_EV_RAISED);
    drift_buf b = {0};
    assert_int_equal(drift_alarm_describe(&a, &b), 0);
    assert_non_null(strstr(b.data, "json: ALARM after"));
    assert_non_null(strstr(b.data, "> budget 10.00%"));
    drift_buf_free(&b);
}

static void test_edges(void **state) {
    (void)state;
    drift_alarm a;
    drift_error err = {0};
    /* budget 0: the first flip is proof; budget 1: never an alarm */
    assert_int_equal(drift_alarm_init(&a, "zero", 0.0, ALPHA, &err), DRIFT_OK);
    for (int i = 0; i < 100; i++) assert_int_equal(drift_alarm_add(&a, 0), DRIFT_ALARM_EV_NONE);
    assert_int_equal(drift_alarm_add(&a, 1), DRIFT_ALARM_EV_RAISED);
    assert_int_equal(drift_alarm_init(&a, "one", 1.0, ALPHA, &err), DRIFT_OK);
    for (int i = 0; i < 100; i++) assert_int_equal(drift_alarm_add(&a, 1), DRIFT_ALARM_EV_NONE);
    assert_int_equal(drift_alarm_add(&a, 0), DRIFT_ALARM_EV_CLEARED);
    /* bad arguments */
    assert_int_equal(drift_alarm_init(&a, "", 0.1, ALPHA, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_alarm_init(&a, "x", 1.5, ALPHA, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "budget 1.5"));
    assert_int_equal(drift_alarm_init(&a, "x", NAN, ALPHA, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_alarm_init(&a, "x", 0.1, 1.0, &err), DRIFT_ERR_INVALID);
    char longname[80];
    memset(longname, 'c', sizeof longname - 1);
    longname[79] = '\0';
    assert_int_equal(drift_alarm_init(&a, longname, 0.1, ALPHA, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_alarm_init(&a, "x", 0.1, ALPHA, &err), DRIFT_OK);
    assert_int_equal(drift_alarm_set_prior(&a, 0, 1, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_alarm_set_prior(&a, 1, INFINITY, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_alarm_add_counts(&a, 5, 6), DRIFT_ALARM_EV_NONE);
    assert_int_equal(drift_alarm_add_counts(&a, -1, 0), DRIFT_ALARM_EV_NONE);
    assert_int_equal(a.n, 0);
    double lo, hi;
    drift_alarm_bounds(&a, &lo, &hi);
    assert_true(lo == 0.0 && hi == 1.0);
    drift_alarm_add(&a, 1);
    assert_int_equal(drift_alarm_set_prior(&a, 1, 1, &err), DRIFT_ERR_INVALID);
    assert_true(isinf(drift_alarm_log_evidence(&a, 0.0)));
    assert_true(isnan(drift_alarm_log_evidence(&a, -0.1)));
    assert_int_equal(drift_alarm_add_counts(&a, INT64_MAX, 0), DRIFT_ALARM_EV_NONE);
    assert_int_equal(a.n, 1);
}

/* A billion observations at once: finite evidence, bounds around the
 * rate at the width sqrt(log(1/alpha) p(1-p) * 2 / n) or so. */
static void test_long_stream(void **state) {
    (void)state;
    drift_alarm a;
    drift_error err = {0};
    assert_int_equal(drift_alarm_init(&a, "long", BUDGET, ALPHA, &err), DRIFT_OK);
    drift_alarm_add_counts(&a, 1000000000, 50000000);
    double lo, hi;
    drift_alarm_bounds(&a, &lo, &hi);
    assert_true(isfinite(drift_alarm_log_evidence(&a, BUDGET)));
    assert_true(lo < BUDGET && hi > BUDGET);
    assert_true(hi - lo < 1e-4 && hi - lo > 1e-5);
    assert_int_equal(a.state, DRIFT_ALARM_OPEN);
    drift_alarm_add_counts(&a, 1000000000, 50100000);
    assert_int_equal(a.state, DRIFT_ALARM_FIRING);
}

static void test_json_resume(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 3);
    drift_alarm a, b;
    drift_error err = {0};
    assert_int_equal(drift_alarm_init(&a, "tool \"call\"", 0.02, 0.01, &err), DRIFT_OK);
    assert_int_equal(drift_alarm_set_prior(&a, 0.7, 33.3, &err), DRIFT_OK);
    for (int i = 0; i < 777; i++) drift_alarm_add(&a, util_rng_uniform(&rng) < 0.03);
    char *js = drift_alarm_to_json(&a);
    assert_non_null(js);
    assert_int_equal(drift_alarm_from_json(js, &b, &err), DRIFT_OK);
    assert_memory_equal(&a, &b, sizeof a);
    for (int i = 0; i < 5000; i++) {
        int x = util_rng_uniform(&rng) < 0.06;
        assert_int_equal(drift_alarm_add(&a, x), drift_alarm_add(&b, x));
    }
    assert_memory_equal(&a, &b, sizeof a);
    assert_int_equal(a.state, DRIFT_ALARM_FIRING);
    free(js);
    js = drift_alarm_to_json(&a);
    assert_int_equal(drift_alarm_from_json(js, &b, &err), DRIFT_OK);
    assert_memory_equal(&a, &b, sizeof a);
    free(js);
    /* refused: each with the member it names */
    static const struct {
        const char *json;
        drift_status rc;
        const char *msg;
    } bad[] = {
        {"{", DRIFT_ERR_PARSE, "not JSON"},
        {"{\"driftbench_alarm\":1}", DRIFT_ERR_PARSE, "missing"},
        {"{\"driftbench_alarm\":2,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10,\"flips\":1,\"state\":\"open\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "version 2"},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10,\"flips\":11,\"state\":\"open\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "inconsistent"},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10,\"flips\":1,\"state\":\"alarm\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "does not match"},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":-1,\"prior_b\":4,\"n\":10,\"flips\":1,\"state\":\"open\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "prior"},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":2,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10,\"flips\":1,\"state\":\"open\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "budget 2"},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10,\"flips\":1,\"state\":\"red\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "state \"red\""},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"betting\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10,\"flips\":1,\"state\":\"open\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_INVALID, "method"},
        {"{\"driftbench_alarm\":1,\"class\":\"x\",\"method\":\"beta-binomial mixture\",\"budget\":0.1,\"alpha\":0.05,"
         "\"prior_a\":1,\"prior_b\":4,\"n\":10.5,\"flips\":1,\"state\":\"open\",\"raised_at\":0,\"cleared_at\":0}",
         DRIFT_ERR_PARSE, "wrong type"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        drift_error e = {0};
        memset(&b, 0x5a, sizeof b);
        drift_alarm keep = b;
        assert_int_equal(drift_alarm_from_json(bad[i].json, &b, &e), bad[i].rc);
        if (!strstr(e.msg, bad[i].msg)) fail_msg("case %zu: message \"%s\" lacks \"%s\"", i, e.msg, bad[i].msg);
        assert_memory_equal(&b, &keep, sizeof b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values), cmocka_unit_test(test_false_alarms),
        cmocka_unit_test(test_detects),      cmocka_unit_test(test_clear_and_reopen),
        cmocka_unit_test(test_edges),        cmocka_unit_test(test_long_stream),
        cmocka_unit_test(test_json_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
