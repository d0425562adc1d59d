/* test_score_cache.c - the score stage's verdict cache (pipeline.h,
 * src/pipeline/score_cache.c) and the cut counts of a run:
 *  - the table: a verdict comes back as it went in (label, value, detail),
 *    keys are compared in full (same hash bucket, other bytes: a miss),
 *    an evaluator error (DRIFT_LABEL_ERROR) is never kept, embeddings come
 *    back bit for bit, the counts say hits and misses, and growing the
 *    table keeps every entry;
 *  - scoring through it: two runs answer the same math prompts, the second
 *    partly with the first's texts; scored with one cache, the second
 *    reuses exactly the verdicts of the repeated texts, and every stored
 *    score (label, value, detail) is what scoring it without a cache gives;
 *  - drift_store_count_run counts answers, failed requests and answers cut
 *    by the token limit (finish_reason "length") per workload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "driftbench/lab.h"
#include "driftbench/store.h"
#include "support/store_builder.h"
#include "driftbench/suite.h"
#include "pipeline/score_internal.h"
#include "store/store_internal.h"

#define NP 6

static void test_table(void **state) {
    (void)state;
    drift_score_cache *c = drift_score_cache_new();
    assert_non_null(c);
    drift_eval_result v = {DRIFT_LABEL_PASS, 1.0, (char *)"{\"rule\":\"strict\"}"}, out;
    score_cache_put(c, "k1", 2, &v);
    assert_int_equal(score_cache_get(c, DRIFT_WL_MATH, "k1", 2, &out), 1);
    assert_int_equal(out.label, DRIFT_LABEL_PASS);
    assert_float_equal(out.value, 1.0, 0);
    assert_string_equal(out.detail_json, "{\"rule\":\"strict\"}");
    drift_eval_result_clear(&out);
    /* a key that is a prefix, or longer: misses */
    assert_int_equal(score_cache_get(c, DRIFT_WL_MATH, "k", 1, &out), 0);
    assert_int_equal(score_cache_get(c, DRIFT_WL_MATH, "k1\0", 3, &out), 0);
    /* errors are never kept */
    drift_eval_result e = {DRIFT_LABEL_ERROR, NAN, (char *)"{\"reason\":\"sandbox_error\"}"};
    score_cache_put(c, "k2", 2, &e);
    assert_int_equal(score_cache_get(c, DRIFT_WL_CODE, "k2", 2, &out), 0);
    /* a second put of a held key keeps the first verdict */
    drift_eval_result f = {DRIFT_LABEL_FAIL, 0.0, NULL};
    score_cache_put(c, "k1", 2, &f);
    assert_int_equal(score_cache_get(c, DRIFT_WL_MATH, "k1", 2, &out), 1);
    assert_int_equal(out.label, DRIFT_LABEL_PASS);
    drift_eval_result_clear(&out);
    /* embeddings: bit for bit; a verdict key is no embedding */
    float vec[3] = {0.1f, -2.5f, 1e-30f}, *got = NULL;
    int dim = 0;
    score_cache_put_vec(c, "e1", 2, vec, 3);
    assert_int_equal(score_cache_get_vec(c, DRIFT_WL_CHAT, "e1", 2, &got, &dim), 1);
    assert_int_equal(dim, 3);
    assert_memory_equal(got, vec, sizeof vec);
    free(got);
    assert_int_equal(score_cache_get_vec(c, DRIFT_WL_CHAT, "k1", 2, &got, &dim), 0);
    drift_score_cache_stats st;
    drift_score_cache_stats_get(c, &st);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.hits[DRIFT_WL_MATH], 2);
    assert_int_equal(st.misses[DRIFT_WL_MATH], 2);
    assert_int_equal(st.misses[DRIFT_WL_CODE], 1);
    assert_int_equal(st.hits[DRIFT_WL_CHAT], 1);
    assert_int_equal(st.misses[DRIFT_WL_CHAT], 1);
    /* growth: 5000 keys (past the first 1024 buckets), all found again */
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "g%d", i);
        drift_eval_result g = {i % 2 ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL, i, NULL};
        score_cache_put(c, key, strlen(key), &g);
    }
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "g%d", i);
        assert_int_equal(score_cache_get(c, DRIFT_WL_MATH, key, strlen(key), &out), 1);
        assert_float_equal(out.value, i, 0);
    }
    drift_score_cache_stats_get(c, &st);
    assert_int_equal(st.entries, 5002);
    drift_score_cache_free(c);
    drift_score_cache_free(NULL);
    drift_score_cache_stats_get(NULL, &st);
    assert_int_equal(st.entries, 0);
}

