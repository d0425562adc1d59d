/* cmd_measure.c - `driftbench measure`: run + score + compare in one go,
 * for two targets (the production stack and the candidate).
 *
 * With --baseline-start / --target-start, each side's server is started
 * (drift_server_proc_start: "{port}" = a free port in the command and in
 * the target, GET /health until 200) just before its run and stopped right
 * after, so the two stacks never share the machine. The run records the
 * target with "{port}", so a resumed measure on another port continues the
 * same run. A server that exits during its run stops the run at once
 * (unfinished: the next call restarts it and asks what is missing) and
 * fails measure with the command, its status and the tail of its output.
 * --order risk: the target is asked riskiest prompt first, by the flip
 * risk of --risk-from's answers or of the baseline's own (run first, with
 * logprobs); a measure cut short then holds the riskiest pairs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/server_proc.h"
#include "pipeline.h"

/* The run's cancel hook with a server: a signal, or the server exited. */
typedef struct measure_watch {
    drift_server_proc *proc;
    int died;
} measure_watch;

static int watch_cancel(void *user) {
    measure_watch *w = user;
    if (!drift_server_proc_alive(w->proc)) {
        w->died = 1;
        return 1;
    }
    return cli_cancel_requested(NULL);
}

/* One side's run: as cli_do_run, with its server started first and stopped
 * after when `start` is given. */
static int measure_run(drift_store *st, const cli_run_args *a, const char *side, const char *start,
                       const char *health, double ready_s) {
    int uses_port = strstr(a->target, "{port}") != NULL;
    if (!start) {
        if (uses_port)
            return cli_error("measure", "--%s '%s' uses {port}, which only --%s-start gives", side, a->target, side);
        return cli_do_run("measure", st, a);
    }
    if (!uses_port)
        return cli_error("measure", "--%s must use {port} with --%s-start (e.g. http://127.0.0.1:{port}/v1?model=m)",
                         side, side);
    if (!strstr(start, "{port}"))
        return cli_error("measure", "--%s-start must use {port} (the free port measure picks for the server)", side);
    drift_server_proc_opts so;
    drift_server_proc_opts_default(&so);
    so.command = start;
    so.health_path = health;
    so.ready_timeout_s = ready_s;
    so.cancel = cli_cancel_requested;
    drift_server_proc *proc = NULL;
    drift_error err = {0};
    if (!cli_quiet) fprintf(stderr, "measure: starting the %s server: %s\n", side, start);
    if (drift_server_proc_start(&so, &proc, &err)) {
        if (err.code == DRIFT_ERR_CANCELLED) return cli_error("measure", "interrupted while the %s server started", side);
        return cli_error("measure", "--%s-start: %s", side, err.msg);
    }
    char *url = drift_server_proc_fill_port(a->target, drift_server_proc_port(proc));
    if (!url) {
        drift_server_proc_free(proc);
        return cli_error("measure", "out of memory");
    }
    if (!cli_quiet) fprintf(stderr, "measure: %s server ready on port %d\n", side, drift_server_proc_port(proc));
    /* cli_do_run's options, with the address opened and the cancel hook */
    drift_run_opts o;
    drift_run_opts_default(&o);
    o.label = a->label;
    o.target = a->target;
    o.target_url = url;
    o.suites = a->suites;
    o.n_suites = (size_t)a->n_suites;
    o.config = a->config;
    o.target_opts = a->topts;
    o.params = a->params;
    o.replicates = a->replicates;
    o.limit = a->limit;
    o.order = a->order;
    o.order_seed = a->order_seed;
    o.risk_from = a->risk_from;
    measure_watch w = {proc, 0};
    o.cancel = watch_cancel;
    o.cancel_user = &w;
    o.progress = cli_run_progress;
    drift_run_summary s;
    int rc = CLI_EXIT_PASS;
    drift_status r = drift_run_execute(st, &o, &s, &err);
    int alive = !w.died && drift_server_proc_alive(proc);
    if (!alive && !(r == DRIFT_OK && s.errors == 0)) {
        char ctx[256];
        snprintf(ctx, sizeof ctx,
                 "run '%s' stopped (%zu of %zu requests stored; the same command again restarts the server and "
                 "asks what is missing)",
                 a->label, s.done, s.requested);
        drift_server_proc_check(proc, ctx, &err);
        rc = cli_error("measure", "%s", err.msg);
    } else if (r) {
        rc = cli_run_failed("measure", a->label, url, &s, &err);
    }
    drift_server_proc_free(proc);
    free(url);
    return rc;
}

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
    "  --baseline-start CMD     start the baseline's server with this shell command before\n"
    "                           its run and stop it after; {port} in CMD and in --baseline\n"
    "                           is a free port picked then (e.g. --baseline-start\n"
    "                           'llama-server -m m.gguf --port {port} -np 1' --baseline\n"
    "                           'http://127.0.0.1:{port}/v1?model=m')\n"
    "  --target-start CMD       the same for the target\n"
    "  --start-timeout S        seconds a started server may take to answer its health\n"
    "                           check with 200 (default 120)\n"
    "  --health-path P          the path polled (default /health)\n"
    "  run options:     --concurrency --temperature --top-p --top-k --seed --max-tokens\n"
    "                   --logprobs --replicates --limit --timeout --connect-timeout --retries\n"
    "                   (see driftbench run --help)\n"
    "  order options:   --order suite|random|risk --order-seed S --risk-from L\n"
    "                   --order risk asks the target riskiest prompt first, by the\n"
    "                   flip risk of run L's answers, or of the measure's own\n"
    "                   baseline (which then needs --logprobs K); the baseline is\n"
    "                   asked in L's risk order, or in suite order without L\n"
    "  score options:   --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N\n"
    "  compare options: --workload W --budget W=PCT,... --sdr-threshold X --format F -o FILE\n"
    "\n"
    "exit: 0 within budget, 1 drift over budget, 2 error\n";

