/* test_store.c - the store on both backends: round trips, resume
 * semantics, schema identity and migration, refusal of foreign files and
 * databases (left untouched), crash safety with a real fork + SIGKILL
 * mid-way through writing, run locks (one writer per label, stale locks
 * taken over), read-only handles (nothing created, nothing written), and
 * several writer processes at once; a store whose schema is not ours (a
 * view, a trigger, another SQL) refused naming the object, and the bound
 * on a read-only handle's statements.
 *
 * Two passes: every test on SQLite files in a temporary directory; then,
 * when DRIFT_TEST_PG names a PostgreSQL server (tests/pg/with_server.sh
 * starts a private one), the tests about the store's behaviour again, each
 * on a fresh database (tests/pg/pg_test.h), plus the PostgreSQL
 * counterparts of the SQLite-file tests and a server stopped mid-run
 * (when DRIFT_TEST_PG_CTL says how). The tests look at what the store
 * wrote through the statement layer (sq_*), which reads both.
 *
 * Secrets: a run's record holds its target without the password or the
 * credential parameters, resumes with another password, and shows "***"
 * for a record an older driftbench wrote (merged copies too); PostgreSQL
 * URLs and key=value strings whose password holds '@', '/', '%' (raw or
 * escaped, in the userinfo, in ?password= or quoted) give libpq the
 * password whole (PQpass) and never show it: not in drift_store_display,
 * not in the messages of a failed connection (libpq's included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/store.h"
#include "pg/pg_test.h"
#include "store/store_internal.h" /* the statement layer: to look at what the store wrote */
#include "util/util.h"

static int on_pg; /* the pass running: 0 SQLite files, 1 PostgreSQL databases */

static char tmpdir[256];

static char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static int setup_dir(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_store.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static int setup_pg(void **state) {
    on_pg = 1;
    return setup_dir(state);
}

static int teardown_pg(void **state) {
    pg_test_drop_all();
    on_pg = 0;
    return teardown_dir(state);
}

/* Where a test keeps a new store: the file tmpdir/name, or (PostgreSQL
 * pass) the URL of a fresh, empty database. */
static const char *store_loc(const char *name) {
    if (!on_pg) return tpath(name);
    static char buf[8][512];
    static int k;
    char *u = buf[k++ % 8];
    assert_int_equal(pg_test_fresh_db(name, u, sizeof buf[0]), 0);
    return u;
}

/* A suite of n math prompts "q0".."q{n-1}" built in memory. */
static drift_suite *make_suite(const char *name, size_t n) {
    drift_suite *s = calloc(1, sizeof *s);
    s->name = util_strdup(name);
    s->source = util_strdup(name);
    s->format = util_strdup("test");
    s->prompts = calloc(n, sizeof *s->prompts);
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        drift_prompt *p = &s->prompts[i];
        p->prompt_id = util_asprintf("q%zu", i);
        p->workload = i % 2 ? DRIFT_WL_LONG : DRIFT_WL_MATH;
        p->input = util_asprintf("What is %zu + %zu?", i, i);
        p->reference_json = util_asprintf("{\"answer\":\"%zu\"}", 2 * i);
        char h[17];
        util_hash_hex(p->input, strlen(p->input), h);
        p->hash = util_strdup(h);
    }
    return s;
}

static void free_suite(drift_suite *s) { drift_suite_free(s); }

static drift_store *open_ok(const char *path) {
    drift_store *st = NULL;
    drift_error err = {0};
    drift_status rc = drift_store_open(path, &st, &err);
    if (rc) fprintf(stderr, "open: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    return st;
}

static drift_run_info run_info(const char *label, const char *target, const char *dec) {
    drift_run_info ri = {0};
    ri.label = (char *)label;
    ri.target = (char *)target;
    ri.config_json = (char *)"{\"model\":\"m\",\"hardware\":\"h100\"}";
    ri.decoding_json = (char *)dec;
    ri.templates_json = (char *)"{\"math\":\"math/completions/v1\"}";
    ri.suites_json = (char *)"[\"s\"]";
    return ri;
}

/* The first column of the one row of sql, read through the statement layer. */
static int64_t count_rows(drift_store *st, const char *sql) {
    drift_error err = {0};
    store_q *q = sq_prepare(st, sql, &err);
    if (!q) fprintf(stderr, "%s: %s\n", sql, err.msg);
    assert_non_null(q);
    int rc = sq_step(q);
    if (rc != SQ_ROW) fprintf(stderr, "%s: %s\n", sql, sq_errmsg(st));
    assert_int_equal(rc, SQ_ROW);
    int64_t v = sq_int64(q, 0);
    sq_done(q);
    return v;
}

/* The first column of the one row of sql as text, into out. */
static void query_text(drift_store *st, const char *sql, char *out, size_t cap) {
    store_q *q = sq_prepare(st, sql, NULL);
    assert_non_null(q);
    int rc = sq_step(q);
    if (rc != SQ_ROW) fprintf(stderr, "%s: %s\n", sql, sq_errmsg(st));
    assert_int_equal(rc, SQ_ROW);
    snprintf(out, cap, "%s", sq_text(q, 0) ? sq_text(q, 0) : "(null)");
    sq_done(q);
}

static void exec_ok(drift_store *st, const char *sql) {
    drift_error err = {0};
    drift_status rc = sq_exec(st, sql, &err);
    if (rc) fprintf(stderr, "%s: %s\n", sql, err.msg);
    assert_int_equal(rc, DRIFT_OK);
}

/* The store's schema version: SQLite's user_version, PostgreSQL's
 * driftbench_meta row. */
static int64_t schema_version(drift_store *st) {
    return count_rows(st, SQ_SQL(st, "PRAGMA user_version",
                                 "SELECT CAST(value AS BIGINT) FROM driftbench_meta WHERE key='schema_version'"));
}

static void set_schema_version(drift_store *st, int v) {
    char sql[128];
    if (st->kind == STORE_PG)
        snprintf(sql, sizeof sql, "UPDATE driftbench_meta SET value='%d' WHERE key='schema_version'", v);
    else
        snprintf(sql, sizeof sql, "PRAGMA user_version=%d", v);
    exec_ok(st, sql);
}

/* rc, after saying on stderr what err holds when rc is a failure. */
static drift_status said(drift_status rc, const drift_error *err) {
    if (rc) fprintf(stderr, "  -> %s: %s\n", drift_strerror(rc), err->msg);
    return rc;
}

/* PostgreSQL: waits (10 s at most) until no other client's session is
 * connected to st's database: the server ends a session whose client is
 * gone (exited, killed) on its own time, and releases its advisory locks
 * before the session leaves pg_stat_activity. 1 when they are gone.
 * SQLite: 1. */
static int other_sessions_gone(drift_store *st) {
    if (st->kind != STORE_PG) return 1;
    for (int i = 0; i < 1000; i++) {
        if (count_rows(st, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND backend_type = 'client backend' AND pid <> pg_backend_pid()") == 0)
            return 1;
        usleep(10000);
    }
    return 0;
}

static void test_open_new_and_reopen(void **state) {
    (void)state;
    const char *path = store_loc("new.db");
    drift_store *st = open_ok(path);
    assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
    if (st->kind == STORE_PG) {
        assert_int_equal(count_rows(st, "SELECT count(*) FROM driftbench_meta WHERE key='application' AND "
                                        "value='driftbench'"),
                         1);
        assert_int_equal(count_rows(st, "SELECT count(*) FROM pg_tables WHERE schemaname=current_schema() AND "
                                        "tablename IN ('prompts','runs','responses','scores','embeddings',"
                                        "'run_locks')"),
                         6);
    } else {
        assert_int_equal(count_rows(st, "PRAGMA application_id"), 0x44524654);
        char mode[16];
        query_text(st, "PRAGMA journal_mode", mode, sizeof mode);
        assert_string_equal(mode, "wal");
        assert_int_equal(count_rows(st, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                                        "('prompts','runs','responses','scores','embeddings','run_locks')"),
                         6);
    }
    drift_store_close(st);
    st = open_ok(path); /* reopening an existing store migrates nothing and works */
    assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
    drift_store_close(st);
}

static void test_migrate_empty_file(void **state) {
    (void)state;
    const char *path = tpath("empty.db");
    FILE *f = fopen(path, "w");
    fclose(f);
    drift_store *st = open_ok(path);
    assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), 0);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0);
    drift_store_close(st);
}

static char *slurp(const char *path, size_t *len) {
    char *d = NULL;
    assert_int_equal(util_read_file(path, &d, len, NULL), DRIFT_OK);
    return d;
}

static void test_refuse_text_file(void **state) {
    (void)state;
    const char *path = tpath("notes.txt");
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 200; i++) fprintf(f, "line %d of some notes that are not a database\n", i);
    fclose(f);
    size_t l0, l1;
    char *before = slurp(path, &l0);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    assert_non_null(strstr(err.msg, "not a DriftBench store"));
    assert_non_null(strstr(err.msg, "notes.txt"));
    char *after = slurp(path, &l1);
    assert_int_equal(l0, l1);
    assert_memory_equal(before, after, l0);
    free(before);
    free(after);
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    assert_int_not_equal(access(wal, F_OK), 0);
}

static void test_refuse_foreign_sqlite(void **state) {
    (void)state;
    const char *path = tpath("other.sqlite");
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE customers(id INTEGER, name TEXT);"
                                      "INSERT INTO customers VALUES(1,'ann');",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    size_t l0, l1;
    char *before = slurp(path, &l0);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "not a DriftBench store"));
    assert_non_null(strstr(err.msg, "customers"));
    char *after = slurp(path, &l1);
    assert_int_equal(l0, l1);
    assert_memory_equal(before, after, l0);
    free(before);
    free(after);
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    assert_int_not_equal(access(wal, F_OK), 0);
}

static void test_refuse_newer_schema(void **state) {
    (void)state;
    const char *path = store_loc("future.db");
    drift_store *st = open_ok(path);
    set_schema_version(st, 7);
    drift_store_close(st);
    drift_error err = {0};
    st = NULL;
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    assert_non_null(strstr(err.msg, "schema version 7 is newer"));
    assert_non_null(strstr(err.msg, path));
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    assert_non_null(strstr(err.msg, "schema version 7 is newer"));
}

/* Retention (drift_store_prune_responses): the newest N kept, with the
 * scores of the deleted ones and the prompts no response uses any more;
 * an age limit before every answer's time deletes nothing, one after all
 * of them deletes the rest. Another run's answers are untouched. */