/* ---- a store with two runs over the same math prompts ---- */

static char dir[64];

/* Stores run `label` with NP math answers: texts[i] (NULL: a failed
 * request), finish_reason "length" where cut[i]. */
static void put_run(drift_store *st, const char *label, const char *const *texts, const int *cut) {
    drift_error err = {0};
    drift_suite *s = NULL;
    assert_int_equal(drift_suite_load("builtin:math?n=6", &s, &err), DRIFT_OK);
    int64_t rowids[NP];
    sb_put_prompts(st, s, rowids);
    drift_run_info info = {0};
    info.label = (char *)label;
    info.target = "embedded:none";
    info.config_json = "{}";
    info.decoding_json = "{\"temperature\":0}";
    info.templates_json = "{}";
    info.suites_json = "[\"builtin:math?n=6\"]";
    info.tool_version = "test";

    int64_t run_id = sb_run_begin(st, &info);
    drift_answer r[NP];
    memset(r, 0, sizeof r);
    for (int i = 0; i < NP; i++) {
        r[i].prompt_rowid = rowids[i];
        r[i].text = (char *)texts[i];
        r[i].error = texts[i] ? NULL : (char *)"refused";
        r[i].finish_reason = cut && cut[i] ? (char *)"length" : (char *)"stop";
        r[i].completion_tokens = 5;
        r[i].prompt_tokens = 9;
        r[i].attempts = 1;
    }
    sb_put_answers(st, run_id, r, NP);
    sb_run_finish(st, run_id);
    drift_suite_free(s);
}

/* The run's scores in response order: "label|value|detail" lines (malloc'd). */
static char *scores_of(drift_store *st, const char *label) {
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st),
                                        "SELECT s.label, s.value, coalesce(s.detail,'') FROM scores s JOIN responses r "
                                        "ON r.id = s.response_id JOIN runs u ON u.id = r.run_id WHERE u.label = ? "
                                        "ORDER BY r.prompt_rowid, r.replicate",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(q, 1, label, -1, SQLITE_TRANSIENT);
    char *out = calloc(1, 65536);
    size_t len = 0;
    while (sqlite3_step(q) == SQLITE_ROW)
        len += (size_t)snprintf(out + len, 65536 - len, "%s|%.17g|%s\n", (const char *)sqlite3_column_text(q, 0),
                                sqlite3_column_double(q, 1), (const char *)sqlite3_column_text(q, 2));
    sqlite3_finalize(q);
    return out;
}

static const char *const TEXTS_A[NP] = {"#### 1", "The answer is 2", "\\boxed{3}", "no number", "#### 5", NULL};
/* B repeats A's texts at 0, 1, 3 and 5 (a failed request), new texts at 2 and 4 */
static const char *const TEXTS_B[NP] = {"#### 1", "The answer is 2", "#### 77", "no number", "so 9", NULL};

