/* store_merge.c - copying a shard store into this one (drift_store_merge).
 *
 * The input is opened once with drift_store_open (which checks that it is a
 * DriftBench store and migrates it), closed, then ATTACHed to the output's
 * connection as "src" and copied in one transaction:
 *   prompts     INSERT OR IGNORE on (suite, prompt_id), after checking that
 *               no prompt with the same key has another hash;
 *   runs        new labels are inserted with a new id; a label already in
 *               the output must have the same target, config and decoding
 *               and as many answers (then it is skipped), else the merge
 *               fails;
 *   responses   re-keyed by the output's prompt rowid and run id;
 *   scores, embeddings  re-keyed through (run, prompt, replicate), in the
 *               input's id order, so "the latest score" stays the latest;
 *   run_endpoints  a copied run's endpoint history (v3), in the input's id
 *               order, each target in its record's form (a skipped run keeps
 *               the output's).
 * A failure rolls the transaction back and detaches the input.
 *
 * When the output or the input is a PostgreSQL store, nothing can be
 * attached: the input is opened as a store of its own and its rows are
 * read and written one by one through the statement layer, under the same
 * rules, in one transaction of the output (PostgreSQL: holding a
 * transaction advisory lock, so two merges into one database take turns).
 * The ids are mapped in memory (prompt and response ids of the input to
 * the output's).
 *
 * Secrets: messages name the input by drift_redact's copy of its path; a
 * run's target is compared and copied in its record's form
 * (util_target_record, as run_begin keeps it), so an input written before
 * targets were recorded without passwords gets them out on the way.
 *
 * Replacing (drift_store_merge_replace): right after the transaction
 * begins, the named runs of the output are deleted (embeddings, scores,
 * responses, endpoints, the run row), then the prompts of their suites that no
 * response references any more; the copy then goes on as above, so the
 * input's runs of those labels are new ones. Written once against the
 * statement layer, inside the output's transaction on both paths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/util.h"

static drift_status sql_err(drift_error *err, sqlite3 *db, const char *what, const char *in) {
    return drift_error_set(err, DRIFT_ERR_STORE, "merge %s: %s: %s", in, what, sqlite3_errmsg(db));
}

static drift_status exec(sqlite3 *db, const char *sql, const char *in, drift_error *err) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        drift_status rc = drift_error_set(err, DRIFT_ERR_STORE, "merge %s: %s", in, msg ? msg : "sqlite error");
        sqlite3_free(msg);
        return rc;
    }
    return DRIFT_OK;
}

/* Runs sql with ?1 = a, ?2 = b (int64s), returns sqlite3_changes. -1 on error. */
static long run_ids(sqlite3 *db, const char *sql, int64_t a, int64_t b) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(s, 1, a);
    sqlite3_bind_int64(s, 2, b);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? (long)sqlite3_changes(db) : -1;
}

static int64_t count_answers(sqlite3 *db, const char *schema, int64_t run_id) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s.responses WHERE run_id=?1 AND failed=0", schema);
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(s, 1, run_id);
        if (sqlite3_step(s) == SQLITE_ROW) n = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    return n;
}

