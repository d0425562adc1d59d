/* store_sql.c - the statement layer of store_internal.h: prepare, bind,
 * step and read columns, the same calls over sqlite3 and libpq.
 *
 * SQLite: a thin wrapper of sqlite3_stmt (text and blobs bound
 * SQLITE_STATIC, as the store always did).
 *
 * PostgreSQL: the SQL is translated once at prepare (?N and ? become $N;
 * "INDEXED BY name" is dropped; quoted text is left alone). Parameters are
 * kept as text (numbers printed exactly: %lld, %.17g) except blobs and
 * bytes-text, which go binary as bytea. The statement runs at the first
 * step (PQexecParams; a cached statement is PQprepare'd on its first run
 * with the types of that run's bindings and then PQexecPrepared), the whole
 * result is read into memory and the following steps walk its rows.
 * Results are in text format: numbers are parsed, bytea ("\x" hex) is
 * decoded into the statement's buffer by sq_blob / sq_text. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/util.h"

/* PostgreSQL type oids (pg_type.h, stable since forever). */
#define PG_BYTEA 17
#define PG_INT8 20
#define PG_BOOL 16
#define PG_TEXT 25
#define PG_FLOAT8 701

struct store_q {
    drift_store *st;
    int cached;           /* stmts[which]: sq_done resets instead of freeing */
    sqlite3_stmt *s;      /* SQLite */
    /* PostgreSQL */
    char *sql;            /* translated */
    char name[24];        /* prepared statement's name (cached ones) */
    int prepared;
    int nparams;
    /* the parameters as libpq takes them, set by the binds (index i - 1) */
    const char **vals;    /* NULL: SQL NULL */
    int *lens;            /* binary values' lengths */
    int *fmts;            /* 0 text, 1 binary */
    Oid *types;           /* 0: let the server infer */
    char (*num)[32];      /* numbers' text */
    PGresult *res;
    int row, nrows;
    long changes;
    unsigned char **bufs; /* per column: decoded bytea of the current row */
    size_t *buf_len;
    int *buf_row;         /* row the buffer holds, -1 none */
    int ncols;
};

/* libpq's keywords that may start a key=value connection string given as
 * a store (its first word, then '='): a file name seldom looks like one. */
static const char *const pg_conninfo_keys[] = {
    "host",    "hostaddr",         "port",            "dbname",  "user",        "password",
    "passfile", "service",         "options",         "sslmode", "sslpassword", "application_name",
    "connect_timeout", "target_session_attrs", "require_auth",
};

int store_is_pg_url(const char *path) {
    if (!path) return 0;
    if (!strncmp(path, "postgresql://", 13) || !strncmp(path, "postgres://", 11)) return 1;
    const char *p = path;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
    const char *e = p + n;
    while (*e == ' ' || *e == '\t') e++;
    if (!n || *e != '=') return 0;
    for (size_t i = 0; i < sizeof pg_conninfo_keys / sizeof pg_conninfo_keys[0]; i++)
        if (strlen(pg_conninfo_keys[i]) == n && !strncmp(p, pg_conninfo_keys[i], n)) return 1;
    return 0;
}

/* ---- PostgreSQL: translation ---- */

/* Translates SQLite's SQL for PostgreSQL; *nparams = the highest parameter
 * number. NULL when out of memory. */
static char *pg_translate(const char *sql, int *nparams) {
    util_buf b = {0};
    int maxp = 0;
    for (const char *p = sql; *p;) {
        if (*p == '\'' || *p == '"') { /* a quoted string or name, '' and "" inside */
            char q = *p;
            const char *e = p + 1;
            while (*e && !(*e == q && e[1] != q)) e += (*e == q) ? 2 : 1;
            if (*e) e++;
            buf_append(&b, p, (size_t)(e - p));
            p = e;
        } else if (*p == '?') {
            int k;
            p++;
            if (isdigit((unsigned char)*p)) {
                k = (int)strtol(p, (char **)&p, 10);
            } else {
                k = maxp + 1;
            }
            if (k > maxp) maxp = k;
            buf_printf(&b, "$%d", k);
        } else if (!strncmp(p, "INDEXED BY ", 11)) {
            p += 11;
            while (isalnum((unsigned char)*p) || *p == '_') p++;
        } else {
            buf_append(&b, p, 1);
            p++;
        }
    }
    *nparams = maxp;
    return b.data ? buf_steal(&b) : util_strdup("");
}

