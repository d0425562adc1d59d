/* pri_desc.c - the caller's numeric descriptors of configurations
 * (drift_pri_descriptors, analysis.h): what each configuration is (bits of
 * mantissa and exponent, block size, accumulator width, lanes, split factor,
 * fusion ...), so that the PRI can predict a level it never saw from what
 * that level is. A dense table: one row per configuration (experiment_id),
 * one column per descriptor name, NAN = missing; built by name/value pairs
 * (the lab: from each configuration's profile) or read from CSV (the CLI).
 * pri_features.c appends its columns to the feature vector. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/pri_internal.h"
#include "util/util.h"

static drift_status nomem(drift_error *err) { return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); }

drift_status drift_pri_descriptors_create(drift_pri_descriptors **out, drift_error *err) {
    *out = calloc(1, sizeof **out);
    return *out ? DRIFT_OK : nomem(err);
}

void drift_pri_descriptors_free(drift_pri_descriptors *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_names; i++) free(d->names[i]);
    for (size_t i = 0; i < d->n_configs; i++) free(d->configs[i]);
    free(d->names);
    free(d->configs);
    free(d->values);
    free(d);
}

long drift_pri_descriptors_find(const drift_pri_descriptors *d, const char *config) {
    if (!d || !config) return -1;
    for (size_t i = 0; i < d->n_configs; i++)
        if (!strcmp(d->configs[i], config)) return (long)i;
    return -1;
}

static long name_index(const drift_pri_descriptors *d, const char *name) {
    for (size_t i = 0; i < d->n_names; i++)
        if (!strcmp(d->names[i], name)) return (long)i;
    return -1;
}

/* a new column, NAN for every configuration already there; the rows keep
 * their capacity cap_configs */
static drift_status add_name(drift_pri_descriptors *d, const char *name, drift_error *err) {
    size_t p = d->n_names + 1, cap = d->cap_configs;
    double *v = malloc((cap * p + 1) * sizeof *v);
    char **nn = realloc(d->names, p * sizeof *nn);
    if (nn) d->names = nn;
    if (!v || !nn) { free(v); return nomem(err); }
    if (!(nn[p - 1] = util_strdup(name))) { free(v); return nomem(err); }
    for (size_t r = 0; r < d->n_configs; r++) {
        for (size_t c = 0; c + 1 < p; c++) v[r * p + c] = d->values[r * (p - 1) + c];
        v[r * p + p - 1] = NAN;
    }
    free(d->values);
    d->values = v;
    d->n_names = p;
    return DRIFT_OK;
}

/* a new row, NAN in every column */
static drift_status add_config(drift_pri_descriptors *d, const char *config, drift_error *err) {
    if (d->n_configs == d->cap_configs) {
        size_t cap = d->cap_configs ? 2 * d->cap_configs : 16;
        double *v = realloc(d->values, (cap * d->n_names + 1) * sizeof *v);
        if (!v) return nomem(err);
        d->values = v;
        char **c = realloc(d->configs, cap * sizeof *c);
        if (!c) return nomem(err);
        d->configs = c;
        d->cap_configs = cap;
    }
    if (!(d->configs[d->n_configs] = util_strdup(config))) return nomem(err);
    for (size_t c = 0; c < d->n_names; c++) d->values[d->n_configs * d->n_names + c] = NAN;
    d->n_configs++;
    return DRIFT_OK;
}

static int bad_name(const char *s) {
    if (!s || !*s) return 1;
    for (; *s; s++)
        if (*s == ',' || *s == '"' || *s == '\n' || *s == '\r') return 1;
    return 0;
}

drift_status drift_pri_descriptors_set(drift_pri_descriptors *d, const char *config, const char *name, double value,
                                       drift_error *err) {
    if (!d || !config || !*config) return drift_error_set(err, DRIFT_ERR_INVALID, "descriptor: no configuration");
    if (bad_name(name))
        return drift_error_set(err, DRIFT_ERR_INVALID, "descriptor name '%s': empty or holds ',', '\"' or a newline",
                               name ? name : "(null)");
    if (isinf(value))
        return drift_error_set(err, DRIFT_ERR_INVALID, "descriptor %s of %s: infinite value", name, config);
    drift_status st;
    long c = name_index(d, name);
    if (c < 0) {
        if ((st = add_name(d, name, err))) return st;
        c = (long)d->n_names - 1;
    }
    long r = drift_pri_descriptors_find(d, config);
    if (r < 0) {
        if ((st = add_config(d, config, err))) return st;
        r = (long)d->n_configs - 1;
    }
    d->values[(size_t)r * d->n_names + (size_t)c] = value;
    return DRIFT_OK;
}

