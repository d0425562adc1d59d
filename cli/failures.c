/* failures.c - failed requests as the CLI prints them (failures.h): the
 * run stage counts them by kind (drift_run_summary's failures: a cause, or
 * an HTTP status); these name the kind, say what to check for it, and print
 * one line per kind. */
#include "failures.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "driftbench/status.h"

const char *cli_failure_kind(const drift_run_failure *f, char *buf, size_t cap) {
    if (f->cause == DRIFT_FAIL_HTTP && f->http_status) snprintf(buf, cap, "HTTP %d", f->http_status);
    else snprintf(buf, cap, "%s", drift_fail_cause_name(f->cause));
    return buf;
}

const char *cli_failure_hint(const drift_run_failure *f, char *buf, size_t cap) {
    int st = f->http_status;
    const char *why = "";
    switch (f->cause) {
    case DRIFT_FAIL_CONNECT: why = "is the server up?"; break;
    case DRIFT_FAIL_TIMEOUT: why = "the server is slower than the timeout: raise --timeout or lower --concurrency"; break;
    case DRIFT_FAIL_TLS: why = "check the server's certificate, or use http:// for a server without TLS"; break;
    case DRIFT_FAIL_REPLY:
        why = "the replies are not OpenAI-compatible answers: check the URL's path and api=chat|completions";
        break;
    case DRIFT_FAIL_LOST: why = "the server dropped the connections: did it crash? see its log"; break;
    case DRIFT_FAIL_REQUEST: why = "the prompts could not be sent: check the suite's text"; break;
    case DRIFT_FAIL_HTTP:
        if (st == 401 || st == 403)
            why = "check the API key (api_key_env=NAME in the target; $OPENAI_API_KEY, the default, goes only over "
                  "https or to this machine)";
        else if (st == 404) why = "check the URL and the model name";
        else if (st == 400 || st == 422) why = "it refused the requests: see its message (model name, prompt length, decoding options)";
        else if (st == 429) why = "it is limiting the rate: lower --concurrency or raise --retries";
        else if (st >= 500) why = "it failed: see its log";
        else why = "see its message";
        snprintf(buf, cap, "the server answered HTTP %d: %s", st, why);
        return buf;
    default: break;
    }
    snprintf(buf, cap, "%s", why);
    return buf;
}

const char *cli_all_failed_why(const char *target, const drift_run_failure *f, int only, char *buf, size_t cap) {
    char kind[64], hint[256];
    cli_failure_kind(f, kind, sizeof kind);
    cli_failure_hint(f, hint, sizeof hint);
    char *shown = drift_redact(target); /* the target without its secrets */
    snprintf(buf, cap, "every request to %s failed%s %s (first%s: %s)%s%s", cli_safe(shown ? shown : "the target"),
             only ? ":" : ", most of them:", kind, only ? " error" : " of those", cli_safe(f->first),
             hint[0] ? "; " : "", hint);
    free(shown);
    return buf;
}

void cli_print_failures(const drift_run_summary *s, const char *indent) {
    char kind[64];
    for (size_t i = 0; i < s->n_failures; i++) {
        const drift_run_failure *f = &s->failures[i];
        fprintf(stderr, "%s%zu x %s; first: %s\n", indent, f->count, cli_failure_kind(f, kind, sizeof kind),
                cli_safe(f->first)); /* a server's message */
    }
    if (s->failures_other) fprintf(stderr, "%s%zu x of other kinds\n", indent, s->failures_other);
}
