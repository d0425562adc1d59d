/* prom_text.c - the Prometheus text exposition format, version 0.0.4
 * (prom.h). The rules kept here, from the format's description
 * (prometheus.io, "Exposition formats", text-based format):
 *   - lines end in '\n', the last one too;
 *   - "# HELP <name> <docstring>": in the docstring '\' is written "\\"
 *     and a line feed "\n";
 *   - "# TYPE <name> <counter|gauge|histogram|summary|untyped>", at most
 *     once per name and before the family's first sample;
 *   - a sample is <name>[{<label>="<value>",...}] <value>: metric names
 *     match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*
 *     (names starting "__" are reserved), label values are UTF-8 with '\',
 *     '"' and a line feed written "\\", "\"" and "\n";
 *   - values are Go ParseFloat numbers: "NaN", "+Inf", "-Inf" or a decimal;
 *   - all the lines of one family form one group;
 *   - a histogram <name> is the series <name>_bucket{le="<bound>"} (counts
 *     of observations <= the bound, cumulative, one with le="+Inf" equal
 *     to the count), <name>_sum and <name>_count; "le" is reserved there.
 * No timestamps are written (optional in the format; the scrape's time is
 * what Prometheus then uses). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/prom.h"
#include "util/util.h"

void drift_prom_init(drift_prom *p) { memset(p, 0, sizeof *p); }

void drift_prom_free(drift_prom *p) {
    buf_free(&p->out);
    buf_free(&p->names);
    memset(p, 0, sizeof *p);
}

char *drift_prom_steal(drift_prom *p) {
    char *s = p->failed ? NULL : buf_steal(&p->out);
    drift_prom_free(p);
    return s;
}

static int is_name_char(char c, int first, int colon) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return 1;
    if (colon && c == ':') return 1;
    return !first && c >= '0' && c <= '9';
}

static int valid_name(const char *s, int colon) {
    if (!s || !*s) return 0;
    for (size_t i = 0; s[i]; i++)
        if (!is_name_char(s[i], i == 0, colon)) return 0;
    return 1;
}

static const char *type_name(drift_prom_type t) {
    switch (t) {
    case DRIFT_PROM_COUNTER: return "counter";
    case DRIFT_PROM_GAUGE: return "gauge";
    case DRIFT_PROM_HISTOGRAM: return "histogram";
    case DRIFT_PROM_UNTYPED: return "untyped";
    }
    return NULL;
}

static drift_status nomem(drift_prom *p, drift_error *err) {
    p->failed = 1;
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory writing metrics");
}

/* s with the escapes of a HELP docstring (label = 0) or a label value
 * (label = 1), bad UTF-8 bytes as U+FFFD. */
static int put_escaped(util_buf *b, const char *s, int label) {
    char *clean = util_utf8_clean(s, strlen(s));
    if (!clean) return -1;
    int rc = 0;
    for (const char *c = clean; *c && !rc; c++) {
        if (*c == '\\') rc = buf_puts(b, "\\\\");
        else if (*c == '\n') rc = buf_puts(b, "\\n");
        else if (*c == '"' && label) rc = buf_puts(b, "\\\"");
        else rc = buf_append(b, c, 1);
    }
    free(clean);
    return rc;
}

/* The shortest decimal that reads back as v; the format's words for the
 * non-finite. */
static int put_value(util_buf *b, double v) {
    if (isnan(v)) return buf_puts(b, "NaN");
    if (isinf(v)) return buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    char tmp[40];
    if (v == floor(v) && fabs(v) < 9007199254740992.0) /* an integer (counts): its digits, not 1e+03 */
        return buf_printf(b, "%.0f", v);
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    return buf_puts(b, tmp);
}

drift_status drift_prom_family(drift_prom *p, const char *name, drift_prom_type type, const char *help,
                               drift_error *err) {
    const char *tn = type_name(type);
    if (!tn) return drift_error_set(err, DRIFT_ERR_INVALID, "metrics: unknown type %d", (int)type);
    if (!valid_name(name, 1) || strlen(name) >= sizeof p->family)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "metrics: \"%s\" is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*, under %zu bytes)",
                               name ? name : "", sizeof p->family);
    util_buf key = {0};
    if (buf_printf(&key, "\n%s\n", name)) return nomem(p, err);
    int seen = p->names.data && strstr(p->names.data, key.data);
    int rc = seen ? 0 : buf_puts(&p->names, key.data + (p->names.len ? 1 : 0));
    buf_free(&key);
    if (seen) return drift_error_set(err, DRIFT_ERR_INVALID, "metrics: family %s declared twice", name);
    if (rc) return nomem(p, err);
    if (help) {
        rc = buf_printf(&p->out, "# HELP %s ", name) || put_escaped(&p->out, help, 0) || buf_puts(&p->out, "\n");
        if (rc) return nomem(p, err);
    }
    if (buf_printf(&p->out, "# TYPE %s %s\n", name, tn)) return nomem(p, err);
    strcpy(p->family, name);
    p->type = type;
    return DRIFT_OK;
}

