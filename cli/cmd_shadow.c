/* cmd_shadow.c - `driftbench shadow`: the OpenAI-compatible mirroring proxy
 * (shadow.h; docs/shadow.md). Prints "listening on http://HOST:PORT" to
 * stderr and "PORT <n>" to stdout, serves until SIGINT/SIGTERM, then stops
 * cleanly and says what was left queued (mirrored again at the next start).
 *
 * Every pair is judged live by the streaming judge (traffic_stream.h):
 * flips per class, left out, the SDR histogram with --embedder, one alarm per
 * gated class whose events are logged to stderr the moment they happen and
 * shown on /metrics. At start the pairs the store already holds are re-added
 * in the order they were stored, so a restart (even after kill -9) resumes
 * the counts and the alarms (with --store-texts hashes they cannot be judged
 * again: the judge starts from zero, said at start). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "driftbench/eval.h"
#include "driftbench/shadow.h"
#include "driftbench/text.h"
#include "driftbench/traffic_privacy.h"
#include "driftbench/traffic_stream.h"
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
            "  --queue N              mirror queue capacity in requests (default 256)\n"
            "  --mirror-connections N requests in flight to the candidate (default 4)\n"
            "  --only-deterministic   mirror only requests with temperature 0 (comparable)\n"
            "  --max-body BYTES       a client's request body (default 4194304; over: 413)\n"
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
            "  --retention SPEC       at start, keep only answers newer than SPEC (30d, 12h)\n"
            "                         or each side's newest N (a number)\n"
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

/* The judge: one streaming judge (traffic_stream.h) fed from on_pair (the
 * writer thread) and read by /metrics (a connection thread): a mutex
 * serialises the two. Alarm events are logged the moment a pair causes
 * them. replaying: 1 while the stored pairs are re-added at start. */
typedef struct shadow_judge {
    pthread_mutex_t mu;
    drift_traffic_stream *stream;
    int replaying;
    long unjudged;       /* pairs the judge refused (e.g. stored as hashes, re-added at start) */
    char last_err[256];
} shadow_judge;

static void on_pair(void *user, const char *request_json, const char *pm, const char *cm, int pe, int ce,
                    int comparable) {
    shadow_judge *j = user;
    drift_error e = {0};
    pthread_mutex_lock(&j->mu);
    /* stored pairs re-added at start may be hashes (--store-texts hashes
     * before): judging a hash would be wrong for every class but exact, so
     * they are not judged again */
    if (j->replaying && (drift_traffic_privacy_is_hash(request_json ? request_json : "") ||
                         (pm && drift_traffic_privacy_is_hash(pm)) || (cm && drift_traffic_privacy_is_hash(cm)))) {
        j->unjudged++;
        pthread_mutex_unlock(&j->mu);
        return;
    }
    /* a request error is left out where a class applies, never a flip */
    if (drift_traffic_stream_add(j->stream, request_json, pm, cm, pe, ce, comparable, 0, NULL, &e)) {
        j->unjudged++;
        snprintf(j->last_err, sizeof j->last_err, "%s", e.msg);
    } else {
        size_t n = 0;
        const drift_traffic_stream_event *ev = drift_traffic_stream_events(j->stream, &n);
        for (size_t i = 0; i < n; i++) {
            drift_buf b = {0};
            if (!drift_traffic_stream_describe_event(j->stream, &ev[i], &b))
                fprintf(stderr, "driftbench shadow: %s%s\n", j->replaying ? "(stored pairs) " : "",
                        b.data ? b.data : "");
            drift_buf_free(&b);
        }
    }
    pthread_mutex_unlock(&j->mu);
}

/* The candidate's errors, said as they happen: the first, then the 10th,
 * 100th, ... (a misconfigured candidate fails every mirror; the count and
 * every error stay in /metrics and the store). */
static void on_mirror_error(void *user, const char *error, uint64_t n) {
    (void)user;
    uint64_t k = n;
    while (k >= 10 && k % 10 == 0) k /= 10;
    if (k != 1) return;
    fprintf(stderr, "driftbench shadow: the candidate failed a mirrored request (%llu so far; an error pair, never a "
                    "flip): %.300s\n",
            (unsigned long long)n, cli_safe(error ? error : "(no text)"));
}

static int metrics_extra(void *user, drift_prom *p) {
    shadow_judge *j = user;
    drift_error e = {0};
    pthread_mutex_lock(&j->mu);
    drift_status rc = drift_traffic_stream_write_prom(j->stream, p, &e);
    pthread_mutex_unlock(&j->mu);
    return rc ? -1 : 0;
}

/* ---- --report: drift over time of a shadow store, no request sent (drift_shadow_report) ---- */

