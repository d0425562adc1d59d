/* test_import.c - driftbench import (import.h): the lm-eval --log_samples
 * fixtures (0.4.x rows and the older layout), the real promptfoo output, bad
 * files with the messages they must give, the pair check, and the store
 * step: runs, both verdicts, compare over imported runs, all-or-nothing;
 * ids cut at character boundaries and refused when not UTF-8, files
 * without testIdx, re-imports of changed files (refused, or replaced), and
 * the private stores killed imports leave.
 * Expected counts are read from the fixture files with jansson here, not
 * typed in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driftbench/compare.h"
#include "driftbench/import.h"
#include "driftbench/pipeline.h"
#include "driftbench/store.h"
#include "util/util.h"

/* opts (NULL: the defaults) with our evaluators' scoring, as the CLI gives
 * it (the import layer does not call the pipeline itself). */
static const drift_import_store_opts *with_ours(drift_import_store_opts *o) {
    static drift_import_store_opts def;
    if (!o) {
        drift_import_store_opts_default(&def);
        o = &def;
    }
    o->score = drift_import_score;
    return o;
}

#define DATE "2026-12-02T05-40-00.000000"
#define F16 "lmeval/qwen2-7m-f16/samples_gsm8k_" DATE ".jsonl"
#define Q40 "lmeval/qwen2-7m-q4_0/samples_gsm8k_" DATE ".jsonl"
#define OLD "lmeval/qwen2-7m-f16-v0.4.0/samples_gsm8k_" DATE ".jsonl"
#define HE16 "lmeval/qwen2-7m-f16/samples_humaneval_" DATE ".jsonl"
#define PF "promptfoo/results.json"

static const char *fixture(const char *file) {
    static char buf[8][1024];
    static int k;
    const char *src = getenv("DRIFT_SOURCE");
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/tests/data/import/%s", src ? src : DRIFT_SOURCE_DIR, file);
    return p;
}

static char *slurp(const char *path) {
    char *d = NULL;
    size_t n = 0;
    drift_error err = {0};
    assert_int_equal(util_read_file(path, &d, &n, &err), DRIFT_OK);
    return d;
}

/* Rows of an lm-eval file (parsed), for expectations. */
static json_t *rows_of(const char *path) {
    char *d = slurp(path);
    json_t *a = json_array();
    for (char *save = NULL, *l = strtok_r(d, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        json_array_append_new(a, json_loads(l, 0, NULL));
    free(d);
    return a;
}

/* strict-match exact_match of doc_id id in rows (-1 absent). */
static int tool_pass(json_t *rows, long id) {
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        json_t *f = json_object_get(r, "filter");
        if (json_integer_value(json_object_get(r, "doc_id")) == id && (!f || !strcmp(json_string_value(f), "strict-match")))
            return json_number_value(json_object_get(r, "exact_match")) == 1.0;
    }
    return -1;
}

static drift_import_set *load(const char *path, const drift_import_opts *o) {
    drift_import_set *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_import_load(path, o, &s, &err);
    if (rc) fprintf(stderr, "%s: %s\n", path, err.msg);
    assert_int_equal(rc, DRIFT_OK);
    return s;
}

static const drift_import_sample *sample(const drift_import_run *r, const char *id) {
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->samples[i].prompt_id, id)) return &r->samples[i];
    return NULL;
}

static void test_lmeval_gsm8k(void **state) {
    (void)state;
    drift_import_set *s = load(fixture(F16), NULL);
    json_t *rows = rows_of(fixture(F16));
    assert_int_equal(s->format, DRIFT_IMPORT_LMEVAL);
    assert_int_equal(s->n, 1);
    const drift_import_run *r = &s->runs[0];
    assert_int_equal(r->n, json_array_size(rows) / 2); /* two filters per document */
    assert_string_equal(r->label, "qwen2-7m-f16/gsm8k");
    assert_string_equal(r->suite, "lm-eval:gsm8k");
    assert_string_equal(r->evaluator, "lm_eval:exact_match,strict-match");
    assert_string_equal(r->framework, "lm-eval");
    assert_non_null(strstr(r->decoding_json, "\"until\""));
    for (size_t i = 0; i < r->n; i++) {
        const drift_import_sample *p = &r->samples[i];
        assert_int_equal(p->workload, DRIFT_WL_MATH);
        assert_true(p->ours);
        assert_non_null(p->answer);
        assert_null(p->error);
        assert_int_equal(strlen(p->doc_hash), 64);
        assert_int_equal(strlen(p->hash), 16);
        int want = tool_pass(rows, strtol(p->prompt_id, NULL, 10));
        assert_int_equal(p->verdict, want ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL);
        assert_true(p->where >= 1 && p->where <= (long)(json_array_size(rows) / 2)); /* the strict block comes first */
    }
    /* document 0: the reference is the number after "####" of the doc's answer */
    json_t *doc0 = json_object_get(json_array_get(rows, 0), "doc");
    const char *ans = json_string_value(json_object_get(doc0, "answer"));
    const drift_import_sample *p0 = sample(r, "0");
    assert_non_null(p0);
    char want[128];
    snprintf(want, sizeof want, "{\"answer\":\"%s\"}", strstr(ans, "#### ") + 5);
    assert_string_equal(p0->reference_json, want);
    assert_string_equal(p0->input, json_string_value(json_object_get(doc0, "question")));
    assert_string_equal(p0->answer,
                        json_string_value(json_array_get(json_array_get(json_object_get(json_array_get(rows, 0), "resps"), 0), 0)));
    json_decref(rows);
    drift_import_set_free(s);

    /* the other filter's rows on request; an unknown one lists those present */
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.filter = "flexible-extract";
    s = load(fixture(F16), &o);
    assert_string_equal(s->runs[0].evaluator, "lm_eval:exact_match,flexible-extract");
    drift_import_set_free(s);
    o.filter = "nope";
    drift_error err = {0};
    assert_int_equal(drift_import_load(fixture(F16), &o, &s, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "no rows of filter nope"));
    assert_non_null(strstr(err.msg, "strict-match"));
    assert_null(s);
}

