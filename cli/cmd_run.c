/* cmd_run.c - `driftbench run`: send a suite to one serving stack and store
 * every outcome under a label (resumes when the label exists). --order,
 * --order-seed and --risk-from (the order prompts are asked in) are parsed
 * here for `run` and `measure` (cli_parse_order_option). */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"

static const char run_usage[] =
    "usage: driftbench run --db STORE --label L --target SPEC --suite S [--suite S ...] [options]\n"
    "\n"
    "Sends every prompt of the suites to the target and stores each answer, or\n"
    "the error that stopped it, under label L. Running again with the same\n"
    "label resumes: stored answers are kept, errors and missing ones are asked again.\n"
    "\n"
    "  --db STORE           the store: an SQLite file (created if missing) or a\n                       postgresql://USER@HOST/DB URL (a shared PostgreSQL store)\n"
    "  --label L            name of this run (e.g. h100-fp16-vllm)\n"
    "  --target SPEC        http://HOST:PORT/v1?model=NAME&api=chat|completions\n"
    "                       [&api_key_env=VAR]: the API key is $VAR's (default $OPENAI_API_KEY,\n"
    "                       sent only over https or to this machine; allow_insecure_key=1\n"
    "                       lets a named key go over plain http to another host),\n"
    "                       or embedded:PATH.gguf?profile=P&...\n"
    "  --suite S            a suite file (paper jsonl, GSM8K, HumanEval, AdvBench csv,\n"
    "                       LongBench) or builtin:math|code|safety|chat|long; repeatable\n"
    "  --config k=v,...     configuration dimensions (model, hardware, precision,\n"
    "                       framework, and any others) recorded with the run\n"
    "  --concurrency N      requests in flight (default 8)\n"
    "  --temperature T      default 0 (deterministic decoding)\n"
    "  --top-p P            default 1\n"
    "  --top-k K            default off\n"
    "  --seed S             default 42 (replicate r uses S + r)\n"
    "  --max-tokens N       default 512\n"
    "  --logprobs K         ask for top-K logprobs per token (default off)\n"
    "  --replicates N       samples per prompt (use with --temperature > 0)\n"
    "  --limit N            only the first N prompts of each suite\n"
    "  --timeout S          whole-request timeout in seconds (default 300)\n"
    "  --connect-timeout S  default 10\n"
    "  --retries N          retries of a failed request (default 4)\n";
static const char run_usage2[] =
    "  --order O            the order prompts are asked in: suite (default), random\n"
    "                       (seeded: --order-seed), or risk: riskiest first by the\n"
    "                       flip risk of a stored run's answers (--risk-from)\n"
    "  --order-seed S       seed of the random order and of risk ties (default 42)\n"
    "  --risk-from L        with --order risk: the stored run (same store, run with\n"
    "                       --logprobs K) whose answers rank the prompts; default\n"
    "                       this run's own stored answers (when resuming)\n"
    "\n"
    "Failed requests are stored as errors and counted on stderr by kind (an HTTP\n"
    "status, could not connect, timeout, TLS, bad reply, ...) with the first message\n"
    "of each; when every request failed, the message says what to check.\n"
    "Progress goes to stderr: a bar on a terminal, else a line every DRIFT_PROGRESS_SECS\n"
    "seconds (default 10; 0: none) and a final one; -v adds a line per request, -q none.\n"
    "\n"
    "exit: 0 all stored, 2 error (bad input, unreachable store, interrupted, every\n"
    "      request failed)\n";

