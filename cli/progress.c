/* progress.c - the CLI's progress reporter (progress.h says what it shows
 * where); the figures and their text are meter.c's. */
#include "progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "failures.h"
#include "meter.h"

#define DRAW_EVERY_MS 100.0 /* the bar is redrawn at most this often */
#define TICK_MS 1000.0      /* the clock's longest sleep: the bar's elapsed time moves this often */

static struct {
    int set_up;
    int tty;             /* stderr is a terminal */
    double every_s;      /* periodic lines' interval; 0 none */
    int active;          /* a meter is started */
    cli_meter m;
    double last_draw_ms; /* tty: the bar's last drawing */
    int drawn;           /* tty: the bar is on the line */
    int stale;           /* tty: counts came that the bar does not show yet */
    double last_line_ms; /* otherwise: the last periodic line (or the start) */
    int lines;           /* otherwise: periodic lines printed for this meter */
    /* the clock: a thread per meter that prints what is due between the
     * stage's reports (a stage waiting on one slow unit reports nothing) */
    pthread_mutex_t mu;  /* g's fields, taken by every entry point and the clock */
    pthread_cond_t cv;   /* signals the clock to stop */
    pthread_t clock;
    int clock_on;        /* the clock thread runs (joined by end) */
    int clock_stop;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

int cli_progress_setup(void) {
    g.set_up = 1;
    g.tty = isatty(STDERR_FILENO);
    g.every_s = CLI_PROGRESS_SECS_DEFAULT;
    const char *s = getenv(CLI_PROGRESS_SECS_ENV);
    if (s && cli_progress_secs_parse(s, &g.every_s)) {
        fprintf(stderr, "driftbench: %s='%s': expected seconds between progress lines, a number in [0, 86400] "
                        "(0: none)\n", CLI_PROGRESS_SECS_ENV, cli_safe(s));
        return -1;
    }
    return 0;
}

static void ensure_set_up(void) {
    if (!g.set_up && cli_progress_setup()) g.every_s = CLI_PROGRESS_SECS_DEFAULT;
}

/* The terminal's width, 80 when it does not say. */
static size_t columns(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col;
    return 80;
}

/* Cuts s to fit a line of the terminal (at a UTF-8 lead byte). */
static void fit(char *s) {
    size_t w = columns() - 1, n = strlen(s);
    if (n <= w) return;
    while (w > 0 && ((unsigned char)s[w] & 0xC0) == 0x80) w--;
    s[w] = 0;
}

static void draw(double now) {
    char line[512];
    cli_meter_format(&g.m, now, CLI_METER_BAR, line, sizeof line);
    fit(line);
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    g.last_draw_ms = now;
    g.drawn = 1;
    g.stale = 0;
}

/* Takes the bar off its line (the cursor back at its start). */
static void undraw(void) {
    if (!g.drawn) return;
    fputs("\r\033[K", stderr);
    g.drawn = 0;
}

/* Without a terminal: the periodic line, when one is due. */
static void line_if_due(double now) {
    if (g.every_s <= 0 || now - g.last_line_ms < g.every_s * 1000.0) return;
    char line[512];
    fprintf(stderr, "%s\n", cli_meter_format(&g.m, now, CLI_METER_LINE, line, sizeof line));
    fflush(stderr);
    g.last_line_ms = now;
    g.lines++;
}

/* The clock: wakes when the next periodic line is due (at most TICK_MS
 * apart) and prints it, or redraws the bar so that its elapsed time and
 * time left move, until end stops it. */
static void *clock_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g.mu);
    while (!g.clock_stop) {
        double now = cli_now_ms(), wait = TICK_MS;
        if (g.active) {
            if (g.tty) {
                if (g.drawn && now - g.last_draw_ms >= TICK_MS) draw(now);
            } else {
                line_if_due(now);
                double due = g.last_line_ms + g.every_s * 1000.0 - now;
                if (due > 0 && due < wait) wait = due;
            }
        }
        if (wait < 1) wait = 1;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ns = until.tv_nsec + (long)(wait * 1e6);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        int rc = pthread_cond_timedwait(&g.cv, &g.mu, &until);
        if (rc && rc != ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

static void end_locked(void);

static void begin_locked(const char *name, size_t total) {
    end_locked();
    if (cli_quiet) return;
    double now = cli_now_ms();
    cli_meter_start(&g.m, name, total, now);
    g.active = 1;
    g.last_draw_ms = 0;
    g.drawn = 0;
    g.last_line_ms = now;
    g.lines = 0;
    /* a clock only where it has something to print; without one (a thread
     * that cannot start), lines come with the stage's reports as before */
    if (g.tty || g.every_s > 0) {
        g.clock_stop = 0;
        g.clock_on = pthread_create(&g.clock, NULL, clock_main, NULL) == 0;
    }
}

void cli_progress_begin(const char *name, size_t total) {
    ensure_set_up();
    pthread_mutex_lock(&g.mu);
    begin_locked(name, total);
    pthread_mutex_unlock(&g.mu);
}

static void update_locked(size_t done, size_t total, size_t errors, double tokens) {
    if (!g.active || cli_quiet) return;
    double now = cli_now_ms();
    cli_meter_update(&g.m, done, total, errors, tokens, now);
    if (g.tty) {
        if (!g.drawn || now - g.last_draw_ms >= DRAW_EVERY_MS || (total && done >= total)) draw(now);
        else g.stale = 1;
    } else {
        line_if_due(now);
    }
}

void cli_progress_update(size_t done, size_t total, size_t errors, double tokens) {
    pthread_mutex_lock(&g.mu);
    update_locked(done, total, errors, tokens);
    pthread_mutex_unlock(&g.mu);
}

/* Stops and joins the clock; called with g.mu held, which it lets go of
 * while it waits for the thread. */
static void clock_join_locked(void) {
    if (!g.clock_on) return;
    g.clock_stop = 1;
    pthread_cond_signal(&g.cv);
    pthread_t t = g.clock;
    g.clock_on = 0;
    pthread_mutex_unlock(&g.mu);
    pthread_join(t, NULL);
    pthread_mutex_lock(&g.mu);
}

static void end_locked(void) {
    clock_join_locked();
    if (!g.active) return;
    g.active = 0;
    if (cli_quiet) return;
    double now = cli_now_ms();
    if (g.tty) {
        if (g.drawn) {
            if (g.stale) draw(now); /* the last counts */
            fputc('\n', stderr);
            g.drawn = 0;
        }
    } else if (g.lines || (cli_verbose && (g.m.done || g.m.total))) {
        char line[512];
        fprintf(stderr, "%s\n", cli_meter_format(&g.m, now, CLI_METER_FINAL, line, sizeof line));
    }
    fflush(stderr);
}

void cli_progress_end(void) {
    pthread_mutex_lock(&g.mu);
    end_locked();
    pthread_mutex_unlock(&g.mu);
}

void cli_progress_note(const char *line) {
    pthread_mutex_lock(&g.mu);
    int redraw = g.drawn;
    undraw();
    fprintf(stderr, "%s\n", line);
    if (redraw && g.active) draw(cli_now_ms());
    fflush(stderr);
    pthread_mutex_unlock(&g.mu);
}

void cli_progress_request(const drift_progress *p) {
    const drift_request_outcome *r = p->request;
    if (!r || !cli_verbose || cli_quiet) return;
    char line[768], what[384], tokens[64] = "";
    if (r->ok) {
        snprintf(what, sizeof what, "ok%s%s%s", r->finish_reason ? " (" : "",
                 r->finish_reason ? cli_safe(r->finish_reason) : "", r->finish_reason ? ")" : "");
    } else {
        /* the message's start, after the kind unless it begins with it ("HTTP 500 after 2 attempts: ...") */
        char kind[64], msg[100];
        drift_run_failure f = {.cause = r->cause, .http_status = r->http_status};
        cli_failure_kind(&f, kind, sizeof kind);
        const char *e = r->error ? cli_safe(r->error) : "";
        size_t cut = 80;
        if (strlen(e) > cut) {
            while (cut > 0 && ((unsigned char)e[cut] & 0xC0) == 0x80) cut--;
            snprintf(msg, sizeof msg, "%.*s...", (int)cut, e);
        } else {
            snprintf(msg, sizeof msg, "%s", e);
        }
        if (!strncmp(msg, kind, strlen(kind))) snprintf(what, sizeof what, "failed: %s", msg);
        else snprintf(what, sizeof what, "failed: %s%s%s", kind, msg[0] ? ": " : "", msg);
    }
    if (r->completion_tokens >= 0 && r->prompt_tokens >= 0)
        snprintf(tokens, sizeof tokens, ", %d+%d tokens", r->prompt_tokens, r->completion_tokens);
    else if (r->completion_tokens >= 0)
        snprintf(tokens, sizeof tokens, ", %d tokens", r->completion_tokens);
    char lat[32];
    if (r->latency_ms < 1000) snprintf(lat, sizeof lat, "%.0f ms", r->latency_ms);
    else snprintf(lat, sizeof lat, "%.2f s", r->latency_ms / 1000.0);
    snprintf(line, sizeof line, "%s '%s' %zu/%zu: %s #%d %s, %d attempt%s, %s%s", p->stage, cli_safe(p->label),
             p->done, p->total, cli_safe(r->prompt_id), r->replicate, what, r->attempts, r->attempts == 1 ? "" : "s",
             lat, tokens);
    cli_progress_note(line);
}

/* ---- the drift_progress_fn of the stages that count only (cli.h) ---- */

void cli_progress(void *user, const char *stage, size_t done, size_t total) {
    (void)user;
    if (cli_quiet) return;
    ensure_set_up();
    pthread_mutex_lock(&g.mu);
    if (!g.active || strcmp(g.m.name, stage) != 0) begin_locked(stage, total); /* a new stage */
    else if (done < g.m.done) cli_meter_start(&g.m, stage, total, cli_now_ms()); /* counting again (the
        stage's next part): new figures, the same bar or lines, no final line in between */
    update_locked(done, total, 0, -1);
    pthread_mutex_unlock(&g.mu);
}

void cli_progress_done(void) { cli_progress_end(); }
