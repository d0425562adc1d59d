/* cmd_report.c - `driftbench report --db F --html report.html`: the
 * self-contained HTML report of a store, computed from it
 * (drift_matrix_report_load) and then rendered (html.c). A store holding
 * one configuration besides its baseline (or --target L) gives the
 * comparison page, which leads with the gate's decision under compare's
 * gate options (--budget, --decide, --max-left-out, parsed by compare's
 * own parser); any other store, or --matrix, the matrix page, whose rows
 * carry each configuration's decision. The exit code says whether the page
 * was written (0) or not (2), not the decision: stderr says that.
 * --kl N adds the token KL of every configuration (embedded, or HTTP through
 * its server's prompt logprobs) against its baseline on N sampled prompts
 * per workload, drawn beside its flip rate:
 * the pipeline's KL step (drift_tokdiv_configs_run) over the loaded
 * report's configurations, attached to the page's options (o.kl). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/report_html.h"
#include "driftbench/teacher_forced.h"
#include "pipeline.h"

static const char report_usage[] =
    "usage: driftbench report --db STORE --html OUT.html [--baseline LABEL] [--target LABEL]\n"
    "       [--matrix] [--budget W=PCT,...] [--decide RULE] [--max-left-out PCT] [--title T]\n"
    "       [--max-flipped N] [--no-analysis] [--kl N [--kl-seed S] [--models DIR]]\n"
    "Writes one self-contained HTML page (inline CSS and SVG, no scripts). LABEL defaults to\n"
    "'baseline' and may hold {model}.\n"
    "A store with one configuration besides its baseline, or --target LABEL, gives the page of\n"
    "that comparison: the gate's verdict first (as driftbench compare decides it, with the\n"
    "budgets, the rule and its error rates), what was compared (targets, configuration,\n"
    "suites, decoding, versions), each workload's interval against its budget, then the flips.\n"
    "Otherwise (or with --matrix) the matrix page: flip-rate heatmap on a fixed colour scale\n"
    "with each cell's decision, direction of flips, taxonomy with each configuration's\n"
    "decision, ANOVA and PRI (when there are enough rows). Both end with the flipped prompts\n"
    "side by side, with a word diff of the two answers.\n"
    "Gate options, as compare's:\n";
static const char report_usage2[] =
    "--kl N: token KL per configuration, teacher-forced on N prompts per workload (a sample\n"
    "drawn from --kl-seed, default 1) for every configuration against its baseline,\n"
    "drawn against its flip rate (log-scale KL) with Spearman's rho. An HTTP run is forced\n"
    "through its server's prompt logprobs (as compare --kl; the server must be up); one that\n"
    "cannot be is listed as not drawn, with why. --models DIR finds a run's model file by\n"
    "name when its recorded path is gone.\n"
    "exit: 0 the page was written (whatever the decision: stderr says it), 2 error\n";

/* --kl N: the token KL of the report's configurations against their
 * baselines (drift_tokdiv_configs_run), with progress on stderr. */
static drift_status report_kl(drift_store *st, const drift_matrix_report *r, size_t limit, uint64_t seed,
                              const char *models, drift_html_kl *kl, drift_error *err) {
    size_t n = r->n_experiments;
    const char **labels = calloc(n + 1, sizeof *labels), **bases = calloc(n + 1, sizeof *bases);
    drift_status rc = labels && bases ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        labels[i] = r->experiments[i].label;
        bases[i] = r->experiments[i].baseline;
    }
    if (!rc)
        rc = drift_tokdiv_configs_run(st, labels, bases, n, limit, seed, models, cli_quiet ? NULL : cli_progress, NULL,
                                      kl, err);
    free(labels);
    free(bases);
    return rc;
}

static int cmd_report(int argc, char **argv) {
    const char *db = NULL, *html = NULL, *baseline = "baseline", *title = NULL, *maxf = NULL, *kln = NULL,
               *klseed = NULL, *models = NULL, *target = NULL;
    int analysis = 1, matrix = 0;
    cli_compare_args gate;
    cli_compare_args_default(&gate);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(report_usage, stdout);
            fputs(cli_gate_usage, stdout);
            fputs(report_usage2, stdout);
            return 0;
        }
        if (!strcmp(a, "--no-analysis")) {
            analysis = 0;
            continue;
        }
        if (!strcmp(a, "--matrix")) {
            matrix = 1;
            continue;
        }
        int gate_opt = !strcmp(a, "--budget") ? OPT_BUDGET : !strcmp(a, "--decide") ? OPT_DECIDE
                     : !strcmp(a, "--max-left-out") ? OPT_MAX_LEFT_OUT : 0;
        if (gate_opt) {
            if (++i >= argc) return cli_error("report", "%s needs a value", a);
            if (cli_parse_compare_option("report", gate_opt, argv[i], &gate) < 0) return CLI_EXIT_ERROR;
            continue;
        }
        const char **dst = !strcmp(a, "--db") ? &db : !strcmp(a, "--html") ? &html : !strcmp(a, "--baseline") ? &baseline
                         : !strcmp(a, "--title") ? &title : !strcmp(a, "--max-flipped") ? &maxf
                         : !strcmp(a, "--kl") ? &kln : !strcmp(a, "--kl-seed") ? &klseed
                         : !strcmp(a, "--models") ? &models : !strcmp(a, "--target") ? &target : NULL;
        if (!dst) return cli_error("report", "unknown option '%s' (see --help)", a);
        if (++i >= argc) return cli_error("report", "%s needs a value", a);
        *dst = argv[i];
    }
    if (!db || !html) return cli_error("report", "--db and --html are required (see --help)");
    if (matrix && target) return cli_error("report", "--matrix and --target do not go together");
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = baseline;
    o.analysis = analysis;
    o.target = target;
    o.comparison = !matrix;
    o.gate = &gate.opts;
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
        rc = report_kl(st, r, (size_t)kl_limit, (uint64_t)kl_seed, models, &kl, &err);
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
    drift_tokdiv_configs_clear(&kl);
    if (rc) {
        drift_matrix_report_free(r);
        return cli_error_lib("report", &err);
    }
    int ret = cli_write_output("report", html, page) ? CLI_EXIT_ERROR : 0;
    free(page);
    if (!ret && !cli_quiet) {
        if (r->comparison) {
            const drift_comparison *c = r->experiments[0].cmp;
            fprintf(stderr, "report: %s (%s -> %s: %s, compare's exit code %d)\n", cli_safe(html),
                    cli_safe(r->experiments[0].baseline), cli_safe(r->experiments[0].label),
                    drift_decision_name(c->decision), drift_decision_exit_code(c->decision));
        } else {
            fprintf(stderr, "report: %s (%zu configurations)\n", cli_safe(html), r->n_experiments);
        }
    }
    drift_matrix_report_free(r);
    return ret;
}
CLI_COMMAND(report, "report", "self-contained HTML report of a store", cmd_report)
