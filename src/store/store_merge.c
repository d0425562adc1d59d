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
 *               input's id order, so "the latest score" stays the latest.
 * A failure rolls the transaction back and detaches the input. */
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

static int same_text(const unsigned char *a, const unsigned char *b) {
    return (!a && !b) || (a && b && !strcmp((const char *)a, (const char *)b));
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
            const char *field = !same_text(sqlite3_column_text(find, 1), sqlite3_column_text(runs, 2))   ? "target"
                                : !same_text(sqlite3_column_text(find, 2), sqlite3_column_text(runs, 3)) ? "config"
                                : !same_text(sqlite3_column_text(find, 3), sqlite3_column_text(runs, 4)) ? "decoding"
                                                                                                           : NULL;
            int64_t have = count_answers(db, "main", sqlite3_column_int64(find, 0));
            int64_t give = count_answers(db, "src", old_id);
            if (field || have != give) {
                rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                     "merge %s: run '%s' is already in the output with different %s; rename one of "
                                     "them or merge only one",
                                     in, label, field ? field : "answers (counts differ)");
                goto out;
            }
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
        stats->runs++;
    }
    if (step != SQLITE_DONE) rc = sql_err(err, db, "reading runs", in);
out:
    sqlite3_finalize(runs);
    sqlite3_finalize(find);
    return rc;
}

static drift_status merge_one(sqlite3 *db, const char *in, drift_store_merged *stats, drift_error *err) {
    drift_store *probe = NULL;
    drift_status rc = drift_store_open(in, &probe, err);
    if (rc) return drift_error_prefix(err, "merge: ");
    drift_store_close(probe);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "ATTACH DATABASE ?1 AS src", -1, &s, NULL) != SQLITE_OK) return sql_err(err, db, "attach", in);
    sqlite3_bind_text(s, 1, in, -1, SQLITE_TRANSIENT);
    int step = sqlite3_step(s);
    sqlite3_finalize(s);
    if (step != SQLITE_DONE) return sql_err(err, db, "attach", in);
    if ((rc = exec(db, "BEGIN IMMEDIATE", in, err))) goto detach;
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

drift_status drift_store_merge(drift_store *st, const char *in_path, drift_store_merged *stats, drift_error *err) {
    if (!st || !in_path) return drift_error_set(err, DRIFT_ERR_INVALID, "merge: missing arguments");
    drift_store_merged local;
    if (!stats) {
        memset(&local, 0, sizeof local);
        stats = &local;
    }
    return merge_one(st->db, in_path, stats, err);
}