static void test_prune_responses(void **state) {
    (void)state;
    drift_store *st = open_ok(store_loc("prune.db"));
    drift_error err = {0};
    drift_suite *su = make_suite("traffic", 5);
    int64_t ids[5];
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    drift_run_info ra = run_info("shadow-primary", "http://x/v1?model=m", "{\"temperature\":0}");
    drift_run_info rb = run_info("other", "http://y/v1?model=m", "{\"temperature\":0}");
    int64_t run = 0, other = 0;
    int resumed = 0;
    assert_int_equal(drift_store_run_begin(st, &ra, &run, &resumed, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_begin(st, &rb, &other, &resumed, &err), DRIFT_OK);
    drift_answer a[5];
    memset(a, 0, sizeof a);
    for (int i = 0; i < 5; i++) {
        a[i].prompt_rowid = ids[i];
        a[i].text = "x";
        a[i].prompt_tokens = a[i].completion_tokens = -1;
    }
    assert_int_equal(drift_store_put_responses(st, run, a, 5, &err), DRIFT_OK);
    assert_int_equal(drift_store_put_responses(st, other, a, 1, &err), DRIFT_OK); /* prompt 0 used by another run */
    drift_scored_set set = {0};
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    drift_score sc[5];
    memset(sc, 0, sizeof sc);
    for (size_t i = 0; i < set.n; i++) {
        sc[i].response_id = set.rows[i].response_id;
        sc[i].evaluator = "e";
        sc[i].label = DRIFT_LABEL_PASS;
        sc[i].value = 1;
    }
    assert_int_equal(drift_store_put_scores(st, sc, set.n, &err), DRIFT_OK);
    drift_scored_set_clear(&set);

    int64_t deleted = -1;
    assert_int_equal(drift_store_prune_responses(st, run, "2000-01-01T00:00:00Z", -1, &deleted, &err), DRIFT_OK);
    assert_int_equal(deleted, 0);
    assert_int_equal(drift_store_prune_responses(st, run, NULL, 2, &deleted, &err), DRIFT_OK);
    assert_int_equal(deleted, 3);
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM responses WHERE run_id=%lld", (long long)run);
    assert_int_equal(count_rows(st, sql), 2);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM scores"), 2);
    /* prompts 1 and 2 went with their last answers; 0 stays (the other run's) */
    assert_int_equal(count_rows(st, "SELECT count(*) FROM prompts"), 3);
    assert_int_equal(drift_store_prune_responses(st, run, "9999-01-01T00:00:00Z", 5, &deleted, &err), DRIFT_OK);
    assert_int_equal(deleted, 2);
    assert_int_equal(count_rows(st, sql), 0);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM prompts"), 1);
    free_suite(su);
    drift_store_close(st);
}

static void test_round_trip(void **state) {
    (void)state;
    drift_store *st = open_ok(store_loc("rt.db"));
    drift_error err = {0};
    drift_suite *su = make_suite("s", 4);
    int64_t ids[4], ids2[4];
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    assert_int_equal(drift_store_put_prompts(st, su, ids2, &err), DRIFT_OK); /* idempotent */
    assert_memory_equal(ids, ids2, sizeof ids);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM prompts"), 4);

    drift_run_info ri = run_info("base", "http://x/v1?model=m", "{\"temperature\":0,\"seed\":42}");
    int64_t run = 0;
    int resumed = -1;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 0);

    const char *lp = "{\"tokens\":[\"4\"],\"logprobs\":[-0.0123456789012345]}";
    drift_answer r[4] = {
        {.prompt_rowid = ids[0], .replicate = 0, .text = "The answer is 0", .prompt_tokens = 10,
         .completion_tokens = 5, .finish_reason = "stop", .latency_ms = 12.5, .logprobs_json = (char *)lp,
         .http_status = 200, .attempts = 1},
        {.prompt_rowid = ids[1], .replicate = 0, .text = "two", .prompt_tokens = -1, .completion_tokens = -1,
         .http_status = 200, .attempts = 1},
        {.prompt_rowid = ids[2], .replicate = 0, .error = "HTTP 500: boom", .prompt_tokens = -1,
         .completion_tokens = -1, .http_status = 500, .attempts = 3},
        {.prompt_rowid = ids[3], .replicate = 0, .text = "six", .prompt_tokens = 3, .completion_tokens = 1,
         .http_status = 200, .attempts = 1},
    };
    assert_int_equal(drift_store_put_responses(st, run, r, 4, &err), DRIFT_OK);

    /* logprobs are compressed on disk and come back identical */
    assert_int_equal(count_rows(st, SQ_SQL(st,
                                           "SELECT count(*) FROM responses WHERE logprobs IS NOT NULL AND "
                                           "substr(hex(logprobs),1,8)='28B52FFD'",
                                           "SELECT count(*) FROM responses WHERE logprobs IS NOT NULL AND "
                                           "substr(encode(logprobs,'hex'),1,8)='28b52ffd'")),
                     1);
    drift_scored_set set = {0};
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, 4);
    drift_answer got;
    drift_prompt gp;
    assert_int_equal(drift_store_response_get(st, set.rows[0].response_id, &got, &gp, &err), DRIFT_OK);
    assert_string_equal(got.text, "The answer is 0");
    assert_string_equal(got.logprobs_json, lp);
    assert_string_equal(got.finish_reason, "stop");
    assert_int_equal(got.prompt_tokens, 10);
    assert_int_equal(got.completion_tokens, 5);
    assert_true(got.latency_ms == 12.5);
    assert_null(got.error);
    assert_string_equal(gp.prompt_id, "q0");
    assert_int_equal(gp.workload, DRIFT_WL_MATH);
    assert_string_equal(gp.input, "What is 0 + 0?");
    assert_string_equal(gp.reference_json, "{\"answer\":\"0\"}");
    assert_string_equal(gp.hash, su->prompts[0].hash);
    drift_answer_clear(&got);
    drift_prompt_clear(&gp);
    assert_int_equal(drift_store_response_get(st, set.rows[2].response_id, &got, NULL, &err), DRIFT_OK);
    assert_null(got.text);
    assert_string_equal(got.error, "HTTP 500: boom");
    assert_int_equal(got.attempts, 3);
    assert_int_equal(got.http_status, 500);
    assert_int_equal(got.prompt_tokens, -1);
    drift_answer_clear(&got);
    assert_int_equal(drift_store_response_get(st, 999999, &got, NULL, &err), DRIFT_ERR_NOT_FOUND);

    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(set.rows[i].prompt_rowid, ids[i]);
        assert_int_equal(set.rows[i].label, DRIFT_LABEL_NONE);
        assert_null(set.rows[i].evaluator);
        assert_true(isnan(set.rows[i].value));
        assert_string_equal(set.rows[i].suite, "s");
    }
    assert_string_equal(set.rows[1].prompt_id, "q1");
    assert_int_equal(set.rows[1].workload, DRIFT_WL_LONG);
    assert_int_equal(set.rows[2].is_error, 1);
    assert_int_equal(set.rows[0].is_error, 0);
    int64_t rid[4];
    for (int i = 0; i < 4; i++) rid[i] = set.rows[i].response_id;
    drift_scored_set_clear(&set);

    /* unscored: answers only, never the error; by no evaluator (NULL) and
     * by one that scored nothing */
    drift_answer *ur;
    drift_prompt *up;
    size_t un;
    for (int by = 0; by < 2; by++) {
        assert_int_equal(said(drift_store_unscored(st, run, by ? "nobody" : NULL, 0, &ur, &up, &un, &err), &err),
                         DRIFT_OK);
        assert_int_equal(un, 3);
        assert_string_equal(up[2].prompt_id, "q3");
        assert_string_equal(ur[2].text, "six");
        for (size_t i = 0; i < un; i++) {
            drift_answer_clear(&ur[i]);
            drift_prompt_clear(&up[i]);
        }
        free(ur);
        free(up);
    }
    assert_int_equal(drift_store_unscored(st, run, "math", 2, &ur, &up, &un, &err), DRIFT_OK);
    assert_int_equal(un, 2);
    for (size_t i = 0; i < un; i++) {
        drift_answer_clear(&ur[i]);
        drift_prompt_clear(&up[i]);
    }
    free(ur);
    free(up);

    /* scores: the most recently written one is "the" score */
    drift_score sc[3] = {
        {rid[0], "math", DRIFT_LABEL_PASS, 1.0, "{\"extracted\":\"0\"}"},
        {rid[1], "longctx-f1", DRIFT_LABEL_FAIL, 0.25, NULL},
        {rid[3], "math", DRIFT_LABEL_FAIL, NAN, NULL},
    };
    assert_int_equal(drift_store_put_scores(st, sc, 3, &err), DRIFT_OK);
    drift_score later = {rid[0], "other", DRIFT_LABEL_FAIL, 0.5, NULL};
    assert_int_equal(drift_store_put_scores(st, &later, 1, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    assert_int_equal(set.rows[0].label, DRIFT_LABEL_FAIL);
    assert_string_equal(set.rows[0].evaluator, "other");
    assert_true(set.rows[1].value == 0.25);
    assert_string_equal(set.rows[1].evaluator, "longctx-f1");
    assert_int_equal(set.rows[2].label, DRIFT_LABEL_NONE);
    assert_true(isnan(set.rows[3].value));
    drift_scored_set_clear(&set);
    /* re-scoring with the first evaluator makes it the latest again */
    assert_int_equal(drift_store_put_scores(st, &sc[0], 1, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    assert_int_equal(set.rows[0].label, DRIFT_LABEL_PASS);
    assert_string_equal(set.rows[0].evaluator, "math");
    drift_scored_set_clear(&set);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM scores"), 4);
    assert_int_equal(drift_store_unscored(st, run, "math", 0, &ur, &up, &un, &err), DRIFT_OK);
    assert_int_equal(un, 1); /* q1 has only longctx-f1 */
    assert_string_equal(up[0].prompt_id, "q1");
    drift_answer_clear(&ur[0]);
    drift_prompt_clear(&up[0]);
    free(ur);
    free(up);

    /* embeddings */
    float v[3] = {0.5f, -1.25f, 3.0f}, *gv;
    int dim;
    assert_int_equal(drift_store_put_embedding(st, rid[0], "mpnet", v, 3, &err), DRIFT_OK);
    assert_int_equal(drift_store_get_embedding(st, rid[0], "mpnet", &gv, &dim, &err), DRIFT_OK);
    assert_int_equal(dim, 3);
    assert_memory_equal(gv, v, sizeof v);
    free(gv);
    assert_int_equal(drift_store_get_embedding(st, rid[1], "mpnet", &gv, &dim, &err), DRIFT_ERR_NOT_FOUND);

    /* runs */
    assert_int_equal(drift_store_run_finish(st, run, &err), DRIFT_OK);
    drift_run_info back;
    assert_int_equal(drift_store_run_get(st, "base", &back, &err), DRIFT_OK);
    assert_int_equal(back.id, run);
    assert_string_equal(back.target, "http://x/v1?model=m");
    assert_string_equal(back.templates_json, "{\"math\":\"math/completions/v1\"}");
    assert_non_null(back.finished_at);
    assert_non_null(back.tool_version);
    drift_run_info_clear(&back);
    ri.label = (char *)"second";
    int64_t run2;
    assert_int_equal(drift_store_run_begin(st, &ri, &run2, &resumed, &err), DRIFT_OK);
    assert_int_not_equal(run2, run);
    assert_int_equal(drift_store_run_get(st, "nope", &back, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "'nope'"));
    assert_non_null(strstr(err.msg, "base, second"));
    drift_run_info *list;
    size_t nl;
    assert_int_equal(drift_store_run_list(st, &list, &nl, &err), DRIFT_OK);
    assert_int_equal(nl, 2);
    assert_string_equal(list[0].label, "base");
    assert_string_equal(list[1].label, "second");
    drift_run_info_array_free(list, nl);

    /* the same prompt id with another text is refused, nothing written */
    free(su->prompts[1].hash);
    su->prompts[1].hash = util_strdup("0000000000000000");
    assert_int_equal(drift_store_put_prompts(st, su, ids2, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "q1"));
    free_suite(su);
    drift_store_close(st);
}

static void test_resume_semantics(void **state) {
    (void)state;
    drift_store *st = open_ok(store_loc("resume.db"));
    drift_error err = {0};
    drift_suite *su = make_suite("s", 3);
    int64_t ids[3];
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    drift_run_info ri = run_info("r", "http://a/v1?model=m", "{\"temperature\":0,\"seed\":42}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);

    /* replicates 2: nothing stored yet -> all 6 pending */
    int64_t *pp;
    int *pr;
    size_t np;
    assert_int_equal(drift_store_pending(st, run, ids, 3, 2, &pp, &pr, &np, &err), DRIFT_OK);
    assert_int_equal(np, 6);
    free(pp);
    free(pr);

    drift_answer r[3] = {
        {.prompt_rowid = ids[0], .replicate = 0, .text = "first", .prompt_tokens = -1, .completion_tokens = -1},
        {.prompt_rowid = ids[1], .replicate = 1, .error = "timeout", .prompt_tokens = -1, .completion_tokens = -1},
        {.prompt_rowid = ids[2], .replicate = 0, .text = "x", .prompt_tokens = -1, .completion_tokens = -1},
    };
    assert_int_equal(drift_store_put_responses(st, run, r, 3, &err), DRIFT_OK);
    assert_int_equal(drift_store_pending(st, run, ids, 3, 2, &pp, &pr, &np, &err), DRIFT_OK);
    /* done: (0,0), (2,0); error (1,1) still pending */
    assert_int_equal(np, 4);
    assert_int_equal(pp[0], ids[0]);
    assert_int_equal(pr[0], 1);
    assert_int_equal(pp[1], ids[1]);
    assert_int_equal(pr[1], 0);
    assert_int_equal(pp[2], ids[1]);
    assert_int_equal(pr[2], 1);
    assert_int_equal(pp[3], ids[2]);
    assert_int_equal(pr[3], 1);
    free(pp);
    free(pr);

    /* an answer is never overwritten, by an answer or by an error */
    drift_answer again[2] = {
        {.prompt_rowid = ids[0], .replicate = 0, .text = "second", .prompt_tokens = -1, .completion_tokens = -1},
        {.prompt_rowid = ids[2], .replicate = 0, .error = "HTTP 503", .prompt_tokens = -1, .completion_tokens = -1},
    };
    assert_int_equal(drift_store_put_responses(st, run, again, 2, &err), DRIFT_OK);
    /* an error is replaced by a later error, then by an answer; the row id stays */
    int64_t err_id = count_rows(st, "SELECT id FROM responses WHERE error='timeout'");
    drift_answer fix = {.prompt_rowid = ids[1], .replicate = 1, .error = "HTTP 429", .attempts = 5,
                          .prompt_tokens = -1, .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(st, run, &fix, 1, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT attempts FROM responses WHERE error='HTTP 429'"), 5);
    fix.error = NULL;
    fix.text = "recovered";
    fix.attempts = 1;
    assert_int_equal(drift_store_put_responses(st, run, &fix, 1, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), 3);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses WHERE error IS NOT NULL"), 0);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses WHERE text='first'"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses WHERE text='x'"), 1);
    assert_int_equal(count_rows(st, "SELECT id FROM responses WHERE text='recovered'"), err_id);

    /* resume with the same settings (key order and spacing do not matter) */
    drift_run_info same = run_info("r", "http://a/v1?model=m", "{ \"seed\": 42, \"temperature\": 0 }");
    int64_t run_again;
    assert_int_equal(drift_store_run_begin(st, &same, &run_again, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(run_again, run);

    /* another endpoint (host, port, path) is the same run */
    drift_run_info other = run_info("r", "http://b:8001/openai/v1?model=m", "{\"temperature\":0,\"seed\":42}");
    assert_int_equal(said(drift_store_run_begin(st, &other, &run_again, &resumed, &err), &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(run_again, run);
    /* mismatches name the field and both values: another model is another run */
    other = run_info("r", "http://a/v1?model=m2", "{\"temperature\":0,\"seed\":42}");
    assert_int_equal(drift_store_run_begin(st, &other, &run_again, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "target"));
    assert_non_null(strstr(err.msg, "http://b:8001/openai/v1?model=m"));
    assert_non_null(strstr(err.msg, "http://a/v1?model=m2"));
    other = run_info("r", "http://a/v1?model=m&api=chat", "{\"temperature\":0,\"seed\":42}");
    assert_int_equal(drift_store_run_begin(st, &other, &run_again, &resumed, &err), DRIFT_ERR_MISMATCH);
    /* the template of a workload both name must agree */
    other = run_info("r", "http://a/v1?model=m", "{\"temperature\":0,\"seed\":42}");
    other.templates_json = (char *)"{\"math\":\"math/completions/v2\"}";
    assert_int_equal(drift_store_run_begin(st, &other, &run_again, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "templates.math: stored \"math/completions/v1\", requested \"math/completions/v2\""));
    other = run_info("r", "http://a/v1?model=m", "{\"temperature\":0.7,\"seed\":42}");
    assert_int_equal(drift_store_run_begin(st, &other, &run_again, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "decoding.temperature: stored 0, requested 0.7"));
    other = run_info("r", "http://a/v1?model=m", "{\"temperature\":0,\"seed\":42}");
    other.config_json = (char *)"{\"model\":\"m\",\"hardware\":\"b200\"}";
    assert_int_equal(drift_store_run_begin(st, &other, &run_again, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "config.hardware: stored \"h100\", requested \"b200\""));
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), 1);
    free_suite(su);
    drift_store_close(st);
}

/* Runs whose responses interleave: scores of one run never leak into the
 * other, the latest score wins, and ids spread far apart (the sparse lookup
 * path) load the same as compact ones. */
static void test_load_scored_interleaved(void **state) {
    (void)state;
    drift_store *st = open_ok(store_loc("inter.db"));
    drift_error err = {0};
    drift_suite *su = make_suite("s", 3000);
    int64_t *ids = calloc(3000, sizeof *ids);
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    int64_t ra, rb;
    int resumed;
    drift_run_info ia = run_info("a", "t", "{}"), ib = run_info("b", "t", "{}");
    assert_int_equal(drift_store_run_begin(st, &ia, &ra, &resumed, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_begin(st, &ib, &rb, &resumed, &err), DRIFT_OK);
    /* a: prompts 0..9 alternating with b, then b alone for 2000 prompts, then a: 10 (far away) */
    for (int i = 0; i < 10; i++) {
        drift_answer x = {.prompt_rowid = ids[9 - i], .text = "a", .prompt_tokens = -1, .completion_tokens = -1};
        assert_int_equal(drift_store_put_responses(st, ra, &x, 1, &err), DRIFT_OK);
        x.prompt_rowid = ids[i];
        x.text = "b";
        assert_int_equal(drift_store_put_responses(st, rb, &x, 1, &err), DRIFT_OK);
    }
    drift_answer *many = calloc(2000, sizeof *many);
    for (int i = 0; i < 2000; i++)
        many[i] = (drift_answer){.prompt_rowid = ids[10 + i], .text = "b", .prompt_tokens = -1,
                                   .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(st, rb, many, 2000, &err), DRIFT_OK);
    drift_answer far = {.prompt_rowid = ids[2500], .text = "a", .prompt_tokens = -1, .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(st, ra, &far, 1, &err), DRIFT_OK);

    /* score: a PASS everywhere, b FAIL everywhere, then a rescored by a later evaluator on even prompts */
    for (int pass = 0; pass < 2; pass++) {
        int64_t run = pass ? rb : ra;
        drift_scored_set set;
        assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
        drift_score *sc = calloc(set.n, sizeof *sc);
        for (size_t i = 0; i < set.n; i++)
            sc[i] = (drift_score){set.rows[i].response_id, pass ? "eb" : "ea",
                                  pass ? DRIFT_LABEL_FAIL : DRIFT_LABEL_PASS, (double)i, NULL};
        assert_int_equal(drift_store_put_scores(st, sc, set.n, &err), DRIFT_OK);
        free(sc);
        drift_scored_set_clear(&set);
    }
    drift_scored_set a, b;
    assert_int_equal(drift_store_load_scored(st, ra, &a, &err), DRIFT_OK);
    drift_score *late = calloc(a.n, sizeof *late);
    size_t nl = 0;
    for (size_t i = 0; i < a.n; i += 2)
        late[nl++] = (drift_score){a.rows[i].response_id, "later", DRIFT_LABEL_ERROR, -1.0, NULL};
    assert_int_equal(drift_store_put_scores(st, late, nl, &err), DRIFT_OK);
    free(late);
    drift_scored_set_clear(&a);

    assert_int_equal(drift_store_load_scored(st, ra, &a, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored(st, rb, &b, &err), DRIFT_OK);
    assert_int_equal(a.n, 11);
    assert_int_equal(b.n, 2010);
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.rows[i].prompt_rowid, i < 10 ? ids[i] : ids[2500]); /* ordered by prompt */
        if (i % 2 == 0) {
            assert_int_equal(a.rows[i].label, DRIFT_LABEL_ERROR);
            assert_string_equal(a.rows[i].evaluator, "later");
            assert_true(a.rows[i].value == -1.0);
        } else {
            assert_int_equal(a.rows[i].label, DRIFT_LABEL_PASS);
            assert_string_equal(a.rows[i].evaluator, "ea");
            assert_true(a.rows[i].value == (double)i);
        }
    }
    for (size_t i = 0; i < b.n; i++) {
        assert_int_equal(b.rows[i].prompt_rowid, ids[i]);
        assert_int_equal(b.rows[i].label, DRIFT_LABEL_FAIL);
        assert_string_equal(b.rows[i].evaluator, "eb");
        assert_true(b.rows[i].value == (double)i);
        char want[16];
        snprintf(want, sizeof want, "q%zu", i);
        assert_string_equal(b.rows[i].prompt_id, want);
    }
    drift_scored_set_clear(&a);
    drift_scored_set_clear(&b);
    /* an unknown run is simply empty */
    assert_int_equal(drift_store_load_scored(st, 999, &a, &err), DRIFT_OK);
    assert_int_equal(a.n, 0);
    drift_scored_set_clear(&a);
    free(many);
    free(ids);
    free_suite(su);
    drift_store_close(st);
}

/* ---- run locks: one writer per label ---- */

/* Puts a lock row for label as if process pid on host had taken it. */
static void plant_lock(drift_store *st, const char *label, long long pid, const char *host, long long start) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO run_locks(label,pid,host,proc_start,token,started_at) "
             "VALUES('%s',%lld,'%s',%lld,'planted','2026-01-01T00:00:00Z') "
             "ON CONFLICT(label) DO UPDATE SET pid=excluded.pid, host=excluded.host, "
             "proc_start=excluded.proc_start, token=excluded.token, started_at=excluded.started_at",
             label, pid, host, start);
    exec_ok(st, sql);
}

static void test_run_lock_two_handles(void **state) {
    (void)state;
    const char *path = store_loc("lock.db");
    drift_store *a = open_ok(path), *b = open_ok(path);
    drift_error err = {0};
    drift_run_info ri = run_info("L", "http://x/v1?model=m", "{\"temperature\":0}");
    drift_run_info other = run_info("M", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t ra = 0, rb = 0, rm = 0;
    int resumed = 0;
    assert_int_equal(drift_store_run_begin(a, &ri, &ra, &resumed, &err), DRIFT_OK);
    assert_int_equal(count_rows(a, "SELECT count(*) FROM run_locks WHERE label='L'"), 1);
    assert_int_equal(count_rows(a, "SELECT pid FROM run_locks WHERE label='L'"), (int64_t)getpid());

    /* a second writer of L (another handle: as another process would be) is refused */
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_run_begin(b, &ri, &rb, &resumed, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "run 'L' is being written"));
    char pid_s[32];
    snprintf(pid_s, sizeof pid_s, "pid %lld", (long long)getpid());
    assert_non_null(strstr(err.msg, pid_s));
    assert_non_null(strstr(err.msg, path));
    /* the refused begin changed nothing: still one run, one lock, a's */
    assert_int_equal(count_rows(a, "SELECT count(*) FROM runs"), 1);
    assert_int_equal(count_rows(a, "SELECT count(*) FROM run_locks"), 1);

    /* another label is free; the holder may begin L again (resume in-process) */
    assert_int_equal(drift_store_run_begin(b, &other, &rm, &resumed, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_begin(a, &ri, &ra, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 1);

    /* unlock by the non-holder does nothing; by the holder frees L */
    assert_int_equal(drift_store_run_unlock(b, "L", &err), DRIFT_OK);
    assert_int_equal(drift_store_run_begin(b, &ri, &rb, &resumed, &err), DRIFT_ERR_STORE);
    assert_int_equal(drift_store_run_unlock(a, "L", &err), DRIFT_OK);
    assert_int_equal(drift_store_run_begin(b, &ri, &rb, &resumed, &err), DRIFT_OK);
    assert_int_equal(rb, ra);

    /* finish releases: a can take L back */
    assert_int_equal(drift_store_run_begin(a, &ri, &ra, &resumed, &err), DRIFT_ERR_STORE);
    assert_int_equal(drift_store_run_finish(b, rb, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_begin(a, &ri, &ra, &resumed, &err), DRIFT_OK);

    /* close releases every lock of the handle (a holds L, b holds M) */
    drift_store_close(b);
    assert_int_equal(count_rows(a, "SELECT count(*) FROM run_locks"), 1);
    drift_store_close(a);
    a = open_ok(path);
    assert_int_equal(count_rows(a, "SELECT count(*) FROM run_locks"), 0);
    drift_store_close(a);
}

static void test_run_lock_stale_and_foreign(void **state) {
    (void)state;
    const char *path = tpath("stale.db");
    drift_store *st = open_ok(path);
    drift_error err = {0};
    drift_run_info ri = run_info("S", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run = 0;
    int resumed = 0;
    char host[256] = "";
    assert_int_equal(gethostname(host, sizeof host), 0);

    /* a dead owner on this host (its pid reaped) is taken over */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    plant_lock(st, "S", child, host, 0);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT pid FROM run_locks WHERE label='S'"), (int64_t)getpid());
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks WHERE token='planted'"), 0);

    /* a zombie owner (exited, not reaped yet) is gone too */
    child = fork();
    assert_true(child >= 0);
    if (child == 0) _exit(0);
    for (int i = 0; i < 200; i++) { /* wait until it has exited, without reaping it */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)child, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == child) break;
        usleep(5000);
    }
    plant_lock(st, "S", child, host, 0);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    assert_int_equal(waitpid(child, NULL, 0), child);

    /* a live pid that is another process than the owner (pid reused: another
     * start time than the one recorded) is gone; a live pid whose start time
     * matches, or was not recorded (0), is alive. Our own pid stands in for
     * another process: the planted token is not this handle's. */
    plant_lock(st, "S", (long long)getpid(), host, 1);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    plant_lock(st, "S", (long long)getpid(), host, 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "run 'S' is being written"));
    assert_non_null(strstr(err.msg, "on this host"));

    /* another host's lock is never judged: refused, with how to remove it */
    plant_lock(st, "S", 1, "elsewhere.example", 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "host elsewhere.example"));
    assert_non_null(strstr(err.msg, "DELETE FROM run_locks WHERE label='S'"));
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks WHERE token='planted'"), 1);
    exec_ok(st, "DELETE FROM run_locks WHERE label='S'");
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    drift_store_close(st);
}

/* ---- read-only handles ---- */

typedef struct file_state {
    int exists;
    off_t size;
    struct timespec mtime;
    char *bytes;
    size_t len;
} file_state;

static file_state file_snapshot(const char *path) {
    file_state f = {0};
    struct stat sb;
    if (stat(path, &sb) != 0) return f;
    f.exists = 1;
    f.size = sb.st_size;
    f.mtime = sb.st_mtim;
    f.bytes = slurp(path, &f.len);
    return f;
}

static void assert_same_file(const file_state *a, const file_state *b) {
    assert_int_equal(a->exists, b->exists);
    assert_int_equal(a->size, b->size);
    assert_int_equal(a->mtime.tv_sec, b->mtime.tv_sec);
    assert_int_equal(a->mtime.tv_nsec, b->mtime.tv_nsec);
    assert_int_equal(a->len, b->len);
    assert_memory_equal(a->bytes, b->bytes, a->len);
}

static int exists_with(const char *path, const char *suffix) {
    char p[600];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return access(p, F_OK) == 0;
}

/* A store with one run "R" of 4 prompts (q2 an error), closed. */
static void make_closed_store(const char *path) {
    drift_store *st = open_ok(path);
    drift_error err = {0};
    drift_suite *su = make_suite("s", 4);
    int64_t ids[4];
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    drift_run_info ri = run_info("R", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    drift_answer r[4];
    for (int i = 0; i < 4; i++)
        r[i] = (drift_answer){.prompt_rowid = ids[i], .text = i == 2 ? NULL : "ok",
                                .error = i == 2 ? "HTTP 500" : NULL, .prompt_tokens = -1, .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(st, run, r, 4, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_finish(st, run, &err), DRIFT_OK);
    free_suite(su);
    drift_store_close(st);
}

static void test_readonly_missing_and_empty(void **state) {
    (void)state;
    drift_store *st = NULL;
    drift_error err = {0};
    const char *missing = tpath("missing.db");
    assert_int_equal(drift_store_open_readonly(missing, &st, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(st);
    assert_non_null(strstr(err.msg, "missing.db"));
    assert_non_null(strstr(err.msg, "no such store"));
    assert_int_not_equal(access(missing, F_OK), 0); /* never created */
    assert_false(exists_with(missing, "-wal") || exists_with(missing, "-shm") || exists_with(missing, "-journal"));
    const char *in_missing_dir = tpath("nodir/x.db");
    assert_int_equal(drift_store_open_readonly(in_missing_dir, &st, &err), DRIFT_ERR_NOT_FOUND);

    const char *empty = tpath("empty-ro.db");
    FILE *f = fopen(empty, "w");
    fclose(f);
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open_readonly(empty, &st, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "empty-ro.db"));
    struct stat sb;
    assert_int_equal(stat(empty, &sb), 0);
    assert_int_equal(sb.st_size, 0);

    /* foreign files are refused as by the writable open, left as they are */
    const char *txt = tpath("notes-ro.txt");
    f = fopen(txt, "w");
    for (int i = 0; i < 100; i++) fprintf(f, "not a database, line %d\n", i);
    fclose(f);
    file_state before = file_snapshot(txt);
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open_readonly(txt, &st, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "not a DriftBench store"));
    file_state after = file_snapshot(txt);
    assert_same_file(&before, &after);
    free(before.bytes);
    free(after.bytes);

    /* a newer schema is refused */
    const char *future = tpath("future-ro.db");
    st = open_ok(future);
    exec_ok(st, "PRAGMA user_version=9");
    drift_store_close(st);
    st = NULL;
    assert_int_equal(drift_store_open_readonly(future, &st, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "schema version 9 is newer"));
}

static void test_readonly_reads_and_writes_nothing(void **state) {
    (void)state;
    const char *path = tpath("ro.db");
    make_closed_store(path);
    /* closed cleanly: no -wal, no -shm */
    assert_false(exists_with(path, "-wal") || exists_with(path, "-shm"));
    file_state before = file_snapshot(path);
    struct timespec pause = {0, 20 * 1000 * 1000}; /* so a write would show in mtime */
    nanosleep(&pause, NULL);

    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "R", &info, &err), DRIFT_OK);
    assert_non_null(info.finished_at);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, info.id, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, 4);
    assert_int_equal(set.rows[2].is_error, 1);
    drift_scored_set_clear(&set);
    /* no file appeared next to it while it is open */
    assert_false(exists_with(path, "-wal") || exists_with(path, "-shm") || exists_with(path, "-journal"));

    /* every write fails and changes nothing */
    drift_answer r = {.prompt_rowid = 1, .text = "x", .prompt_tokens = -1, .completion_tokens = -1};
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_put_responses(st, info.id, &r, 1, &err), DRIFT_ERR_STORE);
    drift_run_info ri = run_info("new", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_ERR_STORE);
    drift_score sc = {.response_id = 1, .evaluator = "math", .label = 1, .value = 1};
    assert_int_equal(drift_store_put_scores(st, &sc, 1, &err), DRIFT_ERR_STORE);
    drift_run_info_clear(&info);
    drift_store_close(st);

    file_state after = file_snapshot(path);
    assert_same_file(&before, &after);
    assert_false(exists_with(path, "-wal") || exists_with(path, "-shm") || exists_with(path, "-journal"));
    free(before.bytes);
    free(after.bytes);
}

static void test_readonly_odd_path(void **state) {
    (void)state;
    /* the path travels in a file: URI: characters URIs give a meaning to
     * (space, %, ?, #) must still name the same file */
    const char *path = tpath("odd name 100%3F?#x.db");
    make_closed_store(path);
    drift_store *st = NULL;
    drift_error err = {0};
    drift_status rc = drift_store_open_readonly(path, &st, &err);
    if (rc) fprintf(stderr, "open_readonly: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "R", &info, &err), DRIFT_OK);
    drift_run_info_clear(&info);
    drift_store_close(st);
    /* a relative path, and one with a doubled leading slash */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);
    rc = drift_store_open_readonly("odd name 100%3F?#x.db", &st, &err);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rc, DRIFT_OK);
    drift_store_close(st);
    char slashed[600];
    snprintf(slashed, sizeof slashed, "/%s", path);
    assert_int_equal(drift_store_open_readonly(slashed, &st, &err), DRIFT_OK);
    drift_store_close(st);
}

static void test_readonly_beside_a_writer(void **state) {
    (void)state;
    const char *path = store_loc("live.db");
    make_closed_store(path);
    /* a writer is connected: the -wal exists and holds commits not yet in the
     * main file; the reader must see them (the WAL path, not immutable) */
    drift_store *w = open_ok(path);
    drift_error err = {0};
    drift_suite *su = make_suite("s", 4);
    int64_t ids[4];
    assert_int_equal(drift_store_put_prompts(w, su, ids, &err), DRIFT_OK);
    drift_run_info ri = run_info("W", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(w, &ri, &run, &resumed, &err), DRIFT_OK);
    drift_answer r = {.prompt_rowid = ids[0], .text = "live", .prompt_tokens = -1, .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(w, run, &r, 1, &err), DRIFT_OK);
    if (!on_pg) assert_true(exists_with(path, "-wal"));

    drift_store *ro = NULL;
    assert_int_equal(drift_store_open_readonly(path, &ro, &err), DRIFT_OK);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(ro, "W", &info, &err), DRIFT_OK);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(ro, info.id, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, 1);
    drift_scored_set_clear(&set);
    /* a commit made after the reader opened is seen by its next read */
    r.prompt_rowid = ids[1];
    assert_int_equal(drift_store_put_responses(w, run, &r, 1, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored(ro, info.id, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, 2);
    drift_scored_set_clear(&set);
    drift_run_info_clear(&info);
    drift_store_close(ro);
    drift_store_close(w);
    free_suite(su);
}

static void test_readonly_old_schema_not_migrated(void **state) {
    (void)state;
    const char *path = tpath("v1.db");
    make_closed_store(path);
    drift_store *st = open_ok(path);
    exec_ok(st, "DROP TABLE run_endpoints; DROP TABLE run_locks; PRAGMA user_version=1"); /* what a v1 tool wrote */
    drift_store_close(st);
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    assert_int_equal(schema_version(st), 1);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "R", &info, &err), DRIFT_OK);
    drift_run_info_clear(&info);
    drift_store_close(st);
    st = open_ok(path); /* a writer migrates it */
    assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0);
    drift_store_close(st);
}

/* ---- child processes: every test that forks registers its children, and
 * its teardown kills and reaps those still there (an assertion failing in
 * the parent leaves none behind). Children never assert: they report by
 * exit code (and stderr), and an alarm ends a child that hangs. ---- */

#define MAX_KIDS 16

static pid_t kids[MAX_KIDS];
static int nkids;
static int kid_fds[8] = {-1, -1, -1, -1, -1, -1, -1, -1}; /* the parent's pipe ends */

static pid_t fork_kid(void) {
    assert_true(nkids < MAX_KIDS);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        return 0;
    }
    kids[nkids++] = pid;
    return pid;
}

