/* cmd_compare.c - `driftbench compare`: paired flips between two stored runs
 * and the deploy/block verdict; compare's flags, parsed here for `compare`
 * and `measure` (cli_parse_compare_option). */
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

void cli_compare_args_default(cli_compare_args *c) {
    memset(c, 0, sizeof *c);
    drift_compare_opts_default(&c->opts);
    c->fmt = DRIFT_FORMAT_TEXT;
}

int cli_parse_compare_option(const char *cmd, int opt, const char *arg, cli_compare_args *c) {
    drift_error err = {0};
    switch (opt) {
    case OPT_WORKLOAD:
        c->opts.only_workload = drift_workload_parse(arg);
        if (c->opts.only_workload == DRIFT_WL_UNKNOWN)
            return cli_error(cmd, "--workload: unknown workload '%s' (math, code, safety, chat, long_context)", arg), -1;
        return 1;
    case OPT_BUDGET:
        if (drift_compare_parse_budgets(&c->opts, arg, &err)) return cli_error_lib(cmd, &err), -1;
        return 1;
    case OPT_SDR:
        if (cli_parse_double(cmd, "--sdr-threshold", arg, 0, 2, &c->opts.sdr_threshold)) return -1;
        return 1;
    case OPT_FORMAT:
        if (drift_format_parse(arg, &c->fmt, &err)) return cli_error_lib(cmd, &err), -1;
        return 1;
    case 'o': c->out = arg; return 1;
    }
    return 0;
}

static int cmd_compare(int argc, char **argv) {
    enum { O_BASE = 300 };
    static const struct option longopts[] = {
        {"db", required_argument, 0, OPT_DB}, {"baseline", required_argument, 0, O_BASE},
        {"target", required_argument, 0, OPT_TARGET}, COMPARE_LONG_OPTIONS,
        {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    const char *db = NULL, *base = NULL, *targ = NULL;
    cli_compare_args c;
    cli_compare_args_default(&c);
    drift_error err = {0};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        int r = cli_parse_compare_option("compare", opt, optarg, &c);
        if (r < 0) return CLI_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case OPT_DB: db = optarg; break;
        case O_BASE: base = optarg; break;
        case OPT_TARGET: targ = optarg; break;
        case 'h':
        case OPT_HELP: fputs(compare_usage, stdout); return 0;
        default: return cli_error("compare", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("compare", "unexpected argument '%s'", argv[optind]);
    if (!db || !base || !targ) return cli_error("compare", "--db, --baseline and --target are required (see --help)");
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("compare", &err);
    int rc = cli_do_compare("compare", st, base, targ, &c);
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(compare, "compare", "paired flips between two runs, with CIs and a verdict", cmd_compare)