static void pg_fail(drift_store *st, const char *msg) {
    free(st->pg_msg);
    st->pg_msg = util_strdup(msg && *msg ? msg : "PostgreSQL error");
    if (st->pg_msg) { /* one line: libpq ends messages with a newline */
        size_t n = strlen(st->pg_msg);
        while (n && (st->pg_msg[n - 1] == '\n' || st->pg_msg[n - 1] == ' ')) st->pg_msg[--n] = '\0';
        for (char *c = st->pg_msg; *c; c++)
            if (*c == '\n' || *c == '\t') *c = ' ';
    }
}

static void pg_clear_result(store_q *q) {
    if (q->res) PQclear(q->res);
    q->res = NULL;
    q->row = -1;
    q->nrows = 0;
    for (int i = 0; i < q->ncols; i++) q->buf_row[i] = -1;
}

static void q_free(store_q *q);

static store_q *q_new(drift_store *st, const char *sql, drift_error *err) {
    store_q *q = calloc(1, sizeof *q);
    if (!q) {
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory preparing a statement");
        return NULL;
    }
    q->st = st;
    q->row = -1;
    if (st->kind == STORE_SQLITE) {
        if (sqlite3_prepare_v2(st->db, sql, -1, &q->s, NULL) != SQLITE_OK) {
            store_db_error(st, err, "prepare");
            free(q);
            return NULL;
        }
        return q;
    }
    q->sql = pg_translate(sql, &q->nparams);
    size_t np = (size_t)(q->nparams ? q->nparams : 1);
    q->vals = calloc(np, sizeof *q->vals);
    q->lens = calloc(np, sizeof *q->lens);
    q->fmts = calloc(np, sizeof *q->fmts);
    q->types = calloc(np, sizeof *q->types);
    q->num = calloc(np, sizeof *q->num);
    if (!q->sql || !q->vals || !q->lens || !q->fmts || !q->types || !q->num) {
        q_free(q);
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory preparing a statement");
        return NULL;
    }
    return q;
}

static void q_free(store_q *q) {
    if (!q) return;
    if (q->s) sqlite3_finalize(q->s);
    if (q->res) PQclear(q->res);
    if (q->prepared && q->st->pg && PQstatus(q->st->pg) == CONNECTION_OK && !PQisBusy(q->st->pg)) {
        char sql[48];
        snprintf(sql, sizeof sql, "DEALLOCATE %s", q->name);
        PGresult *r = PQexec(q->st->pg, sql);
        PQclear(r);
    }
    for (int i = 0; i < q->ncols; i++) free(q->bufs[i]);
    free(q->bufs);
    free(q->buf_len);
    free(q->buf_row);
    free(q->sql);
    free(q->vals);
    free(q->lens);
    free(q->fmts);
    free(q->types);
    free(q->num);
    free(q);
}

store_q *sq_prepare(drift_store *st, const char *sql, drift_error *err) { return q_new(st, sql, err); }

store_q *sq_cached(drift_store *st, int which, const char *sql, drift_error *err) {
    store_q *q = st->stmts[which];
    if (!q) {
        if (!(q = q_new(st, sql, err))) return NULL;
        q->cached = 1;
        snprintf(q->name, sizeof q->name, "drift_s%d", which);
        st->stmts[which] = q;
    }
    sq_reset(q);
    if (q->s) sqlite3_clear_bindings(q->s);
    for (int i = 0; i < q->nparams; i++) {
        q->vals[i] = NULL;
        q->lens[i] = q->fmts[i] = 0;
        q->types[i] = 0;
    }
    return q;
}