/* Reaps kid pid; its wait status. */
static int wait_kid(pid_t pid) {
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    for (int i = 0; i < nkids; i++)
        if (kids[i] == pid) kids[i] = kids[--nkids];
    return status;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static int teardown_kids(void **state) {
    (void)state;
    for (int i = 0; i < nkids; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
    nkids = 0;
    for (int i = 0; i < 8; i++) close_fd(&kid_fds[i]);
    return 0;
}

/* Blocks until the other end of fd's pipe is closed (or a byte comes). */
static void wait_pipe(int fd) {
    char c;
    while (read(fd, &c, 1) < 0 && errno == EINTR) {
    }
}

/* ---- crash safety: a child writes batches, the parent SIGKILLs it ---- */

#define KILL_PROMPTS 4000
#define KILL_BATCH 100

/* Writes batch after batch until killed: batch b holds prompts
 * (b % 40) * 100 .. +99 of replicate b / 40, so the k-th response written is
 * (prompt k % 4000, replicate k / 4000). */
static void child_writer(const char *path, const int64_t *ids) {
    drift_store *st = NULL;
    drift_error err = {0};
    if (drift_store_open(path, &st, &err)) _exit(3);
    drift_run_info ri = run_info("crash", "http://a/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    if (drift_store_run_begin(st, &ri, &run, &resumed, &err)) _exit(4);
    static drift_answer batch[KILL_BATCH];
    static char texts[KILL_BATCH][64];
    for (int b = 0; b < 1000000; b++) {
        for (int i = 0; i < KILL_BATCH; i++) {
            int k = b * KILL_BATCH + i;
            snprintf(texts[i], sizeof texts[i], "answer %d", k);
            batch[i] = (drift_answer){.prompt_rowid = ids[k % KILL_PROMPTS], .replicate = k / KILL_PROMPTS,
                                        .text = texts[i], .prompt_tokens = -1, .completion_tokens = -1,
                                        .logprobs_json = (char *)"[-0.5,-0.25]"};
        }
        /* no pause: the child is almost always inside a transaction, so
         * the kill lands mid-batch */
        if (drift_store_put_responses(st, run, batch, KILL_BATCH, &err)) _exit(5);
    }
    _exit(6);
}

static void test_kill_safety(void **state) {
    (void)state;
    const char *path = store_loc("crash.db");
    drift_store *st = open_ok(path);
    drift_error err = {0};
    drift_suite *su = make_suite("crash", KILL_PROMPTS);
    int64_t *ids = calloc(KILL_PROMPTS, sizeof *ids);
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    assert_int_equal(ids[KILL_PROMPTS - 1] - ids[0], KILL_PROMPTS - 1); /* the check below counts on it */

    pid_t pid = fork_kid();
    if (pid == 0) child_writer(path, ids);
    /* wait until a few batches are committed, then kill mid-way */
    int64_t seen = 0;
    for (int i = 0; i < 2000 && seen < 5 * KILL_BATCH; i++) {
        usleep(2000);
        seen = count_rows(st, "SELECT count(*) FROM responses");
    }
    usleep(3000);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = wait_kid(pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    drift_store_close(st);

    st = open_ok(path);
    if (!on_pg) {
        char ok[64];
        query_text(st, "PRAGMA integrity_check", ok, sizeof ok);
        assert_string_equal(ok, "ok");
    }
    int64_t n = count_rows(st, "SELECT count(*) FROM responses");
    fprintf(stderr, "kill test: %lld responses committed before SIGKILL\n", (long long)n);
    assert_true(n >= 5 * KILL_BATCH);
    assert_int_equal(n % KILL_BATCH, 0); /* no partial batch */
    /* the committed rows are exactly the first n the child wrote, each once */
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM responses WHERE replicate * %d + (prompt_rowid - %lld) < %lld "
             "AND %s = 'answer ' || (replicate * %d + prompt_rowid - %lld)",
             KILL_PROMPTS, (long long)ids[0], (long long)n, on_pg ? "convert_from(text, 'UTF8')" : "text",
             KILL_PROMPTS, (long long)ids[0]);
    assert_int_equal(count_rows(st, sql), n);

    /* resume: the same label resumes, pending gives exactly the rest */
    int reps = (int)((n - 1) / KILL_PROMPTS) + 1;
    drift_run_info ri = run_info("crash", "http://a/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    /* PostgreSQL: the killed child's lock is free once the server has
     * ended its session */
    assert_true(other_sessions_gone(st));
    drift_status rc = drift_store_run_begin(st, &ri, &run, &resumed, &err);
    if (rc) fprintf(stderr, "run_begin after the kill: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(resumed, 1);
    int64_t *pp;
    int *pr;
    size_t np;
    assert_int_equal(drift_store_pending(st, run, ids, KILL_PROMPTS, reps, &pp, &pr, &np, &err), DRIFT_OK);
    assert_int_equal((int64_t)np, (int64_t)reps * KILL_PROMPTS - n);
    drift_answer *rest = calloc(np ? np : 1, sizeof *rest);
    for (size_t i = 0; i < np; i++)
        rest[i] = (drift_answer){.prompt_rowid = pp[i], .replicate = pr[i], .text = "late",
                                   .prompt_tokens = -1, .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(st, run, rest, np, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), (int64_t)reps * KILL_PROMPTS);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM (SELECT DISTINCT prompt_rowid, replicate FROM responses) d"),
                     (int64_t)reps * KILL_PROMPTS);
    free(rest);
    free(pp);
    free(pr);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, (size_t)reps * KILL_PROMPTS);
    drift_scored_set_clear(&set);
    free(ids);
    free_suite(su);
    drift_store_close(st);
}

/* ---- several writers at once ----
 * CW_WRITERS processes open one store at the same moment, all put the same
 * suite's prompts, and each writes its own run in small batches (putting
 * the prompts again now and then); meanwhile two more processes race
 * run_begin on one label. The store exists before they start (creating one
 * from several processes at once: test_concurrent_create). */

#define CW_WRITERS 5
#define CW_PROMPTS 120
#define CW_REPS 2
#define CW_BATCH 7

static void cw_writer(const char *path, int k, int go_fd) {
    wait_pipe(go_fd);
    drift_store *st = NULL;
    drift_error err = {0};
    if (drift_store_open(path, &st, &err)) {
        fprintf(stderr, "writer %d: open: %s\n", k, err.msg);
        _exit(3);
    }
    drift_suite *su = make_suite("shared", CW_PROMPTS);
    static int64_t ids[CW_PROMPTS], again[CW_PROMPTS];
    if (drift_store_put_prompts(st, su, ids, &err)) {
        fprintf(stderr, "writer %d: put_prompts: %s\n", k, err.msg);
        _exit(4);
    }
    char label[16];
    snprintf(label, sizeof label, "w%d", k);
    drift_run_info ri = run_info(label, "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed = -1;
    if (drift_store_run_begin(st, &ri, &run, &resumed, &err) || resumed != 0) {
        fprintf(stderr, "writer %d: run_begin: %s (resumed %d)\n", k, err.msg, resumed);
        _exit(5);
    }
    static drift_answer batch[CW_BATCH];
    static char texts[CW_BATCH][48];
    int total = CW_PROMPTS * CW_REPS;
    for (int start = 0, nb = 0; start < total; start += CW_BATCH, nb++) {
        size_t n = 0;
        for (int j = start; j < total && j < start + CW_BATCH; j++, n++) {
            int p = j % CW_PROMPTS, r = j / CW_PROMPTS;
            snprintf(texts[n], sizeof texts[n], "w%d q%d r%d", k, p, r);
            batch[n] = (drift_answer){.prompt_rowid = ids[p], .replicate = r, .text = texts[n],
                                      .prompt_tokens = -1, .completion_tokens = -1};
        }
        if (drift_store_put_responses(st, run, batch, n, &err)) {
            fprintf(stderr, "writer %d: put_responses: %s\n", k, err.msg);
            _exit(6);
        }
        if (nb % 8 == 3) {
            if (drift_store_put_prompts(st, su, again, &err)) {
                fprintf(stderr, "writer %d: put_prompts again: %s\n", k, err.msg);
                _exit(7);
            }
            if (memcmp(ids, again, sizeof ids)) _exit(8);
        }
    }
    int64_t *pp = NULL;
    int *pr = NULL;
    size_t np = 1;
    if (drift_store_pending(st, run, ids, CW_PROMPTS, CW_REPS, &pp, &pr, &np, &err) || np != 0) {
        fprintf(stderr, "writer %d: pending: %zu left (%s)\n", k, np, err.msg);
        _exit(9);
    }
    free(pp);
    free(pr);
    if (drift_store_run_finish(st, run, &err)) {
        fprintf(stderr, "writer %d: run_finish: %s\n", k, err.msg);
        _exit(10);
    }
    drift_store_close(st);
    free_suite(su);
    _exit(0);
}

/* Races run_begin of "race": writes 'W' (won), 'L' (refused as it should
 * be: DRIFT_ERR_STORE naming the label) or 'X' to res_fd, then holds its
 * handle until rel_fd is closed. */
static void cw_racer(const char *path, int go_fd, int res_fd, int rel_fd) {
    wait_pipe(go_fd);
    drift_store *st = NULL;
    drift_error err = {0};
    char r = 'X';
    if (drift_store_open(path, &st, &err)) {
        fprintf(stderr, "racer: open: %s\n", err.msg);
    } else {
        drift_run_info ri = run_info("race", "http://x/v1?model=m", "{\"temperature\":0}");
        int64_t run;
        int resumed;
        drift_status rc = drift_store_run_begin(st, &ri, &run, &resumed, &err);
        if (rc == DRIFT_OK) r = 'W';
        else if (rc == DRIFT_ERR_STORE && strstr(err.msg, "run 'race' is being")) r = 'L';
        else fprintf(stderr, "racer: run_begin: %d %s\n", (int)rc, err.msg);
    }
    if (write(res_fd, &r, 1) != 1) _exit(3);
    wait_pipe(rel_fd);
    drift_store_close(st);
    _exit(0);
}

static void test_concurrent_writers(void **state) {
    (void)state;
    const char *path = store_loc("conc.db");
    drift_store *st = open_ok(path);
    drift_store_close(st);
    int go[2], res[2], rel[2];
    assert_int_equal(pipe(go), 0);
    kid_fds[0] = go[0], kid_fds[1] = go[1];
    assert_int_equal(pipe(res), 0);
    kid_fds[2] = res[0], kid_fds[3] = res[1];
    assert_int_equal(pipe(rel), 0);
    kid_fds[4] = rel[0], kid_fds[5] = rel[1];
    for (int k = 0; k < CW_WRITERS + 2; k++) {
        if (fork_kid() == 0) {
            close(go[1]);
            close(res[0]);
            close(rel[1]);
            if (k < CW_WRITERS) {
                close(res[1]);
                close(rel[0]);
                cw_writer(path, k, go[0]);
            }
            cw_racer(path, go[0], res[1], rel[0]);
        }
    }
    close_fd(&kid_fds[0]);
    close_fd(&kid_fds[3]);
    close_fd(&kid_fds[4]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    close_fd(&kid_fds[1]); /* go */

    /* exactly one racer wins; the other is refused while the winner holds it */
    char got[2] = {0, 0};
    size_t n = 0;
    while (n < 2) {
        ssize_t r = read(res[0], got + n, 2 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    assert_int_equal(n, 2);
    assert_true((got[0] == 'W' && got[1] == 'L') || (got[0] == 'L' && got[1] == 'W'));
    close_fd(&kid_fds[5]); /* release the racers */
    close_fd(&kid_fds[2]);
    while (nkids > 0) {
        pid_t pid = kids[0];
        int status = wait_kid(pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "child %d ended with status 0x%x\n", (int)pid, status);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "concurrent writers: %d writers x %d responses in %.2f s\n", CW_WRITERS, CW_PROMPTS * CW_REPS,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);

    st = open_ok(path);
    drift_error err = {0};
    assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM prompts"), CW_PROMPTS);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM (SELECT DISTINCT suite, prompt_id FROM prompts) d"),
                     CW_PROMPTS);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), CW_WRITERS + 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), CW_WRITERS * CW_PROMPTS * CW_REPS);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0); /* all finished or closed */
    for (int k = 0; k < CW_WRITERS; k++) {
        char label[16];
        snprintf(label, sizeof label, "w%d", k);
        drift_run_info info;
        assert_int_equal(drift_store_run_get(st, label, &info, &err), DRIFT_OK);
        assert_non_null(info.finished_at);
        drift_answer *ur;
        drift_prompt *up;
        size_t un;
        assert_int_equal(said(drift_store_unscored(st, info.id, "nobody", 0, &ur, &up, &un, &err), &err), DRIFT_OK);
        assert_int_equal(un, CW_PROMPTS * CW_REPS);
        static char seen[CW_PROMPTS][CW_REPS];
        memset(seen, 0, sizeof seen);
        for (size_t i = 0; i < un; i++) {
            int p = atoi(up[i].prompt_id + 1), r = ur[i].replicate;
            assert_true(p >= 0 && p < CW_PROMPTS && r >= 0 && r < CW_REPS);
            assert_int_equal(seen[p][r], 0); /* each (prompt, replicate) once */
            seen[p][r] = 1;
            char want[48];
            snprintf(want, sizeof want, "w%d q%d r%d", k, p, r);
            assert_string_equal(ur[i].text, want);
            drift_answer_clear(&ur[i]);
            drift_prompt_clear(&up[i]);
        }
        free(ur);
        free(up);
        drift_run_info_clear(&info);
    }
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "race", &info, &err), DRIFT_OK);
    drift_run_info_clear(&info);
    drift_store_close(st);
}

