/* cmd_replay.c - `driftbench replay`: a service's request log asked again
 * of a baseline stack (or taken as logged) and of a target stack with
 * deterministic decoding, and the label-free drift between the two
 * (traffic.h; docs/replay.md). Exit codes as compare: 0 deploy / not
 * gated, 1 block, 2 error or no evidence, 3 inconclusive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/traffic.h"
#include "driftbench/traffic_privacy.h"
#include "pipeline.h"

static const char *RP_CMD = "replay";

static void replay_usage(FILE *f) {
    fprintf(f,
            "usage: driftbench replay --log F --db STORE (--baseline URL | --logged) --target URL [options]\n"
            "Replays a request log (OpenAI chat/completions bodies as JSONL, OpenAI batch input\n"
            "lines, or {\"request\":..,\"response\":..} lines) against the target and the baseline\n"
            "stack, or against the target with the log's responses as the reference (--logged),\n"
            "each request with its own parameters but for the overrides determinism needs\n"
            "(temperature 0, a seed, n 1, no stream; recorded), and reports the label-free drift\n"
            "per class: exact, json, schema, tool_name, tool_args, guard, math, semantic,\n"
            "code (Python blocks run in the sandbox: they compile, or pass the tests a\n"
            "request carries in metadata.driftbench_tests).\n"
            "Resumable: a second call asks only what has no answer yet. docs/replay.md.\n"
            "  --log F              the request log\n"
            "  --db STORE           the store (SQLite path or PostgreSQL URL)\n"
            "  --baseline URL       the baseline stack (a target spec, e.g.\n"
            "                       http://127.0.0.1:8000/v1?model=m&api=chat)\n"
            "  --logged             the logged responses are the baseline\n"
            "  --target URL         the stack under test\n"
            "  --baseline-label L   run labels (default replay-baseline or replay-logged,\n"
            "  --target-label L     and replay-target; -2, -3, ... for another identity)\n"
            "  --seed N             the seed given to requests without one (default 42)\n"
            "  --guard SPEC         judge safe/unsafe of every answer: the guard class\n"
            "                       (\"builtin\", or a LlamaGuard-3 endpoint as score's)\n"
            "  --embedder SPEC      embed both answers: the semantic class (SDR); an\n"
            "                       /v1/embeddings endpoint, e.g. http://h:p/v1?model=NAME\n"
            "  --sdr-threshold X    semantic flip over this SDR (default 0.30)\n"
            "  --budget SPEC        per-class budgets in percent, e.g. json=0.5,exact=1\n"
            "                       (none: not gated; defaults: exact none, json 1, schema 1,\n"
            "                       tool_name 1, tool_args 2, guard 1, math 2, semantic 5,\n"
            "                       code 2)\n"
            "  --decide RULE        interval (default) or point, as compare\n"
            "  --alpha A            the stream alarms' error level per class (default 0.05;\n"
            "                       docs/alarm.md): pairs in log order, raised the moment\n"
            "                       the evidence is enough\n"
            "  --max-left-out PCT   share of a class's pairs that may be left out (errors)\n"
            "                       before it is blocked (default 5)\n"
            "  --store-texts MODE   full (default): requests and answers stored as they are;\n"
            "                       hashes: only their SHA-256 (judged in memory first; an\n"
            "                       earlier call's pairs are not judged again)\n"
            "  --redact RULE        before anything is stored, replace what matches: emails,\n"
            "                       phones, digits, keys, all, or re:REGEX (POSIX extended);\n"
            "                       repeatable. What is stored is said once on stderr\n"
            "  --window S|auto      drift over time: pairs by windows of S seconds of the\n"
            "                       answers' stored times (auto: at most 20 windows), per\n"
            "                       window pairs, flips per class and the alarms' bounds;\n"
            "                       the alarms then take the pairs in time order\n"
            "  --retention SPEC     after the report, keep only answers newer than SPEC\n"
            "                       (30d, 12h) or each side's newest N (a number); older\n"
            "                       answers and the requests no answer uses are deleted,\n"
            "                       counted on stderr (a later call asks them again)\n"
            "  --format FMT         text (default) or json\n"
            "  -o FILE              write the report to FILE\n"
            "  --concurrency N      requests in flight (default 8)\n"
            "  --timeout S          whole-request timeout in seconds (default 300)\n"
            "  --retries N          retries of a failed request (default 4)\n"
            "Exit: 0 deploy or not gated, 1 block, 2 error or no evidence, 3 inconclusive.\n");
}

static int cmd_replay(int argc, char **argv) {
    drift_replay_opts o;
    drift_replay_opts_default(&o);
    const char *db = NULL, *format = "text", *out_path = NULL, *budgets = NULL;
    int logged = 0;
    const char *store_texts = NULL, *retention = NULL;
    const char *rules[64];
    size_t n_rules = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            replay_usage(stdout);
            return CLI_EXIT_PASS;
        }
        if (!strcmp(a, "--logged")) {
            logged = 1;
            continue;
        }
        if (i + 1 >= argc) {
            replay_usage(stderr);
            return cli_error(RP_CMD, "%s needs a value", a);
        }
        const char *v = argv[++i];
        long n;
        double d;
        if (!strcmp(a, "--log")) o.log_path = v;
        else if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--baseline")) o.baseline_spec = v;
        else if (!strcmp(a, "--target")) o.target_spec = v;
        else if (!strcmp(a, "--baseline-label")) o.baseline_label = v;
        else if (!strcmp(a, "--target-label")) o.target_label = v;
        else if (!strcmp(a, "--guard")) o.guard_spec = v;
        else if (!strcmp(a, "--embedder")) o.embedder_spec = v;
        else if (!strcmp(a, "--budget")) budgets = v;
        else if (!strcmp(a, "--format")) format = v;
        else if (!strcmp(a, "--store-texts")) store_texts = v;
        else if (!strcmp(a, "--retention")) retention = v;
        else if (!strcmp(a, "--redact")) {
            if (n_rules == sizeof rules / sizeof rules[0]) return cli_error(RP_CMD, "--redact: at most 64 rules");
            rules[n_rules++] = v;
        }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out_path = v;
        else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(RP_CMD, a, v, 0, 2147483647L, &n)) return CLI_EXIT_ERROR;
            o.seed = n;
        } else if (!strcmp(a, "--sdr-threshold")) {
            if (cli_parse_double(RP_CMD, a, v, 0, 2, &d)) return CLI_EXIT_ERROR;
            o.stats.sdr_threshold = d;
        } else if (!strcmp(a, "--window")) {
            if (!strcmp(v, "auto")) o.window_s = -1;
            else if (cli_parse_int(RP_CMD, a, v, 1, 31536000L, &n)) return CLI_EXIT_ERROR;
            else o.window_s = n;
        } else if (!strcmp(a, "--alpha")) {
            if (cli_parse_double(RP_CMD, a, v, 1e-9, 0.5, &d)) return CLI_EXIT_ERROR;
            o.alpha = d;
        } else if (!strcmp(a, "--decide")) {
            if (!strcmp(v, "interval")) o.stats.rule = DRIFT_DECIDE_INTERVAL;
            else if (!strcmp(v, "point")) o.stats.rule = DRIFT_DECIDE_POINT;
            else return cli_error(RP_CMD, "--decide: '%s' is not interval or point", v);
        } else if (!strcmp(a, "--max-left-out")) {
            if (cli_parse_double(RP_CMD, a, v, 0, 100, &d)) return CLI_EXIT_ERROR;
            o.stats.max_left_out = d / 100.0;
        } else if (!strcmp(a, "--concurrency")) {
            if (cli_parse_int(RP_CMD, a, v, 1, 4096, &n)) return CLI_EXIT_ERROR;
            o.target_opts.concurrency = (int)n;
        } else if (!strcmp(a, "--timeout")) {
            if (cli_parse_double(RP_CMD, a, v, 0.001, 86400, &d)) return CLI_EXIT_ERROR;
            o.target_opts.read_timeout_s = d;
        } else if (!strcmp(a, "--retries")) {
            if (cli_parse_int(RP_CMD, a, v, 0, 100, &n)) return CLI_EXIT_ERROR;
            o.target_opts.max_retries = (int)n;
        } else {
            replay_usage(stderr);
            return cli_error(RP_CMD, "unknown option %s", a);
        }
    }
    if (!o.log_path || !db || !o.target_spec)
        return cli_error(RP_CMD, "--log, --db and --target are required (see --help)");
    if (logged == (o.baseline_spec != NULL))
        return cli_error(RP_CMD, "give exactly one of --baseline URL and --logged");
    if (strcmp(format, "text") && strcmp(format, "json"))
        return cli_error(RP_CMD, "--format: '%s' is not text or json", format);
    drift_error err = {0};
    if (drift_traffic_parse_budgets(&o.stats, budgets, &err)) return cli_error_lib(RP_CMD, &err);
    double max_age_s = -1;
    int64_t keep_newest = -1;
    if (retention && drift_traffic_retention_parse(retention, &max_age_s, &keep_newest, &err))
        return cli_error_lib(RP_CMD, &err);
    drift_traffic_privacy *pv = NULL;
    if (drift_traffic_privacy_new(store_texts, rules, n_rules, &pv, &err)) return cli_error_lib(RP_CMD, &err);
    o.privacy = pv;

    /* the log first: a bad log is refused before a store is created */
    drift_traffic_log *log = NULL;
    if (drift_traffic_log_load(o.log_path, &log, &err)) {
        drift_traffic_privacy_free(pv);
        return cli_error_lib(RP_CMD, &err);
    }
    o.log = log;
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) {
        drift_traffic_log_free(log);
        drift_traffic_privacy_free(pv);
        return cli_error_lib(RP_CMD, &err);
    }
    cli_install_signal_handlers();
    o.target_opts.cancel = cli_cancel_requested;
    if (!cli_quiet) {
        o.progress = cli_progress;
        char *what = drift_traffic_privacy_describe(pv);
        if (what) fprintf(stderr, "replay: %s\n", what);
        free(what);
    }
    drift_replay_report *rep = NULL;
    drift_status rc = drift_replay_run(st, &o, &rep, &err);
    cli_progress_done();
    if (!rc && retention) {
        const char *labels[2] = {rep->baseline_label, rep->target_label};
        int64_t deleted = 0;
        rc = drift_traffic_retention_apply(st, labels, 2, max_age_s, keep_newest, 0, &deleted, &err);
        if (!rc) fprintf(stderr, "replay: retention %s: %lld answers deleted\n", retention, (long long)deleted);
        if (rc) drift_replay_report_free(rep);
    }
    drift_store_close(st);
    drift_traffic_log_free(log);
    drift_traffic_privacy_free(pv);
    if (rc) return cli_error_lib(RP_CMD, &err);
    char *text = !strcmp(format, "json") ? drift_replay_render_json(rep) : drift_replay_render_text(rep);
    int code = drift_decision_exit_code(rep->sum.decision);
    drift_replay_report_free(rep);
    if (!text) return cli_error(RP_CMD, "out of memory rendering the report");
    int w = cli_write_output(RP_CMD, out_path, text);
    free(text);
    return w ? CLI_EXIT_ERROR : code;
}

CLI_COMMAND(replay, "replay", "replay a request log on two stacks; label-free drift", cmd_replay)