static int same_text(const char *a, const char *b) {
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Targets are compared as run_begin compares them: in their record's form
 * (util_target_record: no secrets, no credential parameters), so a shard
 * written by an older driftbench, its password in the target, still
 * matches. Out of memory reads as "different". */
static int same_target(const void *a, const void *b) {
    char *x = util_target_record(a ? (const char *)a : ""), *y = util_target_record(b ? (const char *)b : "");
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

/* A run of the input whose label the output has already: DRIFT_OK when the
 * two are the same run (target, config and decoding, have[] the output's
 * and give[] the input's, in that order; as many answers), else the
 * DRIFT_ERR_MISMATCH that names the first difference. Both merge paths. */
static drift_status same_run(const char *in, const char *label, const char *const have[3], const char *const give[3],
                             int64_t have_answers, int64_t give_answers, drift_error *err) {
    const char *field = !same_target(have[0], give[0]) ? "target"
                        : !same_text(have[1], give[1]) ? "config"
                        : !same_text(have[2], give[2]) ? "decoding"
                        : have_answers != give_answers ? "answers (counts differ)"
                                                       : NULL;
    if (!field) return DRIFT_OK;
    return drift_error_set(err, DRIFT_ERR_MISMATCH,
                           "merge %s: run '%s' is already in the output with different %s; rename one of them or "
                           "merge only one",
                           in, label, field);
}

/* Rewrites the copied run's target in its record's form (an input of an
 * older driftbench may hold a password there). 0 ok, -1 error. */
static int record_target(sqlite3 *db, int64_t run_id, const unsigned char *target) {
    char *rec = util_target_record(target ? (const char *)target : "");
    sqlite3_stmt *s = NULL;
    int rc = -1;
    if (rec && sqlite3_prepare_v2(db, "UPDATE main.runs SET target=?1 WHERE id=?2", -1, &s, NULL) == SQLITE_OK) {
        sqlite3_bind_text(s, 1, rec, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 2, run_id);
        rc = sqlite3_step(s) == SQLITE_DONE ? 0 : -1;
    }
    sqlite3_finalize(s);
    free(rec);
    return rc;
}

/* Copies the endpoint history of src run old_id to main run new_id, each
 * target in its record's form. 0 ok, -1 error. */
static int copy_endpoints(sqlite3 *db, int64_t old_id, int64_t new_id) {
    sqlite3_stmt *r = NULL, *w = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(db, "SELECT target, first_at, last_at, begins FROM src.run_endpoints WHERE run_id=?1 ORDER BY id",
                           -1, &r, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO main.run_endpoints(run_id,target,first_at,last_at,begins) VALUES(?1,?2,?3,?4,?5)",
                           -1, &w, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(r, 1, old_id);
    int step;
    while ((step = sqlite3_step(r)) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(r, 0);
        char *rec = util_target_record(t ? (const char *)t : "");
        if (!rec) goto out;
        sqlite3_reset(w);
        sqlite3_bind_int64(w, 1, new_id);
        sqlite3_bind_text(w, 2, rec, -1, free);
        for (int c = 1; c <= 2; c++) sqlite3_bind_value(w, c + 2, sqlite3_column_value(r, c));
        sqlite3_bind_int64(w, 5, sqlite3_column_int64(r, 3));
        if (sqlite3_step(w) != SQLITE_DONE) goto out;
    }
    rc = step == SQLITE_DONE ? 0 : -1;
out:
    sqlite3_finalize(r);
    sqlite3_finalize(w);
    return rc;
}

static drift_status merge_runs(sqlite3 *db, const char *in, drift_store_merged *stats, drift_error *err) {
    sqlite3_stmt *runs = NULL, *find = NULL;
    drift_status rc = DRIFT_OK;
    if (sqlite3_prepare_v2(db, "SELECT id, label, target, config, decoding FROM src.runs ORDER BY id", -1, &runs,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT id, target, config, decoding FROM main.runs WHERE label=?1", -1, &find, NULL) !=
            SQLITE_OK) {
        rc = sql_err(err, db, "reading runs", in);
        goto out;
    }
    int step;
    while ((step = sqlite3_step(runs)) == SQLITE_ROW) {
        int64_t old_id = sqlite3_column_int64(runs, 0);
        const char *label = (const char *)sqlite3_column_text(runs, 1);
        sqlite3_reset(find);
        sqlite3_bind_text(find, 1, label, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(find) == SQLITE_ROW) {
            const char *have[3], *give[3];
            for (int c = 0; c < 3; c++) {
                have[c] = (const char *)sqlite3_column_text(find, c + 1);
                give[c] = (const char *)sqlite3_column_text(runs, c + 2);
            }
            if ((rc = same_run(in, label, have, give, count_answers(db, "main", sqlite3_column_int64(find, 0)),
                               count_answers(db, "src", old_id), err)))
                goto out;
            stats->runs_skipped++;
            continue;
        }
        if (run_ids(db,
                    "INSERT INTO main.runs(label,target,config,decoding,templates,suites,tool_version,started_at,"
                    "finished_at) SELECT label,target,config,decoding,templates,suites,tool_version,started_at,"
                    "finished_at FROM src.runs WHERE id=?1",
                    old_id, 0) != 1) {
            rc = sql_err(err, db, "copying a run", in);
            goto out;
        }
        int64_t new_id = sqlite3_last_insert_rowid(db);
        if (record_target(db, new_id, sqlite3_column_text(runs, 2))) {
            rc = sql_err(err, db, "copying a run", in);
            goto out;
        }
        long n = run_ids(db,
                         "INSERT INTO main.responses(run_id,prompt_rowid,replicate,failed,http_status,attempts,"
                         "prompt_tokens,completion_tokens,latency_ms,finish_reason,created_at,error,text,logprobs) "
                         "SELECT ?2, mp.id, r.replicate, r.failed, r.http_status, r.attempts, r.prompt_tokens, "
                         "r.completion_tokens, r.latency_ms, r.finish_reason, r.created_at, r.error, r.text, "
                         "r.logprobs FROM src.responses r JOIN src.prompts sp ON sp.id = r.prompt_rowid "
                         "JOIN main.prompts mp ON mp.suite = sp.suite AND mp.prompt_id = sp.prompt_id "
                         "WHERE r.run_id = ?1 ORDER BY r.id",
                         old_id, new_id);
        if (n < 0) {
            rc = sql_err(err, db, "copying responses", in);
            goto out;
        }
        stats->responses += (size_t)n;
        static const char map[] =
            " FROM src.responses r JOIN src.prompts sp ON sp.id = r.prompt_rowid "
            "JOIN main.prompts mp ON mp.suite = sp.suite AND mp.prompt_id = sp.prompt_id "
            "JOIN main.responses nr ON nr.run_id = ?2 AND nr.prompt_rowid = mp.id AND nr.replicate = r.replicate ";
        char sql[1024];
        snprintf(sql, sizeof sql,
                 "INSERT INTO main.scores(response_id,evaluator,label,value,detail) "
                 "SELECT nr.id, s.evaluator, s.label, s.value, s.detail%s"
                 "JOIN src.scores s ON s.response_id = r.id WHERE r.run_id = ?1 ORDER BY s.id",
                 map);
        if ((n = run_ids(db, sql, old_id, new_id)) < 0) {
            rc = sql_err(err, db, "copying scores", in);
            goto out;
        }
        stats->scores += (size_t)n;
        snprintf(sql, sizeof sql,
                 "INSERT INTO main.embeddings(response_id,embedder,dim,vec) "
                 "SELECT nr.id, e.embedder, e.dim, e.vec%s"
                 "JOIN src.embeddings e ON e.response_id = r.id WHERE r.run_id = ?1",
                 map);
        if ((n = run_ids(db, sql, old_id, new_id)) < 0) {
            rc = sql_err(err, db, "copying embeddings", in);
            goto out;
        }
        stats->embeddings += (size_t)n;
        if (copy_endpoints(db, old_id, new_id)) {
            rc = sql_err(err, db, "copying endpoints", in);
            goto out;
        }
        stats->runs++;
    }
    if (step != SQLITE_DONE) rc = sql_err(err, db, "reading runs", in);
out:
    sqlite3_finalize(runs);
    sqlite3_finalize(find);
    return rc;
}

/* ---- replacing runs (both paths; inside the output's transaction) ---- */

static drift_status copy_err(drift_store *st, drift_error *err, const char *what, const char *in);

/* Runs sql with ?1 = v on st; -1 on failure. */
static int del_exec(drift_store *st, const char *sql, int64_t v, const char *tv) {
    store_q *q = sq_prepare(st, sql, NULL);
    if (!q) return -1;
    if (tv) sq_bind_text(q, 1, tv);
    else sq_bind_int64(q, 1, v);
    int rc = sq_step(q);
    sq_done(q);
    return rc == SQ_DONE ? 0 : -1;
}

/* Deletes the runs labelled labels[0..n) of st and the prompts of their
 * suites that no response uses any more (see the top). */
static drift_status delete_runs(drift_store *st, const char *in, const char *const *labels, size_t n,
                                drift_error *err) {
    char **suites = NULL;
    size_t n_suites = 0;
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        store_q *q = sq_prepare(st, "SELECT id FROM runs WHERE label=?1", err);
        if (!q) return drift_error_prefix(err, "merge %s: ", in);
        sq_bind_text(q, 1, labels[i]);
        int step = sq_step(q);
        int64_t id = step == SQ_ROW ? sq_int64(q, 0) : -1;
        sq_done(q);
        if (step == SQ_ERROR) {
            rc = copy_err(st, err, "reading the runs to replace", in);
            break;
        }
        if (id < 0) continue;
        q = sq_prepare(st,
                       "SELECT DISTINCT p.suite FROM responses r JOIN prompts p ON p.id = r.prompt_rowid "
                       "WHERE r.run_id = ?1",
                       err);
        if (!q) {
            rc = drift_error_prefix(err, "merge %s: ", in);
            break;
        }
        sq_bind_int64(q, 1, id);
        step = store_col_strings(q, 0, &suites, &n_suites);
        sq_done(q);
        if (step != SQ_DONE) {
            rc = copy_err(st, err, "reading the runs to replace", in);
            break;
        }
        if (store_run_delete_rows(st, id)) /* embeddings, scores, responses, endpoints, the run */
            rc = copy_err(st, err, "deleting a run to replace", in);
    }
    /* SQLite: NOT IN builds the set of used prompts once (responses has no
     * index that leads with prompt_rowid); PostgreSQL: an anti-join. */
    for (size_t i = 0; i < n_suites && !rc; i++)
        if (del_exec(st,
                     SQ_SQL(st,
                            "DELETE FROM prompts WHERE suite=?1 AND id NOT IN (SELECT prompt_rowid FROM responses)",
                            "DELETE FROM prompts p WHERE p.suite=?1 AND NOT EXISTS (SELECT 1 FROM responses r "
                            "WHERE r.prompt_rowid = p.id)"),
                     0, suites[i]))
            rc = copy_err(st, err, "deleting the prompts of replaced runs", in);
    for (size_t i = 0; i < n_suites; i++) free(suites[i]);
    free(suites);
    return rc;
}

/* path: the input as given (opened); in: its name for messages. */
static drift_status merge_one(drift_store *st, const char *path, const char *in, const char *const *replace,
                              size_t n_replace, drift_store_merged *stats, drift_error *err) {
    sqlite3 *db = st->db;
    drift_store *probe = NULL;
    drift_status rc = drift_store_open(path, &probe, err);
    if (rc) return drift_error_prefix(err, "merge: ");
    drift_store_close(probe);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "ATTACH DATABASE ?1 AS src", -1, &s, NULL) != SQLITE_OK) return sql_err(err, db, "attach", in);
    sqlite3_bind_text(s, 1, path, -1, SQLITE_TRANSIENT);
    int step = sqlite3_step(s);
    sqlite3_finalize(s);
    if (step != SQLITE_DONE) return sql_err(err, db, "attach", in);
    if ((rc = exec(db, "BEGIN IMMEDIATE", in, err))) goto detach;
    if ((rc = delete_runs(st, in, replace, n_replace, err))) goto rollback;
    /* prompts: the same key must mean the same prompt */
    if (sqlite3_prepare_v2(db,
                           "SELECT sp.suite, sp.prompt_id FROM src.prompts sp JOIN main.prompts mp "
                           "ON mp.suite = sp.suite AND mp.prompt_id = sp.prompt_id WHERE mp.hash != sp.hash LIMIT 1",
                           -1, &s, NULL) != SQLITE_OK) {
        rc = sql_err(err, db, "checking prompts", in);
        goto rollback;
    }
    if (sqlite3_step(s) == SQLITE_ROW) {
        rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                             "merge %s: prompt '%s' of suite '%s' differs from the one already in the output (other "
                             "hash): the shards did not run the same suite",
                             in, (const char *)sqlite3_column_text(s, 1), (const char *)sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
        goto rollback;
    }
    sqlite3_finalize(s);
    long n = run_ids(db,
                     "INSERT OR IGNORE INTO main.prompts(suite,prompt_id,workload,input,reference,hash) "
                     "SELECT suite,prompt_id,workload,input,reference,hash FROM src.prompts ORDER BY id",
                     0, 0);
    if (n < 0) {
        rc = sql_err(err, db, "copying prompts", in);
        goto rollback;
    }
    stats->prompts += (size_t)n;
    if ((rc = merge_runs(db, in, stats, err))) goto rollback;
    if ((rc = exec(db, "COMMIT", in, err))) goto rollback;
    goto detach;
rollback:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
detach:
    sqlite3_exec(db, "DETACH DATABASE src", NULL, NULL, NULL);
    return rc;
}

/* ---- any store into any store, row by row ---- */

#define MERGE_PG_KEY 1146242645 /* the PostgreSQL merge lock ("DRFT" + 1) */

/* Sorted (old id -> new id) pairs. */
typedef struct {
    int64_t *old_ids, *new_ids;
    size_t n, cap;
} id_map;

static int id_map_add(id_map *m, int64_t o, int64_t n) {
    if (m->n == m->cap) {
        size_t c = m->cap ? m->cap * 2 : 1024;
        int64_t *a = realloc(m->old_ids, c * sizeof *a);
        if (a) m->old_ids = a;
        int64_t *b = a ? realloc(m->new_ids, c * sizeof *b) : NULL;
        if (b) m->new_ids = b;
        if (!a || !b) return -1;
        m->cap = c;
    }
    /* the inputs come in ascending old id (ORDER BY id), so the map stays sorted */
    m->old_ids[m->n] = o;
    m->new_ids[m->n] = n;
    m->n++;
    return 0;
}

static int64_t id_map_get(const id_map *m, int64_t o) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->old_ids[mid] < o) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n && m->old_ids[lo] == o ? m->new_ids[lo] : -1;
}

