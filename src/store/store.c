/* store.c - the SQLite store of store.h.
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
 * Indexes: load_scored (what compare reads, 2 x 236,985 rows in well under
 * a second) must never touch the wide response rows (text, logprobs), so it
 * reads two covering indexes only: responses_scan(run_id, prompt_rowid,
 * replicate, failed) gives filter, order (no sort step), id and the error
 * flag; scores_latest(response_id, id, label, value, evaluator) gives the
 * latest score of a response by one seek. `failed` mirrors `error IS NOT
 * NULL` for that reason. The UNIQUE constraints give the upsert targets:
 * responses(run_id, prompt_rowid, replicate), scores(response_id, evaluator),
 * prompts(suite, prompt_id). Narrow columns come first in responses, so
 * reading them never follows overflow pages.
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
#include "driftbench/store.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

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

/* ---- the handle ---- */

enum {
    STMT_PUT_RESPONSE,
    STMT_PUT_SCORE,
    STMT_PROMPT_INSERT,
    STMT_PROMPT_FIND,
    STMT_COUNT
};

struct drift_store {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *stmts[STMT_COUNT];
    ZSTD_CCtx *zc; /* reused across responses: a fresh context per call costs more than the compression */
    int readonly;         /* opened by drift_store_open_readonly */
    int holds_locks;      /* run_begin took a run lock through this handle */
    unsigned long long proc_start; /* this process's start (clock ticks after boot); 0 unknown */
    char host[256];       /* this host's name, for run locks */
    char token[128];      /* this handle's run-lock token */
};

static drift_status db_error(drift_store *st, drift_error *err, const char *what) {
    return drift_error_set(err, DRIFT_ERR_STORE, "%s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
}

/* Prepares (once) and resets a cached statement. */
static sqlite3_stmt *stmt_get(drift_store *st, int which, const char *sql, drift_error *err) {
    sqlite3_stmt *s = st->stmts[which];
    if (!s) {
        if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
            db_error(st, err, "prepare");
            return NULL;
        }
        st->stmts[which] = s;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

static sqlite3_stmt *stmt_prepare(drift_store *st, const char *sql, drift_error *err) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
        db_error(st, err, "prepare");
        return NULL;
    }
    return s;
}

static drift_status tx_begin(drift_store *st, drift_error *err) {
    if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_error(st, err, "begin transaction");
    return DRIFT_OK;
}

static drift_status tx_commit(drift_store *st, drift_error *err) {
    if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        drift_status rc = db_error(st, err, "commit");
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    return DRIFT_OK;
}

static void tx_rollback(drift_store *st) {
    if (!sqlite3_get_autocommit(st->db)) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
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
    if (rc != SQLITE_OK) return db_error(st, err, "reading the schema version");

    if (app != STORE_APPLICATION_ID) {
        /* Empty database (new or zero-length file) is fine; anything with
         * tables or a version of its own belongs to someone else. */
        sqlite3_stmt *s = stmt_prepare(st, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name", err);
        if (!s) return err ? err->code : DRIFT_ERR_STORE;
        drift_buf names = {0};
        int ntab = 0;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            if (ntab < 8) buf_printf(&names, "%s%s", ntab ? ", " : "", (const char *)sqlite3_column_text(s, 0));
            ntab++;
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            buf_free(&names);
            return db_error(st, err, "reading the table list");
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
        drift_status ds = tx_begin(st, err);
        if (ds) return ds;
        /* Another process may have migrated while we waited for the lock. */
        int now = 0;
        if (pragma_int(st->db, "PRAGMA user_version", &now) != SQLITE_OK) {
            tx_rollback(st);
            return db_error(st, err, "reading the schema version");
        }
        if (now >= to) {
            tx_rollback(st);
            continue;
        }
        char *errmsg = NULL;
        if (sqlite3_exec(st->db, store_migrations[i].sql, NULL, NULL, &errmsg) != SQLITE_OK) {
            ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: migrating the schema to version %d: %s", st->path,
                                 to, errmsg ? errmsg : sqlite3_errmsg(st->db));
            sqlite3_free(errmsg);
            tx_rollback(st);
            return ds;
        }
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", to);
        if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
            ds = db_error(st, err, "setting the schema version");
            tx_rollback(st);
            return ds;
        }
        ds = tx_commit(st, err);
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
    if (!st || !(st->path = drift_strdup(path))) {
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
    drift_buf b = {0};
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
    if (!st || !(st->path = drift_strdup(path))) {
        free(st);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory opening %s", path);
    }
    st->readonly = 1;
    char *wal = drift_asprintf("%s-wal", path);
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
        ds = db_error(st, err, "setting query_only");
    if (ds) {
        drift_store_close(st);
        return ds;
    }
    *out = st;
    return DRIFT_OK;
}

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
    for (int i = 0; i < STMT_COUNT; i++) sqlite3_finalize(st->stmts[i]);
    ZSTD_freeCCtx(st->zc);
    if (st->db) sqlite3_close(st->db);
    free(st->path);
    free(st);
}

