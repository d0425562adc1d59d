/* store_pg.c - a PostgreSQL database behind a store (store.h), through
 * libpq: connecting, identity, schema and migrations, read-only handles,
 * and the run locks.
 *
 * The store is named by libpq's URL ("postgresql://user@host:port/db?options",
 * with "host=/dir" for a Unix socket) or by libpq's key=value string
 * ("host=/dir dbname=db user=me", store_is_pg_url says which strings are
 * one). Passwords (the URL's userinfo, password= and sslpassword=) are
 * taken out of it before libpq sees it and handed over as keywords of
 * their own (pg_connect), because libpq's messages quote the string; a
 * password may then hold raw '@', '/' and '%' (the userinfo ends at the
 * last '@', drift_redact's rule). The store's tables live in the schema
 * the connection's search_path creates in (public, unless the URL's
 * options say otherwise), so one database can hold several stores in
 * several schemas.
 *
 * Tables: the SQLite file's, column for column, with these types:
 *   - ids BIGSERIAL (a rewritten score takes nextval of scores' sequence,
 *     so the latest score is still the one with the largest id);
 *   - responses.text and responses.error are BYTEA: a model's output (and
 *     a server's error body) may hold any bytes, and PostgreSQL's text
 *     must be valid in the database's encoding; the statement layer binds
 *     and reads them as C strings all the same (sq_bind_bytes_text);
 *   - logprobs and embeddings.vec BYTEA, latency and values DOUBLE
 *     PRECISION; the covering indexes use INCLUDE.
 * driftbench_meta(key, value) marks a DriftBench store: "application" =
 * "driftbench" and "schema_version" = the schema's version, the
 * counterparts of SQLite's application_id and user_version. A database
 * (schema) with tables but no such mark is refused, untouched; a newer
 * version is refused; an older one is migrated on open. Opening looks at
 * the database (and creates or migrates it) holding a transaction-level
 * advisory lock, so runners that open a new store at once create it once
 * and none sees it half made.
 *
 * Concurrency: every batch is one READ COMMITTED transaction. Prompts are
 * inserted with ON CONFLICT DO NOTHING and read back: a second runner
 * inserting the same suite waits for the first one's commit and then finds
 * its rows. Responses of one run come from the run lock's holder only.
 * Read snapshots (drift_store_read_begin) are REPEATABLE READ READ ONLY.
 *
 * Run locks: pg_try_advisory_lock(hashtextextended(schema.label, DRFT)), a
 * session lock held by the handle's connection, reentrant for that
 * handle (the labels it holds are kept in the handle, so it takes each
 * once). The run_locks row records the holder for messages. When a
 * connection ends (the runner exits, is killed, or its host is gone and
 * TCP keepalives give up) the server drops its locks, so no lock needs
 * taking over. A lost connection is an error of every later call on the
 * handle (DRIFT_ERR_STORE naming the store); nothing is retried, and the
 * next run resumes.
 *
 * Read-only handles: the session sets default_transaction_read_only, so
 * every write fails with the server's "read-only transaction" error, and
 * a statement_timeout (STORE_PG_READ_TIMEOUT_MS) bounds every read.
 *
 * The store is data, not code (pg_not_ours, at every open of an existing
 * store): the schema of a DriftBench store holds tables, their indexes and
 * sequences only. A view, materialized view, foreign or partitioned table,
 * a rule or a user trigger in the store's schema (a table replaced by a
 * view over an endless recursive query hangs every reader; a rule or a
 * trigger runs someone's code on our reads or writes) is refused with
 * DRIFT_ERR_STORE naming the object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store_internal.h"
#include "util/sanitize.h"
#include "util/util.h"

#define STORE_PG_LOCK_SEED 1146242644 /* 0x44524654, "DRFT": the advisory locks' hash seed */
#define STORE_PG_MIGRATE_KEY 1146242644
/* A read-only handle's bound on every statement (statement_timeout): 15 minutes,
 * far past any read of ours on the largest stores measured, and an end to a
 * query that would never finish. */