/* The labels checked: valid distinct names, none reserved. */
static drift_status check_labels(const drift_prom *p, const drift_prom_label *l, size_t n, drift_error *err) {
    for (size_t i = 0; i < n; i++) {
        const char *k = l[i].name;
        if (!valid_name(k, 0) || !strncmp(k, "__", 2))
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "metrics %s: \"%s\" is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __...)",
                                   p->family, k ? k : "");
        if (p->type == DRIFT_PROM_HISTOGRAM && !strcmp(k, "le"))
            return drift_error_set(err, DRIFT_ERR_INVALID, "metrics %s: label \"le\" is the histogram's own",
                                   p->family);
        if (!l[i].value) return drift_error_set(err, DRIFT_ERR_INVALID, "metrics %s: label %s has no value",
                                                p->family, k);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(l[j].name, k))
                return drift_error_set(err, DRIFT_ERR_INVALID, "metrics %s: label %s twice", p->family, k);
    }
    return DRIFT_OK;
}

/* name+suffix{labels[,le="..."]} value\n */
static int put_line(util_buf *b, const char *name, const char *suffix, const drift_prom_label *l, size_t n,
                    const char *le, double v) {
    if (buf_puts(b, name) || buf_puts(b, suffix)) return -1;
    if (n || le) {
        if (buf_puts(b, "{")) return -1;
        for (size_t i = 0; i < n; i++)
            if (buf_printf(b, "%s%s=\"", i ? "," : "", l[i].name) || put_escaped(b, l[i].value, 1) ||
                buf_puts(b, "\""))
                return -1;
        if (le && buf_printf(b, "%sle=\"%s\"", n ? "," : "", le)) return -1;
        if (buf_puts(b, "}")) return -1;
    }
    return buf_puts(b, " ") || put_value(b, v) || buf_puts(b, "\n");
}

drift_status drift_prom_sample(drift_prom *p, const drift_prom_label *labels, size_t n_labels, double value,
                               drift_error *err) {
    if (!p->family[0] || p->type == DRIFT_PROM_HISTOGRAM)
        return drift_error_set(err, DRIFT_ERR_INVALID, "metrics: a sample needs a counter, gauge or untyped family "
                                                       "first (now: %s)", p->family[0] ? p->family : "none");
    if (p->type == DRIFT_PROM_COUNTER && !(value >= 0))
        return drift_error_set(err, DRIFT_ERR_INVALID, "metrics %s: a counter's value %g is not >= 0", p->family,
                               value);
    drift_status rc = check_labels(p, labels, n_labels, err);
    if (rc) return rc;
    if (put_line(&p->out, p->family, "", labels, n_labels, NULL, value)) return nomem(p, err);
    return DRIFT_OK;
}

/* ---- histograms ---- */

drift_status drift_prom_hist_init(drift_prom_hist *h, const double *bounds, size_t n, drift_error *err) {
    memset(h, 0, sizeof *h);
    if (n < 1 || n > DRIFT_PROM_MAX_BUCKETS)
        return drift_error_set(err, DRIFT_ERR_INVALID, "histogram: %zu bounds (1..%d)", n, DRIFT_PROM_MAX_BUCKETS);
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(bounds[i]) || (i && !(bounds[i] > bounds[i - 1])))
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "histogram: bound %zu (%g) is not finite and above the one before", i, bounds[i]);
        h->bounds[i] = bounds[i];
    }
    h->n_bounds = n;
    return DRIFT_OK;
}

int drift_prom_hist_observe(drift_prom_hist *h, double x) {
    if (isnan(x)) return -1;
    size_t i = 0;
    while (i < h->n_bounds && x > h->bounds[i]) i++;
    h->counts[i]++;
    h->count++;
    h->sum += x;
    return 0;
}

static const double sdr_bounds[] = {0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0};

const double *drift_prom_sdr_bounds(size_t *n) {
    *n = sizeof sdr_bounds / sizeof sdr_bounds[0];
    return sdr_bounds;
}

drift_status drift_prom_histogram(drift_prom *p, const drift_prom_label *labels, size_t n_labels,
                                  const drift_prom_hist *h, drift_error *err) {
    if (!p->family[0] || p->type != DRIFT_PROM_HISTOGRAM)
        return drift_error_set(err, DRIFT_ERR_INVALID, "metrics: histogram series need a histogram family first "
                                                       "(now: %s)", p->family[0] ? p->family : "none");
    drift_status rc = check_labels(p, labels, n_labels, err);
    if (rc) return rc;
    uint64_t cum = 0;
    util_buf le = {0};
    int bad = 0;
    for (size_t i = 0; i <= h->n_bounds && !bad; i++) {
        cum += h->counts[i];
        le.len = 0;
        if (le.data) le.data[0] = '\0';
        bad = i < h->n_bounds ? put_value(&le, h->bounds[i]) : buf_puts(&le, "+Inf");
        bad = bad || put_line(&p->out, p->family, "_bucket", labels, n_labels, le.data, (double)cum);
    }
    buf_free(&le);
    if (bad || put_line(&p->out, p->family, "_sum", labels, n_labels, NULL, h->sum) ||
        put_line(&p->out, p->family, "_count", labels, n_labels, NULL, (double)h->count))
        return nomem(p, err);
    return DRIFT_OK;
}
