/* store.c - the SQLite store of store.h: the handle (open, identity,
 * schema and migrations, read-only open, close), transactions and read
 * snapshots, run locks. The store's other files (store_internal.h lists
 * them) hold the queries; no SQL runs outside src/store/.
 *
 * One file in WAL mode (readers never block the writer; a process killed
 * with SIGKILL loses at most the transaction it had open, never a committed
 * one: synchronous=NORMAL is durable against process crashes, only a power
 * loss may drop the last commits). busy_timeout lets several processes share
 * one file.
 *
 * Identity and versions: a DriftBench store carries PRAGMA application_id
 * 0x44524654 ("DRFT") and its schema version in PRAGMA user_version. On open:
 *   - not an SQLite file, or an SQLite file with tables but no DriftBench
 *     marks                                  -> refused, the file untouched
 *   - user_version > DRIFT_STORE_SCHEMA_VERSION -> refused (newer tool wrote it)
 *   - user_version < DRIFT_STORE_SCHEMA_VERSION -> the migrations of
 *     `store_migrations` run one by one, each in its own transaction that also
 *     bumps user_version (an empty file starts at version 0).
 * To add schema v2: append {2, "ALTER TABLE ...; ..."} to store_migrations and
 * bump DRIFT_STORE_SCHEMA_VERSION in store.h.
 *
 * Write rules: every batch (prompts, responses, scores) is one IMMEDIATE
 * transaction, rolled back entirely on any failure. A response row that holds
 * an answer is never overwritten; a row that holds an error is replaced by a
 * later result (an UPSERT whose UPDATE has `WHERE responses.error IS NOT NULL`).
 *
 * Which score is "the" score of a response (load_scored): scores are upserted
 * with INSERT OR REPLACE, which gives the new row a rowid larger than every
 * existing one, so the score with the largest scores.id is the one written
 * last. load_scored takes that one when several evaluators scored a response.
 *
 * Indexes: load_scored (what compare reads; bench/BENCHMARKS.md times it at
 * the paper's scale) must never touch the wide response rows (text,
 * logprobs), so it reads two covering indexes only: responses_scan(run_id,
 * prompt_rowid, replicate, failed) gives filter, order (no sort step), id
 * and the error flag; scores_latest(response_id, id, label, value,
 * evaluator) gives the latest score of a response by one seek. `failed`
 * mirrors `error IS NOT NULL` for that reason. The UNIQUE constraints give
 * the upsert targets: responses(run_id, prompt_rowid, replicate),
 * scores(response_id, evaluator), prompts(suite, prompt_id). Narrow columns
 * come first in responses, so reading them never follows overflow pages.
 *
 * Logprobs are stored as one zstd frame of the JSON text (level 3).
 * A drift_store handle is not thread-safe: use one per thread.
 *
 * Run locks (schema v2): one writer per label. run_begin inserts
 * run_locks(label, pid, host, proc_start, token) inside its IMMEDIATE
 * transaction, so two processes that begin the same label at once are
 * serialised by SQLite and the second one sees the first one's row. The
 * token names the handle (pid, process start, a counter, a clock reading):
 * only the handle that holds a lock releases it (run_finish, run_unlock,
 * close), so an owner that was taken over cannot delete its successor's
 * row. An owner is gone when, on this host, kill(pid, 0) says ESRCH, or
 * /proc/PID/stat shows a zombie or a different start time (the pid was
 * reused); locks of other hosts are never judged (their pids mean nothing
 * here). Containers that share one store file and one host name but not
 * one pid namespace would misjudge each other: give them distinct names.
 *
 * Read-only handles (drift_store_open_readonly): opened with
 * SQLITE_OPEN_READONLY through a "file:" URI, "immutable=1" when there is no
 * -wal file (nothing to miss, nothing created), "mode=ro" when there is one
 * (the WAL protocol through -shm); never a journal-mode change, a
 * migration or a lock. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store_internal.h"
#include "util/util.h"

#define STORE_APPLICATION_ID 0x44524654 /* "DRFT" */
#define STORE_BUSY_TIMEOUT_MS 10000

/* ---- schema and migrations ---- */

