/* pri_features.c - the PRI's features, built from the levels present in the
 * table so that our own tables work as well as the paper's:
 *
 *   one-hot of model, hardware, precision, framework, workload   (paper: 20)
 *   precision x workload, framework x workload, hardware x precision (36)
 *   optional descriptors: format bits, hardware generation, AMD or not,
 *   model size (B parameters), MoE or not (NaN = missing when a level's
 *   name says nothing).
 *   the caller's descriptors (o->desc, issue 36): numbers per configuration
 *   that say what its levels are (bits, block size, accumulator width ...),
 *   named "d:NAME"; those constant over the table are left out. With
 *   o->onehot_off a dimension has no one-hot (and no interaction): it is
 *   known only through the descriptors, so a held-out level is predicted
 *   from what it is.
 *
 * A pri_fspec holds the sorted levels of every dimension and which groups
 * are on; pri_fspec_row turns one configuration into its feature vector and
 * pri_fspec_names names the same columns in the same order. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/pri_internal.h"
#include "util/util.h"

/* the paper's interactions: (a, b) dimension pairs */
#define PRI_N_INTER 3
static const int pri_inter_pairs[PRI_N_INTER][2] = {{DRIFT_DIM_PRECISION, DRIFT_DIM_WORKLOAD},
                                                     {DRIFT_DIM_FRAMEWORK, DRIFT_DIM_WORKLOAD},
                                                     {DRIFT_DIM_HARDWARE, DRIFT_DIM_PRECISION}};

#define PRI_N_DESC 5
static const char *const pri_desc_names[PRI_N_DESC] = {"desc:format_bits", "desc:hw_generation", "desc:hw_amd",
                                                       "desc:model_size_b", "desc:model_moe"};

void pri_fspec_free(pri_fspec *f) {
    for (size_t i = 0; f->ud_names && i < f->n_ud; i++) free(f->ud_names[i]);
    free(f->ud_names);
    f->ud_names = NULL;
    free(f->ud_col);
    f->ud_col = NULL;
    f->n_ud = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        for (size_t i = 0; i < f->nlev[d]; i++) free(f->lev[d][i]);
        free(f->lev[d]);
        f->lev[d] = NULL;
        f->nlev[d] = 0;
    }
}

/* an interaction pair is on when both of its dimensions' one-hots are:
 * a dimension described by descriptors alone keeps no identity */
static int inter_on(const pri_fspec *f, int k) {
    return f->interactions && f->use_dim[pri_inter_pairs[k][0]] && f->use_dim[pri_inter_pairs[k][1]];
}

size_t pri_fspec_onehot_count(const pri_fspec *f) {
    size_t p = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++)
        if (f->use_dim[d]) p += f->nlev[d];
    return p;
}

void pri_fspec_count(pri_fspec *f) {
    size_t p = pri_fspec_onehot_count(f);
    for (int k = 0; k < PRI_N_INTER; k++)
        if (inter_on(f, k)) p += f->nlev[pri_inter_pairs[k][0]] * f->nlev[pri_inter_pairs[k][1]];
    if (f->descriptors) p += PRI_N_DESC;
    if (f->use_ud) p += f->n_ud;
    f->p = p;
}

/* The caller's descriptor columns that vary over the table's rows (a
 * constant one says nothing); every row's configuration must be there. */
static drift_status ud_columns(const drift_table *t, const drift_pri_descriptors *ud, pri_fspec *f,
                               drift_error *err) {
    f->ud = ud;
    if (!ud) return DRIFT_OK;
    long *row = malloc((t->n_rows + 1) * sizeof *row);
    f->ud_col = malloc((ud->n_names + 1) * sizeof *f->ud_col);
    if (!row || !f->ud_col) { free(row); return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); }
    for (size_t i = 0; i < t->n_rows; i++) {
        row[i] = drift_pri_descriptors_find(ud, t->rows[i].experiment_id);
        if (row[i] < 0) {
            drift_status st = drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                                              "PRI descriptors: configuration '%s' (row %zu of the table) has none "
                                              "(%zu configurations described)",
                                              t->rows[i].experiment_id, i + 1, ud->n_configs);
            free(row);
            return st;
        }
    }
    for (size_t c = 0; c < ud->n_names; c++) {
        int varies = 0;
        double first = NAN;
        for (size_t i = 0; i < t->n_rows && !varies; i++) {
            double v = ud->values[(size_t)row[i] * ud->n_names + c];
            if (i == 0) first = v;
            else varies = isnan(v) != isnan(first) || (!isnan(v) && v != first);
        }
        if (varies) f->ud_col[f->n_ud++] = c;
    }
    free(row);
    f->ud_names = calloc(f->n_ud + 1, sizeof *f->ud_names);
    if (!f->ud_names) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t c = 0; c < f->n_ud; c++)
        if (!(f->ud_names[c] = util_strdup(ud->names[f->ud_col[c]])))
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

