/* stats.c - the textbook statistics behind a comparison (compare.h):
 * Wilson score interval, exact two-sided McNemar (a binomial test of the
 * discordant pairs under p = 1/2), Clopper-Pearson exact interval (its
 * beta quantiles by bisection on the beta CDF, anl_beta_quantile).
 *
 * McNemar is summed in log space from the tail's largest term outwards
 * (lgamma for the binomial coefficients), so b + c up to 1e6 and beyond
 * neither overflows nor loses the small p-values; the sum stops once a
 * term no longer changes it. */
#include <gsl/gsl_cdf.h>
#include <math.h>

#include "analysis/analysis_internal.h"
#include "driftbench/compare.h"

/* See compare.h. Textbook: k=5,n=10,z=1.96 -> [0.2366, 0.7634]. */
void drift_wilson(long k, long n, double z, double *lo, double *hi) {
    if (n <= 0 || k < 0 || k > n) {
        *lo = 0.0;
        *hi = 1.0;
        return;
    }
    double nn = (double)n, p = (double)k / nn, z2 = z * z;
    double denom = 1.0 + z2 / nn;
    double centre = (p + z2 / (2.0 * nn)) / denom;
    double half = z * sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn)) / denom;
    *lo = centre - half;
    *hi = centre + half;
    if (k == 0 || *lo < 0) *lo = 0.0;
    if (k == n || *hi > 1) *hi = 1.0;
}

static double log_choose(long n, long k) {
    return lgamma((double)n + 1.0) - lgamma((double)k + 1.0) - lgamma((double)(n - k) + 1.0);
}

/* log P(X <= k), X ~ Binomial(n, 1/2), k <= n/2. */
static double log_binom_half_lower(long n, long k) {
    double ln2n = (double)n * M_LN2;
    double top = log_choose(n, k) - ln2n; /* largest term of the lower tail */
    double sum = 1.0;                     /* relative to exp(top) */
    double t = 1.0;
    for (long i = k; i > 0; i--) {
        t *= (double)i / (double)(n - i + 1); /* C(n,i-1)/C(n,i) */
        sum += t;
        if (t < sum * 1e-17) break;
    }
    return top + log(sum);
}

/* See compare.h. Textbook: b=1,c=9 -> 0.021484375. */
double drift_mcnemar_exact(long b, long c) {
    if (b < 0 || c < 0) return NAN;
    long n = b + c;
    if (n == 0 || b == c) return 1.0;
    long k = b < c ? b : c;
    double p = 2.0 * exp(log_binom_half_lower(n, k));
    return p > 1.0 ? 1.0 : p;
}

/* See analysis_internal.h. Bisection on the beta CDF: GSL's own inverse
 * (gsl_cdf_beta_Pinv) fails to converge on ordinary inputs (k = 16 of
 * n = 500 at 0.975, k = 31 of 1000, ...) and then calls the GSL error
 * handler, which aborts the process; the CDF itself converges everywhere
 * the gate and the tests reach (k of n up to 10^8, fractional counts). 200
 * halvings or until the midpoint no longer moves: the root to the last bit. */
double anl_beta_quantile(double p, double a, double b) {
    if (!(p > 0)) return 0.0;
    if (!(p < 1)) return 1.0;
    double lo = 0.0, hi = 1.0;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        if (gsl_cdf_beta_P(mid, a, b) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* See compare.h. Guards k == 0 and k == n before the quantiles. */
void drift_clopper_pearson(long k, long n, double conf, double *lo, double *hi) {
    if (n <= 0 || k < 0 || k > n || !(conf > 0 && conf < 1)) {
        *lo = 0.0;
        *hi = 1.0;
        return;
    }
    double a = (1.0 - conf) / 2.0;
    *lo = k == 0 ? 0.0 : anl_beta_quantile(a, (double)k, (double)(n - k + 1));
    *hi = k == n ? 1.0 : anl_beta_quantile(1.0 - a, (double)(k + 1), (double)(n - k));
}
