/* store_internal.h - what the files of the store share, and the one door
 * tests use to look at the database behind a handle.
 *
 * A store is an SQLite file (the default) or a PostgreSQL database (a
 * "postgresql://" or "postgres://" URL or a libpq key=value string,
 * through libpq). The queries are
 * written once, against the statement layer below (sq_*), in SQL both
 * engines take; where they differ a query names both forms (SQ_SQL).
 *
 *   store.c          the handle: open by kind, close, transactions, read
 *                    snapshots, run locks
 *   store_sql.c      the statement layer (sq_*) over sqlite3 and libpq
 *   store_sqlite.c   the SQLite file: identity, schema and migrations,
 *                    the check that the schema is ours, read-only open
 *                    and the bound on its statements
 *   store_pg.c       the PostgreSQL database: the same, and its run locks
 *   store_runs.c     prompts, runs, responses (write, pending, read one)
 *   store_scores.c   scored sets, the score stage's scan, scores,
 *                    embeddings, the analyses' reads
 *   store_merge.c    copying shard stores into one (replacing named runs)
 *   store_manage.c   managing runs: overviews (list, show), rename, delete,
 *                    the endpoints a run was asked through, free labels
 *
 * Nothing outside src/store/ includes this header except tests, which may
 * read the database with the statement layer (or store_sqlite()) to check
 * what the store wrote, and bench/compare_bench.c, which wraps its
 * fixture's writes in one transaction. */
#ifndef DRIFT_STORE_INTERNAL_H
#define DRIFT_STORE_INTERNAL_H

#include <libpq-fe.h>
#include <sqlite3.h>
#include <zstd.h>

#include "driftbench/store.h"

/* Statements prepared once per handle (SQLite: sqlite3_prepare_v3
 * PERSISTENT; PostgreSQL: a named prepared statement of the connection). */
enum {
    STORE_STMT_PUT_RESPONSE,
    STORE_STMT_PUT_SCORE,
    STORE_STMT_PROMPT_INSERT,
    STORE_STMT_PROMPT_FIND,
    STORE_STMT_ANSWER_TEXT,
    STORE_STMT_SCAN_PENDING,
    STORE_STMT_COUNT
};

typedef enum { STORE_SQLITE, STORE_PG } store_kind;

typedef struct store_q store_q;

struct drift_store {
    store_kind kind;
    sqlite3 *db;          /* STORE_SQLITE */
    PGconn *pg;           /* STORE_PG */
    char *path;           /* as opened (a file path or a URL): drift_store_path */
    char *shown;          /* path for messages: drift_redact(path), its passwords "***" */
    char *pg_msg;         /* PostgreSQL: the last failure's message */
    store_q *stmts[STORE_STMT_COUNT];
    ZSTD_CCtx *zc; /* reused across responses: a fresh context per call costs more than the compression */
    int readonly;         /* opened by drift_store_open_readonly */
    int version;          /* the schema version of the store as opened (after migrating) */
    int holds_locks;      /* run_begin took a run lock through this handle */
    int read_depth;       /* drift_store_read_begin calls not yet ended */
    int read_own_tx;      /* the outermost read_begin opened the transaction */
    struct store_pipe *pipe; /* PostgreSQL: the open pipeline (sq_pipeline_begin), else NULL */
    char **pg_locks;      /* PostgreSQL: labels whose advisory lock this connection holds */
    size_t n_pg_locks;
    unsigned long long proc_start; /* this process's start (clock ticks after boot); 0 unknown */
    char host[256];       /* this host's name, for run locks */
    char token[128];      /* this handle's run-lock token */
    /* SQLite read-only handles: the bound on a statement's VM steps (store_sqlite.c) */
    unsigned long long bound_steps, bound_max, bound_bytes;
    int bound_hit;        /* the running statement passed it: sq_errmsg says bound_msg */
    char bound_msg[320];
};

/* 1 when path names a PostgreSQL store: a "postgresql://..." or
 * "postgres://..." URL, or a libpq key=value string whose first word is one
 * of libpq's keywords ("host=/run/pg dbname=drift"). */
int store_is_pg_url(const char *path);

/* ---- the statement layer: one API over sqlite3 and libpq ----
 *
 * SQL is written with SQLite's placeholders (?, ?N); for PostgreSQL they
 * become $N and SQLite's "INDEXED BY name" hints are dropped. Values bound
 * by pointer (text, blob) must stay alive until the statement is stepped
 * to its end, reset or finalized. A statement steps like sqlite3_step:
 * SQ_ROW per row, then SQ_DONE; SQ_ERROR on failure (sq_errmsg says why).
 * PostgreSQL runs the statement at the first step and reads the whole
 * result; results come as text (bytea decoded by sq_blob / sq_text). */
