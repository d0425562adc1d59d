/* meter.h - the arithmetic and the text of the CLI's progress (progress.c
 * prints them): a stage's counts, its smoothed rates (items and tokens per
 * second), its time left, and the bar, the periodic line and the final line
 * as text. Pure: every function takes the clock as an argument and prints
 * nothing, so tests give it timestamps and read the text.
 *
 * Rate: counted in windows of at least CLI_RATE_WINDOW_MS; the first
 * window that saw the count grow sets the rate (its count over its span),
 * each later one moves it towards the window's own rate by
 * 1 - exp(-span / CLI_RATE_TAU_MS) (an exponential average in time, so
 * windows of any length weigh by how long they are). Before the first such
 * window the rate is unknown, and so is the time left: the text says "--".
 * Time left = (total - done) / rate. */
#ifndef DRIFT_CLI_METER_H
#define DRIFT_CLI_METER_H

#include <stddef.h>

#define CLI_RATE_WINDOW_MS 1000.0 /* shortest span a rate is measured over */
#define CLI_RATE_TAU_MS 20000.0   /* the smoothing's time constant */

typedef struct cli_rate {
    double per_s;   /* smoothed count per second; < 0 while unknown */
    double mark_ms; /* start of the current window */
    double mark_n;  /* the count then */
} cli_rate;

/* Starts r at count n at time now_ms (rate unknown). */
void cli_rate_start(cli_rate *r, double now_ms, double n);
/* The count is n at now_ms (never less than before): closes the window
 * when it is CLI_RATE_WINDOW_MS long. */
void cli_rate_update(cli_rate *r, double now_ms, double n);

typedef struct cli_meter {
    char name[96];          /* what is counted, as printed: "score", "run 'a'" */
    double t0_ms;           /* when it started */
    size_t done, total;     /* total 0: unknown */
    size_t errors;          /* units that failed (run: failed requests) */
    double tokens;          /* completion tokens of the units done, where known */
    int has_tokens;         /* some unit said its token count */
    cli_rate items, toks;
} cli_meter;

/* A meter named name (cut to fit) from now_ms, nothing done. */
void cli_meter_start(cli_meter *m, const char *name, size_t total, double now_ms);
/* The counts at now_ms; tokens: completion tokens of the units done since
 * the last call, < 0 when not known. */
void cli_meter_update(cli_meter *m, size_t done, size_t total, size_t errors, double tokens, double now_ms);
/* Seconds left; < 0 when unknown (no rate yet, a rate of 0, no total). */
double cli_meter_eta_s(const cli_meter *m);

/* "0:07", "12:40", "2:03:00", ">99:59:59"; "--" for s < 0 (unknown). */
const char *cli_fmt_clock(double s, char *buf, size_t cap);
/* "0.4/s" ... "12/s"; under 0.1/s per minute: "3.0/min"; "--/s" when < 0. */
const char *cli_fmt_rate(double per_s, char *buf, size_t cap);

typedef enum cli_meter_style {
    CLI_METER_BAR = 0,   /* the terminal's bar: name [####....] 12/40  left 0:09  3.2/s  elapsed 0:04 */
    CLI_METER_LINE = 1,  /* a log line:  name: 12/40 (30%)  3.2/s  elapsed 0:04  left 0:09 */
    CLI_METER_FINAL = 2  /* the last line: name: 40/40 in 0:13 (3.1/s on average) */
} cli_meter_style;

/* m at now_ms as one line of text in style (no newline, no "\r"), written
 * into buf (cut to cap) and returned. Tokens per second show where known;
 * errors where some unit failed. */
const char *cli_meter_format(const cli_meter *m, double now_ms, cli_meter_style style, char *buf, size_t cap);

/* The periodic lines' interval from its text (DRIFT_PROGRESS_SECS):
 * seconds, a number in [0, 86400] (0: no periodic line); 0 and *out set,
 * -1 for anything else. */
int cli_progress_secs_parse(const char *s, double *out);

#endif
