/* store_scores.c - scores, embeddings and the reads of the score stage
 * and the analyses (store.h).
 *
 *   load_scored          every response of a run with its latest score, from
 *                        two covering indexes (see store.c's top); the
 *                        _evaluator form keeps only one evaluator's scores
 *                        (an imported run carries the tool's verdict and
 *                        ours side by side), and when that evaluator scored
 *                        nothing of the run, names the ones that did
 *   scan_pending         the score stage's chunks: answers without a score,
 *                        or whose latest score is an evaluator error, read in
 *                        (prompt_rowid, replicate) order by keyset pagination
 *                        so scoring stays linear in the run's size
 *   put_scores           one transaction per batch (a rewritten score gets
 *                        a new, largest id: it becomes the latest)
 *   embeddings           point reads and writes, and one range scan of the
 *                        primary key for compare's chat pairs
 *   answer_text          the cheap point read (text, has-logprobs) that
 *                        divergences of many flips make inside one snapshot
 *   detail_counts, top_embedder   the grouped reads of compare and monitor */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/util.h"

/* ---- load_scored: one query, strings in an arena ---- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    char data[];
} arena_chunk;

static char *arena_strdup(arena_chunk **head, const char *s, size_t n) {
    arena_chunk *c = *head;
    if (!c || c->cap - c->used < n + 1) {
        size_t cap = n + 1 > 1u << 20 ? n + 1 : 1u << 20;
        arena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->next = c;
        nc->used = 0;
        nc->cap = cap;
        *head = c = nc;
    }
    char *p = c->data + c->used;
    memcpy(p, s, n);
    p[n] = '\0';
    c->used += n + 1;
    return p;
}

static void arena_free(arena_chunk *c) {
    while (c) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* Copies column i into the arena, reusing *last when the text repeats
 * (suite and evaluator names repeat on every row). */
static const char *arena_col(arena_chunk **a, store_q *s, int i, const char **last, int *oom) {
    const char *t = sq_text(s, i);
    if (!t) return NULL;
    size_t n = (size_t)sq_bytes(s, i);
    if (last && *last && strcmp(*last, t) == 0) return *last;
    char *p = arena_strdup(a, t, n);
    if (!p) *oom = 1;
    if (last) *last = p;
    return p;
}

/* Position of each response id among the rows: a dense table over
 * [min_id, max_id] when the ids are compact (the usual case: a run's
 * responses are inserted in batches), else a sorted (id, row) list. */
typedef struct {
    int64_t min_id, max_id;
    int32_t *dense; /* dense[id - min_id] = row or -1 */
    int64_t *sorted_ids;
    int32_t *sorted_rows;
    size_t n;
} id_index;

