/* cmd_shadow.c - `driftbench shadow`: flags, printing, exit codes of the
 * mirroring proxy (shadow.h; docs/shadow.md) and its live judge
 * (drift_shadow_judge_*). Prints "PORT <n>" to stdout, its log and the
 * judge's alarm events to stderr as they happen, serves until SIGINT/SIGTERM,
 * then stops cleanly and says what was left queued. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "driftbench/shadow.h"
#include "driftbench/text.h"
#include "driftbench/traffic_privacy.h"
#include "pipeline.h"

static const char *SH_CMD = "shadow";

static void shadow_usage(FILE *f) {
    fprintf(f,
            "usage: driftbench shadow --primary URL --candidate URL --db STORE [options]\n"
            "       driftbench shadow --db STORE --report [--window S|auto] [--format text|json]\n"
            "An OpenAI-compatible proxy: every request goes to the primary and its reply\n"
            "comes back unchanged (status, headers, body byte for byte, streams as they\n"
            "arrive); a sampled share of chat/completions (or completions) requests is\n"
            "stored with the primary's answer and mirrored to the candidate off the\n"
            "request path (stream false), stored in replay's layout: suite shadow:NAME,\n"
            "runs shadow-primary and shadow-candidate. A full mirror queue drops the\n"
            "mirror (counted), never the client's request. GET /metrics (Prometheus),\n"
            "GET /health. Stops on Ctrl-C/SIGTERM; a restart with the same --db mirrors\n"
            "what was left. docs/shadow.md.\n"
            "  --primary URL          the stack clients are answered by (a target spec,\n"
            "                         e.g. http://127.0.0.1:8000/v1?model=m&api=chat)\n"
            "  --candidate URL        the stack under test (api=chat or api=completions:\n"
            "                         which endpoint's requests are mirrored)\n"
            "  --db STORE             the store (SQLite path or PostgreSQL URL)\n"
            "  --listen HOST:PORT     where to listen (default 127.0.0.1:8090; port 0: any)\n"
            "  --name NAME            the suite is shadow:NAME (default: default)\n"
            "  --primary-label L      run labels (default shadow-primary and\n"
            "  --candidate-label L    shadow-candidate)\n"
            "  --sample FRACTION      share of requests mirrored, 0..1 (default 1); decided\n"
            "                         by a hash of the body: the same traffic, the same sample\n"
            "  --queue N              mirror queue capacity in requests (default 64)\n"
            "  --mirror-connections N requests in flight to the candidate (default 4)\n"
            "  --only-deterministic   mirror only requests with temperature 0 (comparable)\n"
            "  --max-body BYTES       a client's request body (default 4194304; over: 413)\n"
            "  --max-reply BYTES      a primary reply kept to store and mirror (default\n"
            "                         8388608; over: relayed whole, not mirrored, a drop)\n"
            "  --max-connections N    client connections at once (default 256)\n"
            "  --timeout S            the candidate's whole-request timeout (default 300)\n"
            "  --retries N            the candidate's retries (default 1)\n"
            "Judging (live, per pair; alarms logged on stderr and shown on /metrics):\n"
            "  --budget SPEC          per-class budgets in percent, e.g. json=0.5,exact=1\n"
            "                         (none: not gated; defaults as replay's)\n"
            "  --alpha A              each alarm's error level (default 0.05; docs/alarm.md)\n"
            "  --guard SPEC           judge safe/unsafe of every answer: the guard class\n"
            "  --embedder SPEC        embed both answers: the semantic class (SDR)\n"
            "  --sdr-threshold X      semantic flip over this SDR (default 0.30)\n"
            "Privacy (what is stored; said on stderr at start):\n"
            "  --store-texts MODE     full (default) or hashes: only SHA-256 of requests and\n"
            "                         answers (judged in memory first; a restart cannot\n"
            "                         mirror unfinished pairs again nor re-judge stored ones)\n"
            "  --redact RULE          emails, phones, digits, keys, all, or re:REGEX;\n"
            "                         repeatable; applied before anything is stored\n"
            "  --retention SPEC       keep only answers newer than SPEC (30d, 12h) or each\n"
            "                         side's newest N (a number): at start and every period\n"
            "  --retention-period S   seconds between two applications (default 3600)\n"
            "Drift over time of a shadow store (no proxy, no request sent):\n"
            "  --report               judge the stored pairs with --budget/--alpha and print\n"
            "                         per class flips and alarms, and per time window\n"
            "  --window S|auto        windows of S seconds of the answers' stored times\n"
            "                         (default auto: at most 20)\n"
            "  --format FMT           text (default) or json (the judge's state)\n"
            "  -o FILE                write the report to FILE\n"
            "The client's Authorization goes to the primary only; the candidate uses its\n"
            "spec's api_key_env. Exit: 0 after a clean stop, 2 an error.\n");
}

/* The proxy's and the judge's lines, from their threads (not cli_safe: its ring per thread would leak). */
static void shadow_log(void *user, const char *line) {
    drift_buf b = {0};
    int bad = drift_sanitize_append(&b, line, strlen(line), DRIFT_SAN_LINE) != 0;
    fprintf(stderr, "driftbench shadow: %s\n", !bad && b.data ? b.data : "(out of memory)");
    drift_buf_free(&b);
}

