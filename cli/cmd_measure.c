/* cmd_measure.c - `driftbench measure`: run + score + compare in one go,
 * for two targets (the production stack and the candidate).
 *
 * The work is the library's measure stage (drift_measure_run,
 * src/pipeline/measure.c: servers, runs, the sequential gate's chunks,
 * scoring the two labels, compare); the request control of a file and the
 * flags, shared and per side, is layered by drift_measure_request_layer.
 * This file has the flags; measure_print.c prints the stage, writes the
 * report and gives the exit code: the gate's decision, 2 for an error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config_file.h"
#include "driftbench/measure.h"
#include "measure_print.h"
#include "pipeline.h"

static const char *const SIDE[2] = {"baseline", "target"};

static const char measure_usage[] =
    "usage: driftbench measure --baseline SPEC --target SPEC --suite S [--suite S ...] [options]\n"
    "       driftbench measure -c drift.yaml [options]\n"
    "\n"
    "Runs the suites against both targets, scores every answer of the two runs,\n"
    "and compares target against baseline: the same as run + run + score --label\n"
    "(for each) + compare. Other runs of the store are not scored.\n"
    "Re-running the same command resumes whatever is missing.\n"
    "\n"
    "  -c, --config FILE        the targets, suites and options from a YAML (or .json) file\n"
    "                           (docs/config.md); flags given too override the file's values\n"
    "  --db STORE               store: SQLite file or postgresql:// URL (default driftbench-measure.db)\n"
    "  --baseline-label L       default: 'baseline', or the first of baseline-2,\n"
    "                           baseline-3, ... that is free or holds this same run\n"
    "                           (same model, request fields, decoding, config: the\n"
    "                           endpoint may differ), so re-running resumes it and\n"
    "                           another measure in the same store never collides\n"
    "  --target-label L         the same for the target ('target', target-2, ...)\n"
    "  --baseline-config k=v,.. dimensions of the baseline stack\n"
    "  --target-config k=v,..   dimensions of the target stack\n"
    "  --baseline-start CMD     start the baseline's server with this shell command before\n"
    "                           its run and stop it after; {port} in CMD and in --baseline\n"
    "                           is a free port picked then (e.g. --baseline-start\n"
    "                           'llama-server -m m.gguf --port {port} -np 1' --baseline\n"
    "                           'http://127.0.0.1:{port}/v1?model=m'); the server must\n"
    "                           answer on {port} itself (another process there: exit 2)\n"
    "  --target-start CMD       the same for the target\n"
    "  --start-timeout S        seconds a started server may take to answer its health\n"
    "                           check with 200 (default 120)\n"
    "  --health-path P          the path polled (default /health)\n"
    "  API keys: each side's SPEC names its own variable, e.g. --baseline\n"
    "  'https://a.example/v1?model=m&api_key_env=A_KEY' --target\n"
    "  'https://b.example/v1?model=m&api_key_env=B_KEY' (default $OPENAI_API_KEY)\n"
    "  request control (both sides; see driftbench run --help):\n"
    "                   --system TEXT --system-file F --template TEXT --extra-body JSON|@F\n"
    "                   --header 'N: V' (repeatable) --stop S (repeatable)\n"
    "  --baseline-extra-body JSON|@F  the baseline's extra body, in place of --extra-body\n"
    "  --target-extra-body JSON|@F    the target's (e.g. the field one server needs and\n"
    "                           the other does not)\n"
    "  --baseline-header 'N: V' a header for the baseline only (repeatable; one of the\n"
    "                           same name given by --header is replaced)\n"
    "  --target-header 'N: V'   the same for the target\n"
    "  run options:     --concurrency --temperature --top-p --top-k --seed --max-tokens\n"
    "                   --logprobs --replicates --limit --timeout --connect-timeout --retries\n"
    "                   (see driftbench run --help)\n"
    "  order options:   --order suite|random|risk --order-seed S --risk-from L\n"
    "                   --order risk asks the target riskiest prompt first, by the\n"
    "                   flip risk of run L's answers, or of the measure's own\n"
    "                   baseline (which then needs --logprobs K); the baseline is\n"
    "                   asked in L's risk order, or in suite order without L\n"
    "  score options:   --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N\n"
    "  compare options: --workload W --sdr-threshold X --format F -o FILE, and the gate's:\n";
static const char measure_usage2[] =
    "\n"
    "Sequential gate:\n"
    "  --sequential             ask both stacks in a seeded random order (--order-seed,\n"
    "                           default 42), in chunks of 16 pairs per workload with a\n"
    "                           budget, and stop asking a workload as soon as an\n"
    "                           anytime-valid interval for its flip rate is under its\n"
    "                           budget (deploy) or over it (block); the suite's end\n"
    "                           gives compare's decision (deploy, block or inconclusive).\n"
    "                           Reports pairs asked of the\n"
    "                           suite, the interval at the stop and the verdict (text,\n"
    "                           json, markdown), as compare --sequential --seed S does on\n"
    "                           the stored (partial) runs. Not with --order suite|risk.\n"
    "                           With --baseline-start / --target-start, each server is\n"
    "                           started once and both stay up until the last chunk\n"
    "                           (asked one at a time)\n"
    "  --alpha A                error rate of each verdict (default 0.05)\n"
    "\n"
    "Progress goes to stderr: a bar on a terminal, else a line every DRIFT_PROGRESS_SECS\n"
    "seconds (default 10; 0: none) and a final one; -v adds a line per request, -q none.\n"
    "\n";

static int measure_parsed(int argc, char **argv, cli_run_args *ap, drift_measure_opts *mop, cli_compare_args *cop,
                          const char *db, int alpha_given, int order_given);

/* *cfg: the config file (-c), freed by the caller. */
static int measure_cmd(int argc, char **argv, drift_config **cfg) {
    enum { O_BASE = 400, O_TARG, O_DB, O_BLABEL, O_TLABEL, O_BCONF, O_TCONF, O_GUARD, O_EMB, O_UNSAFE, O_JOBS,
           O_BSTART, O_TSTART, O_STIMEOUT, O_HEALTH, O_HELP, O_SEQ, O_ALPHA, O_BEXTRA, O_TEXTRA, O_BHEADER,
           O_THEADER, O_CFGFILE };
    static const struct option longopts[] = {
        {"config", required_argument, 0, O_CFGFILE}, /* the file; before RUN_LONG_OPTIONS' --config k=v */
        {"baseline", required_argument, 0, O_BASE}, {"target", required_argument, 0, O_TARG},
        {"db", required_argument, 0, O_DB}, {"baseline-label", required_argument, 0, O_BLABEL},
        {"target-label", required_argument, 0, O_TLABEL}, {"baseline-config", required_argument, 0, O_BCONF},
        {"target-config", required_argument, 0, O_TCONF}, {"baseline-start", required_argument, 0, O_BSTART},
        {"target-start", required_argument, 0, O_TSTART}, {"start-timeout", required_argument, 0, O_STIMEOUT},
        {"health-path", required_argument, 0, O_HEALTH}, RUN_LONG_OPTIONS, ORDER_LONG_OPTIONS,
        {"guard", required_argument, 0, O_GUARD}, {"embedder", required_argument, 0, O_EMB},
        {"unsafe-code-exec", no_argument, 0, O_UNSAFE}, {"jobs", required_argument, 0, O_JOBS},
        COMPARE_LONG_OPTIONS, {"sequential", no_argument, 0, O_SEQ}, {"alpha", required_argument, 0, O_ALPHA},
        REQUEST_LONG_OPTIONS, {"baseline-extra-body", required_argument, 0, O_BEXTRA},
        {"target-extra-body", required_argument, 0, O_TEXTRA}, {"baseline-header", required_argument, 0, O_BHEADER},
        {"target-header", required_argument, 0, O_THEADER}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    cli_run_args a;
    cli_run_args_default(&a);
    a.order_seed = 42;
    drift_measure_opts mo;
    drift_measure_opts_default(&mo);
    drift_measure_side *b = &mo.side[DRIFT_MEASURE_BASELINE], *t = &mo.side[DRIFT_MEASURE_TARGET];
    b->label = t->label = NULL; /* labels nobody chose: free ones (measure.h) */
    const char *db = "driftbench-measure.db";
    cli_compare_args co;
    cli_compare_args_default(&co);
    long v;
    int opt, alpha_given = 0, order_given = 0, suites_from_file = 0;
    const char *side_headers[2][CLI_MAX_HEADERS];
    /* the file's request control (shared and per side) and stop strings,
     * set aside so that each flag replaces only what it names */
    drift_measure_request_layers rl;
    memset(&rl, 0, sizeof rl);
    rl.side_flags[0].headers = side_headers[0];
    rl.side_flags[1].headers = side_headers[1];
    const char *const *file_stop = NULL;
    int file_n_stop = 0;
    const char *cfg_path = cli_config_path(argc, argv, "hc:o:", longopts, O_CFGFILE);
    if (cfg_path) { /* the file first, then the flags over it */
        if (cli_measure_config(cfg_path, cfg, &mo, &a, &co, &db, &order_given)) return CLI_EXIT_ERROR;
        suites_from_file = a.n_suites > 0;
        rl.file = a.topts.request;
        memset(&a.topts.request, 0, sizeof a.topts.request);
        for (int k = 0; k < 2; k++) {
            rl.file_side[k] = mo.side[k].request;
            memset(&mo.side[k].request, 0, sizeof mo.side[k].request);
        }
        file_stop = a.params.stop;
        file_n_stop = a.params.n_stop;
        a.params.stop = NULL;
        a.params.n_stop = 0;
    }
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hc:o:", longopts, NULL)) != -1) {
        if (opt == 'c' || opt == O_CFGFILE) continue; /* read above */
        if (opt == OPT_SUITE && suites_from_file) a.n_suites = suites_from_file = 0; /* --suite replaces the file's */
        if (opt == OPT_ORDER) order_given = 1;
        int r = cli_parse_run_option("measure", opt, optarg, &a);
        if (r == 0) r = cli_parse_order_option("measure", opt, optarg, &a);
        if (r == 0) r = cli_parse_request_option("measure", opt, optarg, &a);
        if (r == 0) r = cli_parse_compare_option("measure", opt, optarg, &co);
        if (r < 0) return cli_run_args_clear(&a), CLI_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case O_BASE: b->target = optarg; break;
        case O_TARG: t->target = optarg; break;
        case O_DB: db = optarg; break;
        case O_BLABEL: b->label = optarg; break;
        case O_TLABEL: t->label = optarg; break;
        case O_BCONF: b->config = optarg; break;
        case O_TCONF: t->config = optarg; break;
        case O_BSTART: b->start = optarg; break;
        case O_TSTART: t->start = optarg; break;
        case O_STIMEOUT: {
            char *end = NULL;
            mo.ready_timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(mo.ready_timeout_s > 0) || mo.ready_timeout_s > 86400)
                return cli_error("measure", "--start-timeout: '%s' is not a number of seconds in (0, 86400]", optarg);
            break;
        }
        case O_HEALTH:
            if (optarg[0] != '/') return cli_error("measure", "--health-path: '%s' must start with '/'", optarg);
            mo.health_path = optarg;
            break;
        case O_SEQ: mo.sequential = 1; break;
        case O_BEXTRA:
        case O_TEXTRA: {
            int k = opt == O_BEXTRA ? DRIFT_MEASURE_BASELINE : DRIFT_MEASURE_TARGET;
            char flag[32];
            snprintf(flag, sizeof flag, "--%s-extra-body", SIDE[k]);
            if (rl.side_flags[k].extra_body_json) return cli_run_args_clear(&a), cli_error("measure", "%s given twice", flag);
            if (!(rl.side_flags[k].extra_body_json = cli_extra_body_arg("measure", flag, optarg, &a)))
                return cli_run_args_clear(&a), CLI_EXIT_ERROR;
            break;
        }
        case O_BHEADER:
        case O_THEADER: {
            int k = opt == O_BHEADER ? DRIFT_MEASURE_BASELINE : DRIFT_MEASURE_TARGET;
            if (rl.side_flags[k].n_headers >= CLI_MAX_HEADERS)
                return cli_run_args_clear(&a), cli_error("measure", "at most %d --%s-header", CLI_MAX_HEADERS, SIDE[k]);
            side_headers[k][rl.side_flags[k].n_headers++] = optarg;
            break;
        }
        case O_ALPHA:
            if (cli_parse_double("measure", "--alpha", optarg, 1e-9, 0.5, &mo.alpha)) return CLI_EXIT_ERROR;
            alpha_given = 1;
            break;
        case O_GUARD: mo.score.guard_spec = optarg; break;
        case O_EMB: mo.score.embedder_spec = optarg; break;
        case O_UNSAFE: mo.score.unsafe_code_exec = 1; break;
        case O_JOBS:
            if (cli_parse_int("measure", "--jobs", optarg, 0, 1024, &v)) return CLI_EXIT_ERROR;
            mo.score.jobs = (int)v;
            break;
        case 'h':
        case O_HELP: fputs(measure_usage, stdout);
            fputs(cli_gate_usage, stdout);
            fputs(measure_usage2, stdout);
            fputs(cli_gate_exit_usage, stdout);
            cli_run_args_clear(&a);
            return 0;
        default:
            cli_run_args_clear(&a);
            return cli_error("measure", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    cli_request_finish(&a);
    if (!a.n_stops && file_n_stop) { /* the file's stop strings unless --stop gave others */
        a.params.stop = file_stop;
        a.params.n_stop = file_n_stop;
    }
    /* shared: the file's, each field a flag gives replaced; each side: its
     * file entry (or the shared file one), the shared flags over it, then
     * its own --SIDE-extra-body / --SIDE-header over that */
    rl.flags = a.topts.request;
    const char **hbuf = NULL;
    drift_error err = {0};
    drift_request_ctl sides[2];
    if (drift_measure_request_layer(&rl, &a.topts.request, sides, &hbuf, &err))
        return cli_run_args_clear(&a), cli_error_lib("measure", &err);
    for (int k = 0; k < 2; k++) mo.side[k].request = sides[k];
    int rc = measure_parsed(argc, argv, &a, &mo, &co, db, alpha_given, order_given);
    free(hbuf);
    cli_run_args_clear(&a);
    return rc;
}

/* The rest of `measure`, once its options are parsed. */
static int measure_parsed(int argc, char **argv, cli_run_args *ap, drift_measure_opts *mop, cli_compare_args *cop,
                          const char *db, int alpha_given, int order_given) {
    cli_run_args a = *ap;
    drift_measure_opts mo = *mop;
    cli_compare_args co = *cop;
    drift_measure_side *b = &mo.side[DRIFT_MEASURE_BASELINE], *t = &mo.side[DRIFT_MEASURE_TARGET];
    if (optind < argc) return cli_error("measure", "unexpected argument '%s'", argv[optind]);
    if (!b->target || !t->target || !a.n_suites)
        return cli_error("measure", "--baseline, --target and at least one --suite are required (see --help)");
    if (b->label && t->label && !strcmp(b->label, t->label)) return cli_error("measure", "--baseline-label and --target-label must differ");
    if (cli_check_order("measure", &a)) return CLI_EXIT_ERROR;
    if (alpha_given && !mo.sequential) return cli_error("measure", "--alpha goes with --sequential");
    if (mo.sequential) {
        if (order_given && a.order == DRIFT_ORDER_RISK)
            return cli_error("measure", "--sequential cannot use --order risk: the gate's guarantee needs a uniformly "
                                        "random order (a risk order puts likely flips first); use --order random");
        if (order_given && a.order != DRIFT_ORDER_RANDOM)
            return cli_error("measure", "--sequential asks in a seeded random order: --order suite does not go with it");
        if (co.fmt != DRIFT_FORMAT_TEXT && co.fmt != DRIFT_FORMAT_JSON && co.fmt != DRIFT_FORMAT_MARKDOWN)
            return cli_error("measure", "--sequential renders text, json or markdown (not junit or github)");
        a.order = DRIFT_ORDER_RANDOM;
    }
    if (a.order == DRIFT_ORDER_RISK && !a.risk_from && a.params.logprobs == 0)
        return cli_error("measure", "--order risk ranks by the baseline's logprobs: add --logprobs K (or --risk-from L)");
    mo.suites = a.suites;
    mo.n_suites = (size_t)a.n_suites;
    mo.target_opts = a.topts;
    mo.params = a.params;
    mo.replicates = a.replicates;
    mo.limit = a.limit;
    mo.order = a.order;
    mo.order_seed = a.order_seed;
    mo.risk_from = a.risk_from;
    mo.compare = co.opts;
    return cli_measure_run(db, &mo, &co);
}

static int cmd_measure(int argc, char **argv) {
    drift_config *cfg = NULL;
    int rc = measure_cmd(argc, argv, &cfg);
    drift_config_free(cfg);
    return rc;
}
CLI_COMMAND(measure, "measure", "run + score + compare two targets in one go", cmd_measure)
