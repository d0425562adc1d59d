/* table_render.c - the configuration x workload flip table as text
 * (report.h), pure: one group per workload in the workloads' order, each
 * row a configuration with its four fixed dimensions, the rate, its 95%
 * CI and flips/n (percent, as the table holds them). Ids and levels come
 * from outside: each cell is sanitised (report_safe.c), then cut to its
 * column at a UTF-8 boundary and padded. The CSV form is the table's own
 * file format (drift_table_format_csv, which keeps formulas out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"
#include "util/util.h"

/* s sanitised, at most width bytes of it (cut at a UTF-8 lead byte), padded
 * to width, then a space. */
static void cell(util_buf *b, const char *s, size_t width) {
    util_buf t = {0};
    report_put_name(&t, s);
    size_t n = t.len;
    if (n > width) {
        n = width;
        while (n > 0 && ((unsigned char)t.data[n] & 0xC0) == 0x80) n--;
    }
    if (n) buf_append(b, t.data, n);
    buf_printf(b, "%*s", (int)(width - n + 1), "");
    buf_free(&t);
}

/* See report.h. */
drift_status drift_table_render_text(const drift_table *t, char **out, drift_error *err) {
    *out = NULL;
    if (!t) return drift_error_set(err, DRIFT_ERR_INVALID, "no flip table to render");
    util_buf b = {0};
    int any_row = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const char *wl = drift_workload_name((drift_workload)w);
        int header = 0;
        for (size_t r = 0; r < t->n_rows; r++) {
            const drift_table_row *row = &t->rows[r];
            if (strcmp(row->dims[DRIFT_DIM_WORKLOAD], wl)) continue;
            if (!header) {
                buf_printf(&b, "\n%s\n  %-40s %-11s %-12s %-9s %-22s %8s  %-17s %9s\n", wl, "configuration",
                           drift_dim_names[DRIFT_DIM_MODEL], drift_dim_names[DRIFT_DIM_HARDWARE],
                           drift_dim_names[DRIFT_DIM_PRECISION], drift_dim_names[DRIFT_DIM_FRAMEWORK], "flip",
                           "95% CI", "flips/n");
                header = 1;
            }
            char ci[40];
            snprintf(ci, sizeof ci, "[%.1f, %.1f]", row->ci_low, row->ci_high);
            buf_puts(&b, "  ");
            cell(&b, row->experiment_id, 40);
            cell(&b, row->dims[DRIFT_DIM_MODEL], 11);
            cell(&b, row->dims[DRIFT_DIM_HARDWARE], 12);
            cell(&b, row->dims[DRIFT_DIM_PRECISION], 9);
            cell(&b, row->dims[DRIFT_DIM_FRAMEWORK], 22);
            buf_printf(&b, "%7.2f%%  %-17s %4ld/%-4ld\n", row->flip_rate, ci, row->num_flips, row->num_comparisons);
            any_row = 1;
        }
    }
    if (!any_row) buf_puts(&b, "(no configuration has pairs against its baseline)\n");
    return report_text_finish(&b, out, err);
}
