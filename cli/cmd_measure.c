/* cmd_measure.c - `driftbench measure`: run + score + compare in one go,
 * for two targets (the production stack and the candidate).
 *
 * With --baseline-start / --target-start, each side's server is started
 * (drift_server_proc_start: "{port}" = a free port in the command and in
 * the target, GET /health until 200 from a socket of the server's own:
 * another process on the port is refused, exit 2) just before its run and
 * stopped right after (with every process it started), so the two stacks
 * never share the machine. The run records the target with "{port}", so a
 * resumed measure on another port continues the same run. A server that
 * exits during its run stops the run at once (unfinished: the next call
 * restarts it and asks what is missing) and fails measure with the
 * command, its status and the tail of its output.
 * --order risk: the target is asked riskiest prompt first, by the flip
 * risk of --risk-from's answers or of the baseline's own (run first, with
 * logprobs); a measure cut short then holds the riskiest pairs.
 *
 * --sequential: both stacks are asked in chunks, in the seeded random
 * order: each chunk asks every gated workload (one with a budget) its next
 * SEQ_CHUNK pairs (the run's select hook: rank < horizon, so baseline and
 * target ask the same pairs, resumed or not; workloads without a budget
 * are asked whole in the first chunk; with --workload W, only W is
 * asked), scores them, and replays the
 * comparison through the sequential gate (drift_compare_sequential, the
 * same function as compare --sequential, over the suite's size recorded in
 * the runs): a workload whose verdict is certain is asked no more. It ends
 * when every gated workload has stopped or been asked whole; the runs stay
 * stored as ordinary (partial, unfinished) runs. --order risk is refused
 * (sequential.c: the gate's argument needs the random order). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/server_proc.h"
#include "pipeline.h"

#define SEQ_CHUNK 16 /* pairs per gated workload asked between two looks at the gate */

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
        if (uses_port) {
            char *shown = drift_redact(a->target);
            int rc = cli_error("measure", "--%s '%s' uses {port}, which only --%s-start gives", side,
                               shown ? shown : "(target withheld)", side);
            free(shown);
            return rc;
        }
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
    if (!cli_quiet) fprintf(stderr, "measure: starting the %s server: %s\n", side, cli_safe(start));
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
    o.select = a->select;
    o.select_user = a->select_user;
    o.seq_alpha = a->seq_alpha;
    o.seq_budget = a->seq_budget;
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

/* ---- --sequential ---- */

typedef struct seq_state {
    const double *budget;                 /* compare's budgets: < 0 = not gated */
    int only;                             /* --workload: the only one asked; DRIFT_WL_UNKNOWN = all */
    long horizon[DRIFT_WL_COUNT];         /* ask pairs of rank < horizon */
    int stopped[DRIFT_WL_COUNT];          /* verdict certain, or asked whole */
    size_t n_wl[DRIFT_WL_COUNT];          /* the suite's pairs (from the hook) */
} seq_state;

static int seq_select(void *user, drift_workload wl, size_t rank, size_t n_wl) {
    seq_state *q = user;
    q->n_wl[wl] = n_wl;
    if (q->only != DRIFT_WL_UNKNOWN && (int)wl != q->only) return 0; /* compare would leave it out */
    if (q->budget[wl] < 0) return 1;
    return !q->stopped[wl] && rank < (size_t)q->horizon[wl];
}

/* Scores what the chunk added, printing nothing (the summary comes once,
 * at the end). */
static int seq_score(drift_store *st, const drift_score_opts *so, drift_score_cache *cache) {
    drift_score_opts o = *so;
    o.cache = cache;
    o.cancel = cli_cancel_requested;
    drift_score_summary sum;
    drift_error err = {0};
    memset(&sum, 0, sizeof sum);
    drift_status rc = drift_score_run(st, NULL, &o, &sum, &err);
    if (rc == DRIFT_ERR_CANCELLED) return cli_error("measure", "interrupted; run the same command to resume");
    if (rc) return cli_error_lib("measure", &err);
    return CLI_EXIT_PASS;
}

