/* pg_test.h - a fresh PostgreSQL database per test, on the server that
 * $DRIFT_TEST_PG names (tests/pg/with_server.sh starts a private one and
 * sets it): for the PostgreSQL pass of test_store.c.
 *
 *   pg_test_fresh_db("lock", url, sizeof url)   CREATE DATABASE with a name
 *       no other test (or process) uses, its URL into url
 *   pg_test_exec(url, sql)                      SQL through libpq, outside
 *       the store (to plant foreign tables, to look at what is there)
 *   pg_test_scalar(url, sql)                    a one-value query as int64
 *   pg_test_text(url, sql, out, cap)            ... as text
 *   pg_test_drop_all()                          DROP DATABASE ... WITH
 *       (FORCE) of every database made here (group teardown)
 *
 * The URL of a database is $DRIFT_TEST_PG with its path ("/postgres")
 * replaced by "/NAME"; the query ("?host=/dir") stays. Nothing here asserts:
 * failures come back as -1 with the server's message on stderr, so the
 * caller's assertion fails. */
#ifndef PG_TEST_H
#define PG_TEST_H

#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PG_TEST_MAX_DBS 128

static char pg_test_dbs[PG_TEST_MAX_DBS][64]; /* databases made here, to drop */
static int pg_test_ndbs;

/* $DRIFT_TEST_PG, or NULL when the PostgreSQL pass is off. */
static const char *pg_test_base(void) {
    const char *u = getenv("DRIFT_TEST_PG");
    return u && *u ? u : NULL;
}

/* base with its database (the URL's path) replaced by db; 0 ok, -1 when
 * base is not a URL or out does not hold the result. */
static int pg_test_url_for(const char *base, const char *db, char *out, size_t cap) {
    const char *auth = strstr(base, "://");
    if (!auth) return -1;
    auth += 3;
    size_t head = strcspn(auth, "/?") + (size_t)(auth - base); /* scheme://user@host:port */
    const char *rest = base + head;
    if (*rest == '/') rest += strcspn(rest, "?"); /* skip "/olddb" */
    int n = snprintf(out, cap, "%.*s/%s%s", (int)head, base, db, rest);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Runs sql (no parameters, several statements allowed) on the database of
 * url; 0 ok, -1 with the reason on stderr. */
static int pg_test_exec(const char *url, const char *sql) {
    PGconn *c = PQconnectdb(url);
    int ok = c && PQstatus(c) == CONNECTION_OK;
    if (ok) {
        PGresult *r = PQexec(c, sql);
        ExecStatusType es = PQresultStatus(r);
        ok = es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK;
        if (!ok) fprintf(stderr, "pg_test: %s: %s", sql, PQresultErrorMessage(r));
        PQclear(r);
    } else {
        fprintf(stderr, "pg_test: connecting to %s: %s", url, c ? PQerrorMessage(c) : "out of memory\n");
    }
    PQfinish(c);
    return ok ? 0 : -1;
}

/* The first column of the first row of sql on url's database as a number;
 * -1 when the query fails or gives no row (stderr says which). */
static int64_t pg_test_scalar(const char *url, const char *sql) {
    PGconn *c = PQconnectdb(url);
    int64_t v = -1;
    if (c && PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
            v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        else
            fprintf(stderr, "pg_test: %s: %s\n", sql, PQresultErrorMessage(r));
        PQclear(r);
    } else {
        fprintf(stderr, "pg_test: connecting to %s: %s", url, c ? PQerrorMessage(c) : "out of memory\n");
    }
    PQfinish(c);
    return v;
}

/* The first column of the first row of sql on url's database as text into
 * out; 0 ok, -1 when the query fails or gives no row. */
static int pg_test_text(const char *url, const char *sql, char *out, size_t cap) {
    PGconn *c = PQconnectdb(url);
    int rc = -1;
    out[0] = '\0';
    if (c && PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) {
            snprintf(out, cap, "%s", PQgetisnull(r, 0, 0) ? "(null)" : PQgetvalue(r, 0, 0));
            rc = 0;
        } else {
            fprintf(stderr, "pg_test: %s: %s\n", sql, PQresultErrorMessage(r));
        }
        PQclear(r);
    } else {
        fprintf(stderr, "pg_test: connecting to %s: %s", url, c ? PQerrorMessage(c) : "out of memory\n");
    }
    PQfinish(c);
    return rc;
}

/* Creates a database no one else uses ("drift_t_TAG_PID_N_CLOCK", TAG cut
 * to letters and digits) on $DRIFT_TEST_PG's server and writes its URL into
 * url; 0 ok, -1 (message on stderr). */
static int pg_test_fresh_db(const char *tag, char *url, size_t cap) {
    const char *base = pg_test_base();
    if (!base || pg_test_ndbs >= PG_TEST_MAX_DBS) return -1;
    char t[20];
    size_t k = 0;
    for (const char *p = tag; *p && k < sizeof t - 1; p++)
        if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')) t[k++] = *p;
    t[k] = '\0';
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char *name = pg_test_dbs[pg_test_ndbs];
    snprintf(name, sizeof pg_test_dbs[0], "drift_t_%s_%ld_%d_%ld", t, (long)getpid(), pg_test_ndbs,
             (long)(ts.tv_nsec / 1000 % 1000000));
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    if (pg_test_exec(base, sql)) return -1;
    pg_test_ndbs++;
    return pg_test_url_for(base, name, url, cap);
}

/* Drops every database pg_test_fresh_db made (connections to them are
 * ended: WITH (FORCE)); failures are reported, not fatal. */
static void pg_test_drop_all(void) {
    const char *base = pg_test_base();
    for (int i = 0; base && i < pg_test_ndbs; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", pg_test_dbs[i]);
        pg_test_exec(base, sql);
    }
    pg_test_ndbs = 0;
}

#endif
