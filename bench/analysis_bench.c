/* analysis_bench.c - times the matrix analysis on the paper's 420-row flip
 * table: ANOVA (types 1, 2, 3, plus the workload strata) and `pri eval`
 * (fixed hyper-parameters, and tuned by inner CV as the CLI does by
 * default). Prints wall and CPU milliseconds; bench/analysis_ref.py times
 * the same work in Python (statsmodels + xgboost) for the ratio.
 *   usage: bench_analysis_bench [flip_rates.csv] [reps] [threads]
 *   (DRIFT_SHARED is used when no path; threads: xgboost / tuning threads, 1) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/analysis.h"
#include "util/util.h"

static double cpu_ms(void) { return 1000.0 * (double)clock() / CLOCKS_PER_SEC; }

int main(int argc, char **argv) {
    char def[1024];
    const char *shared = getenv("DRIFT_SHARED");
    snprintf(def, sizeof def, "%s/driftbench-ae/data/flip_rates.csv", shared ? shared : "../shared");
    const char *path = argc > 1 ? argv[1] : def;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 1) reps = 1;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (threads < 1) threads = 1;
    drift_error err = {0};
    drift_table *t = NULL;
    if (drift_table_read_csv(path, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    double w0 = drift_now_ms(), c0 = cpu_ms();
    for (int r = 0; r < reps; r++)
        for (int ty = 1; ty <= 3; ty++) {
            drift_anova_table *a = NULL, **st = NULL;
            size_t ns = 0;
            if (drift_anova_run(t, NULL, ty, &a, &err) ||
                drift_anova_stratified(t, NULL, ty, "workload", &st, &ns, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 2;
            }
            drift_anova_free(a);
            for (size_t i = 0; i < ns; i++) drift_anova_free(st[i]);
            free(st);
        }
    double anova_wall = (drift_now_ms() - w0) / reps, anova_cpu = (cpu_ms() - c0) / reps;
    printf("anova types 1+2+3 (+4 workload strata each), %zu rows: %.2f ms wall, %.2f ms cpu (mean of %d)\n",
           t->n_rows, anova_wall, anova_cpu, reps);
    for (int tune = 0; tune <= 1; tune++) {
        drift_pri_options o;
        drift_pri_options_init(&o);
        o.tune = tune;
        o.nthread = threads;
        drift_pri_eval *e = NULL;
        w0 = drift_now_ms();
        c0 = cpu_ms();
        if (drift_pri_evaluate(t, &o, &e, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        double pw = drift_now_ms() - w0, pc = cpu_ms() - c0;
        double b200 = 0;
        for (size_t i = 0; i < e->n_paper; i++)
            if (!strcmp(e->paper[i].name, "hardware=b200")) b200 = e->paper[i].test_r2;
        printf("pri eval (%s, %d thread%s): %.0f ms wall, %.0f ms cpu; random-split R2 %.4f, held-out b200 %.4f\n",
               tune ? "tuned: 12 configs x 3 inner folds per model" : "fixed hyper-parameters", threads,
               threads > 1 ? "s" : "", pw, pc, e->random_split.test_r2, b200);
        printf("total anova + pri eval (%s): %.0f ms wall, %.0f ms cpu\n", tune ? "tuned" : "fixed", pw + anova_wall,
               pc + anova_cpu);
        drift_pri_eval_free(e);
    }
    drift_table_free(t);
    return 0;
}