static int id_row_cmp(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static int id_index_build(id_index *ix, const drift_scored *rows, size_t n) {
    memset(ix, 0, sizeof *ix);
    ix->n = n;
    if (n == 0) return 0;
    ix->min_id = ix->max_id = rows[0].response_id;
    for (size_t i = 1; i < n; i++) {
        if (rows[i].response_id < ix->min_id) ix->min_id = rows[i].response_id;
        if (rows[i].response_id > ix->max_id) ix->max_id = rows[i].response_id;
    }
    uint64_t span = (uint64_t)(ix->max_id - ix->min_id) + 1;
    if (span <= 4 * (uint64_t)n + 1024) {
        ix->dense = malloc(span * sizeof *ix->dense);
        if (!ix->dense) return -1;
        memset(ix->dense, 0xff, span * sizeof *ix->dense);
        for (size_t i = 0; i < n; i++) ix->dense[rows[i].response_id - ix->min_id] = (int32_t)i;
        return 0;
    }
    int64_t *pairs = malloc(n * 2 * sizeof *pairs);
    ix->sorted_ids = malloc(n * sizeof *ix->sorted_ids);
    ix->sorted_rows = malloc(n * sizeof *ix->sorted_rows);
    if (!pairs || !ix->sorted_ids || !ix->sorted_rows) {
        free(pairs);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        pairs[2 * i] = rows[i].response_id;
        pairs[2 * i + 1] = (int64_t)i;
    }
    qsort(pairs, n, 2 * sizeof *pairs, id_row_cmp);
    for (size_t i = 0; i < n; i++) {
        ix->sorted_ids[i] = pairs[2 * i];
        ix->sorted_rows[i] = (int32_t)pairs[2 * i + 1];
    }
    free(pairs);
    return 0;
}

static int32_t id_index_find(const id_index *ix, int64_t id) {
    if (ix->n == 0 || id < ix->min_id || id > ix->max_id) return -1;
    if (ix->dense) return ix->dense[id - ix->min_id];
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->sorted_ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ix->n && ix->sorted_ids[lo] == id ? ix->sorted_rows[lo] : -1;
}

static void id_index_free(id_index *ix) {
    free(ix->dense);
    free(ix->sorted_ids);
    free(ix->sorted_rows);
}

/* Two sequential reads instead of a join with two index seeks per row:
 *   1. responses_scan (covering) joined to prompts, in (prompt, replicate)
 *      order -> the rows, unscored;
 *   2. scores_latest (covering) over the run's response-id range, in
 *      (response_id, id) order -> each score lands on its row; a later score
 *      of the same response overwrites an earlier one, so the latest wins.
 * Scores of other runs inside the id range are read and skipped. */
static drift_status load_scored(drift_store *st, int64_t run_id, const char *evaluator, size_t *n_matched,
                                drift_scored_set *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    *n_matched = 0;
    /* Row count first so the array is allocated once. */
    store_q *c = sq_prepare(st, "SELECT count(*) FROM responses INDEXED BY responses_scan WHERE run_id=?", err);
    if (!c) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(c, 1, run_id);
    size_t total = 0;
    if (sq_step(c) == SQ_ROW) total = (size_t)sq_int64(c, 0);
    sq_done(c);
    if (total > INT32_MAX) return drift_error_set(err, DRIFT_ERR_STORE, "%s: run %lld has too many responses (%zu)",
                                                  st->shown, (long long)run_id, total);

    store_q *s = sq_prepare(st,
                                   "SELECT r.id, r.prompt_rowid, p.prompt_id, p.suite, p.workload, r.replicate, "
                                   "r.failed FROM responses r INDEXED BY responses_scan "
                                   "JOIN prompts p ON p.id = r.prompt_rowid "
                                   "WHERE r.run_id = ? ORDER BY r.prompt_rowid, r.replicate",
                                   err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, run_id);
    drift_scored *rows = malloc((total ? total : 1) * sizeof *rows);
    arena_chunk *arena = NULL;
    id_index ix = {0};
    if (!rows) {
        sq_done(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory loading %zu responses", total);
    }
    const char *last_suite = NULL, *last_eval = NULL, *last_wl_text = NULL, *last_pid = NULL;
    int64_t last_prompt = -1;
    drift_workload last_wl = DRIFT_WL_UNKNOWN;
    size_t n = 0;
    int rc, oom = 0;
    while ((rc = sq_step(s)) == SQ_ROW) {
        if (n == total) { /* rows appeared since the count (another writer) */
            size_t ncap = total ? total * 2 : 64;
            drift_scored *nr = realloc(rows, ncap * sizeof *rows);
            if (!nr || ncap > INT32_MAX) {
                if (nr) rows = nr;
                oom = 1;
                break;
            }
            rows = nr;
            total = ncap;
        }
        drift_scored *d = &rows[n];
        d->response_id = sq_int64(s, 0);
        d->prompt_rowid = sq_int64(s, 1);
        if (d->prompt_rowid != last_prompt) { /* replicates share their prompt's strings */
            last_prompt = d->prompt_rowid;
            last_pid = arena_col(&arena, s, 2, NULL, &oom);
        }
        d->prompt_id = last_pid;
        d->suite = arena_col(&arena, s, 3, &last_suite, &oom);
        const char *wl = sq_text(s, 4);
        if (!last_wl_text || !wl || strcmp(wl, last_wl_text) != 0) {
            last_wl = drift_workload_parse(wl);
            last_wl_text = last_wl == DRIFT_WL_UNKNOWN ? NULL : drift_workload_name(last_wl);
        }
        d->workload = last_wl;
        d->replicate = sq_int(s, 5);
        d->is_error = sq_int(s, 6) != 0;
        d->label = DRIFT_LABEL_NONE;
        d->value = NAN;
        d->evaluator = NULL;
        if (oom) break;
        n++;
    }
    sq_done(s);
    s = NULL;
    if (oom) goto nomem;
    if (rc != SQ_DONE) goto dberr;

    if (n > 0) {
        if (id_index_build(&ix, rows, n)) goto nomem;
        s = sq_prepare(st,
                         evaluator ? "SELECT response_id, label, value, evaluator FROM scores INDEXED BY scores_latest "
                                     "WHERE response_id BETWEEN ? AND ? AND evaluator = ? ORDER BY response_id, id"
                                   : "SELECT response_id, label, value, evaluator FROM scores INDEXED BY scores_latest "
                                     "WHERE response_id BETWEEN ? AND ? ORDER BY response_id, id",
                         err);
        if (!s) goto fail;
        sq_bind_int64(s, 1, ix.min_id);
        sq_bind_int64(s, 2, ix.max_id);
        if (evaluator) sq_bind_text(s, 3, evaluator);
        while ((rc = sq_step(s)) == SQ_ROW) {
            int32_t i = id_index_find(&ix, sq_int64(s, 0));
            if (i < 0) continue; /* another run's response */
            drift_scored *d = &rows[i];
            (*n_matched)++;
            d->label = sq_int(s, 1);
            d->value = sq_is_null(s, 2) ? NAN : sq_double(s, 2);
            d->evaluator = arena_col(&arena, s, 3, &last_eval, &oom);
            if (oom) break;
        }
        sq_done(s);
        s = NULL;
        if (oom) goto nomem;
        if (rc != SQ_DONE) goto dberr;
    }
    id_index_free(&ix);
    out->rows = rows;
    out->n = n;
    out->arena = arena;
    return DRIFT_OK;
nomem:
    drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory loading responses");
    goto fail;
dberr:
    store_db_error(st, err, "loading scored responses");
fail:
    free(rows);
    arena_free(arena);
    id_index_free(&ix);
    return err && err->code ? err->code : DRIFT_ERR_STORE;
}

drift_status drift_store_load_scored(drift_store *st, int64_t run_id, drift_scored_set *out, drift_error *err) {
    size_t matched;
    return load_scored(st, run_id, NULL, &matched, out, err);
}

/* The distinct evaluators that scored some response of run_id, as
 * "a, b, c" (or "none") into buf. */
static drift_status run_evaluators(drift_store *st, int64_t run_id, char *buf, size_t cap, drift_error *err) {
    store_q *s = sq_prepare(st,
                                         "SELECT DISTINCT s.evaluator FROM responses r INDEXED BY responses_scan "
                                         "JOIN scores s ON s.response_id = r.id WHERE r.run_id = ? ORDER BY 1",
                                         err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, run_id);
    size_t len = 0;
    int rc;
    buf[0] = '\0';
    while ((rc = sq_step(s)) == SQ_ROW) {
        const char *e = sq_text(s, 0);
        if (!e) continue;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", e);
        if (w < 0 || (size_t)w >= cap - len) { /* cut: say so */
            if (cap > 5) snprintf(buf + cap - 5, 5, " ...");
            len = cap - 1;
            break;
        }
        len += (size_t)w;
    }
    sq_done(s);
    if (rc != SQ_ROW && rc != SQ_DONE) return store_db_error(st, err, "listing a run's evaluators");
    if (!len) snprintf(buf, cap, "none");
    return DRIFT_OK;
}

drift_status drift_store_load_scored_evaluator(drift_store *st, int64_t run_id, const char *evaluator,
                                               drift_scored_set *out, drift_error *err) {
    size_t matched = 0;
    drift_status rc = load_scored(st, run_id, evaluator, &matched, out, err);
    if (rc || !evaluator || matched > 0) return rc;
    drift_scored_set_clear(out);
    char names[1024];
    if ((rc = run_evaluators(st, run_id, names, sizeof names, err)) != DRIFT_OK) return rc;
    return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "run %lld has no score by evaluator \"%s\" (its evaluators: %s)",
                           (long long)run_id, evaluator, names);
}

void drift_scored_set_clear(drift_scored_set *s) {
    if (!s) return;
    free(s->rows);
    arena_free(s->arena);
    memset(s, 0, sizeof *s);
}

drift_status drift_store_unscored(drift_store *st, int64_t run_id, const char *evaluator, size_t limit,
                                  drift_answer **resp, drift_prompt **prompts, size_t *n, drift_error *err) {
    *resp = NULL;
    *prompts = NULL;
    *n = 0;
    store_q *s = sq_prepare(
        st,
        "SELECT " STORE_RESP_COLS " FROM responses r JOIN prompts p ON p.id = r.prompt_rowid "
        "WHERE r.run_id = ?1 AND r.failed = 0 AND NOT EXISTS "
        "(SELECT 1 FROM scores x WHERE x.response_id = r.id AND (?2 IS NULL OR x.evaluator = ?2)) "
        "ORDER BY r.prompt_rowid, r.replicate LIMIT ?3",
        err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, run_id);
    sq_bind_text(s, 2, evaluator);
    sq_bind_int64(s, 3, limit && limit < (size_t)INT64_MAX ? (int64_t)limit : INT64_MAX);
    drift_answer *rs = NULL;
    drift_prompt *ps = NULL;
    size_t cnt = 0, cap = 0;
    int rc;
    drift_status ds = DRIFT_OK;
    while ((rc = sq_step(s)) == SQ_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 64;
            drift_answer *nr = realloc(rs, cap * sizeof *rs);
            if (nr) rs = nr;
            drift_prompt *np = nr ? realloc(ps, cap * sizeof *ps) : NULL;
            if (np) ps = np;
            if (!nr || !np) {
                ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading unscored responses");
                break;
            }
        }
        ds = store_answer_from_row(s, &rs[cnt], &ps[cnt]);
        if (ds == DRIFT_ERR_NOMEM) {
            drift_error_set(err, ds, "out of memory reading unscored responses");
            break;
        }
        if (ds) { /* corrupt logprobs: keep the response, without them */
            ds = DRIFT_OK;
        }
        cnt++;
    }
    sq_done(s);
    if (!ds && rc != SQ_DONE) ds = store_db_error(st, err, "reading unscored responses");
    if (ds) {
        for (size_t i = 0; i < cnt; i++) {
            drift_answer_clear(&rs[i]);
            drift_prompt_clear(&ps[i]);
        }
        free(rs);
        free(ps);
        return ds;
    }
    *resp = rs;
    *prompts = ps;
    *n = cnt;
    return DRIFT_OK;
}

