/* table.c - the flip table (configuration x workload) and its CSV form.
 *
 * The reader is a small RFC 4180 scanner: fields separated by ',', records by
 * '\n' or "\r\n", a field may be quoted with '"' and then holds commas,
 * newlines and doubled quotes. The header names the columns; the paper's nine
 * are required (in any order), ci_low / ci_high are optional, anything else
 * is an extra dimension kept as a string. Every bad field is reported as
 * "NAME:LINE: field X: what is wrong" (LINE is the record's first line).
 * Rows are kept in file order: the ANOVA and PRI results depend on nothing
 * else, but the order is what a user sees in messages.
 *
 * CSV injection (OWASP): a spreadsheet runs a cell that starts with '=',
 * '+', '-', '@', tab or CR as a formula, and the cells we write from
 * outside (experiment ids, dimension names and levels) may. The writer
 * prefixes such a cell with a single quote, unless it is a plain decimal
 * number (a formula it cannot be; the numbers we compute are written as
 * they are), and also a cell that already starts with a quote before one
 * of those characters; the reader drops a first quote (after trimming)
 * exactly when what follows is a cell the writer prefixes, so a table
 * survives the round trip unchanged. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"
#include "util/util.h"

drift_status drift_table_create(const char *const *extra_dims, size_t n_extra, int has_ci,
                                drift_table **out, drift_error *err) {
    *out = NULL;
    drift_table *t = calloc(1, sizeof *t);
    if (!t) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    t->n_dims = DRIFT_DIM_COUNT + n_extra;
    t->has_ci = has_ci;
    t->dim_names = calloc(t->n_dims, sizeof *t->dim_names);
    if (!t->dim_names) goto nomem;
    for (size_t i = 0; i < t->n_dims; i++) {
        const char *nm = i < DRIFT_DIM_COUNT ? drift_dim_names[i] : extra_dims[i - DRIFT_DIM_COUNT];
        if (!nm || !*nm) {
            drift_table_free(t);
            return drift_error_set(err, DRIFT_ERR_INVALID, "extra dimension %zu has no name",
                                   i - DRIFT_DIM_COUNT);
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(t->dim_names[j], nm)) {
                drift_table_free(t);
                return drift_error_set(err, DRIFT_ERR_INVALID, "dimension '%s' given twice", nm);
            }
        if (!(t->dim_names[i] = util_strdup(nm))) goto nomem;
    }
    *out = t;
    return DRIFT_OK;
nomem:
    drift_table_free(t);
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}

drift_status drift_table_append(drift_table *t, const char *experiment_id, const char *const *dims,
                                double flip_rate, long num_flips, long num_comparisons,
                                double ci_low, double ci_high, drift_error *err) {
    if (t->n_rows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 64;
        drift_table_row *r = realloc(t->rows, cap * sizeof *r);
        if (!r) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        t->rows = r;
        t->cap_rows = cap;
    }
    drift_table_row *row = &t->rows[t->n_rows];
    memset(row, 0, sizeof *row);
    row->experiment_id = util_strdup(experiment_id ? experiment_id : "");
    row->dims = calloc(t->n_dims, sizeof *row->dims);
    if (!row->experiment_id || !row->dims) goto nomem;
    for (size_t i = 0; i < t->n_dims; i++)
        if (!(row->dims[i] = util_strdup(dims[i] ? dims[i] : ""))) goto nomem;
    row->flip_rate = flip_rate;
    row->num_flips = num_flips;
    row->num_comparisons = num_comparisons;
    row->ci_low = t->has_ci ? ci_low : NAN;
    row->ci_high = t->has_ci ? ci_high : NAN;
    t->n_rows++;
    return DRIFT_OK;
nomem:
    if (row->dims)
        for (size_t i = 0; i < t->n_dims; i++) free(row->dims[i]);
    free(row->dims);
    free(row->experiment_id);
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}

void drift_table_free(drift_table *t) {
    if (!t) return;
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t i = 0; i < t->n_dims; i++) free(t->rows[r].dims[i]);
        free(t->rows[r].dims);
        free(t->rows[r].experiment_id);
    }
    free(t->rows);
    if (t->dim_names)
        for (size_t i = 0; i < t->n_dims; i++) free(t->dim_names[i]);
    free(t->dim_names);
    free(t);
}

int drift_table_dim_index(const drift_table *t, const char *name) {
    for (size_t i = 0; i < t->n_dims; i++)
        if (!strcmp(t->dim_names[i], name)) return (int)i;
    return -1;
}

static int cmp_strp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

drift_status drift_table_levels(const drift_table *t, size_t dim, const char ***levels,
                                size_t *n_levels, drift_error *err) {
    *levels = NULL;
    *n_levels = 0;
    if (dim >= t->n_dims) return drift_error_set(err, DRIFT_ERR_INVALID, "no dimension %zu", dim);
    const char **v = malloc((t->n_rows ? t->n_rows : 1) * sizeof *v);
    if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t r = 0; r < t->n_rows; r++) v[r] = t->rows[r].dims[dim];
    qsort(v, t->n_rows, sizeof *v, cmp_strp);
    size_t k = 0;
    for (size_t r = 0; r < t->n_rows; r++)
        if (k == 0 || strcmp(v[k - 1], v[r])) v[k++] = v[r];
    *levels = v;
    *n_levels = k;
    return DRIFT_OK;
}

char *drift_table_varying_formula(const drift_table *t, size_t *n_params) {
    util_buf f = {0};
    int terms = 0;
    *n_params = 1;
    for (size_t d = 0; d < DRIFT_DIM_COUNT; d++) {
        const char **lv = NULL;
        size_t nl = 0;
        drift_error e = {0};
        if (drift_table_levels(t, d, &lv, &nl, &e)) continue;
        free(lv);
        if (nl < 2) continue;
        buf_printf(&f, "%s C(%s)", terms ? " +" : "flip_rate ~", t->dim_names[d]);
        *n_params += nl - 1;
        terms++;
    }
    if (!terms) {
        buf_free(&f);
        return NULL;
    }
    return buf_steal(&f);
}

/* ---- CSV scanning ---- */

