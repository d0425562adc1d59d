/* risk_bench.c - how well the flip-risk score (risk.c, DRIFT_RISK_VERSION)
 * ranks the math prompts that actually flipped, on a stored comparison.
 *
 *   bench_risk_bench --db FILE --baseline L [--target L]... [--resamples B] [--seed S]
 *
 * The baseline run must carry logprobs (run --logprobs K). For each target
 * (every other run of the store when no --target is given) the math pairs
 * of compare are taken with their outcome (flipped or not); each prompt's
 * risk comes from the baseline answer's logprobs (replicate 0). Printed per
 * target: pairs, flips, prompts without a margin (left out), ROC AUC and
 * precision at the top 10% of risk with bootstrap 95% intervals, and for
 * contrast the AUC of two other features alone (mean renormalised top-k
 * entropy, answer length in tokens). The score has no fitted parameter,
 * so every configuration is out-of-sample. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/store.h"

typedef struct base_row {
    const char *prompt_id;
    int64_t response_id;
    drift_risk_features f;
    int ok;
} base_row;

static int one_target(drift_store *st, const char *base, const char *targ, base_row *rows, size_t nrows, int resamples,
                      uint64_t seed) {
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    drift_comparison *c = NULL;
    drift_error err = {0};
    if (drift_compare_runs(st, base, targ, &o, &c, &err)) {
        fprintf(stderr, "compare %s %s: %s\n", base, targ, err.msg);
        return 1;
    }
    const drift_wl_result *w = &c->wl[DRIFT_WL_MATH];
    size_t n = 0, missing = 0, nomargin = 0;
    double *risk = malloc((w->n_pairs + 1) * sizeof *risk), *ent = malloc((w->n_pairs + 1) * sizeof *ent),
           *len = malloc((w->n_pairs + 1) * sizeof *len);
    int *y = malloc((w->n_pairs + 1) * sizeof *y);
    if (!risk || !ent || !len || !y) {
        fprintf(stderr, "out of memory\n");
        free(risk);
        free(ent);
        free(len);
        free(y);
        drift_comparison_free(c);
        return 1;
    }
    double mm_flip = 0, mm_keep = 0;
    long n_flip = 0, n_keep = 0;
    for (size_t i = 0; i < w->n_pairs; i++) {
        const drift_pair_outcome *p = &w->pairs[i];
        const base_row *b = NULL;
        for (size_t j = 0; j < nrows; j++)
            if (strcmp(rows[j].prompt_id, p->prompt_id) == 0) {
                b = &rows[j];
                break;
            }
        if (!b || !b->ok) {
            missing++;
            continue;
        }
        double r = drift_risk_score(&b->f);
        if (isnan(r)) {
            nomargin++;
            continue;
        }
        risk[n] = r;
        ent[n] = b->f.mean_entropy;
        len[n] = (double)b->f.n_tokens;
        y[n] = p->flipped;
        if (p->flipped) mm_flip += b->f.min_margin, n_flip++;
        else mm_keep += b->f.min_margin, n_keep++;
        n++;
    }
    int rc = 0;
    if (n == 0) {
        printf("%-10s no math pairs with a baseline margin (%zu pairs, %zu without logprobs)\n", targ, w->n_pairs,
               missing);
    } else {
        drift_risk_rank rk;
        double a_ent = NAN, a_len = NAN;
        if (drift_risk_rank_eval(risk, y, n, resamples, seed, &rk, &err) ||
            drift_risk_auc(ent, y, n, &a_ent, NULL, &err) || drift_risk_auc(len, y, n, &a_len, NULL, &err)) {
            fprintf(stderr, "%s: %s\n", targ, err.msg);
            rc = 1;
        } else {
            printf("%-10s %5zu %5zu %5zu  %.3f [%.3f, %.3f]  %.3f [%.3f, %.3f] (base %.3f, top %zu)  %.3f  %.3f  "
                   "%.3f/%.3f\n",
                   targ, n, rk.n_flipped, nomargin + missing, rk.auc, rk.auc_ci[0], rk.auc_ci[1], rk.prec10,
                   rk.prec10_ci[0], rk.prec10_ci[1], rk.base_rate, rk.top_n, a_ent, a_len,
                   n_flip ? mm_flip / (double)n_flip : NAN, n_keep ? mm_keep / (double)n_keep : NAN);
        }
    }
    free(risk);
    free(ent);
    free(len);
    free(y);
    drift_comparison_free(c);
    return rc;
}

int main(int argc, char **argv) {
    const char *db = NULL, *base = NULL;
    const char *targets[64];
    size_t nt = 0;
    int resamples = 2000;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--baseline")) base = v;
        else if (!strcmp(a, "--target") && nt < 64) targets[nt++] = v;
        else if (!strcmp(a, "--resamples")) resamples = atoi(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else goto usage;
        i++;
    }
    if (!db || !base) goto usage;
    drift_store *st = NULL;
    drift_error err = {0};
    if (drift_store_open_readonly(db, &st, &err)) {
        fprintf(stderr, "%s: %s\n", db, err.msg);
        return 2;
    }
    drift_run_info bi = {0};
    drift_scored_set set = {0};
    if (drift_store_run_get(st, base, &bi, &err) || drift_store_load_scored(st, bi.id, &set, &err)) {
        fprintf(stderr, "baseline %s: %s\n", base, err.msg);
        drift_store_close(st);
        return 2;
    }
    base_row *rows = calloc(set.n + 1, sizeof *rows);
    size_t nrows = 0, with_lp = 0;
    for (size_t i = 0; i < set.n; i++) {
        const drift_scored *s = &set.rows[i];
        if (s->workload != DRIFT_WL_MATH || s->replicate != 0 || s->is_error) continue;
        base_row *r = &rows[nrows++];
        r->prompt_id = s->prompt_id;
        r->response_id = s->response_id;
        drift_answer ans = {0};
        if (drift_store_response_get(st, s->response_id, &ans, NULL, &err)) {
            fprintf(stderr, "response %lld: %s\n", (long long)s->response_id, err.msg);
            continue;
        }
        if (ans.logprobs_json) {
            with_lp++;
            if (drift_risk_features_compute(ans.logprobs_json, &r->f, &err) == DRIFT_OK) r->ok = 1;
            else fprintf(stderr, "prompt %s: %s\n", s->prompt_id, err.msg);
        }
        drift_answer_clear(&ans);
    }
    printf("risk %s: baseline %s, %zu math answers, %zu with logprobs; %d resamples, seed %llu\n", DRIFT_RISK_VERSION,
           base, nrows, with_lp, resamples, (unsigned long long)seed);
    printf("%-10s %5s %5s %5s  %-22s  %-38s  %-5s  %-5s  %s\n", "target", "n", "flips", "skip", "AUC [95%]",
           "prec@10% [95%]", "AUCent", "AUClen", "mean min margin flip/kept");
    drift_run_info *ri = NULL;
    size_t nri = 0;
    int rc = 0;
    if (nt == 0) {
        if (drift_store_run_list(st, &ri, &nri, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            rc = 2;
        }
        for (size_t i = 0; i < nri && !rc; i++)
            if (strcmp(ri[i].label, base) != 0)
                rc |= one_target(st, base, ri[i].label, rows, nrows, resamples, seed);
    } else {
        for (size_t i = 0; i < nt; i++) rc |= one_target(st, base, targets[i], rows, nrows, resamples, seed);
    }
    drift_run_info_array_free(ri, nri);
    free(rows);
    drift_scored_set_clear(&set);
    drift_run_info_clear(&bi);
    drift_store_close(st);
    return rc;
usage:
    fprintf(stderr, "usage: %s --db FILE --baseline L [--target L]... [--resamples B] [--seed S]\n", argv[0]);
    return 2;
}
