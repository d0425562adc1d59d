/* test_lab_parallel.c - the matrix stage with configurations side by side
 * (drift_matrix_opts.jobs) gives what one at a time gives: a small matrix
 * on the tiny fixture model (4 configurations, 4 math prompts, 8 new
 * tokens) run serially into one store and with 2 and 3 workers and a
 * shared verdict cache into others; every run's answers (prompt, replicate,
 * text, finish reason) and scores are the same. Then resume: a second call
 * skips every configuration; with recheck a spec adding a suite to the
 * same runs asks only the new prompts; events come on the calling thread
 * with a progress array that ends at 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "driftbench/matrix.h"
#include "driftbench/pipeline.h"
#include "driftbench/store.h"
#include "store/store_internal.h"

static char dir[64];
static char model[512];

static drift_matrix_spec *make_spec(const char *suites) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"name\":\"t\",\"suites\":%s,\"baseline\":\"f32\",\"decoding\":{\"max_tokens\":8},\"configs\":["
             "{\"label\":\"f32\",\"target\":\"embedded:%s?profile=cpu-f32&threads=1\",\"dims\":{\"precision\":\"f32\"}},"
             "{\"label\":\"bf16\",\"target\":\"embedded:%s?profile=cpu-f32&weights=bf16&threads=1\",\"dims\":{\"precision\":\"bf16\"}},"
             "{\"label\":\"int4\",\"target\":\"embedded:%s?profile=cpu-f32&weights=int4&threads=1\",\"dims\":{\"precision\":\"int4\"}},"
             "{\"label\":\"splitk\",\"target\":\"embedded:%s?profile=cpu-f32&reduce=blocked:4&threads=1\",\"dims\":{\"precision\":\"f32\"}}]}",
             suites, model, model, model, model);
    drift_matrix_spec *spec = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(json, strlen(json), "t.json", &spec, &err), DRIFT_OK);
    return spec;
}

typedef struct seen {
    pthread_t caller;
    int other_thread;
    size_t items, skips, steps;
    int last_progress_all_one;
    const drift_matrix_spec *spec;
} seen;

static void on_event(void *user, const drift_progress *p) {
    seen *s = user;
    if (!pthread_equal(pthread_self(), s->caller)) s->other_thread = 1;
    if (strcmp(p->stage, "matrix")) return;
    const drift_matrix_summary *m = p->summary;
    if (p->event == DRIFT_PROGRESS_ITEM) s->items++;
    if (p->event == DRIFT_PROGRESS_SKIP) s->skips++;
    if (p->event == DRIFT_PROGRESS_STEP) s->steps++;
    if (p->event == DRIFT_PROGRESS_END) {
        int all = 1;
        for (size_t i = 0; i < s->spec->n_configs; i++) all &= m->progress[i] == 1.0;
        s->last_progress_all_one = all;
    }
}

static drift_status run(const char *db, const drift_matrix_spec *spec, int jobs, int recheck, drift_score_cache *cache,
                        seen *sn, drift_matrix_summary *sum) {
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    drift_matrix_opts o;
    drift_matrix_opts_default(&o);
    o.jobs = jobs;
    o.recheck = recheck;
    o.score.cache = cache;
    o.progress = on_event;
    o.progress_user = sn;
    sn->caller = pthread_self();
    sn->spec = spec;
    drift_status rc = drift_matrix_run(st, spec, &o, sum, &err);
    if (rc) print_error("matrix: %s\n", err.msg);
    drift_store_close(st);
    return rc;
}

/* Every answer and score of the store, one line each, in a fixed order. */
static char *dump(const char *db) {
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st),
                                        "SELECT u.label, p.suite, p.prompt_id, r.replicate, coalesce(r.text,''), "
                                        "coalesce(r.finish_reason,''), coalesce(r.error,''), coalesce(s.label,''), "
                                        "coalesce(s.value,''), coalesce(s.detail,'') FROM responses r "
                                        "JOIN runs u ON u.id = r.run_id JOIN prompts p ON p.id = r.prompt_rowid "
                                        "LEFT JOIN scores s ON s.response_id = r.id "
                                        "ORDER BY 1, 2, 3, 4",
                                        -1, &q, NULL),
                     SQLITE_OK);
    size_t cap = 1 << 20, len = 0;
    char *out = calloc(1, cap);
    while (sqlite3_step(q) == SQLITE_ROW) {
        for (int c = 0; c < 10; c++) {
            const char *t = (const char *)sqlite3_column_text(q, c);
            len += (size_t)snprintf(out + len, cap - len, "%s%s", c ? "|" : "", t ? t : "");
        }
        len += (size_t)snprintf(out + len, cap - len, "\n");
    }
    sqlite3_finalize(q);
    drift_store_close(st);
    return out;
}