enum { SQ_ERROR = -1, SQ_DONE = 0, SQ_ROW = 1 };

/* The SQL of the store's kind: SQ_SQL(st, "sqlite form", "postgresql form"). */
#define SQ_SQL(st, lite, pg) ((st)->kind == STORE_PG ? (pg) : (lite))

/* A fresh statement; sq_done finalizes it. NULL with err set. */
store_q *sq_prepare(drift_store *st, const char *sql, drift_error *err);
/* The handle's cached statement `which` (prepared from sql on first use),
 * reset and with its bindings cleared; sq_done resets it. */
store_q *sq_cached(drift_store *st, int which, const char *sql, drift_error *err);
void sq_bind_int64(store_q *q, int i, int64_t v);
void sq_bind_double(store_q *q, int i, double v);
void sq_bind_text(store_q *q, int i, const char *t);           /* NULL binds NULL */
void sq_bind_blob(store_q *q, int i, const void *p, size_t n); /* NULL binds NULL */
/* Text that may hold any bytes (model output, server errors): text in
 * SQLite, bytea in PostgreSQL (whose text must be valid UTF-8). */
void sq_bind_bytes_text(store_q *q, int i, const char *t);
void sq_bind_null(store_q *q, int i);
int sq_step(store_q *q);
int sq_is_null(store_q *q, int i);
int64_t sq_int64(store_q *q, int i);
int sq_int(store_q *q, int i);
double sq_double(store_q *q, int i);
/* Column i as text (a bytea column decoded, NUL-terminated), NULL for
 * NULL; valid until the next step, reset or finalize. */
const char *sq_text(store_q *q, int i);
const void *sq_blob(store_q *q, int i);
size_t sq_bytes(store_q *q, int i); /* size of sq_text / sq_blob's value */
/* Rows the last step of an INSERT/UPDATE/DELETE changed. */
long sq_changes(store_q *q);
/* Ends the statement's read (bindings stay). */
void sq_reset(store_q *q);
/* Finalizes a fresh statement, resets a cached one; NULL is fine. */
void sq_done(store_q *q);
/* Batched writes: between sq_pipeline_begin and sq_pipeline_end, steps of
 * statements that return no rows are sent without waiting for their
 * results (PostgreSQL's pipeline mode: one round trip per 256 statements
 * instead of one per statement; SQLite runs them as before, and both calls
 * do nothing). Such a step returns SQ_DONE when the statement was sent;
 * sq_pipeline_end waits for every result and returns DRIFT_ERR_STORE with
 * the first failure's message, setting *failed to its statement's ordinal
 * among the steps of the pipeline (from 0), or -1 when all succeeded. Only
 * inside a transaction; the statements after a failure are not run. */
void sq_pipeline_begin(drift_store *st);
drift_status sq_pipeline_end(drift_store *st, long *failed, drift_error *err);
/* Runs SQL without parameters (several statements allowed). */
drift_status sq_exec(drift_store *st, const char *sql, drift_error *err);
/* Runs SQL without parameters, ignoring failure (rollback, detach). */
void sq_exec_quiet(drift_store *st, const char *sql);
/* The last failure's message from the database. */
const char *sq_errmsg(drift_store *st);
/* 1 when a transaction is open on the handle. */
int sq_in_tx(drift_store *st);
/* Frees the handle's cached statements (close). */
void sq_free_cached(drift_store *st);

/* ---- backends (store_sqlite.c, store_pg.c) ---- */
drift_status store_sqlite_open(drift_store *st, int readonly, drift_error *err);
drift_status store_pg_open(drift_store *st, int readonly, drift_error *err);
void store_pg_close(drift_store *st);
/* PostgreSQL run locks: a session advisory lock per label (store_pg.c). */
drift_status store_pg_lock_take(drift_store *st, const char *label, int *taken, drift_error *err);
void store_pg_lock_release(drift_store *st, const char *label);
/* Takes label's advisory lock for a moment (rename, delete): 1 taken (give
 * it back with store_pg_lock_give), 0 another connection holds it (or this
 * handle, as a writer), -1 error. */
int store_pg_lock_try(drift_store *st, const char *label);
void store_pg_lock_give(drift_store *st, const char *label);

/* ---- helpers the store's files share (store.c) ---- */

