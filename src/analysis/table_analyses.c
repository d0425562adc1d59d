/* table_analyses.c - the analyses the matrix reports show beside a flip
 * table (analysis.h): the ANOVA of the dimensions that vary (the types
 * asked) once the table has two residual degrees of freedom to spare, and
 * the PRI's held-out evaluation once it has DRIFT_ANALYSES_PRI_MIN_ROWS
 * rows. Each analysis that cannot run says why in the struct instead of
 * failing the report; the HTML report and the lab render from it. */
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"

void drift_table_analyses_clear(drift_table_analyses *a) {
    if (!a) return;
    free(a->formula);
    for (int k = 0; k < 4; k++) drift_anova_free(a->anova[k]);
    drift_pri_eval_free(a->pri_own);
    memset(a, 0, sizeof *a);
}

/* See analysis.h. */
drift_status drift_table_analyze(const drift_table *t, unsigned anova_types, const drift_pri_options *pri_o,
                                 const drift_pri_eval *pri_given, drift_table_analyses *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!t) return drift_error_set(err, DRIFT_ERR_INVALID, "analyses need a table");
    out->n_rows = t->n_rows;
    out->formula = drift_table_varying_formula(t, &out->n_params);
    out->anova_fits = out->formula && t->n_rows >= out->n_params + 2;
    for (int type = 1; type <= 3 && out->anova_fits; type++)
        if (anova_types & (1u << type))
            drift_anova_run(t, out->formula, type, &out->anova[type], &out->anova_error[type]);
    out->pri_asked = pri_o != NULL;
    out->pri_fits = t->n_rows >= DRIFT_ANALYSES_PRI_MIN_ROWS;
    if (pri_o && out->pri_fits) {
        if (pri_given) out->pri = pri_given;
        else if (drift_pri_evaluate(t, pri_o, &out->pri_own, &out->pri_error) == DRIFT_OK) out->pri = out->pri_own;
    }
    return DRIFT_OK;
}
