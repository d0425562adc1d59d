/* compare_runs.c - a comparison read from the store: drift_compare_runs
 * (compare.h) and the reading it shares with the comparison report's
 * loader (compare_runs.h: anl_compare_load; src/report/load.c adds the
 * flips' details to the same pass). Load -> compute: this file reads,
 * compare.c computes from plain structs (drift_compare_sets).
 *
 * One comparison is one read transaction (drift_store_read_begin/_end,
 * so every read sees the same snapshot and the file's lock is taken once;
 * drift_compare_runs holds it, the report's loader holds it for its
 * details too):
 *   1. both runs (drift_store_run_get), their scored answers
 *      (drift_store_load_scored_evaluator), the chat embeddings of both in
 *      one range read (drift_compare_chat_range says which);
 *   2. compare over those sets (drift_compare_sets, pure);
 *   3. when code pairs are present, the code sandboxes of each run
 *      (drift_store_detail_counts, drift_comparison_add_sandbox);
 *   4. flip risk, when asked and the baseline has logprobs: each counted
 *      pair's baseline answer read once (drift_store_response_get) and
 *      scored (drift_comparison_pair_risk), then ranked
 *      (drift_comparison_rank_risk). A flipped pair's baseline answer,
 *      while in hand, goes to the caller's hook (the report's flip
 *      details), so it is not read again and no answer is held past its
 *      flip. */
#include <stdint.h>
#include <string.h>

#include "analysis/compare_runs.h"
#include "suite/workload.h"

/* drift_store_detail_counts's callback: one side's count of one mechanism. */
typedef struct sandbox_side {
    drift_comparison *c;
    int side;
} sandbox_side;

static void sandbox_count(void *user, const char *mech, long count) {
    sandbox_side *u = user;
    drift_comparison_add_sandbox(u->c, u->side, mech, count);
}

/* Step 3: the code sandboxes of both runs. */
static drift_status load_sandboxes(drift_store *st, drift_comparison *c, drift_error *err) {
    drift_status rc = DRIFT_OK;
    const int64_t ids[2] = {c->baseline.id, c->target.id};
    for (int side = 0; side < 2 && !rc; side++) {
        sandbox_side u = {c, side};
        for (int k = 0; k < DRIFT_WL_COUNT && !rc; k++)
            if (wl_traits_of((drift_workload)k)->runs_code)
                rc = drift_store_detail_counts(st, ids[side], (drift_workload)k, "sandbox", sandbox_count, &u, err);
        if (rc) drift_error_prefix(err, "reading code sandboxes: ");
    }
    drift_comparison_sort_sandboxes(c);
    return rc;
}

/* Step 4: each counted pair's baseline answer, read once and scored; a
 * flipped pair's answer also goes to hooks->flip when begin wanted it
 * (want[k] of workload k's first flips), so it is not read again. */
static drift_status load_risk(drift_store *st, drift_comparison *c, const anl_compare_hooks *hooks,
                              const size_t want[DRIFT_WL_COUNT], drift_error *err) {
    if (!drift_comparison_wants_risk(c)) return DRIFT_OK;
    size_t with_lp = 0;
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < DRIFT_WL_COUNT && !rc; k++) {
        drift_wl_result *w = &c->wl[k];
        if (!c->present[k]) continue;
        size_t keep = hooks && hooks->flip ? want[k] : 0, f = 0;
        for (size_t i = 0; i < w->n_pairs && !rc; i++) {
            drift_pair_outcome *p = &w->pairs[i];
            size_t fi = p->flipped ? f++ : (size_t)-1;
            drift_answer a = {0};
            drift_error e = {0};
            drift_status r = drift_store_response_get(st, p->base_response_id, &a, NULL, &e);
            if (r == DRIFT_ERR_NOMEM) rc = drift_error_set(err, r, "out of memory reading baseline logprobs");
            if (!r && a.logprobs_json) {
                with_lp++;
                drift_comparison_pair_risk(c, (drift_workload)k, i, a.logprobs_json);
            }
            if (!r && fi < keep) rc = hooks->flip(hooks->user, c, k, fi, &a, err); /* e.g. the flip's details */
            drift_answer_clear(&a);
        }
    }
    if (rc) return rc;
    return drift_comparison_rank_risk(c, with_lp, err);
}

/* See compare_runs.h. */
drift_status anl_compare_load(drift_store *st, const char *baseline_label, const char *target_label,
                              const drift_compare_opts *opts, const anl_compare_hooks *hooks, drift_comparison **out,
                              drift_error *err) {
    *out = NULL;
    if (!st || !baseline_label || !target_label)
        return drift_error_set(err, DRIFT_ERR_INVALID, "compare needs a store, a baseline and a target label");
    if (!strcmp(baseline_label, target_label))
        return drift_error_set(err, DRIFT_ERR_INVALID, "baseline and target are the same run \"%s\"", baseline_label);
    drift_compare_in in;
    memset(&in, 0, sizeof in);
    drift_embedding_set emb = {0};
    drift_status rc = drift_store_run_get(st, baseline_label, &in.baseline, err);
    if (!rc) rc = drift_store_run_get(st, target_label, &in.target, err);
    if (!rc && (rc = drift_store_load_scored_evaluator(st, in.baseline.id, opts->evaluator, &in.base, err)))
        drift_error_prefix(err, "baseline \"%s\": ", baseline_label);
    if (!rc && (rc = drift_store_load_scored_evaluator(st, in.target.id, opts->evaluator, &in.targ, err)))
        drift_error_prefix(err, "target \"%s\": ", target_label);
    const char *embedder = NULL;
    int64_t lo, hi;
    if (!rc && drift_compare_chat_range(opts, &in.base, &in.targ, &embedder, &lo, &hi)) {
        in.embedder = embedder;
        in.emb = &emb;
        rc = drift_store_embeddings_range(st, embedder, lo, hi, &emb, err);
    }
    drift_comparison *c = NULL;
    if (!rc) rc = drift_compare_sets(&in, opts, &c, err);
    drift_embedding_set_clear(&emb);
    drift_run_info_clear(&in.baseline); /* left empty when taken over */
    drift_run_info_clear(&in.target);
    drift_scored_set_clear(&in.base);
    drift_scored_set_clear(&in.targ);
    int runs_code = 0;
    for (int k = 0; !rc && k < DRIFT_WL_COUNT; k++)
        runs_code |= c->present[k] && wl_traits_of((drift_workload)k)->runs_code;
    if (!rc && runs_code) rc = load_sandboxes(st, c, err);
    size_t want[DRIFT_WL_COUNT] = {0};
    if (!rc && hooks && hooks->begin) rc = hooks->begin(hooks->user, c, want, err);
    if (!rc && opts->risk) rc = load_risk(st, c, hooks, want, err);
    if (rc) {
        drift_comparison_free(c);
        return rc;
    }
    *out = c;
    return DRIFT_OK;
}

/* See compare.h. */
drift_status drift_compare_runs(drift_store *st, const char *baseline_label, const char *target_label,
                                const drift_compare_opts *opts, drift_comparison **out, drift_error *err) {
    drift_compare_opts defaults;
    if (!opts) {
        drift_compare_opts_default(&defaults);
        opts = &defaults;
    }
    drift_store_read_begin(st);
    drift_status rc = anl_compare_load(st, baseline_label, target_label, opts, NULL, out, err);
    drift_store_read_end(st);
    return rc;
}
