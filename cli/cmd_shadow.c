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

static int metrics_extra(void *user, drift_prom *p) {
    shadow_judge *j = user;
    drift_error e = {0};
    pthread_mutex_lock(&j->mu);
    drift_status rc = drift_traffic_stream_write_prom(j->stream, p, &e);
    pthread_mutex_unlock(&j->mu);
    return rc ? -1 : 0;
}

/* ---- --report: drift over time of a shadow store, no request sent ---- */

typedef struct rp_pair {
    char *req, *pm, *cm;
    int pe, ce, comp;
    int64_t t;
} rp_pair;
typedef struct rp_list {
    rp_pair *v;
    size_t n, cap;
    int nomem;
} rp_list;

static char *dup_or_null(const char *x) { return x ? strdup(x) : NULL; }

static int rp_collect(void *user, const char *req, const char *pm, const char *cm, int pe, int ce, int comp,
                      int64_t t) {
    rp_list *l = user;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        rp_pair *v = realloc(l->v, cap * sizeof *v);
        if (!v) return l->nomem = 1;
        l->v = v;
        l->cap = cap;
    }
    rp_pair *p = &l->v[l->n++];
    p->req = dup_or_null(req);
    p->pm = dup_or_null(pm);
    p->cm = dup_or_null(cm);
    p->pe = pe;
    p->ce = ce;
    p->comp = comp;
    p->t = t;
    return 0;
}