void sq_free_cached(drift_store *st) {
    for (int i = 0; i < STORE_STMT_COUNT; i++) {
        q_free(st->stmts[i]);
        st->stmts[i] = NULL;
    }
}

/* ---- binding ---- */

/* Sets PostgreSQL parameter i (from 1; others are ignored, as SQLite's
 * range error would be) and returns its index, or -1. */
static int pg_set(store_q *q, int i, const char *val, int len, int fmt, Oid type) {
    if (i < 1 || i > q->nparams) return -1;
    q->vals[i - 1] = val;
    q->lens[i - 1] = len;
    q->fmts[i - 1] = fmt;
    q->types[i - 1] = type;
    return i - 1;
}

void sq_bind_int64(store_q *q, int i, int64_t v) {
    if (q->s) {
        sqlite3_bind_int64(q->s, i, (sqlite3_int64)v);
        return;
    }
    int k = pg_set(q, i, NULL, 0, 0, PG_INT8);
    if (k < 0) return;
    snprintf(q->num[k], sizeof q->num[k], "%" PRId64, v);
    q->vals[k] = q->num[k];
}

void sq_bind_double(store_q *q, int i, double v) {
    if (q->s) {
        sqlite3_bind_double(q->s, i, v);
        return;
    }
    int k = pg_set(q, i, NULL, 0, 0, PG_FLOAT8);
    if (k < 0) return;
    if (isnan(v)) snprintf(q->num[k], sizeof q->num[k], "NaN");
    else if (isinf(v)) snprintf(q->num[k], sizeof q->num[k], v > 0 ? "Infinity" : "-Infinity");
    else snprintf(q->num[k], sizeof q->num[k], "%.17g", v);
    q->vals[k] = q->num[k];
}

void sq_bind_text(store_q *q, int i, const char *t) {
    if (q->s) {
        if (t) sqlite3_bind_text(q->s, i, t, -1, SQLITE_STATIC);
        else sqlite3_bind_null(q->s, i);
        return;
    }
    pg_set(q, i, t, 0, 0, PG_TEXT); /* a NULL is a text NULL: "?2 IS NULL OR x = ?2" needs the type */
}

void sq_bind_blob(store_q *q, int i, const void *d, size_t n) {
    if (q->s) {
        if (d) sqlite3_bind_blob(q->s, i, d, (int)n, SQLITE_STATIC);
        else sqlite3_bind_null(q->s, i);
        return;
    }
    pg_set(q, i, d ? (n ? d : "") : NULL, (int)n, 1, PG_BYTEA);
}

void sq_bind_bytes_text(store_q *q, int i, const char *t) {
    if (q->s) {
        sq_bind_text(q, i, t);
        return;
    }
    sq_bind_blob(q, i, t, t ? strlen(t) : 0);
}

void sq_bind_null(store_q *q, int i) {
    if (q->s) {
        sqlite3_bind_null(q->s, i);
        return;
    }
    pg_set(q, i, NULL, 0, 0, 0);
}

/* ---- pipelines ---- */

#define PIPE_DRAIN_EVERY 256 /* statements sent before their results are read: bounds both socket buffers */

typedef struct store_pipe {
    store_q **prep;    /* per sent item: the statement whose PQsendPrepare it was, NULL for a step */
    size_t n, cap;     /* items sent since the last drain */
    long steps;        /* steps sent in all (ordinal of the next) */
    long steps_drained;
    long failed;       /* ordinal of the first failed step, -1 none */
    char *msg;         /* its message */
} store_pipe;

void sq_pipeline_begin(drift_store *st) {
    if (st->kind != STORE_PG || st->pipe || !st->pg) return;
    store_pipe *p = calloc(1, sizeof *p);
    if (!p) return; /* statements then run one by one */
    p->failed = -1;
    if (PQenterPipelineMode(st->pg) != 1) {
        free(p);
        return;
    }
    st->pipe = p;
}