static const char STORE_SCHEMA_V1[] =
    "PRAGMA application_id = 1146242644;\n" /* 0x44524654 */
    "CREATE TABLE prompts(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  suite TEXT NOT NULL,\n"
    "  prompt_id TEXT NOT NULL,\n"
    "  workload TEXT NOT NULL,\n"
    "  input TEXT NOT NULL,\n"
    "  reference TEXT NOT NULL,\n"
    "  hash TEXT NOT NULL,\n"
    "  UNIQUE(suite, prompt_id));\n"
    "CREATE TABLE runs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  label TEXT NOT NULL UNIQUE,\n"
    "  target TEXT NOT NULL,\n"
    "  config TEXT NOT NULL DEFAULT '{}',\n"
    "  decoding TEXT NOT NULL DEFAULT '{}',\n"
    "  templates TEXT NOT NULL DEFAULT '{}',\n"
    "  suites TEXT NOT NULL DEFAULT '[]',\n"
    "  tool_version TEXT,\n"
    "  started_at TEXT NOT NULL,\n"
    "  finished_at TEXT);\n"
    "CREATE TABLE responses(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"
    "  prompt_rowid INTEGER NOT NULL REFERENCES prompts(id),\n"
    "  replicate INTEGER NOT NULL,\n"
    "  failed INTEGER NOT NULL DEFAULT 0,\n" /* 1 = error row (error IS NOT NULL) */
    "  http_status INTEGER,\n"
    "  attempts INTEGER,\n"
    "  prompt_tokens INTEGER,\n"
    "  completion_tokens INTEGER,\n"
    "  latency_ms REAL,\n"
    "  finish_reason TEXT,\n"
    "  created_at TEXT,\n"
    "  error TEXT,\n"
    "  text TEXT,\n"
    "  logprobs BLOB,\n"
    "  UNIQUE(run_id, prompt_rowid, replicate));\n"
    "CREATE INDEX responses_scan ON responses(run_id, prompt_rowid, replicate, failed);\n"
    "CREATE TABLE scores(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  response_id INTEGER NOT NULL REFERENCES responses(id),\n"
    "  evaluator TEXT NOT NULL,\n"
    "  label INTEGER NOT NULL,\n"
    "  value REAL,\n"
    "  detail TEXT,\n"
    "  UNIQUE(response_id, evaluator));\n"
    "CREATE INDEX scores_latest ON scores(response_id, id, label, value, evaluator);\n"
    "CREATE TABLE embeddings(\n"
    "  response_id INTEGER NOT NULL REFERENCES responses(id),\n"
    "  embedder TEXT NOT NULL,\n"
    "  dim INTEGER NOT NULL,\n"
    "  vec BLOB NOT NULL,\n"
    "  PRIMARY KEY(response_id, embedder));\n";

/* v2: who writes which run now (see "Run locks" above). */
static const char STORE_SCHEMA_V2[] =
    "CREATE TABLE run_locks(\n"
    "  label TEXT PRIMARY KEY,\n"
    "  pid INTEGER NOT NULL,\n"
    "  host TEXT NOT NULL,\n"
    "  proc_start INTEGER NOT NULL DEFAULT 0,\n" /* owner's start, clock ticks after boot; 0 unknown */
    "  token TEXT NOT NULL,\n"
    "  started_at TEXT NOT NULL);\n";

/* Migration i takes the schema from version store_migrations[i].to - 1 to
 * store_migrations[i].to. */
static const struct {
    int to;
    const char *sql;
} store_migrations[] = {
    {1, STORE_SCHEMA_V1},
    {2, STORE_SCHEMA_V2},
};

_Static_assert(sizeof store_migrations / sizeof store_migrations[0] == DRIFT_STORE_SCHEMA_VERSION,
               "one migration per schema version");

/* ---- helpers the store's files share (store_internal.h) ---- */

drift_status store_db_error(drift_store *st, drift_error *err, const char *what) {
    return drift_error_set(err, DRIFT_ERR_STORE, "%s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
}

/* Prepares (once) and resets a cached statement. */
sqlite3_stmt *store_stmt_get(drift_store *st, int which, const char *sql, drift_error *err) {
    sqlite3_stmt *s = st->stmts[which];
    if (!s) {
        if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
            store_db_error(st, err, "prepare");
            return NULL;
        }
        st->stmts[which] = s;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

sqlite3_stmt *store_stmt_prepare(drift_store *st, const char *sql, drift_error *err) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        store_db_error(st, err, "prepare");
        return NULL;
    }
    return s;
}

drift_status store_tx_begin(drift_store *st, drift_error *err) {
    if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return store_db_error(st, err, "begin transaction");
    return DRIFT_OK;
}

