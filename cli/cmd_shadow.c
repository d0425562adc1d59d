/* cmd_shadow.c - `driftbench shadow`: the OpenAI-compatible mirroring proxy
 * (shadow.h; docs/shadow.md). Prints "listening on http://HOST:PORT" to
 * stderr and "PORT <n>" to stdout, serves until SIGINT/SIGTERM, then stops
 * cleanly and says what was left queued (mirrored again at the next start).
 *
 * The judging side is another part's (a streaming judge with alarms); until
 * it is wired in, this command counts one class itself, "exact": a
 * comparable pair whose two answers (drift_traffic_reply_message's form,
 * compared as canonical JSON text) are the same or differ, computed in
 * on_pair and shown on /metrics as driftbench_shadow_exact_pairs_total. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "driftbench/shadow.h"
#include "pipeline.h"

static const char *SH_CMD = "shadow";

static void shadow_usage(FILE *f) {
    fprintf(f,
            "usage: driftbench shadow --primary URL --candidate URL --db STORE [options]\n"
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
            "The client's Authorization goes to the primary only; the candidate uses its\n"
            "spec's api_key_env. Exit: 0 after a clean stop, 2 an error.\n");
}

/* The placeholder class "exact" (see the top of the file). */
typedef struct exact_count {
    volatile long same, differ;
} exact_count;

static void on_pair(void *user, const char *request_json, const char *pm, const char *cm, int pe, int ce,
                    int comparable) {
    (void)request_json;
    exact_count *x = user;
    if (pe || ce || !comparable || !pm || !cm) return;
    if (!strcmp(pm, cm)) __atomic_add_fetch(&x->same, 1, __ATOMIC_SEQ_CST);
    else __atomic_add_fetch(&x->differ, 1, __ATOMIC_SEQ_CST);
}

static int metrics_extra(void *user, drift_prom *p) {
    exact_count *x = user;
    drift_error e = {0};
    if (drift_prom_family(p, "driftbench_shadow_exact_pairs_total", DRIFT_PROM_COUNTER,
                          "Comparable pairs of this process by exact agreement of the two answers "
                          "(a placeholder judge: the answers' message JSON compared as text).",
                          &e))
        return -1;
    drift_prom_label s = {"outcome", "same"}, d = {"outcome", "differ"};
    if (drift_prom_sample(p, &s, 1, (double)__atomic_load_n(&x->same, __ATOMIC_SEQ_CST), &e)) return -1;
    return drift_prom_sample(p, &d, 1, (double)__atomic_load_n(&x->differ, __ATOMIC_SEQ_CST), &e) ? -1 : 0;
}

static int cmd_shadow(int argc, char **argv) {
    drift_shadow_opts o;
    drift_shadow_opts_default(&o);
    o.port = 8090;
    const char *listen = NULL;
    char host[256];
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
    exact_count x = {0, 0};
    o.on_pair = on_pair;
    o.metrics_extra = metrics_extra;
    o.user = &x;
    cli_install_signal_handlers();
    drift_error err = {0};
    drift_shadow *s = NULL;
    if (drift_shadow_start(&o, &s, &err)) return cli_error_lib(SH_CMD, &err);
    drift_shadow_stats st;
    drift_shadow_get_stats(s, &st);
    fprintf(stderr, "driftbench shadow: listening on http://%s:%d (primary -> clients, %.0f%% mirrored)\n",
            o.listen_host, drift_shadow_port(s), o.sample * 100);
    if (st.resumed)
        fprintf(stderr, "driftbench shadow: %llu pair(s) left unfinished in the store are mirrored again\n",
                (unsigned long long)st.resumed);
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
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_PASS;
}

CLI_COMMAND(shadow, "shadow", "an OpenAI-compatible proxy mirroring traffic to a candidate", cmd_shadow)
