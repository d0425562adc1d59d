/* sequential_bench.c - what the sequential gate (compare.h) saves: prompts
 * asked until the verdict, as a share of the fixed-size suite, and how
 * often the verdict is wrong, over many seeded random orders.
 *
 *   bench_sequential_bench [--budget PCT] [--alpha A] [--runs R] [--seed S]
 *                          [--flip-table CSV] [--db FILE --baseline L --target L]
 *
 * 1. Synthetic suites: N in {500, 2000, 10000}, flip rates 0.33x, 0.5x,
 *    2x and 3x the budget (and 0.8x, 1.25x: near it).
 * 2. --flip-table: the paper's flip table (experiment_id, ..., workload,
 *    flip_rate, num_flips, num_comparisons): every row is a finite suite
 *    of num_comparisons prompts with num_flips flips, gated at the budget;
 *    rows are grouped by their rate's distance from the budget.
 * 3. --db: the real paired outcomes of a stored comparison (--target L,
 *    or --target all: the baseline against every other run of the store;
 *    a lab's "ref@MODEL" against MODEL's runs),
 *    each workload at the budget (--budget applies to all) replayed in
 *    R/10 seeded orders.
 * Each figure is the mean over R orders of asked/N, with the share of
 * early stops and of wrong verdicts (against the suite's true rate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/compare.h"
#include "driftbench/store.h"
#include "util/util.h"

typedef struct gate_stats {
    double used;     /* sum of asked / N */
    long early, wrong, runs;
} gate_stats;

/* R gates over a suite of n outcomes with k flips in uniformly random
 * orders (drawn sequentially: the next outcome flips with probability
 * remaining flips / remaining prompts). */
static void simulate(long n, long k, double budget, double alpha, long runs, util_rng *rng, gate_stats *st) {
    int truth_over = (double)k / (double)n > budget + 1e-12;
    for (long r = 0; r < runs; r++) {
        drift_seq_gate g;
        drift_error err = {0};
        if (drift_seq_gate_init(&g, n, budget, alpha, 0, -1, &err)) {
            fprintf(stderr, "gate: %s\n", err.msg);
            exit(2);
        }
        long left = k;
        while (g.verdict == DRIFT_SEQ_OPEN) {
            long remain = n - g.asked;
            int x = (long)util_rng_below(rng, (uint64_t)remain) < left;
            left -= x;
            drift_seq_gate_add(&g, x);
        }
        st->used += (double)g.decided_at / (double)n;
        st->early += g.early;
        st->wrong += (g.verdict == DRIFT_SEQ_BLOCK) != truth_over;
        st->runs++;
        drift_seq_gate_free(&g);
    }
}

static void print_row(const char *what, const gate_stats *s) {
    printf("  %-34s %7ld  %6.1f%%  %6.1f%%  %6.2f%%\n", what, s->runs, 100.0 * s->used / (double)s->runs,
           100.0 * (double)s->early / (double)s->runs, 100.0 * (double)s->wrong / (double)s->runs);
}

static void header(void) {
    printf("  %-34s %7s  %7s  %7s  %7s\n", "suite", "gates", "asked", "early", "wrong");
}

static void synthetic(double budget, double alpha, long runs, util_rng *rng) {
    static const double mult[] = {0.33, 0.5, 0.8, 1.25, 2.0, 3.0};
    static const long sizes[] = {500, 2000, 10000};
    printf("synthetic suites (budget %.2f%%, alpha %.3f): mean prompts asked / N\n", 100 * budget, alpha);
    header();
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t mi = 0; mi < sizeof mult / sizeof mult[0]; mi++) {
            long n = sizes[si], k = lround(mult[mi] * budget * (double)n);
            gate_stats s = {0};
            long r = n >= 10000 ? runs / 5 : runs;
            simulate(n, k, budget, alpha, r > 0 ? r : 1, rng, &s);
            char what[64];
            snprintf(what, sizeof what, "N=%ld rate %.2fx (%ld flips)", n, mult[mi], k);
            print_row(what, &s);
        }
}