drift_status store_tx_commit(drift_store *st, drift_error *err) {
    if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        drift_status rc = store_db_error(st, err, "commit");
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    return DRIFT_OK;
}

void store_tx_rollback(drift_store *st) {
    if (!sqlite3_get_autocommit(st->db)) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

drift_status store_err_code(const drift_error *err) { return err && err->code ? err->code : DRIFT_ERR_STORE; }

/* ---- read snapshots ---- */

void drift_store_read_begin(drift_store *st) {
    if (!st) return;
    if (st->read_depth++ == 0)
        st->read_own_tx = sqlite3_get_autocommit(st->db) && sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
}

void drift_store_read_end(drift_store *st) {
    if (!st || st->read_depth == 0) return;
    if (--st->read_depth == 0 && st->read_own_tx) {
        sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
        st->read_own_tx = 0;
    }
}

static int pragma_int(sqlite3 *db, const char *sql, int *out) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int(s, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(s);
    return rc;
}

/* Checks what the file is before anything is written to it. Sets *version. */
static drift_status store_identify(drift_store *st, int *version, drift_error *err) {
    int uv = 0, app = 0;
    int rc = pragma_int(st->db, "PRAGMA user_version", &uv);
    if (rc == SQLITE_OK) rc = pragma_int(st->db, "PRAGMA application_id", &app);
    if (rc == SQLITE_NOTADB)
        return drift_error_set(err, DRIFT_ERR_STORE,
                               "%s: not a DriftBench store (not an SQLite database); refusing to touch it",
                               st->path);
    if (rc != SQLITE_OK) return store_db_error(st, err, "reading the schema version");

    if (app != STORE_APPLICATION_ID) {
        /* Empty database (new or zero-length file) is fine; anything with
         * tables or a version of its own belongs to someone else. */
        sqlite3_stmt *s = store_stmt_prepare(st, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name", err);
        if (!s) return err ? err->code : DRIFT_ERR_STORE;
        util_buf names = {0};
        int ntab = 0;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (ntab < 8) buf_printf(&names, "%s%s", ntab ? ", " : "", (const char *)sqlite3_column_text(s, 0));
            ntab++;
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            buf_free(&names);
            return store_db_error(st, err, "reading the table list");
        }
        if (ntab > 0 || uv != 0 || app != 0) {
            drift_status ret = drift_error_set(
                err, DRIFT_ERR_STORE,
                "%s: not a DriftBench store (SQLite database with application_id %d, user_version %d, "
                "%d table(s)%s%s%s); refusing to touch it",
                st->path, app, uv, ntab, ntab ? ": " : "", ntab ? names.data : "", ntab > 8 ? ", ..." : "");
            buf_free(&names);
            return ret;
        }
        buf_free(&names);
        *version = 0;
        return DRIFT_OK;
    }
    if (uv > DRIFT_STORE_SCHEMA_VERSION)
        return drift_error_set(err, DRIFT_ERR_STORE,
                               "%s: store schema version %d is newer than this driftbench supports (%d); "
                               "upgrade driftbench",
                               st->path, uv, DRIFT_STORE_SCHEMA_VERSION);
    *version = uv;
    return DRIFT_OK;
}

static drift_status store_migrate(drift_store *st, int from, drift_error *err) {
    for (size_t i = 0; i < sizeof store_migrations / sizeof store_migrations[0]; i++) {
        int to = store_migrations[i].to;
        if (to <= from) continue;
        drift_status ds = store_tx_begin(st, err);
        if (ds) return ds;
        /* Another process may have migrated while we waited for the lock. */
        int now = 0;
        if (pragma_int(st->db, "PRAGMA user_version", &now) != SQLITE_OK) {
            store_tx_rollback(st);
            return store_db_error(st, err, "reading the schema version");
        }
        if (now >= to) {
            store_tx_rollback(st);
            continue;
        }
        char *errmsg = NULL;
        if (sqlite3_exec(st->db, store_migrations[i].sql, NULL, NULL, &errmsg) != SQLITE_OK) {
            ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: migrating the schema to version %d: %s", st->path,
                                 to, errmsg ? errmsg : sqlite3_errmsg(st->db));
            sqlite3_free(errmsg);
            store_tx_rollback(st);
            return ds;
        }
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", to);
        if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            ds = store_db_error(st, err, "setting the schema version");
            store_tx_rollback(st);
            return ds;
        }
        ds = store_tx_commit(st, err);
        if (ds) return ds;
    }
    return DRIFT_OK;
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