static void id_map_free(id_map *m) {
    free(m->old_ids);
    free(m->new_ids);
    memset(m, 0, sizeof *m);
}

static drift_status copy_err(drift_store *st, drift_error *err, const char *what, const char *in) {
    return drift_error_set(err, DRIFT_ERR_STORE, "merge %s: %s: %s", in, what, sq_errmsg(st));
}

/* Binds column c of row q as parameter i of w, keeping its kind. */
static void bind_col_int(store_q *w, int i, store_q *q, int c) {
    if (sq_is_null(q, c)) sq_bind_null(w, i);
    else sq_bind_int64(w, i, sq_int64(q, c));
}

static void bind_col_double(store_q *w, int i, store_q *q, int c) {
    if (sq_is_null(q, c)) sq_bind_null(w, i);
    else sq_bind_double(w, i, sq_double(q, c));
}

static int64_t count_answers_q(drift_store *st, int64_t run_id) {
    store_q *q = sq_prepare(st, "SELECT count(*) FROM responses WHERE run_id=?1 AND failed=0", NULL);
    int64_t n = -1;
    if (q) {
        sq_bind_int64(q, 1, run_id);
        if (sq_step(q) == SQ_ROW) n = sq_int64(q, 0);
    }
    sq_done(q);
    return n;
}