static void test_lmeval_old_and_pair(void **state) {
    (void)state;
    drift_import_set *a = load(fixture(F16), NULL), *old = load(fixture(OLD), NULL), *b = load(fixture(Q40), NULL);
    const drift_import_run *ro = &old->runs[0];
    assert_int_equal(ro->n, a->runs[0].n); /* the first filter's block only */
    assert_string_equal(ro->evaluator, "lm_eval:exact_match");
    for (size_t i = 0; i < ro->n; i++) assert_null(ro->samples[i].doc_hash);
    drift_error err = {0};
    /* same documents: old (no doc_hash) against new pairs by content */
    assert_int_equal(drift_import_check_pair(&a->runs[0], ro, &err), DRIFT_OK);
    assert_int_equal(drift_import_check_pair(&a->runs[0], &b->runs[0], &err), DRIFT_OK);
    drift_import_set_free(a);
    drift_import_set_free(old);
    drift_import_set_free(b);
}

/* The f16 file's text with document 3's question changed (and its doc_hash,
 * as the harness would have written it) or its rows dropped. */
static char *variant(int drop) {
    json_t *rows = rows_of(fixture(F16));
    util_buf b = {0};
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        if (json_integer_value(json_object_get(r, "doc_id")) == 3) {
            if (drop) continue;
            json_object_set_new(json_object_get(r, "doc"), "question", json_string("How many? (edited)"));
            json_object_set_new(r, "doc_hash", json_string("0000000000000000000000000000000000000000000000000000000000000000"));
        }
        char *t = json_dumps(r, JSON_COMPACT);
        buf_printf(&b, "%s\n", t);
        free(t);
    }
    json_decref(rows);
    return buf_steal(&b);
}

static void test_pair_mismatch(void **state) {
    (void)state;
    drift_import_set *a = load(fixture(F16), NULL), *e = NULL, *d = NULL;
    drift_error err = {0};
    char *edited = variant(0), *dropped = variant(1);
    assert_int_equal(drift_import_parse("edited/samples_gsm8k_2026-01-01.jsonl", edited, strlen(edited), NULL, &e, &err), DRIFT_OK);
    assert_int_equal(drift_import_parse("dropped/samples_gsm8k_2026-01-01.jsonl", dropped, strlen(dropped), NULL, &d, &err),
                     DRIFT_OK);
    assert_int_equal(drift_import_check_pair(&a->runs[0], &e->runs[0], &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, fixture(F16)));
    assert_non_null(strstr(err.msg, "edited/samples_gsm8k_2026-01-01.jsonl"));
    assert_non_null(strstr(err.msg, "document 3 of lm-eval:gsm8k differs (doc_hash"));
    assert_int_equal(drift_import_check_pair(&d->runs[0], &a->runs[0], &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "document 3 of lm-eval:gsm8k is only in"));
    assert_non_null(strstr(err.msg, "dropped/samples_gsm8k_2026-01-01.jsonl and"));
    free(edited);
    free(dropped);
    drift_import_set_free(a);
    drift_import_set_free(e);
    drift_import_set_free(d);
}

static void test_lmeval_humaneval(void **state) {
    (void)state;
    drift_import_set *s = load(fixture(HE16), NULL);
    const drift_import_run *r = &s->runs[0];
    assert_string_equal(r->evaluator, "lm_eval:pass@1,create_test");
    for (size_t i = 0; i < r->n; i++) {
        assert_int_equal(r->samples[i].workload, DRIFT_WL_CODE);
        assert_true(r->samples[i].ours);
        json_t *ref = json_loads(r->samples[i].reference_json, 0, NULL);
        assert_true(json_is_string(json_object_get(ref, "entry_point")));
        assert_true(json_is_string(json_object_get(ref, "test")));
        assert_true(json_is_string(json_object_get(ref, "prompt")));
        /* the raw completion, not the filter's prompt + completion */
        assert_null(strstr(r->samples[i].answer, json_string_value(json_object_get(ref, "prompt"))));
        /* compare names who ran the harness's code verdicts */
        assert_non_null(strstr(r->samples[i].detail_json, "\"sandbox\":\"lm-eval's own (not DriftBench's)\""));
        json_decref(ref);
    }
    drift_import_set_free(s);
}