/* DRIFT_ERR_STORE "PATH: what: database's message"; returns the code. */
drift_status store_db_error(drift_store *st, drift_error *err, const char *what);
/* BEGIN (SQLite: IMMEDIATE) / COMMIT (rolled back when the commit fails) /
 * ROLLBACK when a transaction is open. */
drift_status store_tx_begin(drift_store *st, drift_error *err);
drift_status store_tx_commit(drift_store *st, drift_error *err);
void store_tx_rollback(drift_store *st);
/* The end of a batch written in a pipeline (sq_pipeline_begin) that failed
 * after setting err (or before it could): the pipeline's results are
 * drained and dropped, the transaction rolled back; returns
 * store_err_code(err). */
drift_status store_pipeline_abort(drift_store *st, drift_error *err);
/* DRIFT_ERR_STORE when schema version v is newer than this driftbench
 * reads (both backends refuse such a store the same way), else DRIFT_OK. */
drift_status store_check_version(drift_store *st, int v, drift_error *err);
/* err's code when set, else DRIFT_ERR_STORE: the status of a step that
 * failed after setting err (or before it could). */
drift_status store_err_code(const drift_error *err);

/* Column i as a malloc'd string (NULL for NULL or out of memory). */
char *store_col_strdup(store_q *s, int i);
/* Steps q to its end, appending column i of each row to the array *arr of
 * *n strings (malloc'd copies; "" for NULL). Returns SQ_DONE, or SQ_ERROR
 * when a step failed or memory ran out; the strings read so far stay in
 * *arr, the caller's to free either way. */
int store_col_strings(store_q *q, int i, char ***arr, size_t *n);

/* Run locks (store.c): takes the writer lock on label for this handle;
 * call inside the transaction of run_begin. *taken = 1 when this call took
 * it (it was not this handle's already), also when it then failed: on
 * PostgreSQL the caller releases it (store_pg_lock_release) after rolling
 * back, since an aborted transaction cannot run the unlock. */
drift_status store_lock_take(drift_store *st, const char *label, int *taken, drift_error *err);
/* Writes this handle's row of run_locks for label (pid, host, process
 * start, token, now), replacing the one there (store.c; both backends'
 * lock takers). what names the step in a failure's message. */
drift_status store_lock_row_write(drift_store *st, const char *label, const char *what, drift_error *err);

/* Whether a live writer holds label's lock (store.c): *live = 1 when one
 * does (SQLite: a run_locks row whose owner is not gone, or of another
 * host; PostgreSQL: the advisory lock is held by another connection), with
 * who in `who` ("pid N on host H since T"); 0 when none or a stale row. A
 * store older than schema v2 has no locks. */
drift_status store_lock_live(drift_store *st, const char *label, int *live, char *who, size_t cap, drift_error *err);

/* Deletes run `id`'s rows (embeddings, scores, responses, endpoints, the
 * run) inside the caller's transaction (store_manage.c); -1 on failure. */
int store_run_delete_rows(drift_store *st, int64_t id);

/* Records that run `id` was begun through `target` (the record's form) now
 * (store_manage.c): the last endpoint row of the run gets a begin more when
 * it is that target, else a new row is added (a run created before schema
 * v3 first gets a row for its stored target, from its start). Inside
 * run_begin's transaction. */
drift_status store_endpoint_note(drift_store *st, int64_t id, const char *old_target, const char *old_started,
                                 const char *target, drift_error *err);

/* The columns of a response row with its prompt, as store_answer_from_row
 * reads them ("r" = responses, "p" = prompts). */
#define STORE_RESP_COLS                                                                                  \
    "r.id, r.prompt_rowid, r.replicate, r.text, r.prompt_tokens, r.completion_tokens, r.finish_reason, " \
    "r.latency_ms, r.logprobs, r.error, r.http_status, r.attempts, "                                     \
    "p.prompt_id, p.workload, p.input, p.reference, p.hash"
/* Fills an answer and (when p is not NULL) its prompt from a row of
 * STORE_RESP_COLS: DRIFT_ERR_NOMEM (both emptied), DRIFT_ERR_STORE for
 * corrupt logprobs (the rest filled, logprobs_json NULL), else DRIFT_OK. */
drift_status store_answer_from_row(store_q *s, drift_answer *r, drift_prompt *p);

/* The SQLite connection behind a handle (NULL for PostgreSQL): for tests
 * and benchmarks (see the top). Library code goes through the store's
 * functions. */
sqlite3 *store_sqlite(drift_store *st);

#endif