/* ---- scores and embeddings ---- */

drift_status drift_store_put_scores(drift_store *st, const drift_score *sc, size_t n, drift_error *err) {
    if (n == 0) return DRIFT_OK;
    drift_status ds = store_tx_begin(st, err);
    if (ds) return ds;
    sq_pipeline_begin(st);
    for (size_t i = 0; i < n; i++) {
        store_q *s = sq_cached(st, STORE_STMT_PUT_SCORE,
                               SQ_SQL(st,
                                      "INSERT OR REPLACE INTO scores(response_id,evaluator,label,value,detail) "
                                      "VALUES(?,?,?,?,?)",
                                      "INSERT INTO scores(response_id,evaluator,label,value,detail) VALUES(?,?,?,?,?) "
                                      "ON CONFLICT(response_id,evaluator) DO UPDATE SET "
                                      "id=nextval(pg_get_serial_sequence('scores','id')), label=excluded.label, "
                                      "value=excluded.value, detail=excluded.detail"),
                               err);
        if (!s) goto fail;
        if (!sc[i].evaluator || !*sc[i].evaluator) {
            drift_error_set(err, DRIFT_ERR_INVALID, "score %zu of the batch has no evaluator name", i);
            goto fail;
        }
        sq_bind_int64(s, 1, sc[i].response_id);
        sq_bind_text(s, 2, sc[i].evaluator);
        sq_bind_int64(s, 3, sc[i].label);
        if (!isnan(sc[i].value)) sq_bind_double(s, 4, sc[i].value);
        sq_bind_text(s, 5, sc[i].detail_json);
        int rc = sq_step(s);
        sq_reset(s);
        if (rc != SQ_DONE) {
            drift_error_set(err, DRIFT_ERR_STORE, "%s: storing the score of response %lld by %s: %s", st->shown,
                            (long long)sc[i].response_id, sc[i].evaluator, sq_errmsg(st));
            goto fail;
        }
    }
    long bad = -1;
    if (sq_pipeline_end(st, &bad, NULL)) {
        if (bad >= 0 && (size_t)bad < n)
            drift_error_set(err, DRIFT_ERR_STORE, "%s: storing the score of response %lld by %s: %s", st->shown,
                            (long long)sc[bad].response_id, sc[bad].evaluator, sq_errmsg(st));
        else
            store_db_error(st, err, "storing scores");
        goto fail;
    }
    return store_tx_commit(st, err);
fail:
    return store_pipeline_abort(st, err);
}

