/* test_gate.c - the gate's decision (gate.c): the rule's cases against
 * known values, the "more pairs" estimate, and a simulation with a fixed
 * seed that shows the interval rule's error rates:
 *   - a wrong DEPLOY (true rate over the budget) and a wrong BLOCK (true
 *     rate within it) each happen at most 2.5% of the time (+ Monte Carlo
 *     slack), over a grid of budgets, sizes and true rates at and next to
 *     the budget, where a rule errs most;
 *   - the same simulation with the Wilson interval or the point estimate
 *     errs far more often at the same points (why the gate uses neither);
 *   - the "more pairs" estimate, followed at the rate seen, decides in
 *     about half of the draws or more (it is where the interval at the
 *     observed rate first clears the budget).
 * Exact binomial probabilities are summed where they can be (every k of
 * n), so most checks are not Monte Carlo at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "driftbench/compare.h"

#define Z95 1.959963984540054

static void test_rule_cases(void **state) {
    (void)state;
    double lo, hi;
    long more;
    drift_decision_reason why;
    /* no budget: not gated, whatever the data */
    assert_int_equal(drift_gate_decide(5, 10, 0, -1, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_NOT_GATED);
    assert_int_equal(why, DRIFT_REASON_NONE);
    /* no pair: no evidence, never a pass, under both rules */
    assert_int_equal(drift_gate_decide(0, 0, 6, 0.01, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_NO_EVIDENCE);
    assert_int_equal(drift_gate_decide(0, 0, 0, 0.01, DRIFT_DECIDE_POINT, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_NO_EVIDENCE);
    /* the case: 12 pairs, 0 flips, 0.5% budget - the interval
     * reaches 26.5%: not a pass (INCONCLUSIVE), while the point rule passes */
    assert_int_equal(drift_gate_decide(0, 12, 0, 0.005, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_INCONCLUSIVE);
    assert_true(fabs(hi - (1 - pow(0.025, 1.0 / 12))) < 1e-9); /* exact upper end at k = 0 */
    /* 1 - 0.025^(1/N) <= 0.005 first at N = ceil(ln 0.025 / ln 0.995) = 736 */
    assert_int_equal(more, 736 - 12);
    assert_int_equal(drift_gate_decide(0, 12, 0, 0.005, DRIFT_DECIDE_POINT, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_DEPLOY);
    /* enough pairs: 0 of 736 deploys at 0.5%, 0 of 735 does not */
    assert_int_equal(drift_gate_decide(0, 736, 0, 0.005, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_DEPLOY);
    assert_int_equal(drift_gate_decide(0, 735, 0, 0.005, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_INCONCLUSIVE);
    assert_int_equal(more, 1);
    /* the README's headline: 11 of 60 at a 1% budget blocks (lower end 9.5%) */
    assert_int_equal(drift_gate_decide(11, 60, 0, 0.01, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_BLOCK);
    assert_int_equal(why, DRIFT_REASON_RATE);
    assert_true(lo > 0.09 && lo < 0.10);
    /* left out: 4 of 100 pairs within 5%, 6 of 100 over it blocks (before the rate) */
    assert_int_equal(drift_gate_decide(0, 96, 4, 0.5, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_DEPLOY);
    assert_int_equal(drift_gate_decide(0, 94, 6, 0.5, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_BLOCK);
    assert_int_equal(why, DRIFT_REASON_LEFT_OUT);
    assert_int_equal(drift_gate_decide(0, 94, 6, 0.5, DRIFT_DECIDE_INTERVAL, 1.0, &lo, &hi, &more, &why),
                     DRIFT_DECISION_DEPLOY);
    /* a rate equal to the budget never decides; a zero budget never deploys */
    assert_int_equal(drift_gate_more_pairs(5, 100, 0.05), -1);
    assert_int_equal(drift_gate_more_pairs(0, 100, 0.0), -1);
    assert_int_equal(drift_gate_decide(1, 100, 0, 0.0, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why),
                     DRIFT_DECISION_BLOCK);
    /* severity and exit codes */
    assert_int_equal(drift_decision_worst(DRIFT_DECISION_DEPLOY, DRIFT_DECISION_INCONCLUSIVE),
                     DRIFT_DECISION_INCONCLUSIVE);
    assert_int_equal(drift_decision_worst(DRIFT_DECISION_BLOCK, DRIFT_DECISION_INCONCLUSIVE), DRIFT_DECISION_BLOCK);
    assert_int_equal(drift_decision_worst(DRIFT_DECISION_BLOCK, DRIFT_DECISION_NO_EVIDENCE),
                     DRIFT_DECISION_NO_EVIDENCE);
    assert_int_equal(drift_decision_worst(DRIFT_DECISION_NOT_GATED, DRIFT_DECISION_DEPLOY), DRIFT_DECISION_DEPLOY);
    assert_int_equal(drift_decision_exit_code(DRIFT_DECISION_DEPLOY), 0);
    assert_int_equal(drift_decision_exit_code(DRIFT_DECISION_NOT_GATED), 0);
    assert_int_equal(drift_decision_exit_code(DRIFT_DECISION_BLOCK), 1);
    assert_int_equal(drift_decision_exit_code(DRIFT_DECISION_NO_EVIDENCE), 2);
    assert_int_equal(drift_decision_exit_code(DRIFT_DECISION_INCONCLUSIVE), 3);
    /* the defaults of every workload, as the README's table */
    assert_true(drift_default_budget(DRIFT_WL_SAFETY) == 0.01 && drift_default_budget(DRIFT_WL_CODE) == 0.005 &&
                drift_default_budget(DRIFT_WL_MATH) == 0.02 && drift_default_budget(DRIFT_WL_LONG) == 0.02 &&
                drift_default_budget(DRIFT_WL_CHAT) == 0.05);
}

/* A decision rule on (k, n, budget): 1 DEPLOY, -1 BLOCK, 0 neither. */
typedef int (*rule_fn)(long k, long n, double budget);

static int rule_exact(long k, long n, double budget) {
    drift_decision d = drift_gate_decide(k, n, 0, budget, DRIFT_DECIDE_INTERVAL, 0.05, NULL, NULL, NULL, NULL);
    return d == DRIFT_DECISION_DEPLOY ? 1 : d == DRIFT_DECISION_BLOCK ? -1 : 0;
}
static int rule_wilson(long k, long n, double budget) {
    double lo, hi;
    drift_wilson(k, n, Z95, &lo, &hi);
    return hi <= budget ? 1 : lo > budget ? -1 : 0;
}
static int rule_point(long k, long n, double budget) { return (double)k / (double)n <= budget ? 1 : -1; }

/* P(wrong decision) at true rate p: exact, summed over every k of n, from
 * the rule's decisions d[k] (1 DEPLOY, -1 BLOCK). A DEPLOY is wrong when
 * p > budget, a BLOCK when p <= budget. */
static double p_wrong(const int *d, long n, double p, double budget) {
    double sum = 0;
    for (long k = 0; k <= n; k++)
        if ((d[k] == 1 && p > budget) || (d[k] == -1 && p <= budget))
            sum += gsl_ran_binomial_pdf((unsigned)k, p, (unsigned)n);
    return sum;
}

static void test_error_rates(void **state) {
    (void)state;
    const double budgets[] = {0.001, 0.005, 0.01, 0.02, 0.05, 0.1};
    const long sizes[] = {12, 50, 100, 164, 300, 500, 1000, 3000};
    /* true rates: the budget itself (where a wrong BLOCK is likeliest), and
     * just over it (where a wrong DEPLOY is) */
    const double rates[] = {1.0, 1.0001, 1.01, 1.05, 1.2};
    const rule_fn rules[3] = {rule_exact, rule_wilson, rule_point};
    double worst[3] = {0, 0, 0};
    int *d = malloc(3001 * sizeof *d);
    assert_non_null(d);
    for (size_t bi = 0; bi < sizeof budgets / sizeof *budgets; bi++)
        for (size_t ni = 0; ni < sizeof sizes / sizeof *sizes; ni++)
            for (int r = 0; r < 3; r++) {
                double b = budgets[bi];
                long n = sizes[ni];
                for (long k = 0; k <= n; k++) d[k] = rules[r](k, n, b);
                for (size_t oi = 0; oi < sizeof rates / sizeof *rates; oi++) {
                    double e = p_wrong(d, n, b * rates[oi], b);
                    if (r == 0 && e > 0.025 + 1e-9)
                        fail_msg("exact rule errs %.4f > 2.5%% at budget %g, n %ld, rate %g", e, b, n, b * rates[oi]);
                    if (e > worst[r]) worst[r] = e;
                }
            }
    free(d);
    printf("worst error over the grid: exact %.4f, Wilson %.4f, point %.4f\n", worst[0], worst[1], worst[2]);
    assert_true(worst[0] <= 0.025 + 1e-9);
    /* Wilson's lower end at small rates and the point estimate err far more:
     * the reasons the gate uses neither */
    assert_true(worst[1] > 0.05);
    assert_true(worst[2] > 0.3);
}

/* A Monte Carlo replay of the whole gate, as a user meets it: draws of n
 * pairs at a true rate, the decision, and the follow-up "about N more"
 * advice taken at the rate seen. Fixed seed. */
static void test_more_pairs_advice(void **state) {
    (void)state;
    gsl_rng_env_setup();
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 20261206);
    const double budget = 0.02;
    const double truth[] = {0.005, 0.05}; /* 4x under, 2.5x over */
    for (size_t t = 0; t < 2; t++) {
        int asked = 0, decided = 0, wrong = 0;
        for (int rep = 0; rep < 400; rep++) {
            long n = 60, k = (long)gsl_ran_binomial(r, truth[t], (unsigned)n);
            long more;
            drift_decision d = drift_gate_decide(k, n, 0, budget, DRIFT_DECIDE_INTERVAL, 0.05, NULL, NULL, &more, NULL);
            if (d != DRIFT_DECISION_INCONCLUSIVE || more <= 0 || more > 200000) continue;
            long k2 = k + (long)gsl_ran_binomial(r, truth[t], (unsigned)more);
            drift_decision d2 =
                drift_gate_decide(k2, n + more, 0, budget, DRIFT_DECIDE_INTERVAL, 0.05, NULL, NULL, NULL, NULL);
            asked++;
            decided += d2 != DRIFT_DECISION_INCONCLUSIVE;
            wrong += d2 == (truth[t] < budget ? DRIFT_DECISION_BLOCK : DRIFT_DECISION_DEPLOY);
        }
        printf("true rate %.3f vs budget %.3f: %d of %d undecided draws decided after the advised pairs\n",
               truth[t], budget, decided, asked);
        assert_true(asked > 50);
        assert_true(wrong * 40 <= asked); /* a decision after the advice is still wrong at most 2.5% of the time */
        assert_true(decided * 10 >= asked * 4); /* an estimate at the rate seen: about half or more */
    }
    gsl_rng_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_cases),
        cmocka_unit_test(test_error_rates),
        cmocka_unit_test(test_more_pairs_advice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