static int pipe_note(store_pipe *p, store_q *prep) {
    if (p->n == p->cap) {
        size_t c = p->cap ? p->cap * 2 : 64;
        store_q **np = realloc(p->prep, c * sizeof *np);
        if (!np) return -1;
        p->prep = np;
        p->cap = c;
    }
    p->prep[p->n++] = prep;
    return 0;
}

/* Sends a sync and reads every result up to it. 0, or -1 when the
 * connection broke (the message is then set). */
static int pipe_drain(drift_store *st) {
    store_pipe *p = st->pipe;
    if (PQpipelineSync(st->pg) != 1) {
        if (!p->msg) p->msg = util_strdup(PQerrorMessage(st->pg));
        return -1;
    }
    size_t item = 0;
    int nulls = 0;
    for (;;) {
        PGresult *r = PQgetResult(st->pg);
        if (!r) {
            if (PQstatus(st->pg) == CONNECTION_BAD || ++nulls > (int)p->n + 2) {
                if (!p->msg) p->msg = util_strdup(PQerrorMessage(st->pg));
                if (p->failed < 0) p->failed = p->steps_drained;
                return -1;
            }
            continue; /* the end of one statement's results */
        }
        nulls = 0;
        ExecStatusType es = PQresultStatus(r);
        if (es == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            break;
        }
        if (item < p->n) {
            store_q *prep = p->prep[item];
            if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK && es != PGRES_PIPELINE_ABORTED) {
                if (prep) prep->prepared = 0; /* it was not prepared after all */
                if (p->failed < 0) {
                    p->failed = p->steps_drained;
                    p->msg = util_strdup(PQresultErrorMessage(r));
                }
            } else if (es == PGRES_PIPELINE_ABORTED && prep) {
                prep->prepared = 0;
            }
            if (!prep) p->steps_drained++;
            item++;
        }
        PQclear(r);
    }
    p->n = 0;
    return 0;
}

drift_status sq_pipeline_end(drift_store *st, long *failed, drift_error *err) {
    *failed = -1;
    store_pipe *p = st->pipe;
    if (!p) return DRIFT_OK;
    int broke = pipe_drain(st) != 0;
    st->pipe = NULL;
    if (!broke) PQexitPipelineMode(st->pg);
    drift_status ds = DRIFT_OK;
    if (p->failed >= 0 || broke) {
        pg_fail(st, p->msg ? p->msg : "pipeline failed");
        *failed = p->failed;
        ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: %s", st->shown, st->pg_msg ? st->pg_msg : "?");
    }
    free(p->prep);
    free(p->msg);
    free(p);
    return ds;
}

/* Sends q's statement into the open pipeline. */
static int pg_send(store_q *q) {
    drift_store *st = q->st;
    store_pipe *p = st->pipe;
    int n = q->nparams;
    int ok;
    if (q->cached) {
        if (!q->prepared) {
            if (PQsendPrepare(st->pg, q->name, q->sql, n, q->types) != 1 || pipe_note(p, q)) goto fail;
            q->prepared = 1;
        }
        ok = PQsendQueryPrepared(st->pg, q->name, n, q->vals, q->lens, q->fmts, 0);
    } else {
        ok = PQsendQueryParams(st->pg, q->sql, n, q->types, q->vals, q->lens, q->fmts, 0);
    }
    if (ok != 1 || pipe_note(p, NULL)) goto fail;
    p->steps++;
    if (p->n >= PIPE_DRAIN_EVERY && pipe_drain(st)) return SQ_ERROR;
    return SQ_DONE;
fail:
    pg_fail(st, PQerrorMessage(st->pg));
    return SQ_ERROR;
}

/* ---- stepping ---- */

