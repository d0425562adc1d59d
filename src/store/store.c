/* store.c - the store's handle (store.h): opening by kind, closing,
 * transactions and read snapshots, run locks. The store's other files
 * (store_internal.h lists them) hold the queries and the two backends; no
 * SQL runs outside src/store/.
 *
 * Kinds: a path is an SQLite file (store_sqlite.c, the default); a
 * "postgresql://" or "postgres://" URL, or a libpq key=value string, is a
 * PostgreSQL database (store_pg.c). Both hold the same tables and give the
 * same guarantees; the queries are written once against the statement
 * layer (store_sql.c).
 *
 * Secrets: a handle keeps the path as given (drift_store_path, for opening
 * it again) and shows only drift_redact's copy (drift_store_display, every
 * message); the target of a run is stored without its secrets
 * (store_runs.c).
 *
 * Write rules: every batch (prompts, responses, scores) is one transaction
 * (SQLite: IMMEDIATE), rolled back entirely on any failure. A response row
 * that holds an answer is never overwritten; a row that holds an error is
 * replaced by a later result (an UPSERT whose UPDATE has `WHERE
 * responses.failed`).
 *
 * Which score is "the" score of a response (load_scored): a rewritten score
 * gets an id larger than every existing one (SQLite: INSERT OR REPLACE gives
 * the new row a new rowid; PostgreSQL: the upsert takes the next value of
 * the id sequence), so the score with the largest scores.id is the one
 * written last. load_scored takes that one when several evaluators scored a
 * response.
 *
 * Logprobs are stored as one zstd frame of the JSON text (level 3).
 * A drift_store handle is not thread-safe: use one per thread.
 *
 * Run locks (schema v2): one writer per label. run_begin takes the label's
 * lock inside its transaction and records run_locks(label, pid, host,
 * proc_start, token): the token names the handle (pid, process start, a
 * counter, a clock reading), and only the handle that holds a lock releases
 * it (run_finish, run_unlock, close).
 *   SQLite: the row is the lock. Two processes that begin the same label at
 *   once are serialised by the IMMEDIATE transaction, so the second one sees
 *   the first one's row. An owner is gone when, on this host, kill(pid, 0)
 *   says ESRCH, or /proc/PID/stat shows a zombie or a different start time
 *   (the pid was reused); locks of other hosts are never judged (their pids
 *   mean nothing here). Containers that share one store file and one host
 *   name but not one pid namespace would misjudge each other: give them
 *   distinct names.
 *   PostgreSQL: the lock is a session advisory lock on a 64-bit hash of the
 *   label, held by the handle's connection; the row only says who holds it.
 *   The server drops the lock when the connection ends, so the lock of a
 *   runner that died on any host is free again at once. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store_internal.h"
#include "util/util.h"

/* ---- helpers the store's files share (store_internal.h) ---- */

drift_status store_db_error(drift_store *st, drift_error *err, const char *what) {
    return drift_error_set(err, DRIFT_ERR_STORE, "%s: %s: %s", st->shown, what, sq_errmsg(st));
}

drift_status store_tx_begin(drift_store *st, drift_error *err) {
    if (sq_exec(st, SQ_SQL(st, "BEGIN IMMEDIATE", "BEGIN"), NULL) != DRIFT_OK)
        return store_db_error(st, err, "begin transaction");
    return DRIFT_OK;
}

drift_status store_tx_commit(drift_store *st, drift_error *err) {
    if (sq_exec(st, "COMMIT", NULL) != DRIFT_OK) {
        drift_status rc = store_db_error(st, err, "commit");
        sq_exec_quiet(st, "ROLLBACK");
        return rc;
    }
    return DRIFT_OK;
}

void store_tx_rollback(drift_store *st) {
    if (sq_in_tx(st)) sq_exec_quiet(st, "ROLLBACK");
}

