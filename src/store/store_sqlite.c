/* store_sqlite.c - the SQLite file behind a store (store.h): identity,
 * schema and migrations, and opening it for writing or for reading only.
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
 * To add schema v4: append {4, "ALTER TABLE ...; ..."} to store_migrations,
 * the same change to store_pg.c's, and bump DRIFT_STORE_SCHEMA_VERSION in
 * store.h. Readers of a table a version added check st->version first: a
 * read-only handle reads an older store as it is.
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
 * Read-only handles (drift_store_open_readonly): opened with
 * SQLITE_OPEN_READONLY through a "file:" URI, "immutable=1" when there is no
 * -wal file (nothing to miss, nothing created), "mode=ro" when there is one
 * (the WAL protocol through -shm); never a journal-mode change, a
 * migration or a lock.
 *
 * The store is data, not code. A store file may come from anyone (a shard,
 * a download), and SQLite runs what its schema says: a table replaced by a
 * view over an endless recursive query hangs every reader, a trigger runs
 * on every write. So opening a DriftBench store (either way) compares every
 * object of its sqlite_master (type, name, table, SQL) with the schema this
 * DriftBench creates for the store's version (the migrations up to it, run
 * in a private in-memory database): any object that is not ours (a view, a
 * trigger, a table or index of another name), one whose SQL differs, or
 * one that is missing, and the store is refused (DRIFT_ERR_STORE naming the
 * object), before anything reads or writes it.
 *
 * And reads are bounded: a read-only handle counts SQLite's VM steps
 * (sqlite3_progress_handler, every STORE_BOUND_EVERY steps) from the start
 * of each outermost statement (sqlite3_trace_v2's SQLITE_TRACE_STMT, when
 * no other statement of the handle is running), and interrupts one that
 * passes STORE_BOUND_STEPS_PER_BYTE steps per byte of the store (file and
 * -wal, at the statement's start; at least STORE_BOUND_STEPS_MIN). With our
 * schema no statement of ours comes near (a read visits each row a few
 * times; bench/BENCHMARKS.md, "Store bounds"), so the bound only stops a
 * store damaged in some way the schema check cannot see: the statement
 * fails with a message that says so (sq_errmsg), never a hang. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* v3: the endpoints a run was asked through (a run's identity leaves the
 * endpoint out, store_runs.c): one row per stretch of begins through one
 * target (its record's form), first and last begin and how many. A run
 * of an older store has none until it is begun again; readers take its
 * stored target then. Every row of v2 is kept as it is. */
static const char STORE_SCHEMA_V3[] =
    "CREATE TABLE run_endpoints(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(id),\n"
    "  target TEXT NOT NULL,\n"
    "  first_at TEXT NOT NULL,\n"
    "  last_at TEXT NOT NULL,\n"
    "  begins INTEGER NOT NULL DEFAULT 1);\n"
    "CREATE INDEX run_endpoints_run ON run_endpoints(run_id, id);\n";

/* Migration i takes the schema from version store_migrations[i].to - 1 to
 * store_migrations[i].to. */
static const struct {
    int to;
    const char *sql;
} store_migrations[] = {
    {1, STORE_SCHEMA_V1},
    {2, STORE_SCHEMA_V2},
    {3, STORE_SCHEMA_V3},
};

_Static_assert(sizeof store_migrations / sizeof store_migrations[0] == DRIFT_STORE_SCHEMA_VERSION,
               "one migration per schema version");

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

/* ---- the schema is ours (see the top) ---- */

/* One object of a sqlite_master. */
typedef struct {
    char *type, *name, *tbl, *sql; /* sql NULL for SQLite's own autoindexes */
} schema_obj;

typedef struct {
    schema_obj *v;
    size_t n;
} schema_list;

static void schema_free(schema_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].type);
        free(l->v[i].name);
        free(l->v[i].tbl);
        free(l->v[i].sql);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static char *col_dup(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? util_strdup((const char *)t) : NULL;
}

/* Reads db's sqlite_master into l: an SQLite code. */
static int schema_read(sqlite3 *db, schema_list *l) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name", -1, &s,
                                NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        schema_obj *nv = realloc(l->v, (l->n + 1) * sizeof *nv);
        if (!nv) {
            rc = SQLITE_NOMEM;
            break;
        }
        l->v = nv;
        schema_obj *o = &nv[l->n++];
        *o = (schema_obj){col_dup(s, 0), col_dup(s, 1), col_dup(s, 2), col_dup(s, 3)};
        if (!o->type || !o->name || !o->tbl || (!o->sql && sqlite3_column_type(s, 3) != SQLITE_NULL)) rc = SQLITE_NOMEM;
        rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The schema of version v as this DriftBench creates it: an SQLite code. */
