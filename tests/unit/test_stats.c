/* test_stats.c - Wilson, exact McNemar and Clopper-Pearson against textbook
 * values (Newcombe 1998; Agresti), and McNemar against GSL's binomial CDF
 * for large counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_cdf.h>
#include <math.h>

#include "driftbench/compare.h"

#define Z95 1.959963984540054

static void near(double got, double want, double tol) {
    if (fabs(got - want) > tol) fail_msg("got %.10g want %.10g", got, want);
}

static void test_wilson(void **state) {
    (void)state;
    double lo, hi;
    drift_wilson(5, 10, Z95, &lo, &hi);
    near(lo, 0.2366, 1e-4);
    near(hi, 0.7634, 1e-4);
    drift_wilson(0, 10, Z95, &lo, &hi);   /* Newcombe: 0 / 0.2775 */
    near(lo, 0.0, 1e-12);
    near(hi, 0.2775, 1e-4);
    drift_wilson(10, 10, Z95, &lo, &hi);
    near(lo, 0.7225, 1e-4);
    near(hi, 1.0, 1e-12);
    drift_wilson(81, 263, Z95, &lo, &hi); /* Newcombe example: 0.2553 - 0.3662 */
    near(lo, 0.2553, 1e-4);
    near(hi, 0.3662, 1e-4);
    drift_wilson(124, 520, Z95, &lo, &hi); /* the paper's 124/520 safety flips */
    near(lo, 0.2038366302, 1e-9);
    near(hi, 0.2769222990, 1e-9);
    drift_wilson(0, 0, Z95, &lo, &hi);
    near(lo, 0, 0);
    near(hi, 1, 0);
}

static void test_mcnemar(void **state) {
    (void)state;
    near(drift_mcnemar_exact(1, 9), 0.021484375, 1e-12);
    near(drift_mcnemar_exact(9, 1), 0.021484375, 1e-12);
    near(drift_mcnemar_exact(0, 0), 1.0, 0);
    near(drift_mcnemar_exact(7, 7), 1.0, 0);
    near(drift_mcnemar_exact(0, 5), 0.0625, 1e-12);      /* 2 / 32 */
    near(drift_mcnemar_exact(2, 8), 0.109375, 1e-12);    /* 2 * 56/1024 */
    near(drift_mcnemar_exact(4, 5), 1.0, 1e-12);
    near(drift_mcnemar_exact(65, 59), 0.6535984498230588, 1e-12); /* the paper's 65 vs 59 (exact sum) */
    /* large counts against GSL */
    long cases[][2] = {{4900, 5100}, {499000, 501000}, {100, 100000}, {0, 1000000}};
    for (int i = 0; i < 4; i++) {
        long b = cases[i][0], c = cases[i][1];
        double p = drift_mcnemar_exact(b, c);
        double g = 2.0 * gsl_cdf_binomial_P((unsigned)b, 0.5, (unsigned)(b + c));
        if (g > 1) g = 1;
        if (g > 1e-300) near(p / g, 1.0, 1e-6);
        else assert_true(p < 1e-300);
        assert_true(p >= 0 && p <= 1);
    }
}

static void test_clopper_pearson(void **state) {
    (void)state;
    double lo, hi;
    drift_clopper_pearson(5, 10, 0.95, &lo, &hi);  /* 0.1871 - 0.8129 */
    near(lo, 0.1871, 1e-4);
    near(hi, 0.8129, 1e-4);
    drift_clopper_pearson(0, 10, 0.95, &lo, &hi);  /* 0 - 0.3085 */
    near(lo, 0, 0);
    near(hi, 0.3085, 1e-4);
    drift_clopper_pearson(10, 10, 0.95, &lo, &hi);
    near(lo, 0.6915, 1e-4);
    near(hi, 1, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wilson), cmocka_unit_test(test_mcnemar), cmocka_unit_test(test_clopper_pearson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