drift_status drift_store_put_embedding(drift_store *st, int64_t response_id, const char *embedder,
                                       const float *vec, int dim, drift_error *err) {
    if (!embedder || dim <= 0 || !vec)
        return drift_error_set(err, DRIFT_ERR_INVALID, "embedding needs an embedder name and dim > 0");
    store_q *s = sq_prepare(
        st,
        "INSERT INTO embeddings(response_id,embedder,dim,vec) VALUES(?,?,?,?) "
        "ON CONFLICT(response_id,embedder) DO UPDATE SET dim=excluded.dim, vec=excluded.vec",
        err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, response_id);
    sq_bind_text(s, 2, embedder);
    sq_bind_int64(s, 3, dim);
    sq_bind_blob(s, 4, vec, (size_t)dim * sizeof(float));
    int rc = sq_step(s);
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "storing an embedding");
    return DRIFT_OK;
}

drift_status drift_store_get_embedding(drift_store *st, int64_t response_id, const char *embedder, float **vec,
                                       int *dim, drift_error *err) {
    *vec = NULL;
    *dim = 0;
    store_q *s =
        sq_prepare(st, "SELECT dim, vec FROM embeddings WHERE response_id=? AND embedder=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, response_id);
    sq_bind_text(s, 2, embedder ? embedder : "");
    int rc = sq_step(s);
    drift_status ds = DRIFT_OK;
    if (rc == SQ_ROW) {
        int d = sq_int(s, 0);
        size_t bytes = (size_t)sq_bytes(s, 1);
        if (d <= 0 || bytes != (size_t)d * sizeof(float)) {
            ds = drift_error_set(err, DRIFT_ERR_STORE,
                                 "%s: embedding of response %lld by %s is corrupt (dim %d, %zu bytes)", st->shown,
                                 (long long)response_id, embedder ? embedder : "", d, bytes);
        } else {
            float *v = malloc(bytes);
            if (!v) {
                ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading an embedding");
            } else {
                memcpy(v, sq_blob(s, 1), bytes);
                *vec = v;
                *dim = d;
            }
        }
    } else if (rc == SQ_DONE) {
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "no embedding of response %lld by %s",
                             (long long)response_id, embedder ? embedder : "(null)");
    } else {
        ds = store_db_error(st, err, "reading an embedding");
    }
    sq_done(s);
    return ds;
}