static void expect_bad(const char *name, const char *text, drift_status code, const char *msg) {
    drift_import_set *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_import_parse(name, text, strlen(text), NULL, &s, &err);
    if (rc != code || !strstr(err.msg, msg)) fprintf(stderr, "got %d '%s', want %d '%s'\n", rc, err.msg, code, msg);
    assert_int_equal(rc, code);
    assert_non_null(strstr(err.msg, msg));
    assert_null(s);
}

#define ROW(id, em) "{\"doc_id\":" #id ",\"doc\":{\"question\":\"q\",\"answer\":\"#### 1\"},\"target\":\"#### 1\",\"resps\":[[\"#### 1\"]],\"filtered_resps\":[\"1\"],\"filter\":\"strict-match\",\"metrics\":[\"exact_match\"],\"exact_match\":" #em "}\n"

static void test_bad_files(void **state) {
    (void)state;
    const char *N = "m/samples_gsm8k_2026.jsonl";
    expect_bad(N, "", DRIFT_ERR_PARSE, "empty file");
    expect_bad(N, "hello\n", DRIFT_ERR_PARSE, "m/samples_gsm8k_2026.jsonl:1: not JSON");
    expect_bad(N, ROW(0, 1) "\n" ROW(1, 0) "{\"doc_id\":2,\n", DRIFT_ERR_PARSE, "samples_gsm8k_2026.jsonl:4: not a JSON object");
    expect_bad(N, "{\"doc\":{}}\n", DRIFT_ERR_PARSE, ":1: field doc_id: missing or not an integer");
    expect_bad(N, ROW(0, 1) ROW(1, 0.5), DRIFT_ERR_PARSE, ":2: field \"exact_match\": 0.5 is not pass/fail");
    expect_bad(N, ROW(0, 1) ROW(0, 0), DRIFT_ERR_PARSE, ":2: doc_id 0 appears twice for filter strict-match (first on line 1)");
    expect_bad(N, "{\"doc_id\":0,\"doc\":{\"question\":\"q\"},\"resps\":[[\"a\"]],\"acc\":1}\n"
                  "{\"doc_id\":1,\"doc\":{\"question\":\"q\"},\"resps\":{},\"acc\":1}\n",
               DRIFT_ERR_PARSE, ":2: field resps: missing or not an array");
    expect_bad(N, "{\"doc_id\":0,\"doc\":[],\"resps\":[[\"a\"]],\"acc\":1}\n", DRIFT_ERR_PARSE,
               ":1: field doc: missing or not an object");
    expect_bad(N, "{\"doc_id\":0,\"doc\":{},\"resps\":[[\"a\"]],\"bleu\":0.3}\n", DRIFT_ERR_PARSE,
               ":1: no pass/fail metric in the row");
    expect_bad("m/samples_arc_easy_2026.jsonl", "{\"doc_id\":0,\"doc\":{\"q\":1},\"resps\":[[\"a\"]],\"acc\":1}\n",
               DRIFT_ERR_INVALID, "task arc_easy: DriftBench does not know its workload");
    expect_bad("r.json", "{\"results\":{\"version\":3,\"results\":[]}}", DRIFT_ERR_PARSE, "results.results is empty");
    expect_bad("r.json", "{\"results\":{\"results\":[{\"provider\":{\"id\":\"p\"},\"prompt\":{\"raw\":\"x\"},\"testIdx\":0}]}}",
               DRIFT_ERR_PARSE, "r.json: results[0]: field success: missing or not a boolean");
    expect_bad("r.json", "{\"results\":{\"results\":[{\"provider\":{},\"prompt\":{\"raw\":\"x\"}}]}}", DRIFT_ERR_PARSE,
               "results[0]: field provider: no label or id");
#define PFR(t) "{\"provider\":{\"id\":\"p\"},\"prompt\":{\"raw\":\"x\"},\"testIdx\":" #t ",\"success\":true,\"response\":{\"output\":\"#### 1\"},\"testCase\":{\"metadata\":{\"workload\":\"math\"}}}"
    expect_bad("r.json", "{\"results\":{\"results\":[" PFR(0) "," PFR(1) "," PFR(0) "]}}", DRIFT_ERR_PARSE,
               "r.json: results[2]: test 0 of provider p appears twice (first at results[0])");
    expect_bad("r.json", "{\"results\":{\"results\":[" PFR(0) ",{\"provider\":\"p\",\"prompt\":{\"raw\":\"x\"},\"testIdx\":1,"
               "\"success\":false,\"response\":{}}]}}", DRIFT_ERR_PARSE, "results[1]: field response.output: missing");

    /* a pass/fail task the harness names, with --workload */
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.workload = DRIFT_WL_LONG;
    drift_import_set *s = NULL;
    drift_error err = {0};
    const char *mc = "{\"doc_id\":0,\"doc\":{\"q\":1},\"arguments\":{\"gen_args_0\":{\"arg_0\":\"Q\",\"arg_1\":\" yes\"},"
                     "\"gen_args_1\":{\"arg_0\":\"Q\",\"arg_1\":\" no\"}},\"resps\":[[[-2.5,false]],[[-0.5,true]]],"
                     "\"filtered_resps\":[[-2.5,false],[-0.5,true]],\"target\":\"1\",\"acc\":true}\n";
    assert_int_equal(drift_import_parse("m/samples_boolq_2026.jsonl", mc, strlen(mc), &o, &s, &err), DRIFT_OK);
    assert_string_equal(s->runs[0].samples[0].answer, " no"); /* the higher loglikelihood */
    assert_int_equal(s->runs[0].samples[0].verdict, DRIFT_LABEL_PASS);
    assert_false(s->runs[0].samples[0].ours);
    assert_string_equal(s->runs[0].evaluator, "lm_eval:acc");
    drift_import_set_free(s);
}

