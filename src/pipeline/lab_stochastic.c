/* lab_stochastic.c - the lab's stochastic-serving leg (the paper's
 * temperature 0.7, N=5 check).
 *
 * The first model's f32 and int4 configurations (the same targets as the
 * matrix's "cpu-best/f32/seq" and "cpu-best/int4/seq") run again at
 * temperature 0.7 with 5 replicates on math, under their own labels
 * ("stochastic/MODEL/f32"), so they are no rows of the flip table. Their
 * comparison gives the expected flip rate over replicate pairs; the
 * deterministic flip rate of the same pair comes from the matrix's runs;
 * the ratio is what the paper reports as ~0.23x.
 *
 *   design -> run (the run stage + scoring, per label) -> compare */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/lab.h"
#include "driftbench/pipeline.h"
#include "pipeline/lab_internal.h"

void drift_lab_stochastic_design(const drift_lab_study *s, drift_lab_stochastic *x) {
    memset(x, 0, sizeof *x);
    const char *path = s->models[0].path, *name = s->models[0].name;
    snprintf(x->model, sizeof x->model, "%s", name);
    lab_config_target(x->target_f32, sizeof x->target_f32, path, "f32", "isa=auto", "reduce=sequential",
                      s->opts.threads);
    lab_config_target(x->target_int4, sizeof x->target_int4, path, "int4", "isa=auto", "reduce=sequential",
                      s->opts.threads);
    snprintf(x->label_f32, sizeof x->label_f32, "stochastic/%s/f32", name);
    snprintf(x->label_int4, sizeof x->label_int4, "stochastic/%s/int4", name);
    snprintf(x->det_f32, sizeof x->det_f32, "%s/cpu-best/f32/seq", name);
    snprintf(x->det_int4, sizeof x->det_int4, "%s/cpu-best/int4/seq", name);
    snprintf(x->suite, sizeof x->suite, "builtin:math?n=%ld", s->stoch_prompts);
    x->replicates = 5;
    x->temperature = 0.7;
    x->max_tokens = s->spec ? s->spec->max_tokens : s->max_tokens;
    x->expected_flip_rate = x->majority_flip_rate = x->det_flip_rate = x->ratio = NAN;
}

void drift_lab_stochastic_opts_default(drift_lab_stochastic_opts *o) {
    memset(o, 0, sizeof *o);
    o->concurrency = 8;
    drift_score_opts_default(&o->score);
}

drift_status drift_lab_stochastic_run(drift_store *st, const drift_lab_stochastic *x, const drift_lab_stochastic_opts *o,
                                      drift_lab_stochastic_summary *sum, drift_error *err) {
    memset(sum, 0, sizeof *sum);
    const char *labels[2] = {x->label_f32, x->label_int4}, *targets[2] = {x->target_f32, x->target_int4};
    const char *suites[1] = {x->suite};
    for (int k = 0; k < 2; k++) {
        sum->label = labels[k];
        sum->target = targets[k];
        drift_run_opts r;
        drift_run_opts_default(&r);
        r.label = labels[k];
        r.target = targets[k];
        r.suites = suites;
        r.n_suites = 1;
        r.replicates = x->replicates;
        r.params.temperature = x->temperature;
        r.params.max_tokens = x->max_tokens;
        if (o->concurrency > 0) r.target_opts.concurrency = o->concurrency;
        r.cancel = o->cancel;
        r.cancel_user = o->cancel_user;
        r.progress = o->progress;
        r.progress_user = o->progress_user;
        drift_status rc = drift_run_execute(st, &r, &sum->run, err);
        if (rc) {
            sum->failed_in_run = 1;
            return rc;
        }
        memset(&sum->score, 0, sizeof sum->score);
        drift_score_opts so = o->score;
        rc = drift_score_run(st, labels[k], &so, &sum->score, err);
        if (rc) return rc;
        sum->done++;
        if (o->progress) {
            drift_progress p = {.stage = "lab", .event = DRIFT_PROGRESS_ITEM, .label = labels[k], .done = sum->done,
                                .total = 2, .eta_ms = -1.0, .summary = sum};
            o->progress(o->progress_user, &p);
        }
    }
    return DRIFT_OK;
}

drift_status drift_lab_stochastic_compare(drift_store *st, drift_lab_stochastic *x, drift_error *err) {
    drift_comparison *sc = NULL, *dc = NULL;
    drift_status rc = drift_compare_runs(st, x->label_f32, x->label_int4, NULL, &sc, err);
    if (rc) return rc;
    const drift_wl_result *sw = &sc->wl[DRIFT_WL_MATH];
    x->expected_flip_rate = sw->expected_flip_rate;
    x->majority_flip_rate = sw->majority_flip_rate;
    x->majority_flips = sw->majority_flips;
    x->majority_n = sw->majority_n;
    x->majority_ties = sw->majority_ties;
    drift_error derr = {0};
    drift_status drc = drift_compare_runs(st, x->det_f32, x->det_int4, NULL, &dc, &derr);
    x->det_ok = drc == DRIFT_OK && dc->present[DRIFT_WL_MATH];
    x->ratio = NAN;
    if (x->det_ok) {
        const drift_wl_result *dw = &dc->wl[DRIFT_WL_MATH];
        x->det_n = dw->n;
        x->det_flip_rate = dw->flip_rate;
        if (dw->flip_rate > 0 && !isnan(sw->expected_flip_rate)) x->ratio = sw->expected_flip_rate / dw->flip_rate;
    } else {
        snprintf(x->det_reason, sizeof x->det_reason, "%s", drc ? derr.msg : "no math pairs");
    }
    drift_comparison_free(sc);
    drift_comparison_free(dc);
    return DRIFT_OK;
}