static int embedding_cmp(const void *a, const void *b) {
    int64_t x = ((const drift_embedding *)a)->response_id, y = ((const drift_embedding *)b)->response_id;
    return (x > y) - (x < y);
}

drift_status drift_store_embeddings_range(drift_store *st, const char *embedder, int64_t lo, int64_t hi,
                                          drift_embedding_set *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    store_q *s = sq_prepare(
        st, "SELECT response_id, dim, vec FROM embeddings WHERE embedder = ?1 AND response_id BETWEEN ?2 AND ?3", err);
    if (!s) return store_err_code(err);
    sq_bind_text(s, 1, embedder ? embedder : "");
    sq_bind_int64(s, 2, lo);
    sq_bind_int64(s, 3, hi);
    size_t cap = 0, pool_len = 0, pool_cap = 0;
    size_t *offs = NULL; /* offs[i]: rows[i]'s vector in the pool, which may still move */
    drift_status rc = DRIFT_OK;
    int step;
    while ((step = sq_step(s)) == SQ_ROW) {
        int dim = sq_int(s, 1);
        size_t bytes = (size_t)sq_bytes(s, 2);
        if (dim <= 0 || bytes != (size_t)dim * sizeof(float)) {
            rc = drift_error_set(err, DRIFT_ERR_STORE, "embedding of response %lld by %s is corrupt (dim %d, %zu bytes)",
                                 (long long)sq_int64(s, 0), embedder, dim, bytes);
            break;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 256;
            drift_embedding *nr = realloc(out->rows, cap * sizeof *nr);
            size_t *no = nr ? realloc(offs, cap * sizeof *no) : NULL;
            if (nr) out->rows = nr;
            if (no) offs = no;
            if (!nr || !no) {
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading embeddings");
                break;
            }
        }
        if (pool_len + (size_t)dim > pool_cap) {
            size_t nc = pool_cap ? pool_cap * 2 : 4096;
            while (nc < pool_len + (size_t)dim) nc *= 2;
            float *np = realloc(out->pool, nc * sizeof *np);
            if (!np) {
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading embeddings");
                break;
            }
            out->pool = np;
            pool_cap = nc;
        }
        memcpy(out->pool + pool_len, sq_blob(s, 2), bytes);
        out->rows[out->n].response_id = sq_int64(s, 0);
        out->rows[out->n].dim = dim;
        offs[out->n] = pool_len;
        pool_len += (size_t)dim;
        out->n++;
    }
    if (rc == DRIFT_OK && step != SQ_DONE) rc = store_db_error(st, err, "reading embeddings");
    sq_done(s);
    if (rc == DRIFT_OK) {
        for (size_t i = 0; i < out->n; i++) out->rows[i].vec = out->pool + offs[i];
        if (out->n > 1) qsort(out->rows, out->n, sizeof *out->rows, embedding_cmp); /* in order already, as a rule */
    } else {
        drift_embedding_set_clear(out);
    }
    free(offs);
    return rc;
}

