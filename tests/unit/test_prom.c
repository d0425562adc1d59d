/* test_prom.c - the Prometheus text writer (prom.h, prom_text.c) against
 * a parser of the 0.0.4 text format written here from the format's rules
 * (promtool is not at hand): every line of the writer's output must parse,
 * escapes must read back to the original text, histograms must be
 * cumulative with +Inf equal to _count, families grouped, TYPE before the
 * samples and once. The parser is shown to refuse hand-written breaches of
 * each rule, so its acceptance means something; the writer is shown to
 * refuse what it must not write. The alarms' families (alarm.h) parse
 * too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/alarm.h"
#include "driftbench/prom.h"

/* ---- the parser ---- */

#define MAXF 32
#define MAXS 256

typedef struct psample {
    char name[128];
    char labels[8][2][256]; /* name, unescaped value */
    int n_labels;
    double value;
} psample;

typedef struct pfamily {
    char name[128];
    char type[16];
    char help[512];
    int closed; /* another family's line came after this one's */
} pfamily;

typedef struct parsed {
    pfamily f[MAXF];
    int nf;
    psample s[MAXS];
    int ns;
    char why[256];
} parsed;

static int name_ok(const char *s, size_t n, int colon) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
                 (i && c >= '0' && c <= '9');
        if (!ok) return 0;
    }
    return 1;
}

static int bad(parsed *p, const char *why, int line) {
    snprintf(p->why, sizeof p->why, "line %d: %s", line, why);
    return -1;
}

static pfamily *find(parsed *p, const char *name) {
    for (int i = 0; i < p->nf; i++)
        if (!strcmp(p->f[i].name, name)) return &p->f[i];
    return NULL;
}

/* The family a sample name belongs to: itself, or a histogram's base. */
static pfamily *family_of(parsed *p, const char *name) {
    static const char *suf[] = {"_bucket", "_sum", "_count"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(name), m = strlen(suf[k]);
        if (n > m && !strcmp(name + n - m, suf[k])) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(n - m), name);
            pfamily *f = find(p, base);
            if (f && !strcmp(f->type, "histogram")) return f;
        }
    }
    pfamily *f = find(p, name);
    return f && strcmp(f->type, "histogram") ? f : NULL;
}

static int value_ok(const char *s, double *v) {
    if (!strcmp(s, "NaN")) return *v = NAN, 1;
    if (!strcmp(s, "+Inf")) return *v = INFINITY, 1;
    if (!strcmp(s, "-Inf")) return *v = -INFINITY, 1;
    char *end;
    *v = strtod(s, &end);
    return *s && !*end && !isinf(*v) && !isnan(*v);
}

/* Unescapes a docstring (quote = 0) or label value (quote = 1); -1 on a
 * bad escape or an unescaped quote or line feed. */
static int unescape(const char *s, size_t n, int quote, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\') {
            if (++i >= n) return -1;
            c = s[i] == 'n' ? '\n' : s[i] == '\\' ? '\\' : (quote && s[i] == '"') ? '"' : 0;
            if (!c) return -1;
        } else if ((quote && c == '"') || c == '\n') {
            return -1;
        }
        if (o + 1 >= cap) return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