static int pg_run(store_q *q) {
    drift_store *st = q->st;
    int n = q->nparams;
    PGresult *r;
    if (q->cached) {
        if (!q->prepared) {
            r = PQprepare(st->pg, q->name, q->sql, n, q->types);
            if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                pg_fail(st, r ? PQresultErrorMessage(r) : PQerrorMessage(st->pg));
                PQclear(r);
                return SQ_ERROR;
            }
            PQclear(r);
            q->prepared = 1;
        }
        r = PQexecPrepared(st->pg, q->name, n, q->vals, q->lens, q->fmts, 0);
    } else {
        r = PQexecParams(st->pg, q->sql, n, q->types, q->vals, q->lens, q->fmts, 0);
    }
    if (!r) {
        pg_fail(st, PQerrorMessage(st->pg));
        return SQ_ERROR;
    }
    ExecStatusType es = PQresultStatus(r);
    if (es != PGRES_TUPLES_OK && es != PGRES_COMMAND_OK) {
        pg_fail(st, PQresultErrorMessage(r));
        PQclear(r);
        return SQ_ERROR;
    }
    q->res = r;
    q->nrows = PQntuples(r);
    q->changes = atol(PQcmdTuples(r));
    int nc = PQnfields(r);
    if (nc > q->ncols) {
        unsigned char **nb = realloc(q->bufs, (size_t)nc * sizeof *nb);
        if (nb) q->bufs = nb;
        size_t *nl = nb ? realloc(q->buf_len, (size_t)nc * sizeof *nl) : NULL;
        if (nl) q->buf_len = nl;
        int *nr = nl ? realloc(q->buf_row, (size_t)nc * sizeof *nr) : NULL;
        if (nr) q->buf_row = nr;
        if (!nb || !nl || !nr) {
            pg_fail(st, "out of memory");
            return SQ_ERROR;
        }
        for (int i = q->ncols; i < nc; i++) {
            q->bufs[i] = NULL;
            q->buf_len[i] = 0;
        }
        q->ncols = nc;
    }
    for (int i = 0; i < q->ncols; i++) q->buf_row[i] = -1;
    q->row = 0;
    return q->nrows > 0 ? SQ_ROW : SQ_DONE;
}

int sq_step(store_q *q) {
    if (q->s) {
        int rc = sqlite3_step(q->s);
        return rc == SQLITE_ROW ? SQ_ROW : rc == SQLITE_DONE ? SQ_DONE : SQ_ERROR;
    }
    if (q->st->pipe) return pg_send(q);
    if (!q->res) return pg_run(q);
    if (q->row < q->nrows) q->row++;
    return q->row < q->nrows ? SQ_ROW : SQ_DONE;
}

long sq_changes(store_q *q) { return q->s ? (long)sqlite3_changes(q->st->db) : q->changes; }

void sq_reset(store_q *q) {
    if (!q) return;
    if (q->s) sqlite3_reset(q->s);
    else pg_clear_result(q);
}

void sq_done(store_q *q) {
    if (!q) return;
    if (q->cached) sq_reset(q);
    else q_free(q);
}

/* ---- columns ---- */

static int pg_has(store_q *q, int i) { return q->res && q->row >= 0 && q->row < q->nrows && i >= 0 && i < q->ncols; }

int sq_is_null(store_q *q, int i) {
    if (q->s) return sqlite3_column_type(q->s, i) == SQLITE_NULL;
    return !pg_has(q, i) || PQgetisnull(q->res, q->row, i);
}

int64_t sq_int64(store_q *q, int i) {
    if (q->s) return sqlite3_column_int64(q->s, i);
    if (sq_is_null(q, i)) return 0;
    const char *v = PQgetvalue(q->res, q->row, i);
    if (v[0] == 't') return 1;
    if (v[0] == 'f') return 0;
    return (int64_t)strtoll(v, NULL, 10);
}

int sq_int(store_q *q, int i) { return (int)sq_int64(q, i); }