static int cmd_measure(int argc, char **argv) {
    enum { O_BASE = 400, O_TARG, O_DB, O_BLABEL, O_TLABEL, O_BCONF, O_TCONF, O_GUARD, O_EMB, O_UNSAFE, O_JOBS,
           O_BSTART, O_TSTART, O_STIMEOUT, O_HEALTH, O_HELP };
    static const struct option longopts[] = {
        {"baseline", required_argument, 0, O_BASE}, {"target", required_argument, 0, O_TARG},
        {"db", required_argument, 0, O_DB}, {"baseline-label", required_argument, 0, O_BLABEL},
        {"target-label", required_argument, 0, O_TLABEL}, {"baseline-config", required_argument, 0, O_BCONF},
        {"target-config", required_argument, 0, O_TCONF}, {"baseline-start", required_argument, 0, O_BSTART},
        {"target-start", required_argument, 0, O_TSTART}, {"start-timeout", required_argument, 0, O_STIMEOUT},
        {"health-path", required_argument, 0, O_HEALTH}, RUN_LONG_OPTIONS, ORDER_LONG_OPTIONS,
        {"guard", required_argument, 0, O_GUARD}, {"embedder", required_argument, 0, O_EMB},
        {"unsafe-code-exec", no_argument, 0, O_UNSAFE}, {"jobs", required_argument, 0, O_JOBS},
        COMPARE_LONG_OPTIONS, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    cli_run_args a;
    cli_run_args_default(&a);
    a.order_seed = 42;
    const char *base = NULL, *targ = NULL, *db = "driftbench-measure.db", *blabel = "baseline", *tlabel = "target";
    const char *bconf = NULL, *tconf = NULL, *bstart = NULL, *tstart = NULL, *health = "/health";
    double start_timeout_s = 120;
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
        if (r == 0) r = cli_parse_order_option("measure", opt, optarg, &a);
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
        case O_BSTART: bstart = optarg; break;
        case O_TSTART: tstart = optarg; break;
        case O_STIMEOUT: {
            char *end = NULL;
            start_timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(start_timeout_s > 0) || start_timeout_s > 86400)
                return cli_error("measure", "--start-timeout: '%s' is not a number of seconds in (0, 86400]", optarg);
            break;
        }
        case O_HEALTH:
            if (optarg[0] != '/') return cli_error("measure", "--health-path: '%s' must start with '/'", optarg);
            health = optarg;
            break;
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
    if (cli_check_order("measure", &a)) return CLI_EXIT_ERROR;
    if (a.order == DRIFT_ORDER_RISK && !a.risk_from && a.params.logprobs == 0)
        return cli_error("measure", "--order risk ranks by the baseline's logprobs: add --logprobs K (or --risk-from L)");
    const char *risk_from = a.risk_from;
    drift_run_order order = a.order;
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("measure", &err);
    cli_install_signal_handlers();
    a.db = db;
    a.label = blabel;
    a.target = base;
    a.config = bconf;
    if (order == DRIFT_ORDER_RISK && !risk_from) a.order = DRIFT_ORDER_SUITE; /* nothing to rank by yet */
    int rc = measure_run(st, &a, "baseline", bstart, health, start_timeout_s);
    if (rc == CLI_EXIT_PASS) {
        a.label = tlabel;
        a.target = targ;
        a.config = tconf;
        a.order = order;
        a.risk_from = risk_from ? risk_from : blabel;
        rc = measure_run(st, &a, "target", tstart, health, start_timeout_s);
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
