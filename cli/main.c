/* main.c - driftbench: dispatches to the commands that cmd_*.c register.
 * The only file that knows the global flags; commands own their own. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "driftbench/status.h"

#define CLI_MAX_COMMANDS 64
static const cli_command *commands[CLI_MAX_COMMANDS];
static int n_commands;
int cli_quiet;
int cli_verbose;

void cli_register(const cli_command *cmd) {
    if (n_commands < CLI_MAX_COMMANDS) commands[n_commands++] = cmd;
}

static int cmp_cmd(const void *a, const void *b) {
    return strcmp((*(const cli_command *const *)a)->name, (*(const cli_command *const *)b)->name);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: driftbench [--quiet|--verbose] COMMAND [ARGS]\n"
            "\n"
            "Measures whether an LLM behaves the same on two serving stacks.\n"
            "\n"
            "commands:\n");
    for (int i = 0; i < n_commands; i++) fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f,
            "\n"
            "`driftbench COMMAND --help` describes a command.\n"
            "exit codes: 0 pass, 1 drift over budget, 2 error\n");
}

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "driftbench %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_ERROR;
}

int cli_error_lib(const char *cmd, const drift_error *err) {
    return cli_error(cmd, "%s (%s)", err->msg[0] ? err->msg : "failed", drift_strerror(err->code));
}

int cli_parse_int(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    if (!s || !*s) return cli_error(cmd, "%s needs a number", flag), -1;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        cli_error(cmd, "%s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    if (!s || !*s) return cli_error(cmd, "%s needs a number", flag), -1;
    double v = strtod(s, &end);
    if (*end || !(v >= lo && v <= hi)) {
        cli_error(cmd, "%s: '%s' is not a number in [%g, %g]", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int progress_active;

void cli_progress(void *user, const char *stage, size_t done, size_t total) {
    (void)user;
    if (cli_quiet || !isatty(STDERR_FILENO)) return;
    if (total) {
        int width = 30, fill = (int)((double)done / (double)total * width);
        fprintf(stderr, "\r%-10s [", stage);
        for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
        fprintf(stderr, "] %zu/%zu", done, total);
    } else {
        fprintf(stderr, "\r%-10s %zu", stage, done);
    }
    fflush(stderr);
    progress_active = 1;
}

void cli_progress_done(void) {
    if (progress_active) {
        fputc('\n', stderr);
        progress_active = 0;
    }
}

int cli_write_output(const char *cmd, const char *path, const char *text) {
    if (!path || strcmp(path, "-") == 0) {
        fputs(text, stdout);
        return fflush(stdout) ? -1 : 0;
    }
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(cmd, "%s: cannot write", path), -1;
    fputs(text, f);
    if (fclose(f)) return cli_error(cmd, "%s: write failed", path), -1;
    return 0;
}

int main(int argc, char **argv) {
    qsort(commands, (size_t)n_commands, sizeof commands[0], cmp_cmd);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) cli_quiet = 1;
        else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) cli_verbose = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("driftbench %s\n", drift_version());
            return 0;
        } else {
            fprintf(stderr, "driftbench: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return CLI_EXIT_ERROR;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_ERROR;
    }
    for (int c = 0; c < n_commands; c++)
        if (!strcmp(commands[c]->name, argv[i])) return commands[c]->fn(argc - i, argv + i);
    fprintf(stderr, "driftbench: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return CLI_EXIT_ERROR;
}