/* ---- a new store opened by several processes at once ----
 * Each opener must find the store either absent (and make it, once) or
 * whole; none may see it half-made. */

#define CC_OPENERS 8

static void test_concurrent_create(void **state) {
    (void)state;
    int rounds = on_pg ? 3 : 10;
    for (int round = 0; round < rounds; round++) {
        char name[32];
        snprintf(name, sizeof name, "create%d.db", round);
        const char *path = store_loc(name);
        int go[2];
        assert_int_equal(pipe(go), 0);
        kid_fds[0] = go[0], kid_fds[1] = go[1];
        for (int k = 0; k < CC_OPENERS; k++) {
            if (fork_kid() == 0) {
                close(go[1]);
                wait_pipe(go[0]);
                drift_store *st = NULL;
                drift_error err = {0};
                char label[16];
                snprintf(label, sizeof label, "o%d", k);
                drift_run_info ri = run_info(label, "http://x/v1?model=m", "{\"temperature\":0}");
                int64_t run;
                int resumed;
                if (drift_store_open(path, &st, &err) || drift_store_run_begin(st, &ri, &run, &resumed, &err) ||
                    drift_store_run_finish(st, run, &err)) {
                    fprintf(stderr, "opener %d: %s\n", k, err.msg);
                    _exit(3);
                }
                drift_store_close(st);
                _exit(0);
            }
        }
        close_fd(&kid_fds[0]);
        close_fd(&kid_fds[1]); /* go */
        int failed = 0;
        while (nkids > 0) {
            int status = wait_kid(kids[0]);
            failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        }
        if (failed) fprintf(stderr, "round %d: %d of %d openers failed\n", round, failed, CC_OPENERS);
        assert_int_equal(failed, 0);
        drift_store *st = open_ok(path);
        assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
        assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), CC_OPENERS);
        drift_store_close(st);
    }
}

