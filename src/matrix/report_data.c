/* report_data.c - everything the matrix report shows, computed from a
 * store (report_html.h): the flip table with the comparison behind each
 * configuration's rows (matrix_flip_table_runs, so each run is compared
 * once), the table's analyses (ANOVA type II, the PRI's held-out
 * evaluation), and both answers of the flipped prompts shown. html.c then
 * renders it without touching the store; drift_report_html does both. */
#include <stdlib.h>
#include <string.h>

#include "driftbench/report_html.h"
#include "matrix/matrix_internal.h"
#include "util/util.h"

static void answers_clear(drift_report_answers *a) {
    free(a->input);
    free(a->base_text);
    free(a->targ_text);
    free(a->error);
}

void drift_matrix_report_free(drift_matrix_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_experiments; i++) {
        drift_report_experiment *e = &r->experiments[i];
        free(e->label);
        free(e->baseline);
        for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) free(e->levels[d]);
        drift_comparison_free(e->cmp);
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            for (size_t k = 0; k < e->n_answers[w]; k++) answers_clear(&e->answers[w][k]);
            free(e->answers[w]);
        }
    }
    free(r->experiments);
    drift_table_analyses_clear(&r->analyses);
    drift_table_free(r->table);
    free(r->baseline);
    free(r);
}

/* Both answers of flip f and the baseline's prompt; a read that fails is
 * recorded in a->error. Returns DRIFT_ERR_NOMEM only. */
static drift_status load_answers(drift_store *st, const drift_flip *f, drift_report_answers *a, drift_error *err) {
    drift_answer br, tr;
    drift_prompt bp, tp;
    memset(&br, 0, sizeof br);
    memset(&tr, 0, sizeof tr);
    memset(&bp, 0, sizeof bp);
    memset(&tp, 0, sizeof tp);
    drift_error e = {0};
    int ok = !drift_store_response_get(st, f->base_response_id, &br, &bp, &e) &&
             !drift_store_response_get(st, f->targ_response_id, &tr, &tp, &e);
    int nomem = 0;
    if (!ok) {
        nomem = !(a->error = util_strdup(e.msg));
    } else {
        a->input = bp.input ? util_strdup(bp.input) : NULL;
        a->base_text = br.text ? util_strdup(br.text) : NULL;
        a->targ_text = tr.text ? util_strdup(tr.text) : NULL;
        nomem = (bp.input && !a->input) || (br.text && !a->base_text) || (tr.text && !a->targ_text);
    }
    drift_answer_clear(&br);
    drift_answer_clear(&tr);
    drift_prompt_clear(&bp);
    drift_prompt_clear(&tp);
    return nomem ? drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading answers") : DRIFT_OK;
}

/* The answers of the first max_flipped flips of each of e's workloads. */
static drift_status load_experiment_answers(drift_store *st, drift_report_experiment *e, size_t max_flipped,
                                            drift_error *err) {
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const drift_wl_result *r = &e->cmp->wl[w];
        if (!e->cmp->present[w] || !r->n_flipped) continue;
        size_t n = r->n_flipped < max_flipped ? r->n_flipped : max_flipped;
        if (!n) continue;
        e->answers[w] = calloc(n, sizeof *e->answers[w]);
        if (!e->answers[w]) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        e->n_answers[w] = n;
        for (size_t k = 0; k < n; k++) {
            drift_status rc = load_answers(st, &r->flipped[k], &e->answers[w][k], err);
            if (rc) return rc;
        }
    }
    return DRIFT_OK;
}

/* See report_html.h. */
drift_status drift_matrix_report_load(drift_store *st, const drift_html_opts *o, drift_matrix_report **out,
                                      drift_error *err) {
    if (!st || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "html report: missing arguments");
    *out = NULL;
    drift_html_opts def;
    drift_html_opts_default(&def);
    if (!o) o = &def;
    drift_matrix_report *r = calloc(1, sizeof *r);
    if (!r) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    r->baseline = util_strdup(o->baseline ? o->baseline : "baseline");
    r->max_flipped = o->max_flipped ? o->max_flipped : 5;
    r->analysis = o->analysis;
    if (!r->baseline) {
        drift_matrix_report_free(r);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    matrix_table_run *runs = NULL;
    size_t n_runs = 0;
    drift_status rc = matrix_flip_table_runs(st, r->baseline, NULL, &r->table, &runs, &n_runs, err);
    if (!rc && n_runs && !(r->experiments = calloc(n_runs, sizeof *r->experiments)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (rc) {
        matrix_table_runs_free(runs, n_runs);
        drift_matrix_report_free(r);
        return rc;
    }
    for (size_t i = 0; i < n_runs; i++) { /* take the runs over */
        drift_report_experiment *e = &r->experiments[i];
        e->label = runs[i].label;
        e->baseline = runs[i].baseline;
        memcpy(e->levels, runs[i].levels, sizeof e->levels);
        e->cmp = runs[i].cmp;
    }
    r->n_experiments = n_runs;
    free(runs);
    if (r->analysis) {
        drift_pri_options po;
        drift_pri_options_init(&po);
        rc = drift_table_analyze(r->table, 1u << 2, &po, o->pri, &r->analyses, err);
    }
    for (size_t i = 0; i < r->n_experiments && !rc; i++)
        rc = load_experiment_answers(st, &r->experiments[i], r->max_flipped, err);
    if (rc) {
        drift_matrix_report_free(r);
        return rc;
    }
    util_utc_iso(r->generated);
    *out = r;
    return DRIFT_OK;
}

/* See report_html.h. */
drift_status drift_report_html(drift_store *st, const drift_html_opts *o, char **out, drift_error *err) {
    if (!st || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "html report: missing arguments");
    *out = NULL;
    drift_matrix_report *r = NULL;
    drift_status rc = drift_matrix_report_load(st, o, &r, err);
    if (rc) return rc;
    rc = drift_html_render(r, o, out, err);
    drift_matrix_report_free(r);
    return rc;
}