static int shadow_report(const char *db, const char *plabel, const char *clabel, const drift_traffic_opts *tstats,
                         double alpha, int64_t window_s, const char *format, const char *out_path) {
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib(SH_CMD, &err);
    drift_shadow_report_opts ro = {.store_name = db, .primary_label = plabel, .candidate_label = clabel,
                                   .stats = *tstats, .alpha = alpha, .window_s = window_s,
                                   .json = !strcmp(format, "json")};
    char *text = NULL;
    drift_status rc = drift_shadow_report(st, &ro, &text, &err);
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
    const char *listen = NULL;
    char host[256];
    const char *budgets = NULL, *guard_spec = NULL, *embedder_spec = NULL, *store_texts = NULL, *retention = NULL;
    const char *rules[64];
    size_t n_rules = 0;
    double alpha = 0.05;
    int report_mode = 0;
    int64_t window_s = -1;
    const char *format = "text", *out_path = NULL;
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
        else if (!strcmp(a, "--retention")) retention = v;
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
    if (report_mode) {
        if (!o.store_path) return cli_error(SH_CMD, "--report needs --db");
        if (strcmp(format, "text") && strcmp(format, "json"))
            return cli_error(SH_CMD, "--format: '%s' is not text or json", format);
        drift_error perr = {0};
        if (drift_traffic_parse_budgets(&tstats, budgets, &perr)) return cli_error_lib(SH_CMD, &perr);
        return shadow_report(o.store_path, o.primary_label, o.candidate_label, &tstats, alpha, window_s, format,
                             out_path);
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
    drift_error err = {0};
    if (drift_traffic_parse_budgets(&tstats, budgets, &err)) return cli_error_lib(SH_CMD, &err);
    double max_age_s = -1;
    int64_t keep_newest = -1;
    if (retention && drift_traffic_retention_parse(retention, &max_age_s, &keep_newest, &err))
        return cli_error_lib(SH_CMD, &err);
    drift_traffic_privacy *pv = NULL;
    if (drift_traffic_privacy_new(store_texts, rules, n_rules, &pv, &err)) return cli_error_lib(SH_CMD, &err);
    int code = CLI_EXIT_PASS;
    drift_guard *guard = NULL;
    drift_embedder *emb = NULL;
    shadow_judge J;
    memset(&J, 0, sizeof J);
    pthread_mutex_init(&J.mu, NULL);
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
    if (drift_traffic_stream_new(&tstats, alpha, guard, emb, &J.stream, &err)) {
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    if (retention) { /* before the proxy holds the store */
        drift_store *rst = NULL;
        const char *labels[2] = {o.primary_label ? o.primary_label : "shadow-primary",
                                 o.candidate_label ? o.candidate_label : "shadow-candidate"};
        int64_t deleted = 0;
        if (drift_store_open(o.store_path, &rst, &err) ||
            drift_traffic_retention_apply(rst, labels, 2, max_age_s, keep_newest, 0, &deleted, &err)) {
            drift_store_close(rst);
            code = cli_error_lib(SH_CMD, &err);
            goto out;
        }
        drift_store_close(rst);
        fprintf(stderr, "driftbench shadow: retention %s: %lld stored answers deleted\n", retention,
                (long long)deleted);
    }
    o.on_pair = on_pair;
    o.on_mirror_error = on_mirror_error;
    o.metrics_extra = metrics_extra;
    o.user = &J;
    o.privacy = pv;
    o.replay_stored = 1;
    cli_install_signal_handlers();
    drift_shadow *s = NULL;
    J.replaying = 1;
    if (drift_shadow_start(&o, &s, &err)) {
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    pthread_mutex_lock(&J.mu);
    J.replaying = 0;
    long rejudged = (long)drift_traffic_stream_pairs(J.stream), unjudged = J.unjudged;
    pthread_mutex_unlock(&J.mu);
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
    if (rejudged)
        fprintf(stderr, "driftbench shadow: the judge resumed from %ld stored pair(s)\n", rejudged);
    if (unjudged)
        fprintf(stderr,
                "driftbench shadow: %ld stored pair(s) could not be judged again (stored as hashes, or: %s); "
                "the judge counts them no more\n",
                unjudged, J.last_err[0] ? J.last_err : "none other");
    if (st.resumed)
        fprintf(stderr, "driftbench shadow: %llu pair(s) left unfinished in the store are mirrored again\n",
                (unsigned long long)st.resumed);
    if (st.backlog_hashed)
        fprintf(stderr,
                "driftbench shadow: %llu pair(s) left unfinished in the store are hashes: not mirrored again\n",
                (unsigned long long)st.backlog_hashed);
    printf("PORT %d\n", drift_shadow_port(s));
    fflush(stdout);
    while (!cli_cancel_requested(NULL)) {
        struct timespec nap = {0, 100 * 1000000L};
        nanosleep(&nap, NULL);
    }
    fprintf(stderr, "driftbench shadow: stopping (requests in flight finish)\n");
    size_t left = 0;
    drift_shadow_stop(s, &left, &st);
    fprintf(stderr,
            "driftbench shadow: stopped: %llu proxied, %llu mirrored, %llu dropped, %llu pairs, %llu mirror errors; "
            "%zu left queued (mirrored again at the next start with this store)\n",
            (unsigned long long)st.requests, (unsigned long long)st.mirrored,
            (unsigned long long)(st.dropped_queue_full + st.dropped_store_busy), (unsigned long long)st.pairs,
            (unsigned long long)st.mirror_errors, left);
    if (st.store_errors) {
        cli_error(SH_CMD, "%llu store write(s) failed; the last: %s", (unsigned long long)st.store_errors,
                  st.last_error);
        code = CLI_EXIT_ERROR;
    }
out:
    drift_traffic_stream_free(J.stream);
    if (guard) drift_guard_close(guard);
    if (emb) drift_embedder_close(emb);
    drift_traffic_privacy_free(pv);
    pthread_mutex_destroy(&J.mu);
    return code;
}

CLI_COMMAND(shadow, "shadow", "an OpenAI-compatible proxy mirroring traffic to a candidate", cmd_shadow)
