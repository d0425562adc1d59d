/* score.c - the score stage (drift_score_run and the open-once scorer,
 * drift_scorer, in pipeline.h; drift_import_score, the same for an
 * import's private store): every answered, unscored response
 * of the runs asked for goes through its workload's evaluator and the
 * label is stored.
 *
 *   workload      evaluator name      how
 *   math          "math"              drift_eval_math
 *   long_context  "longctx-f1"        drift_eval_long (opts->long_f1_threshold)
 *   code          "code-pass@1"       drift_eval_code, opts->jobs threads
 *   safety        drift_guard_name()  drift_guard_judge on batches
 *   chat          drift_embedder_name() embeddings stored + a NONE score row
 *                                     (so the answer is not embedded again)
 * Each row is the workload's evaluator method (eval/evaluator.h: name, open,
 * cache key, judge / judge_batch / embed, close); the stage dispatches
 * through it by how the method judges (one by one, on threads, in batches,
 * embeddings) and never by the workload.
 *
 * The scorer (drift_scorer, pipeline.h): the evaluators and the code
 * sandbox's check are opened on first use and kept until close, so a
 * caller that scores several times (measure after every chunk) opens each
 * once; each call scores the labels it is given and fills its own summary
 * (an evaluator found unavailable before is reported again with its
 * reason). drift_score_run is open + score (one label, or every run of the
 * store) + close.
 *
 * Plan per run: load_scored says which responses are pending (answered,
 * and no score yet or a latest score of DRIFT_LABEL_ERROR; with
 * opts->rescore, every answered one) and of which workload. An evaluator
 * error (a sandbox that failed, a guard reply that made no sense) is an
 * error for now, not forever: the next score retries it, while a stored
 * PASS / FAIL / NONE stays as it is. A failed *request* is not retried
 * here (it has no answer): `run` asks it again. Evaluators are opened only
 * for workloads with pending work; one that is unavailable
 * (DRIFT_ERR_UNSUPPORTED or a failed open/check) does not fail the run: its
 * pending responses are counted in not_computable with the reason. Texts
 * are then read in chunks of SCORE_CHUNK in key order (prompt_rowid,
 * replicate) by drift_store_scan_pending, so scoring is linear in the run's
 * size; rows of unavailable workloads are passed over without reading
 * their texts.
 * Scores of a chunk are stored in one transaction (drift_store_put_scores).
 * Failed requests (error responses) are never scored.
 * Code: the isolation drift_sandbox_check finds is written into every code
 * score's detail ("sandbox", when the evaluator did not put it there: the
 * code method's judge, eval/code.c), so the store says which mechanism
 * judged each answer (compare reports it), and into summary->code_sandbox
 * once a code answer has been run (the method's isolation()).
 * With opts->cache (score_cache.c), each answer's key (its evaluator, the
 * evaluator's settings, the prompt's reference or request, the answer text)
 * is looked up first: a held verdict is stored as it is (chat: the held
 * embedding), without judging again; a new verdict that is not an error
 * is kept for the next answer with the same key. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "driftbench/pipeline.h"
#include "eval/evaluator.h"
#include "pipeline/score_internal.h"
#include "util/util.h"

#define SCORE_CHUNK 2048
#define SCORE_GUARD_BATCH 64
#define SCORE_EMBED_BATCH 64

void drift_score_opts_default(drift_score_opts *o) {
    memset(o, 0, sizeof *o);
    o->long_f1_threshold = 0.5;
    o->python = "/usr/bin/python3";
}

/* Evaluators opened once (on first use) and kept until drift_scorer_close:
 * a drift_scorer. */
typedef struct drift_scorer {
    drift_score_opts opts_copy;       /* the caller's options (pointers borrowed) */
    const drift_score_opts *opts;     /* &opts_copy */
    drift_store *st;
    drift_score_summary *sum;         /* the current call's summary */
    int avail[DRIFT_WL_COUNT];        /* 1 usable, 0 unavailable, -1 not opened yet */
    char why[DRIFT_WL_COUNT][256];    /* why unavailable (copied into each call's summary) */
    void *ev[DRIFT_WL_COUNT];         /* each workload's open evaluator (eval_method.open) */
    eval_config cfg;                  /* what the options say to the evaluators */
    drift_code_opts code;
    int jobs;
    size_t done, total;
    size_t stored[DRIFT_WL_COUNT];    /* scores stored for the current run */
    size_t no_truth[DRIFT_WL_COUNT];  /* of which NONE: no ground truth */
} drift_scorer;
typedef drift_scorer scorer;