static void test_scoring_reuse(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/drift_score_cache_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/a.db", dir);
    snprintf(p2, sizeof p2, "%s/b.db", dir);
    drift_store *st = NULL, *ref = NULL;
    drift_error err = {0};
    st = sb_open_new(p1);
    ref = sb_open_new(p2);
    put_run(st, "a", TEXTS_A, NULL);
    put_run(st, "b", TEXTS_B, NULL);
    put_run(ref, "b", TEXTS_B, NULL);

    drift_score_cache *c = drift_score_cache_new();
    drift_score_opts o;
    drift_score_opts_default(&o);
    o.cache = c;
    drift_score_summary sa, sb, sr;
    assert_int_equal(drift_score_run(st, "a", &o, &sa, &err), DRIFT_OK);
    assert_int_equal(sa.scored[DRIFT_WL_MATH], 5);
    assert_int_equal(sa.reused[DRIFT_WL_MATH], 0);
    assert_int_equal(drift_score_run(st, "b", &o, &sb, &err), DRIFT_OK);
    assert_int_equal(sb.scored[DRIFT_WL_MATH], 5);
    assert_int_equal(sb.reused[DRIFT_WL_MATH], 3); /* texts 0, 1, 3; the failed request is never scored */
    /* without a cache, in another store: the same scores */
    drift_score_opts plain;
    drift_score_opts_default(&plain);
    assert_int_equal(drift_score_run(ref, "b", &plain, &sr, &err), DRIFT_OK);
    assert_int_equal(sr.reused[DRIFT_WL_MATH], 0);
    char *got = scores_of(st, "b"), *want = scores_of(ref, "b");
    assert_true(strlen(want) > 0);
    assert_string_equal(got, want);
    free(got);
    free(want);
    drift_score_cache_stats cs;
    drift_score_cache_stats_get(c, &cs);
    assert_int_equal(cs.hits[DRIFT_WL_MATH], 3);
    assert_int_equal(cs.misses[DRIFT_WL_MATH], 7);
    assert_int_equal(cs.entries, 7);

    /* the same text under another prompt is another key: no reuse */
    drift_score_cache_free(c);
    drift_store_close(st);
    drift_store_close(ref);
}

static void test_count_run(void **state) {
    (void)state;
    char p[128];
    snprintf(p, sizeof p, "%s/cut.db", dir);
    drift_store *st = NULL;
    drift_error err = {0};
    st = sb_open_new(p);
    const int cut[NP] = {1, 0, 1, 0, 0, 1}; /* the last is a failed request: not an answer, not cut */
    put_run(st, "c", TEXTS_A, cut);
    drift_store_run_counts rc;
    assert_int_equal(drift_store_count_run(st, "c", &rc, &err), DRIFT_OK);
    assert_int_equal(rc.answers[DRIFT_WL_MATH], 5);
    assert_int_equal(rc.errors[DRIFT_WL_MATH], 1);
    assert_int_equal(rc.cut[DRIFT_WL_MATH], 2);
    assert_int_equal(rc.answers[DRIFT_WL_CODE], 0);
    assert_int_equal(drift_store_count_run(st, "no such run", &rc, &err), DRIFT_OK);
    assert_int_equal(rc.answers[DRIFT_WL_MATH], 0);
    /* the lab's sum over a spec, and its rendering */
    const char *spec_json = "{\"name\":\"t\",\"suites\":[\"builtin:math?n=6\"],\"baseline\":\"c\","
                            "\"decoding\":{\"max_tokens\":64},"
                            "\"configs\":[{\"label\":\"c\",\"target\":\"embedded:none\",\"dims\":{\"model\":\"m\"}},"
                            "{\"label\":\"missing\",\"target\":\"embedded:none\",\"dims\":{\"model\":\"m\"}}]}";
    drift_matrix_spec *spec = NULL;
    assert_int_equal(drift_matrix_spec_parse(spec_json, strlen(spec_json), "t.json", &spec, &err), DRIFT_OK);
    drift_lab_cuts cuts;
    assert_int_equal(drift_lab_count_cuts(st, spec, &cuts, &err), DRIFT_OK);
    assert_int_equal(cuts.max_tokens, 64);
    assert_int_equal(cuts.answers[DRIFT_WL_MATH], 5);
    assert_int_equal(cuts.cut[DRIFT_WL_MATH], 2);
    char *text = NULL;
    assert_int_equal(drift_lab_cuts_render(&cuts, &text, &err), DRIFT_OK);
    assert_non_null(strstr(text, "math: 2 of 5 answers cut at 64 new tokens (40.00%)  <- above the 2% goal"));
    free(text);
    cuts.cut[DRIFT_WL_MATH] = 0;
    assert_int_equal(drift_lab_cuts_render(&cuts, &text, &err), DRIFT_OK);
    assert_non_null(strstr(text, "every workload is within the 2% goal"));
    free(text);
    drift_matrix_spec_free(spec);
    drift_store_close(st);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_scoring_reuse),
        cmocka_unit_test(test_count_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
