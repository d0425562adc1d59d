/* http_client.c - throughput and client CPU cost of the HTTP target.
 *
 * Starts the fake server (tests/server/fakeserver.c, found next to this
 * binary or at $DRIFT_BUILD/fakeserver, through tests/support/fake_server.h),
 * then sends --requests completions requests (default 20000) at each
 * concurrency of --concurrency (default 1,16,64,256) through
 * drift_target_generate, and prints requests/s and the
 * client's CPU time per request (getrusage of this process: user + system;
 * the server is another process and is not counted). The target is
 * at most 100 us of client CPU per request.
 *
 * usage: bench_http_client [--requests N] [--concurrency 1,16,64,256]
 *                          [--server PATH] [--api completions|chat] */
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "driftbench/target.h"
#include "support/fake_server.h"
#include "util/util.h"

typedef struct tally {
    size_t answered, errors;
    char first_error[256];
} tally;

static int on_result(void *user, const drift_gen_request *req, drift_answer *res) {
    tally *t = user;
    if (res->error) {
        if (!t->errors) snprintf(t->first_error, sizeof t->first_error, "%s", res->error);
        t->errors++;
    } else {
        t->answered++;
    }
    return 0;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    size_t n = 20000;
    const char *conc = "1,16,64,256";
    const char *api = "completions";
    char server[2048] = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--requests") && i + 1 < argc) n = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "--concurrency") && i + 1 < argc) conc = argv[++i];
        else if (!strcmp(argv[i], "--server") && i + 1 < argc) snprintf(server, sizeof server, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--api") && i + 1 < argc) api = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--requests N] [--concurrency 1,16,64,256] [--server PATH] [--api A]\n", argv[0]);
            return 2;
        }
    }
    if (!server[0]) {
        const char *b = getenv("DRIFT_BUILD");
        if (b && *b) {
            snprintf(server, sizeof server, "%s/fakeserver", b);
        } else {
            char self[1024];
            snprintf(self, sizeof self, "%s", argv[0]);
            snprintf(server, sizeof server, "%s/fakeserver", dirname(self));
        }
    }
    signal(SIGPIPE, SIG_IGN);
    fake_server fake;
    if (fake_server_start(&fake, server, 900, NULL, 0) != 0) {
        fprintf(stderr, "cannot start the fake server %s\n", server);
        return 2;
    }
    int port = fake.port;

    char **prompts = calloc(n, sizeof *prompts);
    drift_gen_request *reqs = calloc(n, sizeof *reqs);
    if (!prompts || !reqs) return 2;
    for (size_t i = 0; i < n; i++) {
        prompts[i] = util_asprintf("Question %zu: what is %zu + %zu? ANSWER=%zu", i, i, i, 2 * i);
        reqs[i] = (drift_gen_request){.index = i, .prompt = prompts[i], .replicate = 0};
    }
    char spec[256];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=fake&api=%s", port, api);
    char host[256] = "?";
    gethostname(host, sizeof host);
    char when[32];
    util_utc_iso(when);
    printf("# bench_http_client: %zu requests per row, api=%s, fake server on 127.0.0.1, host %s, %s, %ld CPUs\n", n,
           api, host, when, sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-12s %10s %8s %10s %12s %16s\n", "concurrency", "requests", "errors", "wall_s", "requests/s",
           "client_cpu_us/req");
    int rc = 0;
    const char *p = conc;
    while (*p) {
        int c = atoi(p);
        if (c < 1) {
            fprintf(stderr, "bad concurrency list '%s'\n", conc);
            rc = 2;
            break;
        }
        drift_target_opts o;
        drift_target_opts_default(&o);
        o.concurrency = c;
        o.api_key = NULL;
        drift_target *t = NULL;
        drift_error err = {0};
        if (drift_target_open(spec, &o, &t, &err)) {
            fprintf(stderr, "open: %s\n", err.msg);
            rc = 2;
            break;
        }
        drift_gen_params gp;
        drift_gen_params_default(&gp);
        gp.max_tokens = 64;
        tally tl = {0};
        double c0 = cpu_s(), w0 = util_now_ms();
        drift_status st = drift_target_generate(t, reqs, n, &gp, on_result, &tl, &err);
        double wall = (util_now_ms() - w0) / 1000.0, cpu = cpu_s() - c0;
        drift_target_close(t);
        if (st) {
            fprintf(stderr, "generate: %s\n", err.msg);
            rc = 2;
            break;
        }
        printf("%-12d %10zu %8zu %10.2f %12.0f %16.1f\n", c, n, tl.errors, wall, (double)n / wall, cpu / (double)n * 1e6);
        fflush(stdout);
        if (tl.errors) {
            fprintf(stderr, "  first error: %s\n", tl.first_error);
            rc = 1;
        }
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    fake_server_stop(&fake);
    for (size_t i = 0; i < n; i++) free(prompts[i]);
    free(prompts);
    free(reqs);
    return rc;
}