/* ---- PostgreSQL counterparts of the SQLite-file tests ---- */

/* Every row of the store's tables and its sequences' positions, as one md5
 * (read through libpq, outside the store), into out. */
static void pg_fingerprint(const char *url, char *out, size_t cap) {
    assert_int_equal(pg_test_text(url,
                                  "SELECT md5(string_agg(t, '|' ORDER BY t)) FROM ("
                                  "SELECT 'p' || x::text AS t FROM prompts x UNION ALL "
                                  "SELECT 'r' || x::text FROM runs x UNION ALL "
                                  "SELECT 's' || x::text FROM responses x UNION ALL "
                                  "SELECT 'c' || x::text FROM scores x UNION ALL "
                                  "SELECT 'e' || x::text FROM embeddings x UNION ALL "
                                  "SELECT 'l' || x::text FROM run_locks x UNION ALL "
                                  "SELECT 'm' || x::text FROM driftbench_meta x UNION ALL "
                                  "SELECT 'q1' || last_value || is_called FROM prompts_id_seq UNION ALL "
                                  "SELECT 'q2' || last_value || is_called FROM runs_id_seq UNION ALL "
                                  "SELECT 'q3' || last_value || is_called FROM responses_id_seq UNION ALL "
                                  "SELECT 'q4' || last_value || is_called FROM scores_id_seq) u",
                                  out, cap),
                     0);
}

/* Tables in url's database (schema public), and DriftBench's function. */
static int64_t pg_tables_there(const char *url) {
    return pg_test_scalar(url, "SELECT (SELECT count(*) FROM pg_tables WHERE schemaname='public') + "
                               "(SELECT count(*) FROM pg_proc WHERE proname='drift_json_field')");
}

static void test_pg_refuse_foreign_tables(void **state) {
    (void)state;
    const char *url = store_loc("foreign");
    assert_int_equal(pg_test_exec(url, "CREATE TABLE customers(id INTEGER, name TEXT);"
                                       "INSERT INTO customers VALUES(1,'ann');"),
                     0);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(url, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    assert_non_null(strstr(err.msg, "not a DriftBench store"));
    assert_non_null(strstr(err.msg, "customers"));
    assert_non_null(strstr(err.msg, url));
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open_readonly(url, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    assert_non_null(strstr(err.msg, "not a DriftBench store"));
    /* untouched: the one table, its row, nothing of ours */
    assert_int_equal(pg_tables_there(url), 1);
    assert_int_equal(pg_test_scalar(url, "SELECT count(*) FROM customers WHERE id=1 AND name='ann'"), 1);

    /* a driftbench_meta without DriftBench's marks is foreign too */
    const char *url2 = store_loc("foreign2");
    assert_int_equal(pg_test_exec(url2, "CREATE TABLE driftbench_meta(key TEXT PRIMARY KEY, value TEXT);"
                                        "INSERT INTO driftbench_meta VALUES('application','other');"),
                     0);
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open(url2, &st, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "not a DriftBench store"));
    assert_int_equal(pg_tables_there(url2), 1);
    assert_int_equal(pg_test_scalar(url2, "SELECT count(*) FROM driftbench_meta"), 1);
}

/* The store is data, not code: a view (here over an endless recursive
 * query, which would hang every reader), a user trigger or a rule in the
 * store's schema is refused at open, read-only or not, naming it; the
 * store opens again once it is gone. */
static void test_pg_schema_not_ours(void **state) {
    (void)state;
    const char *url = store_loc("notours");
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(url, &st, &err), DRIFT_OK);
    drift_store_close(st);
    st = NULL;
    static const struct {
        const char *make, *drop, *named;
    } objs[] = {
        {"CREATE VIEW endless AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r",
         "DROP VIEW endless", "view 'endless'"},
        {"CREATE FUNCTION drift_evil() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;"
         "CREATE TRIGGER evil BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION drift_evil()",
         "DROP TRIGGER evil ON runs; DROP FUNCTION drift_evil()", "trigger 'evil on runs'"},
        {"CREATE RULE quiet AS ON INSERT TO scores DO INSTEAD NOTHING", "DROP RULE quiet ON scores",
         "rule 'quiet on scores'"},
    };
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        assert_int_equal(pg_test_exec(url, objs[i].make), 0);
        memset(&err, 0, sizeof err);
        assert_int_equal(drift_store_open_readonly(url, &st, &err), DRIFT_ERR_STORE);
        assert_null(st);
        if (!strstr(err.msg, objs[i].named)) fail_msg("%s not named: %s", objs[i].named, err.msg);
        memset(&err, 0, sizeof err);
        assert_int_equal(drift_store_open(url, &st, &err), DRIFT_ERR_STORE);
        assert_null(st);
        assert_int_equal(pg_test_exec(url, objs[i].drop), 0);
    }
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open_readonly(url, &st, &err), DRIFT_OK);
    drift_store_close(st);
}