static void test_promptfoo(void **state) {
    (void)state;
    drift_import_set *s = load(fixture(PF), NULL);
    char *text = slurp(fixture(PF));
    json_t *root = json_loads(text, 0, NULL);
    free(text);
    json_t *res = json_object_get(json_object_get(root, "results"), "results");
    assert_int_equal(s->format, DRIFT_IMPORT_PROMPTFOO);
    assert_int_equal(s->n, 2);
    size_t total = 0;
    for (size_t k = 0; k < s->n; k++) {
        const drift_import_run *r = &s->runs[k];
        assert_string_equal(r->suite, "promptfoo:driftbench import fixture");
        assert_string_equal(r->evaluator, "promptfoo");
        total += r->n;
        for (size_t i = 0; i < r->n; i++) {
            const drift_import_sample *p = &r->samples[i];
            json_t *e = json_array_get(res, (size_t)p->where);
            assert_string_equal(json_string_value(json_object_get(json_object_get(e, "provider"), "label")), r->label);
            char id[32];
            snprintf(id, sizeof id, "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(e, "testIdx")));
            assert_string_equal(p->prompt_id, id);
            assert_int_equal(p->workload, DRIFT_WL_MATH);
            if (json_integer_value(json_object_get(e, "failureReason")) == 2) {
                assert_null(p->answer);
                assert_non_null(strstr(p->error, "promptfoo: "));
            } else {
                assert_string_equal(p->answer, json_string_value(json_object_get(json_object_get(e, "response"), "output")));
                assert_int_equal(p->verdict, json_is_true(json_object_get(e, "success")) ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL);
            }
        }
    }
    assert_int_equal(total, json_array_size(res));
    assert_int_equal(drift_import_check_pair(&s->runs[0], &s->runs[1], &(drift_error){0}), DRIFT_OK);
    json_decref(root);
    drift_import_set_free(s);
}

/* ---- the store step ---- */
static char tmpdir[64];

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_import.XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static size_t n_runs(drift_store *st) {
    drift_run_info *ri = NULL;
    size_t n = 0;
    assert_int_equal(drift_store_run_list(st, &ri, &n, &(drift_error){0}), DRIFT_OK);
    drift_run_info_array_free(ri, n);
    return n;
}

static void test_store_and_compare(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/a.db", tmpdir);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_OK);
    drift_import_set *sets[2] = {load(fixture(F16), NULL), load(fixture(Q40), NULL)};
    drift_import_summary *sum = NULL;
    size_t n_sum = 0;
    drift_status rc = drift_import_store(st, sets, 2, NULL, 0, with_ours(NULL), &sum, &n_sum, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(n_sum, 2);
    json_t *ra = rows_of(fixture(F16)), *rb = rows_of(fixture(Q40));
    long want_flips = 0, c2i = 0;
    for (size_t k = 0; k < sets[0]->runs[0].n; k++) {
        long id = strtol(sets[0]->runs[0].samples[k].prompt_id, NULL, 10);
        int x = tool_pass(ra, id), y = tool_pass(rb, id);
        want_flips += x != y;
        c2i += x && !y;
    }
    for (size_t i = 0; i < 2; i++) {
        assert_string_equal(sum[i].ours_evaluator, "math");
        assert_int_equal(sum[i].answers, sets[i]->runs[0].n);
        /* our math evaluator and the harness's strict-match agree on these answers */
        assert_int_equal(sum[i].agree, sum[i].ours_scored);
        assert_int_equal(sum[i].ours_scored, sum[i].answers);
    }
    drift_comparison *c = NULL;
    drift_compare_opts co;
    drift_compare_opts_default(&co);
    assert_int_equal(drift_compare_runs(st, "qwen2-7m-f16/gsm8k", "qwen2-7m-q4_0/gsm8k", &co, &c, &err), DRIFT_OK);
    assert_true(want_flips > 0);
    assert_int_equal(c->wl[DRIFT_WL_MATH].n, (long)sets[0]->runs[0].n);
    assert_int_equal(c->wl[DRIFT_WL_MATH].flips, want_flips);
    assert_int_equal(c->wl[DRIFT_WL_MATH].correct_to_incorrect, c2i);
    drift_comparison_free(c);
    free(sum);
    json_decref(ra);
    json_decref(rb);

    /* the same import again: unchanged (merge skips identical runs) */
    size_t before = n_runs(st);
    assert_int_equal(drift_import_store(st, sets, 1, NULL, 0, with_ours(NULL), NULL, NULL, &err), DRIFT_OK);
    assert_int_equal(n_runs(st), before);

    /* a run of the task with another document 3: refused, naming both files; nothing stored */
    char *edited = variant(0), *dropped = variant(1);
    drift_import_set *e = NULL, *d = NULL;
    assert_int_equal(drift_import_parse("edited/samples_gsm8k_2026-01-01.jsonl", edited, strlen(edited), NULL, &e, &err), DRIFT_OK);
    assert_int_equal(drift_import_parse("dropped/samples_gsm8k_2026-01-01.jsonl", dropped, strlen(dropped), NULL, &d, &err),
                     DRIFT_OK);
    drift_import_set *both[2] = {e, d};
    const char *labels[2] = {"edited", "dropped"};
    rc = drift_import_store(st, both, 1, labels, 1, with_ours(NULL), NULL, NULL, &err);
    assert_int_equal(rc, DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "edited/samples_gsm8k_2026-01-01.jsonl (line"));
    assert_non_null(strstr(err.msg, fixture(F16)));
    assert_non_null(strstr(err.msg, "document 3"));
    rc = drift_import_store(st, both + 1, 1, labels + 1, 1, with_ours(NULL), NULL, NULL, &err);
    assert_int_equal(rc, DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "document 3 of lm-eval:gsm8k is only in"));
    assert_int_equal(n_runs(st), before);
    /* --partial lets the shorter run in; two runs under one label are refused */
    drift_import_store_opts so;
    drift_import_store_opts_default(&so);
    so.partial = 1;
    rc = drift_import_store(st, both + 1, 1, labels + 1, 1, with_ours(&so), NULL, NULL, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(n_runs(st), before + 1);
    const char *same[2] = {"x", "x"};
    drift_import_set *two[2] = {sets[0], sets[1]};
    assert_int_equal(drift_import_store(st, two, 2, same, 2, with_ours(NULL), NULL, NULL, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "two runs would be stored as 'x'"));
    free(edited);
    free(dropped);
    drift_import_set_free(e);
    drift_import_set_free(d);
    drift_import_set_free(sets[0]);
    drift_import_set_free(sets[1]);
    drift_store_close(st);
}

/* The tool says FAIL on a right answer: ours counts PASS unless the tool's
 * verdict is asked for; the summary sets the two side by side. */
static void test_verdicts_side_by_side(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/v.db", tmpdir);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_OK);
    const char *text = "{\"doc_id\":0,\"doc\":{\"question\":\"2+2?\",\"answer\":\"2+2=4\\n#### 4\"},\"target\":\"2+2=4\\n#### 4\","
                       "\"resps\":[[\" 2+2=4\\n#### 4\"]],\"filtered_resps\":[\"4\"],\"filter\":\"strict-match\","
                       "\"metrics\":[\"exact_match\"],\"exact_match\":0.0}\n"
                       "{\"doc_id\":1,\"doc\":{\"question\":\"3+3?\",\"answer\":\"#### 6\"},\"target\":\"#### 6\","
                       "\"resps\":[[\" #### 5\"]],\"filtered_resps\":[\"5\"],\"filter\":\"strict-match\","
                       "\"metrics\":[\"exact_match\"],\"exact_match\":0.0}\n";
    drift_import_set *s = NULL;
    assert_int_equal(drift_import_parse("m/samples_gsm8k_1.jsonl", text, strlen(text), NULL, &s, &err), DRIFT_OK);
    drift_import_summary *sum = NULL;
    size_t n = 0;
    const char *l1[1] = {"ours"};
    assert_int_equal(drift_import_store(st, &s, 1, l1, 1, with_ours(NULL), &sum, &n, &err), DRIFT_OK);
    assert_int_equal(sum[0].tool_fail, 2);
    assert_int_equal(sum[0].ours_pass, 1);
    assert_int_equal(sum[0].tool_fail_ours_pass, 1);
    assert_int_equal(sum[0].agree, 1);
    free(sum);
    drift_import_store_opts so;
    drift_import_store_opts_default(&so);
    so.verdict = DRIFT_IMPORT_VERDICT_TOOL;
    const char *l2[1] = {"tool"};
    assert_int_equal(drift_import_store(st, &s, 1, l2, 1, with_ours(&so), NULL, NULL, &err), DRIFT_OK);
    for (int k = 0; k < 2; k++) {
        drift_run_info ri = {0};
        drift_scored_set set = {0};
        assert_int_equal(drift_store_run_get(st, k ? "tool" : "ours", &ri, &err), DRIFT_OK);
        assert_int_equal(drift_store_load_scored(st, ri.id, &set, &err), DRIFT_OK);
        assert_int_equal(set.n, 2);
        assert_string_equal(set.rows[0].evaluator, k ? "lm_eval:exact_match,strict-match" : "math");
        assert_int_equal(set.rows[0].label, k ? DRIFT_LABEL_FAIL : DRIFT_LABEL_PASS);
        drift_scored_set_clear(&set);
        drift_run_info_clear(&ri);
    }
    drift_import_set_free(s);
    drift_store_close(st);
}

/* HumanEval: our code evaluator runs the completions with the documents'
 * tests (when a sandbox works here) and agrees with the harness's pass@1;
 * without one, the summary says why and the harness's verdict stands. */
static void test_store_humaneval(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/h.db", tmpdir);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_OK);
    drift_import_set *s = load(fixture(HE16), NULL);
    drift_import_summary *sum = NULL;
    size_t n = 0;
    drift_status rc = drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), &sum, &n, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(sum[0].answers, s->runs[0].n);
    json_t *rows = rows_of(fixture(HE16));
    size_t want_pass = 0, i;
    json_t *r;
    json_array_foreach(rows, i, r) want_pass += json_number_value(json_object_get(r, "pass@1")) == 1.0;
    assert_int_equal(sum[0].tool_pass, want_pass);
    if (sum[0].ours_evaluator[0]) {
        assert_string_equal(sum[0].ours_evaluator, "code-pass@1");
        assert_int_equal(sum[0].ours_scored + sum[0].ours_error, sum[0].answers);
        assert_int_equal(sum[0].agree, sum[0].ours_scored);
    } else {
        fprintf(stderr, "no sandbox here: %s\n", sum[0].ours_note);
        assert_true(sum[0].ours_note[0] != 0);
    }
    json_decref(rows);
    free(sum);
    drift_import_set_free(s);
    drift_store_close(st);
}