static int schema_expected(int v, schema_list *l) {
    sqlite3 *mem = NULL;
    int rc = sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof store_migrations / sizeof store_migrations[0]; i++)
        if (store_migrations[i].to <= v) rc = sqlite3_exec(mem, store_migrations[i].sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = schema_read(mem, l);
    sqlite3_close(mem);
    return rc;
}

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* A name from the file, for a message: valid UTF-8, control bytes as '?'
 * (malloc'd; NULL nomem). */
static char *shown_name(const char *s) {
    char *c = util_utf8_clean(s, strlen(s));
    for (char *p = c; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return c;
}

/* DRIFT_ERR_STORE naming the first object of the store's schema that is
 * not the one DriftBench creates for version v (see the top). */
static drift_status check_schema(drift_store *st, int v, drift_error *err) {
    schema_list have = {0}, want = {0};
    int rc = schema_expected(v, &want);
    if (rc != SQLITE_OK) {
        schema_free(&want);
        return drift_error_set(err, DRIFT_ERR_STORE, "%s: building the expected schema: %s", st->shown,
                               sqlite3_errstr(rc));
    }
    if ((rc = schema_read(st->db, &have)) != SQLITE_OK) {
        schema_free(&want);
        schema_free(&have);
        return store_db_error(st, err, "reading the schema");
    }
    util_buf why = {0};
    for (size_t i = 0; i < have.n && !why.len; i++) {
        const schema_obj *h = &have.v[i], *w = NULL;
        for (size_t j = 0; j < want.n && !w; j++)
            if (!strcmp(want.v[j].name, h->name)) w = &want.v[j];
        char *name = shown_name(h->name), *type = shown_name(h->type);
        if (!w)
            buf_printf(&why, "%s '%s', which is not DriftBench's", type ? type : "?", name ? name : "?");
        else if (strcmp(w->type, h->type) != 0)
            buf_printf(&why, "%s '%s' where DriftBench has %s %s", type ? type : "?", name ? name : "?",
                       w->type[0] == 'i' ? "an" : "a", w->type);
        else if (!same_str(w->tbl, h->tbl) || !same_str(w->sql, h->sql))
            buf_printf(&why, "%s '%s', whose SQL is not the one DriftBench creates", type ? type : "?",
                       name ? name : "?");
        free(name);
        free(type);
    }
    for (size_t j = 0; j < want.n && !why.len; j++) {
        int found = 0;
        for (size_t i = 0; i < have.n && !found; i++) found = !strcmp(want.v[j].name, have.v[i].name);
        if (!found) buf_printf(&why, "%s '%s' is missing", want.v[j].type, want.v[j].name);
    }
    drift_status ds = DRIFT_OK;
    if (why.len)
        ds = drift_error_set(err, DRIFT_ERR_STORE,
                             "%s: not a store as DriftBench writes it (schema version %d): %s; refusing to open it "
                             "(a view or trigger in a store would run when it is read)",
                             st->shown, v, why.data);
    buf_free(&why);
    schema_free(&want);
    schema_free(&have);
    return ds;
}

/* store_identify's reads, inside its read transaction. */
static drift_status identify_reads(drift_store *st, int *version, drift_error *err) {
    int uv = 0, app = 0;
    int rc = pragma_int(st->db, "PRAGMA user_version", &uv);
    if (rc == SQLITE_OK) rc = pragma_int(st->db, "PRAGMA application_id", &app);
    if (rc == SQLITE_NOTADB)
        return drift_error_set(err, DRIFT_ERR_STORE,
                               "%s: not a DriftBench store (not an SQLite database); refusing to touch it",
                               st->shown);
    if (rc != SQLITE_OK) return store_db_error(st, err, "reading the schema version");

    if (app != STORE_APPLICATION_ID) {
        /* Empty database (new or zero-length file) is fine; anything with
         * tables or a version of its own belongs to someone else. */
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(st->db, "SELECT name FROM sqlite_master ORDER BY name", -1, &s, NULL) != SQLITE_OK)
            return store_db_error(st, err, "reading the table list");
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
                "%d object(s)%s%s%s); refusing to touch it",
                st->shown, app, uv, ntab, ntab ? ": " : "", ntab ? names.data : "", ntab > 8 ? ", ..." : "");
            buf_free(&names);
            return ret;
        }
        buf_free(&names);
        *version = 0;
        return DRIFT_OK;
    }
    drift_status ds = store_check_version(st, uv, err);
    if (!ds) ds = check_schema(st, uv, err);
    if (ds) return ds;
    *version = uv;
    return DRIFT_OK;
}

/* Checks what the file is before anything is written to it. Sets *version.
 * The reads share one read transaction: another process creating the store
 * at the same moment is seen entirely or not at all (never its tables
 * without its application_id, which would look like someone else's file). */
