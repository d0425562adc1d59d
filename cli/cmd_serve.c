/* cmd_serve.c - `driftbench serve`: run the OpenAI-compatible server over
 * the embedded engine until SIGTERM/SIGINT (or --lifetime seconds), then
 * drain the requests in flight for up to --drain-timeout seconds (what is
 * still running then is cancelled), print the final statistics and exit 0.
 * A second SIGTERM/SIGINT exits at once with status 128 + the signal.
 * Prints "listening on http://HOST:PORT" to stderr and "PORT <n>" to stdout
 * (flushed) so scripts and tests can find an ephemeral port. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "driftbench/server.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    if (g_stop) { /* the second one: no drain (async-signal-safe calls only) */
        static const char msg[] = "driftbench serve: second signal, exiting now without draining\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    g_stop = 1;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: driftbench serve --model F.gguf [--profile P] [--host 127.0.0.1] [--port N]\n"
            "                        [--max-batch 8] [--batch-invariant on|off] [--threads N]\n"
            "                        [--max-body-bytes N] [--max-queue N] [--max-connections 128]\n"
            "                        [--per-client-connections 64] [--request-timeout 10]\n"
            "                        [--drain-timeout 30] [--batch-window-ms X] [--model-name NAME]\n"
            "                        [--lifetime S]\n"
            "Endpoints: POST /v1/completions, /v1/chat/completions, /v1/embeddings;\n"
            "GET /v1/models, /health. --port 0 picks a free port (printed as 'PORT <n>').\n"
            "Prompt logprobs (docs/divergence-http.md): vLLM's prompt_logprobs: K (completions and\n"
            "chat) and OpenAI's echo: true with logprobs: K (completions); max_tokens 0 with them.\n"
            "Chat: system/user/assistant turns in the model's template; vLLM's\n"
            "continue_final_message leaves the last (assistant) turn open.\n"
            "Connections: at most --max-connections in all and --per-client-connections from\n"
            "one IP address; a new one over a limit evicts the oldest idle or still-sending\n"
            "connection (refused only if all are busy being answered). A connection must\n"
            "send a whole request within --request-timeout seconds of opening or of its\n"
            "previous reply, or it is closed. A request whose client disconnects is\n"
            "cancelled. SIGTERM/SIGINT: stop accepting, finish the requests in flight for up\n"
            "to --drain-timeout seconds, cancel the rest (503), print statistics, exit 0;\n"
            "a second signal exits at once (status 128 + signal).\n");
}

