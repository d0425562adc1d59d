/* progress.h - the CLI's progress reporter, one for every command (run,
 * measure, score, matrix, divergence, report, import): what the stage in
 * work is doing, on stderr, so stdout stays the command's output. The
 * library only reports (drift_progress_cb, drift_progress_fn); this prints.
 *
 *   stderr a terminal: one bar redrawn in place (at most every 100 ms, cut
 *     to the terminal's width): done/total, items per second (and tokens
 *     per second where the stage knows them), elapsed, time left ("--"
 *     until a rate is known; meter.h says how it is smoothed).
 *   otherwise (CI logs, a pipe): one line with the same figures every
 *     DRIFT_PROGRESS_SECS seconds (default 10; 0: none), the first one an
 *     interval after the stage began, so a quick command prints nothing
 *     new; a stage that printed one (or any stage, with -v) ends with a
 *     final line: its counts, wall time and average rate.
 *   -v: one line per request of a run (cli_progress_request).
 *   --quiet: none of it.
 * A clock thread per meter prints what is due between the stage's
 * reports too: a stage waiting on one slow unit still gets its periodic
 * lines (with the same counts and a growing elapsed time), and the bar's
 * elapsed time moves every second. One meter at a time (stages run one
 * after the other); the entry points and the clock share one lock. */
#ifndef DRIFT_CLI_PROGRESS_H
#define DRIFT_CLI_PROGRESS_H

#include <stddef.h>

#include "driftbench/pipeline.h"

/* The environment variable of the periodic lines' interval (seconds). */
#define CLI_PROGRESS_SECS_ENV "DRIFT_PROGRESS_SECS"
#define CLI_PROGRESS_SECS_DEFAULT 10.0

/* Reads CLI_PROGRESS_SECS_ENV and whether stderr is a terminal; main calls
 * it before a command runs. A bad value is printed and -1 (exit 2). */
int cli_progress_setup(void);

/* A stage named name (as printed: "score", "run 'a'") starts now with
 * total units (0: unknown); ends the meter before it if any. */
void cli_progress_begin(const char *name, size_t total);
/* Its counts now: done, total, failed units, and the tokens of the units
 * done since the last call (< 0: unknown). Draws the bar or, when due, a
 * line. Without a meter started, nothing. */
void cli_progress_update(size_t done, size_t total, size_t errors, double tokens);
/* Ends the meter: the bar's last state and a newline, or the final line
 * (see above). Nothing without one. cli_progress_done (cli.h) is this. */
void cli_progress_end(void);
/* A line of text amid the progress (no newline in it): the bar is taken
 * off, the line printed, the bar drawn again. */
void cli_progress_note(const char *line);
/* With -v (and not --quiet): the line of the request p->request (a run
 * STEP) - prompt id and replicate, ok or failed with the kind and the
 * message's start, attempts, latency, tokens. */
void cli_progress_request(const drift_progress *p);

#endif