static drift_status copy_prompts(drift_store *dst, drift_store *src, const char *in, id_map *pm,
                                 drift_store_merged *stats, drift_error *err) {
    drift_status rc = DRIFT_OK;
    store_q *r = sq_prepare(src, "SELECT id, suite, prompt_id, workload, input, reference, hash FROM prompts ORDER BY id",
                            err);
    store_q *ins = r ? sq_prepare(dst,
                                  "INSERT INTO prompts(suite,prompt_id,workload,input,reference,hash) "
                                  "VALUES(?,?,?,?,?,?) ON CONFLICT(suite,prompt_id) DO NOTHING",
                                  err)
                     : NULL;
    store_q *find = ins ? sq_prepare(dst, "SELECT id, hash FROM prompts WHERE suite=?1 AND prompt_id=?2", err) : NULL;
    if (!find) {
        rc = drift_error_prefix(err, "merge: ");
        goto out;
    }
    int step;
    while ((step = sq_step(r)) == SQ_ROW) {
        const char *suite = sq_text(r, 1), *pid = sq_text(r, 2), *hash = sq_text(r, 6);
        sq_reset(find);
        sq_bind_text(find, 1, suite);
        sq_bind_text(find, 2, pid);
        int f = sq_step(find);
        if (f == SQ_ROW && strcmp(sq_text(find, 1), hash) != 0) {
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "merge %s: prompt '%s' of suite '%s' differs from the one already in the output "
                                 "(other hash): the shards did not run the same suite",
                                 in, pid, suite);
            goto out;
        }
        if (f == SQ_ERROR) {
            rc = copy_err(dst, err, "checking prompts", in);
            goto out;
        }
        if (f == SQ_DONE) {
            sq_reset(ins);
            for (int c = 1; c <= 6; c++) sq_bind_text(ins, c, sq_text(r, c));
            if (sq_step(ins) != SQ_DONE) {
                rc = copy_err(dst, err, "copying prompts", in);
                goto out;
            }
            stats->prompts += (size_t)sq_changes(ins);
            sq_reset(find);
            if (sq_step(find) != SQ_ROW) {
                rc = copy_err(dst, err, "copying prompts", in);
                goto out;
            }
        }
        if (id_map_add(pm, sq_int64(r, 0), sq_int64(find, 0))) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "merge %s: out of memory", in);
            goto out;
        }
    }
    if (step == SQ_ERROR) rc = copy_err(src, err, "reading prompts", in);