static int cancelled(const scorer *s) { return s->opts->cancel && s->opts->cancel(s->opts->cancel_user); }

/* Marks wl unavailable; reason = prefix + msg (the first reason is kept). */
static void set_unavailable(scorer *s, drift_workload wl, const char *prefix, const char *msg) {
    s->avail[wl] = 0;
    snprintf(s->why[wl], sizeof s->why[wl], "%s%s", prefix, msg);
    if (!s->sum->reason[wl][0]) snprintf(s->sum->reason[wl], sizeof s->sum->reason[wl], "%s", s->why[wl]);
}

/* Opens wl's evaluator (its eval_method row) on first use; an unavailable
 * one's reason goes into the current call's summary (the first reason is
 * kept). */
static int ensure_open(scorer *s, drift_workload wl) {
    if (s->avail[wl] == 0 && !s->sum->reason[wl][0])
        snprintf(s->sum->reason[wl], sizeof s->sum->reason[wl], "%s", s->why[wl]);
    if (s->avail[wl] >= 0) return s->avail[wl];
    const eval_method *m = eval_method_of(wl);
    drift_error e = {0};
    s->avail[wl] = 1;
    if (!m) s->avail[wl] = 0;
    else if (m->open && m->open(&s->cfg, &s->ev[wl], &e) != DRIFT_OK) {
        s->ev[wl] = NULL;
        set_unavailable(s, wl, m->unavailable, e.msg[0] ? e.msg : m->no_spec);
    }
    return s->avail[wl];
}

/* One response to score and what became of it. */
typedef struct item {
    drift_answer *r;
    drift_prompt *p;
    drift_eval_result res;
    int stored;          /* res holds a score to store */
    int reused;          /* res came from the cache */
    const char *evaluator;
    util_buf key;        /* the cache key (empty without a cache) */
} item;

/* ---- the verdict cache's keys ---- */

/* Appends one length-prefixed field, so no two field lists give the same bytes. */
static void key_add(util_buf *k, const char *f) {
    size_t n = f ? strlen(f) : 0;
    buf_printf(k, "%zu:", n);
    if (n) buf_append(k, f, n);
}

/* The evaluator's name as score stores it for workload wl (its evaluator is open). */
static const char *evaluator_name(const scorer *s, drift_workload wl) {
    return eval_method_name(eval_method_of(wl), s->ev[wl]);
}

static void key_add_cb(void *k, const char *f) { key_add(k, f); }

/* Builds it->key: everything the verdict depends on. 0 on success. */
static int item_key(const scorer *s, item *it) {
    drift_workload wl = it->p->workload;
    const eval_method *m = eval_method_of(wl);
    const char *ev = evaluator_name(s, wl);
    if (!ev) return -1;
    util_buf *k = &it->key;
    key_add(k, ev);
    if (m->key) m->key(&s->cfg, s->ev[wl], key_add_cb, k);
    if (m->key_input == EVAL_KEY_REQUEST) key_add(k, it->p->input);
    else if (m->key_input == EVAL_KEY_REFERENCE) key_add(k, it->p->reference_json);
    key_add(k, it->r->text);
    return k->data ? 0 : -1;
}

/* The chat score row of an embedded answer. */
static void chat_result(item *it, const char *name, int dim) {
    memset(&it->res, 0, sizeof it->res);
    it->res.label = DRIFT_LABEL_NONE;
    it->res.value = NAN;
    json_t *d = json_pack("{s:s, s:i}", "embedder", name, "dim", dim);
    it->res.detail_json = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    it->evaluator = name;
    it->stored = 1;
}

/* Looks it up in the cache: 1 when its verdict (chat: its embedding, stored
 * now) was found, 0 to judge it, -1 on a store failure (*rc and err set). */
static int from_cache(scorer *s, item *it, drift_status *rc_out, drift_error *err) {
    if (!s->opts->cache || item_key(s, it)) return 0;
    drift_workload wl = it->p->workload;
    if (eval_method_of(wl)->how == EVAL_EMBED) {
        float *vec = NULL;
        int dim = 0;
        if (!score_cache_get_vec(s->opts->cache, wl, it->key.data, it->key.len, &vec, &dim)) return 0;
        const char *name = evaluator_name(s, wl);
        drift_status rc = drift_store_put_embedding(s->st, it->r->id, name, vec, dim, err);
        free(vec);
        if (rc) {
            *rc_out = rc;
            return -1;
        }
        chat_result(it, name, dim);
    } else {
        if (!score_cache_get(s->opts->cache, wl, it->key.data, it->key.len, &it->res)) return 0;
        it->evaluator = evaluator_name(s, wl);
        it->stored = 1;
    }
    it->reused = 1;
    return 1;
}