static drift_status store_identify(drift_store *st, int *version, drift_error *err) {
    int own = sqlite3_get_autocommit(st->db) && sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    drift_status ds = identify_reads(st, version, err);
    if (own) sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    return ds;
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
            ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: migrating the schema to version %d: %s", st->shown,
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


/* Opens st->path for writing: creates and migrates (see the top). */
static drift_status open_rw(drift_store *st, drift_error *err) {
    const char *path = st->path;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return drift_error_set(err, DRIFT_ERR_IO, "%s: not a regular file", path);
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK)
        return drift_error_set(err, DRIFT_ERR_STORE, "%s: cannot open: %s", path,
                               st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(st->db, 0);

    int version = 0;
    drift_status ds = store_identify(st, &version, err);
    if (ds) return ds;
    /* From here on the file is ours to change. Switching to WAL can answer
     * SQLITE_BUSY at once, without the busy handler, while another process
     * opens the same new file: retry it for the busy timeout. */
    char *emsg = NULL;
    int rc_wal;
    for (int waited = 0;; waited += 10) {
        rc_wal = sqlite3_exec(st->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
        if (rc_wal != SQLITE_BUSY || waited >= STORE_BUSY_TIMEOUT_MS) break;
        usleep(10 * 1000);
    }
    if (rc_wal != SQLITE_OK ||
        sqlite3_exec(st->db, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-32768;", NULL,
                     NULL, &emsg) != SQLITE_OK) {
        ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: setting WAL mode: %s", path,
                             emsg ? emsg : sqlite3_errmsg(st->db));
        sqlite3_free(emsg);
        return ds;
    }
    st->version = version;
    if (version < DRIFT_STORE_SCHEMA_VERSION) {
        if ((ds = store_migrate(st, version, err))) return ds;
        st->version = DRIFT_STORE_SCHEMA_VERSION;
    }
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

/* ---- a bound on the statements of a read-only handle (see the top) ---- */

#define STORE_BOUND_EVERY 4096                     /* VM steps between two calls of the handler */
#define STORE_BOUND_STEPS_PER_BYTE 8ULL            /* ours need < 0.03 (bench/BENCHMARKS.md) */
#define STORE_BOUND_STEPS_MIN (64ULL << 20)       /* a small store's floor: well under a second */

/* Bytes of the store: its file and its -wal. */
static unsigned long long store_bytes(const drift_store *st) {
    struct stat sb;
    unsigned long long n = stat(st->path, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
    char wal[4096];
    if (snprintf(wal, sizeof wal, "%s-wal", st->path) < (int)sizeof wal && stat(wal, &sb) == 0)
        n += (unsigned long long)sb.st_size;
    return n;
}

/* SQLITE_TRACE_STMT: a statement starts; an outermost one gets a fresh budget. */
static int bound_trace(unsigned type, void *ctx, void *p, void *x) {
    (void)x;
    drift_store *st = ctx;
    if (type != SQLITE_TRACE_STMT) return 0;
    for (sqlite3_stmt *o = sqlite3_next_stmt(st->db, NULL); o; o = sqlite3_next_stmt(st->db, o))
        if (o != p && sqlite3_stmt_busy(o)) return 0; /* nested in a running one: its budget goes on */
    unsigned long long bytes = store_bytes(st);
    st->bound_max = bytes > STORE_BOUND_STEPS_MIN / STORE_BOUND_STEPS_PER_BYTE ? bytes * STORE_BOUND_STEPS_PER_BYTE
                                                                               : STORE_BOUND_STEPS_MIN;
    st->bound_bytes = bytes;
    st->bound_steps = 0;
    st->bound_hit = 0;
    return 0;
}

static int bound_progress(void *ctx) {
    drift_store *st = ctx;
    st->bound_steps += STORE_BOUND_EVERY;
    if (st->bound_steps <= st->bound_max) return 0;
    st->bound_hit = 1;
    snprintf(st->bound_msg, sizeof st->bound_msg,
             "a query passed its bound of %llu steps (%llu per byte of a %llu-byte store) and was stopped: no "
             "query of DriftBench's needs that many on a store it wrote; the file is damaged or was made to hang "
             "its readers",
             st->bound_max, STORE_BOUND_STEPS_PER_BYTE, st->bound_bytes);
    return 1;
}

static void bound_install(drift_store *st) {
    st->bound_max = STORE_BOUND_STEPS_MIN;
    sqlite3_trace_v2(st->db, SQLITE_TRACE_STMT, bound_trace, st);
    sqlite3_progress_handler(st->db, STORE_BOUND_EVERY, bound_progress, st);
}

/* Opens st->path for reading only (see drift_store_open_readonly). */
static drift_status open_readonly(drift_store *st, drift_error *err) {
    const char *path = st->path;
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
    if (rc != SQLITE_OK && rc != SQLITE_NOTADB)
        return drift_error_set(
            err, DRIFT_ERR_STORE, "%s: cannot open read-only: %s%s", path,
            st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc),
            have_wal ? " (its -wal file holds writes that need a -shm file next to it; open the store once "
                       "with a writing command where its directory is writable)"
                     : "");
    int version = 0;
    drift_status ds = store_identify(st, &version, err);
    if (!ds && version == 0)
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: an empty database, not a DriftBench store yet", path);
    if (!ds && sqlite3_exec(st->db, "PRAGMA query_only=1", NULL, NULL, NULL) != SQLITE_OK)
        ds = store_db_error(st, err, "setting query_only");
    if (!ds) bound_install(st);
    st->version = version;
    return ds;
}

drift_status store_sqlite_open(drift_store *st, int readonly, drift_error *err) {
    return readonly ? open_readonly(st, err) : open_rw(st, err);
}
