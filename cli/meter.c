/* meter.c - a stage's counts, smoothed rates, time left and their text
 * (meter.h says how the rate is smoothed). */
#include "meter.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_rate_start(cli_rate *r, double now_ms, double n) {
    r->per_s = -1;
    r->mark_ms = now_ms;
    r->mark_n = n;
}

void cli_rate_update(cli_rate *r, double now_ms, double n) {
    double span = now_ms - r->mark_ms;
    if (span < CLI_RATE_WINDOW_MS) return;
    if (r->per_s < 0 && n <= r->mark_n) return; /* nothing yet: the first window waits for the first unit */
    double inst = (n - r->mark_n) * 1000.0 / span;
    if (r->per_s < 0) r->per_s = inst;
    else r->per_s += (1.0 - exp(-span / CLI_RATE_TAU_MS)) * (inst - r->per_s);
    r->mark_ms = now_ms;
    r->mark_n = n;
}

void cli_meter_start(cli_meter *m, const char *name, size_t total, double now_ms) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name ? name : "");
    m->t0_ms = now_ms;
    m->total = total;
    cli_rate_start(&m->items, now_ms, 0);
    cli_rate_start(&m->toks, now_ms, 0);
}

void cli_meter_update(cli_meter *m, size_t done, size_t total, size_t errors, double tokens, double now_ms) {
    m->done = done;
    m->total = total;
    m->errors = errors;
    if (tokens >= 0) {
        m->tokens += tokens;
        m->has_tokens = 1;
    }
    cli_rate_update(&m->items, now_ms, (double)done);
    cli_rate_update(&m->toks, now_ms, m->tokens);
}

double cli_meter_eta_s(const cli_meter *m) {
    if (!m->total) return -1;
    if (m->done >= m->total) return 0;
    if (!(m->items.per_s > 0)) return -1;
    return (double)(m->total - m->done) / m->items.per_s;
}

const char *cli_fmt_clock(double s, char *buf, size_t cap) {
    if (!(s >= 0)) {
        snprintf(buf, cap, "--");
        return buf;
    }
    if (s >= 100.0 * 3600) {
        snprintf(buf, cap, ">99:59:59");
        return buf;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

const char *cli_fmt_rate(double per_s, char *buf, size_t cap) {
    if (!(per_s >= 0)) snprintf(buf, cap, "--/s");
    else if (per_s >= 10) snprintf(buf, cap, "%.0f/s", per_s);
    else if (per_s >= 0.1 || per_s == 0) snprintf(buf, cap, "%.1f/s", per_s);
    else snprintf(buf, cap, "%.1f/min", per_s * 60);
    return buf;
}

/* Appends printf text to buf (length *len, capacity cap), cutting at cap. */
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    if (*len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
}

const char *cli_meter_format(const cli_meter *m, double now_ms, cli_meter_style style, char *buf, size_t cap) {
    if (!cap) return buf;
    buf[0] = 0;
    size_t len = 0;
    double elapsed = (now_ms - m->t0_ms) / 1000.0;
    if (elapsed < 0) elapsed = 0;
    char el[32], left[32], rate[32], trate[32];
    cli_fmt_clock(elapsed, el, sizeof el);
    if (style == CLI_METER_FINAL) {
        /* the whole stage's average, not the smoothed rate */
        double avg = elapsed > 0 ? (double)m->done / elapsed : -1;
        if (m->total) add(buf, cap, &len, "%s: %zu/%zu in %s", m->name, m->done, m->total, el);
        else add(buf, cap, &len, "%s: %zu in %s", m->name, m->done, el);
        if (avg >= 0) {
            add(buf, cap, &len, " (%s", cli_fmt_rate(avg, rate, sizeof rate));
            if (m->has_tokens) add(buf, cap, &len, ", %.0f tokens/s", m->tokens / elapsed);
            add(buf, cap, &len, " on average)");
        }
        if (m->errors) add(buf, cap, &len, ", %zu failed", m->errors);
        return buf;
    }
    cli_fmt_clock(cli_meter_eta_s(m), left, sizeof left);
    cli_fmt_rate(m->items.per_s, rate, sizeof rate);
    if (m->toks.per_s >= 0) snprintf(trate, sizeof trate, "%.0f tokens/s", m->toks.per_s);
    else snprintf(trate, sizeof trate, "-- tokens/s");
    if (style == CLI_METER_BAR) { /* the time left before what a narrow terminal may cut */
        add(buf, cap, &len, "%-10s ", m->name);
        if (m->total) {
            enum { W = 20 };
            char bar[W + 1];
            double share = m->done >= m->total ? 1.0 : (double)m->done / (double)m->total;
            int fill = (int)(share * W);
            for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
            bar[W] = 0;
            add(buf, cap, &len, "[%s] %zu/%zu", bar, m->done, m->total);
        } else {
            add(buf, cap, &len, "%zu", m->done);
        }
        if (m->errors) add(buf, cap, &len, ", %zu failed", m->errors);
        if (m->total) add(buf, cap, &len, "  left %s", left);
        add(buf, cap, &len, "  %s", rate);
        if (m->has_tokens) {
            if (m->toks.per_s >= 0) add(buf, cap, &len, "  %.0f tok/s", m->toks.per_s);
            else add(buf, cap, &len, "  -- tok/s");
        }
        add(buf, cap, &len, "  elapsed %s", el);
        return buf;
    } else {
        add(buf, cap, &len, "%s: %zu", m->name, m->done);
        if (m->total) add(buf, cap, &len, "/%zu (%.0f%%)", m->total, 100.0 * (double)m->done / (double)m->total);
    }
    if (m->errors) add(buf, cap, &len, ", %zu failed", m->errors);
    add(buf, cap, &len, "  %s", rate);
    if (m->has_tokens) add(buf, cap, &len, "  %s", trate);
    add(buf, cap, &len, "  elapsed %s", el);
    if (m->total) add(buf, cap, &len, "  left %s", left);
    return buf;
}

int cli_progress_secs_parse(const char *s, double *out) {
    if (!s || !((*s >= '0' && *s <= '9') || *s == '.')) return -1; /* no sign, no blank */
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v >= 0 && v <= 86400)) return -1;
    *out = v;
    return 0;
}