void drift_embedding_set_clear(drift_embedding_set *s) {
    if (!s) return;
    free(s->rows);
    free(s->pool);
    memset(s, 0, sizeof *s);
}

drift_status drift_store_top_embedder(drift_store *st, int64_t run_a, int64_t run_b, char *out, size_t cap,
                                      drift_error *err) {
    if (cap) out[0] = '\0';
    store_q *q = sq_prepare(
        st,
        SQ_SQL(st,
               "SELECT e.embedder, COUNT(*) AS n FROM embeddings e JOIN responses r ON r.id = e.response_id "
               "WHERE r.run_id IN (?1, ?2) GROUP BY e.embedder ORDER BY n DESC, e.embedder LIMIT 1",
               "SELECT e.embedder, COUNT(*) AS n FROM embeddings e JOIN responses r ON r.id = e.response_id "
               "WHERE r.run_id IN (?1, ?2) GROUP BY e.embedder ORDER BY n DESC, e.embedder COLLATE \"C\" LIMIT 1"),
        err);
    if (!q) return store_err_code(err);
    sq_bind_int64(q, 1, run_a);
    sq_bind_int64(q, 2, run_b);
    int rc = sq_step(q);
    drift_status ds = DRIFT_OK;
    if (rc == SQ_ROW) snprintf(out, cap, "%s", sq_text(q, 0));
    else if (rc != SQ_DONE) ds = store_db_error(st, err, "listing embedders");
    sq_done(q);
    return ds;
}

