/* kl_flip_bench.c - is a stack's mean token-level KL a predictor of its flip
 * rate? On a matrix store (the lab's): for every configuration run compared
 * with its baseline (the flip table of `driftbench table --baseline B`,
 * greedy runs only: a run sampled at temperature > 0 flips for reasons KL
 * does not see), the teacher-forced mean KL(baseline || configuration) over
 * a seeded sample of the baseline's answers (drift_tokdiv_runs: LIMIT
 * prompts per workload), then the correlation of mean KL with the flip rate:
 * Pearson and Spearman with percentile-bootstrap 95% intervals over
 * configurations, at two grains: one point per configuration (all workloads'
 * flips / pairs pooled, KL pooled over all sampled positions) and one point
 * per configuration x workload cell. Prints one line per configuration and
 * the correlations; every figure is computed here from the store.
 *
 * usage: bench_kl_flip_bench --db STORE --baseline 'ref@{model}' [--limit N]
 *        [--seed S] [--models DIR] [--boot N] [--workloads W,W,..]
 * --workloads restricts both sides (the KL sample and the flips counted) to
 * those workloads (default: all).
 * The store is opened read-only; --models DIR finds the runs' model files
 * by name when the recorded paths are gone (a store made elsewhere). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"
#include "driftbench/teacher_forced.h"
#include "driftbench/matrix.h"
#include "driftbench/store.h"

typedef struct cfg {
    const char *id;      /* experiment_id = run label (points into the table) */
    const char *model;
    long flips[DRIFT_WL_COUNT], pairs[DRIFT_WL_COUNT];
    double kl[DRIFT_WL_COUNT], kl_all;
    size_t positions;
    double same_top;
} cfg;

/* The baseline label of a configuration: the pattern with {model} replaced. */
static void baseline_of(const char *pattern, const char *model, char *out, size_t cap) {
    const char *at = strstr(pattern, "{model}");
    if (!at) snprintf(out, cap, "%s", pattern);
    else snprintf(out, cap, "%.*s%s%s", (int)(at - pattern), pattern, model, at + 7);
}

static int greedy_run(drift_store *st, const char *label) {
    drift_run_info info = {0};
    drift_error err = {0};
    if (drift_store_run_get(st, label, &info, &err)) return 0;
    json_t *d = json_loads(info.decoding_json ? info.decoding_json : "{}", 0, NULL);
    json_t *t = json_object_get(d, "temperature");
    int greedy = !t || json_number_value(t) == 0;
    json_decref(d);
    drift_run_info_clear(&info);
    return greedy;
}