static void test_pg_readonly_no_store(void **state) {
    (void)state;
    const char *url = store_loc("ronone");
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(url, &st, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(st);
    assert_non_null(strstr(err.msg, url));
    assert_non_null(strstr(err.msg, "no DriftBench store"));
    assert_int_equal(pg_tables_there(url), 0); /* nothing created */
    /* the writable open creates it; then the read-only one reads it */
    st = open_ok(url);
    drift_store_close(st);
    assert_int_equal(drift_store_open_readonly(url, &st, &err), DRIFT_OK);
    assert_int_equal(schema_version(st), DRIFT_STORE_SCHEMA_VERSION);
    drift_store_close(st);

    /* a database that does not exist is an error, and is not created */
    char absent[512], name[64], sql[160];
    snprintf(name, sizeof name, "drift_t_absent_%ld", (long)getpid());
    assert_int_equal(pg_test_url_for(pg_test_base(), name, absent, sizeof absent), 0);
    st = NULL;
    memset(&err, 0, sizeof err);
    drift_status rc = drift_store_open_readonly(absent, &st, &err);
    fprintf(stderr, "read-only open of a missing database: %s (%s)\n", drift_strerror(rc), err.msg);
    assert_int_not_equal(rc, DRIFT_OK);
    assert_null(st);
    assert_non_null(strstr(err.msg, name));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_database WHERE datname='%s'", name);
    assert_int_equal(pg_test_scalar(pg_test_base(), sql), 0);
}

static void test_pg_readonly_reads_and_writes_nothing(void **state) {
    (void)state;
    const char *url = store_loc("ro");
    make_closed_store(url);
    char before[64], after[64];
    pg_fingerprint(url, before, sizeof before);

    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(url, &st, &err), DRIFT_OK);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "R", &info, &err), DRIFT_OK);
    assert_non_null(info.finished_at);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, info.id, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, 4);
    assert_int_equal(set.rows[2].is_error, 1);
    int64_t rid = set.rows[0].response_id;
    drift_scored_set_clear(&set);

    /* every write fails and changes nothing */
    drift_answer r = {.prompt_rowid = 1, .text = "x", .prompt_tokens = -1, .completion_tokens = -1};
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_put_responses(st, info.id, &r, 1, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "read-only"));
    drift_run_info ri = run_info("new", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_ERR_STORE);
    ri.label = (char *)"R"; /* resuming the existing run is a write too */
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_ERR_STORE);
    drift_score sc = {.response_id = rid, .evaluator = "math", .label = 1, .value = 1};
    assert_int_equal(drift_store_put_scores(st, &sc, 1, &err), DRIFT_ERR_STORE);
    float v[2] = {1, 2};
    assert_int_equal(drift_store_put_embedding(st, rid, "e", v, 2, &err), DRIFT_ERR_STORE);
    drift_suite *su = make_suite("other", 2);
    int64_t ids[2];
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_ERR_STORE);
    free_suite(su);
    assert_int_equal(drift_store_run_finish(st, info.id, &err), DRIFT_ERR_STORE);
    pg_fingerprint(url, after, sizeof after);
    assert_string_equal(before, after);

    /* the refused run_begins left no run lock behind: while the read-only
     * handle is still open, a writer may resume R */
    assert_int_equal(count_rows(st, "SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND "
                                    "pid=pg_backend_pid()"),
                     0);
    drift_store *w = open_ok(url);
    ri.label = (char *)"R";
    assert_int_equal(said(drift_store_run_begin(w, &ri, &run, &resumed, &err), &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    drift_store_close(w);
    drift_run_info_clear(&info);
    drift_store_close(st);
}

/* PostgreSQL run locks end with their holder's connection: a holder that
 * exits without closing frees the label; a live one blocks it. */
static void test_pg_run_lock_connection_ends(void **state) {
    (void)state;
    const char *url = store_loc("connlock");
    drift_store *st = open_ok(url);
    drift_error err = {0};
    drift_run_info ri = run_info("C", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run = 0, child_run = 0;
    int resumed = 0;

    /* a child takes C and exits without closing its handle */
    pid_t pid = fork_kid();
    if (pid == 0) {
        drift_store *c = NULL;
        drift_error e = {0};
        if (drift_store_open(url, &c, &e) || drift_store_run_begin(c, &ri, &child_run, &resumed, &e)) {
            fprintf(stderr, "child: %s\n", e.msg);
            _exit(3);
        }
        _exit(0);
    }
    int status = wait_kid(pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks WHERE label='C'"), 1); /* its row stays */
    assert_true(other_sessions_gone(st));
    drift_status rc = drift_store_run_begin(st, &ri, &run, &resumed, &err);
    if (rc) fprintf(stderr, "run_begin after the holder exited: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(count_rows(st, "SELECT pid FROM run_locks WHERE label='C'"), (int64_t)getpid());
    assert_int_equal(drift_store_run_unlock(st, "C", &err), DRIFT_OK);

    /* a child that holds C and stays alive blocks it, named by its pid */
    int ready[2], rel[2];
    assert_int_equal(pipe(ready), 0);
    kid_fds[0] = ready[0], kid_fds[1] = ready[1];
    assert_int_equal(pipe(rel), 0);
    kid_fds[2] = rel[0], kid_fds[3] = rel[1];
    pid = fork_kid();
    if (pid == 0) {
        close(ready[0]);
        close(rel[1]);
        drift_store *c = NULL;
        drift_error e = {0};
        char r = 'R';
        if (drift_store_open(url, &c, &e) || drift_store_run_begin(c, &ri, &child_run, &resumed, &e)) {
            fprintf(stderr, "child: %s\n", e.msg);
            r = 'X';
        }
        if (write(ready[1], &r, 1) != 1) _exit(4);
        wait_pipe(rel[0]);
        drift_store_close(c);
        _exit(r == 'R' ? 0 : 3);
    }
    close_fd(&kid_fds[1]);
    close_fd(&kid_fds[2]);
    char r = 0;
    assert_int_equal(read(ready[0], &r, 1), 1);
    assert_int_equal(r, 'R');
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "run 'C' is being written"));
    char pid_s[32];
    snprintf(pid_s, sizeof pid_s, "pid %lld", (long long)pid);
    assert_non_null(strstr(err.msg, pid_s));
    assert_non_null(strstr(err.msg, url));
    close_fd(&kid_fds[3]); /* the child closes its handle and exits */
    status = wait_kid(pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close_fd(&kid_fds[0]);
    assert_true(other_sessions_gone(st));
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    drift_store_close(st);
}

/* On PostgreSQL a run_locks row only says who held the lock: one with no
 * live holder (another host's, or this host's with a live pid) is taken
 * over, where SQLite would refuse it. */
static void test_pg_run_lock_row_taken_over(void **state) {
    (void)state;
    const char *url = store_loc("rowlock");
    drift_store *st = open_ok(url);
    drift_error err = {0};
    drift_run_info ri = run_info("F", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run = 0;
    int resumed = 0;
    char host[256] = "";
    assert_int_equal(gethostname(host, sizeof host), 0);

    plant_lock(st, "F", 4242, "elsewhere.example", 0);
    drift_status rc = drift_store_run_begin(st, &ri, &run, &resumed, &err);
    if (rc) fprintf(stderr, "run_begin over another host's row: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 1);
    assert_int_equal(count_rows(st, "SELECT pid FROM run_locks WHERE label='F'"), (int64_t)getpid());
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks WHERE token='planted'"), 0);
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM run_locks WHERE label='F' AND host='%s'", host);
    assert_int_equal(count_rows(st, sql), 1);
    assert_int_equal(drift_store_run_finish(st, run, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0);

    /* this host, a live pid (ours), another token: no lock behind it either */
    plant_lock(st, "F", (long long)getpid(), host, 0);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks WHERE token='planted'"), 0);
    drift_store_close(st);
}

/* ---- the server goes away mid-run (PostgreSQL, DRIFT_TEST_PG_CTL) ---- */

static int server_down; /* the test stopped the server and has not started it again */

/* Runs "$DRIFT_TEST_PG_CTL args" (pg_ctl of the test's server); its exit status. */
static int pg_ctl(const char *args) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "eval \"$DRIFT_TEST_PG_CTL %s\" >/dev/null 2>&1", args);
    return system(cmd);
}

static int teardown_server(void **state) {
    if (server_down && pg_ctl("start") == 0) server_down = 0;
    alarm(0);
    return teardown_kids(state);
}

#define AWAY_PROMPTS 50
#define AWAY_FIRST 20

static void test_pg_server_goes_away(void **state) {
    (void)state;
    if (!getenv("DRIFT_TEST_PG_CTL")) {
        fprintf(stderr, "SKIP: DRIFT_TEST_PG_CTL not set (tests/pg/with_server.sh sets it)\n");
        skip();
    }
    const char *url = store_loc("away");
    drift_store *st = open_ok(url);
    drift_error err = {0};
    drift_suite *su = make_suite("s", AWAY_PROMPTS);
    int64_t ids[AWAY_PROMPTS];
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    drift_run_info ri = run_info("away", "http://x/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    drift_answer r[AWAY_PROMPTS];
    for (int i = 0; i < AWAY_PROMPTS; i++)
        r[i] = (drift_answer){.prompt_rowid = ids[i], .text = "ok", .prompt_tokens = -1, .completion_tokens = -1};
    assert_int_equal(drift_store_put_responses(st, run, r, AWAY_FIRST, &err), DRIFT_OK);

    server_down = 1;
    assert_int_equal(pg_ctl("stop -m immediate"), 0);
    alarm(120); /* a hang ends the test (and the server script cleans up) */
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_put_responses(st, run, r + AWAY_FIRST, 10, &err), DRIFT_ERR_STORE);
    fprintf(stderr, "put_responses with the server gone: %s\n", err.msg);
    assert_non_null(strstr(err.msg, url));
    memset(&err, 0, sizeof err); /* and again: still an error, not a crash */
    assert_int_equal(drift_store_put_responses(st, run, r + AWAY_FIRST, 10, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, url));
    int64_t *pp = NULL;
    int *pr = NULL;
    size_t np = 0;
    assert_int_not_equal(drift_store_pending(st, run, ids, AWAY_PROMPTS, 1, &pp, &pr, &np, &err), DRIFT_OK);
    free(pp);
    free(pr);
    assert_int_not_equal(drift_store_run_finish(st, run, &err), DRIFT_OK);
    drift_store_close(st);
    assert_int_equal(pg_ctl("start"), 0);
    server_down = 0;
    alarm(0);

    /* a new handle resumes the run: the first batch survived, the rest is pending */
    st = open_ok(url);
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(drift_store_pending(st, run, ids, AWAY_PROMPTS, 1, &pp, &pr, &np, &err), DRIFT_OK);
    assert_int_equal(np, AWAY_PROMPTS - AWAY_FIRST);
    for (size_t i = 0; i < np; i++) {
        assert_int_equal(pp[i], ids[AWAY_FIRST + i]);
        assert_int_equal(pr[i], 0);
    }
    free(pp);
    free(pr);
    assert_int_equal(drift_store_put_responses(st, run, r + AWAY_FIRST, AWAY_PROMPTS - AWAY_FIRST, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_finish(st, run, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), AWAY_PROMPTS);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    assert_int_equal(set.n, AWAY_PROMPTS);
    drift_scored_set_clear(&set);
    drift_store_close(st);
    free_suite(su);
}

/* ---- secrets ---- */

#define MARKER "SECRETMARK"

/* The target column of run `label`, as stored (not through run_get). */
static void stored_target(drift_store *st, const char *label, char *out, size_t cap) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT target FROM runs WHERE label='%s'", label);
    query_text(st, sql, out, cap);
}

static void test_run_record_secrets(void **state) {
    (void)state;
    const char *path = store_loc("secrets.db");
    drift_store *st = open_ok(path);
    drift_error err = {0};
    const char *dec = "{\"temperature\":0}";
    drift_run_info ri =
        run_info("r", "http://bob:p%40ss/w@rd" MARKER "@h:8000/v1?model=m&api_key_env=K&allow_insecure_key=1", dec);
    int64_t run, again;
    int resumed;
    assert_int_equal(said(drift_store_run_begin(st, &ri, &run, &resumed, &err), &err), DRIFT_OK);
    char t[512];
    stored_target(st, "r", t, sizeof t);
    assert_string_equal(t, "http://bob:***@h:8000/v1?model=m");
    drift_run_info got;
    assert_int_equal(drift_store_run_get(st, "r", &got, &err), DRIFT_OK);
    assert_string_equal(got.target, "http://bob:***@h:8000/v1?model=m");
    drift_run_info_clear(&got);
    /* another password or key variable: the same run */
    ri = run_info("r", "http://bob:other@h:8000/v1?model=m&api_key_env=OTHER", dec);
    assert_int_equal(said(drift_store_run_begin(st, &ri, &again, &resumed, &err), &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(again, run);
    /* another model: refused, and the message holds no password */
    ri = run_info("r", "http://bob:" MARKER "@h:8000/v1?model=m2", dec);
    assert_int_equal(drift_store_run_begin(st, &ri, &again, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "stored 'http://bob:***@h:8000/v1?model=m', requested 'http://bob:***@h:8000/v1?model=m2'"));
    assert_null(strstr(err.msg, MARKER));
    /* another host: the same run; its endpoint rows hold no password either */
    ri = run_info("r", "http://bob:" MARKER "@h2:8000/v1?model=m", dec);
    assert_int_equal(said(drift_store_run_begin(st, &ri, &again, &resumed, &err), &err), DRIFT_OK);
    assert_int_equal(again, run);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_endpoints WHERE target LIKE '%" MARKER "%'"), 0);
    ri = run_info("r", "http://bob:x@h:8000/v1?model=m", dec); /* back, for what follows */
    assert_int_equal(said(drift_store_run_begin(st, &ri, &again, &resumed, &err), &err), DRIFT_OK);
    /* a record of an older driftbench, its password in clear: read back
     * redacted, and it resumes */
    exec_ok(st, "UPDATE runs SET target='http://bob:OLD" MARKER "@h:8000/v1?model=m' WHERE label='r'");
    assert_int_equal(drift_store_run_get(st, "r", &got, &err), DRIFT_OK);
    assert_string_equal(got.target, "http://bob:***@h:8000/v1?model=m");
    drift_run_info_clear(&got);
    ri = run_info("r", "http://bob:new@h:8000/v1?model=m", dec);
    assert_int_equal(said(drift_store_run_begin(st, &ri, &again, &resumed, &err), &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    drift_store_run_unlock(st, "r", NULL);

    /* merging such an old shard (an SQLite file) copies the target without
     * the password; merging it again matches the run already there */
    drift_store *old = open_ok(tpath("old-shard.db"));
    ri = run_info("s", "http://bob:x@h:8000/v1?model=m", dec);
    assert_int_equal(said(drift_store_run_begin(old, &ri, &run, &resumed, &err), &err), DRIFT_OK);
    exec_ok(old, "UPDATE runs SET target='http://bob:OLD" MARKER "@h:8000/v1?model=m&api_key_env=K'");
    drift_store_close(old);
    drift_store_merged m = {0};
    assert_int_equal(said(drift_store_merge(st, tpath("old-shard.db"), &m, &err), &err), DRIFT_OK);
    assert_int_equal(m.runs, 1);
    stored_target(st, "s", t, sizeof t);
    assert_string_equal(t, "http://bob:***@h:8000/v1?model=m");
    memset(&m, 0, sizeof m);
    assert_int_equal(said(drift_store_merge(st, tpath("old-shard.db"), &m, &err), &err), DRIFT_OK);
    assert_int_equal(m.runs_skipped, 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs WHERE target LIKE '%" MARKER "%'"), 0);
    drift_store_close(st);
}

/* The PostgreSQL store forms of one password, and what libpq must get. */
typedef struct pg_form {
    const char *what;
    char loc[1024];
} pg_form;

/* Fills forms[] for a database at socket dir `dir`, database `db`: the
 * password "p@ss/w" MARKER "%x'" in each way of writing it. */
static int pg_forms(const char *dir, const char *db, pg_form *f) {
    int n = 0;
    f[n].what = "userinfo, raw '@', '/', '%'";
    snprintf(f[n++].loc, sizeof f[0].loc, "postgresql://postgres:p@ss/w" MARKER "%%x'@/%s?host=%s", db, dir);
    f[n].what = "userinfo, escaped %40 %2F %25";
    snprintf(f[n++].loc, sizeof f[0].loc, "postgres://postgres:p%%40ss%%2Fw" MARKER "%%25x%%27@/%s?host=%s", db, dir);
    f[n].what = "?password=";
    snprintf(f[n++].loc, sizeof f[0].loc, "postgresql://postgres@/%s?host=%s&password=p%%40ss%%2Fw" MARKER "%%25x'",
             db, dir);
    f[n].what = "key=value, quoted";
    snprintf(f[n++].loc, sizeof f[0].loc, "host=%s dbname=%s user=postgres password='p@ss/w" MARKER "%%x\\''", dir, db);
    f[n].what = "key=value, bare";
    snprintf(f[n++].loc, sizeof f[0].loc, "host=%s password = p@ss/w" MARKER "%%x\\' dbname=%s user=postgres", dir, db);
    return n;
}

/* A store that cannot be reached, its password in every form: the
 * messages (libpq's included) and the display never hold it. */
static void test_pg_connect_messages(void **state) {
    (void)state;
    pg_form f[8];
    int n = pg_forms("/nonexistent-drift-dir", "nodb", f);
    for (int i = 0; i < n; i++) {
        for (int ro = 0; ro < 2; ro++) {
            drift_store *st = NULL;
            drift_error err = {0};
            drift_status rc = ro ? drift_store_open_readonly(f[i].loc, &st, &err) : drift_store_open(f[i].loc, &st, &err);
            assert_int_not_equal(rc, DRIFT_OK);
            assert_null(st);
            if (strstr(err.msg, "SECRET") || !strstr(err.msg, "***") || !strstr(err.msg, "cannot connect to PostgreSQL"))
                fail_msg("%s: %s", f[i].what, err.msg);
        }
    }
    /* libpq's own complaints about the rest of the string */
    static const char *const bad[] = {
        "postgresql://u:" MARKER "@h:notaport/db",
        "postgresql://u:" MARKER "@[::1/db",
        "host=/x password=" MARKER " nonsense",
        "host=/x password='" MARKER,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        drift_store *st = NULL;
        drift_error err = {0};
        assert_int_not_equal(drift_store_open(bad[i], &st, &err), DRIFT_OK);
        if (strstr(err.msg, "SECRET")) fail_msg("'%s': %s", bad[i], err.msg);
    }
}

/* The same forms against the server (trust authentication: any password
 * connects, and PQpass says what libpq was given). */
static void test_pg_password_forms(void **state) {
    (void)state;
    char url[512];
    assert_int_equal(pg_test_fresh_db("pwforms", url, sizeof url), 0);
    /* url: postgresql://postgres@/NAME?host=DIR */
    const char *db = strstr(url, "@/"), *q = strstr(url, "?host=");
    assert_non_null(db);
    assert_non_null(q);
    char name[128], dir[256];
    snprintf(name, sizeof name, "%.*s", (int)(q - db - 2), db + 2);
    snprintf(dir, sizeof dir, "%s", q + 6);
    pg_form f[8];
    int n = pg_forms(dir, name, f);
    for (int i = 0; i < n; i++) {
        drift_store *st = NULL;
        drift_error err = {0};
        if (drift_store_open(f[i].loc, &st, &err)) fail_msg("%s: %s", f[i].what, err.msg);
        assert_int_equal(st->kind, STORE_PG);
        if (strcmp(PQpass(st->pg), "p@ss/w" MARKER "%x'")) fail_msg("%s: libpq got '%s'", f[i].what, PQpass(st->pg));
        if (strstr(drift_store_display(st), "SECRET")) fail_msg("%s: shown as %s", f[i].what, drift_store_display(st));
        assert_string_equal(drift_store_path(st), f[i].loc);
        drift_store_close(st);
    }
    /* a database that is not there: the server's message, no password */
    n = pg_forms(dir, "no_such_db_here", f);
    for (int i = 0; i < n; i++) {
        drift_store *st = NULL;
        drift_error err = {0};
        assert_int_equal(drift_store_open_readonly(f[i].loc, &st, &err), DRIFT_ERR_NOT_FOUND);
        if (strstr(err.msg, "SECRET") || !strstr(err.msg, "no_such_db_here")) fail_msg("%s: %s", f[i].what, err.msg);
    }
}

/* ---- issue 34: the store is data, not code ---- */

/* Changes the closed store at path with sql through a plain SQLite
 * connection (as anyone could), foreign keys off. */
static void tamper(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc) fprintf(stderr, "%s: %s\n", sql, msg ? msg : "?");
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
}

/* Both opens of path fail with DRIFT_ERR_STORE, the message holding want. */
static void refused_naming(const char *path, const char *want) {
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    if (!strstr(err.msg, want)) fprintf(stderr, "readonly: %s\n", err.msg);
    assert_non_null(strstr(err.msg, want));
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_ERR_STORE);
    assert_null(st);
    if (!strstr(err.msg, want)) fprintf(stderr, "open: %s\n", err.msg);
    assert_non_null(strstr(err.msg, want));
}

/* A table replaced by a view over an endless recursive query (it would hang
 * every reader), a trigger, an index or table of another name, a table
 * whose SQL differs: each is refused by both opens, naming the object,
 * before any query reads it; the untouched store still opens. */
static void test_schema_not_ours(void **state) {
    (void)state;
    static const struct {
        const char *sql, *want;
    } cases[] = {
        {"DROP TABLE responses; CREATE VIEW responses AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x+1 "
         "FROM r) SELECT x AS id, 1 AS run_id, x AS prompt_rowid, 0 AS replicate, 0 AS failed, NULL AS "
         "http_status, 1 AS attempts, NULL AS prompt_tokens, NULL AS completion_tokens, NULL AS latency_ms, NULL AS "
         "finish_reason, NULL AS created_at, NULL AS error, 'x' AS text, NULL AS logprobs FROM r",
         "view 'responses' where DriftBench has a table"},
        {"CREATE TRIGGER t_scores AFTER INSERT ON scores BEGIN DELETE FROM runs; END",
         "trigger 't_scores', which is not DriftBench's"},
        {"CREATE VIEW v AS SELECT 1", "view 'v', which is not DriftBench's"},
        {"CREATE INDEX extra ON responses(text)", "index 'extra', which is not DriftBench's"},
        {"CREATE TABLE notes(x)", "table 'notes', which is not DriftBench's"},
        {"ALTER TABLE runs ADD COLUMN x TEXT", "table 'runs', whose SQL is not the one DriftBench creates"},
        {"DROP INDEX scores_latest", "index 'scores_latest' is missing"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "hostile%zu.db", i);
        const char *path = tpath(name);
        make_closed_store(path);
        tamper(path, cases[i].sql);
        refused_naming(path, cases[i].want);
    }
    const char *path = tpath("plain.db");
    make_closed_store(path);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    drift_store_close(st);
}

/* The read bound: on a read-only handle, a statement that would run for
 * ever is stopped once it passes its budget of VM steps (the floor, for a
 * small store), and the error says so; the handle then reads as before. */
static void test_read_bound(void **state) {
    (void)state;
    const char *path = tpath("bound.db");
    make_closed_store(path);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    store_q *q = sq_prepare(st, "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM r) "
                                "SELECT count(*) FROM r", &err);
    assert_non_null(q);
    assert_int_equal(sq_step(q), SQ_ERROR);
    const char *msg = sq_errmsg(st);
    assert_non_null(strstr(msg, "passed its bound of"));
    assert_true(st->bound_steps > st->bound_max && st->bound_steps <= st->bound_max + 4096);
    sq_done(q);
    drift_store_close(st);
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "R", &info, &err), DRIFT_OK);
    drift_run_info_clear(&info);
    drift_store_close(st);
}

/* ---- managing runs (store_manage.c) ---- */

static void begin_ok(drift_store *st, const char *label, const char *target, int64_t *run, int *resumed) {
    drift_error err = {0};
    drift_run_info ri = run_info(label, target, "{\"temperature\":0}");
    assert_int_equal(said(drift_store_run_begin(st, &ri, run, resumed, &err), &err), DRIFT_OK);
    drift_store_run_unlock(st, label, NULL);
}

static void test_target_identity(void **state) {
    (void)state;
    static const char *const same[][2] = {
        {"http://localhost:8000/v1?model=m", "http://127.0.0.1:9000/v1?model=m"},
        {"http://h/v1?model=m&api=chat", "https://u:pw@other/openai/v1?api=chat&model=m&max_reply_mb=8"},
        {"http://h/v1?model=m&api_key_env=K", "http://h/v1?model=m"},
        {"embedded:m.gguf?profile=cpu-f32&batch=2", "embedded:m.gguf?batch=2&profile=cpu-f32"},
    };
    static const char *const differ[][2] = {
        {"http://h/v1?model=m", "http://h/v1?model=m2"},
        {"http://h/v1?model=m", "http://h/v1?model=m&api=chat"},
        {"embedded:a.gguf", "embedded:b.gguf"},
        {"embedded:m.gguf?profile=cpu-f32", "embedded:m.gguf?profile=cpu-bf16"},
        {"http://h/v1?model=m", "embedded:m"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *a = drift_store_target_identity(same[i][0]), *b = drift_store_target_identity(same[i][1]);
        assert_non_null(a);
        assert_non_null(b);
        assert_string_equal(a, b);
        free(a);
        free(b);
    }
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        char *a = drift_store_target_identity(differ[i][0]), *b = drift_store_target_identity(differ[i][1]);
        assert_string_not_equal(a, b);
        free(a);
        free(b);
    }
    char *id = drift_store_target_identity("http://u:secret@h:1/v1?model=m&api=chat&max_reply_mb=2");
    assert_string_equal(id, "http?api=chat&model=m");
    free(id);
}

/* A run resumed through other endpoints: one run, each endpoint recorded,
 * the overview says so. */
static void test_run_endpoints(void **state) {
    (void)state;
    drift_store *st = open_ok(store_loc("endpoints.db"));
    drift_error err = {0};
    int64_t run, again;
    int resumed;
    begin_ok(st, "e", "http://localhost:8000/v1?model=m", &run, &resumed);
    assert_int_equal(resumed, 0);
    begin_ok(st, "e", "http://127.0.0.1:9000/v1?model=m&max_reply_mb=4", &again, &resumed);
    assert_int_equal(resumed, 1);
    assert_int_equal(again, run);
    begin_ok(st, "e", "http://127.0.0.1:9000/v1?model=m&max_reply_mb=4", &again, &resumed);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), 1);
    drift_run_overview ov;
    assert_int_equal(said(drift_store_run_overview(st, "e", &ov, &err), &err), DRIFT_OK);
    assert_int_equal(ov.n_endpoints, 2);
    assert_string_equal(ov.endpoints[0].target, "http://localhost:8000/v1?model=m");
    assert_int_equal(ov.endpoints[0].begins, 1);
    assert_string_equal(ov.endpoints[1].target, "http://127.0.0.1:9000/v1?model=m&max_reply_mb=4");
    assert_int_equal(ov.endpoints[1].begins, 2);
    assert_int_equal(ov.resumes, 2);
    assert_non_null(ov.last_begun);
    assert_string_equal(ov.info.target, "http://127.0.0.1:9000/v1?model=m&max_reply_mb=4");
    assert_string_equal(ov.identity, "http?model=m");
    assert_int_equal(ov.locked, 0);
    drift_run_overview_clear(&ov);

    /* free labels: the first free one or the one of this identity */
    char label[64];
    drift_run_info a = run_info("b", "http://h/v1?model=m", "{\"temperature\":0}");
    drift_run_info b = run_info("b", "http://h/v1?model=m2", "{\"temperature\":0}");
    assert_int_equal(said(drift_store_run_begin_free(st, &a, label, sizeof label, &run, &resumed, &err), &err), 0);
    assert_string_equal(label, "b");
    assert_int_equal(resumed, 0);
    assert_int_equal(said(drift_store_run_begin_free(st, &b, label, sizeof label, &again, &resumed, &err), &err), 0);
    assert_string_equal(label, "b-2");
    assert_int_equal(resumed, 0);
    int64_t r3;
    assert_int_equal(said(drift_store_run_begin_free(st, &a, label, sizeof label, &r3, &resumed, &err), &err), 0);
    assert_string_equal(label, "b");
    assert_int_equal(resumed, 1);
    assert_int_equal(r3, run);
    assert_int_equal(said(drift_store_run_begin_free(st, &b, label, sizeof label, &r3, &resumed, &err), &err), 0);
    assert_string_equal(label, "b-2");
    assert_int_equal(r3, again);
    drift_run_overview *all = NULL;
    size_t n = 0;
    assert_int_equal(said(drift_store_run_overviews(st, &all, &n, &err), &err), DRIFT_OK);
    assert_int_equal(n, 3);
    assert_string_equal(all[0].info.label, "e");
    assert_int_equal(all[0].n_endpoints, 2);
    assert_string_equal(all[2].info.label, "b-2");
    drift_run_overview_array_free(all, n);
    drift_store_close(st);
}

/* merge copies a run's endpoint history (v3) with the run, each target
 * without its password, in order and with its counts; a run the output
 * already has keeps its own. Both paths: ATTACH (SQLite output) and row
 * by row (PostgreSQL pass). */
static void test_merge_endpoints(void **state) {
    (void)state;
    drift_error err = {0};
    int64_t run, again;
    int resumed;
    drift_store *shard = open_ok(tpath("ep-shard.db"));
    begin_ok(shard, "e", "http://localhost:8000/v1?model=m", &run, &resumed);
    begin_ok(shard, "e", "http://bob:" MARKER "@127.0.0.1:9000/v1?model=m", &again, &resumed);
    begin_ok(shard, "e", "http://bob:" MARKER "@127.0.0.1:9000/v1?model=m", &again, &resumed);
    assert_int_equal(again, run);
    drift_run_overview want;
    assert_int_equal(said(drift_store_run_overview(shard, "e", &want, &err), &err), DRIFT_OK);
    assert_int_equal(want.n_endpoints, 2);
    drift_store_close(shard);

    drift_store *st = open_ok(store_loc("ep-merged.db"));
    begin_ok(st, "other", "http://h:1/v1?model=x", &run, &resumed); /* ids differ from the shard's */
    drift_store_merged m = {0};
    assert_int_equal(said(drift_store_merge(st, tpath("ep-shard.db"), &m, &err), &err), DRIFT_OK);
    assert_int_equal(m.runs, 1);
    drift_run_overview ov;
    assert_int_equal(said(drift_store_run_overview(st, "e", &ov, &err), &err), DRIFT_OK);
    assert_int_equal(ov.n_endpoints, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(ov.endpoints[i].target, want.endpoints[i].target);
        assert_string_equal(ov.endpoints[i].first_at, want.endpoints[i].first_at);
        assert_string_equal(ov.endpoints[i].last_at, want.endpoints[i].last_at);
        assert_int_equal(ov.endpoints[i].begins, want.endpoints[i].begins);
    }
    assert_string_equal(ov.endpoints[0].target, "http://localhost:8000/v1?model=m");
    assert_string_equal(ov.endpoints[1].target, "http://bob:***@127.0.0.1:9000/v1?model=m");
    assert_int_equal(ov.endpoints[1].begins, 2);
    drift_run_overview_clear(&ov);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_endpoints WHERE target LIKE '%" MARKER "%'"), 0);
    /* again: the run is skipped, its history not doubled */
    memset(&m, 0, sizeof m);
    assert_int_equal(said(drift_store_merge(st, tpath("ep-shard.db"), &m, &err), &err), DRIFT_OK);
    assert_int_equal(m.runs_skipped, 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_endpoints"), 3);
    drift_run_overview_clear(&want);
    drift_store_close(st);
}

/* Two runs with answers, scores and embeddings: rename keeps every row,
 * delete removes one run's rows and nothing else, a live writer stops
 * both. */
static void test_runs_rename_delete(void **state) {
    (void)state;
    const char *loc = store_loc("manage.db");
    drift_store *st = open_ok(loc);
    drift_error err = {0};
    drift_suite *su = make_suite("s", 4);
    int64_t ids[4], run[2];
    int resumed;
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);
    const char *labels[2] = {"x", "y"};
    for (int k = 0; k < 2; k++) {
        begin_ok(st, labels[k], "http://h/v1?model=m", &run[k], &resumed);
        drift_answer r[4];
        for (int i = 0; i < 4; i++)
            r[i] = (drift_answer){.prompt_rowid = ids[i], .text = i == 3 && k ? NULL : (char *)"a",
                                  .error = i == 3 && k ? (char *)"HTTP 500" : NULL, .prompt_tokens = -1,
                                  .completion_tokens = -1};
        assert_int_equal(drift_store_put_responses(st, run[k], r, 4, &err), DRIFT_OK);
    }
    /* scores on every answer of x (two evaluators on one), one of y; an embedding on each run */
    char sql[256];
    int64_t rx = count_rows(st, "SELECT min(id) FROM responses WHERE run_id = (SELECT id FROM runs WHERE label='x')");
    int64_t ry = count_rows(st, "SELECT min(id) FROM responses WHERE run_id = (SELECT id FROM runs WHERE label='y')");
    drift_score sc[6];
    for (int i = 0; i < 4; i++) sc[i] = (drift_score){.response_id = rx + i, .evaluator = "math", .label = 1, .value = 1};
    sc[4] = (drift_score){.response_id = rx, .evaluator = "other", .label = 0, .value = 0};
    sc[5] = (drift_score){.response_id = ry, .evaluator = "math", .label = 1, .value = 1};
    assert_int_equal(drift_store_put_scores(st, sc, 6, &err), DRIFT_OK);
    float v[2] = {1, 2};
    assert_int_equal(drift_store_put_embedding(st, rx, "e", v, 2, &err), DRIFT_OK);
    assert_int_equal(drift_store_put_embedding(st, ry, "e", v, 2, &err), DRIFT_OK);

    /* rename: scores and embeddings follow */
    assert_int_equal(said(drift_store_run_rename(st, "x", "z", &err), &err), DRIFT_OK);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM scores s JOIN responses r ON r.id = s.response_id JOIN runs u ON "
                              "u.id = r.run_id WHERE u.label = 'z'");
    assert_int_equal(count_rows(st, sql), 5);
    assert_int_equal(drift_store_run_rename(st, "z", "y", &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "'y' exists already"));
    assert_int_equal(drift_store_run_rename(st, "x", "w", &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "runs: z, y"));
    drift_run_overview ov;
    assert_int_equal(said(drift_store_run_overview(st, "z", &ov, &err), &err), DRIFT_OK);
    assert_int_equal(ov.responses, 4);
    assert_int_equal(ov.scored, 4);
    assert_int_equal(ov.scores, 5);
    assert_int_equal(ov.embeddings, 1);
    assert_int_equal(ov.per_workload.answers[DRIFT_WL_MATH], 2);
    assert_int_equal(ov.scored_per_workload[DRIFT_WL_LONG], 2);
    drift_run_overview_clear(&ov);

    /* a live writer of y (another handle) stops rename and delete */
    drift_store *w = open_ok(loc);
    drift_run_info ri = run_info("y", "http://h2/v1?model=m", "{\"temperature\":0}");
    int64_t wy;
    assert_int_equal(said(drift_store_run_begin(w, &ri, &wy, &resumed, &err), &err), DRIFT_OK);
    drift_run_removal rm;
    assert_int_equal(drift_store_run_delete(st, "y", &rm, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "being written"));
    assert_int_equal(drift_store_run_rename(st, "y", "v", &err), DRIFT_ERR_STORE);
    assert_int_equal(said(drift_store_run_removal(st, "y", &rm, &err), &err), DRIFT_OK);
    assert_int_equal(rm.locked, 1);
    assert_int_equal(rm.responses, 4);
    assert_int_equal(rm.failed, 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), 8);
    drift_store_close(w); /* the lock ends with the handle */

    assert_int_equal(said(drift_store_run_delete(st, "y", &rm, &err), &err), DRIFT_OK);
    assert_int_equal(rm.responses, 4);
    assert_int_equal(rm.failed, 1);
    assert_int_equal(rm.scores, 1);
    assert_int_equal(rm.embeddings, 1);
    assert_int_equal(rm.endpoints, 2);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), 4);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM scores"), 5);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM embeddings"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_endpoints"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM prompts"), 4);
    assert_int_equal(drift_store_run_delete(st, "y", &rm, &err), DRIFT_ERR_NOT_FOUND);
    /* the label is free again */
    begin_ok(st, "y", "http://h/v1?model=m3", &wy, &resumed);
    assert_int_equal(resumed, 0);
    free_suite(su);
    drift_store_close(st);
}