#define STORE_PG_READ_TIMEOUT_MS (15 * 60 * 1000)

/* The whole schema at version 2 (a new store starts here). */
static const char PG_SCHEMA_V2[] =
    "CREATE TABLE driftbench_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
    "CREATE TABLE prompts(\n"
    "  id BIGSERIAL PRIMARY KEY,\n"
    "  suite TEXT NOT NULL,\n"
    "  prompt_id TEXT NOT NULL,\n"
    "  workload TEXT NOT NULL,\n"
    "  input TEXT NOT NULL,\n"
    "  reference TEXT NOT NULL,\n"
    "  hash TEXT NOT NULL,\n"
    "  UNIQUE(suite, prompt_id));\n"
    "CREATE TABLE runs(\n"
    "  id BIGSERIAL PRIMARY KEY,\n"
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
    "  id BIGSERIAL PRIMARY KEY,\n"
    "  run_id BIGINT NOT NULL REFERENCES runs(id),\n"
    "  prompt_rowid BIGINT NOT NULL REFERENCES prompts(id),\n"
    "  replicate INTEGER NOT NULL,\n"
    "  failed INTEGER NOT NULL DEFAULT 0,\n"
    "  http_status INTEGER,\n"
    "  attempts INTEGER,\n"
    "  prompt_tokens INTEGER,\n"
    "  completion_tokens INTEGER,\n"
    "  latency_ms DOUBLE PRECISION,\n"
    "  finish_reason TEXT,\n"
    "  created_at TEXT,\n"
    "  error BYTEA,\n"
    "  text BYTEA,\n"
    "  logprobs BYTEA,\n"
    "  UNIQUE(run_id, prompt_rowid, replicate));\n"
    "CREATE INDEX responses_scan ON responses(run_id, prompt_rowid, replicate) INCLUDE (failed);\n"
    "CREATE TABLE scores(\n"
    "  id BIGSERIAL PRIMARY KEY,\n"
    "  response_id BIGINT NOT NULL REFERENCES responses(id),\n"
    "  evaluator TEXT NOT NULL,\n"
    "  label INTEGER NOT NULL,\n"
    "  value DOUBLE PRECISION,\n"
    "  detail TEXT,\n"
    "  UNIQUE(response_id, evaluator));\n"
    "CREATE INDEX scores_latest ON scores(response_id, id) INCLUDE (label, value, evaluator);\n"
    "CREATE TABLE embeddings(\n"
    "  response_id BIGINT NOT NULL REFERENCES responses(id),\n"
    "  embedder TEXT NOT NULL,\n"
    "  dim INTEGER NOT NULL,\n"
    "  vec BYTEA NOT NULL,\n"
    "  PRIMARY KEY(response_id, embedder));\n"
    "CREATE TABLE run_locks(\n"
    "  label TEXT PRIMARY KEY,\n"
    "  pid BIGINT NOT NULL,\n"
    "  host TEXT NOT NULL,\n"
    "  proc_start BIGINT NOT NULL DEFAULT 0,\n"
    "  token TEXT NOT NULL,\n"
    "  started_at TEXT NOT NULL);\n"
    /* detail_counts' field of a score detail; NULL when the detail is not JSON */
    "CREATE FUNCTION drift_json_field(doc TEXT, field TEXT) RETURNS TEXT AS $f$\n"
    "BEGIN RETURN doc::jsonb ->> field; EXCEPTION WHEN others THEN RETURN NULL; END\n"
    "$f$ LANGUAGE plpgsql IMMUTABLE;\n"
    "INSERT INTO driftbench_meta VALUES ('application', 'driftbench'), ('schema_version', '0');\n";