/* ---- issue 34: ids well-formed, import exact, no private store left ---- */

/* A promptfoo result as JSON text (provider p, test t of template pid). */
static void pf_result(util_buf *b, int p, int t, const char *pid, int with_idx, const char *var) {
    buf_printf(b, "%s{\"provider\":{\"id\":\"m%d\",\"label\":\"s%d\"},\"prompt\":{\"raw\":\"Q %s %s\"},",
               b->data[b->len - 1] == '[' ? "" : ",", p, p, var, pid ? pid : "-");
    if (pid) buf_printf(b, "\"promptId\":\"%s\",", pid);
    if (with_idx) buf_printf(b, "\"testIdx\":%d,", t);
    buf_printf(b, "\"vars\":{\"v\":\"%s\",\"answer\":\"%d\"},\"response\":{\"output\":\"%d\"},\"success\":true}",
               var, var[0], t);
}

static drift_import_set *pf_parse(const char *text, drift_status want, drift_error *err) {
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.workload = DRIFT_WL_MATH;
    drift_import_set *s = NULL;
    drift_status rc = drift_import_parse("pf.json", text, strlen(text), &o, &s, err);
    if (rc != want) fprintf(stderr, "%s\n", err->msg);
    assert_int_equal(rc, want);
    return s;
}