/* One line per gated workload after a chunk. */
static void seq_print(const drift_seq_result *r, const seq_state *q, int chunk) {
    if (cli_quiet) return;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_seq_wl *w = &r->wl[k];
        if (!r->present[k] || !w->gated) continue;
        fprintf(stderr, "measure: chunk %d %-12s %ld of %ld pairs, %ld flips, interval [%.2f%%, %.2f%%] vs budget "
                        "%.2f%%: %s\n",
                chunk, drift_workload_name((drift_workload)k), w->asked, w->n_total, w->flips, 100 * w->lo,
                100 * w->hi, 100 * w->budget,
                !q->stopped[k]                               ? "open"
                : w->decision == DRIFT_DECISION_DEPLOY       ? "DEPLOY"
                : w->decision == DRIFT_DECISION_BLOCK        ? "BLOCK"
                : w->decision == DRIFT_DECISION_INCONCLUSIVE ? "INCONCLUSIVE"
                                                             : "ERROR");
    }
}

/* The chunked loop (see the top); returns the exit code with the gate's
 * report written like compare --sequential's. */
static int measure_sequential(drift_store *st, cli_run_args *a, const char *bstart, const char *tstart,
                              const char *health, double ready_s, const char *blabel, const char *base,
                              const char *bconf, const char *tlabel, const char *targ, const char *tconf,
                              const drift_score_opts *so, const cli_compare_args *co, double alpha) {
    seq_state q;
    memset(&q, 0, sizeof q);
    q.budget = co->opts.budget;
    q.only = co->opts.only_workload;
    a->select = seq_select;
    a->select_user = &q;
    a->seq_alpha = alpha;
    a->seq_budget = co->opts.budget;
    drift_score_cache *cache = drift_score_cache_new();
    drift_comparison *c = NULL;
    drift_seq_result r;
    drift_error err = {0};
    int rc = CLI_EXIT_PASS;
    memset(&r, 0, sizeof r);
    for (int chunk = 1; rc == CLI_EXIT_PASS; chunk++) {
        for (int k = 0; k < DRIFT_WL_COUNT; k++)
            if (!q.stopped[k]) q.horizon[k] += SEQ_CHUNK;
        a->label = blabel, a->target = base, a->config = bconf;
        rc = measure_run(st, a, "baseline", bstart, health, ready_s);
        if (rc == CLI_EXIT_PASS) {
            a->label = tlabel, a->target = targ, a->config = tconf;
            rc = measure_run(st, a, "target", tstart, health, ready_s);
        }
        if (rc == CLI_EXIT_PASS && cli_interrupted) rc = cli_error("measure", "interrupted; run the same command to resume");
        if (rc == CLI_EXIT_PASS) rc = seq_score(st, so, cache);
        if (rc != CLI_EXIT_PASS) break;
        drift_comparison_free(c);
        c = NULL;
        if (drift_compare_runs(st, blabel, tlabel, &co->opts, &c, &err) ||
            drift_compare_sequential(c, alpha, a->order_seed, &r, &err)) {
            rc = cli_error_lib("measure", &err);
            break;
        }
        int open = 0;
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            if (q.budget[k] < 0 || q.n_wl[k] == 0) continue; /* not gated, or not in the suites */
            if (q.only != DRIFT_WL_UNKNOWN && k != q.only) continue;
            if (r.wl[k].early || (size_t)q.horizon[k] >= q.n_wl[k]) q.stopped[k] = 1;
            if (!q.stopped[k]) open = 1;
        }
        seq_print(&r, &q, chunk);
        if (!open) break;
    }
    drift_score_cache_free(cache);
    if (rc == CLI_EXIT_PASS) rc = cli_do_score("measure", st, NULL, so); /* nothing left: the summary */
    if (rc == CLI_EXIT_PASS) {
        char *text = NULL;
        if (drift_seq_render(c, &r, co->fmt, &text, &err)) rc = cli_error_lib("measure", &err);
        else rc = cli_write_output("measure", co->out, text) ? CLI_EXIT_ERROR : cli_gate_exit("measure", st, c, r.decision);
        free(text);
    }
    drift_comparison_free(c);
    return rc;
}

static const char measure_usage[] =
    "usage: driftbench measure --baseline SPEC --target SPEC --suite S [--suite S ...] [options]\n"
    "\n"
    "Runs the suites against both targets, scores every answer, and compares\n"
    "target against baseline: the same as run + run + score + compare.\n"
    "Re-running the same command resumes whatever is missing.\n"
    "\n"
    "  --db STORE               store: SQLite file or postgresql:// URL (default driftbench-measure.db)\n"
    "  --baseline-label L       default 'baseline'\n"
    "  --target-label L         default 'target'\n"
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
    "                           the stored (partial) runs. Not with --order suite|risk\n"
    "  --alpha A                error rate of each verdict (default 0.05)\n"
    "\n"
    "exit: 0 deploy (or no workload gated), 1 block, 2 error (bad input, or a gated\n"
    "workload without a single scored pair), 3 inconclusive (more prompts needed)\n";

