/* flip_table.c - the configuration x workload flip table of a store.
 *
 * For every run R that is not a baseline: B = the baseline label with R's
 * levels substituted ("ref@{model}" -> "ref@tiny"); when B exists and is not
 * R, drift_compare_runs(B, R) gives one row per workload that has pairs.
 * Dimension levels come from R's config JSON (what `run --config` or the
 * embedded target recorded). Rates and CIs are percents, as in the paper's
 * flip_rates.csv. matrix_flip_table_runs also hands back, for each run with
 * rows, its baseline and the comparison the rows came from, so the matrix
 * report does not compare the runs a second time. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/matrix.h"
#include "matrix/flip_table.h"
#include "util/util.h"

static int is_fixed_or_skipped(const char *k) {
    for (int i = 0; i < DRIFT_DIM_COUNT; i++)
        if (!strcmp(k, drift_dim_names[i])) return 1;
    return !strcmp(k, "profile") || !strcmp(k, "profile_spec");
}

/* A run's config as a matrix config (dimension names/levels), for baseline
 * substitution. Strings point into obj. */
static void run_dims(json_t *obj, drift_matrix_config *c, char **names, char **values, size_t cap) {
    c->n_dims = 0;
    c->dim_names = names;
    c->dim_values = values;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        if (c->n_dims == cap) break;
        if (!json_is_string(v)) continue;
        names[c->n_dims] = (char *)k;
        values[c->n_dims] = (char *)json_string_value(v);
        c->n_dims++;
    }
}

static int add_extra(char ***extras, size_t *n, const char *k) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*extras)[i], k)) return 0;
    char **p = realloc(*extras, (*n + 1) * sizeof *p);
    if (!p) return -1;
    *extras = p;
    p[(*n)++] = (char *)k;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void matrix_table_runs_free(matrix_table_run *r, size_t n) {
    for (size_t i = 0; r && i < n; i++) {
        free(r[i].label);
        free(r[i].baseline);
        for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) free(r[i].levels[d]);
        drift_comparison_free(r[i].cmp);
    }
    free(r);
}

/* Appends a run with rows to *kept, taking c over. */
static drift_status keep_run(matrix_table_run **kept, size_t *n_kept, const char *label, const char *baseline, json_t *cfg,
                             drift_comparison *c, drift_error *err) {
    matrix_table_run *p = realloc(*kept, (*n_kept + 1) * sizeof *p);
    if (!p) {
        drift_comparison_free(c);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    *kept = p;
    matrix_table_run *r = &p[(*n_kept)++];
    memset(r, 0, sizeof *r);
    r->cmp = c;
    r->label = util_strdup(label);
    r->baseline = util_strdup(baseline);
    int ok = r->label && r->baseline;
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) {
        json_t *v = json_object_get(cfg, drift_dim_names[d]);
        if (!json_is_string(v)) continue;
        r->levels[d] = util_strdup(json_string_value(v));
        ok &= r->levels[d] != NULL;
    }
    return ok ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}

/* 1 when two runs' decoding JSON are the same but for "logprobs" (what is
 * stored beside an answer, not how it is decoded) and "request" (the
 * request control, target.h: each stack's own, e.g. the extra body one
 * server needs for what another does by default). */
static int same_decoding(const char *a, const char *b) {
    if (!strcmp(a ? a : "", b ? b : "")) return 1;
    json_t *ja = json_loads(a ? a : "", 0, NULL), *jb = json_loads(b ? b : "", 0, NULL);
    int same = 0;
    if (json_is_object(ja) && json_is_object(jb)) {
        json_object_del(ja, "logprobs");
        json_object_del(jb, "logprobs");
        json_object_del(ja, "request");
        json_object_del(jb, "request");
        same = json_equal(ja, jb);
    }
    json_decref(ja);
    json_decref(jb);
    return same;
}

/* The label form of run i: "P@{model}" when its label is P@ its model's
 * level (the lab's base@MODEL, ref@MODEL, aa@MODEL), else NULL. */