/* EVAL_EACH (math, long_context): one answer, here and now. */
static void eval_simple(scorer *s, item *it) {
    drift_error e = {0};
    drift_workload wl = it->p->workload;
    eval_method_of(wl)->judge(&s->cfg, s->ev[wl], it->r->text, it->p->reference_json, &it->res, &e);
    it->evaluator = evaluator_name(s, wl);
    it->stored = 1;
}

/* ---- EVAL_THREADS (code): one answer at a time, in parallel ---- */

typedef struct code_job {
    scorer *s;
    drift_workload wl;
    item **items;
    size_t n;
    size_t next;
    int unsupported;
    char why[256];
    int cancelled;
    pthread_mutex_t mu;
} code_job;

static void *code_worker(void *arg) {
    code_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next++;
        int stop = j->unsupported || j->cancelled;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n || stop) break;
        item *it = j->items[i];
        drift_error e = {0};
        const eval_method *m = eval_method_of(j->wl);
        drift_status rc = m->judge(&j->s->cfg, j->s->ev[j->wl], it->r->text, it->p->reference_json, &it->res, &e);
        if (rc == DRIFT_ERR_CANCELLED) { /* not judged: nothing to store */
            drift_eval_result_clear(&it->res);
            pthread_mutex_lock(&j->mu);
            j->cancelled = 1;
            pthread_mutex_unlock(&j->mu);
            continue;
        }
        if (rc == DRIFT_ERR_UNSUPPORTED) {
            drift_eval_result_clear(&it->res);
            pthread_mutex_lock(&j->mu);
            if (!j->unsupported) snprintf(j->why, sizeof j->why, "%s", e.msg);
            j->unsupported = 1;
            pthread_mutex_unlock(&j->mu);
            continue;
        }
        /* (an evaluator failure is an error label, never a fail: the method's judge) */
        it->evaluator = evaluator_name(j->s, j->wl);
        it->stored = 1;
    }
    return NULL;
}

static void eval_code_batch(scorer *s, drift_workload wl, item **items, size_t n) {
    if (n == 0 || cancelled(s)) return;
    code_job j = {.s = s, .wl = wl, .items = items, .n = n};
    pthread_mutex_init(&j.mu, NULL);
    int nt = s->jobs < (int)n ? s->jobs : (int)n;
    if (nt < 1) nt = 1;
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    int started = 0;
    for (int t = 0; th && t < nt; t++)
        if (pthread_create(&th[t], NULL, code_worker, &j) == 0) started++;
        else break;
    if (started == 0) code_worker(&j);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    free(th);
    pthread_mutex_destroy(&j.mu);
    if (j.unsupported) {
        set_unavailable(s, wl, eval_method_of(wl)->failed, j.why);
    }
}

/* ---- EVAL_BATCH (safety): in guard batches ---- */
static void eval_safety_batch(scorer *s, drift_workload wl, item **items, size_t n) {
    const eval_method *em = eval_method_of(wl);
    for (size_t off = 0; off < n; off += SCORE_GUARD_BATCH) {
        size_t m = n - off < SCORE_GUARD_BATCH ? n - off : SCORE_GUARD_BATCH;
        if (!s->avail[wl] || cancelled(s)) continue;
        const char *req[SCORE_GUARD_BATCH], *ans[SCORE_GUARD_BATCH];
        drift_eval_result res[SCORE_GUARD_BATCH];
        for (size_t i = 0; i < m; i++) {
            req[i] = items[off + i]->p->input;
            ans[i] = items[off + i]->r->text;
        }
        memset(res, 0, sizeof res);
        drift_error e = {0};
        if (em->judge_batch(s->ev[wl], req, ans, m, res, &e) != DRIFT_OK) {
            for (size_t i = 0; i < m; i++) drift_eval_result_clear(&res[i]);
            /* the guard itself failed (unreachable, ...): judge nothing more */
            set_unavailable(s, wl, em->failed, e.msg);
            continue;
        }
        for (size_t i = 0; i < m; i++) {
            items[off + i]->res = res[i];
            items[off + i]->evaluator = evaluator_name(s, wl);
            items[off + i]->stored = 1;
        }
    }
}