drift_status pri_fspec_from_table(const drift_table *t, const drift_pri_options *o, pri_fspec *f,
                                  drift_error *err) {
    memset(f, 0, sizeof *f);
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        const char **lv;
        size_t n;
        drift_status st = drift_table_levels(t, (size_t)d, &lv, &n, err);
        if (st) { pri_fspec_free(f); return st; }
        f->lev[d] = calloc(n ? n : 1, sizeof *f->lev[d]);
        if (!f->lev[d]) { free(lv); pri_fspec_free(f); return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); }
        f->nlev[d] = n;
        for (size_t i = 0; i < n; i++)
            if (!(f->lev[d][i] = util_strdup(lv[i]))) {
                free(lv);
                pri_fspec_free(f);
                return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            }
        free(lv);
        f->use_dim[d] = 1;
    }
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) f->use_dim[d] = !(o->onehot_off & (1u << d));
    f->interactions = o->interactions;
    f->descriptors = o->descriptors;
    drift_status st = ud_columns(t, o->desc, f, err);
    if (st) { pri_fspec_free(f); return st; }
    f->use_ud = f->n_ud > 0;
    pri_fspec_count(f);
    return DRIFT_OK;
}

int pri_level_index(const pri_fspec *f, int d, const char *v) {
    size_t lo = 0, hi = f->nlev[d];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->lev[d][mid], v);
        if (c == 0) return (int)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ---------------------------------------------------------- descriptors */

/* trailing number of a format name: fp16 -> 16, nvfp4 -> 4, e4m3 -> 8 */
double pri_format_bits(const char *s) {
    if (strstr(s, "e4m3") || strstr(s, "e5m2")) return 8;
    if (strstr(s, "e2m1")) return 4;
    size_t n = strlen(s);
    while (n && isdigit((unsigned char)s[n - 1])) n--;
    if (!s[n]) return NAN;
    return atof(s + n);
}

static double desc_hw_generation(const char *s) {
    static const struct { const char *name; double gen; } tab[] = {
        {"v100", 7.0}, {"a100", 8.0}, {"a10", 8.6}, {"l4", 8.9}, {"l40", 8.9}, {"h100", 9.0},
        {"h200", 9.0}, {"gh200", 9.0}, {"b100", 10.0}, {"b200", 10.0}, {"gb200", 10.0},
        {"mi250", 8.0}, {"mi300", 9.0}, {"mi325", 9.0}, {"mi355", 10.0}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strncmp(s, tab[i].name, strlen(tab[i].name))) return tab[i].gen;
    return NAN;
}

/* model size in billions: "llama-3.1-70b" -> 70, "mixtral-8x7b" -> 56 */
static double desc_model_size(const char *s, double *moe) {
    *moe = strstr(s, "mixtral") || strstr(s, "moe") ? 1 : 0;
    double best = NAN;
    for (const char *c = s; *c; c++) {
        if (!isdigit((unsigned char)*c) || (c > s && (isdigit((unsigned char)c[-1]) || c[-1] == '.'))) continue;
        char *e;
        double a = strtod(c, &e);
        if (*e == 'x' && isdigit((unsigned char)e[1])) {
            double b = strtod(e + 1, &e);
            if (*e == 'b' || *e == 'B') { *moe = 1; best = a * b; }
        } else if ((*e == 'b' || *e == 'B') && !isalpha((unsigned char)e[1])) {
            best = a;
        }
    }
    return best;
}

/* ------------------------------------------------------- rows and names */

