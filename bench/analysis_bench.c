/* analysis_bench.c - times the matrix analysis on the paper's 420-row flip
 * table: ANOVA (types 1, 2, 3, plus the workload strata) and `pri eval`
 * (fixed hyper-parameters on one thread, then tuned by inner CV as the CLI
 * does by default, on one thread and on `threads`). Prints wall and CPU
 * milliseconds; bench/analysis_ref.py times the same work in Python
 * (statsmodels + xgboost, one thread) for the ratio.
 *   usage: bench_analysis_bench [flip_rates.csv] [reps] [threads]
 *   (DRIFT_SHARED is used when no path; threads: evaluations side by side, 2) */
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
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    if (threads < 1) threads = 1;
    drift_error err = {0};
    drift_table *t = NULL;
    if (drift_table_read_csv(path, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    double w0 = util_now_ms(), c0 = cpu_ms();
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
    double anova_wall = (util_now_ms() - w0) / reps, anova_cpu = (cpu_ms() - c0) / reps;
    printf("anova types 1+2+3 (+4 workload strata each), %zu rows: %.2f ms wall, %.2f ms cpu (mean of %d)\n",
           t->n_rows, anova_wall, anova_cpu, reps);
    /* fixed on 1 thread; tuned on 1 thread; tuned on `threads` */
    const int runs[3][2] = {{0, 1}, {1, 1}, {1, threads}};
    for (int k = 0; k < (threads > 1 ? 3 : 2); k++) {
        int tune = runs[k][0], nt = runs[k][1];
        drift_pri_options o;
        drift_pri_options_init(&o);
        o.tune = tune;
        o.nthread = nt;
        drift_pri_eval *e = NULL;
        w0 = util_now_ms();
        c0 = cpu_ms();
        if (drift_pri_evaluate(t, &o, &e, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        double pw = util_now_ms() - w0, pc = cpu_ms() - c0;
        printf("pri eval (%s, %d thread%s): %.0f ms wall, %.0f ms cpu; random-split R2 %.4f; held-out",
               tune ? "tuned: depth {3,5} x early-stopped trees x 3 x 3 repeated inner folds" : "fixed hyper-parameters", nt,
               nt > 1 ? "s" : "", pw, pc, e->random_split.test_r2);
        for (size_t i = 0; i < e->n_paper; i++) printf(" %s %.4f", e->paper[i].name, e->paper[i].test_r2);
        printf("\ntotal anova + pri eval (%s, %d thread%s): %.0f ms wall, %.0f ms cpu\n", tune ? "tuned" : "fixed", nt,
               nt > 1 ? "s" : "", pw + anova_wall, pc + anova_cpu);
        drift_pri_eval_free(e);
    }
    drift_table_free(t);
    return 0;
}