static int parse_sample(parsed *p, const char *l, int line, pfamily **last) {
    if (p->ns >= MAXS) return bad(p, "too many samples", line);
    psample *s = &p->s[p->ns];
    memset(s, 0, sizeof *s);
    size_t n = 0;
    while (l[n] && l[n] != '{' && l[n] != ' ') n++;
    if (!name_ok(l, n, 1) || n >= sizeof s->name) return bad(p, "bad metric name", line);
    memcpy(s->name, l, n);
    const char *c = l + n;
    if (*c == '{') {
        c++;
        while (*c != '}') {
            size_t k = 0;
            while (c[k] && c[k] != '=') k++;
            if (!name_ok(c, k, 0) || c[k] != '=' || c[k + 1] != '"') return bad(p, "bad label name", line);
            if (k >= 2 && c[0] == '_' && c[1] == '_') return bad(p, "reserved label name", line);
            if (s->n_labels >= 8) return bad(p, "too many labels", line);
            snprintf(s->labels[s->n_labels][0], 256, "%.*s", (int)k, c);
            for (int j = 0; j < s->n_labels; j++)
                if (!strcmp(s->labels[j][0], s->labels[s->n_labels][0])) return bad(p, "label twice", line);
            c += k + 2;
            size_t v = 0;
            while (c[v] && c[v] != '"') v += c[v] == '\\' && c[v + 1] ? 2 : 1;
            if (c[v] != '"') return bad(p, "unterminated label value", line);
            if (unescape(c, v, 1, s->labels[s->n_labels][1], 256)) return bad(p, "bad escape in label value", line);
            s->n_labels++;
            c += v + 1;
            if (*c == ',') c++;
            else if (*c != '}') return bad(p, "expected , or }", line);
        }
        c++;
    }
    if (*c != ' ') return bad(p, "no space before the value", line);
    c++;
    char val[64];
    size_t vn = 0;
    while (c[vn] && c[vn] != ' ') vn++;
    if (vn >= sizeof val) return bad(p, "value too long", line);
    snprintf(val, sizeof val, "%.*s", (int)vn, c);
    if (!value_ok(val, &s->value)) return bad(p, "bad value", line);
    if (c[vn] == ' ') { /* a timestamp: an integer */
        char *end;
        strtoll(c + vn + 1, &end, 10);
        if (end == c + vn + 1 || *end) return bad(p, "bad timestamp", line);
    }
    pfamily *f = family_of(p, s->name);
    if (!f) return bad(p, "sample before its TYPE line", line);
    if (f->closed) return bad(p, "family not in one group", line);
    if (*last && *last != f) (*last)->closed = 1;
    *last = f;
    if (!strcmp(f->type, "counter") && !(s->value >= 0)) return bad(p, "negative counter", line);
    int le = 0;
    for (int j = 0; j < s->n_labels; j++) le += !strcmp(s->labels[j][0], "le");
    int is_bucket = strlen(s->name) > 7 && !strcmp(s->name + strlen(s->name) - 7, "_bucket");
    if (!strcmp(f->type, "histogram") && le != (is_bucket ? 1 : 0)) return bad(p, "le label misplaced", line);
    p->ns++;
    return 0;
}

/* Label set of a sample without "le", as one string. */
static void series_key(const psample *s, char *out, size_t cap) {
    out[0] = '\0';
    for (int j = 0; j < s->n_labels; j++)
        if (strcmp(s->labels[j][0], "le"))
            snprintf(out + strlen(out), cap - strlen(out), "%s=%s;", s->labels[j][0], s->labels[j][1]);
}

static const char *label(const psample *s, const char *k) {
    for (int j = 0; j < s->n_labels; j++)
        if (!strcmp(s->labels[j][0], k)) return s->labels[j][1];
    return NULL;
}

/* Histogram series: increasing le, cumulative counts, +Inf last = _count. */
static int check_histograms(parsed *p) {
    for (int i = 0; i < p->nf; i++) {
        if (strcmp(p->f[i].type, "histogram")) continue;
        char bucket[160], count[160];
        snprintf(bucket, sizeof bucket, "%s_bucket", p->f[i].name);
        snprintf(count, sizeof count, "%s_count", p->f[i].name);
        for (int a = 0; a < p->ns; a++) {
            if (strcmp(p->s[a].name, count)) continue;
            char key[1024], k2[1024];
            series_key(&p->s[a], key, sizeof key);
            double prev_le = -INFINITY, prev_v = 0, inf_v = NAN;
            int nb = 0;
            for (int b = 0; b < p->ns; b++) {
                if (strcmp(p->s[b].name, bucket)) continue;
                series_key(&p->s[b], k2, sizeof k2);
                if (strcmp(key, k2)) continue;
                double le;
                if (!value_ok(label(&p->s[b], "le"), &le) || !(le > prev_le))
                    return bad(p, "buckets' le not increasing", 0);
                if (p->s[b].value < prev_v) return bad(p, "buckets not cumulative", 0);
                prev_le = le;
                prev_v = p->s[b].value;
                if (isinf(le)) inf_v = p->s[b].value;
                nb++;
            }
            if (!nb || !isinf(prev_le)) return bad(p, "no +Inf bucket", 0);
            if (inf_v != p->s[a].value) return bad(p, "+Inf bucket differs from _count", 0);
        }
    }
    return 0;
}

