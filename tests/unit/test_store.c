/* test_store.c - the SQLite store: round trips, resume semantics, schema
 * identity and migration, refusal of foreign files (left byte-identical),
 * crash safety with a real fork + SIGKILL mid-way through writing, run
 * locks (one writer per label, stale locks taken over), and read-only
 * handles (nothing created, nothing written). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
#include "store/store_internal.h" /* store_sqlite: to look at what the store wrote */
#include "util/util.h"

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

static int64_t count_rows(drift_store *st, const char *sql) {
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st), sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static void test_open_new_and_reopen(void **state) {
    (void)state;
    const char *path = tpath("new.db");
    drift_store *st = open_ok(path);
    assert_int_equal(count_rows(st, "PRAGMA user_version"), DRIFT_STORE_SCHEMA_VERSION);
    assert_int_equal(count_rows(st, "PRAGMA application_id"), 0x44524654);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(store_sqlite(st), "PRAGMA journal_mode", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                                    "('prompts','runs','responses','scores','embeddings')"),
                     5);
    drift_store_close(st);
    st = open_ok(path); /* reopening an existing store migrates nothing and works */
    assert_int_equal(count_rows(st, "PRAGMA user_version"), DRIFT_STORE_SCHEMA_VERSION);
    drift_store_close(st);
}

static void test_migrate_empty_file(void **state) {
    (void)state;
    const char *path = tpath("empty.db");
    FILE *f = fopen(path, "w");
    fclose(f);
    drift_store *st = open_ok(path);
    assert_int_equal(count_rows(st, "PRAGMA user_version"), DRIFT_STORE_SCHEMA_VERSION);
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
    const char *path = tpath("future.db");
    drift_store *st = open_ok(path);
    assert_int_equal(sqlite3_exec(store_sqlite(st), "PRAGMA user_version=7", NULL, NULL, NULL), SQLITE_OK);
    drift_store_close(st);
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_ERR_STORE);
    assert_non_null(strstr(err.msg, "schema version 7 is newer"));
}