/* v3: run_endpoints, as in the SQLite file (store_sqlite.c). */
static const char PG_SCHEMA_V3[] =
    "CREATE TABLE run_endpoints(\n"
    "  id BIGSERIAL PRIMARY KEY,\n"
    "  run_id BIGINT NOT NULL REFERENCES runs(id),\n"
    "  target TEXT NOT NULL,\n"
    "  first_at TEXT NOT NULL,\n"
    "  last_at TEXT NOT NULL,\n"
    "  begins BIGINT NOT NULL DEFAULT 1);\n"
    "CREATE INDEX run_endpoints_run ON run_endpoints(run_id, id);\n";

/* Migration i takes the schema to version pg_migrations[i].to from the
 * version before it (0: an empty database). */
static const struct {
    int from, to;
    const char *sql;
} pg_migrations[] = {
    {0, 2, PG_SCHEMA_V2},
    {2, 3, PG_SCHEMA_V3},
};

/* The value of a one-row, one-column query (a malloc'd string, or NULL for
 * no row or NULL) into *out; DRIFT_ERR_STORE on failure. */
static drift_status pg_scalar(drift_store *st, const char *sql, const char *arg, char **out, drift_error *err) {
    *out = NULL;
    store_q *q = sq_prepare(st, sql, err);
    if (!q) return store_err_code(err);
    if (arg) sq_bind_text(q, 1, arg);
    int rc = sq_step(q);
    drift_status ds = DRIFT_OK;
    if (rc == SQ_ROW && !sq_is_null(q, 0) && !(*out = util_strdup(sq_text(q, 0))))
        ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    else if (rc == SQ_ERROR)
        ds = store_db_error(st, err, "reading the schema");
    sq_done(q);
    return ds;
}

/* Refuses a store schema holding anything but tables, indexes and
 * sequences (see the top). Names are the database's data: shown through
 * util_sanitize's one-line form. */
static drift_status pg_not_ours(drift_store *st, drift_error *err) {
    store_q *q = sq_prepare(st,
                            "SELECT kind, name FROM ("
                            " SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'"
                            "  WHEN 'f' THEN 'foreign table' ELSE 'partitioned table' END AS kind,"
                            "  c.relname::text AS name"
                            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                            " WHERE n.nspname = current_schema() AND c.relkind IN ('v', 'm', 'f', 'p')"
                            " UNION ALL SELECT 'rule', r.rulename::text || ' on ' || r.tablename::text"
                            " FROM pg_rules r WHERE r.schemaname = current_schema()"
                            " UNION ALL SELECT 'trigger', t.tgname::text || ' on ' || c.relname::text"
                            " FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
                            " JOIN pg_namespace n ON n.oid = c.relnamespace"
                            " WHERE n.nspname = current_schema() AND NOT t.tgisinternal"
                            ") x ORDER BY kind, name LIMIT 1",
                            err);
    if (!q) return store_err_code(err);
    int rc = sq_step(q);
    drift_status ds = DRIFT_OK;
    if (rc == SQ_ROW) {
        char *kind = util_sanitize(sq_text(q, 0), UTIL_SAN_LINE), *name = util_sanitize(sq_text(q, 1), UTIL_SAN_LINE);
        ds = drift_error_set(err, DRIFT_ERR_STORE,
                             "%s: the store's schema holds a %s '%s', which DriftBench never creates: a store is "
                             "data, not code; refusing to read it",
                             st->shown, kind ? kind : "?", name ? name : "?");
        free(kind);
        free(name);
    } else if (rc == SQ_ERROR) {
        ds = store_db_error(st, err, "checking the schema's objects");
    }
    sq_done(q);
    return ds;
}

/* What the database (the connection's current schema) is: *version = the
 * store's schema version, 0 for an empty schema; refused when it holds
 * tables of something else or a newer store. */
