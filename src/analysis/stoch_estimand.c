/* stoch_estimand.c - the stochastic leg's flip-rate estimand (analysis.h:
 * drift_stoch_estimand_compute, drift_stoch_estimand_definition).
 *
 * Per prompt, each of the four replicate sets (A1, B1, A2, B2) gets its
 * majority label m in {0, 1/2, 1} (fail, tie, pass); two labels disagree
 * with probability d(a, b) = a (1 - b) + b (1 - a) (a tie broken by a fair
 * coin, independently in each set: a tie disagrees with anything with
 * probability 1/2). Then
 *   cross_i = (d(A1, B2) + d(A2, B1)) / 2,  null_i = (d(A1, A2) + d(B1, B2)) / 2.
 * Only sets of different seeds are compared (sets of one seed share random
 * draws between the stacks). If M_A and M_B are a prompt's majority labels
 * under the two stacks, independent draws with P(M_A = pass) = P and
 * P(M_B = pass) = Q, then E cross_i = P + Q - 2PQ, E null_i = P(1-P) + Q(1-Q)
 * (2P(1-P) halved twice over), so E (cross_i - null_i) = (P - Q)^2: zero when
 * the stacks' majorities are distributed alike, the flip indicator when
 * both majorities are fixed.
 *
 * The bootstrap draws prompts with replacement (one util_rng stream), all
 * of a prompt's figures together; det and the ratios are over the prompts
 * whose deterministic flip is known. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "driftbench/analysis.h"
#include "util/util.h"

static const char definition[] =
    "Each prompt is answered R times at the leg's temperature by each stack, twice with different seeds; a "
    "set of R answers passes by majority vote (a tie counts as a coin toss). Cross = the share of prompts "
    "whose majority verdict differs between the two stacks (sets of different seeds), the stochastic flip "
    "rate the paper reports, sampling noise included. Null = the share whose majority verdict differs "
    "between two sets of the same stack: what sampling alone flips. Beyond = cross - null, the majority-vote "
    "flip rate the change of stack causes beyond sampling: it estimates the mean over prompts of (P - Q)^2, "
    "P and Q a prompt's chance of a passing majority on each stack, which is the flip rate on prompts "
    "whose majority is settled and less on the others. Det = the deterministic (temperature 0) flip rate "
    "of the same two stacks on the same prompts; the ratios cross / det and beyond / det are what the "
    "paper's ~0.23x (1.9% / 8.3%) compares. Intervals: percentile bootstrap over prompts.";

const char *drift_stoch_estimand_definition(void) { return definition; }

static double majority(long pass, long fail) { return pass > fail ? 1.0 : pass < fail ? 0.0 : 0.5; }

static double disagree(double a, double b) { return a * (1 - b) + b * (1 - a); }

static void ci_nan(drift_boot_ci *c) { c->est = c->lo = c->hi = NAN; }

drift_status drift_stoch_estimand_compute(const drift_stoch_prompt *p, size_t n, const drift_boot_opts *o,
                                          drift_stoch_estimand *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    drift_boot_ci *all[] = {&out->cross, &out->null, &out->beyond, &out->det, &out->ratio_cross, &out->ratio_beyond};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) ci_nan(all[k]);
    out->det_zero_share = NAN;
    out->tie_share = NAN;
    int R;
    uint64_t seed;
    double level;
    anl_boot_resolve(o, &R, &seed, &level);
    out->resamples = R;
    out->level = level;
    if (!p && n) return drift_error_set(err, DRIFT_ERR_INVALID, "stochastic estimand: no prompts");
    double *cr = malloc((n ? n : 1) * sizeof *cr), *nu = malloc((n ? n : 1) * sizeof *nu);
    int *det = malloc((n ? n : 1) * sizeof *det);
    double *bs = malloc((size_t)R * 6 * sizeof *bs);
    drift_status st = DRIFT_OK;
    if (!cr || !nu || !det || !bs) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    size_t m = 0, ties = 0, nd = 0;
    for (size_t i = 0; i < n; i++) {
        double lab[4];
        int ok = 1;
        for (int s = 0; s < 4; s++) {
            if (p[i].pass[s] < 0 || p[i].fail[s] < 0) {
                st = drift_error_set(err, DRIFT_ERR_INVALID, "stochastic estimand: prompt %zu has a negative count", i);
                goto done;
            }
            if (p[i].pass[s] + p[i].fail[s] == 0) ok = 0;
            lab[s] = majority(p[i].pass[s], p[i].fail[s]);
        }
        if (p[i].det_flip < -1 || p[i].det_flip > 1) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "stochastic estimand: prompt %zu has det_flip %d (-1, 0 or 1)",
                                 i, p[i].det_flip);
            goto done;
        }
        if (!ok) continue;
        for (int s = 0; s < 4; s++) ties += lab[s] == 0.5;
        /* 0 A1, 1 B1, 2 A2, 3 B2 */
        cr[m] = (disagree(lab[0], lab[3]) + disagree(lab[2], lab[1])) / 2;
        nu[m] = (disagree(lab[0], lab[2]) + disagree(lab[1], lab[3])) / 2;
        det[m] = p[i].det_flip;
        nd += det[m] >= 0;
        m++;
    }
    out->n = m;
    out->n_det = nd;
    if (m < 2) {
        st = drift_error_set(err, DRIFT_ERR_INVALID,
                             "stochastic estimand: %zu prompts have a labelled replicate in all four sets (at least 2 "
                             "are needed)",
                             m);
        goto done;
    }
    out->tie_share = (double)ties / (4.0 * (double)m);
    /* figures of a multiset given by weights w (NULL = each once) */
    double sc = 0, sn = 0, dc = 0, dn = 0, dd = 0;
    for (size_t i = 0; i < m; i++) {
        sc += cr[i];
        sn += nu[i];
        if (det[i] >= 0) {
            dc += cr[i];
            dn += nu[i];
            dd += det[i];
        }
    }
    out->cross.est = sc / (double)m;
    out->null.est = sn / (double)m;
    out->beyond.est = (sc - sn) / (double)m;
    if (nd) {
        out->det.est = dd / (double)nd;
        if (dd > 0) {
            out->ratio_cross.est = dc / dd;
            out->ratio_beyond.est = (dc - dn) / dd;
        }
    }
    util_rng rng;
    util_rng_seed(&rng, seed);
    size_t zero = 0, with_det = 0;
    double *b_cr = bs, *b_nu = bs + R, *b_be = bs + 2 * (size_t)R, *b_det = bs + 3 * (size_t)R,
           *b_rc = bs + 4 * (size_t)R, *b_rb = bs + 5 * (size_t)R;
    for (int b = 0; b < R; b++) {
        double c = 0, u = 0, xc = 0, xu = 0, xd = 0;
        size_t k_det = 0;
        for (size_t k = 0; k < m; k++) {
            size_t i = (size_t)util_rng_below(&rng, m);
            c += cr[i];
            u += nu[i];
            if (det[i] >= 0) {
                xc += cr[i];
                xu += nu[i];
                xd += det[i];
                k_det++;
            }
        }
        b_cr[b] = c / (double)m;
        b_nu[b] = u / (double)m;
        b_be[b] = (c - u) / (double)m;
        if (!nd) continue;
        if (k_det) b_det[with_det] = xd / (double)k_det;
        else b_det[with_det] = 0;
        if (xd > 0) {
            b_rc[with_det] = xc / xd;
            b_rb[with_det] = (xc - xu) / xd;
        } else {
            zero++;
            b_rc[with_det] = xc > 0 ? INFINITY : 0;
            b_rb[with_det] = xc - xu > 0 ? INFINITY : xc - xu < 0 ? -INFINITY : 0;
        }
        with_det++;
    }
    anl_percentile_ci(b_cr, (size_t)R, level, &out->cross.lo, &out->cross.hi);
    anl_percentile_ci(b_nu, (size_t)R, level, &out->null.lo, &out->null.hi);
    anl_percentile_ci(b_be, (size_t)R, level, &out->beyond.lo, &out->beyond.hi);
    if (nd) {
        out->det_zero_share = (double)zero / (double)with_det;
        anl_percentile_ci(b_det, with_det, level, &out->det.lo, &out->det.hi);
        if (dd > 0) {
            anl_percentile_ci(b_rc, with_det, level, &out->ratio_cross.lo, &out->ratio_cross.hi);
            anl_percentile_ci(b_rb, with_det, level, &out->ratio_beyond.lo, &out->ratio_beyond.hi);
            if (out->det_zero_share > (1 - level) / 2) out->ratio_cross.hi = out->ratio_beyond.hi = INFINITY;
        }
    }
done:
    free(cr);
    free(nu);
    free(det);
    free(bs);
    return st;
}