static void test_round_trip(void **state) {
    (void)state;
    drift_store *st = open_ok(tpath("rt.db"));
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
    assert_int_equal(count_rows(st, "SELECT count(*) FROM responses WHERE logprobs IS NOT NULL AND "
                                    "substr(hex(logprobs),1,8)='28B52FFD'"),
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

    /* unscored: answers only, never the error */
    drift_answer *ur;
    drift_prompt *up;
    size_t un;
    assert_int_equal(drift_store_unscored(st, run, NULL, 0, &ur, &up, &un, &err), DRIFT_OK);
    assert_int_equal(un, 3);
    assert_string_equal(up[2].prompt_id, "q3");
    assert_string_equal(ur[2].text, "six");
    for (size_t i = 0; i < un; i++) {
        drift_answer_clear(&ur[i]);
        drift_prompt_clear(&up[i]);
    }
    free(ur);
    free(up);
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
    drift_store *st = open_ok(tpath("resume.db"));
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

    /* mismatches name the field and both values */
    drift_run_info other = run_info("r", "http://b/v1?model=m", "{\"temperature\":0,\"seed\":42}");
    assert_int_equal(drift_store_run_begin(st, &other, &run_again, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "target"));
    assert_non_null(strstr(err.msg, "http://a/v1?model=m"));
    assert_non_null(strstr(err.msg, "http://b/v1?model=m"));
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
    drift_store *st = open_ok(tpath("inter.db"));
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

static void exec_ok(drift_store *st, const char *sql) {
    char *msg = NULL;
    int rc = sqlite3_exec(store_sqlite(st), sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fprintf(stderr, "%s: %s\n", sql, msg ? msg : "?");
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
}

/* Puts a lock row for label as if process pid on host had taken it. */
static void plant_lock(drift_store *st, const char *label, long long pid, const char *host, long long start) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT OR REPLACE INTO run_locks(label,pid,host,proc_start,token,started_at) "
             "VALUES('%s',%lld,'%s',%lld,'planted','2026-01-01T00:00:00Z')",
             label, pid, host, start);
    exec_ok(st, sql);
}

static void test_run_lock_two_handles(void **state) {
    (void)state;
    const char *path = tpath("lock.db");
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
    assert_non_null(strstr(err.msg, "lock.db"));
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
    const char *path = tpath("live.db");
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
    assert_true(exists_with(path, "-wal"));

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
    exec_ok(st, "DROP TABLE run_locks; PRAGMA user_version=1"); /* what a v1 tool wrote */
    drift_store_close(st);
    drift_error err = {0};
    assert_int_equal(drift_store_open_readonly(path, &st, &err), DRIFT_OK);
    assert_int_equal(count_rows(st, "PRAGMA user_version"), 1);
    drift_run_info info;
    assert_int_equal(drift_store_run_get(st, "R", &info, &err), DRIFT_OK);
    drift_run_info_clear(&info);
    drift_store_close(st);
    st = open_ok(path); /* a writer migrates it */
    assert_int_equal(count_rows(st, "PRAGMA user_version"), DRIFT_STORE_SCHEMA_VERSION);
    assert_int_equal(count_rows(st, "SELECT count(*) FROM run_locks"), 0);
    drift_store_close(st);
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
    const char *path = tpath("crash.db");
    drift_store *st = open_ok(path);
    drift_error err = {0};
    drift_suite *su = make_suite("crash", KILL_PROMPTS);
    int64_t *ids = calloc(KILL_PROMPTS, sizeof *ids);
    assert_int_equal(drift_store_put_prompts(st, su, ids, &err), DRIFT_OK);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) child_writer(path, ids);
    /* wait until a few batches are committed, then kill mid-way */
    int64_t seen = 0;
    for (int i = 0; i < 2000 && seen < 5 * KILL_BATCH; i++) {
        usleep(2000);
        seen = count_rows(st, "SELECT count(*) FROM responses");
    }
    usleep(3000);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    drift_store_close(st);

    st = open_ok(path);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(store_sqlite(st), "PRAGMA integrity_check", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    int64_t n = count_rows(st, "SELECT count(*) FROM responses");
    fprintf(stderr, "kill test: %lld responses committed before SIGKILL\n", (long long)n);
    assert_true(n >= 5 * KILL_BATCH);
    assert_int_equal(n % KILL_BATCH, 0); /* no partial batch */
    /* the committed rows are exactly the first n the child wrote, each once */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM responses WHERE replicate * %d + (prompt_rowid - %lld) < %lld "
             "AND text = 'answer ' || (replicate * %d + prompt_rowid - %lld)",
             KILL_PROMPTS, (long long)ids[0], (long long)n, KILL_PROMPTS, (long long)ids[0]);
    assert_int_equal(count_rows(st, sql), n);

    /* resume: the same label resumes, pending gives exactly the rest */
    int reps = (int)((n - 1) / KILL_PROMPTS) + 1;
    drift_run_info ri = run_info("crash", "http://a/v1?model=m", "{\"temperature\":0}");
    int64_t run;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &ri, &run, &resumed, &err), DRIFT_OK);
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
    assert_int_equal(count_rows(st, "SELECT count(*) FROM (SELECT DISTINCT prompt_rowid, replicate FROM responses)"),
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_new_and_reopen),
        cmocka_unit_test(test_migrate_empty_file),
        cmocka_unit_test(test_refuse_text_file),
        cmocka_unit_test(test_refuse_foreign_sqlite),
        cmocka_unit_test(test_refuse_newer_schema),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_resume_semantics),
        cmocka_unit_test(test_load_scored_interleaved),
        cmocka_unit_test(test_kill_safety),
        cmocka_unit_test(test_run_lock_two_handles),
        cmocka_unit_test(test_run_lock_stale_and_foreign),
        cmocka_unit_test(test_readonly_missing_and_empty),
        cmocka_unit_test(test_readonly_reads_and_writes_nothing),
        cmocka_unit_test(test_readonly_odd_path),
        cmocka_unit_test(test_readonly_beside_a_writer),
        cmocka_unit_test(test_readonly_old_schema_not_migrated),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