static drift_status pg_identify(drift_store *st, int *version, drift_error *err) {
    *version = 0;
    char *meta = NULL;
    /* pg_tables (an MVCC read of the statement's snapshot), not to_regclass
     * (a catalog cache that may lag a creation committed while we waited) */
    drift_status ds = pg_scalar(st,
                                "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() "
                                "AND tablename = 'driftbench_meta'",
                                NULL, &meta, err);
    if (ds) return ds;
    if (!meta) {
        store_q *q = sq_prepare(st,
                                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                                "ORDER BY tablename",
                                err);
        if (!q) return store_err_code(err);
        util_buf names = {0};
        int ntab = 0, rc;
        while ((rc = sq_step(q)) == SQ_ROW) {
            if (ntab < 8) buf_printf(&names, "%s%s", ntab ? ", " : "", sq_text(q, 0));
            ntab++;
        }
        sq_done(q);
        if (rc == SQ_ERROR) {
            buf_free(&names);
            return store_db_error(st, err, "reading the table list");
        }
        if (ntab > 0) {
            ds = drift_error_set(err, DRIFT_ERR_STORE,
                                 "%s: not a DriftBench store (the database's schema holds %d table(s): %s%s and no "
                                 "driftbench_meta); refusing to touch it",
                                 st->shown, ntab, names.data, ntab > 8 ? ", ..." : "");
            buf_free(&names);
            return ds;
        }
        buf_free(&names);
        return DRIFT_OK;
    }
    free(meta);
    char *app = NULL, *ver = NULL;
    if ((ds = pg_scalar(st, "SELECT value FROM driftbench_meta WHERE key = ?1", "application", &app, err)))
        return ds;
    if ((ds = pg_scalar(st, "SELECT value FROM driftbench_meta WHERE key = ?1", "schema_version", &ver, err))) {
        free(app);
        return ds;
    }
    int ok = app && !strcmp(app, "driftbench") && ver;
    int v = ver ? atoi(ver) : 0;
    free(app);
    free(ver);
    if (!ok)
        return drift_error_set(err, DRIFT_ERR_STORE,
                               "%s: not a DriftBench store (driftbench_meta lacks its marks); refusing to touch it",
                               st->shown);
    if ((ds = store_check_version(st, v, err))) return ds;
    *version = v;
    return DRIFT_OK;
}

/* Runs the migrations from *version on, inside the caller's transaction. */
static drift_status pg_migrate(drift_store *st, int *version, drift_error *err) {
    for (size_t i = 0; i < sizeof pg_migrations / sizeof pg_migrations[0]; i++) {
        if (*version != pg_migrations[i].from) continue;
        if (sq_exec(st, pg_migrations[i].sql, NULL))
            return drift_error_set(err, DRIFT_ERR_STORE, "%s: migrating the schema to version %d: %s", st->shown,
                                   pg_migrations[i].to, sq_errmsg(st));
        char sql[96];
        snprintf(sql, sizeof sql, "UPDATE driftbench_meta SET value = '%d' WHERE key = 'schema_version'",
                 pg_migrations[i].to);
        if (sq_exec(st, sql, NULL)) return store_db_error(st, err, "setting the schema version");
        *version = pg_migrations[i].to;
    }
    return DRIFT_OK;
}