static int cmd_measure(int argc, char **argv) {
    enum { O_BASE = 400, O_TARG, O_DB, O_BLABEL, O_TLABEL, O_BCONF, O_TCONF, O_GUARD, O_EMB, O_UNSAFE, O_JOBS,
           O_BSTART, O_TSTART, O_STIMEOUT, O_HEALTH, O_HELP, O_SEQ, O_ALPHA };
    static const struct option longopts[] = {
        {"baseline", required_argument, 0, O_BASE}, {"target", required_argument, 0, O_TARG},
        {"db", required_argument, 0, O_DB}, {"baseline-label", required_argument, 0, O_BLABEL},
        {"target-label", required_argument, 0, O_TLABEL}, {"baseline-config", required_argument, 0, O_BCONF},
        {"target-config", required_argument, 0, O_TCONF}, {"baseline-start", required_argument, 0, O_BSTART},
        {"target-start", required_argument, 0, O_TSTART}, {"start-timeout", required_argument, 0, O_STIMEOUT},
        {"health-path", required_argument, 0, O_HEALTH}, RUN_LONG_OPTIONS, ORDER_LONG_OPTIONS,
        {"guard", required_argument, 0, O_GUARD}, {"embedder", required_argument, 0, O_EMB},
        {"unsafe-code-exec", no_argument, 0, O_UNSAFE}, {"jobs", required_argument, 0, O_JOBS},
        COMPARE_LONG_OPTIONS, {"sequential", no_argument, 0, O_SEQ}, {"alpha", required_argument, 0, O_ALPHA},
        {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
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
    int opt, sequential = 0, alpha_given = 0, order_given = 0;
    double alpha = 0.05;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        if (opt == OPT_ORDER) order_given = 1;
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
        case O_SEQ: sequential = 1; break;
        case O_ALPHA:
            if (cli_parse_double("measure", "--alpha", optarg, 1e-9, 0.5, &alpha)) return CLI_EXIT_ERROR;
            alpha_given = 1;
            break;
        case O_GUARD: so.guard_spec = optarg; break;
        case O_EMB: so.embedder_spec = optarg; break;
        case O_UNSAFE: so.unsafe_code_exec = 1; break;
        case O_JOBS:
            if (cli_parse_int("measure", "--jobs", optarg, 0, 1024, &v)) return CLI_EXIT_ERROR;
            so.jobs = (int)v;
            break;
        case 'h':
        case O_HELP: fputs(measure_usage, stdout);
            fputs(cli_gate_usage, stdout);
            fputs(measure_usage2, stdout); return 0;
        default: return cli_error("measure", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("measure", "unexpected argument '%s'", argv[optind]);
    if (!base || !targ || !a.n_suites)
        return cli_error("measure", "--baseline, --target and at least one --suite are required (see --help)");
    if (!strcmp(blabel, tlabel)) return cli_error("measure", "--baseline-label and --target-label must differ");
    if (cli_check_order("measure", &a)) return CLI_EXIT_ERROR;
    if (alpha_given && !sequential) return cli_error("measure", "--alpha goes with --sequential");
    if (sequential) {
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
    const char *risk_from = a.risk_from;
    drift_run_order order = a.order;
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("measure", &err);
    cli_install_signal_handlers();
    a.db = db;
    a.label = blabel;
    a.target = base;
    a.config = bconf;
    if (sequential) {
        int rc = measure_sequential(st, &a, bstart, tstart, health, start_timeout_s, blabel, base, bconf, tlabel, targ,
                                    tconf, &so, &co, alpha);
        if (!cli_quiet && rc != CLI_EXIT_ERROR)
            fprintf(stderr, "measure: store %s (labels '%s', '%s')\n", cli_safe(drift_store_display(st)),
                    cli_safe(blabel), cli_safe(tlabel));
        drift_store_close(st);
        return rc;
    }
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
    if (!cli_quiet && rc != CLI_EXIT_ERROR)
        fprintf(stderr, "measure: store %s (labels '%s', '%s')\n", cli_safe(drift_store_display(st)),
                    cli_safe(blabel), cli_safe(tlabel));
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(measure, "measure", "run + score + compare two targets in one go", cmd_measure)