drift_status drift_store_detail_counts(drift_store *st, int64_t run_id, drift_workload wl, const char *field,
                                       drift_detail_count_fn fn, void *user, drift_error *err) {
    if (!field || !fn) return drift_error_set(err, DRIFT_ERR_INVALID, "detail counts need a field and a callback");
    store_q *q = sq_prepare(
        st,
        SQ_SQL(st,
               "SELECT CASE WHEN json_valid(s.detail) THEN json_extract(s.detail, ?5) END AS m, count(*) "
               "FROM responses r JOIN prompts p ON p.id = r.prompt_rowid JOIN scores s ON s.response_id = r.id "
               "WHERE r.run_id = ?1 AND r.failed = 0 AND p.workload = ?2 AND s.label IN (?3, ?4) "
               "AND s.id = (SELECT max(x.id) FROM scores x WHERE x.response_id = r.id) "
               "GROUP BY m ORDER BY count(*) DESC, m",
               /* drift_json_field: store_pg.c's schema; ?5 is the field's name there */
               "SELECT drift_json_field(s.detail, ?5) AS m, count(*) "
               "FROM responses r JOIN prompts p ON p.id = r.prompt_rowid JOIN scores s ON s.response_id = r.id "
               "WHERE r.run_id = ?1 AND r.failed = 0 AND p.workload = ?2 AND s.label IN (?3, ?4) "
               "AND s.id = (SELECT max(x.id) FROM scores x WHERE x.response_id = r.id) "
               "GROUP BY 1 ORDER BY 2 DESC, 1"),
        err);
    if (!q) return store_err_code(err);
    char *path = st->kind == STORE_PG ? util_strdup(field) : util_asprintf("$.\"%s\"", field);
    if (!path) {
        sq_done(q);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    sq_bind_int64(q, 1, run_id);
    sq_bind_text(q, 2, drift_workload_name(wl));
    sq_bind_int64(q, 3, DRIFT_LABEL_PASS);
    sq_bind_int64(q, 4, DRIFT_LABEL_FAIL);
    sq_bind_text(q, 5, path);
    int step;
    while ((step = sq_step(q)) == SQ_ROW)
        fn(user, sq_text(q, 0), (long)sq_int64(q, 1));
    drift_status ds = step == SQ_DONE ? DRIFT_OK : store_db_error(st, err, "counting score details");
    sq_done(q);
    free(path);
    return ds;
}

drift_status drift_store_answer_text(drift_store *st, int64_t response_id, char **text, int *has_logprobs,
                                     drift_error *err) {
    *text = NULL;
    *has_logprobs = 0;
    store_q *s = sq_cached(st, STORE_STMT_ANSWER_TEXT,
                                     "SELECT text, logprobs IS NOT NULL FROM responses WHERE id = ?1", err);
    if (!s) return store_err_code(err);
    sq_bind_int64(s, 1, response_id);
    int rc = sq_step(s);
    drift_status ds = DRIFT_OK;
    if (rc == SQ_DONE) {
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "no response with id %lld", (long long)response_id);
    } else if (rc != SQ_ROW) {
        ds = drift_error_set(err, DRIFT_ERR_STORE, "reading response %lld: %s", (long long)response_id,
                             sq_errmsg(st));
    } else {
        const char *t = sq_text(s, 0);
        *text = util_strdup(t ? t : "");
        *has_logprobs = sq_int(s, 1);
        if (!*text)
            ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading response %lld", (long long)response_id);
    }
    sq_reset(s);
    return ds;
}

/* drift_store_response_scores: the rows are read into a list first, then
 * copied into one block (the array, then the strings) the caller frees. */
typedef struct score_row {
    char *evaluator, *detail;
    int label;
    double value;
} score_row;

drift_status drift_store_response_scores(drift_store *st, int64_t response_id, drift_score **out, size_t *n,
                                         drift_error *err) {
    *out = NULL;
    *n = 0;
    store_q *q = sq_prepare(st, "SELECT evaluator, label, value, detail FROM scores WHERE response_id = ?1 "
                                "ORDER BY id DESC", err);
    if (!q) return store_err_code(err);
    sq_bind_int64(q, 1, response_id);
    score_row *rows = NULL;
    size_t nr = 0, cap = 0, bytes = 0;
    drift_status ds = DRIFT_OK;
    int step = SQ_DONE;
    while (!ds && (step = sq_step(q)) == SQ_ROW) {
        if (nr == cap) {
            size_t nc = cap ? cap * 2 : 8;
            score_row *g = realloc(rows, nc * sizeof *g);
            if (!g) {
                ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                break;
            }
            rows = g;
            cap = nc;
        }
        score_row *r = &rows[nr++];
        r->evaluator = store_col_strdup(q, 0);
        r->detail = sq_is_null(q, 3) ? NULL : store_col_strdup(q, 3);
        r->label = sq_int(q, 1);
        r->value = sq_is_null(q, 2) ? NAN : sq_double(q, 2);
        if (!r->evaluator || (!sq_is_null(q, 3) && !r->detail))
            ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else
            bytes += strlen(r->evaluator) + 1 + (r->detail ? strlen(r->detail) + 1 : 0);
    }
    if (!ds && step != SQ_DONE) ds = store_db_error(st, err, "reading the scores of a response");
    sq_done(q);
    if (!ds && nr) {
        drift_score *sc = malloc(nr * sizeof *sc + bytes);
        if (!sc) ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        char *p = sc ? (char *)(sc + nr) : NULL;
        for (size_t i = 0; sc && i < nr; i++) {
            size_t le = strlen(rows[i].evaluator) + 1;
            sc[i] = (drift_score){.response_id = response_id, .label = rows[i].label, .value = rows[i].value};
            sc[i].evaluator = memcpy(p, rows[i].evaluator, le);
            p += le;
            if (rows[i].detail) {
                size_t ld = strlen(rows[i].detail) + 1;
                sc[i].detail_json = memcpy(p, rows[i].detail, ld);
                p += ld;
            }
        }
        if (sc) {
            *out = sc;
            *n = nr;
        }
    }
    for (size_t i = 0; i < nr; i++) {
        free(rows[i].evaluator);
        free(rows[i].detail);
    }
    free(rows);
    return ds;
}