static void pg_notice_ignore(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* ---- connecting: the password handed over apart ---- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) leniently: a '%' without two hex digits after
 * it, or "%00", stays as it is; '+' stays '+' (as in libpq's URIs). */
static char *pct_decode(const char *s, size_t n) {
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int hi = (s[i] == '%' && i + 2 < n) ? hexval(s[i + 1]) : -1, lo = hi >= 0 ? hexval(s[i + 2]) : -1;
        if (hi >= 0 && lo >= 0 && (hi | lo)) {
            o[k++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = '\0';
    return o;
}

/* The secrets libpq takes as keywords, pulled out of the store's URL or
 * key=value string (index: 0 password, 1 sslpassword). */
static const char *const pg_secret_keys[2] = {"password", "sslpassword"};

static int pg_secret_index(const char *key, size_t n) {
    for (int i = 0; i < 2; i++)
        if (strlen(pg_secret_keys[i]) == n && !memcmp(key, pg_secret_keys[i], n)) return i;
    return -1;
}

/* URL form: the userinfo's password (drift_redact's rule: so one with a raw
 * '@', '/' or '%' is taken whole) and the query's password= and
 * sslpassword= parameters, decoded; *rest = the URL without them. */
static int pg_split_url(const char *path, util_buf *rest, char *secret[2]) {
    const char *a = strstr(path, "://") + 3;
    size_t off, len;
    const char *p = path;
    if (util_url_password_span(a, &off, &len)) {
        free(secret[0]);
        if (!(secret[0] = pct_decode(a + off, len))) return -1;
        if (buf_append(rest, path, (size_t)(a - path) + off - 1)) return -1; /* up to the ':' */
        p = a + off + len;                                                   /* from the '@' */
    }
    const char *q = strchr(p, '?');
    if (!q) return buf_puts(rest, p);
    if (buf_append(rest, p, (size_t)(q - p))) return -1;
    int kept = 0;
    for (const char *x = q + 1;;) {
        const char *amp = strchr(x, '&'), *e = amp ? amp : x + strlen(x);
        const char *eq = memchr(x, '=', (size_t)(e - x));
        int k = eq ? pg_secret_index(x, (size_t)(eq - x)) : -1;
        if (k >= 0) {
            free(secret[k]);
            if (!(secret[k] = pct_decode(eq + 1, (size_t)(e - eq - 1)))) return -1;
        } else if (buf_puts(rest, kept++ ? "&" : "?") || buf_append(rest, x, (size_t)(e - x))) {
            return -1;
        }
        if (!amp) break;
        x = amp + 1;
    }
    return 0;
}

/* key=value form (libpq's rules: spaces around '=', values bare or in
 * single quotes, backslash escapes; a value here runs on to whitespace
 * outside quotes, as drift_redact reads it, where libpq would stop at a
 * closing quote and fail on what sticks to it, quoting that): the password
 * and sslpassword pairs come out, unescaped; *rest = the other pairs as
 * written. From the first thing that is not a pair on, the text is kept as
 * it is (libpq names it in its message). */
static int pg_split_conninfo(const char *s, util_buf *rest, char *secret[2]) {
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
        if (!*p) return 0;
        const char *key = p;
        while (*p && *p != '=' && !strchr(" \t\n\r\f\v", *p)) p++;
        size_t klen = (size_t)(p - key);
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '=' || !klen) return buf_puts(rest, key);
        p++;
        while (*p == ' ' || *p == '\t') p++;
        util_buf v = {0}; /* the value: a word of quoted and bare parts, as drift_redact reads one */
        int quoted = 0;
        while (*p && (quoted || !strchr(" \t\n\r\f\v", *p))) {
            if (*p == '\'') {
                quoted = !quoted;
                p++;
                continue;
            }
            if (*p == '\\' && p[1]) p++;
            if (buf_append(&v, p++, 1)) {
                buf_free(&v);
                return -1;
            }
        }
        int k = pg_secret_index(key, klen);
        if (k >= 0) {
            free(secret[k]);
            secret[k] = buf_steal(&v);
            if (!secret[k]) return -1;
        } else {
            buf_free(&v);
            if (buf_puts(rest, rest->len ? " " : "") || buf_append(rest, key, (size_t)(p - key))) return -1;
        }
    }
}

/* Wipes and frees a secret. */
static void secret_free(char *s) {
    if (!s) return;
    explicit_bzero(s, strlen(s));
    free(s);
}

/* Connects to the store's database. The passwords never reach libpq inside
 * the connection string: libpq's messages quote that string (or pieces of
 * it: a host taken from a password's raw '@' or '/', an invalid %-escape),
 * so they are taken out here (pg_split_*) and given as keywords of their
 * own, which libpq never prints; the password-free string is expanded as
 * the "dbname" keyword, before them. Messages pass through drift_redact all
 * the same (drift_error_set). */
static PGconn *pg_connect(const char *path) {
    char *secret[2] = {NULL, NULL};
    util_buf rest = {0};
    int url = !strncmp(path, "postgresql://", 13) || !strncmp(path, "postgres://", 11);
    int bad = url ? pg_split_url(path, &rest, secret) : pg_split_conninfo(path, &rest, secret);
    PGconn *c = NULL;
    if (!bad) {
        const char *kw[4] = {"dbname"}, *val[4] = {rest.data ? rest.data : ""};
        int n = 1;
        for (int i = 0; i < 2; i++)
            if (secret[i] && *secret[i]) {
                kw[n] = pg_secret_keys[i];
                val[n++] = secret[i];
            }
        kw[n] = val[n] = NULL;
        c = PQconnectdbParams(kw, val, 1);
    }
    if (rest.data) explicit_bzero(rest.data, rest.len);
    buf_free(&rest);
    secret_free(secret[0]);
    secret_free(secret[1]);
    return c;
}

drift_status store_pg_open(drift_store *st, int readonly, drift_error *err) {
    st->pg = pg_connect(st->path);
    if (!st->pg) return drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory connecting", st->shown);
    if (PQstatus(st->pg) != CONNECTION_OK) {
        char *m = util_strdup(PQerrorMessage(st->pg));
        for (char *c = m; c && *c; c++)
            if (*c == '\n' || *c == '\t') *c = *(c + 1) ? ' ' : '\0';
        /* a read-only command naming a database that does not exist: no
         * store there, as a missing file */
        int missing = readonly && m && strstr(m, "does not exist");
        drift_status ds = drift_error_set(err, missing ? DRIFT_ERR_NOT_FOUND : DRIFT_ERR_STORE,
                                          "%s: cannot connect to PostgreSQL: %s", st->shown, m ? m : "?");
        free(m);
        return ds;
    }
    /* Messages of the server's notices (e.g. "relation exists, skipping")
     * must not reach stdout or stderr: the library never prints. */
    PQsetNoticeProcessor(st->pg, pg_notice_ignore, NULL);
    drift_status ds = sq_exec(st, "SET client_min_messages = warning; SET TIME ZONE 'UTC'", err);
    if (ds) return ds;
    /* Identify (and create or migrate) under a transaction advisory lock:
     * a runner creating the schema holds it, so no one sees half a store
     * and takes it for someone else's tables. */
    if ((ds = store_tx_begin(st, err))) return ds;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%d)", STORE_PG_MIGRATE_KEY);
    int version = 0;
    if (!(ds = sq_exec(st, sql, err)) && !(ds = pg_identify(st, &version, err))) {
        if (readonly && version == 0)
            ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                                 "%s: no DriftBench store there yet (nothing was run into it)", st->shown);
        else if (!readonly && version < DRIFT_STORE_SCHEMA_VERSION)
            ds = pg_migrate(st, &version, err);
        if (!ds && version > 0) ds = pg_not_ours(st, err);
    }
    if (ds) {
        store_tx_rollback(st);
        return ds;
    }
    if ((ds = store_tx_commit(st, err))) return ds;
    st->version = version;
    if (readonly) {
        char ro[128];
        snprintf(ro, sizeof ro, "SET default_transaction_read_only = on; SET statement_timeout = %d",
                 STORE_PG_READ_TIMEOUT_MS);
        return sq_exec(st, ro, err);
    }
    return DRIFT_OK;
}