/* The paper's flip table: one suite per row, grouped by rate / budget. */
static int flip_table(const char *path, double budget, double alpha, long runs, util_rng *rng) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "sequential_bench: cannot open %s\n", path);
        return 2;
    }
    char line[1024];
    long lineno = 0;
    gate_stats band[3] = {{0}}; /* rate <= B/2, in between, >= 2B */
    long rows[3] = {0};
    int ncol = -1, c_rate = -1, c_flips = -1, c_n = -1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *save = NULL, *tok[16];
        int nt = 0;
        for (char *t = strtok_r(line, ",\r\n", &save); t && nt < 16; t = strtok_r(NULL, ",\r\n", &save)) tok[nt++] = t;
        if (lineno == 1) {
            for (int i = 0; i < nt; i++) {
                if (!strcmp(tok[i], "flip_rate")) c_rate = i;
                if (!strcmp(tok[i], "num_flips")) c_flips = i;
                if (!strcmp(tok[i], "num_comparisons")) c_n = i;
            }
            ncol = nt;
            if (c_rate < 0 || c_flips < 0 || c_n < 0) {
                fprintf(stderr, "%s:1: no flip_rate, num_flips and num_comparisons columns\n", path);
                fclose(f);
                return 2;
            }
            continue;
        }
        if (nt != ncol) {
            fprintf(stderr, "%s:%ld: %d fields, header has %d\n", path, lineno, nt, ncol);
            fclose(f);
            return 2;
        }
        long k = strtol(tok[c_flips], NULL, 10), n = strtol(tok[c_n], NULL, 10);
        if (n <= 0 || k < 0 || k > n) {
            fprintf(stderr, "%s:%ld: bad num_flips/num_comparisons\n", path, lineno);
            fclose(f);
            return 2;
        }
        double p = (double)k / (double)n;
        int b = p <= budget / 2 ? 0 : p >= 2 * budget ? 2 : 1;
        rows[b]++;
        simulate(n, k, budget, alpha, runs, rng, &band[b]);
    }
    fclose(f);
    printf("\nthe paper's flip table %s (budget %.2f%% for every workload, %ld orders per row)\n", path,
           100 * budget, runs);
    header();
    static const char *names[] = {"rate <= budget/2", "budget/2 < rate < 2x budget", "rate >= 2x budget"};
    for (int b = 0; b < 3; b++) {
        char what[64];
        snprintf(what, sizeof what, "%s (%ld rows)", names[b], rows[b]);
        if (band[b].runs) print_row(what, &band[b]);
    }
    gate_stats far = band[0];
    far.used += band[2].used;
    far.early += band[2].early;
    far.wrong += band[2].wrong;
    far.runs += band[2].runs;
    if (far.runs) print_row("at least 2x away (both bands)", &far);
    return 0;
}

/* Real outcomes of stored comparisons: base against targ, or against every
 * other run of the store (targ "all": runs sharing no prompt with base,
 * "ref@" and "stochastic/" runs are skipped), each workload replayed in
 * runs seeded orders at the budget. Per workload of one target a line;
 * for "all", the workloads grouped by their rate's distance from the
 * budget. agree: the sequential verdict equals compare's fixed-size one. */
typedef struct real_band {
    gate_stats s;
    long agree, workloads;
} real_band;

static int stored_one(drift_store *st, const char *base, const char *targ, double budget, double alpha, long runs,
                      int verbose, real_band *band) {
    drift_error err = {0};
    drift_comparison *c = NULL;
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    for (int k = 0; k < DRIFT_WL_COUNT; k++) o.budget[k] = budget;
    if (drift_compare_runs(st, base, targ, &o, &c, &err)) {
        if (verbose) fprintf(stderr, "sequential_bench: %s\n", err.msg);
        return verbose ? 2 : 0;
    }
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k] || c->wl[k].n == 0) continue;
        gate_stats s = {0};
        long agree = 0;
        for (long r = 0; r < runs; r++) {
            drift_seq_result res;
            if (drift_compare_sequential(c, alpha, (uint64_t)r + 1, &res, &err)) {
                fprintf(stderr, "sequential_bench: %s\n", err.msg);
                drift_comparison_free(c);
                return 2;
            }
            const drift_seq_wl *w = &res.wl[k];
            s.used += (double)w->asked / (double)w->n_total;
            s.early += w->early;
            agree += (w->verdict == DRIFT_SEQ_DEPLOY) == w->full_pass;
            s.runs++;
        }
        if (verbose)
            printf("  %-13s %6ld %7.2f%%  %6.1f%%  %6.1f%%  %6.1f%%\n", drift_workload_name((drift_workload)k),
                   c->wl[k].n, 100 * c->wl[k].flip_rate, 100 * s.used / (double)s.runs,
                   100.0 * (double)s.early / (double)s.runs, 100.0 * (double)agree / (double)s.runs);
        double p = c->wl[k].flip_rate;
        real_band *b = &band[p <= budget / 2 ? 0 : p >= 2 * budget ? 2 : 1];
        b->s.used += s.used;
        b->s.early += s.early;
        b->s.runs += s.runs;
        b->agree += agree;
        b->workloads++;
    }
    drift_comparison_free(c);
    return 0;
}

