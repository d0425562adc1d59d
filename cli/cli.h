/* cli.h - shared pieces of the command-line tool: command registration,
 * flag-value parsing, error printing, progress bars, the sanitiser for
 * outside text in printed lines. Only the CLI prints to stdout and decides
 * exit codes:
 *   0 = pass, 1 = drift over budget (or a check failed), 2 = error. */
#ifndef DRIFT_CLI_H
#define DRIFT_CLI_H

#include <stdio.h>
#include "driftbench/status.h"
#include "driftbench/types.h"

#define CLI_EXIT_PASS 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_ERROR 2

typedef int (*cli_command_fn)(int argc, char **argv);

typedef struct cli_command {
    const char *name;
    const char *summary;   /* one line for `driftbench --help` */
    cli_command_fn fn;     /* argv[0] is the command name */
} cli_command;

/* Each cmd_*.c registers its commands at start-up with this macro, so adding
 * a command never touches main.c. */
void cli_register(const cli_command *cmd);
#define CLI_COMMAND(ident, name_, summary_, fn_)                                  \
    static const cli_command cli_cmd_##ident = {name_, summary_, fn_};            \
    __attribute__((constructor)) static void cli_register_##ident(void) {         \
        cli_register(&cli_cmd_##ident);                                           \
    }

/* Global flags (cli.c; set by main.c before dispatch). */
extern int cli_quiet;
extern int cli_verbose;

/* Prints "driftbench CMD: MESSAGE" to stderr and returns CLI_EXIT_ERROR.
 * MESSAGE goes through the sanitiser as one line (drift_sanitize, text.h):
 * library messages quote server bodies, file names and labels, which must
 * not command the terminal or a CI runner; a newline in it shows as \n. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library error (code + message) and returns CLI_EXIT_ERROR. */
int cli_error_lib(const char *cmd, const drift_error *err);

/* Flag values: return 0 ok, -1 bad (after printing which flag and why). */
int cli_parse_int(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);

/* Monotonic clock in milliseconds, for the elapsed times the CLI prints
 * (cli.c). */
double cli_now_ms(void);

/* Progress on stderr (progress.c: a bar on a terminal, periodic lines
 * otherwise, nothing with --quiet); a drift_progress_fn. A new stage name,
 * or a count that goes back, starts a new meter; _done ends it. */
void cli_progress(void *user, const char *stage, size_t done, size_t total);
void cli_progress_done(void);

/* Text from outside (labels, prompt ids, names from imported files,
 * evaluator names, stored or server error messages, model output) for a
 * printf argument: sanitised as one line and cut to 4 KB ("..." marks a
 * cut). The result is the caller's until 8 more calls on the same thread
 * (a ring of buffers), so a line may take several. NULL gives "(null)". */
const char *cli_safe(const char *s);
/* The same for a text of lines (model output printed whole): newlines
 * and tabs kept, no length cap. Same lifetime. */
const char *cli_safe_lines(const char *s);

/* Writes text to path ("-" or NULL = stdout). Returns 0 or prints and -1. */
int cli_write_output(const char *cmd, const char *path, const char *text);

#endif