static int parse(const char *text, parsed *p) {
    memset(p, 0, sizeof *p);
    size_t len = strlen(text);
    if (len && text[len - 1] != '\n') return bad(p, "the last line has no line feed", 0);
    pfamily *last = NULL;
    int line = 0;
    for (const char *l = text; *l; line++) {
        const char *e = strchr(l, '\n');
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)(e - l), l);
        l = e + 1;
        if (!buf[0]) continue;
        if (!strncmp(buf, "# HELP ", 7) || !strncmp(buf, "# TYPE ", 7)) {
            const char *name = buf + 7, *sp = strchr(name, ' ');
            if (!sp || !name_ok(name, (size_t)(sp - name), 1)) return bad(p, "bad name in a comment line", line);
            char nm[128];
            snprintf(nm, sizeof nm, "%.*s", (int)(sp - name), name);
            pfamily *f = find(p, nm);
            if (!f) {
                if (p->nf >= MAXF) return bad(p, "too many families", line);
                f = &p->f[p->nf++];
                strcpy(f->name, nm);
            }
            if (f->closed) return bad(p, "family not in one group", line);
            if (last && last != f) last->closed = 1;
            last = f;
            if (buf[2] == 'H') {
                if (f->help[0]) return bad(p, "HELP twice", line);
                if (unescape(sp + 1, strlen(sp + 1), 0, f->help, sizeof f->help)) return bad(p, "bad HELP", line);
            } else {
                static const char *types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
                int ok = 0;
                for (int k = 0; k < 5; k++) ok |= !strcmp(sp + 1, types[k]);
                if (!ok) return bad(p, "unknown type", line);
                if (f->type[0]) return bad(p, "TYPE twice", line);
                for (int k = 0; k < p->ns; k++)
                    if (family_of(p, p->s[k].name) == f) return bad(p, "TYPE after a sample", line);
                strcpy(f->type, sp + 1);
            }
            continue;
        }
        if (buf[0] == '#') continue;
        if (parse_sample(p, buf, line, &last)) return -1;
    }
    return check_histograms(p);
}

/* ---- tests ---- */