static void test_parallel_equals_serial(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(model, sizeof model, "%s/tests/data/models/tiny-qwen2-f16.gguf", src ? src : ".");
    if (access(model, R_OK)) skip();
    snprintf(dir, sizeof dir, "/tmp/drift_lab_parallel_XXXXXX");
    assert_non_null(mkdtemp(dir));
    drift_matrix_spec *spec = make_spec("[\"builtin:math?n=4\"]");
    char serial[128], par2[128], par3[128];
    snprintf(serial, sizeof serial, "%s/serial.db", dir);
    snprintf(par2, sizeof par2, "%s/par2.db", dir);
    snprintf(par3, sizeof par3, "%s/par3.db", dir);
    drift_matrix_summary sum;
    seen s1 = {0}, s2 = {0}, s3 = {0};
    assert_int_equal(run(serial, spec, 1, 0, NULL, &s1, &sum), DRIFT_OK);
    assert_int_equal(sum.jobs, 1);
    assert_int_equal(sum.configs, 4);
    assert_int_equal(s1.items, 4);
    drift_score_cache *cache = drift_score_cache_new();
    assert_int_equal(run(par2, spec, 2, 0, cache, &s2, &sum), DRIFT_OK);
    assert_int_equal(sum.jobs, 2);
    assert_int_equal(sum.configs, 4);
    assert_int_equal(sum.score.scored[DRIFT_WL_MATH], 16);
    assert_int_equal(s2.items, 4);
    assert_false(s2.other_thread);
    assert_true(s2.last_progress_all_one);
    assert_int_equal(run(par3, spec, 3, 0, cache, &s3, &sum), DRIFT_OK);
    /* the third store's texts are the second's: every verdict is reused */
    assert_int_equal(sum.score.reused[DRIFT_WL_MATH], 16);
    char *a = dump(serial), *b = dump(par2), *c = dump(par3);
    assert_true(strlen(a) > 100);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    free(b);
    free(c);

    /* resume: everything is finished, nothing runs */
    seen s4 = {0};
    assert_int_equal(run(par2, spec, 2, 0, cache, &s4, &sum), DRIFT_OK);
    assert_int_equal(s4.skips, 4);
    assert_int_equal(s4.items, 4); /* a skipped configuration is still scored, then ITEM */
    assert_int_equal(sum.skipped, 4);
    assert_int_equal(sum.configs, 4);
    char *b2 = dump(par2);
    assert_string_equal(a, b2);
    free(b2);

    /* recheck: a spec adding a suite to the same runs asks only its prompts */
    drift_matrix_spec *more = make_spec("[\"builtin:math?n=4\", \"builtin:math?n=6\"]");
    seen s5 = {0};
    assert_int_equal(run(par2, more, 2, 1, cache, &s5, &sum), DRIFT_OK);
    assert_int_equal(s5.items, 4);
    assert_int_equal(sum.score.scored[DRIFT_WL_MATH], 8); /* 2 new prompts x 4 runs */
    assert_int_equal(sum.score.already[DRIFT_WL_MATH], 16);
    free(a);
    drift_matrix_spec_free(more);
    drift_score_cache_free(cache);
    drift_matrix_spec_free(spec);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_equals_serial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