/* promptIds whose 8th byte falls inside a character are cut before it (ids
 * stay valid UTF-8, as PostgreSQL needs); a file without testIdx numbers its
 * tests by their vars, in the order they first appear, the same test of two
 * providers alike. */
static void test_promptfoo_ids(void **state) {
    (void)state;
    util_buf b = {0};
    buf_puts(&b, "{\"results\":{\"version\":3,\"results\":[");
    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++) {
            /* four euro signs: 12 bytes */
            pf_result(&b, p, t, "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 1, "a");
            pf_result(&b, p, t, "abcdefghij", 1, "a");
        }
    buf_puts(&b, "]}}");
    drift_error err = {0};
    drift_import_set *s = pf_parse(b.data, DRIFT_OK, &err);
    assert_int_equal(s->n, 2);
    assert_non_null(sample(&s->runs[0], "1@\xe2\x82\xac\xe2\x82\xac")); /* 6 bytes: the third euro would pass 8 */
    assert_non_null(sample(&s->runs[1], "0@abcdefgh"));
    drift_import_set_free(s);
    buf_free(&b);

    buf_puts(&b, "{\"results\":{\"version\":3,\"results\":[");
    static const char *const vars[] = {"x", "y", "x", "z", "y"}; /* x, y, z: tests 0, 1, 2 */
    for (int p = 0; p < 2; p++)
        for (int i = p; i < 4 + p; i++) pf_result(&b, p, i, NULL, 0, vars[i]);
    buf_puts(&b, "]}}");
    s = pf_parse(b.data, DRIFT_ERR_PARSE, &err); /* provider 0 has x twice */
    assert_null(s);
    assert_non_null(strstr(err.msg, "test 0 of provider s0 appears twice"));
    buf_free(&b);
    buf_puts(&b, "{\"results\":{\"version\":3,\"results\":[");
    static const char *const order[2][3] = {{"x", "y", "z"}, {"z", "x", "y"}};
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < 3; i++) pf_result(&b, p, i, NULL, 0, order[p][i]);
    buf_puts(&b, "]}}");
    s = pf_parse(b.data, DRIFT_OK, &err);
    assert_string_equal(sample(&s->runs[1], "2")->input, "Q z -"); /* z: first seen third */
    assert_int_equal(drift_import_check_pair(&s->runs[0], &s->runs[1], &err), DRIFT_OK);
    drift_import_set_free(s);
    buf_free(&b);
}

