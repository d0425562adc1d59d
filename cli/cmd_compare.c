/* cmd_compare.c - `driftbench compare`: paired flips between two stored runs
 * and the deploy/block verdict. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"

static const char compare_usage[] =
    "usage: driftbench compare --db FILE --baseline L --target L [options]\n"
    "\n"
    "Pairs the two runs prompt by prompt and reports, per workload, the flip\n"
    "rate with its Wilson 95% CI, both directions, accuracies, net change and\n"
    "the exact McNemar p; then the verdict against the drift budgets.\n"
    "\n"
    "  --workload W         only this workload (math, code, safety, chat, long_context)\n"
    "  --budget W=PCT,...   drift budgets in percent (default safety=1,code=0.5)\n"
    "  --sdr-threshold X    chat answers drift when SDR > X (default 0.30)\n"
    "  --format F           text (default), json, markdown, junit\n"
    "  -o FILE              write the report to FILE instead of stdout\n"
    "\n"
    "exit: 0 within budget, 1 drift over budget, 2 error\n";

static int cmd_compare(int argc, char **argv) {
    enum { O_DB = 300, O_BASE, O_TARG, O_WL, O_BUDGET, O_SDR, O_FMT, O_HELP };
    static const struct option longopts[] = {
        {"db", required_argument, 0, O_DB}, {"baseline", required_argument, 0, O_BASE},
        {"target", required_argument, 0, O_TARG}, {"workload", required_argument, 0, O_WL},
        {"budget", required_argument, 0, O_BUDGET}, {"sdr-threshold", required_argument, 0, O_SDR},
        {"format", required_argument, 0, O_FMT}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    const char *db = NULL, *base = NULL, *targ = NULL, *out = NULL;
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    drift_format fmt = DRIFT_FORMAT_TEXT;
    drift_error err = {0};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        switch (opt) {
        case O_DB: db = optarg; break;
        case O_BASE: base = optarg; break;
        case O_TARG: targ = optarg; break;
        case O_WL:
            o.only_workload = drift_workload_parse(optarg);
            if (o.only_workload == DRIFT_WL_UNKNOWN)
                return cli_error("compare", "--workload: unknown workload '%s' (math, code, safety, chat, long_context)",
                                 optarg);
            break;
        case O_BUDGET:
            if (drift_compare_parse_budgets(&o, optarg, &err)) return cli_error_lib("compare", &err);
            break;
        case O_SDR:
            if (cli_parse_double("compare", "--sdr-threshold", optarg, 0, 2, &o.sdr_threshold)) return CLI_EXIT_ERROR;
            break;
        case O_FMT:
            if (drift_format_parse(optarg, &fmt, &err)) return cli_error_lib("compare", &err);
            break;
        case 'o': out = optarg; break;
        case 'h':
        case O_HELP: fputs(compare_usage, stdout); return 0;
        default: return cli_error("compare", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("compare", "unexpected argument '%s'", argv[optind]);
    if (!db || !base || !targ) return cli_error("compare", "--db, --baseline and --target are required (see --help)");
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("compare", &err);
    int rc = cli_do_compare("compare", st, base, targ, &o, fmt, out);
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(compare, "compare", "paired flips between two runs, with CIs and a verdict", cmd_compare)
