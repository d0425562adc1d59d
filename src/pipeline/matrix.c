/* matrix.c - the matrix stage: every configuration of a spec in one shard,
 * in spec order, as a labelled run (the run stage) followed by its scoring.
 *
 *   for each configuration i of the shard (i % count == index - 1):
 *       finished in the store?  yes -> SKIP (not asked again)
 *                               no  -> drift_run_execute (resumes what is stored)
 *       drift_score_run(label)  -> summed into the summary -> ITEM
 *
 * A finished run is complete: its failed requests (a prompt longer than the
 * model's context, say) would fail the same way again, so they are not
 * retried here (`driftbench run` with the label does). Everything is in the
 * store, so calling again after a failure or a cancel resumes. */
#include "driftbench/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

void drift_matrix_opts_default(drift_matrix_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_index = o->shard_count = 1;
    drift_score_opts_default(&o->score);
}

static void emit(const drift_matrix_opts *o, const drift_matrix_summary *sum, drift_progress_event ev, double t0_ms) {
    if (!o->progress) return;
    double elapsed = util_now_ms() - t0_ms;
    drift_progress p = {.stage = "matrix", .event = ev, .label = sum->label, .done = sum->configs,
                        .total = sum->in_shard, .elapsed_ms = elapsed, .eta_ms = -1.0, .summary = sum};
    if (sum->configs && sum->in_shard >= sum->configs)
        p.eta_ms = elapsed / (double)sum->configs * (double)(sum->in_shard - sum->configs);
    o->progress(o->progress_user, &p);
}

/* 1 when the store holds run `label` marked finished. */
static int run_finished(drift_store *st, const char *label) {
    drift_run_info prev;
    memset(&prev, 0, sizeof prev);
    int finished = drift_store_run_get(st, label, &prev, NULL) == DRIFT_OK && prev.finished_at;
    drift_run_info_clear(&prev);
    return finished;
}

static void score_add(drift_score_summary *total, const drift_score_summary *s) {
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        total->scored[w] += s->scored[w];
        total->already[w] += s->already[w];
        total->eval_errors[w] += s->eval_errors[w];
        total->not_computable[w] += s->not_computable[w];
        if (!total->reason[w][0] && s->reason[w][0]) memcpy(total->reason[w], s->reason[w], sizeof total->reason[w]);
    }
    if (!total->code_sandbox[0]) memcpy(total->code_sandbox, s->code_sandbox, sizeof total->code_sandbox);
}

/* The run stage's options for configuration c: the spec's suites, limit
 * and decoding, c's dimensions as config (dims: the caller frees it). */
static void run_opts_for(const drift_matrix_spec *spec, const drift_matrix_config *c, const drift_matrix_opts *o,
                         const char *dims, drift_run_opts *r) {
    drift_run_opts_default(r);
    r->label = c->label;
    r->target = c->target;
    r->suites = (const char *const *)spec->suites;
    r->n_suites = spec->n_suites;
    r->config = dims;
    r->limit = spec->limit;
    r->replicates = spec->replicates;
    r->params.temperature = spec->temperature;
    r->params.top_p = spec->top_p;
    r->params.seed = spec->seed;
    r->params.max_tokens = spec->max_tokens;
    if (o->concurrency > 0) r->target_opts.concurrency = o->concurrency;
    r->cancel = o->cancel;
    r->cancel_user = o->cancel_user;
    r->progress = o->progress;
    r->progress_user = o->progress_user;
}

/* Runs (unless finished) and scores one configuration. */
static drift_status one_config(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_config *c,
                               const drift_matrix_opts *o, drift_matrix_summary *sum, double t0_ms, drift_error *err) {
    double c0 = util_now_ms();
    drift_status rc = DRIFT_OK;
    memset(&sum->run, 0, sizeof sum->run);
    if (run_finished(st, c->label)) {
        sum->skipped++;
        sum->run.step = DRIFT_RUN_STEP_DONE;
        emit(o, sum, DRIFT_PROGRESS_SKIP, t0_ms);
    } else {
        char *dims = drift_matrix_config_dims(c);
        if (!dims) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        drift_run_opts r;
        run_opts_for(spec, c, o, dims, &r);
        rc = drift_run_execute(st, &r, &sum->run, err);
        free(dims);
    }
    double c1 = util_now_ms();
    sum->run_ms += c1 - c0;
    if (rc) {
        sum->failed_in_run = 1;
        return rc;
    }
    drift_score_summary one;
    memset(&one, 0, sizeof one);
    drift_score_opts so = o->score;
    rc = drift_score_run(st, c->label, &so, &one, err);
    if (rc) return rc;
    sum->score_ms += util_now_ms() - c1;
    score_add(&sum->score, &one);
    sum->configs++;
    sum->config_ms = util_now_ms() - c0;
    emit(o, sum, DRIFT_PROGRESS_ITEM, t0_ms);
    return DRIFT_OK;
}

drift_status drift_matrix_run(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_opts *o,
                              drift_matrix_summary *sum, drift_error *err) {
    memset(sum, 0, sizeof *sum);
    if (!st || !spec || o->shard_count < 1 || o->shard_index < 1 || o->shard_index > o->shard_count)
        return drift_error_set(err, DRIFT_ERR_INVALID, "matrix: a store, a spec and a shard I/N with 1 <= I <= N are needed");
    double t0 = util_now_ms();
    for (size_t i = 0; i < spec->n_configs; i++)
        sum->in_shard += (size_t)drift_matrix_in_shard(i, o->shard_index, o->shard_count);
    emit(o, sum, DRIFT_PROGRESS_BEGIN, t0);
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < spec->n_configs && !rc; i++) {
        if (!drift_matrix_in_shard(i, o->shard_index, o->shard_count)) continue;
        sum->config_index = i;
        sum->label = spec->configs[i].label;
        rc = one_config(st, spec, &spec->configs[i], o, sum, t0, err);
        if (!rc && o->cancel && o->cancel(o->cancel_user))
            rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "cancelled after configuration '%s'; calling again resumes",
                                 sum->label);
    }
    emit(o, sum, DRIFT_PROGRESS_END, t0);
    return rc;
}