void store_pg_close(drift_store *st) {
    /* unlock now: the server would drop them only once this connection's
     * backend has exited, a moment after PQfinish returns */
    if (st->pg && st->n_pg_locks && PQstatus(st->pg) == CONNECTION_OK) {
        if (sq_in_tx(st)) sq_exec_quiet(st, "ROLLBACK");
        sq_exec_quiet(st, "SELECT pg_advisory_unlock_all()");
    }
    if (st->pg) PQfinish(st->pg);
    st->pg = NULL;
    for (size_t i = 0; i < st->n_pg_locks; i++) free(st->pg_locks[i]);
    free(st->pg_locks);
    st->pg_locks = NULL;
    st->n_pg_locks = 0;
}

/* ---- run locks ---- */

static int held_index(drift_store *st, const char *label) {
    for (size_t i = 0; i < st->n_pg_locks; i++)
        if (!strcmp(st->pg_locks[i], label)) return (int)i;
    return -1;
}

/* pg_try_advisory_lock / pg_advisory_unlock of label's key: 1 true, 0 false, -1 error. */
static int pg_lock_call(drift_store *st, const char *fn, const char *label) {
    char sql[128];
    /* the key names the schema too: advisory locks are database-wide, and
     * one database may hold a store per schema */
    snprintf(sql, sizeof sql, "SELECT %s(hashtextextended(current_schema()::text || '.' || ?1::text, %d))", fn,
             STORE_PG_LOCK_SEED);
    store_q *q = sq_prepare(st, sql, NULL);
    if (!q) return -1;
    sq_bind_text(q, 1, label);
    int rc = sq_step(q) == SQ_ROW ? (int)sq_int64(q, 0) : -1;
    sq_done(q);
    return rc;
}