static int rp_cmp_time(const void *a, const void *b) {
    const rp_pair *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* The smallest round window that cuts the span into at most 20. */
static int64_t rp_auto_window(const rp_list *l) {
    static const int64_t sizes[] = {60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400};
    int64_t span = l->n ? (l->v[l->n - 1].t - l->v[0].t) / 1000 : 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (span / sizes[i] < 20) return sizes[i];
    return 365 * 86400;
}

static int shadow_report(const char *db, const char *plabel, const char *clabel, const drift_traffic_opts *tstats,
                         double alpha, int64_t window_s, const char *format, const char *out_path) {
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib(SH_CMD, &err);
    rp_list l = {0};
    drift_status rc = drift_shadow_read_pairs(st, plabel, clabel, rp_collect, &l, &err);
    drift_store_close(st);
    int code = CLI_EXIT_PASS;
    drift_traffic_stream *s = NULL;
    long hashed = 0;
    if (rc || l.nomem) {
        code = rc ? cli_error_lib(SH_CMD, &err) : cli_error(SH_CMD, "out of memory");
        goto out;
    }
    qsort(l.v, l.n, sizeof *l.v, rp_cmp_time); /* windows over time; ties keep no promised order */
    if (window_s < 0) window_s = rp_auto_window(&l);
    if (drift_traffic_stream_new(tstats, alpha, NULL, NULL, &s, &err) ||
        (window_s && drift_traffic_stream_set_window(s, window_s * 1000, &err))) {
        code = cli_error_lib(SH_CMD, &err);
        goto out;
    }
    for (size_t i = 0; i < l.n; i++) {
        rp_pair *p = &l.v[i];
        if (drift_traffic_privacy_is_hash(p->req ? p->req : "") || (p->pm && drift_traffic_privacy_is_hash(p->pm)) ||
            (p->cm && drift_traffic_privacy_is_hash(p->cm))) {
            hashed++;
            continue;
        }
        if (drift_traffic_stream_add(s, p->req, p->pm, p->cm, p->pe, p->ce, p->comp, p->t > 0 ? p->t : 1, NULL,
                                     &err)) {
            code = cli_error_lib(SH_CMD, &err);
            goto out;
        }
    }
    drift_buf b = {0};
    if (!strcmp(format, "json")) {
        char *j = drift_traffic_stream_to_json(s);
        if (!j || drift_buf_puts(&b, j) || drift_buf_puts(&b, "\n")) code = cli_error(SH_CMD, "out of memory");
        free(j);
    } else {
        drift_buf_printf(&b, "shadow store %s: %s -> %s\n", db, plabel ? plabel : "shadow-primary",
                         clabel ? clabel : "shadow-candidate");
        drift_buf_printf(&b, "pairs %lld: %lld compared, %lld not comparable, %lld with a request error",
                         (long long)drift_traffic_stream_pairs(s), (long long)drift_traffic_stream_compared(s),
                         (long long)drift_traffic_stream_not_comparable(s), (long long)drift_traffic_stream_errors(s));
        if (hashed) drift_buf_printf(&b, "; %ld stored as hashes, not judged", hashed);
        drift_buf_printf(&b, "\n\n%-10s %8s %8s %9s  %s\n", "class", "flips", "pairs", "left out", "alarm");
        for (int c = 0; c < DRIFT_TC_COUNT; c++) {
            const drift_traffic_stream_class *k = drift_traffic_stream_class_get(s, c);
            const drift_alarm *a = drift_traffic_stream_alarm(s, c);
            if (!k || (!k->n && !k->left_out)) continue;
            drift_buf_printf(&b, "%-10s %8lld %8lld %9lld  ", drift_traffic_class_name(c), (long long)k->flips,
                             (long long)k->n, (long long)k->left_out);
            if (!a) drift_buf_puts(&b, "not gated\n");
            else {
                double lo = 0, hi = 1;
                drift_alarm_bounds(a, &lo, &hi);
                drift_buf_printf(&b, "%s", a->state == DRIFT_ALARM_FIRING ? "ALARM" : drift_alarm_state_name(a->state));
                if (k->raised_pair) drift_buf_printf(&b, " raised at pair %lld,", (long long)k->raised_pair);
                drift_buf_printf(&b, " flip rate in [%.2f%%, %.2f%%], budget %.2f%%\n", lo * 100, hi * 100,
                                 a->budget * 100);
            }
        }
        size_t nw = 0;
        int64_t dropped = 0;
        const drift_traffic_window *w = drift_traffic_stream_windows(s, &nw, &dropped);
        if (nw) {
            drift_buf_printf(&b, "\ndrift over time (windows of %lld s, UTC; flips per class):\n%-20s %6s %8s",
                             (long long)window_s, "window start", "pairs", "compared");
            for (int c = 0; c < DRIFT_TC_COUNT; c++)
                if (drift_traffic_stream_class_get(s, c)->n) drift_buf_printf(&b, " %9s", drift_traffic_class_name(c));
            drift_buf_puts(&b, "\n");
            for (size_t i = 0; i < nw; i++) {
                time_t ts = (time_t)(w[i].start_ms / 1000);
                struct tm tmv;
                char when[32];
                gmtime_r(&ts, &tmv);
                strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
                drift_buf_printf(&b, "%-20s %6lld %8lld", when, (long long)w[i].pairs, (long long)w[i].compared);
                for (int c = 0; c < DRIFT_TC_COUNT; c++)
                    if (drift_traffic_stream_class_get(s, c)->n)
                        drift_buf_printf(&b, " %8lld%s", (long long)w[i].flips[c], w[i].state[c] == DRIFT_ALARM_FIRING ? "!" : " ");
                drift_buf_puts(&b, "\n");
            }
            drift_buf_puts(&b, "(! : the class's alarm is raised at the window's end)\n");
            if (dropped) drift_buf_printf(&b, "(%lld older windows dropped)\n", (long long)dropped);
        }
    }
    if (code == CLI_EXIT_PASS) {
        char *text = drift_buf_steal(&b);
        if (!text || cli_write_output(SH_CMD, out_path, text)) code = CLI_EXIT_ERROR;
        free(text);
    }
    drift_buf_free(&b);
out:
    drift_traffic_stream_free(s);
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].req);
        free(l.v[i].pm);
        free(l.v[i].cm);
    }
    free(l.v);
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