static char *model_form(const char *label, json_t *cfg) {
    const char *m = json_string_value(json_object_get(cfg, "model")), *at = strrchr(label, '@');
    if (!m || !*m || !at || at == label || strcmp(at + 1, m)) return NULL;
    return util_asprintf("%.*s@{model}", (int)(at - label), label);
}

/* No run is the baseline: the error names the store's labels, a run per
 * model as its "P@{model}" form, and the form meant where there is one
 * ("ref" on a lab store: 'ref@{model}'). */
static drift_status no_baseline(const char *baseline, const drift_run_info *runs, json_t *const *cfg, size_t n_runs,
                                drift_error *err) {
    enum { FORMS = 16, PLAIN = 8 };
    char *form[FORMS];
    size_t count[FORMS], n_forms = 0, n_plain = 0;
    util_buf plain = {0}, b = {0};
    for (size_t i = 0; i < n_runs; i++) {
        char *f = model_form(runs[i].label, cfg[i]);
        size_t k = 0;
        while (f && k < n_forms && strcmp(form[k], f)) k++;
        if (f && k < n_forms) {
            count[k]++;
            free(f);
            continue;
        }
        if (f && n_forms < FORMS) {
            form[n_forms] = f;
            count[n_forms++] = 1;
            continue;
        }
        free(f);
        if (n_plain++ < PLAIN) buf_printf(&plain, "%s'%s'", n_plain > 1 ? ", " : "", runs[i].label);
    }
    const char *meant = NULL;
    char want[256];
    snprintf(want, sizeof want, "%s@{model}", baseline);
    for (size_t k = 0; k < n_forms; k++)
        if (!strcmp(form[k], want)) meant = form[k];
    buf_printf(&b, "flip table: no run is labelled '%s'", baseline);
    if (meant) buf_printf(&b, "; did you mean '%s' (a run '%s@MODEL' for each model)?", meant, baseline);
    else buf_printf(&b, ".");
    if (!n_runs) buf_printf(&b, " The store has no run.");
    else {
        buf_printf(&b, " The store's runs: ");
        for (size_t k = 0; k < n_forms; k++)
            buf_printf(&b, "%s'%s' (%zu model%s)", k ? ", " : "", form[k], count[k], count[k] == 1 ? "" : "s");
        if (n_plain) buf_printf(&b, "%s%s", n_forms ? ", " : "", plain.data ? plain.data : "");
        if (n_plain > PLAIN) buf_printf(&b, " and %zu more (driftbench runs list)", n_plain - PLAIN);
        buf_printf(&b, ". --baseline takes a label, or a pattern with {model} (or another dimension) for a "
                       "baseline per model");
    }
    drift_status rc = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s", b.data ? b.data : "flip table: no baseline");
    for (size_t k = 0; k < n_forms; k++) free(form[k]);
    buf_free(&plain);
    buf_free(&b);
    return rc;
}

drift_status drift_matrix_flip_table(drift_store *st, const char *baseline, drift_table **out, drift_error *err) {
    return matrix_flip_table_runs(st, baseline, NULL, out, NULL, NULL, err);
}