/* ---- EVAL_EMBED (chat): embeddings ---- */
static drift_status eval_chat_batch(scorer *s, drift_workload wl, item **items, size_t n, drift_error *err) {
    const eval_method *em = eval_method_of(wl);
    for (size_t off = 0; off < n; off += SCORE_EMBED_BATCH) {
        size_t m = n - off < SCORE_EMBED_BATCH ? n - off : SCORE_EMBED_BATCH;
        if (!s->avail[wl] || cancelled(s)) continue;
        const char *texts[SCORE_EMBED_BATCH];
        for (size_t i = 0; i < m; i++) texts[i] = items[off + i]->r->text;
        float *vecs = NULL;
        int dim = 0;
        drift_error e = {0};
        if (em->embed(s->ev[wl], texts, m, &vecs, &dim, &e) != DRIFT_OK || !vecs || dim <= 0) {
            free(vecs);
            set_unavailable(s, wl, em->failed, e.msg);
            continue;
        }
        const char *name = evaluator_name(s, wl);
        for (size_t i = 0; i < m; i++) {
            item *it = items[off + i];
            drift_status rc = drift_store_put_embedding(s->st, it->r->id, name, vecs + i * (size_t)dim, dim, err);
            if (rc != DRIFT_OK) {
                free(vecs);
                return rc;
            }
            if (it->key.len) score_cache_put_vec(s->opts->cache, it->key.data, it->key.len, vecs + i * (size_t)dim, dim);
            chat_result(it, name, dim);
        }
        free(vecs);
    }
    return DRIFT_OK;
}

/* Evaluates and stores one chunk of responses. */
static drift_status process_chunk(scorer *s, drift_answer *rs, drift_prompt *ps, size_t n, drift_error *err) {
    item *items = calloc(n ? n : 1, sizeof *items);
    item **by_wl[DRIFT_WL_COUNT];
    size_t cnt[DRIFT_WL_COUNT] = {0};
    for (int k = 0; k < DRIFT_WL_COUNT; k++) by_wl[k] = calloc(n ? n : 1, sizeof(item *));
    drift_score *sc = calloc(n ? n : 1, sizeof *sc);
    drift_status rc = DRIFT_OK;
    int oom = !items || !sc;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) oom |= !by_wl[k];
    if (oom) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory scoring %zu responses", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        items[i].r = &rs[i];
        items[i].p = &ps[i];
        items[i].res.label = DRIFT_LABEL_NONE;
        drift_workload wl = ps[i].workload;
        if (rs[i].error || !rs[i].text || wl < 0 || wl >= DRIFT_WL_COUNT) continue;
        if (!ensure_open(s, wl)) continue; /* counted as not computable at the end */
        int hit = from_cache(s, &items[i], &rc, err);
        if (hit < 0) goto out;
        if (!hit) by_wl[wl][cnt[wl]++] = &items[i];
    }
    /* each workload's pending answers, the way its method judges them */
    for (int k = 0; k < DRIFT_WL_COUNT && !rc; k++) {
        const eval_method *m = eval_method_of((drift_workload)k);
        switch (m->how) {
        case EVAL_EACH:
            for (size_t i = 0; i < cnt[k]; i++) eval_simple(s, by_wl[k][i]);
            break;
        case EVAL_THREADS: eval_code_batch(s, (drift_workload)k, by_wl[k], cnt[k]); break;
        case EVAL_BATCH: eval_safety_batch(s, (drift_workload)k, by_wl[k], cnt[k]); break;
        case EVAL_EMBED: rc = eval_chat_batch(s, (drift_workload)k, by_wl[k], cnt[k], err); break;
        }
        const char *iso = m->isolation ? m->isolation(s->ev[k]) : "";
        for (size_t i = 0; i < cnt[k]; i++)
            if (by_wl[k][i]->stored && iso[0]) {
                snprintf(s->sum->code_sandbox, sizeof s->sum->code_sandbox, "%s", iso);
                break;
            }
    }
    if (rc) goto out;
    /* new verdicts for the answers that follow (errors are never kept) */
    for (size_t i = 0; i < n; i++) {
        item *it = &items[i];
        if (it->stored && !it->reused && it->key.len && eval_method_of(it->p->workload)->how != EVAL_EMBED)
            score_cache_put(s->opts->cache, it->key.data, it->key.len, &it->res);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->stored) continue;
        sc[m].response_id = it->r->id;
        sc[m].evaluator = it->evaluator;
        sc[m].label = it->res.label;
        sc[m].value = it->res.value;
        sc[m].detail_json = it->res.detail_json;
        m++;
    }
    rc = drift_store_put_scores(s->st, sc, m, err);
    if (rc == DRIFT_OK) {
        for (size_t i = 0; i < n; i++) {
            item *it = &items[i];
            if (!it->stored) continue;
            drift_workload wl = it->p->workload;
            s->stored[wl]++;
            s->sum->reused[wl] += (size_t)it->reused;
            if (it->res.label == DRIFT_LABEL_ERROR) s->sum->eval_errors[wl]++;
            else if (it->res.label == DRIFT_LABEL_NONE && eval_method_of(wl)->how != EVAL_EMBED) s->no_truth[wl]++;
            else s->sum->scored[wl]++;
        }
    }
    s->done += n;
    if (s->opts->progress) s->opts->progress(s->opts->progress_user, "score", s->done, s->total);