/* ---- --report: drift over time of a shadow store, no request sent (drift_shadow_report) ---- */

static int shadow_report(const drift_shadow_report_opts *ro, const char *out_path) {
    drift_error err = {0};
    drift_store *st = NULL;
    char *text = NULL;
    if (drift_store_open_readonly(ro->store_name, &st, &err)) return cli_error_lib(SH_CMD, &err);
    drift_status rc = drift_shadow_report(st, ro, &text, &err);
    drift_store_close(st);
    if (rc) return cli_error_lib(SH_CMD, &err);
    int code = cli_write_output(SH_CMD, out_path, text) ? CLI_EXIT_ERROR : CLI_EXIT_PASS;
    free(text);
    return code;
}

static int cmd_shadow(int argc, char **argv) {
    drift_shadow_opts o;
    drift_shadow_opts_default(&o);
    o.port = 8090;
    const char *listen = NULL, *budgets = NULL, *guard_spec = NULL, *embedder_spec = NULL, *store_texts = NULL;
    const char *format = "text", *out_path = NULL, *rules[64];
    char host[256];
    size_t n_rules = 0;
    double alpha = 0.05;
    int report_mode = 0;
    int64_t window_s = -1;
    drift_traffic_opts tstats;
    drift_traffic_opts_default(&tstats);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            shadow_usage(stdout);
            return CLI_EXIT_PASS;
        }
        if (!strcmp(a, "--only-deterministic")) {
            o.only_deterministic = 1;
            continue;
        }
        if (!strcmp(a, "--report")) {
            report_mode = 1;
            continue;
        }
        if (strncmp(a, "-", 1)) {
            shadow_usage(stderr);
            return cli_error(SH_CMD, "unexpected argument '%s'", a);
        }
        if (i + 1 >= argc) {
            shadow_usage(stderr);
            return cli_error(SH_CMD, "%s needs a value", a);
        }
        const char *v = argv[++i];
        long n;
        double d;
        if (!strcmp(a, "--primary")) o.primary_spec = v;
        else if (!strcmp(a, "--candidate")) o.candidate_spec = v;
        else if (!strcmp(a, "--db")) o.store_path = v;
        else if (!strcmp(a, "--listen")) listen = v;
        else if (!strcmp(a, "--name")) o.name = v;
        else if (!strcmp(a, "--primary-label")) o.primary_label = v;
        else if (!strcmp(a, "--candidate-label")) o.candidate_label = v;
        else if (!strcmp(a, "--budget") || !strcmp(a, "--budgets")) budgets = v;
        else if (!strcmp(a, "--guard")) guard_spec = v;
        else if (!strcmp(a, "--embedder")) embedder_spec = v;
        else if (!strcmp(a, "--store-texts")) store_texts = v;
        else if (!strcmp(a, "--retention")) o.retention = v;
        else if (!strcmp(a, "--format")) format = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out_path = v;
        else if (!strcmp(a, "--window")) {
            if (!strcmp(v, "auto")) window_s = -1;
            else if (cli_parse_int(SH_CMD, a, v, 1, 31536000L, &n)) return CLI_EXIT_ERROR;
            else window_s = n;
        }
        else if (!strcmp(a, "--redact")) {
            if (n_rules == sizeof rules / sizeof rules[0]) return cli_error(SH_CMD, "--redact: at most 64 rules");
            rules[n_rules++] = v;
        } else if (!strcmp(a, "--alpha")) {
            if (cli_parse_double(SH_CMD, a, v, 1e-9, 0.5, &d)) return CLI_EXIT_ERROR;
            alpha = d;
        } else if (!strcmp(a, "--sdr-threshold")) {
            if (cli_parse_double(SH_CMD, a, v, 0, 2, &d)) return CLI_EXIT_ERROR;
            tstats.sdr_threshold = d;
        }
        else if (!strcmp(a, "--sample")) {
            if (cli_parse_double(SH_CMD, a, v, 0, 1, &d)) return CLI_EXIT_ERROR;
            o.sample = d;
        } else if (!strcmp(a, "--queue")) {
            if (cli_parse_int(SH_CMD, a, v, 1, 1000000, &n)) return CLI_EXIT_ERROR;
            o.queue = (int)n;
        } else if (!strcmp(a, "--mirror-connections")) {
            if (cli_parse_int(SH_CMD, a, v, 1, 1024, &n)) return CLI_EXIT_ERROR;
            o.mirror_connections = (int)n;
        } else if (!strcmp(a, "--max-body")) {
            if (cli_parse_int(SH_CMD, a, v, 1024, 1L << 30, &n)) return CLI_EXIT_ERROR;
            o.max_body_bytes = (size_t)n;
        } else if (!strcmp(a, "--max-reply")) {
            if (cli_parse_int(SH_CMD, a, v, 1024, 1L << 30, &n)) return CLI_EXIT_ERROR;
            o.max_store_reply_bytes = (size_t)n;
        } else if (!strcmp(a, "--retention-period")) {
            if (cli_parse_double(SH_CMD, a, v, 0.001, 31536000, &d)) return CLI_EXIT_ERROR;
            o.retention_period_s = d;
        } else if (!strcmp(a, "--max-connections")) {
            if (cli_parse_int(SH_CMD, a, v, 1, 65536, &n)) return CLI_EXIT_ERROR;
            o.max_connections = (int)n;
        } else if (!strcmp(a, "--timeout")) {
            if (cli_parse_double(SH_CMD, a, v, 0.001, 86400, &d)) return CLI_EXIT_ERROR;
            o.candidate_opts.read_timeout_s = d;
        } else if (!strcmp(a, "--retries")) {
            if (cli_parse_int(SH_CMD, a, v, 0, 100, &n)) return CLI_EXIT_ERROR;
            o.candidate_opts.max_retries = (int)n;
        } else {
            shadow_usage(stderr);
            return cli_error(SH_CMD, "unknown option %s", a);
        }
    }
    drift_error err = {0};
    if (report_mode) {
        if (!o.store_path) return cli_error(SH_CMD, "--report needs --db");
        if (strcmp(format, "text") && strcmp(format, "json"))
            return cli_error(SH_CMD, "--format: '%s' is not text or json", format);
        drift_shadow_report_opts ro = {.store_name = o.store_path, .primary_label = o.primary_label,
                                       .candidate_label = o.candidate_label, .stats = tstats, .alpha = alpha,
                                       .window_s = window_s, .json = !strcmp(format, "json")};
        if (drift_traffic_parse_budgets(&ro.stats, budgets, &err)) return cli_error_lib(SH_CMD, &err);
        return shadow_report(&ro, out_path);
    }
    if (!o.primary_spec || !o.candidate_spec || !o.store_path)
        return cli_error(SH_CMD, "--primary, --candidate and --db are required (see --help)");
    if (listen) {
        const char *colon = strrchr(listen, ':');
        long port;
        if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host)
            return cli_error(SH_CMD, "--listen: '%s' is not HOST:PORT", listen);
        if (cli_parse_int(SH_CMD, "--listen", colon + 1, 0, 65535, &port)) return CLI_EXIT_ERROR;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = 0;
        o.listen_host = host;
        o.port = (int)port;
    }
    if (drift_traffic_parse_budgets(&tstats, budgets, &err)) return cli_error_lib(SH_CMD, &err);
    drift_traffic_privacy *pv = NULL;
    if (drift_traffic_privacy_new(store_texts, rules, n_rules, &pv, &err)) return cli_error_lib(SH_CMD, &err);
    int code = CLI_EXIT_PASS;
    drift_guard *guard = NULL;
    drift_embedder *emb = NULL;
    drift_shadow_judge *J = NULL;
    if (guard_spec && drift_guard_open(guard_spec, &guard, &err)) {
        drift_error_prefix(&err, "--guard: ");
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    if (embedder_spec && drift_embedder_open(embedder_spec, &emb, &err)) {
        drift_error_prefix(&err, "--embedder: ");
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    if (drift_shadow_judge_new(&tstats, alpha, guard, emb, shadow_log, NULL, &J, &err)) {
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    drift_shadow_judge_attach(J, &o);
    o.log = shadow_log;
    o.privacy = pv;
    cli_install_signal_handlers();
    drift_shadow *s = NULL;
    if (drift_shadow_start(&o, &s, &err)) {
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    drift_shadow_stats st;
    drift_shadow_get_stats(s, &st);
    fprintf(stderr, "driftbench shadow: listening on http://%s:%d (primary -> clients, %.0f%% mirrored)\n",
            o.listen_host, drift_shadow_port(s), o.sample * 100);
    char *what = drift_traffic_privacy_describe(pv);
    fprintf(stderr, "driftbench shadow: %s%s\n", what ? what : "",
            drift_traffic_privacy_hashes(pv) ? "; with hashes, pairs left unfinished by a stop cannot be mirrored "
                                               "again and stored pairs cannot be judged again after a restart"
                                             : "");
    free(what);
    drift_shadow_judge_resumed(J); /* says what it resumed from */
    if (st.resumed)
        fprintf(stderr, "driftbench shadow: %llu pair(s) left unfinished in the store are mirrored again\n",
                (unsigned long long)st.resumed);
    if (st.backlog_hashed)
        fprintf(stderr,
                "driftbench shadow: %llu pair(s) left unfinished in the store are hashes: not mirrored again\n",
                (unsigned long long)st.backlog_hashed);
    printf("PORT %d\n", drift_shadow_port(s));
    fflush(stdout);
    for (struct timespec nap = {0, 100 * 1000000L}; !cli_cancel_requested(NULL);) nanosleep(&nap, NULL);
    fprintf(stderr, "driftbench shadow: stopping (requests in flight finish)\n");
    size_t left = 0;
    drift_shadow_stop(s, &left, &st);
    fprintf(stderr,
            "driftbench shadow: stopped: %llu proxied, %llu mirrored, %llu dropped, %llu pairs, %llu mirror errors; "
            "%zu left queued (mirrored again at the next start with this store)\n",
            (unsigned long long)st.requests, (unsigned long long)st.mirrored,
            (unsigned long long)(st.dropped_queue_full + st.dropped_store_busy + st.dropped_reply_too_large),
            (unsigned long long)st.pairs, (unsigned long long)st.mirror_errors, left);
    if (st.store_errors) {
        cli_error(SH_CMD, "%llu store write(s) failed; the last: %s", (unsigned long long)st.store_errors,
                  st.last_error);
        code = CLI_EXIT_ERROR;
    }
out:
    drift_shadow_judge_free(J);
    if (guard) drift_guard_close(guard);
    if (emb) drift_embedder_close(emb);
    drift_traffic_privacy_free(pv);
    return code;
}

CLI_COMMAND(shadow, "shadow", "an OpenAI-compatible proxy mirroring traffic to a candidate", cmd_shadow)