/* An id that is not valid UTF-8 (here from a directory name) is refused
 * naming the file; so is such a label. */
static void test_invalid_utf8_ids(void **state) {
    (void)state;
    char *data = slurp(fixture(F16));
    drift_import_set *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_import_parse("bad\xff/samples_gsm8k_2026-01-01.jsonl", data, strlen(data), NULL, &s, &err),
                     DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "is not valid UTF-8"));
    assert_non_null(strstr(err.msg, "/samples_gsm8k_2026-01-01.jsonl: the file's path"));
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.model = "m";
    assert_int_equal(drift_import_parse("ok/samples_gsm8k_2026-01-01.jsonl", data, strlen(data), &o, &s, &err),
                     DRIFT_OK);
    char path[128];
    snprintf(path, sizeof path, "%s/u.db", tmpdir);
    drift_store *st = NULL;
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_OK);
    const char *label = "lab\xc3";
    assert_int_equal(drift_import_store(st, &s, 1, &label, 1, with_ours(NULL), NULL, NULL, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "label 'lab\xef\xbf\xbd' is not valid UTF-8"));
    assert_int_equal(n_runs(st), 0);
    drift_store_close(st);
    drift_import_set_free(s);
    free(data);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* The stored text of the answer to prompt pid of run label. */
static char *stored_answer(drift_store *st, const char *label, const char *pid) {
    drift_run_info ri = {0};
    drift_error err = {0};
    assert_int_equal(drift_store_run_get(st, label, &ri, &err), DRIFT_OK);
    drift_scored_set set = {0};
    assert_int_equal(drift_store_load_scored(st, ri.id, &set, &err), DRIFT_OK);
    char *out = NULL;
    for (size_t i = 0; i < set.n && !out; i++)
        if (!strcmp(set.rows[i].prompt_id, pid)) {
            drift_prompt p = {0};
            drift_answer a = {0};
            assert_int_equal(drift_store_response_get(st, set.rows[i].response_id, &a, &p, &err), DRIFT_OK);
            out = util_strdup(a.text);
            drift_answer_clear(&a);
            drift_prompt_clear(&p);
        }
    drift_scored_set_clear(&set);
    drift_run_info_clear(&ri);
    return out;
}

/* A file imported again: the same content changes nothing; other content
 * at the same path is refused naming the file and the run, unless replace,
 * which replaces the stored runs (their answers and the prompts only they
 * used); a run imported before contents were recorded is refused too. */
static void test_reimport_changed(void **state) {
    (void)state;
    char db[128], file[128];
    snprintf(db, sizeof db, "%s/re.db", tmpdir);
    snprintf(file, sizeof file, "%s/results.json", tmpdir);
    char *orig = slurp(fixture(PF));
    write_text(file, orig);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    drift_import_set *s = load(file, NULL);
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), NULL, NULL, &err), DRIFT_OK);
    drift_import_set_free(s);
    drift_import_summary *sum = NULL;
    size_t n_sum = 0;
    s = load(file, NULL);
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), &sum, &n_sum, &err), DRIFT_OK);
    assert_int_equal(n_sum, 2);
    assert_true(sum[0].already && sum[1].already && !sum[0].replaced);
    free(sum);
    drift_import_set_free(s);

    /* test 0's answer and prompt changed (one provider's answer, both providers' prompt) */
    json_t *root = json_loads(orig, 0, NULL);
    json_t *list = json_object_get(json_object_get(root, "results"), "results"), *r;
    size_t i;
    const char *label0 = NULL;
    json_array_foreach(list, i, r) {
        if (json_integer_value(json_object_get(r, "testIdx")) != 0) continue;
        json_t *pr = json_object_get(r, "prompt");
        json_object_set_new(pr, "raw", json_string("an edited prompt"));
        if (!label0) {
            label0 = json_string_value(json_object_get(json_object_get(r, "provider"), "label"));
            json_object_set_new(json_object_get(r, "response"), "output", json_string("an edited answer"));
        }
    }
    char *changed = json_dumps(root, JSON_INDENT(1));
    write_text(file, changed);
    s = load(file, NULL);
    size_t before = n_runs(st);
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), NULL, NULL, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, file));
    assert_non_null(strstr(err.msg, "changed since it was imported as run"));
    char *was = stored_answer(st, label0, "0");
    assert_string_not_equal(was, "an edited answer");
    drift_import_store_opts so;
    drift_import_store_opts_default(&so);
    so.replace = 1;
    drift_status rc = drift_import_store(st, &s, 1, NULL, 0, with_ours(&so), &sum, &n_sum, &err);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_true(sum[0].replaced && sum[1].replaced && !sum[0].already);
    free(sum);
    assert_int_equal(n_runs(st), before);
    char *now = stored_answer(st, label0, "0");
    assert_string_equal(now, "an edited answer");
    drift_import_set_free(s);
    s = load(file, NULL); /* and now it is the same import */
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), NULL, NULL, &err), DRIFT_OK);
    drift_import_set_free(s);
    drift_store_close(st);

    /* a run stored without a recorded content: cannot tell, refused; replace works */
    sqlite3 *raw = NULL;
    assert_int_equal(sqlite3_open(db, &raw), SQLITE_OK);
    assert_int_equal(sqlite3_exec(raw, "UPDATE runs SET templates='{}'", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(raw);
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    s = load(file, NULL);
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), NULL, NULL, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "did not record the file's content"));
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(&so), NULL, NULL, &err), DRIFT_OK);
    /* the same file with another --config: refused, or replaced */
    drift_import_store_opts cfg;
    drift_import_store_opts_default(&cfg);
    cfg.config = "hardware=h100";
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(&cfg), NULL, NULL, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "from this file, with another configuration"));
    cfg.replace = 1;
    assert_int_equal(drift_import_store(st, &s, 1, NULL, 0, with_ours(&cfg), NULL, NULL, &err), DRIFT_OK);
    drift_run_info ri = {0};
    assert_int_equal(drift_store_run_get(st, label0, &ri, &err), DRIFT_OK);
    assert_non_null(strstr(ri.config_json, "\"hardware\":\"h100\""));
    drift_run_info_clear(&ri);
    drift_import_set_free(s);
    drift_store_close(st);
    free(was);
    free(now);
    free(changed);
    json_decref(root);
    free(orig);
}