drift_status drift_store_open(const char *path, drift_store **out, drift_error *err) {
    *out = NULL;
    if (!path || !*path) return drift_error_set(err, DRIFT_ERR_INVALID, "store path is empty");
    drift_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = util_strdup(path))) {
        free(st);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory opening %s", path);
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        drift_store_close(st);
        return drift_error_set(err, DRIFT_ERR_IO, "%s: not a regular file", path);
    }
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        drift_status ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: cannot open: %s", path,
                                          st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        drift_store_close(st);
        return ds;
    }
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(st->db, 0);

    int version = 0;
    drift_status ds = store_identify(st, &version, err);
    if (ds) {
        drift_store_close(st);
        return ds;
    }
    /* From here on the file is ours to change. */
    char *emsg = NULL;
    if (sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
                     "PRAGMA cache_size=-32768;",
                     NULL, NULL, &emsg) != SQLITE_OK) {
        ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: setting WAL mode: %s", path, emsg ? emsg : "?");
        sqlite3_free(emsg);
        drift_store_close(st);
        return ds;
    }
    if (version < DRIFT_STORE_SCHEMA_VERSION) {
        ds = store_migrate(st, version, err);
        if (ds) {
            drift_store_close(st);
            return ds;
        }
    }
    lock_identity(st);
    *out = st;
    return DRIFT_OK;
}

/* "file:" URI of path with the query q: bytes outside [A-Za-z0-9/._~-] are
 * %-escaped, and a leading "//" is one "/" (no URI authority). */
static char *path_uri(const char *path, const char *q) {
    util_buf b = {0};
    buf_puts(&b, "file:");
    const char *p = path;
    while (p[0] == '/' && p[1] == '/') p++;
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || strchr("/._~-", c)) buf_append(&b, p, 1);
        else buf_printf(&b, "%%%02X", c);
    }
    buf_printf(&b, "?%s", q);
    return b.data ? buf_steal(&b) : NULL;
}

/* Opens st->path read-only with the URI query q and reads the schema
 * version once; returns the SQLite code of the first failure. */
static int open_ro(drift_store *st, const char *q) {
    if (st->db) {
        sqlite3_close(st->db);
        st->db = NULL;
    }
    char *uri = path_uri(st->path, q);
    if (!uri) return SQLITE_NOMEM;
    int rc = sqlite3_open_v2(uri, &st->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    free(uri);
    if (rc != SQLITE_OK) return rc;
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(st->db, 0);
    int v = 0;
    return pragma_int(st->db, "PRAGMA user_version", &v);
}

drift_status drift_store_open_readonly(const char *path, drift_store **out, drift_error *err) {
    *out = NULL;
    if (!path || !*path) return drift_error_set(err, DRIFT_ERR_INVALID, "store path is empty");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no such store (no such file)", path);
        return drift_error_set(err, DRIFT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) return drift_error_set(err, DRIFT_ERR_IO, "%s: not a regular file", path);
    if (sb.st_size == 0)
        return drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                               "%s: empty file, not a DriftBench store (nothing was run into it)", path);
    drift_store *st = calloc(1, sizeof *st);
    if (!st || !(st->path = util_strdup(path))) {
        free(st);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory opening %s", path);
    }
    st->readonly = 1;
    char *wal = util_asprintf("%s-wal", path);
    struct stat wb;
    int have_wal = wal && stat(wal, &wb) == 0;
    free(wal);
    /* No -wal: every commit is in the main file and no writer is connected
     * (SQLite removes the -wal when the last connection closes), so read it
     * as immutable: no locks, nothing created. A -wal: go through it. */
    int rc = open_ro(st, have_wal ? "mode=ro" : "immutable=1");
    if (rc != SQLITE_OK && rc != SQLITE_NOTADB && have_wal && wb.st_size == 0)
        rc = open_ro(st, "immutable=1"); /* an empty -wal we cannot share (no -shm): nothing in it to miss */
    if (rc != SQLITE_OK && rc != SQLITE_NOTADB) {
        drift_status ds = drift_error_set(
            err, DRIFT_ERR_STORE, "%s: cannot open read-only: %s%s", path,
            st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc),
            have_wal ? " (its -wal file holds writes that need a -shm file next to it; open the store once "
                       "with a writing command where its directory is writable)"
                     : "");
        drift_store_close(st);
        return ds;
    }
    int version = 0;
    drift_status ds = store_identify(st, &version, err);
    if (!ds && version == 0)
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: an empty database, not a DriftBench store yet", path);
    if (!ds && sqlite3_exec(st->db, "PRAGMA query_only=1", NULL, NULL, NULL) != SQLITE_OK)
        ds = store_db_error(st, err, "setting query_only");
    if (ds) {
        drift_store_close(st);
        return ds;
    }
    *out = st;
    return DRIFT_OK;
}