struct sqlite3 *drift_store_db(drift_store *st) { return st ? st->db : NULL; }

/* ---- small helpers ---- */

static char *col_strdup(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? drift_strdup((const char *)t) : NULL;
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *t) {
    if (t)
        sqlite3_bind_text(s, i, t, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

/* Canonical form of a JSON text (sorted keys, compact) for comparisons;
 * NULL or empty -> "{}"; invalid JSON is returned as it is. */
static char *json_canonical(const char *text) {
    if (!text || !*text) return drift_strdup("{}");
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!j) return drift_strdup(text);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* Describes how two JSON objects differ: "field.key: stored A, requested B"
 * for the first key that differs. Returns 1 if they differ. */
static int json_diff(const char *field, const char *stored, const char *given, char *out, size_t outsz) {
    char *a = json_canonical(stored), *b = json_canonical(given);
    int differ = !a || !b || strcmp(a, b) != 0;
    if (differ) {
        json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
        int done = 0;
        if (json_is_object(ja) && json_is_object(jb)) {
            const char *key;
            json_t *va;
            json_t *both[2] = {ja, jb};
            for (int side = 0; side < 2 && !done; side++) {
                json_object_foreach(both[side], key, va) {
                    json_t *x = json_object_get(ja, key), *y = json_object_get(jb, key);
                    if (x && y && json_equal(x, y)) continue;
                    char *sx = x ? json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
                    char *sy = y ? json_dumps(y, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
                    snprintf(out, outsz, "%s.%s: stored %s, requested %s", field, key, sx ? sx : "(absent)",
                             sy ? sy : "(absent)");
                    free(sx);
                    free(sy);
                    done = 1;
                    break;
                }
            }
        }
        if (!done) snprintf(out, outsz, "%s: stored %s, requested %s", field, a ? a : "?", b ? b : "?");
        json_decref(ja);
        json_decref(jb);
    }
    free(a);
    free(b);
    return differ;
}

/* ---- prompts ---- */

drift_status drift_store_put_prompts(drift_store *st, const drift_suite *suite, int64_t *rowids,
                                     drift_error *err) {
    const char *suite_name = suite->name ? suite->name : "";
    drift_status ds = tx_begin(st, err);
    if (ds) return ds;
    for (size_t i = 0; i < suite->n; i++) {
        const drift_prompt *p = &suite->prompts[i];
        sqlite3_stmt *ins = stmt_get(st, STMT_PROMPT_INSERT,
                                     "INSERT INTO prompts(suite,prompt_id,workload,input,reference,hash) "
                                     "VALUES(?,?,?,?,?,?) ON CONFLICT(suite,prompt_id) DO NOTHING",
                                     err);
        if (!ins) goto fail;
        sqlite3_bind_text(ins, 1, suite_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, p->prompt_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 3, drift_workload_name(p->workload), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 4, p->input ? p->input : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 5, p->reference_json ? p->reference_json : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 6, p->hash ? p->hash : "", -1, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            db_error(st, err, "inserting a prompt");
            goto fail;
        }
        sqlite3_stmt *find =
            stmt_get(st, STMT_PROMPT_FIND, "SELECT id, hash FROM prompts WHERE suite=? AND prompt_id=?", err);
        if (!find) goto fail;
        sqlite3_bind_text(find, 1, suite_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(find, 2, p->prompt_id, -1, SQLITE_STATIC);
        if (sqlite3_step(find) != SQLITE_ROW) {
            db_error(st, err, "finding a prompt");
            goto fail;
        }
        const char *h = (const char *)sqlite3_column_text(find, 1);
        if (strcmp(h ? h : "", p->hash ? p->hash : "") != 0) {
            drift_error_set(err, DRIFT_ERR_MISMATCH,
                            "%s: prompt %s of suite %s is stored with hash %s but the suite now gives hash %s "
                            "(its text or reference changed)",
                            st->path, p->prompt_id, suite_name, h ? h : "", p->hash ? p->hash : "");
            sqlite3_reset(find);
            goto fail;
        }
        if (rowids) rowids[i] = sqlite3_column_int64(find, 0);
        sqlite3_reset(find);
    }
    return tx_commit(st, err);
fail:
    tx_rollback(st);
    return err ? err->code : DRIFT_ERR_STORE;
}

/* ---- runs ---- */

static const char RUN_COLS[] =
    "id,label,target,config,decoding,templates,suites,tool_version,started_at,finished_at";

static drift_status run_from_row(sqlite3_stmt *s, drift_run_info *r) {
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(s, 0);
    r->label = col_strdup(s, 1);
    r->target = col_strdup(s, 2);
    r->config_json = col_strdup(s, 3);
    r->decoding_json = col_strdup(s, 4);
    r->templates_json = col_strdup(s, 5);
    r->suites_json = col_strdup(s, 6);
    r->tool_version = col_strdup(s, 7);
    r->started_at = col_strdup(s, 8);
    r->finished_at = col_strdup(s, 9);
    if (!r->label || !r->target || !r->config_json || !r->decoding_json || !r->started_at) {
        drift_run_info_free(r);
        return DRIFT_ERR_NOMEM;
    }
    return DRIFT_OK;
}

drift_status drift_store_run_get(drift_store *st, const char *label, drift_run_info *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE label=?", RUN_COLS);
    sqlite3_stmt *s = stmt_prepare(st, sql, err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    drift_status ds;
    if (rc == SQLITE_ROW) {
        ds = run_from_row(s, out);
        if (ds) drift_error_set(err, ds, "out of memory reading run %s", label);
        sqlite3_finalize(s);
        return ds;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return db_error(st, err, "reading runs");
    /* Not found: list what exists. */
    drift_buf names = {0};
    s = stmt_prepare(st, "SELECT label FROM runs ORDER BY id", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    int n = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (n < 50) buf_printf(&names, "%s%s", n ? ", " : "", (const char *)sqlite3_column_text(s, 0));
        n++;
    }
    sqlite3_finalize(s);
    if (n == 0)
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run labelled '%s' (the store has no runs)",
                             st->path, label);
    else
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run labelled '%s'; runs: %s%s", st->path, label,
                             names.data, n > 50 ? ", ..." : "");
    buf_free(&names);
    return ds;
}

drift_status drift_store_run_list(drift_store *st, drift_run_info **out, size_t *n, drift_error *err) {
    *out = NULL;
    *n = 0;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs ORDER BY id", RUN_COLS);
    sqlite3_stmt *s = stmt_prepare(st, sql, err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    drift_run_info *arr = NULL;
    size_t cnt = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            drift_run_info *na = realloc(arr, cap * sizeof *arr);
            if (!na) goto nomem;
            arr = na;
        }
        if (run_from_row(s, &arr[cnt])) goto nomem;
        cnt++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        drift_run_info_array_free(arr, cnt);
        return db_error(st, err, "listing runs");
    }
    *out = arr;
    *n = cnt;
    return DRIFT_OK;
nomem:
    sqlite3_finalize(s);
    drift_run_info_array_free(arr, cnt);
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory listing runs");
}

void drift_run_info_free(drift_run_info *r) {
    if (!r) return;
    free(r->label);
    free(r->target);
    free(r->config_json);
    free(r->decoding_json);
    free(r->templates_json);
    free(r->suites_json);
    free(r->tool_version);
    free(r->started_at);
    free(r->finished_at);
    memset(r, 0, sizeof *r);
}

void drift_run_info_array_free(drift_run_info *infos, size_t n) {
    if (!infos) return;
    for (size_t i = 0; i < n; i++) drift_run_info_free(&infos[i]);
    free(infos);
}

/* Takes the writer lock on label for this handle; call inside an IMMEDIATE
 * transaction (see "Run locks" at the top). DRIFT_ERR_STORE naming the label
 * and the owner when a live writer holds it. */
static drift_status lock_take(drift_store *st, const char *label, drift_error *err) {
    sqlite3_stmt *s =
        stmt_prepare(st, "SELECT pid, host, proc_start, token, started_at FROM run_locks WHERE label=?", err);
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
        return db_error(st, err, "reading run locks");
    }
    sqlite3_finalize(s);
    char now[32];
    drift_utc_iso(now);
    s = stmt_prepare(st,
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
    if (rc != SQLITE_DONE) return db_error(st, err, "taking the run lock");
    st->holds_locks = 1;
    return DRIFT_OK;
}

drift_status drift_store_run_unlock(drift_store *st, const char *label, drift_error *err) {
    if (!st->holds_locks || !label) return DRIFT_OK;
    sqlite3_stmt *s = stmt_prepare(st, "DELETE FROM run_locks WHERE label=? AND token=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, st->token, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return db_error(st, err, "releasing the run lock");
    return DRIFT_OK;
}

drift_status drift_store_run_begin(drift_store *st, const drift_run_info *info, int64_t *run_id, int *resumed,
                                   drift_error *err) {
    if (!info->label || !*info->label) return drift_error_set(err, DRIFT_ERR_INVALID, "run label is empty");
    if (resumed) *resumed = 0;
    drift_status ds = tx_begin(st, err);
    if (ds) return ds;
    if (lock_take(st, info->label, err)) goto fail;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE label=?", RUN_COLS);
    sqlite3_stmt *s = stmt_prepare(st, sql, err);
    if (!s) goto fail;
    sqlite3_bind_text(s, 1, info->label, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        drift_run_info old;
        if (run_from_row(s, &old)) {
            sqlite3_finalize(s);
            drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading run %s", info->label);
            goto fail;
        }
        sqlite3_finalize(s);
        char diff[768];
        const char *given_target = info->target ? info->target : "";
        if (strcmp(old.target, given_target) != 0) {
            drift_error_set(err, DRIFT_ERR_MISMATCH,
                            "run '%s' exists with another target: stored '%s', requested '%s' "
                            "(use a new label for a new run)",
                            info->label, old.target, given_target);
        } else if (json_diff("decoding", old.decoding_json, info->decoding_json, diff, sizeof diff) ||
                   json_diff("config", old.config_json, info->config_json, diff, sizeof diff)) {
            drift_error_set(err, DRIFT_ERR_MISMATCH,
                            "run '%s' exists with other settings: %s (use a new label for a new run)",
                            info->label, diff);
        } else {
            int64_t id = old.id;
            drift_run_info_free(&old);
            sqlite3_stmt *u = stmt_prepare(st, "UPDATE runs SET finished_at=NULL WHERE id=?", err);
            if (!u) goto fail;
            sqlite3_bind_int64(u, 1, id);
            rc = sqlite3_step(u);
            sqlite3_finalize(u);
            if (rc != SQLITE_DONE) {
                db_error(st, err, "resuming a run");
                goto fail;
            }
            *run_id = id;
            if (resumed) *resumed = 1;
            return tx_commit(st, err);
        }
        drift_run_info_free(&old);
        goto fail;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        db_error(st, err, "reading runs");
        goto fail;
    }
    {
        char now[32];
        drift_utc_iso(now);
        char *cfg = json_canonical(info->config_json), *dec = json_canonical(info->decoding_json);
        sqlite3_stmt *ins =
            stmt_prepare(st,
                         "INSERT INTO runs(label,target,config,decoding,templates,suites,tool_version,"
                         "started_at) VALUES(?,?,?,?,?,?,?,?)",
                         err);
        if (!ins || !cfg || !dec) {
            free(cfg);
            free(dec);
            sqlite3_finalize(ins);
            if (ins) drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory creating run %s", info->label);
            goto fail;
        }
        sqlite3_bind_text(ins, 1, info->label, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, info->target ? info->target : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 3, cfg, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 4, dec, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 5, info->templates_json ? info->templates_json : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 6, info->suites_json ? info->suites_json : "[]", -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 7, info->tool_version ? info->tool_version : drift_version(), -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 8, now, -1, SQLITE_STATIC);
        rc = sqlite3_step(ins);
        sqlite3_finalize(ins);
        free(cfg);
        free(dec);
        if (rc != SQLITE_DONE) {
            db_error(st, err, "creating a run");
            goto fail;
        }
        *run_id = sqlite3_last_insert_rowid(st->db);
    }
    return tx_commit(st, err);
fail:
    tx_rollback(st);
    return err && err->code ? err->code : DRIFT_ERR_STORE;
}

drift_status drift_store_run_finish(drift_store *st, int64_t run_id, drift_error *err) {
    char now[32];
    drift_utc_iso(now);
    sqlite3_stmt *s = stmt_prepare(st, "UPDATE runs SET finished_at=? WHERE id=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, now, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, run_id);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return db_error(st, err, "finishing a run");
    if (sqlite3_changes(st->db) == 0)
        return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run with id %lld", st->path, (long long)run_id);
    if (!st->holds_locks) return DRIFT_OK;
    s = stmt_prepare(st, "DELETE FROM run_locks WHERE token=? AND label=(SELECT label FROM runs WHERE id=?)", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_text(s, 1, st->token, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, run_id);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return db_error(st, err, "releasing the run lock");
    return DRIFT_OK;
}

/* ---- responses ---- */

static drift_status logprobs_pack(drift_store *st, const char *json, void **blob, size_t *len) {
    *blob = NULL;
    *len = 0;
    if (!json) return DRIFT_OK;
    if (!st->zc && !(st->zc = ZSTD_createCCtx())) return DRIFT_ERR_NOMEM;
    size_t n = strlen(json);
    size_t cap = ZSTD_compressBound(n);
    void *b = malloc(cap ? cap : 1);
    if (!b) return DRIFT_ERR_NOMEM;
    size_t z = ZSTD_compressCCtx(st->zc, b, cap, json, n, 3);
    if (ZSTD_isError(z)) {
        free(b);
        return DRIFT_ERR_INTERNAL;
    }
    *blob = b;
    *len = z;
    return DRIFT_OK;
}

/* Decompresses a logprobs blob; NULL on absent or corrupt data (*bad set). */
static char *logprobs_unpack(const void *blob, size_t len, int *bad) {
    *bad = 0;
    if (!blob || len == 0) return NULL;
    unsigned long long n = ZSTD_getFrameContentSize(blob, len);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (1ull << 31)) {
        *bad = 1;
        return NULL;
    }
    char *out = malloc((size_t)n + 1);
    if (!out) return NULL;
    size_t got = ZSTD_decompress(out, (size_t)n, blob, len);
    if (ZSTD_isError(got) || got != n) {
        free(out);
        *bad = 1;
        return NULL;
    }
    out[n] = '\0';
    return out;
}

drift_status drift_store_put_responses(drift_store *st, int64_t run_id, const drift_response *r, size_t n,
                                       drift_error *err) {
    if (n == 0) return DRIFT_OK;
    char now[32];
    drift_utc_iso(now);
    drift_status ds = tx_begin(st, err);
    if (ds) return ds;
    for (size_t i = 0; i < n; i++) {
        const drift_response *x = &r[i];
        sqlite3_stmt *s = stmt_get(
            st, STMT_PUT_RESPONSE,
            "INSERT INTO responses(run_id,prompt_rowid,replicate,text,prompt_tokens,completion_tokens,"
            "finish_reason,latency_ms,logprobs,error,http_status,attempts,created_at,failed) "
            "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?10 IS NOT NULL) "
            "ON CONFLICT(run_id,prompt_rowid,replicate) DO UPDATE SET text=excluded.text,failed=excluded.failed,"
            "prompt_tokens=excluded.prompt_tokens,completion_tokens=excluded.completion_tokens,"
            "finish_reason=excluded.finish_reason,latency_ms=excluded.latency_ms,logprobs=excluded.logprobs,"
            "error=excluded.error,http_status=excluded.http_status,attempts=excluded.attempts,"
            "created_at=excluded.created_at WHERE responses.failed",
            err);
        if (!s) goto fail;
        /* An answer is the text; an error row never carries text. */
        const char *text = x->error ? NULL : (x->text ? x->text : "");
        void *blob = NULL;
        size_t blen = 0;
        if (!x->error && logprobs_pack(st, x->logprobs_json, &blob, &blen)) {
            drift_error_set(err, DRIFT_ERR_NOMEM, "compressing logprobs");
            goto fail;
        }
        sqlite3_bind_int64(s, 1, run_id);
        sqlite3_bind_int64(s, 2, x->prompt_rowid);
        sqlite3_bind_int(s, 3, x->replicate);
        bind_text_or_null(s, 4, text);
        if (x->prompt_tokens >= 0) sqlite3_bind_int(s, 5, x->prompt_tokens);
        if (x->completion_tokens >= 0) sqlite3_bind_int(s, 6, x->completion_tokens);
        bind_text_or_null(s, 7, x->finish_reason);
        sqlite3_bind_double(s, 8, x->latency_ms);
        if (blob) sqlite3_bind_blob(s, 9, blob, (int)blen, free);
        bind_text_or_null(s, 10, x->error);
        sqlite3_bind_int(s, 11, x->http_status);
        sqlite3_bind_int(s, 12, x->attempts);
        sqlite3_bind_text(s, 13, now, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) {
            drift_error_set(err, DRIFT_ERR_STORE, "%s: storing the response to prompt row %lld replicate %d: %s",
                            st->path, (long long)x->prompt_rowid, x->replicate, sqlite3_errmsg(st->db));
            goto fail;
        }
    }
    return tx_commit(st, err);
fail:
    tx_rollback(st);
    return err && err->code ? err->code : DRIFT_ERR_STORE;
}

typedef struct {
    int64_t prompt;
    int rep;
} pair_key;

static int pair_cmp(const void *a, const void *b) {
    const pair_key *x = a, *y = b;
    if (x->prompt != y->prompt) return x->prompt < y->prompt ? -1 : 1;
    return (x->rep > y->rep) - (x->rep < y->rep);
}

drift_status drift_store_pending(drift_store *st, int64_t run_id, const int64_t *prompt_rowids, size_t n_prompts,
                                 int replicates, int64_t **out_prompts, int **out_replicates, size_t *n_out,
                                 drift_error *err) {
    *out_prompts = NULL;
    *out_replicates = NULL;
    *n_out = 0;
    if (replicates < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "replicates must be >= 1 (got %d)", replicates);
    sqlite3_stmt *s = stmt_prepare(
        st, "SELECT prompt_rowid, replicate FROM responses WHERE run_id=? AND NOT failed ORDER BY 1,2", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(s, 1, run_id);
    pair_key *done = NULL;
    size_t nd = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (nd == cap) {
            cap = cap ? cap * 2 : 1024;
            pair_key *nn = realloc(done, cap * sizeof *done);
            if (!nn) {
                free(done);
                sqlite3_finalize(s);
                return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading responses");
            }
            done = nn;
        }
        done[nd].prompt = sqlite3_column_int64(s, 0);
        done[nd].rep = sqlite3_column_int(s, 1);
        nd++;
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        free(done);
        return db_error(st, err, "reading responses");
    }
    size_t total = n_prompts * (size_t)replicates;
    int64_t *op = malloc((total ? total : 1) * sizeof *op);
    int *orp = malloc((total ? total : 1) * sizeof *orp);
    if (!op || !orp) {
        free(op);
        free(orp);
        free(done);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n_prompts; i++)
        for (int r = 0; r < replicates; r++) {
            pair_key key = {prompt_rowids[i], r};
            if (nd && bsearch(&key, done, nd, sizeof *done, pair_cmp)) continue;
            op[k] = prompt_rowids[i];
            orp[k] = r;
            k++;
        }
    free(done);
    *out_prompts = op;
    *out_replicates = orp;
    *n_out = k;
    return DRIFT_OK;
}

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
static const char *arena_col(arena_chunk **a, sqlite3_stmt *s, int i, const char **last, int *oom) {
    const char *t = (const char *)sqlite3_column_text(s, i);
    if (!t) return NULL;
    size_t n = (size_t)sqlite3_column_bytes(s, i);
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
drift_status drift_store_load_scored(drift_store *st, int64_t run_id, drift_scored_set *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    /* Row count first so the array is allocated once. */
    sqlite3_stmt *c = stmt_prepare(st, "SELECT count(*) FROM responses INDEXED BY responses_scan WHERE run_id=?", err);
    if (!c) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(c, 1, run_id);
    size_t total = 0;
    if (sqlite3_step(c) == SQLITE_ROW) total = (size_t)sqlite3_column_int64(c, 0);
    sqlite3_finalize(c);
    if (total > INT32_MAX) return drift_error_set(err, DRIFT_ERR_STORE, "%s: run %lld has too many responses (%zu)",
                                                  st->path, (long long)run_id, total);

    sqlite3_stmt *s = stmt_prepare(st,
                                   "SELECT r.id, r.prompt_rowid, p.prompt_id, p.suite, p.workload, r.replicate, "
                                   "r.failed FROM responses r INDEXED BY responses_scan "
                                   "JOIN prompts p ON p.id = r.prompt_rowid "
                                   "WHERE r.run_id = ? ORDER BY r.prompt_rowid, r.replicate",
                                   err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(s, 1, run_id);
    drift_scored *rows = malloc((total ? total : 1) * sizeof *rows);
    arena_chunk *arena = NULL;
    id_index ix = {0};
    if (!rows) {
        sqlite3_finalize(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory loading %zu responses", total);
    }
    const char *last_suite = NULL, *last_eval = NULL, *last_wl_text = NULL, *last_pid = NULL;
    int64_t last_prompt = -1;
    drift_workload last_wl = DRIFT_WL_UNKNOWN;
    size_t n = 0;
    int rc, oom = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
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
        d->response_id = sqlite3_column_int64(s, 0);
        d->prompt_rowid = sqlite3_column_int64(s, 1);
        if (d->prompt_rowid != last_prompt) { /* replicates share their prompt's strings */
            last_prompt = d->prompt_rowid;
            last_pid = arena_col(&arena, s, 2, NULL, &oom);
        }
        d->prompt_id = last_pid;
        d->suite = arena_col(&arena, s, 3, &last_suite, &oom);
        const char *wl = (const char *)sqlite3_column_text(s, 4);
        if (!last_wl_text || !wl || strcmp(wl, last_wl_text) != 0) {
            last_wl = drift_workload_parse(wl);
            last_wl_text = last_wl == DRIFT_WL_UNKNOWN ? NULL : drift_workload_name(last_wl);
        }
        d->workload = last_wl;
        d->replicate = sqlite3_column_int(s, 5);
        d->is_error = sqlite3_column_int(s, 6) != 0;
        d->label = DRIFT_LABEL_NONE;
        d->value = NAN;
        d->evaluator = NULL;
        if (oom) break;
        n++;
    }
    sqlite3_finalize(s);
    s = NULL;
    if (oom) goto nomem;
    if (rc != SQLITE_DONE) goto dberr;

    if (n > 0) {
        if (id_index_build(&ix, rows, n)) goto nomem;
        s = stmt_prepare(st,
                         "SELECT response_id, label, value, evaluator FROM scores INDEXED BY scores_latest "
                         "WHERE response_id BETWEEN ? AND ? ORDER BY response_id, id",
                         err);
        if (!s) goto fail;
        sqlite3_bind_int64(s, 1, ix.min_id);
        sqlite3_bind_int64(s, 2, ix.max_id);
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            int32_t i = id_index_find(&ix, sqlite3_column_int64(s, 0));
            if (i < 0) continue; /* another run's response */
            drift_scored *d = &rows[i];
            d->label = sqlite3_column_int(s, 1);
            d->value = sqlite3_column_type(s, 2) == SQLITE_NULL ? NAN : sqlite3_column_double(s, 2);
            d->evaluator = arena_col(&arena, s, 3, &last_eval, &oom);
            if (oom) break;
        }
        sqlite3_finalize(s);
        s = NULL;
        if (oom) goto nomem;
        if (rc != SQLITE_DONE) goto dberr;
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
    db_error(st, err, "loading scored responses");
fail:
    free(rows);
    arena_free(arena);
    id_index_free(&ix);
    return err && err->code ? err->code : DRIFT_ERR_STORE;
}

void drift_scored_set_free(drift_scored_set *s) {
    if (!s) return;
    free(s->rows);
    arena_free(s->arena);
    memset(s, 0, sizeof *s);
}

/* ---- single responses and unscored batches ---- */

#define RESP_COLS                                                                                        \
    "r.id, r.prompt_rowid, r.replicate, r.text, r.prompt_tokens, r.completion_tokens, r.finish_reason, " \
    "r.latency_ms, r.logprobs, r.error, r.http_status, r.attempts, "                                     \
    "p.prompt_id, p.workload, p.input, p.reference, p.hash"

/* Fills a response and its prompt from a row of RESP_COLS. */
static drift_status response_from_row(sqlite3_stmt *s, drift_response *r, drift_prompt *p) {
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(s, 0);
    r->prompt_rowid = sqlite3_column_int64(s, 1);
    r->replicate = sqlite3_column_int(s, 2);
    r->text = col_strdup(s, 3);
    r->prompt_tokens = sqlite3_column_type(s, 4) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 4);
    r->completion_tokens = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 5);
    r->finish_reason = col_strdup(s, 6);
    r->latency_ms = sqlite3_column_double(s, 7);
    int bad = 0;
    r->logprobs_json = logprobs_unpack(sqlite3_column_blob(s, 8), (size_t)sqlite3_column_bytes(s, 8), &bad);
    r->error = col_strdup(s, 9);
    r->http_status = sqlite3_column_int(s, 10);
    r->attempts = sqlite3_column_int(s, 11);
    int oom = (sqlite3_column_type(s, 3) != SQLITE_NULL && !r->text) ||
              (sqlite3_column_type(s, 9) != SQLITE_NULL && !r->error);
    if (p) {
        memset(p, 0, sizeof *p);
        p->prompt_id = col_strdup(s, 12);
        p->workload = drift_workload_parse((const char *)sqlite3_column_text(s, 13));
        p->input = col_strdup(s, 14);
        p->reference_json = col_strdup(s, 15);
        p->hash = col_strdup(s, 16);
        if (!p->prompt_id || !p->input || !p->reference_json || !p->hash) oom = 1;
    }
    if (oom) {
        drift_response_free(r);
        if (p) drift_prompt_free(p);
        return DRIFT_ERR_NOMEM;
    }
    return bad ? DRIFT_ERR_STORE : DRIFT_OK;
}

drift_status drift_store_response_get(drift_store *st, int64_t response_id, drift_response *out,
                                      drift_prompt *prompt_out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (prompt_out) memset(prompt_out, 0, sizeof *prompt_out);
    sqlite3_stmt *s = stmt_prepare(
        st, "SELECT " RESP_COLS " FROM responses r JOIN prompts p ON p.id = r.prompt_rowid WHERE r.id = ?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(s, 1, response_id);
    int rc = sqlite3_step(s);
    drift_status ds;
    if (rc == SQLITE_ROW) {
        ds = response_from_row(s, out, prompt_out);
        if (ds == DRIFT_ERR_NOMEM)
            drift_error_set(err, ds, "out of memory reading response %lld", (long long)response_id);
        else if (ds) {
            drift_error_set(err, ds, "%s: response %lld has corrupt logprobs data", st->path,
                            (long long)response_id);
            drift_response_free(out);
            if (prompt_out) drift_prompt_free(prompt_out);
        }
    } else if (rc == SQLITE_DONE) {
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no response with id %lld", st->path,
                             (long long)response_id);
    } else {
        ds = db_error(st, err, "reading a response");
    }
    sqlite3_finalize(s);
    return ds;
}

void drift_response_free(drift_response *r) {
    if (!r) return;
    free(r->text);
    free(r->finish_reason);
    free(r->logprobs_json);
    free(r->error);
    memset(r, 0, sizeof *r);
}

void drift_prompt_free(drift_prompt *p) {
    if (!p) return;
    free(p->prompt_id);
    free(p->input);
    free(p->reference_json);
    free(p->hash);
    memset(p, 0, sizeof *p);
}

drift_status drift_store_unscored(drift_store *st, int64_t run_id, const char *evaluator, size_t limit,
                                  drift_response **resp, drift_prompt **prompts, size_t *n, drift_error *err) {
    *resp = NULL;
    *prompts = NULL;
    *n = 0;
    sqlite3_stmt *s = stmt_prepare(
        st,
        "SELECT " RESP_COLS " FROM responses r JOIN prompts p ON p.id = r.prompt_rowid "
        "WHERE r.run_id = ?1 AND NOT r.failed AND NOT EXISTS "
        "(SELECT 1 FROM scores x WHERE x.response_id = r.id AND (?2 IS NULL OR x.evaluator = ?2)) "
        "ORDER BY r.prompt_rowid, r.replicate LIMIT ?3",
        err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(s, 1, run_id);
    bind_text_or_null(s, 2, evaluator);
    sqlite3_bind_int64(s, 3, limit ? (sqlite3_int64)limit : -1);
    drift_response *rs = NULL;
    drift_prompt *ps = NULL;
    size_t cnt = 0, cap = 0;
    int rc;
    drift_status ds = DRIFT_OK;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 64;
            drift_response *nr = realloc(rs, cap * sizeof *rs);
            if (nr) rs = nr;
            drift_prompt *np = nr ? realloc(ps, cap * sizeof *ps) : NULL;
            if (np) ps = np;
            if (!nr || !np) {
                ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading unscored responses");
                break;
            }
        }
        ds = response_from_row(s, &rs[cnt], &ps[cnt]);
        if (ds == DRIFT_ERR_NOMEM) {
            drift_error_set(err, ds, "out of memory reading unscored responses");
            break;
        }
        if (ds) { /* corrupt logprobs: keep the response, without them */
            ds = DRIFT_OK;
        }
        cnt++;
    }
    sqlite3_finalize(s);
    if (!ds && rc != SQLITE_DONE) ds = db_error(st, err, "reading unscored responses");
    if (ds) {
        for (size_t i = 0; i < cnt; i++) {
            drift_response_free(&rs[i]);
            drift_prompt_free(&ps[i]);
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
    drift_status ds = tx_begin(st, err);
    if (ds) return ds;
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = stmt_get(st, STMT_PUT_SCORE,
                                   "INSERT OR REPLACE INTO scores(response_id,evaluator,label,value,detail) "
                                   "VALUES(?,?,?,?,?)",
                                   err);
        if (!s) goto fail;
        if (!sc[i].evaluator || !*sc[i].evaluator) {
            drift_error_set(err, DRIFT_ERR_INVALID, "score %zu of the batch has no evaluator name", i);
            goto fail;
        }
        sqlite3_bind_int64(s, 1, sc[i].response_id);
        sqlite3_bind_text(s, 2, sc[i].evaluator, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 3, sc[i].label);
        if (!isnan(sc[i].value)) sqlite3_bind_double(s, 4, sc[i].value);
        bind_text_or_null(s, 5, sc[i].detail_json);
        int rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_DONE) {
            drift_error_set(err, DRIFT_ERR_STORE, "%s: storing the score of response %lld by %s: %s", st->path,
                            (long long)sc[i].response_id, sc[i].evaluator, sqlite3_errmsg(st->db));
            goto fail;
        }
    }
    return tx_commit(st, err);
fail:
    tx_rollback(st);
    return err && err->code ? err->code : DRIFT_ERR_STORE;
}

drift_status drift_store_put_embedding(drift_store *st, int64_t response_id, const char *embedder,
                                       const float *vec, int dim, drift_error *err) {
    if (!embedder || dim <= 0 || !vec)
        return drift_error_set(err, DRIFT_ERR_INVALID, "embedding needs an embedder name and dim > 0");
    sqlite3_stmt *s = stmt_prepare(
        st, "INSERT OR REPLACE INTO embeddings(response_id,embedder,dim,vec) VALUES(?,?,?,?)", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(s, 1, response_id);
    sqlite3_bind_text(s, 2, embedder, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, dim);
    sqlite3_bind_blob(s, 4, vec, (int)((size_t)dim * sizeof(float)), SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) return db_error(st, err, "storing an embedding");
    return DRIFT_OK;
}

drift_status drift_store_get_embedding(drift_store *st, int64_t response_id, const char *embedder, float **vec,
                                       int *dim, drift_error *err) {
    *vec = NULL;
    *dim = 0;
    sqlite3_stmt *s =
        stmt_prepare(st, "SELECT dim, vec FROM embeddings WHERE response_id=? AND embedder=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sqlite3_bind_int64(s, 1, response_id);
    sqlite3_bind_text(s, 2, embedder ? embedder : "", -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    drift_status ds = DRIFT_OK;
    if (rc == SQLITE_ROW) {
        int d = sqlite3_column_int(s, 0);
        size_t bytes = (size_t)sqlite3_column_bytes(s, 1);
        if (d <= 0 || bytes != (size_t)d * sizeof(float)) {
            ds = drift_error_set(err, DRIFT_ERR_STORE,
                                 "%s: embedding of response %lld by %s is corrupt (dim %d, %zu bytes)", st->path,
                                 (long long)response_id, embedder ? embedder : "", d, bytes);
        } else {
            float *v = malloc(bytes);
            if (!v) {
                ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading an embedding");
            } else {
                memcpy(v, sqlite3_column_blob(s, 1), bytes);
                *vec = v;
                *dim = d;
            }
        }
    } else if (rc == SQLITE_DONE) {
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "no embedding of response %lld by %s",
                             (long long)response_id, embedder ? embedder : "(null)");
    } else {
        ds = db_error(st, err, "reading an embedding");
    }
    sqlite3_finalize(s);
    return ds;
}