/* The schema-v2 store of tests/data/stores (written by driftbench before
 * v3): opened for writing it migrates to v3 keeping every row; its runs
 * resume and then carry their endpoints; delete works on it. */
static void test_migrate_v2_store(void **state) {
    (void)state;
    const char *path = tpath("v2.db");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s/tests/data/stores/runs_v2.db' '%s'", DRIFT_SOURCE_DIR, path);
    assert_int_equal(system(cmd), 0);
    drift_error err = {0};
    drift_store *st = NULL;
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    assert_int_equal(schema_version(st), 2);
    drift_run_overview *all = NULL;
    size_t n = 0;
    assert_int_equal(said(drift_store_run_overviews(st, &all, &n, &err), &err), DRIFT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(all[1].n_endpoints, 1);
    assert_int_equal(all[2].locked, 1); /* a lock of another host */
    drift_run_overview_array_free(all, n);
    drift_store_close(st);

    st = open_ok(path);
    assert_int_equal(schema_version(st), 3);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM runs"), 3);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), 10);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM scores"), 8);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM embeddings"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM prompts"), 5);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_endpoints"), 0);
    /* an old run resumes as it was recorded; its first endpoint comes from its record */
    drift_run_info old;
    assert_int_equal(drift_store_run_get(st, "base", &old, &err), DRIFT_OK);
    int64_t run;
    int resumed;
    assert_int_equal(said(drift_store_run_begin(st, &old, &run, &resumed, &err), &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_int_equal(run, old.id);
    drift_store_run_unlock(st, "base", NULL);
    drift_run_overview ov;
    assert_int_equal(said(drift_store_run_overview(st, "base", &ov, &err), &err), DRIFT_OK);
    assert_int_equal(ov.n_endpoints, 1);
    assert_int_equal(ov.endpoints[0].begins, 2);
    assert_string_equal(ov.endpoints[0].first_at, old.started_at);
    assert_int_equal(ov.resumes, 1);
    assert_int_equal(ov.scored, 3);
    drift_run_overview_clear(&ov);
    drift_run_info_clear(&old);
    /* the http run of another host's writer cannot be deleted; cand can */
    drift_run_removal rm;
    assert_int_equal(drift_store_run_delete(st, "vllm-h100", &rm, &err), DRIFT_ERR_STORE);
    assert_int_equal(said(drift_store_run_delete(st, "cand", &rm, &err), &err), DRIFT_OK);
    assert_int_equal(rm.responses, 5);
    assert_int_equal(rm.scores, 5);
    assert_int_equal(rm.embeddings, 1);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses"), 5);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM scores"), 3);
    drift_store_close(st);
}