const char *drift_store_path(const drift_store *st) { return st ? st->path : NULL; }

void drift_store_close(drift_store *st) {
    if (!st) return;
    if (st->holds_locks && !st->readonly && st->db) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(st->db, "DELETE FROM run_locks WHERE token=?", -1, &s, NULL) == SQLITE_OK) {
            sqlite3_bind_text(s, 1, st->token, -1, SQLITE_STATIC);
            sqlite3_step(s); /* best effort: a lock left behind is taken over once we are gone */
        }
        sqlite3_finalize(s);
    }
    for (int i = 0; i < STORE_STMT_COUNT; i++) sqlite3_finalize(st->stmts[i]);
    ZSTD_freeCCtx(st->zc);
    if (st->db) sqlite3_close(st->db);
    free(st->path);
    free(st);
}

sqlite3 *store_sqlite(drift_store *st) { return st ? st->db : NULL; }

/* ---- column helpers ---- */


char *store_col_strdup(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? util_strdup((const char *)t) : NULL;
}

void store_bind_text_or_null(sqlite3_stmt *s, int i, const char *t) {
    if (t)
        sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

/* Takes the writer lock on label for this handle; call inside an IMMEDIATE
 * transaction (see "Run locks" at the top). DRIFT_ERR_STORE naming the label
 * and the owner when a live writer holds it. */
drift_status store_lock_take(drift_store *st, const char *label, drift_error *err) {
    sqlite3_stmt *s =
        store_stmt_prepare(st, "SELECT pid, host, proc_start, token, started_at FROM run_locks WHERE label=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        long long pid = sqlite3_column_int64(s, 0);
        const char *host = (const char *)sqlite3_column_text(s, 1);
        unsigned long long start = (unsigned long long)sqlite3_column_int64(s, 2);
        const char *token = (const char *)sqlite3_column_text(s, 3);
        const char *since = (const char *)sqlite3_column_text(s, 4);
        host = host ? host : "?";
        since = since ? since : "?";
        int ours = token && !strcmp(token, st->token);
        int same_host = !strcmp(host, st->host);
        if (!ours && !(same_host && owner_gone(pid, start))) {
            drift_status ds;
            if (same_host)
                ds = drift_error_set(err, DRIFT_ERR_STORE,
                                     "%s: run '%s' is being written by another driftbench (pid %lld on this host, "
                                     "since %s); wait for it to end or stop it, then run again to resume",
                                     st->path, label, pid, since);
            else
                ds = drift_error_set(err, DRIFT_ERR_STORE,
                                     "%s: run '%s' is being written by another driftbench (pid %lld on host %s, "
                                     "since %s); wait for it to end or stop it. If that process is gone, remove "
                                     "its lock: sqlite3 %s \"DELETE FROM run_locks WHERE label='%s'\"",
                                     st->path, label, pid, host, since, st->path, label);
            sqlite3_finalize(s);
            return ds;
        }
    } else if (rc != SQLITE_DONE) {
        sqlite3_finalize(s);
        return store_db_error(st, err, "reading run locks");
    }
    sqlite3_finalize(s);
    char now[32];
    util_utc_iso(now);
    s = store_stmt_prepare(st,
                     "INSERT OR REPLACE INTO run_locks(label,pid,host,proc_start,token,started_at) "
                     "VALUES(?,?,?,?,?,?)",
                     err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)getpid());
    sqlite3_bind_text(s, 3, st->host, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)st->proc_start);
    sqlite3_bind_text(s, 5, st->token, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, now, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return store_db_error(st, err, "taking the run lock");
    st->holds_locks = 1;
    return DRIFT_OK;
}

drift_status drift_store_run_unlock(drift_store *st, const char *label, drift_error *err) {
    if (!st->holds_locks || !label) return DRIFT_OK;
    sqlite3_stmt *s = store_stmt_prepare(st, "DELETE FROM run_locks WHERE label=? AND token=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, st->token, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return store_db_error(st, err, "releasing the run lock");
    return DRIFT_OK;
}