int main(int argc, char **argv) {
    const char *db = NULL, *base = NULL, *models = NULL, *wls = NULL;
    long limit = 40, seed = 1, boot = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--db")) db = argv[i + 1];
        else if (!strcmp(argv[i], "--baseline")) base = argv[i + 1];
        else if (!strcmp(argv[i], "--models")) models = argv[i + 1];
        else if (!strcmp(argv[i], "--limit")) limit = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--boot")) boot = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--workloads")) wls = argv[i + 1];
        else {
            fprintf(stderr, "kl_flip_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!db || !base || limit < 0 || boot < 0) {
        fprintf(stderr, "usage: %s --db STORE --baseline 'ref@{model}' [--limit N] [--seed S] [--models DIR] [--boot N]\n",
                argv[0]);
        return 2;
    }
    unsigned mask = 0;
    if (wls) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", wls);
        for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            drift_workload x = drift_workload_parse(w);
            if (x == DRIFT_WL_UNKNOWN) {
                fprintf(stderr, "kl_flip_bench: unknown workload '%s'\n", w);
                return 2;
            }
            mask |= 1u << x;
        }
    }
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) {
        fprintf(stderr, "kl_flip_bench: %s\n", err.msg);
        return 2;
    }
    drift_table *t = NULL;
    if (drift_matrix_flip_table(st, base, &t, &err)) {
        fprintf(stderr, "kl_flip_bench: %s\n", err.msg);
        drift_store_close(st);
        return 2;
    }
    cfg *c = calloc(t->n_rows ? t->n_rows : 1, sizeof *c);
    size_t nc = 0;
    for (size_t i = 0; i < t->n_rows; i++) {
        const drift_table_row *r = &t->rows[i];
        drift_workload w = drift_workload_parse(r->dims[DRIFT_DIM_WORKLOAD]);
        if (w == DRIFT_WL_UNKNOWN || (mask && !(mask & (1u << w)))) continue;
        size_t k = 0;
        while (k < nc && strcmp(c[k].id, r->experiment_id)) k++;
        if (k == nc) {
            if (!greedy_run(st, r->experiment_id)) continue;
            c[nc].id = r->experiment_id;
            c[nc].model = r->dims[DRIFT_DIM_MODEL];
            for (int j = 0; j < DRIFT_WL_COUNT; j++) c[nc].kl[j] = NAN;
            nc++;
        }
        c[k].flips[w] += r->num_flips;
        c[k].pairs[w] += r->num_comparisons;
    }
    printf("store %s, baseline %s, KL over a sample of %ld prompts per workload (seed %ld), workloads %s\n", db, base,
           limit, seed, wls ? wls : "all");
    printf("%-40s %9s %10s %11s %8s  %s\n", "configuration", "positions", "mean KL", "same top-1", "flip %",
           "mean KL per workload (math code safety chat long)");
    double *x = malloc((nc ? nc : 1) * sizeof *x), *y = malloc((nc ? nc : 1) * sizeof *y);
    double *cx = malloc((nc * DRIFT_WL_COUNT + 1) * sizeof *cx), *cy = malloc((nc * DRIFT_WL_COUNT + 1) * sizeof *cy);
    size_t n = 0, ncell = 0;
    int rc = 0;
    /* one drift_tokdiv_runs_many per baseline: its logits once per prompt for all its configurations */
    unsigned char *done = calloc(nc ? nc : 1, 1);
    const char **labels = malloc((nc ? nc : 1) * sizeof *labels);
    size_t *which = malloc((nc ? nc : 1) * sizeof *which);
    for (size_t k0 = 0; k0 < nc && !rc; k0++) {
        if (done[k0]) continue;
        char bl[512];
        baseline_of(base, c[k0].model, bl, sizeof bl);
        size_t m = 0;
        for (size_t k = k0; k < nc; k++) {
            char b2[512];
            baseline_of(base, c[k].model, b2, sizeof b2);
            if (!done[k] && !strcmp(bl, b2)) {
                labels[m] = c[k].id;
                which[m++] = k;
                done[k] = 1;
            }
        }
        drift_tokdiv_opts o;
        drift_tokdiv_opts_default(&o);
        o.limit = (size_t)limit;
        o.seed = (uint64_t)seed;
        o.models_dir = models;
        o.workloads = mask;
        drift_tokdiv_report *rep = NULL;
        if (drift_tokdiv_runs_many(st, bl, labels, m, &o, &rep, &err)) {
            fprintf(stderr, "kl_flip_bench: baseline %s: %s\n", bl, err.msg);
            rc = 2;
            break;
        }
        for (size_t j = 0; j < m; j++) {
            cfg *q = &c[which[j]];
            long f = 0, p = 0;
            for (int w = 0; w < DRIFT_WL_COUNT; w++) {
                f += q->flips[w];
                p += q->pairs[w];
                if (rep[j].present[w]) q->kl[w] = rep[j].wl[w].kl_mean;
                if (rep[j].present[w] && q->pairs[w] > 0) {
                    cx[ncell] = q->kl[w];
                    cy[ncell++] = 100.0 * (double)q->flips[w] / (double)q->pairs[w];
                }
            }
            q->kl_all = rep[j].overall.kl_mean;
            q->positions = rep[j].overall.n;
            q->same_top = rep[j].overall.same_top;
            double fr = p ? 100.0 * (double)f / (double)p : NAN;
            printf("%-40s %9zu %10.3e %10.3f%% %8.3f ", q->id, q->positions, q->kl_all, 100 * q->same_top, fr);
            for (int w = 0; w < DRIFT_WL_COUNT; w++) printf(" %9.2e", q->kl[w]);
            printf("\n");
            if (p > 0) {
                x[n] = q->kl_all;
                y[n++] = fr;
            }
        }
        printf("  (%s: %zu configurations, %.1f s)\n", bl, m, rep[0].elapsed_ms / 1000.0);
        fflush(stdout);
        drift_tokdiv_reports_free(rep, m);
    }
    free(done);
    free(labels);
    free(which);
    if (!rc) {
        drift_tokdiv_corr cr;
        if (!drift_tokdiv_correlate(x, y, n, (int)boot, (uint64_t)seed, &cr, &err)) {
            printf("\nper configuration (n = %zu): Pearson r = %.3f [%.3f, %.3f], Spearman rho = %.3f [%.3f, %.3f] "
                   "(bootstrap 95%%, %d resamples over configurations)\n",
                   cr.n, cr.pearson, cr.pearson_ci[0], cr.pearson_ci[1], cr.spearman, cr.spearman_ci[0],
                   cr.spearman_ci[1], cr.n_boot);
        }
        /* without the configurations that compute what the baseline computes up to rounding
         * (mean KL < 1e-9: no flips possible to speak of), which rank correlation rewards trivially */
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (x[i] >= 1e-9) {
                x[m] = x[i];
                y[m++] = y[i];
            }
        if (!drift_tokdiv_correlate(x, y, m, (int)boot, (uint64_t)seed, &cr, &err)) {
            printf("per configuration, mean KL >= 1e-9 only (n = %zu): Pearson r = %.3f [%.3f, %.3f], Spearman rho = "
                   "%.3f [%.3f, %.3f]\n",
                   cr.n, cr.pearson, cr.pearson_ci[0], cr.pearson_ci[1], cr.spearman, cr.spearman_ci[0],
                   cr.spearman_ci[1]);
        }
        if (!drift_tokdiv_correlate(cx, cy, ncell, (int)boot, (uint64_t)seed, &cr, &err)) {
            printf("per configuration x workload (n = %zu): Pearson r = %.3f [%.3f, %.3f], Spearman rho = %.3f "
                   "[%.3f, %.3f] (bootstrap 95%%, %d resamples over cells)\n",
                   cr.n, cr.pearson, cr.pearson_ci[0], cr.pearson_ci[1], cr.spearman, cr.spearman_ci[0],
                   cr.spearman_ci[1], cr.n_boot);
        }
    }
    free(x);
    free(y);
    free(cx);
    free(cy);
    free(c);
    drift_table_free(t);
    drift_store_close(st);
    return rc;
}
