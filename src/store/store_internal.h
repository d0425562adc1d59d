/* store_internal.h - what the files of the SQLite store share, and the one
 * door tests use to look at the database behind a handle.
 *
 *   store.c          the handle: open (schema, identity, migrations),
 *                    read-only open, close, transactions, run locks
 *   store_runs.c     prompts, runs, responses (write, pending, read one)
 *   store_scores.c   scored sets, the score stage's scan, scores,
 *                    embeddings, the analyses' reads
 *   store_merge.c    copying shard stores into one
 *
 * Nothing outside src/store/ includes this header except tests, which may
 * read the database with store_sqlite() to check what the store wrote, and
 * bench/compare_bench.c, which wraps its fixture's writes in one
 * transaction. */
#ifndef DRIFT_STORE_INTERNAL_H
#define DRIFT_STORE_INTERNAL_H

#include <sqlite3.h>
#include <zstd.h>

#include "driftbench/store.h"

/* Statements prepared once per handle (sqlite3_prepare_v3 PERSISTENT). */
enum {
    STORE_STMT_PUT_RESPONSE,
    STORE_STMT_PUT_SCORE,
    STORE_STMT_PROMPT_INSERT,
    STORE_STMT_PROMPT_FIND,
    STORE_STMT_ANSWER_TEXT,
    STORE_STMT_SCAN_PENDING,
    STORE_STMT_COUNT
};

struct drift_store {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *stmts[STORE_STMT_COUNT];
    ZSTD_CCtx *zc; /* reused across responses: a fresh context per call costs more than the compression */
    int readonly;         /* opened by drift_store_open_readonly */
    int holds_locks;      /* run_begin took a run lock through this handle */
    int read_depth;       /* drift_store_read_begin calls not yet ended */
    int read_own_tx;      /* the outermost read_begin opened the transaction */
    unsigned long long proc_start; /* this process's start (clock ticks after boot); 0 unknown */
    char host[256];       /* this host's name, for run locks */
    char token[128];      /* this handle's run-lock token */
};

/* DRIFT_ERR_STORE "PATH: what: sqlite's message"; returns the code. */
drift_status store_db_error(drift_store *st, drift_error *err, const char *what);
/* The cached statement `which` (prepared from sql on first use), reset and
 * with its bindings cleared; NULL with err set when it cannot be prepared. */
sqlite3_stmt *store_stmt_get(drift_store *st, int which, const char *sql, drift_error *err);
/* A fresh statement (the caller finalizes it); NULL with err set. */
sqlite3_stmt *store_stmt_prepare(drift_store *st, const char *sql, drift_error *err);
/* BEGIN IMMEDIATE / COMMIT (rolled back when the commit fails) / ROLLBACK
 * when a transaction is open. */
drift_status store_tx_begin(drift_store *st, drift_error *err);
drift_status store_tx_commit(drift_store *st, drift_error *err);
void store_tx_rollback(drift_store *st);
/* err's code when set, else DRIFT_ERR_STORE: the status of a step that
 * failed after setting err (or before it could). */
drift_status store_err_code(const drift_error *err);

/* Column i as a malloc'd string (NULL for NULL or out of memory). */
char *store_col_strdup(sqlite3_stmt *s, int i);
void store_bind_text_or_null(sqlite3_stmt *s, int i, const char *t);

/* Run locks (store.c): takes the writer lock on label for this handle;
 * call inside an IMMEDIATE transaction. */
drift_status store_lock_take(drift_store *st, const char *label, drift_error *err);

/* The columns of a response row with its prompt, as store_answer_from_row
 * reads them ("r" = responses, "p" = prompts). */
#define STORE_RESP_COLS                                                                                  \
    "r.id, r.prompt_rowid, r.replicate, r.text, r.prompt_tokens, r.completion_tokens, r.finish_reason, " \
    "r.latency_ms, r.logprobs, r.error, r.http_status, r.attempts, "                                     \
    "p.prompt_id, p.workload, p.input, p.reference, p.hash"
/* Fills an answer and (when p is not NULL) its prompt from a row of
 * STORE_RESP_COLS: DRIFT_ERR_NOMEM (both emptied), DRIFT_ERR_STORE for
 * corrupt logprobs (the rest filled, logprobs_json NULL), else DRIFT_OK. */
drift_status store_answer_from_row(sqlite3_stmt *s, drift_answer *r, drift_prompt *p);

/* The SQLite connection behind a handle: for tests and benchmarks (see the
 * top). Library code goes through the store's functions. */
sqlite3 *store_sqlite(drift_store *st);

#endif