drift_status store_check_version(drift_store *st, int v, drift_error *err) {
    if (v <= DRIFT_STORE_SCHEMA_VERSION) return DRIFT_OK;
    return drift_error_set(err, DRIFT_ERR_STORE,
                           "%s: store schema version %d is newer than this driftbench supports (%d); upgrade driftbench",
                           st->shown, v, DRIFT_STORE_SCHEMA_VERSION);
}

drift_status store_err_code(const drift_error *err) { return err && err->code ? err->code : DRIFT_ERR_STORE; }

drift_status store_pipeline_abort(drift_store *st, drift_error *err) {
    long ignored;
    sq_pipeline_end(st, &ignored, NULL);
    store_tx_rollback(st);
    return store_err_code(err);
}

char *store_col_strdup(store_q *s, int i) {
    const char *t = sq_text(s, i);
    return t ? util_strdup(t) : NULL;
}

int store_col_strings(store_q *q, int i, char ***arr, size_t *n) {
    int step;
    while ((step = sq_step(q)) == SQ_ROW) {
        char **na = realloc(*arr, (*n + 1) * sizeof *na);
        if (!na) return SQ_ERROR;
        *arr = na;
        if (!(na[*n] = util_strdup(sq_text(q, i) ? sq_text(q, i) : ""))) return SQ_ERROR;
        (*n)++;
    }
    return step;
}

/* ---- read snapshots ---- */

void drift_store_read_begin(drift_store *st) {
    if (!st) return;
    if (st->read_depth++ == 0)
        st->read_own_tx =
            !sq_in_tx(st) &&
            sq_exec(st, SQ_SQL(st, "BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"), NULL) == DRIFT_OK;
}

void drift_store_read_end(drift_store *st) {
    if (!st || st->read_depth == 0) return;
    if (--st->read_depth == 0 && st->read_own_tx) {
        sq_exec_quiet(st, "COMMIT");
        st->read_own_tx = 0;
    }
}

/* ---- run locks: identity of a writer ---- */

/* State letter and start time (clock ticks after boot, field 22) of process
 * pid from /proc/PID/stat. 0 ok, -1 when unreadable (no /proc, no process). */
static int proc_stat(long long pid, char *state, unsigned long long *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    if (!p) return -1;
    char *save = NULL, *tok = strtok_r(p + 1, " ", &save);
    if (!tok) return -1;
    *state = tok[0];
    for (int i = 0; tok && i < 19; i++) tok = strtok_r(NULL, " ", &save); /* state is field 3, start 22 */
    if (!tok) return -1;
    *start = strtoull(tok, NULL, 10);
    return 0;
}

/* 1 when the process that took a lock on this host is gone. */
static int owner_gone(long long pid, unsigned long long start) {
    if (pid <= 0 || pid > 0x7fffffffLL) return 1;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
    char state = 0;
    unsigned long long now_start = 0;
    if (proc_stat(pid, &state, &now_start) == 0) {
        if (state == 'Z' || state == 'X') return 1; /* dead, not yet reaped */
        if (start && now_start && now_start != start) return 1; /* the pid was reused */
    }
    return 0;
}

/* Fills the handle's host name, process start and lock token. */
static void lock_identity(drift_store *st) {
    static unsigned counter;
    if (gethostname(st->host, sizeof st->host) != 0 || !st->host[0]) snprintf(st->host, sizeof st->host, "?");
    st->host[sizeof st->host - 1] = '\0';
    char state;
    if (proc_stat((long long)getpid(), &state, &st->proc_start)) st->proc_start = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(st->token, sizeof st->token, "%lld:%llu:%u:%lld.%09ld", (long long)getpid(), st->proc_start, k,
             (long long)ts.tv_sec, ts.tv_nsec);
}

