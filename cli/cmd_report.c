/* cmd_report.c - `driftbench report --db F --html report.html`: the
 * self-contained HTML report of every run against its baseline, computed
 * from the store (drift_matrix_report_load) and then rendered (html.c).
 * --kl N adds the token KL of every embedded configuration against its
 * baseline on N sampled prompts per workload (drift_html_kl_load), drawn
 * beside its flip rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/report_html.h"

static int cmd_report(int argc, char **argv) {
    const char *db = NULL, *html = NULL, *baseline = "baseline", *title = NULL, *maxf = NULL, *kln = NULL,
               *klseed = NULL, *models = NULL;
    int analysis = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: driftbench report --db STORE --html OUT.html [--baseline LABEL] [--title T]\n"
                   "       [--max-flipped N] [--no-analysis] [--kl N [--kl-seed S] [--models DIR]]\n"
                   "Writes one self-contained HTML page (inline CSS and SVG, no scripts): flip-rate heatmap\n"
                   "with CIs, direction of flips, taxonomy, ANOVA and PRI (when there are enough rows), and\n"
                   "the flipped prompts side by side. LABEL defaults to 'baseline' and may hold {model}.\n"
                   "--kl N: token KL per configuration, teacher-forced on N prompts per workload (a sample\n"
                   "drawn from --kl-seed, default 1) for every embedded configuration against its baseline,\n"
                   "drawn against its flip rate (log-scale KL) with Spearman's rho. HTTP runs are listed as\n"
                   "not drawn. --models DIR finds a run's model file by name when its recorded path is gone.\n");
            return 0;
        }
        if (!strcmp(a, "--no-analysis")) {
            analysis = 0;
            continue;
        }
        const char **dst = !strcmp(a, "--db") ? &db : !strcmp(a, "--html") ? &html : !strcmp(a, "--baseline") ? &baseline
                         : !strcmp(a, "--title") ? &title : !strcmp(a, "--max-flipped") ? &maxf
                         : !strcmp(a, "--kl") ? &kln : !strcmp(a, "--kl-seed") ? &klseed
                         : !strcmp(a, "--models") ? &models : NULL;
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
    long kl_limit = 0, kl_seed = 1;
    if (kln && cli_parse_int("report", "--kl", kln, 1, 100000000L, &kl_limit)) return CLI_EXIT_ERROR;
    if (klseed && cli_parse_int("report", "--kl-seed", klseed, 0, 2147483647L, &kl_seed)) return CLI_EXIT_ERROR;
    if ((klseed || models) && !kln) return cli_error("report", "--kl-seed and --models go with --kl N");
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("report", &err);
    drift_matrix_report *r = NULL;
    drift_html_kl kl = {0};
    drift_status rc = drift_matrix_report_load(st, &o, &r, &err);
    if (!rc && kln) {
        rc = drift_html_kl_load(st, r, (size_t)kl_limit, (uint64_t)kl_seed, models, cli_quiet ? NULL : cli_progress,
                                NULL, &kl, &err);
        if (!cli_quiet) cli_progress_done();
        o.kl = &kl;
    }
    drift_store_close(st);
    if (rc) {
        drift_matrix_report_free(r);
        return cli_error_lib("report", &err);
    }
    char *page = NULL;
    rc = drift_html_render(r, &o, &page, &err);
    drift_matrix_report_free(r);
    drift_html_kl_clear(&kl);
    if (rc) return cli_error_lib("report", &err);
    int ret = cli_write_output("report", html, page) ? CLI_EXIT_ERROR : 0;
    free(page);
    if (!ret && !cli_quiet) fprintf(stderr, "report: %s\n", html);
    return ret;
}
CLI_COMMAND(report, "report", "self-contained HTML report of a store", cmd_report)