typedef struct csv_scan {
    const char *p, *end;
    size_t line;          /* current line number (1-based) */
    util_buf field;
} csv_scan;

/* Reads one field into s->field. Returns 1 if a field was read and more
 * follow in the record (','), 0 if it ended the record, -1 on a quoting
 * error. */
static int csv_field(csv_scan *s) {
    s->field.len = 0;
    if (s->field.data) s->field.data[0] = 0;
    if (buf_reserve(&s->field, 1) < 0) return -2;
    s->field.data[0] = 0;
    if (s->p < s->end && *s->p == '"') {
        s->p++;
        for (;;) {
            if (s->p >= s->end) return -1; /* unterminated quote */
            char c = *s->p++;
            if (c == '"') {
                if (s->p < s->end && *s->p == '"') {
                    s->p++;
                    if (buf_append(&s->field, "\"", 1) < 0) return -2;
                    continue;
                }
                break;
            }
            if (c == '\n') s->line++;
            if (buf_append(&s->field, &c, 1) < 0) return -2;
        }
        if (s->p >= s->end) return 0;
        if (*s->p == ',') { s->p++; return 1; }
        if (*s->p == '\r' && s->p + 1 < s->end && s->p[1] == '\n') { s->p += 2; s->line++; return 0; }
        if (*s->p == '\n') { s->p++; s->line++; return 0; }
        return -1; /* text after the closing quote */
    }
    const char *st = s->p;
    while (s->p < s->end && *s->p != ',' && *s->p != '\n') {
        if (*s->p == '"') return -1;
        s->p++;
    }
    size_t n = (size_t)(s->p - st);
    if (n && st[n - 1] == '\r') n--;
    if (buf_append(&s->field, st, n) < 0) return -2;
    if (s->p >= s->end) return 0;
    if (*s->p == ',') { s->p++; return 1; }
    s->p++;
    s->line++;
    return 0;
}

typedef struct csv_record {
    size_t n, cap;
    char **f;
} csv_record;

static void rec_clear(csv_record *r) {
    for (size_t i = 0; i < r->n; i++) free(r->f[i]);
    r->n = 0;
}