static int cmd_serve(int argc, char **argv) {
    drift_server_opts o;
    drift_server_opts_default(&o);
    double lifetime = 0, drain_s = 30;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return cli_error("serve", "unknown flag or missing value: %s", a);
        }
        const char *v = argv[++i];
        long x;
        double d;
        if (!strcmp(a, "--model")) o.model_path = v;
        else if (!strcmp(a, "--profile")) o.profile = v;
        else if (!strcmp(a, "--host")) o.host = v;
        else if (!strcmp(a, "--model-name")) o.model_name = v;
        else if (!strcmp(a, "--port")) {
            if (cli_parse_int("serve", a, v, 0, 65535, &x)) return CLI_EXIT_ERROR;
            o.port = (int)x;
        } else if (!strcmp(a, "--max-batch")) {
            if (cli_parse_int("serve", a, v, 1, 4096, &x)) return CLI_EXIT_ERROR;
            o.max_batch = (int)x;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_int("serve", a, v, 0, 1024, &x)) return CLI_EXIT_ERROR;
            o.threads = (int)x;
        } else if (!strcmp(a, "--max-body-bytes")) {
            if (cli_parse_int("serve", a, v, 64, 1L << 30, &x)) return CLI_EXIT_ERROR;
            o.max_body_bytes = (size_t)x;
        } else if (!strcmp(a, "--max-queue")) {
            if (cli_parse_int("serve", a, v, 1, 1 << 20, &x)) return CLI_EXIT_ERROR;
            o.max_queue = (int)x;
        } else if (!strcmp(a, "--max-connections")) {
            if (cli_parse_int("serve", a, v, 1, 65536, &x)) return CLI_EXIT_ERROR;
            o.max_connections = (int)x;
        } else if (!strcmp(a, "--per-client-connections")) {
            if (cli_parse_int("serve", a, v, 1, 65536, &x)) return CLI_EXIT_ERROR;
            o.per_client_connections = (int)x;
        } else if (!strcmp(a, "--request-timeout")) {
            if (cli_parse_double("serve", a, v, 0.1, 86400, &d)) return CLI_EXIT_ERROR;
            o.request_timeout_s = d;
        } else if (!strcmp(a, "--drain-timeout")) {
            if (cli_parse_double("serve", a, v, 0, 86400, &drain_s)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--batch-window-ms")) {
            if (cli_parse_double("serve", a, v, 0, 10000, &d)) return CLI_EXIT_ERROR;
            o.batch_window_ms = d;
        } else if (!strcmp(a, "--lifetime")) {
            if (cli_parse_double("serve", a, v, 0, 1e9, &lifetime)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--batch-invariant")) {
            if (!strcmp(v, "on") || !strcmp(v, "1")) o.batch_invariant = 1;
            else if (!strcmp(v, "off") || !strcmp(v, "0")) o.batch_invariant = 0;
            else return cli_error("serve", "--batch-invariant %s: use on or off", v);
        } else {
            usage(stderr);
            return cli_error("serve", "unknown flag: %s", a);
        }
    }
    if (!o.model_path) {
        usage(stderr);
        return cli_error("serve", "--model is required");
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    drift_server *s;
    drift_error err;
    if (drift_server_start(&o, &s, &err)) return cli_error_lib("serve", &err);
    fprintf(stderr,
            "listening on http://%s:%d (model '%s', max batch %d, batch invariance %s; connections: %d, %d per client, "
            "request timeout %g s)\n",
            o.host ? cli_safe(o.host) : "127.0.0.1", drift_server_port(s), cli_safe(drift_server_model_name(s)), o.max_batch,
            o.batch_invariant ? "on" : "off", o.max_connections,
            o.per_client_connections < o.max_connections ? o.per_client_connections : o.max_connections,
            o.request_timeout_s);
    printf("PORT %d\n", drift_server_port(s));
    fflush(stdout);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!g_stop) {
        struct timespec nap = {0, 50 * 1000000L};
        nanosleep(&nap, NULL);
        if (lifetime > 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9 >= lifetime) break;
        }
    }
    fprintf(stderr,
            "driftbench serve: stopping (draining requests in flight for up to %g s; a second signal exits at once)\n",
            drain_s);
    drift_server_drain(s, drain_s);
    drift_server_stats st; /* after the drain: counts what finished during it */
    drift_server_get_stats(s, &st);
    drift_server_stop(s, 0);
    fprintf(stderr,
            "driftbench serve: stopped: %llu requests, %llu answered, %llu refused (4xx), %llu overloaded (503), "
            "%llu batches, largest batch %d; drain: %llu answered, %llu cancelled at the deadline; "
            "%llu cancelled (client gone); connections: %llu timed out, %llu evicted, %llu refused\n",
            (unsigned long long)st.requests, (unsigned long long)st.answered, (unsigned long long)st.rejected,
            (unsigned long long)st.overloaded, (unsigned long long)st.batches, st.max_batch_seen,
            (unsigned long long)st.drained, (unsigned long long)st.cancelled, (unsigned long long)st.departed,
            (unsigned long long)st.timed_out, (unsigned long long)st.evicted, (unsigned long long)st.refused_connections);
    return 0;
}
CLI_COMMAND(serve, "serve", "serve the embedded engine as an OpenAI-compatible HTTP endpoint", cmd_serve)
