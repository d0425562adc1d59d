/* cmd_view.c - `driftbench view --db STORE`: the results browser
 * (view.h) on a local port until Ctrl-C (SIGINT) or SIGTERM. SIGINT and
 * SIGTERM are blocked before the server's threads start (they inherit the
 * mask) and taken here with sigwait, so a signal stops it cleanly: the
 * daemon closes its connections, the store was never held open between
 * requests. Prints the URL and a "PORT <n>" line (tests and scripts read
 * it; --port 0 picks a free port). */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "driftbench/view.h"

extern char **environ;

#define VIEW_MAX_ALLOW 16

static const char view_usage[] =
    "usage: driftbench view --db STORE [--port N] [--host 127.0.0.1] [--allow-host NAME ...]\n"
    "                       [--open]\n"
    "A results browser over a store in a local web page: the runs, the comparisons (pairs of\n"
    "runs sharing prompts), every answer pair with filters (workload, flipped only, direction,\n"
    "target configuration, text search), one pair's two answers side by side with a word\n"
    "diff, their scores and evaluators' details and the flip risk from stored logprobs, and a\n"
    "run's history (its endpoints, the same stack under other labels). The store is opened\n"
    "read-only for each request: nothing is written or locked, and runs being written show\n"
    "their answers as they come. The page, its script and style are built in; nothing is\n"
    "loaded from elsewhere.\n"
    "--port N: default 8377; 0 picks a free port. The URL is printed, then 'PORT <n>'.\n"
    "--host H: the IPv4 address to listen on, 127.0.0.1 by default; another address lets\n"
    "anyone who can reach it read the store (a warning says so).\n"
    "--allow-host NAME: a host name the page may be reached by besides localhost and IP\n"
    "addresses (requests naming any other Host are refused: DNS rebinding protection).\n"
    "--open: also open the page in the desktop's browser (xdg-open).\n"
    "Ctrl-C (SIGINT) or SIGTERM stops it. docs/view.md describes the page and its JSON API.\n"
    "exit: 0 stopped by a signal, 2 error (a store that cannot be read, a port in use)\n";

static int is_loopback(const char *host) { return !strncmp(host, "127.", 4); }

typedef struct opener {
    pid_t pid;
    char url[128];
} opener;

/* Waits for xdg-open on a thread of its own: it may not return while the
 * browser it started runs, and must not hold the main thread's sigwait. */
static void *opener_wait(void *arg) {
    opener *op = arg;
    int st;
    if (waitpid(op->pid, &st, 0) == op->pid && (!WIFEXITED(st) || WEXITSTATUS(st)))
        fprintf(stderr, "driftbench view: --open: xdg-open failed; open %s yourself\n", op->url);
    free(op);
    return NULL;
}

/* xdg-open URL, with the signals this thread blocks unblocked in it (they
 * would be inherited), stdin from /dev/null (a text browser it may pick
 * must not take the terminal's input); its failure said, never fatal. */
static void open_browser(const char *url) {
    char *argv[] = {"xdg-open", (char *)url, NULL};
    opener *op = calloc(1, sizeof *op);
    posix_spawnattr_t at;
    posix_spawn_file_actions_t fa;
    sigset_t none;
    sigemptyset(&none);
    int ok = op && !posix_spawnattr_init(&at);
    if (ok && posix_spawn_file_actions_init(&fa)) posix_spawnattr_destroy(&at), ok = 0;
    if (ok) {
        snprintf(op->url, sizeof op->url, "%s", url);
        ok = !posix_spawnattr_setsigmask(&at, &none) && !posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK) &&
             !posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) &&
             !posix_spawnp(&op->pid, "xdg-open", &fa, &at, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
    }
    if (!ok) {
        fprintf(stderr, "driftbench view: --open: cannot run xdg-open; open %s yourself\n", url);
        free(op);
        return;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, opener_wait, op)) {
        free(op); /* not waited for: it is reaped when view exits */
        return;
    }
    pthread_detach(th);
}

static int cmd_view(int argc, char **argv) {
    drift_view_opts o;
    drift_view_opts_default(&o);
    o.port = 8377;
    const char *allow[VIEW_MAX_ALLOW];
    size_t n_allow = 0;
    int open_it = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(view_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--open")) {
            open_it = 1;
            continue;
        }
        if (strcmp(a, "--db") && strcmp(a, "--port") && strcmp(a, "--host") && strcmp(a, "--allow-host"))
            return cli_error("view", "unknown option '%s' (see --help)", a);
        if (++i >= argc) return cli_error("view", "%s needs a value", a);
        if (!strcmp(a, "--db")) {
            o.store = argv[i];
        } else if (!strcmp(a, "--host")) {
            o.host = argv[i];
        } else if (!strcmp(a, "--port")) {
            long v;
            if (cli_parse_int("view", "--port", argv[i], 0, 65535, &v)) return CLI_EXIT_ERROR;
            o.port = (int)v;
        } else {
            if (n_allow == VIEW_MAX_ALLOW) return cli_error("view", "at most %d --allow-host", VIEW_MAX_ALLOW);
            allow[n_allow++] = argv[i];
        }
    }
    if (!o.store) return cli_error("view", "--db is required (see --help)");
    o.allow_hosts = allow;
    o.n_allow_hosts = n_allow;
    /* SIGINT/SIGTERM: blocked here and in every thread started below, taken by sigwait */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    drift_view *v = NULL;
    drift_error err = {0};
    if (drift_view_start(&o, &v, &err)) {
        pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
        return cli_error_lib("view", &err);
    }
    const char *host = o.host && *o.host ? o.host : "127.0.0.1";
    if (!is_loopback(host))
        fprintf(stderr,
                "driftbench view: warning: listening on %s: anyone who can reach this address can read the "
                "store (there is no authentication)\n",
                cli_safe(host));
    char url[128];
    snprintf(url, sizeof url, "http://%s:%d/", !strcmp(host, "0.0.0.0") ? "127.0.0.1" : host, drift_view_port(v));
    char *shown = drift_redact(o.store); /* a PostgreSQL URL's password stays off the screen */
    printf("driftbench view: %s at %s (Ctrl-C stops)\nPORT %d\n", cli_safe(shown ? shown : "(store)"), url,
           drift_view_port(v));
    free(shown);
    fflush(stdout);
    if (open_it) open_browser(url);
    int sig = 0;
    sigwait(&stop, &sig);
    if (!cli_quiet) fprintf(stderr, "driftbench view: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    drift_view_stop(v);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
    return 0;
}

CLI_COMMAND(view, "view", "browse a store's runs, comparisons and answer pairs in a local web page", cmd_view)