static drift_status store_new(const char *path, int readonly, drift_store **out, drift_error *err) {
    *out = NULL;
    if (!path || !*path) return drift_error_set(err, DRIFT_ERR_INVALID, "store path is empty");
    drift_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = util_strdup(path)) || !(st->shown = drift_redact(path))) {
        if (st) free(st->path);
        free(st);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory opening a store");
    }
    st->kind = store_is_pg_url(path) ? STORE_PG : STORE_SQLITE;
    st->readonly = readonly;
    drift_status ds =
        st->kind == STORE_PG ? store_pg_open(st, readonly, err) : store_sqlite_open(st, readonly, err);
    if (ds) {
        drift_store_close(st);
        return ds;
    }
    if (!readonly) lock_identity(st);
    *out = st;
    return DRIFT_OK;
}

drift_status drift_store_open(const char *path, drift_store **out, drift_error *err) {
    return store_new(path, 0, out, err);
}

drift_status drift_store_open_readonly(const char *path, drift_store **out, drift_error *err) {
    return store_new(path, 1, out, err);
}

const char *drift_store_path(const drift_store *st) { return st ? st->path : NULL; }

const char *drift_store_display(const drift_store *st) { return st ? st->shown : NULL; }

void drift_store_close(drift_store *st) {
    if (!st) return;
    if (st->holds_locks && !st->readonly && (st->db || st->pg)) {
        store_q *s = sq_prepare(st, "DELETE FROM run_locks WHERE token=?", NULL);
        if (s) {
            sq_bind_text(s, 1, st->token);
            sq_step(s); /* best effort: a lock left behind is taken over once we are gone */
        }
        sq_done(s);
    }
    sq_free_cached(st);
    ZSTD_freeCCtx(st->zc);
    if (st->db) sqlite3_close(st->db);
    store_pg_close(st); /* ends the connection: the server drops its advisory locks */
    free(st->path);
    free(st->shown);
    free(st->pg_msg);
    free(st);
}

sqlite3 *store_sqlite(drift_store *st) { return st ? st->db : NULL; }

drift_status store_lock_row_write(drift_store *st, const char *label, const char *what, drift_error *err) {
    char now[32];
    util_utc_iso(now);
    store_q *q = sq_prepare(st,
                            SQ_SQL(st,
                                   "INSERT OR REPLACE INTO run_locks(label,pid,host,proc_start,token,started_at) "
                                   "VALUES(?,?,?,?,?,?)",
                                   "INSERT INTO run_locks(label,pid,host,proc_start,token,started_at) "
                                   "VALUES(?,?,?,?,?,?) ON CONFLICT(label) DO UPDATE SET pid=excluded.pid, "
                                   "host=excluded.host, proc_start=excluded.proc_start, token=excluded.token, "
                                   "started_at=excluded.started_at"),
                            err);
    if (!q) return store_err_code(err);
    sq_bind_text(q, 1, label);
    sq_bind_int64(q, 2, (int64_t)getpid());
    sq_bind_text(q, 3, st->host);
    sq_bind_int64(q, 4, (int64_t)st->proc_start);
    sq_bind_text(q, 5, st->token);
    sq_bind_text(q, 6, now);
    int rc = sq_step(q);
    sq_done(q);
    return rc == SQ_DONE ? DRIFT_OK : store_db_error(st, err, what);
}

/* Takes the writer lock on label for this handle; call inside run_begin's
 * transaction (see "Run locks" at the top). DRIFT_ERR_STORE naming the label
 * and the owner when a live writer holds it. */