drift_status store_pg_lock_take(drift_store *st, const char *label, int *taken, drift_error *err) {
    *taken = 0;
    if (held_index(st, label) >= 0) return DRIFT_OK;
    char **nl = realloc(st->pg_locks, (st->n_pg_locks + 1) * sizeof *nl);
    if (!nl) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory taking a run lock");
    st->pg_locks = nl;
    int got = pg_lock_call(st, "pg_try_advisory_lock", label);
    if (got < 0) return store_db_error(st, err, "taking the run lock");
    if (!got) {
        /* Who holds it: the row its holder wrote (absent if it is still
         * inside its run_begin). */
        store_q *q = sq_prepare(st, "SELECT pid, host, started_at FROM run_locks WHERE label = ?1", err);
        if (!q) return store_err_code(err);
        sq_bind_text(q, 1, label);
        drift_status ds;
        if (sq_step(q) == SQ_ROW)
            ds = drift_error_set(err, DRIFT_ERR_STORE,
                                 "%s: run '%s' is being written by another driftbench (pid %lld on host %s, since "
                                 "%s); wait for it to end or stop it, then run again to resume (its lock ends with "
                                 "its connection)",
                                 st->shown, label, (long long)sq_int64(q, 0), sq_text(q, 1) ? sq_text(q, 1) : "?",
                                 sq_text(q, 2) ? sq_text(q, 2) : "?");
        else
            ds = drift_error_set(err, DRIFT_ERR_STORE,
                                 "%s: run '%s' is being started by another driftbench; wait for it to end, then "
                                 "run again to resume",
                                 st->shown, label);
        sq_done(q);
        return ds;
    }
    if (!(st->pg_locks[st->n_pg_locks] = util_strdup(label))) {
        pg_lock_call(st, "pg_advisory_unlock", label);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory taking a run lock");
    }
    st->n_pg_locks++;
    *taken = 1; /* from here on the caller releases it if run_begin fails (after its rollback: an
                   aborted transaction cannot unlock) */
    st->holds_locks = 1;
    return store_lock_row_write(st, label, "recording the run lock", err);
}

int store_pg_lock_try(drift_store *st, const char *label) {
    if (held_index(st, label) >= 0) return 0; /* this handle writes it */
    return pg_lock_call(st, "pg_try_advisory_lock", label);
}

void store_pg_lock_give(drift_store *st, const char *label) { pg_lock_call(st, "pg_advisory_unlock", label); }

void store_pg_lock_release(drift_store *st, const char *label) {
    int i = held_index(st, label);
    if (i < 0) return;
    pg_lock_call(st, "pg_advisory_unlock", label);
    free(st->pg_locks[i]);
    st->pg_locks[i] = st->pg_locks[--st->n_pg_locks];
}