int cli_parse_run_option(const char *cmd, int opt, const char *arg, cli_run_args *a) {
    long v;
    double d;
    switch (opt) {
    case OPT_CONFIG: a->config = arg; return 1;
    case OPT_SUITE:
        if (a->n_suites >= CLI_MAX_SUITES) return cli_error(cmd, "at most %d --suite", CLI_MAX_SUITES), -1;
        a->suites[a->n_suites++] = arg;
        return 1;
    case OPT_CONC:
        if (cli_parse_int(cmd, "--concurrency", arg, 1, 4096, &v)) return -1;
        a->topts.concurrency = (int)v;
        return 1;
    case OPT_TEMP:
        if (cli_parse_double(cmd, "--temperature", arg, 0, 10, &d)) return -1;
        a->params.temperature = d;
        return 1;
    case OPT_TOPP:
        if (cli_parse_double(cmd, "--top-p", arg, 0, 1, &d)) return -1;
        a->params.top_p = d;
        return 1;
    case OPT_TOPK:
        if (cli_parse_int(cmd, "--top-k", arg, 0, 1000000, &v)) return -1;
        a->params.top_k = (int)v;
        return 1;
    case OPT_SEED:
        if (cli_parse_int(cmd, "--seed", arg, 0, 0x7fffffffL, &v)) return -1;
        a->params.seed = v;
        return 1;
    case OPT_MAXTOK:
        if (cli_parse_int(cmd, "--max-tokens", arg, 1, 1000000, &v)) return -1;
        a->params.max_tokens = (int)v;
        return 1;
    case OPT_LOGPROBS:
        if (cli_parse_int(cmd, "--logprobs", arg, 0, 20, &v)) return -1;
        a->params.logprobs = (int)v;
        return 1;
    case OPT_REPS:
        if (cli_parse_int(cmd, "--replicates", arg, 1, 1000, &v)) return -1;
        a->replicates = (int)v;
        return 1;
    case OPT_LIMIT:
        if (cli_parse_int(cmd, "--limit", arg, 1, 100000000, &v)) return -1;
        a->limit = v;
        return 1;
    case OPT_TIMEOUT:
        if (cli_parse_double(cmd, "--timeout", arg, 0.001, 86400, &d)) return -1;
        a->topts.read_timeout_s = d;
        return 1;
    case OPT_CTIMEOUT:
        if (cli_parse_double(cmd, "--connect-timeout", arg, 0.001, 3600, &d)) return -1;
        a->topts.connect_timeout_s = d;
        return 1;
    case OPT_RETRIES:
        if (cli_parse_int(cmd, "--retries", arg, 0, 100, &v)) return -1;
        a->topts.max_retries = (int)v;
        return 1;
    }
    return 0;
}

int cli_parse_order_option(const char *cmd, int opt, const char *arg, cli_run_args *a) {
    drift_error err = {0};
    long v;
    switch (opt) {
    case OPT_ORDER:
        if (drift_run_order_parse(arg, &a->order, &err)) return cli_error(cmd, "--order: %s", err.msg), -1;
        return 1;
    case OPT_ORDER_SEED:
        if (cli_parse_int(cmd, "--order-seed", arg, 0, LONG_MAX, &v)) return -1;
        a->order_seed = (uint64_t)v;
        return 1;
    case OPT_RISK_FROM: a->risk_from = arg; return 1;
    }
    return 0;
}

int cli_check_order(const char *cmd, const cli_run_args *a) {
    if (a->risk_from && a->order != DRIFT_ORDER_RISK) return cli_error(cmd, "--risk-from goes with --order risk");
    return 0;
}

static int cmd_run_parsed(int argc, char **argv, cli_run_args *ap);

static int cmd_run(int argc, char **argv) {
    static const struct option longopts[] = {
        {"db", required_argument, 0, OPT_DB}, {"label", required_argument, 0, OPT_LABEL},
        {"target", required_argument, 0, OPT_TARGET}, RUN_LONG_OPTIONS, ORDER_LONG_OPTIONS,
        REQUEST_LONG_OPTIONS, {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    cli_run_args a;
    cli_run_args_default(&a);
    a.order_seed = 42;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = cli_parse_run_option("run", opt, optarg, &a);
        if (r == 0) r = cli_parse_order_option("run", opt, optarg, &a);
        if (r == 0) r = cli_parse_request_option("run", opt, optarg, &a);
        if (r < 0) return cli_run_args_clear(&a), CLI_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case OPT_DB: a.db = optarg; break;
        case OPT_LABEL: a.label = optarg; break;
        case OPT_TARGET: a.target = optarg; break;
        case 'h':
        case OPT_HELP:
            fputs(run_usage, stdout);
            fputs(cli_request_usage, stdout);
            fputs(run_usage2, stdout);
            cli_run_args_clear(&a);
            return 0;
        default:
            cli_run_args_clear(&a);
            return cli_error("run", "unknown or incomplete option '%s' (see driftbench run --help)", argv[optind - 1]);
        }
    }
    cli_request_finish(&a);
    int rc = cmd_run_parsed(argc, argv, &a);
    cli_run_args_clear(&a);
    return rc;
}

/* The rest of `run`, once its options are parsed. */
static int cmd_run_parsed(int argc, char **argv, cli_run_args *ap) {
    cli_run_args a = *ap;
    if (optind < argc) return cli_error("run", "unexpected argument '%s'", argv[optind]);
    if (!a.db || !a.label || !a.target || !a.n_suites)
        return cli_error("run", "--db, --label, --target and at least one --suite are required (see --help)");
    if (cli_check_order("run", &a)) return CLI_EXIT_ERROR;
    if (a.replicates > 1 && a.params.temperature == 0 && !cli_quiet)
        fprintf(stderr, "run: note: %d replicates at temperature 0 should all be identical\n", a.replicates);
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open(a.db, &st, &err)) return cli_error_lib("run", &err);
    cli_install_signal_handlers();
    int rc = cli_do_run("run", st, &a);
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(run, "run", "send a suite to one serving stack and store the answers", cmd_run)
