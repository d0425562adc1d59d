/* main.c - driftbench: dispatches to the commands that cmd_*.c register.
 * The only file that parses the global flags (their values live in cli.c);
 * commands own their own.
 *
 * Global flags (--quiet/-q, --verbose/-v) go anywhere: before the command
 * or among its arguments, as users type them. Among the arguments, a flag
 * is taken out (and set) only where it stands alone in flag position: not
 * after `--` (which ends option parsing; the command sees the rest as is)
 * and not right after an option that may take the next argument as its
 * value, so `--label -v` leaves "-v" to be the label. Which options take no
 * value is the table below (every command's flags without a value); an
 * option missing from it counts as one that takes a value, so a new flag
 * there can at worst leave a global flag to its command (which then says
 * it does not know it), never eat a value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"
#include "driftbench/status.h"

#define CLI_MAX_COMMANDS 64
static const cli_command *commands[CLI_MAX_COMMANDS];
static int n_commands;

void cli_register(const cli_command *cmd) {
    if (n_commands < CLI_MAX_COMMANDS) commands[n_commands++] = cmd;
}

static int cmp_cmd(const void *a, const void *b) {
    return strcmp((*(const cli_command *const *)a)->name, (*(const cli_command *const *)b)->name);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: driftbench [--quiet|--verbose] COMMAND [ARGS]\n"
            "       (-q/--quiet and -v/--verbose may also come among ARGS)\n"
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

/* The commands' options that take no value (see the file's comment). */
static const char *const no_value_options[] = {
    "--help", "-h", "--list", "--no-score", "--rescore", "--sequential", "--unsafe-code-exec", "--no-risk", "--kl",
    "--partial", "--replace", "--chat", "--quick", "--json", "--yes",
    "--full", "--dry-run", "--descriptors", "--no-interactions", "--no-tune", "--grouped-cv", "--no-analysis",
    "--gpu", "--open", "--quiet", "-q", "--verbose", "-v", "--only-deterministic"};

/* 1 when a is a global flag (and sets it). */
static int global_flag(const char *a) {
    if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) return cli_quiet = 1;
    if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) return cli_verbose = 1;
    return 0;
}

/* 1 when the option a may take the next argument as its value: "-x" or
 * "--name" (no "=value", no "-xVALUE") not in no_value_options. */
static int may_take_value(const char *a) {
    if (a[0] != '-' || !a[1]) return 0;                        /* a positional (or "-") */
    if (a[1] != '-' && a[2]) return 0;                         /* -xVALUE */
    if (a[1] == '-' && strchr(a, '=')) return 0;               /* --name=value */
    for (size_t i = 0; i < sizeof no_value_options / sizeof no_value_options[0]; i++)
        if (!strcmp(a, no_value_options[i])) return 0;
    return 1;
}

/* Takes the global flags in flag position out of args[1..n-1] (args[0] is
 * the command), in place; returns the new count. */
static int strip_global_flags(int n, char **args) {
    int out = 1, value_next = 0, ended = 0;
    for (int i = 1; i < n; i++) {
        const char *a = args[i];
        if (ended || value_next) {
            value_next = 0;
        } else if (!strcmp(a, "--")) {
            ended = 1;
        } else if (global_flag(a)) {
            continue;
        } else {
            value_next = may_take_value(a);
        }
        args[out++] = args[i];
    }
    args[out] = NULL;
    return out;
}

int main(int argc, char **argv) {
    qsort(commands, (size_t)n_commands, sizeof commands[0], cmp_cmd);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (global_flag(argv[i])) continue;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("driftbench %s\n", drift_version());
            return 0;
        } else {
            fprintf(stderr, "driftbench: unknown option '%s'\n", cli_safe(argv[i]));
            usage(stderr);
            return CLI_EXIT_ERROR;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return CLI_EXIT_ERROR;
    }
    if (cli_progress_setup()) return CLI_EXIT_ERROR; /* DRIFT_PROGRESS_SECS (progress.c) */
    for (int c = 0; c < n_commands; c++)
        if (!strcmp(commands[c]->name, argv[i])) return commands[c]->fn(strip_global_flags(argc - i, argv + i), argv + i);
    fprintf(stderr, "driftbench: unknown command '%s'\n", cli_safe(argv[i]));
    usage(stderr);
    return CLI_EXIT_ERROR;
}