/* ---- the score stage's scan ---- */

static char *col_dup(store_q *q, int i) {
    const char *t = sq_text(q, i);
    return t ? util_strndup(t, sq_bytes(q, i)) : NULL;
}

drift_status drift_store_scan_pending(drift_store *st, int64_t run_id, int all, drift_scan_cursor *cursor, size_t cap,
                                      int (*want_text)(void *user, drift_workload wl), void *user,
                                      drift_answer *resp, drift_prompt *prompts, size_t *n, drift_error *err) {
    *n = 0;
    if (cap == 0) return DRIFT_OK;
    store_q *q = sq_cached(
        st, STORE_STMT_SCAN_PENDING,
        "SELECT r.id, r.prompt_rowid, r.replicate, r.text, p.prompt_id, p.workload, p.input, p.reference "
        "FROM responses r JOIN prompts p ON p.id = r.prompt_rowid "
        "WHERE r.run_id = ?1 AND r.error IS NULL AND r.text IS NOT NULL "
        "AND (r.prompt_rowid, r.replicate) > (?2, ?3) "
        "AND (?4 = 1 OR COALESCE((SELECT x.label FROM scores x WHERE x.response_id = r.id "
        "ORDER BY x.id DESC LIMIT 1), ?6) = ?6) "
        "ORDER BY r.prompt_rowid, r.replicate LIMIT ?5",
        err);
    if (!q) return store_err_code(err);
    sq_bind_int64(q, 1, run_id);
    sq_bind_int64(q, 2, cursor->started ? cursor->prompt_rowid : INT64_MIN);
    sq_bind_int64(q, 3, cursor->started ? cursor->replicate : INT32_MIN);
    sq_bind_int64(q, 4, all ? 1 : 0);
    sq_bind_int64(q, 5, cap > INT64_MAX ? INT64_MAX : (sqlite3_int64)cap);
    sq_bind_int64(q, 6, DRIFT_LABEL_ERROR);
    drift_status rc = DRIFT_OK;
    int step;
    while ((step = sq_step(q)) == SQ_ROW) {
        drift_answer *r = &resp[*n];
        drift_prompt *p = &prompts[*n];
        memset(r, 0, sizeof *r);
        memset(p, 0, sizeof *p);
        r->id = sq_int64(q, 0);
        r->prompt_rowid = sq_int64(q, 1);
        r->replicate = sq_int(q, 2);
        cursor->prompt_rowid = r->prompt_rowid;
        cursor->replicate = r->replicate;
        cursor->started = 1;
        p->workload = drift_workload_parse(sq_text(q, 5));
        (*n)++;
        if (want_text && !want_text(user, p->workload)) continue;
        r->text = col_dup(q, 3);
        p->prompt_id = col_dup(q, 4);
        p->input = col_dup(q, 6);
        p->reference_json = col_dup(q, 7);
        if (!r->text || !p->prompt_id || !p->input || !p->reference_json) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading responses");
            break;
        }
    }
    if (!rc && step != SQ_DONE && step != SQ_ROW) rc = store_db_error(st, err, "reading responses to score");
    sq_reset(q); /* ends the read: the caller writes scores next */
    return rc;
}
