/* compare_format.c - drift_comparison_render (report.h): a comparison in
 * the format asked. Text, markdown, junit and json are compare_render.c's
 * (report_comparison_plain), github is github_render.c's (annotations
 * around compare_render.c's markdown), html is html.c's page. Standing
 * above the three, it lets github_render.c take its summary from
 * compare_render.c without compare_render.c calling back up. */
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "report/report_internal.h"

/* See report.h. */
drift_status drift_comparison_render(const drift_comparison *c, const drift_comparison_details *d, drift_format fmt,
                                     char **out, drift_error *err) {
    switch (fmt) {
    case DRIFT_FORMAT_GITHUB: return drift_github_render(c, d, out, NULL, err);
    case DRIFT_FORMAT_HTML:
        *out = NULL;
        if (!c) return drift_error_set(err, DRIFT_ERR_INVALID, "no comparison to report");
        return drift_comparison_html_render(c, d, NULL, out, err);
    default: return report_comparison_plain(c, d, fmt, out, err);
    }
}