/* Reads one record. Returns 1 ok, 0 at end of input, -1 quote error, -2 nomem. */
static int csv_record_read(csv_scan *s, csv_record *r) {
    rec_clear(r);
    if (s->p >= s->end) return 0;
    for (;;) {
        int more = csv_field(s);
        if (more < 0) return more;
        if (r->n == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 16;
            char **f = realloc(r->f, cap * sizeof *f);
            if (!f) return -2;
            r->f = f;
            r->cap = cap;
        }
        if (!(r->f[r->n] = util_strndup(s->field.data, s->field.len))) return -2;
        r->n++;
        if (!more) return 1;
    }
}

static int is_blank_record(const csv_record *r) {
    if (r->n != 1) return 0;
    for (const char *c = r->f[0]; *c; c++)
        if (*c != ' ' && *c != '\t') return 0;
    return 1;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
    return s;
}

/* A character that makes a spreadsheet read the cell as a formula. */
static int formula_lead(char c) { return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r'; }

/* A plain decimal number: [+-]digits[.digits][e[+-]digits] (or .digits). */
static int plain_number(const char *s) {
    if (*s == '+' || *s == '-') s++;
    int digits = 0;
    while (*s >= '0' && *s <= '9') s++, digits++;
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') s++, digits++;
    }
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return !*s;
}

/* 1 when the writer prefixes cell s with a quote (see the file's comment). */
static int csv_needs_quote_prefix(const char *s) {
    if (s[0] == '\'') return formula_lead(s[1]);
    return formula_lead(s[0]) && !plain_number(s);
}

/* A read cell without the quote the writer put first: exactly when the
 * rest is a cell the writer prefixes. */
static char *csv_unprefix(char *s) { return s[0] == '\'' && csv_needs_quote_prefix(s + 1) ? s + 1 : s; }

