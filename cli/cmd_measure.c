/* cmd_measure.c - `driftbench measure`: run + score + compare in one go,
 * for two targets (the production stack and the candidate). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"

static const char measure_usage[] =
    "usage: driftbench measure --baseline SPEC --target SPEC --suite S [--suite S ...] [options]\n"
    "\n"
    "Runs the suites against both targets, scores every answer, and compares\n"
    "target against baseline: the same as run + run + score + compare.\n"
    "Re-running the same command resumes whatever is missing.\n"
    "\n"
    "  --db FILE                store (default driftbench-measure.db)\n"
    "  --baseline-label L       default 'baseline'\n"
    "  --target-label L         default 'target'\n"
    "  --baseline-config k=v,.. dimensions of the baseline stack\n"
    "  --target-config k=v,..   dimensions of the target stack\n"
    "  run options:     --concurrency --temperature --top-p --top-k --seed --max-tokens\n"
    "                   --logprobs --replicates --limit --timeout --connect-timeout --retries\n"
    "                   (see driftbench run --help)\n"
    "  score options:   --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N\n"
    "  compare options: --workload W --budget W=PCT,... --sdr-threshold X --format F -o FILE\n"
    "\n"
    "exit: 0 within budget, 1 drift over budget, 2 error\n";

static int cmd_measure(int argc, char **argv) {
    enum { O_BASE = 400, O_TARG, O_DB, O_BLABEL, O_TLABEL, O_BCONF, O_TCONF, O_GUARD, O_EMB, O_UNSAFE, O_JOBS,
           O_HELP };
    static const struct option longopts[] = {
        {"baseline", required_argument, 0, O_BASE}, {"target", required_argument, 0, O_TARG},
        {"db", required_argument, 0, O_DB}, {"baseline-label", required_argument, 0, O_BLABEL},
        {"target-label", required_argument, 0, O_TLABEL}, {"baseline-config", required_argument, 0, O_BCONF},
        {"target-config", required_argument, 0, O_TCONF}, RUN_LONG_OPTIONS,
        {"guard", required_argument, 0, O_GUARD}, {"embedder", required_argument, 0, O_EMB},
        {"unsafe-code-exec", no_argument, 0, O_UNSAFE}, {"jobs", required_argument, 0, O_JOBS},
        COMPARE_LONG_OPTIONS, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    cli_run_args a;
    cli_run_args_default(&a);
    const char *base = NULL, *targ = NULL, *db = "driftbench-measure.db", *blabel = "baseline", *tlabel = "target";
    const char *bconf = NULL, *tconf = NULL;
    drift_score_opts so;
    drift_score_opts_default(&so);
    cli_compare_args co;
    cli_compare_args_default(&co);
    drift_error err = {0};
    long v;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        int r = cli_parse_run_option("measure", opt, optarg, &a);
        if (r == 0) r = cli_parse_compare_option("measure", opt, optarg, &co);
        if (r < 0) return CLI_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case O_BASE: base = optarg; break;
        case O_TARG: targ = optarg; break;
        case O_DB: db = optarg; break;
        case O_BLABEL: blabel = optarg; break;
        case O_TLABEL: tlabel = optarg; break;
        case O_BCONF: bconf = optarg; break;
        case O_TCONF: tconf = optarg; break;
        case O_GUARD: so.guard_spec = optarg; break;
        case O_EMB: so.embedder_spec = optarg; break;
        case O_UNSAFE: so.unsafe_code_exec = 1; break;
        case O_JOBS:
            if (cli_parse_int("measure", "--jobs", optarg, 0, 1024, &v)) return CLI_EXIT_ERROR;
            so.jobs = (int)v;
            break;
        case 'h':
        case O_HELP: fputs(measure_usage, stdout); return 0;
        default: return cli_error("measure", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("measure", "unexpected argument '%s'", argv[optind]);
    if (!base || !targ || !a.n_suites)
        return cli_error("measure", "--baseline, --target and at least one --suite are required (see --help)");
    if (!strcmp(blabel, tlabel)) return cli_error("measure", "--baseline-label and --target-label must differ");
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("measure", &err);
    cli_install_signal_handlers();
    a.db = db;
    a.label = blabel;
    a.target = base;
    a.config = bconf;
    int rc = cli_do_run("measure", st, &a);
    if (rc == CLI_EXIT_PASS) {
        a.label = tlabel;
        a.target = targ;
        a.config = tconf;
        rc = cli_do_run("measure", st, &a);
    }
    /* scoring is not interruptible yet: a signal during it stops measure right after (a second one at once) */
    if (rc == CLI_EXIT_PASS && cli_interrupted) rc = cli_error("measure", "interrupted; run the same command to resume");
    if (rc == CLI_EXIT_PASS) rc = cli_do_score("measure", st, NULL, &so);
    if (rc == CLI_EXIT_PASS && cli_interrupted) rc = cli_error("measure", "interrupted; run the same command to resume");
    if (rc == CLI_EXIT_PASS) rc = cli_do_compare("measure", st, blabel, tlabel, &co);
    if (!cli_quiet && rc != CLI_EXIT_ERROR) fprintf(stderr, "measure: store %s (labels '%s', '%s')\n", db, blabel, tlabel);
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(measure, "measure", "run + score + compare two targets in one go", cmd_measure)