out:
    sq_done(r);
    sq_done(ins);
    sq_done(find);
    return rc;
}

/* The next table of a run's copy: closes *r and *w (the last table's, or
 * NULL), prepares the read rsql on src, its ?1 bound to old_id, and the
 * write wsql on dst. 0, or the error prefixed "merge: " (*w NULL). */
static drift_status copy_next(drift_store *src, const char *rsql, drift_store *dst, const char *wsql, int64_t old_id,
                              store_q **r, store_q **w, drift_error *err) {
    sq_done(*r);
    sq_done(*w);
    *r = sq_prepare(src, rsql, err);
    *w = *r ? sq_prepare(dst, wsql, err) : NULL;
    if (!*w) return drift_error_prefix(err, "merge: ");
    sq_bind_int64(*r, 1, old_id);
    return DRIFT_OK;
}

/* Copies the rows r reads (from src) with w (into dst): column 0 is a
 * response id of the input, written as the output's (rm); column c >= 1
 * as kinds[c - 1] says: 't' text, 'i' integer, 'd' a real or NULL, 'b' a
 * blob. table names the rows in messages; *count grows by the rows
 * written. */
static drift_status copy_by_response(drift_store *src, store_q *r, drift_store *dst, store_q *w, const id_map *rm,
                                     const char *kinds, const char *table, const char *in, size_t *count,
                                     drift_error *err) {
    char what[64];
    int step;
    while ((step = sq_step(r)) == SQ_ROW) {
        sq_reset(w);
        sq_bind_int64(w, 1, id_map_get(rm, sq_int64(r, 0)));
        for (int c = 1; kinds[c - 1]; c++) {
            if (kinds[c - 1] == 't') sq_bind_text(w, c + 1, sq_text(r, c));
            else if (kinds[c - 1] == 'i') sq_bind_int64(w, c + 1, sq_int64(r, c));
            else if (kinds[c - 1] == 'd') bind_col_double(w, c + 1, r, c);
            else sq_bind_blob(w, c + 1, sq_blob(r, c), sq_bytes(r, c));
        }
        if (sq_step(w) != SQ_DONE) {
            snprintf(what, sizeof what, "copying %s", table);
            return copy_err(dst, err, what, in);
        }
        (*count)++;
    }
    if (step != SQ_ERROR) return DRIFT_OK;
    snprintf(what, sizeof what, "reading %s", table);
    return copy_err(src, err, what, in);
}