void pri_fspec_row(const pri_fspec *f, const char *const dims[DRIFT_DIM_COUNT], const double *ud_row, float *out) {
    int idx[DRIFT_DIM_COUNT];
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) idx[d] = pri_level_index(f, d, dims[d]);
    size_t k = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        if (!f->use_dim[d]) continue;
        for (size_t i = 0; i < f->nlev[d]; i++) out[k++] = (int)i == idx[d] ? 1.0f : 0.0f;
    }
    for (int q = 0; q < PRI_N_INTER; q++) {
        if (!inter_on(f, q)) continue;
        int a = pri_inter_pairs[q][0], b = pri_inter_pairs[q][1];
        for (size_t i = 0; i < f->nlev[a]; i++)
            for (size_t j = 0; j < f->nlev[b]; j++)
                out[k++] = ((int)i == idx[a] && (int)j == idx[b]) ? 1.0f : 0.0f;
    }
    if (f->descriptors) {
        double moe;
        double size = desc_model_size(dims[DRIFT_DIM_MODEL], &moe);
        out[k++] = (float)pri_format_bits(dims[DRIFT_DIM_PRECISION]);
        out[k++] = (float)desc_hw_generation(dims[DRIFT_DIM_HARDWARE]);
        out[k++] = strncmp(dims[DRIFT_DIM_HARDWARE], "mi", 2) ? 0.0f : 1.0f;
        out[k++] = (float)size;
        out[k++] = (float)moe;
    }
    if (f->use_ud)
        for (size_t c = 0; c < f->n_ud; c++) out[k++] = ud_row ? (float)ud_row[f->ud_col[c]] : NAN;
}

drift_status pri_fspec_names(const pri_fspec *f, char ***names, drift_error *err) {
    char **v = calloc(f->p ? f->p : 1, sizeof *v);
    if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        if (!f->use_dim[d]) continue;
        for (size_t i = 0; i < f->nlev[d]; i++) v[k++] = util_asprintf("%s=%s", drift_dim_names[d], f->lev[d][i]);
    }
    for (int q = 0; q < PRI_N_INTER; q++) {
        if (!inter_on(f, q)) continue;
        int a = pri_inter_pairs[q][0], b = pri_inter_pairs[q][1];
        for (size_t i = 0; i < f->nlev[a]; i++)
            for (size_t j = 0; j < f->nlev[b]; j++)
                v[k++] = util_asprintf("%s=%s x %s=%s", drift_dim_names[a], f->lev[a][i], drift_dim_names[b],
                                        f->lev[b][j]);
    }
    if (f->descriptors)
        for (int i = 0; i < PRI_N_DESC; i++) v[k++] = util_strdup(pri_desc_names[i]);
    if (f->use_ud)
        for (size_t c = 0; c < f->n_ud; c++) v[k++] = util_asprintf("d:%s", f->ud_names[c]);
    for (size_t i = 0; i < k; i++)
        if (!v[i]) {
            pri_names_free(v, k);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
    *names = v;
    return DRIFT_OK;
}

/* (n, p) features of every table row, row-major floats */
static float *table_features(const drift_table *t, const pri_fspec *f) {
    float *X = malloc((t->n_rows * f->p + 1) * sizeof *X);
    if (!X) return NULL;
    for (size_t r = 0; r < t->n_rows; r++) {
        const char *dims[DRIFT_DIM_COUNT];
        for (int d = 0; d < DRIFT_DIM_COUNT; d++) dims[d] = t->rows[r].dims[d];
        const double *ud_row = NULL;
        if (f->use_ud) { /* pri_fspec_from_table checked that every row has one */
            long i = drift_pri_descriptors_find(f->ud, t->rows[r].experiment_id);
            if (i >= 0) ud_row = f->ud->values + (size_t)i * f->ud->n_names;
        }
        pri_fspec_row(f, dims, ud_row, X + r * f->p);
    }
    return X;
}

drift_status pri_build_dset(const drift_table *t, const pri_fspec *f, float **X, float **y, drift_error *err) {
    *X = table_features(t, f);
    *y = malloc((t->n_rows + 1) * sizeof **y);
    if (!*X || !*y) {
        free(*X); free(*y);
        *X = *y = NULL;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->n_rows; i++) (*y)[i] = (float)t->rows[i].flip_rate;
    return DRIFT_OK;
}

/* ------------------------------------------------------------ public API */

void pri_names_free(char **names, size_t n) {
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

void drift_pri_options_init(drift_pri_options *o) {
    memset(o, 0, sizeof *o);
    o->nthread = 1;
    o->seed = 42;
    o->cv_folds = 3;
    o->interactions = 1;
    o->tune = 1;
    o->cv_repeats = 3;
    o->min_levels = 3;
    o->bootstrap = 2000;
    o->ablation_repeats = 3;
}

drift_status pri_feature_names(const drift_table *t, const drift_pri_options *o, char ***names,
                                     size_t *n, drift_error *err) {
    drift_pri_options def;
    if (!o) { drift_pri_options_init(&def); o = &def; }
    pri_fspec f;
    *names = NULL;
    *n = 0;
    drift_status st = pri_fspec_from_table(t, o, &f, err);
    if (st) return st;
    st = pri_fspec_names(&f, names, err);
    if (!st) *n = f.p;
    pri_fspec_free(&f);
    return st;
}