drift_status drift_pri_descriptors_set_all(drift_pri_descriptors *d, const char *config, const char *const *names,
                                           const double *values, size_t n, drift_error *err) {
    for (size_t i = 0; i < n; i++) {
        drift_status st = drift_pri_descriptors_set(d, config, names[i], values[i], err);
        if (st) return st;
    }
    return DRIFT_OK;
}

/* ------------------------------------------------------------------ CSV */

/* Next field of line s (RFC 4180 quotes, "" for a quote); *s moves past
 * the comma; NULL at the end of the line. The field is written in place. */
static char *next_field(char **s, int *more) {
    char *p = *s, *out = p, *start = p;
    if (*p == '"') {
        p++;
        for (;;) {
            if (!*p) break;
            if (*p == '"' && p[1] == '"') { *out++ = '"'; p += 2; continue; }
            if (*p == '"') { p++; break; }
            *out++ = *p++;
        }
        while (*p && *p != ',') p++; /* anything after the closing quote is ignored */
    } else {
        while (*p && *p != ',') *out++ = *p++;
    }
    *more = *p == ',';
    if (*p) p++;
    *out = 0;
    *s = p;
    return start;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    return s;
}

drift_status drift_pri_descriptors_read_csv(const char *path, drift_pri_descriptors **out, drift_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    drift_status st = util_read_file(path, &text, &len, err);
    if (st) return st;
    drift_pri_descriptors *d = NULL;
    char **hdr = NULL;
    size_t nh = 0;
    if ((st = drift_pri_descriptors_create(&d, err))) goto done;
    char *save = NULL;
    int lineno = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        size_t ll = strlen(line);
        if (ll && line[ll - 1] == '\r') line[--ll] = 0;
        if (!*trim(line)) continue;
        int more = 1;
        char *s = line;
        if (!hdr) {
            while (more) {
                char *f = trim(next_field(&s, &more));
                char **h = realloc(hdr, (nh + 1) * sizeof *h);
                if (!h) { st = nomem(err); goto done; }
                hdr = h;
                hdr[nh++] = f;
            }
            if (nh < 2 || strcmp(hdr[0], "experiment_id")) {
                st = drift_error_set(err, DRIFT_ERR_PARSE,
                                     "%s:%d: header: the first column must be experiment_id, then one column per "
                                     "descriptor", path, lineno);
                goto done;
            }
            for (size_t c = 1; c < nh; c++) {
                if (bad_name(hdr[c]) || name_index(d, hdr[c]) >= 0) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: field %zu: descriptor name '%s' empty, repeated "
                                         "or not a plain name", path, lineno, c + 1, hdr[c]);
                    goto done;
                }
                if ((st = add_name(d, hdr[c], err))) goto done;
            }
            continue;
        }
        char *id = trim(next_field(&s, &more));
        if (!*id) { st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: field experiment_id: empty", path, lineno); goto done; }
        if (drift_pri_descriptors_find(d, id) >= 0) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: field experiment_id: '%s' given twice", path, lineno, id);
            goto done;
        }
        if ((st = add_config(d, id, err))) goto done;
        size_t c = 1;
        for (; more && c < nh; c++) {
            char *f = trim(next_field(&s, &more));
            double v = NAN;
            if (*f && strcasecmp(f, "nan")) {
                char *e;
                errno = 0;
                v = strtod(f, &e);
                if (e == f || *e || errno || !isfinite(v)) {
                    st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: field %s: '%s' is not a finite number", path,
                                         lineno, hdr[c], f);
                    goto done;
                }
            }
            d->values[(d->n_configs - 1) * d->n_names + c - 1] = v;
        }
        if (c != nh || more) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: %s fields, the header has %zu", path, lineno,
                                 more ? "more" : "fewer", nh);
            goto done;
        }
    }
    if (!hdr) { st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: empty (no header line)", path); goto done; }
done:
    free(hdr);
    free(text);
    if (st) drift_pri_descriptors_free(d);
    else *out = d;
    return st;
}