out:
    if (items)
        for (size_t i = 0; i < n; i++) {
            drift_eval_result_clear(&items[i].res);
            buf_free(&items[i].key);
        }
    free(items);
    for (int k = 0; k < DRIFT_WL_COUNT; k++) free(by_wl[k]);
    free(sc);
    return rc;
}

/* drift_store_scan_pending's want_text: texts only for the workloads that
 * can be judged now (opening their evaluators on first sight). */
static int want_text(void *user, drift_workload wl) {
    return wl != DRIFT_WL_UNKNOWN && ensure_open(user, wl);
}

/* Reads the pending answers SCORE_CHUNK at a time (drift_store_scan_pending:
 * key order, each chunk after the last key of the one before, so the cost
 * is linear in the run's size however many rows stay unscored) and scores
 * each chunk before reading the next. */
static drift_status score_scan(scorer *s, int64_t run_id, drift_error *err) {
    drift_answer *rs = calloc(SCORE_CHUNK, sizeof *rs);
    drift_prompt *ps = calloc(SCORE_CHUNK, sizeof *ps);
    drift_status rc = DRIFT_OK;
    if (!rs || !ps) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_scan_cursor cur = {0};
    while (!rc) {
        size_t n = 0;
        rc = drift_store_scan_pending(s->st, run_id, s->opts->rescore, &cur, SCORE_CHUNK, want_text, s, rs, ps, &n,
                                      err);
        if (!rc && n) rc = process_chunk(s, rs, ps, n, err);
        for (size_t i = 0; i < n; i++) {
            drift_answer_clear(&rs[i]);
            drift_prompt_clear(&ps[i]);
        }
        if (!rc && cancelled(s)) rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "scoring interrupted");
        if (n < SCORE_CHUNK) break;
    }
    free(rs);
    free(ps);
    return rc;
}

static drift_status score_one_run(scorer *s, const drift_run_info *run, drift_error *err) {
    drift_scored_set set;
    drift_status rc = drift_store_load_scored(s->st, run->id, &set, err);
    if (rc) return drift_error_prefix(err, "score %s: ", run->label);
    size_t npend[DRIFT_WL_COUNT] = {0}, total = 0;
    for (size_t i = 0; i < set.n; i++) {
        const drift_scored *r = &set.rows[i];
        if (r->is_error || r->workload < 0 || r->workload >= DRIFT_WL_COUNT) continue;
        if (r->evaluator && r->label != DRIFT_LABEL_ERROR && !s->opts->rescore) {
            s->sum->already[r->workload]++;
            continue;
        }
        npend[r->workload]++;
        total++;
    }
    s->total += total;
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (npend[k]) ensure_open(s, (drift_workload)k);
    memset(s->stored, 0, sizeof s->stored);
    memset(s->no_truth, 0, sizeof s->no_truth);
    if (total) rc = score_scan(s, run->id, err);
    /* whatever is still without a label could not be computed */
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        size_t left = npend[k] > s->stored[k] ? npend[k] - s->stored[k] : 0;
        s->sum->not_computable[k] += left + s->no_truth[k];
        if (s->no_truth[k] && !s->sum->reason[k][0])
            snprintf(s->sum->reason[k], sizeof s->sum->reason[k],
                     "%s: %zu references have no ground truth (\"%s\")", drift_workload_name((drift_workload)k),
                     s->no_truth[k], DRIFT_LONG_NO_GROUND_TRUTH);
        if (left && !s->sum->reason[k][0])
            snprintf(s->sum->reason[k], sizeof s->sum->reason[k], "%s: evaluator unavailable",
                     drift_workload_name((drift_workload)k));
    }
    drift_scored_set_clear(&set);
    if (rc) drift_error_prefix(err, "score %s: ", run->label);
    return rc;
}