/* A pid that is gone: a child that exited and was reaped. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) _exit(0);
    assert_int_equal(waitpid(p, NULL, 0), p);
    return p;
}

/* Private stores a killed import left in $TMPDIR are removed by the next
 * import; those of live imports (a live pid, or a lock held: another pid
 * namespace), symlinks and what they point to are left alone; the import
 * leaves none of its own. */
static void test_private_store_cleanup(void **state) {
    (void)state;
    char tmp[128], path[512], target[256];
    snprintf(tmp, sizeof tmp, "%s/tmp", tmpdir);
    assert_int_equal(mkdir(tmp, 0700), 0);
    pid_t dead = dead_pid();
    snprintf(path, sizeof path, "%s/driftbench-import-%d-AbCdEf", tmp, (int)dead); /* stale */
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/driftbench-import-%d-AbCdEf/import.db", tmp, (int)dead);
    write_text(path, "x");
    snprintf(path, sizeof path, "%s/driftbench-import-1-live01", tmp); /* pid 1 is alive */
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/driftbench-import-%d-locked", tmp, (int)dead); /* held by a live import */
    assert_int_equal(mkdir(path, 0700), 0);
    int held = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(held >= 0);
    assert_int_equal(flock(held, LOCK_EX), 0);
    snprintf(target, sizeof target, "%s/victim", tmpdir); /* a symlink to someone's directory */
    assert_int_equal(mkdir(target, 0700), 0);
    snprintf(path, sizeof path, "%s/victim/keep", tmpdir);
    write_text(path, "keep");
    snprintf(path, sizeof path, "%s/driftbench-import-%d-SymLnk", tmp, (int)dead);
    assert_int_equal(symlink(target, path), 0);

    const char *old = getenv("TMPDIR");
    char *saved = old ? util_strdup(old) : NULL;
    setenv("TMPDIR", tmp, 1);
    char db[128];
    snprintf(db, sizeof db, "%s/c.db", tmpdir);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    drift_import_set *s = load(fixture(F16), NULL);
    drift_status rc = drift_import_store(st, &s, 1, NULL, 0, with_ours(NULL), NULL, NULL, &err);
    if (saved) setenv("TMPDIR", saved, 1);
    else unsetenv("TMPDIR");
    free(saved);
    if (rc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    drift_import_set_free(s);
    drift_store_close(st);

    snprintf(path, sizeof path, "%s/driftbench-import-%d-AbCdEf", tmp, (int)dead);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/driftbench-import-1-live01", tmp);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/driftbench-import-%d-locked", tmp, (int)dead);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/victim/keep", tmpdir);
    assert_int_equal(access(path, F_OK), 0);
    close(held);
    /* nothing else: the import's own private store is gone */
    DIR *d = opendir(tmp);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    assert_int_equal(n, 3); /* live01, locked, the symlink */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lmeval_gsm8k),   cmocka_unit_test(test_lmeval_old_and_pair),
        cmocka_unit_test(test_pair_mismatch),  cmocka_unit_test(test_lmeval_humaneval),
        cmocka_unit_test(test_bad_files),      cmocka_unit_test(test_promptfoo),
        cmocka_unit_test(test_store_and_compare), cmocka_unit_test(test_verdicts_side_by_side),
        cmocka_unit_test(test_store_humaneval),
        cmocka_unit_test(test_promptfoo_ids),     cmocka_unit_test(test_invalid_utf8_ids),
        cmocka_unit_test(test_reimport_changed),  cmocka_unit_test(test_private_store_cleanup),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