double sq_double(store_q *q, int i) {
    if (q->s) return sqlite3_column_double(q->s, i);
    if (sq_is_null(q, i)) return 0.0;
    return strtod(PQgetvalue(q->res, q->row, i), NULL);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Column i of a bytea result ("\x" hex) decoded into the column's buffer,
 * NUL-terminated; NULL when NULL, malformed or out of memory. */
static const unsigned char *pg_bytea(store_q *q, int i) {
    if (q->buf_row[i] == q->row) return q->bufs[i];
    const char *v = PQgetvalue(q->res, q->row, i);
    size_t n = (size_t)PQgetlength(q->res, q->row, i);
    if (n < 2 || v[0] != '\\' || v[1] != 'x' || (n - 2) % 2) return NULL;
    size_t m = (n - 2) / 2;
    unsigned char *b = realloc(q->bufs[i], m + 1);
    if (!b) return NULL;
    q->bufs[i] = b;
    for (size_t k = 0; k < m; k++) {
        int hi = hexval(v[2 + 2 * k]), lo = hexval(v[3 + 2 * k]);
        if (hi < 0 || lo < 0) return NULL;
        b[k] = (unsigned char)(hi << 4 | lo);
    }
    b[m] = '\0';
    q->buf_len[i] = m;
    q->buf_row[i] = q->row;
    return b;
}

const char *sq_text(store_q *q, int i) {
    if (q->s) return (const char *)sqlite3_column_text(q->s, i);
    if (sq_is_null(q, i)) return NULL;
    if (PQftype(q->res, i) == PG_BYTEA) return (const char *)pg_bytea(q, i);
    return PQgetvalue(q->res, q->row, i);
}

const void *sq_blob(store_q *q, int i) {
    if (q->s) return sqlite3_column_blob(q->s, i);
    if (sq_is_null(q, i)) return NULL;
    if (PQftype(q->res, i) == PG_BYTEA) return pg_bytea(q, i);
    return PQgetvalue(q->res, q->row, i);
}

size_t sq_bytes(store_q *q, int i) {
    if (q->s) return (size_t)sqlite3_column_bytes(q->s, i);
    if (sq_is_null(q, i)) return 0;
    if (PQftype(q->res, i) == PG_BYTEA) return pg_bytea(q, i) ? q->buf_len[i] : 0;
    return (size_t)PQgetlength(q->res, q->row, i);
}

/* ---- whole statements ---- */

drift_status sq_exec(drift_store *st, const char *sql, drift_error *err) {
    if (st->kind == STORE_SQLITE) {
        char *msg = NULL;
        if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
            drift_status rc = drift_error_set(err, DRIFT_ERR_STORE, "%s: %s", st->shown, msg ? msg : "sqlite error");
            sqlite3_free(msg);
            return rc;
        }
        return DRIFT_OK;
    }
    PGresult *r = PQexec(st->pg, sql);
    ExecStatusType es = PQresultStatus(r);
    if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
        pg_fail(st, r ? PQresultErrorMessage(r) : PQerrorMessage(st->pg));
        PQclear(r);
        return drift_error_set(err, DRIFT_ERR_STORE, "%s: %s", st->shown, st->pg_msg ? st->pg_msg : "?");
    }
    PQclear(r);
    return DRIFT_OK;
}

void sq_exec_quiet(drift_store *st, const char *sql) {
    if (st->kind == STORE_SQLITE) {
        sqlite3_exec(st->db, sql, NULL, NULL, NULL);
        return;
    }
    if (!st->pg || PQstatus(st->pg) != CONNECTION_OK) return;
    PGresult *r = PQexec(st->pg, sql);
    PQclear(r);
}

const char *sq_errmsg(drift_store *st) {
    if (st->kind == STORE_SQLITE && st->db && st->bound_hit && sqlite3_errcode(st->db) == SQLITE_INTERRUPT)
        return st->bound_msg; /* stopped by the read bound (store_sqlite.c) */
    if (st->kind == STORE_SQLITE) return st->db ? sqlite3_errmsg(st->db) : "no database";
    if (st->pg_msg) return st->pg_msg;
    return st->pg ? PQerrorMessage(st->pg) : "no connection";
}

int sq_in_tx(drift_store *st) {
    if (st->kind == STORE_SQLITE) return st->db && !sqlite3_get_autocommit(st->db);
    if (!st->pg) return 0;
    PGTransactionStatusType t = PQtransactionStatus(st->pg);
    return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}
