/* load_matrix.c - the HTML report's loader: everything the report shows,
 * computed from a store (report_html.h). It lives with the other loaders
 * in the report layer (load.c: a comparison), the only report code that
 * reads the store; the matrix module below it gives the flip table
 * (matrix_flip_table_runs). Which page first: the comparison page when o->target
 * names a run, or when o->comparison asks for it and the store holds one
 * run that is no baseline (pick_comparison); else the matrix page.
 *   comparison: that run against its baseline (drift_compare_runs under
 *               the gate's options; a run without a counted pair is kept:
 *               its decision is the error the page leads with) and both
 *               answers of its flipped prompts shown; no flip table, no
 *               analyses.
 *   matrix:     the flip table with the comparison behind each
 *               configuration's rows (matrix_flip_table_runs under the
 *               gate's options, so each run is compared once), the table's
 *               analyses (ANOVA type II, the PRI's held-out evaluation),
 *               and both answers of the flipped prompts shown.
 * html.c then renders it without touching the store; drift_report_html
 * does both. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/matrix.h"
#include "driftbench/report_html.h"
#include "matrix/flip_table.h"
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

/* The baseline of run under pattern: "{dim}" placeholders filled from its
 * configuration's string values (drift_matrix_baseline_for). NULL on nomem. */
static char *baseline_of(const char *pattern, const drift_run_info *run) {
    json_error_t je;
    json_t *cfg = json_loads(run->config_json ? run->config_json : "{}", 0, &je);
    char *names[64], *values[64];
    drift_matrix_config c;
    memset(&c, 0, sizeof c);
    c.dim_names = names;
    c.dim_values = values;
    const char *k;
    json_t *v;
    if (json_is_object(cfg)) json_object_foreach(cfg, k, v) {
            if (c.n_dims == 64) break;
            if (!json_is_string(v)) continue;
            names[c.n_dims] = (char *)k;
            values[c.n_dims++] = (char *)json_string_value(v);
        }
    char *base = drift_matrix_baseline_for(pattern, &c);
    json_decref(cfg);
    return base;
}

/* The run the comparison page shows and its baseline (*target and *base
 * malloc'd), or both NULL for the matrix page: o->target (an error when it
 * is not a run, or is its own baseline, or its baseline is not a run);
 * else, when o->comparison, the one run of the store that is no run's
 * baseline, when there is exactly one and its baseline exists. */
static drift_status pick_comparison(drift_store *st, const drift_html_opts *o, const char *pattern, char **target,
                                    char **base, drift_error *err) {
    *target = *base = NULL;
    drift_status rc = DRIFT_OK;
    if (o->target) {
        drift_run_info t, b;
        memset(&t, 0, sizeof t);
        memset(&b, 0, sizeof b);
        if ((rc = drift_store_run_get(st, o->target, &t, err))) return rc;
        char *bl = baseline_of(pattern, &t);
        if (!bl) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else if (!strcmp(bl, o->target))
            rc = drift_error_set(err, DRIFT_ERR_INVALID, "report: the target '%s' is the baseline (--baseline %s)",
                                 o->target, pattern);
        else if ((rc = drift_store_run_get(st, bl, &b, err)) == DRIFT_ERR_NOT_FOUND)
            rc = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "report: the baseline '%s' of '%s' is not a run of the store",
                                 bl, o->target);
        drift_run_info_clear(&t);
        drift_run_info_clear(&b);
        if (!rc && !(*target = util_strdup(o->target))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (rc) free(bl);
        else *base = bl;
        return rc;
    }
    if (!o->comparison) return DRIFT_OK;
    drift_run_info *runs = NULL;
    size_t n = 0;
    if ((rc = drift_store_run_list(st, &runs, &n, err))) return rc;
    char **bases = calloc(n ? n : 1, sizeof *bases);
    if (!bases) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++)
        if (!(bases[i] = baseline_of(pattern, &runs[i]))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t others = 0, pick = n;
    for (size_t i = 0; i < n && !rc; i++) {
        int is_base = 0, base_exists = 0;
        for (size_t j = 0; j < n; j++) {
            is_base |= !strcmp(bases[j], runs[i].label);
            base_exists |= !strcmp(bases[i], runs[j].label);
        }
        if (is_base) continue;
        others++;
        if (base_exists) pick = i;
    }
    if (!rc && others == 1 && pick < n) {
        *target = util_strdup(runs[pick].label);
        *base = util_strdup(bases[pick]);
        if (!*target || !*base) {
            free(*target);
            free(*base);
            *target = *base = NULL;
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t i = 0; bases && i < n; i++) free(bases[i]);
    free(bases);
    drift_run_info_array_free(runs, n);
    return rc;
}

/* The gate's options of o (budgets, rule, max left out) over the defaults. */
static void gate_opts(const drift_html_opts *o, drift_compare_opts *co) {
    drift_compare_opts_default(co);
    if (!o->gate) return;
    memcpy(co->budget, o->gate->budget, sizeof co->budget);
    co->rule = o->gate->rule;
    co->max_left_out = o->gate->max_left_out;
}

/* r as the comparison page of target against base. */
static drift_status load_comparison(drift_store *st, const drift_html_opts *o, drift_matrix_report *r, char *target,
                                    char *base, drift_error *err) {
    r->comparison = 1;
    drift_report_experiment *e = r->experiments = calloc(1, sizeof *r->experiments);
    if (!e) {
        free(target);
        free(base);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    r->n_experiments = 1;
    e->label = target;
    e->baseline = base;
    drift_compare_opts co;
    gate_opts(o, &co);
    drift_status rc = drift_compare_runs(st, base, target, &co, &e->cmp, err);
    if (rc) return rc;
    json_error_t je;
    json_t *cfg = json_loads(e->cmp->target.config_json ? e->cmp->target.config_json : "{}", 0, &je);
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT && !rc; d++) {
        json_t *v = json_object_get(cfg, drift_dim_names[d]);
        if (json_is_string(v) && !(e->levels[d] = util_strdup(json_string_value(v))))
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    json_decref(cfg);
    return rc ? rc : load_experiment_answers(st, e, r->max_flipped, err);
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
    char *target = NULL, *base = NULL;
    drift_status rc = pick_comparison(st, o, r->baseline, &target, &base, err);
    if (!rc && target) rc = load_comparison(st, o, r, target, base, err);
    if (rc || target) {
        if (rc) {
            drift_matrix_report_free(r);
            return rc;
        }
        util_utc_iso(r->generated);
        *out = r;
        return DRIFT_OK;
    }
    drift_compare_opts co;
    gate_opts(o, &co);
    matrix_table_run *runs = NULL;
    size_t n_runs = 0;
    rc = matrix_flip_table_runs(st, r->baseline, &co, &r->table, &runs, &n_runs, err);
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