/* Copies the responses, scores and embeddings of src's run old_id into
 * dst's run new_id. */
static drift_status copy_run_rows(drift_store *dst, drift_store *src, const char *in, int64_t old_id, int64_t new_id,
                                  const id_map *pm, drift_store_merged *stats, drift_error *err) {
    drift_status rc = DRIFT_OK;
    id_map rm = {0};
    store_q *r = NULL, *w = NULL; /* the table in copy (copy_next) */
    rc = copy_next(src,
                   "SELECT id, prompt_rowid, replicate, failed, http_status, attempts, prompt_tokens, "
                   "completion_tokens, latency_ms, finish_reason, created_at, error, text, logprobs "
                   "FROM responses WHERE run_id = ?1 ORDER BY id",
                   dst,
                   "INSERT INTO responses(run_id,prompt_rowid,replicate,failed,http_status,attempts,"
                   "prompt_tokens,completion_tokens,latency_ms,finish_reason,created_at,error,text,logprobs) "
                   "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                   old_id, &r, &w, err);
    if (rc) goto out;
    int step;
    while ((step = sq_step(r)) == SQ_ROW) {
        int64_t prompt = id_map_get(pm, sq_int64(r, 1));
        if (prompt < 0) {
            rc = drift_error_set(err, DRIFT_ERR_STORE, "merge %s: response %lld names a prompt the input lacks", in,
                                 (long long)sq_int64(r, 0));
            goto out;
        }
        sq_reset(w);
        sq_bind_int64(w, 1, new_id);
        sq_bind_int64(w, 2, prompt);
        for (int c = 2; c <= 7; c++) bind_col_int(w, c + 1, r, c);
        bind_col_double(w, 9, r, 8);
        sq_bind_text(w, 10, sq_text(r, 9));
        sq_bind_text(w, 11, sq_text(r, 10));
        sq_bind_bytes_text(w, 12, sq_text(r, 11));
        sq_bind_bytes_text(w, 13, sq_text(r, 12));
        sq_bind_blob(w, 14, sq_blob(r, 13), sq_bytes(r, 13));
        if (sq_step(w) != SQ_ROW) {
            rc = copy_err(dst, err, "copying responses", in);
            goto out;
        }
        if (id_map_add(&rm, sq_int64(r, 0), sq_int64(w, 0))) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "merge %s: out of memory", in);
            goto out;
        }
        stats->responses++;
    }
    if (step == SQ_ERROR) {
        rc = copy_err(src, err, "reading responses", in);
        goto out;
    }
    /* scores in the input's id order: the latest stays the latest */
    rc = copy_next(src,
                   "SELECT s.response_id, s.evaluator, s.label, s.value, s.detail FROM scores s "
                   "JOIN responses x ON x.id = s.response_id WHERE x.run_id = ?1 ORDER BY s.id",
                   dst,
                   "INSERT INTO scores(response_id,evaluator,label,value,detail) VALUES(?,?,?,?,?)",
                   old_id, &r, &w, err);
    if (rc || (rc = copy_by_response(src, r, dst, w, &rm, "tidt", "scores", in, &stats->scores, err))) goto out;
    rc = copy_next(src,
                   "SELECT e.response_id, e.embedder, e.dim, e.vec FROM embeddings e "
                   "JOIN responses x ON x.id = e.response_id WHERE x.run_id = ?1 ORDER BY e.response_id, e.embedder",
                   dst,
                   "INSERT INTO embeddings(response_id,embedder,dim,vec) VALUES(?,?,?,?)",
                   old_id, &r, &w, err);
    if (rc || (rc = copy_by_response(src, r, dst, w, &rm, "tib", "embeddings", in, &stats->embeddings, err)))
        goto out;
    /* the endpoint history, each target in its record's form */
    rc = copy_next(src,
                   "SELECT target, first_at, last_at, begins FROM run_endpoints WHERE run_id = ?1 ORDER BY id",
                   dst,
                   "INSERT INTO run_endpoints(run_id,target,first_at,last_at,begins) VALUES(?,?,?,?,?)",
                   old_id, &r, &w, err);
    if (rc) goto out;
    while ((step = sq_step(r)) == SQ_ROW) {
        char *rec = util_target_record(sq_text(r, 0) ? sq_text(r, 0) : "");
        if (!rec) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "merge %s: out of memory", in);
            goto out;
        }
        sq_reset(w);
        sq_bind_int64(w, 1, new_id);
        sq_bind_text(w, 2, rec);
        sq_bind_text(w, 3, sq_text(r, 1));
        sq_bind_text(w, 4, sq_text(r, 2));
        sq_bind_int64(w, 5, sq_int64(r, 3));
        int got = sq_step(w);
        free(rec);
        if (got != SQ_DONE) {
            rc = copy_err(dst, err, "copying endpoints", in);
            goto out;
        }
    }
    if (step == SQ_ERROR) rc = copy_err(src, err, "reading endpoints", in);