/* ---- the scorer: open once, score given labels, close ---- */

drift_status drift_scorer_open(drift_store *st, const drift_score_opts *opts, drift_scorer **out, drift_error *err) {
    *out = NULL;
    if (!st) return drift_error_set(err, DRIFT_ERR_INVALID, "score needs a store");
    scorer *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (opts) s->opts_copy = *opts;
    else drift_score_opts_default(&s->opts_copy);
    s->opts = &s->opts_copy;
    s->st = st;
    opts = s->opts;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) s->avail[k] = eval_method_of((drift_workload)k)->open ? -1 : 1;
    drift_code_opts_default(&s->code);
    if (opts->python) s->code.python = opts->python;
    s->code.unsafe_exec = opts->unsafe_code_exec;
    s->code.cancel = opts->cancel;
    s->code.cancel_user = opts->cancel_user;
    s->jobs = opts->jobs > 0 ? opts->jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (s->jobs < 1) s->jobs = 1;
    s->cfg = (eval_config){.guard_spec = opts->guard_spec, .embedder_spec = opts->embedder_spec,
                           .long_f1_threshold = opts->long_f1_threshold, .code = &s->code};
    *out = s;
    return DRIFT_OK;
}

void drift_scorer_close(drift_scorer *s) {
    if (!s) return;
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (s->ev[k] && eval_method_of((drift_workload)k)->close) eval_method_of((drift_workload)k)->close(s->ev[k]);
    free(s);
}

/* Scores the n runs in order into summary (zeroed first). */
static drift_status scorer_score_runs(scorer *s, const drift_run_info *runs, size_t n, drift_score_summary *summary,
                                      drift_error *err) {
    memset(summary, 0, sizeof *summary);
    s->sum = summary;
    s->done = s->total = 0;
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = score_one_run(s, &runs[i], err);
    s->sum = NULL;
    return rc;
}

drift_status drift_scorer_score_labels(drift_scorer *s, const char *const *labels, size_t n,
                                       drift_score_summary *summary, drift_error *err) {
    drift_score_summary local;
    if (!summary) summary = &local;
    memset(summary, 0, sizeof *summary);
    drift_run_info *runs = calloc(n ? n : 1, sizeof *runs);
    if (!runs) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status rc = DRIFT_OK;
    size_t got = 0;
    for (; got < n && !rc; got++) rc = drift_store_run_get(s->st, labels[got], &runs[got], err);
    if (!rc) rc = scorer_score_runs(s, runs, n, summary, err);
    drift_run_info_array_free(runs, got);
    return rc;
}

/* See pipeline.h: a scorer over one label or every run of the store.
 * Unavailable evaluators are reported in summary, not as an error; errors
 * are store failures and running out of memory. */
drift_status drift_score_run(drift_store *st, const char *label, const drift_score_opts *opts,
                             drift_score_summary *summary, drift_error *err) {
    drift_score_summary local;
    if (!summary) summary = &local;
    memset(summary, 0, sizeof *summary);
    scorer *s = NULL;
    drift_status rc = drift_scorer_open(st, opts, &s, err);
    if (rc) return rc;
    if (label) {
        rc = drift_scorer_score_labels(s, &label, 1, summary, err);
    } else {
        drift_run_info *runs = NULL;
        size_t nruns = 0;
        rc = drift_store_run_list(st, &runs, &nruns, err);
        if (!rc) rc = scorer_score_runs(s, runs, nruns, summary, err);
        drift_run_info_array_free(runs, nruns);
    }
    drift_scorer_close(s);
    return rc;
}

/* See pipeline.h: the import's scoring (import.h's drift_import_score_fn),
 * drift_score_run with rescore; why: the last workload's reason an
 * evaluator could not run. */
drift_status drift_import_score(drift_store *st, const char *label, const drift_import_store_opts *o, char *why,
                                size_t cap, drift_error *err) {
    drift_score_summary ss;
    memset(&ss, 0, sizeof ss);
    if (why && cap) why[0] = '\0';
    drift_score_opts so;
    drift_score_opts_default(&so);
    so.rescore = 1;
    if (o) {
        so.unsafe_code_exec = o->unsafe_code_exec;
        so.python = o->python;
        so.jobs = o->jobs;
    }
    drift_status rc = drift_score_run(st, label, &so, &ss, err);
    if (rc) return rc;
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (ss.not_computable[w] && why && cap) snprintf(why, cap, "%s", ss.reason[w]);
    return DRIFT_OK;
}