static int stored(const char *db, const char *base, const char *targ, double budget, double alpha, long runs) {
    drift_store *st = NULL;
    drift_error err = {0};
    if (drift_store_open_readonly(db, &st, &err)) {
        fprintf(stderr, "sequential_bench: %s\n", err.msg);
        return 2;
    }
    real_band band[3];
    memset(band, 0, sizeof band);
    int rc = 0;
    if (strcmp(targ, "all") != 0) {
        printf("\nstored comparison %s -> %s in %s (budget %.2f%%, %ld seeded orders)\n", base, targ, db,
               100 * budget, runs);
        printf("  %-13s %6s %8s  %7s  %7s  %7s\n", "workload", "N", "rate", "asked", "early", "agree");
        rc = stored_one(st, base, targ, budget, alpha, runs, 1, band);
    } else {
        drift_run_info *ri = NULL;
        size_t n = 0, used = 0;
        if (drift_store_run_list(st, &ri, &n, &err)) {
            fprintf(stderr, "sequential_bench: %s\n", err.msg);
            drift_store_close(st);
            return 2;
        }
        for (size_t i = 0; i < n && !rc; i++) {
            const char *l = ri[i].label;
            if (!strcmp(l, base) || !strncmp(l, "ref@", 4) || !strncmp(l, "stochastic/", 11)) continue;
            /* a lab's reference "ref@MODEL" is compared with MODEL's runs only */
            size_t ml = strlen(base) - 4;
            if (!strncmp(base, "ref@", 4) && (strncmp(l, base + 4, ml) != 0 || l[ml] != '/')) continue;
            long before = band[0].workloads + band[1].workloads + band[2].workloads;
            rc = stored_one(st, base, l, budget, alpha, runs, 0, band);
            used += band[0].workloads + band[1].workloads + band[2].workloads > before;
        }
        drift_run_info_array_free(ri, n);
        printf("\nstored comparisons %s -> each of %zu runs in %s (budget %.2f%%, %ld seeded orders each)\n", base,
               used, db, 100 * budget, runs);
        printf("  %-34s %7s  %7s  %7s  %7s\n", "workloads by full-suite rate", "gates", "asked", "early", "agree");
        static const char *names[] = {"rate <= budget/2", "budget/2 < rate < 2x budget", "rate >= 2x budget"};
        for (int b = 0; b < 3; b++) {
            if (!band[b].s.runs) continue;
            char what[64];
            snprintf(what, sizeof what, "%s (%ld)", names[b], band[b].workloads);
            printf("  %-34s %7ld  %6.1f%%  %6.1f%%  %6.1f%%\n", what, band[b].s.runs,
                   100.0 * band[b].s.used / (double)band[b].s.runs,
                   100.0 * (double)band[b].s.early / (double)band[b].s.runs,
                   100.0 * (double)band[b].agree / (double)band[b].s.runs);
        }
    }
    drift_store_close(st);
    return rc;
}

int main(int argc, char **argv) {
    double budget = 0.05, alpha = 0.05;
    long runs = 2000;
    uint64_t seed = 42;
    const char *table = NULL, *db = NULL, *base = NULL, *targ = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "usage: %s [--budget PCT] [--alpha A] [--runs R] [--seed S] [--flip-table CSV] "
                            "[--db FILE --baseline L --target L]\n", argv[0]);
            return 2;
        }
        i++;
        if (!strcmp(a, "--budget")) budget = atof(v) / 100.0;
        else if (!strcmp(a, "--alpha")) alpha = atof(v);
        else if (!strcmp(a, "--runs")) runs = atol(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--flip-table")) table = v;
        else if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--baseline")) base = v;
        else if (!strcmp(a, "--target")) targ = v;
        else {
            fprintf(stderr, "sequential_bench: unknown option %s\n", a);
            return 2;
        }
    }
    if (!(budget > 0 && budget < 1) || !(alpha > 0 && alpha < 1) || runs < 1) {
        fprintf(stderr, "sequential_bench: need 0 < budget < 100, 0 < alpha < 1, runs >= 1\n");
        return 2;
    }
    util_rng rng;
    util_rng_seed(&rng, seed);
    clock_t t0 = clock();
    synthetic(budget, alpha, runs, &rng);
    int rc = 0;
    if (table) rc = flip_table(table, budget, alpha, runs / 10 > 0 ? runs / 10 : 1, &rng);
    if (!rc && db) {
        if (!base || !targ) {
            fprintf(stderr, "sequential_bench: --db needs --baseline and --target\n");
            return 2;
        }
        rc = stored(db, base, targ, budget, alpha, runs / 10 > 0 ? runs / 10 : 1);
    }
    printf("\n(%.1f s CPU)\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return rc;
}
