/* cmd_report.c - `driftbench report --db F --html report.html`: the
 * self-contained HTML report of every run against its baseline, computed
 * from the store (drift_matrix_report_load) and then rendered (html.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/report_html.h"

static int cmd_report(int argc, char **argv) {
    const char *db = NULL, *html = NULL, *baseline = "baseline", *title = NULL, *maxf = NULL;
    int analysis = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: driftbench report --db FILE --html OUT.html [--baseline LABEL] [--title T]\n"
                   "       [--max-flipped N] [--no-analysis]\n"
                   "Writes one self-contained HTML page (inline CSS and SVG, no scripts): flip-rate heatmap\n"
                   "with CIs, direction of flips, taxonomy, ANOVA and PRI (when there are enough rows), and\n"
                   "the flipped prompts side by side. LABEL defaults to 'baseline' and may hold {model}.\n");
            return 0;
        }
        if (!strcmp(a, "--no-analysis")) {
            analysis = 0;
            continue;
        }
        const char **dst = !strcmp(a, "--db") ? &db : !strcmp(a, "--html") ? &html : !strcmp(a, "--baseline") ? &baseline
                         : !strcmp(a, "--title") ? &title : !strcmp(a, "--max-flipped") ? &maxf : NULL;
        if (!dst) return cli_error("report", "unknown option '%s' (see --help)", a);
        if (++i >= argc) return cli_error("report", "%s needs a value", a);
        *dst = argv[i];
    }
    if (!db || !html) return cli_error("report", "--db and --html are required (see --help)");
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = baseline;
    o.analysis = analysis;
    if (title) o.title = title;
    if (maxf) {
        long v;
        if (cli_parse_int("report", "--max-flipped", maxf, 0, 100000, &v)) return CLI_EXIT_ERROR;
        o.max_flipped = (size_t)v;
    }
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("report", &err);
    drift_matrix_report *r = NULL;
    drift_status rc = drift_matrix_report_load(st, &o, &r, &err);
    drift_store_close(st);
    if (rc) return cli_error_lib("report", &err);
    char *page = NULL;
    rc = drift_html_render(r, &o, &page, &err);
    drift_matrix_report_free(r);
    if (rc) return cli_error_lib("report", &err);
    int ret = cli_write_output("report", html, page) ? CLI_EXIT_ERROR : 0;
    free(page);
    if (!ret && !cli_quiet) fprintf(stderr, "report: %s\n", html);
    return ret;
}
CLI_COMMAND(report, "report", "self-contained HTML report of a store", cmd_report)