out:
    sq_done(r);
    sq_done(w);
    id_map_free(&rm);
    return rc;
}

static drift_status copy_runs(drift_store *dst, drift_store *src, const char *in, const id_map *pm,
                              drift_store_merged *stats, drift_error *err) {
    drift_status rc = DRIFT_OK;
    store_q *runs = sq_prepare(src,
                               "SELECT id, label, target, config, decoding, templates, suites, tool_version, "
                               "started_at, finished_at FROM runs ORDER BY id",
                               err);
    store_q *find =
        runs ? sq_prepare(dst, "SELECT id, target, config, decoding FROM runs WHERE label=?1", err) : NULL;
    store_q *ins = find ? sq_prepare(dst,
                                     "INSERT INTO runs(label,target,config,decoding,templates,suites,tool_version,"
                                     "started_at,finished_at) VALUES(?,?,?,?,?,?,?,?,?) RETURNING id",
                                     err)
                        : NULL;
    if (!ins) {
        rc = drift_error_prefix(err, "merge: ");
        goto out;
    }
    int step;
    while ((step = sq_step(runs)) == SQ_ROW) {
        int64_t old_id = sq_int64(runs, 0);
        const char *label = sq_text(runs, 1);
        sq_reset(find);
        sq_bind_text(find, 1, label);
        int f = sq_step(find);
        if (f == SQ_ERROR) {
            rc = copy_err(dst, err, "reading runs", in);
            goto out;
        }
        if (f == SQ_ROW) {
            const char *have[3], *give[3];
            for (int c = 0; c < 3; c++) {
                have[c] = sq_text(find, c + 1);
                give[c] = sq_text(runs, c + 2);
            }
            if ((rc = same_run(in, label, have, give, count_answers_q(dst, sq_int64(find, 0)),
                               count_answers_q(src, old_id), err)))
                goto out;
            stats->runs_skipped++;
            continue;
        }
        sq_reset(ins);
        char *target = util_target_record(sq_text(runs, 2) ? sq_text(runs, 2) : "");
        if (!target) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "merge %s: out of memory", in);
            goto out;
        }
        for (int c = 1; c <= 9; c++) sq_bind_text(ins, c, c == 2 ? target : sq_text(runs, c));
        int got = sq_step(ins);
        free(target);
        if (got != SQ_ROW) {
            rc = copy_err(dst, err, "copying a run", in);
            goto out;
        }
        int64_t new_id = sq_int64(ins, 0);
        if ((rc = copy_run_rows(dst, src, in, old_id, new_id, pm, stats, err))) goto out;
        stats->runs++;
    }
    if (step == SQ_ERROR) rc = copy_err(src, err, "reading runs", in);