static int parse_double_field(const char *s, double *out) {
    if (!*s) return -1;
    errno = 0;
    char *e;
    double v = strtod(s, &e);
    if (*e || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int parse_long_field(const char *s, long *out) {
    if (!*s) return -1;
    errno = 0;
    char *e;
    long v = strtol(s, &e, 10);
    if (*e == '.') { /* "28.0" as pandas writes integers from float columns */
        char *e2;
        double d = strtod(s, &e2);
        if (*e2 || d != floor(d) || fabs(d) > 1e15) return -1;
        v = (long)d;
        e = e2;
    }
    if (*e || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

enum { COL_ID, COL_RATE, COL_FLIPS, COL_N, COL_LO, COL_HI, COL_NSPECIAL };

drift_status drift_table_parse_csv(const char *text, size_t len, const char *name, drift_table **out,
                                   drift_error *err) {
    *out = NULL;
    if (!name) name = "<table>";
    csv_scan s = {text, text + len, 1, {0}};
    csv_record rec = {0};
    drift_table *t = NULL;
    int *colmap = NULL;   /* column -> dimension index, or -1 - special column */
    const char **dims = NULL;
    drift_status st = DRIFT_OK;

    /* skip a UTF-8 byte-order mark */
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) s.p += 3;
    int rc = csv_record_read(&s, &rec);
    if (rc == 0) { st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:1: empty file (no header)", name); goto done; }
    if (rc < 0) goto scan_error;
    size_t ncol = rec.n;
    colmap = malloc(ncol * sizeof *colmap);
    const char **extra = calloc(ncol, sizeof *extra);
    if (!colmap || !extra) { free(extra); goto nomem; }
    size_t n_extra = 0;
    int special[COL_NSPECIAL] = {-1, -1, -1, -1, -1, -1};
    int fixed[DRIFT_DIM_COUNT] = {-1, -1, -1, -1, -1};
    for (size_t c = 0; c < ncol; c++) {
        char *h = csv_unprefix(trim(rec.f[c]));
        int sp = -1;
        if (!strcmp(h, "experiment_id")) sp = COL_ID;
        else if (!strcmp(h, "flip_rate") || !strcmp(h, "flip_rate(percent)")) sp = COL_RATE;
        else if (!strcmp(h, "num_flips")) sp = COL_FLIPS;
        else if (!strcmp(h, "num_comparisons")) sp = COL_N;
        else if (!strcmp(h, "ci_low")) sp = COL_LO;
        else if (!strcmp(h, "ci_high")) sp = COL_HI;
        int fx = -1;
        for (int d = 0; d < DRIFT_DIM_COUNT; d++)
            if (!strcmp(h, drift_dim_names[d])) fx = d;
        if (!*h) {
            free(extra);
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:1: field %zu: empty column name", name, c + 1);
            goto done;
        }
        int dup = (sp >= 0 && special[sp] >= 0) || (fx >= 0 && fixed[fx] >= 0);
        for (size_t e = 0; e < n_extra && !dup; e++) dup = !strcmp(extra[e], h);
        if (dup) {
            free(extra);
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:1: field %s: column given twice", name, h);
            goto done;
        }
        if (sp >= 0) { special[sp] = (int)c; colmap[c] = -1 - sp; }
        else if (fx >= 0) { fixed[fx] = (int)c; colmap[c] = fx; }
        else { colmap[c] = DRIFT_DIM_COUNT + (int)n_extra; extra[n_extra++] = h; }
    }
    static const char *const special_names[] = {"experiment_id", "flip_rate", "num_flips", "num_comparisons"};
    for (int k = 0; k < 4; k++)
        if (special[k] < 0) {
            free(extra);
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:1: field %s: required column missing", name,
                                 special_names[k]);
            goto done;
        }
    for (int d = 0; d < DRIFT_DIM_COUNT; d++)
        if (fixed[d] < 0) {
            free(extra);
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:1: field %s: required column missing", name,
                                 drift_dim_names[d]);
            goto done;
        }
    if ((special[COL_LO] < 0) != (special[COL_HI] < 0)) {
        free(extra);
        st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:1: field %s: ci_low and ci_high come together", name,
                             special[COL_LO] < 0 ? "ci_high" : "ci_low");
        goto done;
    }
    st = drift_table_create(extra, n_extra, special[COL_LO] >= 0, &t, err);
    free(extra);
    if (st) goto done;
    dims = calloc(t->n_dims, sizeof *dims);
    if (!dims) goto nomem;

    for (;;) {
        size_t line = s.line;
        rc = csv_record_read(&s, &rec);
        if (rc == 0) break;
        if (rc < 0) goto scan_error;
        if (is_blank_record(&rec)) continue;
        if (rec.n != ncol) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field %zu: expected %zu fields, found %zu",
                                 name, line, rec.n < ncol ? rec.n + 1 : ncol + 1, ncol, rec.n);
            goto done;
        }
        double rate = 0, lo = NAN, hi = NAN;
        long flips = 0, ncmp = 0;
        const char *id = "";
        for (size_t c = 0; c < ncol; c++) {
            char *v = csv_unprefix(trim(rec.f[c]));
            int m = colmap[c];
            if (m >= 0) {
                /* an extra dimension may be empty: the row has no value for
                 * it (a CPU run's compute_capability, as `table` writes it) */
                if (!*v && m < DRIFT_DIM_COUNT) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field %s: empty", name, line,
                                         t->dim_names[m]);
                    goto done;
                }
                dims[m] = v;
                continue;
            }
            switch (-1 - m) {
            case COL_ID: id = v; break;
            case COL_RATE:
                if (parse_double_field(v, &rate) || rate < 0 || rate > 100) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE,
                                         "%s:%zu: field flip_rate: '%.40s' is not a percentage in [0,100]",
                                         name, line, v);
                    goto done;
                }
                break;
            case COL_FLIPS:
                if (parse_long_field(v, &flips) || flips < 0) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE,
                                         "%s:%zu: field num_flips: '%.40s' is not a count", name, line, v);
                    goto done;
                }
                break;
            case COL_N:
                if (parse_long_field(v, &ncmp) || ncmp < 0) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE,
                                         "%s:%zu: field num_comparisons: '%.40s' is not a count", name,
                                         line, v);
                    goto done;
                }
                break;
            case COL_LO:
            case COL_HI: {
                double x;
                const char *fn = -1 - m == COL_LO ? "ci_low" : "ci_high";
                if (!*v) { x = NAN; }
                else if (parse_double_field(v, &x) || x < 0 || x > 100) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE,
                                         "%s:%zu: field %s: '%.40s' is not a percentage in [0,100]", name,
                                         line, fn, v);
                    goto done;
                }
                if (-1 - m == COL_LO) lo = x; else hi = x;
                break;
            }
            }
        }
        if (flips > ncmp) {
            st = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s:%zu: field num_flips: %ld flips out of %ld comparisons", name, line,
                                 flips, ncmp);
            goto done;
        }
        if (!isnan(lo) && !isnan(hi) && lo > hi) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field ci_low: %g above ci_high %g", name,
                                 line, lo, hi);
            goto done;
        }
        st = drift_table_append(t, id, dims, rate, flips, ncmp, lo, hi, err);
        if (st) goto done;
    }
    if (t->n_rows == 0) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: no data rows", name, s.line);
        goto done;
    }
    *out = t;
    t = NULL;
    goto done;