static void test_parser_refuses(void **state) {
    (void)state;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"# TYPE a counter\na 1", "last line"},
        {"a 1\n", "before its TYPE"},
        {"# TYPE a counter\n# TYPE a counter\na 1\n", "TYPE twice"},
        {"# TYPE a counter\na -1\n", "negative counter"},
        {"# TYPE a gauge\na{x=\"q\"q\"} 1\n", "expected , or }"},
        {"# TYPE a gauge\na{x=\"\\t\"} 1\n", "bad escape"},
        {"# TYPE a gauge\na{__x=\"1\"} 1\n", "reserved"},
        {"# TYPE a gauge\na{1x=\"1\"} 1\n", "bad label name"},
        {"# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n", "label twice"},
        {"# TYPE a gauge\na one\n", "bad value"},
        {"# TYPE a-b gauge\n", "bad name"},
        {"# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na 2\n", "one group"},
        {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"0.5\"} 2\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n"
         "h_count 2\n",
         "le not increasing"},
        {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", "cumulative"},
        {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n", "no +Inf"},
        {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 2\n", "differs"},
        {"# TYPE h histogram\nh_sum{le=\"1\"} 1\n", "le label misplaced"},
        {"# TYPE a gauge\na 1\n# TYPE a gauge\n", "TYPE twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parsed *p = malloc(sizeof *p);
        assert_non_null(p);
        if (parse(cases[i].text, p) == 0) fail_msg("case %zu parsed: %s", i, cases[i].text);
        if (!strstr(p->why, cases[i].why)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, p->why, cases[i].why);
        free(p);
    }
    parsed *p = malloc(sizeof *p);
    assert_int_equal(parse("# HELP a x\\\\y\\nz\n# TYPE a gauge\na{b=\"1\",} 1 1700000000000\n", p), 0);
    assert_string_equal(p->f[0].help, "x\\y\nz");
    free(p);
}

static void test_write_parse(void **state) {
    (void)state;
    drift_prom w;
    drift_error err = {0};
    drift_prom_init(&w);
    assert_int_equal(drift_prom_family(&w, "driftbench_mirrored_total", DRIFT_PROM_COUNTER,
                                       "Requests mirrored to the candidate.\nA second line, a \\ and a \"quote\".",
                                       &err),
                     DRIFT_OK);
    assert_int_equal(drift_prom_sample(&w, NULL, 0, 1027, &err), DRIFT_OK);
    const char *nasty = "a \"quoted\" \\ back\nslash \xff bad";
    drift_prom_label l2[2] = {{"class", nasty}, {"stack", "candidate"}};
    assert_int_equal(drift_prom_family(&w, "driftbench:ratio", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_OK);
    assert_int_equal(drift_prom_sample(&w, l2, 2, 0.1, &err), DRIFT_OK);
    drift_prom_label l1 = {"k", "v"};
    assert_int_equal(drift_prom_sample(&w, &l1, 1, NAN, &err), DRIFT_OK);
    l1.value = "w";
    assert_int_equal(drift_prom_sample(&w, &l1, 1, INFINITY, &err), DRIFT_OK);
    l1.value = "x";
    assert_int_equal(drift_prom_sample(&w, &l1, 1, -INFINITY, &err), DRIFT_OK);
    l1.value = "y";
    assert_int_equal(drift_prom_sample(&w, &l1, 1, 5e-324, &err), DRIFT_OK);
    l1.value = "z";
    assert_int_equal(drift_prom_sample(&w, &l1, 1, -1.7976931348623157e308, &err), DRIFT_OK);
    assert_int_equal(drift_prom_family(&w, "driftbench_sdr", DRIFT_PROM_HISTOGRAM, "SDR of compared pairs.", &err),
                     DRIFT_OK);
    size_t nb;
    const double *bounds = drift_prom_sdr_bounds(&nb);
    drift_prom_hist h;
    assert_int_equal(drift_prom_hist_init(&h, bounds, nb, &err), DRIFT_OK);
    double obs[] = {0.0, 0.01, 0.011, 0.3, 0.31, 1.0, 1.5, -0.2};
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++) assert_int_equal(drift_prom_hist_observe(&h, obs[i]), 0);
    assert_int_equal(drift_prom_hist_observe(&h, NAN), -1);
    drift_prom_label cl = {"class", "chat"};
    assert_int_equal(drift_prom_histogram(&w, &cl, 1, &h, &err), DRIFT_OK);
    drift_prom_hist empty;
    assert_int_equal(drift_prom_hist_init(&empty, bounds, nb, &err), DRIFT_OK);
    cl.value = "json";
    assert_int_equal(drift_prom_histogram(&w, &cl, 1, &empty, &err), DRIFT_OK);
    char *text = drift_prom_steal(&w);
    assert_non_null(text);
    parsed *p = malloc(sizeof *p);
    assert_non_null(p);
    if (parse(text, p)) fail_msg("%s\n---\n%s", p->why, text);
    assert_int_equal(p->nf, 3);
    assert_string_equal(p->f[0].help, "Requests mirrored to the candidate.\nA second line, a \\ and a \"quote\".");
    assert_string_equal(p->f[2].type, "histogram");
    /* the label value reads back, bad byte as U+FFFD */
    assert_string_equal(p->s[1].labels[0][1], "a \"quoted\" \\ back\nslash \xef\xbf\xbd bad");
    assert_string_equal(p->s[1].labels[1][1], "candidate");
    assert_true(p->s[1].value == 0.1);
    assert_true(isnan(p->s[2].value) && isinf(p->s[3].value) && p->s[4].value < 0 && isinf(p->s[4].value));
    assert_true(p->s[5].value == 5e-324 && p->s[6].value == -1.7976931348623157e308);
    assert_non_null(strstr(text, "driftbench:ratio{class=\"a \\\"quoted\\\" \\\\ back\\nslash \xef\xbf\xbd bad\","
                                 "stack=\"candidate\"} 0.1\n"));
    /* the histogram: le inclusive, cumulative */
    assert_non_null(strstr(text, "driftbench_sdr_bucket{class=\"chat\",le=\"0.01\"} 3\n"));
    assert_non_null(strstr(text, "driftbench_sdr_bucket{class=\"chat\",le=\"0.3\"} 5\n"));
    assert_non_null(strstr(text, "driftbench_sdr_bucket{class=\"chat\",le=\"1\"} 7\n"));
    assert_non_null(strstr(text, "driftbench_sdr_bucket{class=\"chat\",le=\"+Inf\"} 8\n"));
    assert_non_null(strstr(text, "driftbench_sdr_count{class=\"chat\"} 8\n"));
    assert_non_null(strstr(text, "driftbench_sdr_sum{class=\"chat\"} 2.931\n"));
    assert_non_null(strstr(text, "driftbench_sdr_count{class=\"json\"} 0\n"));
    assert_non_null(strstr(text, "driftbench_mirrored_total 1027\n"));
    free(p);
    free(text);
}

static void test_writer_refuses(void **state) {
    (void)state;
    drift_prom w;
    drift_error err = {0};
    drift_prom_init(&w);
    assert_int_equal(drift_prom_sample(&w, NULL, 0, 1, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_family(&w, "1abc", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_family(&w, "a-b", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_family(&w, "", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_family(&w, "c_total", DRIFT_PROM_COUNTER, "c", &err), DRIFT_OK);
    assert_int_equal(drift_prom_sample(&w, NULL, 0, -1, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_sample(&w, NULL, 0, NAN, &err), DRIFT_ERR_INVALID);
    drift_prom_label l[2] = {{"__name", "x"}, {"a", "y"}};
    assert_int_equal(drift_prom_sample(&w, l, 1, 1, &err), DRIFT_ERR_INVALID);
    l[0].name = "a";
    assert_int_equal(drift_prom_sample(&w, l, 2, 1, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "twice"));
    l[0].name = "a:b";
    assert_int_equal(drift_prom_sample(&w, l, 1, 1, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_family(&w, "g", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_OK);
    assert_int_equal(drift_prom_family(&w, "c_total", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "declared twice"));
    assert_int_equal(drift_prom_family(&w, "c_tota", DRIFT_PROM_GAUGE, NULL, &err), DRIFT_OK);
    drift_prom_hist h;
    double b1[] = {1, 1}, b2[] = {0.5, INFINITY}, b3[] = {0.5, 1};
    assert_int_equal(drift_prom_hist_init(&h, b1, 2, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_hist_init(&h, b2, 2, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_hist_init(&h, b3, 0, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_hist_init(&h, b3, 2, &err), DRIFT_OK);
    assert_int_equal(drift_prom_histogram(&w, NULL, 0, &h, &err), DRIFT_ERR_INVALID); /* a gauge family */
    assert_int_equal(drift_prom_family(&w, "h", DRIFT_PROM_HISTOGRAM, NULL, &err), DRIFT_OK);
    assert_int_equal(drift_prom_sample(&w, NULL, 0, 1, &err), DRIFT_ERR_INVALID);
    drift_prom_label le = {"le", "1"};
    assert_int_equal(drift_prom_histogram(&w, &le, 1, &h, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_prom_histogram(&w, NULL, 0, &h, &err), DRIFT_OK);
    char *text = drift_prom_steal(&w);
    parsed *p = malloc(sizeof *p);
    if (parse(text, p)) fail_msg("%s\n---\n%s", p->why, text);
    free(p);
    free(text);
}

static void test_alarm_families(void **state) {
    (void)state;
    drift_alarm a[2];
    drift_error err = {0};
    assert_int_equal(drift_alarm_init(&a[0], "exact", 0.05, 0.05, &err), DRIFT_OK);
    assert_int_equal(drift_alarm_init(&a[1], "tool\"call", 0.02, 0.05, &err), DRIFT_OK);
    drift_alarm_add_counts(&a[0], 1000, 100);
    drift_alarm_add_counts(&a[1], 1000, 3);
    assert_int_equal(a[0].state, DRIFT_ALARM_FIRING);
    assert_int_equal(a[1].state, DRIFT_ALARM_CLEAR);
    drift_prom w;
    drift_prom_init(&w);
    assert_int_equal(drift_alarm_write_prom(a, 2, &w, &err), DRIFT_OK);
    char *text = drift_prom_steal(&w);
    parsed *p = malloc(sizeof *p);
    if (parse(text, p)) fail_msg("%s\n---\n%s", p->why, text);
    assert_int_equal(p->nf, 7);
    assert_int_equal(p->ns, 14);
    assert_non_null(strstr(text, "driftbench_alarm_firing{class=\"exact\"} 1\n"));
    assert_non_null(strstr(text, "driftbench_alarm_clear{class=\"tool\\\"call\"} 1\n"));
    assert_non_null(strstr(text, "driftbench_compared_total{class=\"exact\"} 1000\n"));
    double lo, hi;
    drift_alarm_bounds(&a[0], &lo, &hi);
    for (int i = 0; i < p->ns; i++)
        if (!strcmp(p->s[i].name, "driftbench_flip_rate_lower") && !strcmp(p->s[i].labels[0][1], "exact"))
            assert_true(p->s[i].value == lo && lo > 0.05);
    free(p);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_refuses),
        cmocka_unit_test(test_write_parse),
        cmocka_unit_test(test_writer_refuses),
        cmocka_unit_test(test_alarm_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