out:
    sq_done(runs);
    sq_done(find);
    sq_done(ins);
    return rc;
}

static drift_status merge_copy(drift_store *dst, const char *path, const char *const *replace, size_t n_replace,
                               drift_store_merged *stats, drift_error *err) {
    drift_store *src = NULL;
    drift_status rc = drift_store_open(path, &src, err);
    if (rc) return drift_error_prefix(err, "merge: ");
    const char *in = drift_store_display(src); /* messages name the input without its password */
    id_map pm = {0};
    drift_store_merged got = {0};
    if ((rc = store_tx_begin(dst, err))) goto out;
    if (dst->kind == STORE_PG) {
        char sql[64];
        snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", MERGE_PG_KEY);
        if ((rc = sq_exec(dst, sql, err))) goto rollback;
    }
    if ((rc = delete_runs(dst, in, replace, n_replace, err))) goto rollback;
    drift_store_read_begin(src);
    rc = copy_prompts(dst, src, in, &pm, &got, err);
    if (!rc) rc = copy_runs(dst, src, in, &pm, &got, err);
    drift_store_read_end(src);
    if (rc) goto rollback;
    if ((rc = store_tx_commit(dst, err))) goto out;
    stats->runs += got.runs;
    stats->runs_skipped += got.runs_skipped;
    stats->prompts += got.prompts;
    stats->responses += got.responses;
    stats->scores += got.scores;
    stats->embeddings += got.embeddings;
    goto out;
rollback:
    store_tx_rollback(dst);
out:
    id_map_free(&pm);
    drift_store_close(src);
    return rc;
}

drift_status drift_store_merge(drift_store *st, const char *in_path, drift_store_merged *stats, drift_error *err) {
    return drift_store_merge_replace(st, in_path, NULL, 0, stats, err);
}

drift_status drift_store_merge_replace(drift_store *st, const char *in_path, const char *const *replace,
                                       size_t n_replace, drift_store_merged *stats, drift_error *err) {
    if (!st || !in_path || (n_replace && !replace))
        return drift_error_set(err, DRIFT_ERR_INVALID, "merge: missing arguments");
    drift_store_merged local;
    if (!stats) {
        memset(&local, 0, sizeof local);
        stats = &local;
    }
    if (st->kind == STORE_PG || store_is_pg_url(in_path)) return merge_copy(st, in_path, replace, n_replace, stats, err);
    char *in = drift_redact(in_path); /* the input's name in messages */
    if (!in) return drift_error_set(err, DRIFT_ERR_NOMEM, "merge: out of memory");
    drift_status rc = merge_one(st, in_path, in, replace, n_replace, stats, err);
    free(in);
    return rc;
}
