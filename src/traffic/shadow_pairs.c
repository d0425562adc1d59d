/* shadow_pairs.c - the pairs a shadow store holds, walked once for both of
 * their readers:
 *
 *   shd_walk_pairs: the primary run's rows merged with the candidate run's
 *   by prompt_rowid (both come ordered by it), each pair's stored texts
 *   loaded, handed to a per-pair callback
 *     ├─ shd_load_state (drift_shadow_start): the counters that resume from
 *     │  the store, the unfinished pairs into the restart backlog, and each
 *     │  finished pair to on_pair (replay_stored: a judge rebuilds its state)
 *     └─ drift_shadow_read_pairs (shadow --report): the finished pairs with
 *        their stored times
 */
#include <stdlib.h>
#include <string.h>

#include "traffic/shadow_internal.h"

/* The time of rowid's answer in t (by prompt_rowid as the store returns
 * them: a binary search, a scan otherwise), 0 when absent. */
static int64_t time_of(const drift_response_time *t, size_t n, int64_t rowid) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].prompt_rowid < rowid) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n && t[lo].prompt_rowid == rowid) return t[lo].unix_s;
    for (size_t i = 0; i < n; i++)
        if (t[i].prompt_rowid == rowid) return t[i].unix_s;
    return 0;
}

drift_status shd_walk_pairs(drift_store *st, int64_t run_primary, int64_t run_candidate, const shd_walk_opts *w,
                            shd_pair_fn fn, void *user, drift_error *err) {
    drift_scored_set a = {0}, b = {0};
    drift_response_time *tm[2] = {NULL, NULL};
    size_t ntm[2] = {0, 0};
    drift_status rc = drift_store_load_scored(st, run_primary, &a, err);
    if (!rc) rc = drift_store_load_scored(st, run_candidate, &b, err);
    if (!rc && w->times) rc = drift_store_response_times(st, run_primary, &tm[0], &ntm[0], err);
    if (!rc && w->times) rc = drift_store_response_times(st, run_candidate, &tm[1], &ntm[1], err);
    size_t j = 0;
    int stop = 0;
    for (size_t i = 0; !rc && !stop && i < a.n; i++) {
        const drift_scored *p = &a.rows[i];
        if (p->replicate) continue;
        while (j < b.n && b.rows[j].prompt_rowid < p->prompt_rowid) j++;
        const drift_scored *c = j < b.n && b.rows[j].prompt_rowid == p->prompt_rowid ? &b.rows[j] : NULL;
        if (!c && !p->is_error && w->finished_only) continue; /* unfinished */
        drift_answer ans, cans;
        drift_prompt pr, cpr;
        memset(&ans, 0, sizeof ans);
        memset(&cans, 0, sizeof cans);
        memset(&pr, 0, sizeof pr);
        memset(&cpr, 0, sizeof cpr);
        drift_answer_clear(&ans);
        drift_answer_clear(&cans);
        rc = drift_store_response_get(st, p->response_id, &ans, &pr, err);
        if (!rc && c && !c->is_error && w->candidate_texts)
            rc = drift_store_response_get(st, c->response_id, &cans, &cpr, err);
        if (!rc) {
            shd_stored_pair sp = {.prompt_rowid = p->prompt_rowid,
                                  .request = pr.input,
                                  .primary_msg = p->is_error ? NULL : ans.text,
                                  .candidate_msg = c && !c->is_error ? cans.text : NULL,
                                  .finished = c != NULL || p->is_error,
                                  .primary_error = p->is_error,
                                  .candidate_error = c ? c->is_error : 0,
                                  .comparable = drift_shadow_comparable(pr.input ? pr.input : "")};
            if (w->times) {
                sp.t_unix_s = time_of(tm[0], ntm[0], p->prompt_rowid);
                int64_t tc = c ? time_of(tm[1], ntm[1], p->prompt_rowid) : 0;
                if (tc > sp.t_unix_s) sp.t_unix_s = tc;
            }
            int r = fn(user, &sp, err);
            if (r < 0) rc = err->code ? err->code : DRIFT_ERR_INVALID;
            else if (r > 0) stop = 1;
            /* the callback may take the texts it keeps (it sets them NULL) */
            if (sp.request != pr.input) pr.input = NULL;
            if (!p->is_error && sp.primary_msg != ans.text) ans.text = NULL;
        }
        drift_answer_clear(&ans);
        drift_answer_clear(&cans);
        drift_prompt_clear(&pr);
        drift_prompt_clear(&cpr);
    }
    drift_scored_set_clear(&a);
    drift_scored_set_clear(&b);
    free(tm[0]);
    free(tm[1]);
    return rc;
}