drift_status store_lock_take(drift_store *st, const char *label, int *taken, drift_error *err) {
    *taken = 0;
    if (st->kind == STORE_PG) return store_pg_lock_take(st, label, taken, err);
    store_q *s = sq_prepare(st, "SELECT pid, host, proc_start, token, started_at FROM run_locks WHERE label=?", err);
    if (!s) return store_err_code(err);
    sq_bind_text(s, 1, label);
    int rc = sq_step(s);
    if (rc == SQ_ROW) {
        long long pid = sq_int64(s, 0);
        const char *host = sq_text(s, 1);
        unsigned long long start = (unsigned long long)sq_int64(s, 2);
        const char *token = sq_text(s, 3);
        const char *since = sq_text(s, 4);
        host = host ? host : "?";
        since = since ? since : "?";
        int ours = token && !strcmp(token, st->token);
        int same_host = !strcmp(host, st->host);
        if (ours) {
            sq_done(s);
            return DRIFT_OK;
        }
        if (!(same_host && owner_gone(pid, start))) {
            drift_status ds;
            if (same_host)
                ds = drift_error_set(err, DRIFT_ERR_STORE,
                                     "%s: run '%s' is being written by another driftbench (pid %lld on this host, "
                                     "since %s); wait for it to end or stop it, then run again to resume",
                                     st->shown, label, pid, since);
            else
                ds = drift_error_set(err, DRIFT_ERR_STORE,
                                     "%s: run '%s' is being written by another driftbench (pid %lld on host %s, "
                                     "since %s); wait for it to end or stop it. If that process is gone, remove "
                                     "its lock: sqlite3 %s \"DELETE FROM run_locks WHERE label='%s'\"",
                                     st->shown, label, pid, host, since, st->shown, label);
            sq_done(s);
            return ds;
        }
    } else if (rc != SQ_DONE) {
        sq_done(s);
        return store_db_error(st, err, "reading run locks");
    }
    sq_done(s);
    drift_status ds = store_lock_row_write(st, label, "taking the run lock", err);
    if (ds) return ds;
    st->holds_locks = 1;
    *taken = 1;
    return DRIFT_OK;
}

drift_status drift_store_run_unlock(drift_store *st, const char *label, drift_error *err) {
    if (!st->holds_locks || !label) return DRIFT_OK;
    store_q *s = sq_prepare(st, "DELETE FROM run_locks WHERE label=? AND token=?", err);
    if (!s) return store_err_code(err);
    sq_bind_text(s, 1, label);
    sq_bind_text(s, 2, st->token);
    int rc = sq_step(s);
    sq_done(s);
    if (st->kind == STORE_PG) store_pg_lock_release(st, label);
    if (rc != SQ_DONE) return store_db_error(st, err, "releasing the run lock");
    return DRIFT_OK;
}

drift_status store_lock_live(drift_store *st, const char *label, int *live, char *who, size_t cap,
                             drift_error *err) {
    *live = 0;
    if (cap) who[0] = '\0';
    if (st->version < 2) return DRIFT_OK;
    store_q *s = sq_prepare(st, "SELECT pid, host, proc_start, started_at FROM run_locks WHERE label=?", err);
    if (!s) return store_err_code(err);
    sq_bind_text(s, 1, label);
    int rc = sq_step(s);
    if (rc == SQ_ERROR) {
        sq_done(s);
        return store_db_error(st, err, "reading run locks");
    }
    long long pid = rc == SQ_ROW ? sq_int64(s, 0) : 0;
    char host[256] = "", since[64] = "";
    unsigned long long start = rc == SQ_ROW ? (unsigned long long)sq_int64(s, 2) : 0;
    if (rc == SQ_ROW) {
        snprintf(host, sizeof host, "%s", sq_text(s, 1) ? sq_text(s, 1) : "?");
        snprintf(since, sizeof since, "%s", sq_text(s, 3) ? sq_text(s, 3) : "?");
    }
    sq_done(s);
    if (st->kind == STORE_PG) {
        if (st->readonly) { /* a read-only session takes no lock: the row says who wrote last */
            *live = rc == SQ_ROW;
        } else {
            int got = store_pg_lock_try(st, label);
            if (got < 0) return store_db_error(st, err, "probing the run lock");
            if (got) store_pg_lock_give(st, label);
            *live = !got;
        }
    } else if (rc == SQ_ROW) {
        char me[256];
        if (gethostname(me, sizeof me) != 0) snprintf(me, sizeof me, "?");
        me[sizeof me - 1] = '\0';
        *live = strcmp(host, me) != 0 || !owner_gone(pid, start);
    }
    if (*live && cap) {
        if (rc == SQ_ROW) snprintf(who, cap, "pid %lld on host %s since %s", pid, host, since);
        else snprintf(who, cap, "another connection");
    }
    return DRIFT_OK;
}