/* See flip_table.h. */
drift_status matrix_flip_table_runs(drift_store *st, const char *baseline, const drift_compare_opts *gate,
                                    drift_table **out, matrix_table_run **kept, size_t *n_kept, drift_error *err) {
    if (!st || !baseline || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "flip table: missing arguments");
    *out = NULL;
    if (kept) {
        *kept = NULL;
        *n_kept = 0;
    }
    drift_run_info *runs = NULL;
    size_t n_runs = 0;
    drift_status rc = drift_store_run_list(st, &runs, &n_runs, err);
    if (rc) return rc;
    json_t **cfg = calloc(n_runs ? n_runs : 1, sizeof *cfg);
    char **base_of = calloc(n_runs ? n_runs : 1, sizeof *base_of);
    char **extras = NULL;
    size_t n_extras = 0;
    drift_table *t = NULL;
    if (!cfg || !base_of) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* configs, baselines, and the union of extra dimensions */
    for (size_t i = 0; i < n_runs; i++) {
        json_error_t je;
        cfg[i] = json_loads(runs[i].config_json ? runs[i].config_json : "{}", 0, &je);
        if (!json_is_object(cfg[i])) {
            json_decref(cfg[i]);
            cfg[i] = json_object();
        }
        char *names[64], *values[64];
        drift_matrix_config c;
        run_dims(cfg[i], &c, names, values, 64);
        base_of[i] = drift_matrix_baseline_for(baseline, &c);
        if (!base_of[i]) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    int any_base = 0;
    for (size_t i = 0; i < n_runs; i++)
        for (size_t j = 0; j < n_runs; j++)
            if (!strcmp(base_of[i], runs[j].label)) any_base = 1;
    if (!any_base) {
        rc = no_baseline(baseline, runs, cfg, n_runs, err);
        goto out;
    }
    for (size_t i = 0; i < n_runs; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(cfg[i], k, v) if (json_is_string(v) && !is_fixed_or_skipped(k)) {
            if (add_extra(&extras, &n_extras, k)) {
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                goto out;
            }
        }
    }
    if (n_extras > 1) qsort(extras, n_extras, sizeof *extras, cmp_str);
    if ((rc = drift_table_create((const char *const *)extras, n_extras, 1, &t, err))) goto out;

    drift_compare_opts co;
    drift_compare_opts_default(&co);
    if (gate) { /* the gate only: the rows stay the same */
        memcpy(co.budget, gate->budget, sizeof co.budget);
        co.rule = gate->rule;
        co.max_left_out = gate->max_left_out;
    }
    for (size_t i = 0; i < n_runs; i++) {
        int is_base = 0;
        for (size_t j = 0; j < n_runs && !is_base; j++) is_base = !strcmp(base_of[j], runs[i].label);
        if (is_base) continue;
        size_t bj = n_runs;
        for (size_t j = 0; j < n_runs && bj == n_runs; j++)
            if (!strcmp(base_of[i], runs[j].label)) bj = j;
        if (bj == n_runs) continue;
        /* a row compares two stacks under the same decoding: a run sampled
         * at another temperature (the lab's stochastic leg) is no row */
        if (!same_decoding(runs[i].decoding_json, runs[bj].decoding_json)) continue;
        drift_comparison *c = NULL;
        if ((rc = drift_compare_runs(st, base_of[i], runs[i].label, &co, &c, err))) goto out;
        size_t nd = t->n_dims;
        const char **dims = calloc(nd, sizeof *dims);
        if (!dims) {
            drift_comparison_free(c);
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) {
            const char *s = json_string_value(json_object_get(cfg[i], drift_dim_names[d]));
            dims[d] = s && *s ? s : "unknown";
        }
        for (size_t e = 0; e < n_extras; e++) {
            const char *s = json_string_value(json_object_get(cfg[i], extras[e]));
            dims[DRIFT_DIM_COUNT + e] = s ? s : "";
        }
        int rows = 0;
        for (int w = 0; w < DRIFT_WL_COUNT && !rc; w++) {
            const drift_wl_result *r = &c->wl[w];
            if (!c->present[w] || r->n <= 0) continue;
            dims[DRIFT_DIM_WORKLOAD] = drift_workload_name((drift_workload)w);
            rc = drift_table_append(t, runs[i].label, dims, 100.0 * r->flip_rate, r->flips, r->n, 100.0 * r->ci95[0],
                                    100.0 * r->ci95[1], err);
            rows++;
        }
        free(dims);
        if (!rc && kept && rows) rc = keep_run(kept, n_kept, runs[i].label, base_of[i], cfg[i], c, err);
        else drift_comparison_free(c);
        if (rc) goto out;
    }
    *out = t;
    t = NULL;
out:
    if (rc && kept) {
        matrix_table_runs_free(*kept, *n_kept);
        *kept = NULL;
        *n_kept = 0;
    }
    drift_table_free(t);
    for (size_t i = 0; i < n_runs; i++) {
        if (cfg) json_decref(cfg[i]);
        if (base_of) free(base_of[i]);
    }
    free(cfg);
    free(base_of);
    free(extras);
    drift_run_info_array_free(runs, n_runs);
    return rc;
}