scan_error:
    if (rc == -2) goto nomem;
    st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field %zu: bad quoting", name, s.line, rec.n + 1);
    goto done;
nomem:
    st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
done:
    rec_clear(&rec);
    free(rec.f);
    buf_free(&s.field);
    free(colmap);
    free(dims);
    drift_table_free(t);
    return st;
}

drift_status drift_table_read_csv(const char *path, drift_table **out, drift_error *err) {
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    drift_status st = util_read_file(path, &text, &len, err);
    if (st) return st;
    st = drift_table_parse_csv(text, len, path, out, err);
    free(text);
    return st;
}

/* Appends a CSV field, quoted when it holds a comma, quote or newline,
 * with a quote first when a spreadsheet would take it for a formula. */
static int csv_put(util_buf *b, const char *s) {
    const char *lead = csv_needs_quote_prefix(s) ? "'" : "";
    if (!strpbrk(s, ",\"\r\n")) return buf_puts(b, lead) || buf_puts(b, s) ? -1 : 0;
    if (buf_puts(b, "\"") < 0 || buf_puts(b, lead) < 0) return -1;
    for (const char *c = s; *c; c++) {
        if (*c == '"' && buf_puts(b, "\"") < 0) return -1;
        if (buf_append(b, c, 1) < 0) return -1;
    }
    return buf_puts(b, "\"");
}

drift_status drift_table_format_csv(const drift_table *t, char **out, drift_error *err) {
    util_buf b = {0};
    int bad = 0;
    *out = NULL;
    bad |= buf_puts(&b, "experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,"
                        "num_comparisons");
    if (t->has_ci) bad |= buf_puts(&b, ",ci_low,ci_high");
    for (size_t i = DRIFT_DIM_COUNT; i < t->n_dims; i++) {
        bad |= buf_puts(&b, ",");
        bad |= csv_put(&b, t->dim_names[i]);
    }
    bad |= buf_puts(&b, "\n");
    for (size_t r = 0; r < t->n_rows && !bad; r++) {
        const drift_table_row *row = &t->rows[r];
        bad |= csv_put(&b, row->experiment_id);
        for (size_t i = 0; i < DRIFT_DIM_COUNT; i++) {
            bad |= buf_puts(&b, ",");
            bad |= csv_put(&b, row->dims[i]);
        }
        bad |= buf_printf(&b, ",%.17g,%ld,%ld", row->flip_rate, row->num_flips, row->num_comparisons);
        if (t->has_ci) {
            if (isnan(row->ci_low)) bad |= buf_puts(&b, ",");
            else bad |= buf_printf(&b, ",%.17g", row->ci_low);
            if (isnan(row->ci_high)) bad |= buf_puts(&b, ",");
            else bad |= buf_printf(&b, ",%.17g", row->ci_high);
        }
        for (size_t i = DRIFT_DIM_COUNT; i < t->n_dims; i++) {
            bad |= buf_puts(&b, ",");
            bad |= csv_put(&b, row->dims[i]);
        }
        bad |= buf_puts(&b, "\n");
    }
    if (bad) {
        buf_free(&b);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    *out = buf_steal(&b);
    return DRIFT_OK;
}

drift_status drift_table_write_csv(const drift_table *t, const char *path, drift_error *err) {
    char *text;
    drift_status st = drift_table_format_csv(t, &text, err);
    if (st) return st;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(text);
        return drift_error_set(err, DRIFT_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    }
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    free(text);
    if (bad) return drift_error_set(err, DRIFT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return DRIFT_OK;
}