/* ---- at start: the counters, the backlog, the judge's state ---- */

static int load_one(void *user, shd_stored_pair *p, drift_error *err) {
    drift_shadow *s = user;
    int replay = s->o.replay_stored && s->o.on_pair;
    if (p->primary_error) {
        s->stats.primary_error_pairs++;
        if (replay) shd_call_pair(s, p->request, NULL, NULL, 1, 0, p->comparable);
        return 0;
    }
    s->stats.mirrored++;
    if (p->candidate_error) {
        s->stats.pairs++;
        s->stats.mirror_errors++;
        if (replay) shd_call_pair(s, p->request, p->primary_msg, NULL, 0, 1, p->comparable);
        return 0;
    }
    if (p->finished) {
        s->stats.pairs++;
        if (p->comparable) s->stats.compared++;
        else s->stats.not_comparable++;
        if (replay) shd_call_pair(s, p->request, p->primary_msg, p->candidate_msg, 0, 0, p->comparable);
        return 0;
    }
    if (drift_traffic_privacy_is_hash(p->request ? p->request : "")) {
        s->stats.backlog_hashed++; /* its request is not stored: it cannot be asked again */
        return 0;
    }
    shd_item *it = calloc(1, sizeof *it);
    if (!it) {
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        return -1;
    }
    it->prompt_rowid = p->prompt_rowid;
    it->request = p->request; /* taken: the walker frees it no more */
    it->primary_msg = p->primary_msg;
    it->comparable = p->comparable;
    p->request = NULL;
    p->primary_msg = NULL;
    if (s->backlog_tail) s->backlog_tail->next = it;
    else s->backlog_head = it;
    s->backlog_tail = it;
    s->backlog_n++;
    s->stats.resumed++;
    return 0;
}

drift_status shd_load_state(drift_shadow *s, drift_error *err) {
    shd_walk_opts w = {.candidate_texts = s->o.replay_stored && s->o.on_pair};
    return shd_walk_pairs(s->st, s->run_primary, s->run_candidate, &w, load_one, s, err);
}

/* ---- after the fact: shadow --report ---- */

typedef struct read_ctx {
    drift_shadow_stored_fn fn;
    void *user;
} read_ctx;

static int read_one(void *user, shd_stored_pair *p, drift_error *err) {
    (void)err;
    read_ctx *r = user;
    return r->fn(r->user, p->request, p->primary_msg, p->candidate_msg, p->primary_error, p->candidate_error,
                 p->comparable, p->t_unix_s * 1000)
               ? 1
               : 0;
}

drift_status drift_shadow_read_pairs(drift_store *st, const char *primary_label, const char *candidate_label,
                                     drift_shadow_stored_fn fn, void *user, drift_error *err) {
    const char *labels[2] = {primary_label ? primary_label : "shadow-primary",
                             candidate_label ? candidate_label : "shadow-candidate"};
    int64_t run[2] = {0, 0};
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        drift_run_info info;
        memset(&info, 0, sizeof info);
        if (!(rc = drift_store_run_get(st, labels[k], &info, err))) run[k] = info.id;
        drift_run_info_clear(&info);
    }
    if (rc) return rc;
    read_ctx r = {fn, user};
    shd_walk_opts w = {.candidate_texts = 1, .finished_only = 1, .times = 1};
    return shd_walk_pairs(st, run[0], run[1], &w, read_one, &r, err);
}