int main(void) {
    /* the SQLite pass: every test */
    const struct CMUnitTest sqlite_tests[] = {
        cmocka_unit_test(test_open_new_and_reopen),
        cmocka_unit_test(test_migrate_empty_file),
        cmocka_unit_test(test_refuse_text_file),
        cmocka_unit_test(test_refuse_foreign_sqlite),
        cmocka_unit_test(test_refuse_newer_schema),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_prune_responses),
        cmocka_unit_test(test_resume_semantics),
        cmocka_unit_test(test_load_scored_interleaved),
        cmocka_unit_test_teardown(test_kill_safety, teardown_kids),
        cmocka_unit_test(test_run_lock_two_handles),
        cmocka_unit_test(test_run_lock_stale_and_foreign),
        cmocka_unit_test(test_readonly_missing_and_empty),
        cmocka_unit_test(test_readonly_reads_and_writes_nothing),
        cmocka_unit_test(test_readonly_odd_path),
        cmocka_unit_test(test_readonly_beside_a_writer),
        cmocka_unit_test(test_readonly_old_schema_not_migrated),
        cmocka_unit_test_teardown(test_concurrent_writers, teardown_kids),
        cmocka_unit_test_teardown(test_concurrent_create, teardown_kids),
        cmocka_unit_test(test_run_record_secrets),
        cmocka_unit_test(test_pg_connect_messages),
        cmocka_unit_test(test_schema_not_ours),
        cmocka_unit_test(test_read_bound),
        cmocka_unit_test(test_target_identity),
        cmocka_unit_test(test_run_endpoints),
        cmocka_unit_test(test_merge_endpoints),
        cmocka_unit_test(test_runs_rename_delete),
        cmocka_unit_test(test_migrate_v2_store),
    };
    /* the PostgreSQL pass: the store's behaviour, each test on a fresh
     * database, then what stands for the SQLite-file tests; the server
     * stopped and started last */
    const struct CMUnitTest pg_tests[] = {
        cmocka_unit_test(test_open_new_and_reopen),
        cmocka_unit_test(test_refuse_newer_schema),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_prune_responses),
        cmocka_unit_test(test_resume_semantics),
        cmocka_unit_test(test_load_scored_interleaved),
        cmocka_unit_test_teardown(test_kill_safety, teardown_kids),
        cmocka_unit_test(test_run_lock_two_handles),
        cmocka_unit_test(test_readonly_beside_a_writer),
        cmocka_unit_test_teardown(test_concurrent_writers, teardown_kids),
        cmocka_unit_test_teardown(test_concurrent_create, teardown_kids),
        cmocka_unit_test(test_pg_refuse_foreign_tables),
        cmocka_unit_test(test_pg_schema_not_ours),
        cmocka_unit_test(test_pg_readonly_no_store),
        cmocka_unit_test(test_pg_readonly_reads_and_writes_nothing),
        cmocka_unit_test_teardown(test_pg_run_lock_connection_ends, teardown_kids),
        cmocka_unit_test(test_pg_run_lock_row_taken_over),
        cmocka_unit_test(test_run_record_secrets),
        cmocka_unit_test(test_pg_password_forms),
        cmocka_unit_test(test_run_endpoints),
        cmocka_unit_test(test_merge_endpoints),
        cmocka_unit_test(test_runs_rename_delete),
        cmocka_unit_test_teardown(test_pg_server_goes_away, teardown_server),
    };
    int failed = cmocka_run_group_tests_name("store on SQLite", sqlite_tests, setup_dir, teardown_dir);
    if (pg_test_base())
        failed += cmocka_run_group_tests_name("store on PostgreSQL", pg_tests, setup_pg, teardown_pg);
    else
        fprintf(stderr, "test_store: DRIFT_TEST_PG is not set: no PostgreSQL pass "
                        "(bash tests/pg/with_server.sh build/test_store runs it)\n");
    return failed ? 1 : 0;
}
