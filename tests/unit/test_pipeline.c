/* test_pipeline.c - the library's stages without the CLI, against the
 * embedded engine (the tiny fixture models of tests/data/models) into a
 * temporary store.
 *
 * run: a first call asks every (prompt, replicate) pair and reports BEGIN,
 * one STEP per outcome (carrying that request: its prompt id, replicate,
 * outcome, attempts, latency, tokens; no other event carries one) and END; a second call with the same label resumes
 * and asks nothing; a changed decoding is a mismatch; a bad config and a
 * cancel before the start fail at the step the summary names, asking nothing;
 * failed requests are counted by kind (prompts longer than the context: the
 * engine's cause), and a run whose every request failed fails at CHECK.
 * matrix: a two-configuration spec is run and scored (ITEM per
 * configuration, the inner run's events in between); a second call skips
 * both runs and only rescans their scores; shard 2/2 holds one of them.
 * Configurations that fail entirely stop the matrix, or with all_failed_ok
 * are listed in the summary while the others go on; a finished run without
 * an answer is not skipped by the next call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/pipeline.h"
#include "support/store_builder.h"

#define N_PROMPTS 3

static char *tmpdir;
static char db[300];
static char target_qwen[600], target_moe[600];

/* What a progress callback saw, per stage and event. */
typedef struct seen {
    int run[DRIFT_PROGRESS_END + 1];
    int matrix[DRIFT_PROGRESS_END + 1];
    size_t last_done, last_total;   /* of the last run STEP */
    int order_ok;                   /* every STEP of a run came between its BEGIN and END */
    int in_run;
    size_t req_ok, req_failed;      /* run STEPs' requests: answers, failures */
    char pairs[16][80];             /* the distinct "prompt id#replicate" of those requests */
    size_t n_pairs;
} seen;

/* A run STEP's request: consistent in itself, counted, its pair noted. */
static void note_request(seen *s, const drift_request_outcome *r) {
    assert_non_null(r);
    assert_non_null(r->prompt_id);
    assert_non_null(strstr(r->prompt_id, "builtin-"));
    assert_true(r->replicate >= 0);
    assert_true(r->attempts >= 1);
    assert_true(r->latency_ms >= 0);
    if (r->ok) {
        s->req_ok++;
        assert_null(r->error);
        assert_int_equal(r->cause, DRIFT_FAIL_NONE);
        assert_true(r->completion_tokens >= 0); /* the engine counts what it generated */
        assert_non_null(r->finish_reason);
    } else {
        s->req_failed++;
        assert_non_null(r->error);
        assert_true(r->error[0] != 0);
        assert_int_not_equal(r->cause, DRIFT_FAIL_NONE);
    }
    char key[80];
    snprintf(key, sizeof key, "%s#%d", r->prompt_id, r->replicate);
    for (size_t i = 0; i < s->n_pairs; i++)
        if (!strcmp(s->pairs[i], key)) return;
    if (s->n_pairs < 16) snprintf(s->pairs[s->n_pairs++], sizeof s->pairs[0], "%s", key);
}

static void count_progress(void *user, const drift_progress *p) {
    seen *s = user;
    assert_non_null(p->stage);
    assert_non_null(p->summary);
    if (!strcmp(p->stage, "run")) {
        s->run[p->event]++;
        if (p->event == DRIFT_PROGRESS_BEGIN) s->in_run = 1;
        if (p->event == DRIFT_PROGRESS_STEP) {
            if (!s->in_run) s->order_ok = 0;
            s->last_done = p->done;
            s->last_total = p->total;
            assert_true(p->done <= p->total);
            note_request(s, p->request);
        } else {
            assert_null(p->request);
        }
        if (p->event == DRIFT_PROGRESS_END) s->in_run = 0;
    } else {
        assert_string_equal(p->stage, "matrix");
        assert_null(p->request);
        s->matrix[p->event]++;
    }
}

static int always_cancel(void *user) {
    (void)user;
    return 1;
}

static int setup(void **state) {
    (void)state;
    tmpdir = sb_tmpdir("drift_pipeline_");
    snprintf(db, sizeof db, "%s/store.db", tmpdir);
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(target_qwen, sizeof target_qwen, "embedded:%s/tests/data/models/tiny-qwen2-f16.gguf?profile=ref",
             src ? src : "..");
    snprintf(target_moe, sizeof target_moe, "embedded:%s/tests/data/models/tiny-moe-q8_0.gguf?profile=ref",
             src ? src : "..");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    sb_rmtree(tmpdir);
    free(tmpdir);
    return 0;
}

/* A new, empty store at db (the store builder's). */
static drift_store *open_fresh(void) { return sb_open_new(db); }

/* Responses stored for run `label`. */
static size_t stored(drift_store *st, const char *label) {
    drift_run_info info;
    memset(&info, 0, sizeof info);
    drift_error err = {0};
    assert_int_equal(drift_store_run_get(st, label, &info, &err), DRIFT_OK);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, info.id, &set, &err), DRIFT_OK);
    size_t n = set.n;
    drift_scored_set_clear(&set);
    drift_run_info_clear(&info);
    return n;
}

static const char *const SUITES[] = {"builtin:math?n=3"};

static void run_opts(drift_run_opts *o, const char *label, seen *s) {
    drift_run_opts_default(o);
    o->label = label;
    o->target = target_qwen;
    o->suites = SUITES;
    o->n_suites = 1;
    o->params.max_tokens = 6;
    o->target_opts.concurrency = 2;
    o->progress = count_progress;
    o->progress_user = s;
}

static void test_run_then_resume(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    drift_run_opts o;
    seen s = {.order_ok = 1};
    run_opts(&o, "tiny", &s);
    o.replicates = 2;
    drift_run_summary sum;
    drift_error err = {0};
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_DONE);
    assert_int_equal(sum.resumed, 0);
    assert_int_equal(sum.prompts, N_PROMPTS);
    assert_int_equal(sum.replicates, 2);
    assert_int_equal(sum.requested, 2 * N_PROMPTS);
    assert_int_equal(sum.done, 2 * N_PROMPTS);
    assert_int_equal(sum.answers + sum.errors, 2 * N_PROMPTS);
    assert_true(sum.answers > 0);
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 1);
    assert_int_equal(s.run[DRIFT_PROGRESS_STEP], 2 * N_PROMPTS);
    assert_int_equal(s.run[DRIFT_PROGRESS_END], 1);
    assert_int_equal(s.last_done, 2 * N_PROMPTS);
    assert_int_equal(s.last_total, 2 * N_PROMPTS);
    assert_true(s.order_ok);
    assert_int_equal(s.req_ok, sum.answers);
    assert_int_equal(s.req_failed, sum.errors);
    assert_int_equal(s.n_pairs, 2 * N_PROMPTS); /* each pair once */
    assert_int_equal(stored(st, "tiny"), 2 * N_PROMPTS);

    /* again: resumed, nothing asked, nothing added */
    memset(&s, 0, sizeof s);
    s.order_ok = 1;
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_DONE);
    assert_int_equal(sum.resumed, 1);
    assert_int_equal(sum.prompts, N_PROMPTS);
    assert_int_equal(sum.requested, 0);
    assert_int_equal(sum.done, 0);
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 1);
    assert_int_equal(s.run[DRIFT_PROGRESS_STEP], 0);
    assert_int_equal(s.run[DRIFT_PROGRESS_END], 1);
    assert_int_equal(stored(st, "tiny"), 2 * N_PROMPTS);

    /* the same label with another decoding is not the same run */
    o.params.seed = 7;
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_ERR_MISMATCH);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_BEGIN);
    assert_int_equal(stored(st, "tiny"), 2 * N_PROMPTS);
    drift_store_close(st);
}

static void test_run_failures(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    drift_run_opts o;
    seen s = {.order_ok = 1};
    drift_run_summary sum;
    drift_error err = {0};

    run_opts(&o, "bad-config", &s);
    o.config = "model=tiny,nonsense";
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_ERR_INVALID);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_CONFIG);
    assert_non_null(strstr(err.msg, "'nonsense' is not key=value"));

    run_opts(&o, "bad-target", &s);
    o.target = "ftp://nowhere";
    assert_int_not_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_TARGET);

    /* cancelled before the run began: no run, nothing asked, the label free */
    run_opts(&o, "cancelled", &s);
    o.cancel = always_cancel;
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_ERR_CANCELLED);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_BEGIN);
    assert_int_equal(sum.done, 0);
    drift_run_info info;
    memset(&info, 0, sizeof info);
    assert_int_equal(drift_store_run_get(st, "cancelled", &info, &err), DRIFT_ERR_NOT_FOUND);
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 0);
    assert_int_equal(s.run[DRIFT_PROGRESS_STEP], 0);

    /* missing options */
    run_opts(&o, NULL, &s);
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_ERR_INVALID);
    drift_store_close(st);
}

/* The failures of a run by kind: long-context prompts do not fit the tiny
 * model's context, so each is an engine error; with math prompts beside
 * them the run succeeds and counts them; alone, every request fails. */
static void test_run_failure_kinds(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    drift_run_opts o;
    seen s = {.order_ok = 1};
    drift_run_summary sum;
    drift_error err = {0};
    static const char *const mixed[] = {"builtin:math?n=3", "builtin:long?n=2"};
    run_opts(&o, "mixed", &s);
    o.suites = mixed;
    o.n_suites = 2;
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.answers, 3);
    assert_int_equal(sum.errors, 2);
    assert_int_equal(s.req_ok, 3); /* the requests as the steps told them */
    assert_int_equal(s.req_failed, 2);
    assert_int_equal(sum.n_failures, 1);
    assert_int_equal(sum.failures_other, 0);
    assert_int_equal(sum.failures[0].cause, DRIFT_FAIL_ENGINE);
    assert_int_equal(sum.failures[0].http_status, 0);
    assert_int_equal(sum.failures[0].count, 2);
    assert_non_null(strstr(sum.failures[0].first, "does not fit the context"));
    assert_string_equal(sum.failures[0].first, sum.first_error);
    int only = 0;
    assert_ptr_equal(drift_run_failure_main(&sum, &only), &sum.failures[0]);
    assert_int_equal(only, 1);

    static const char *const longs[] = {"builtin:long?n=2"};
    run_opts(&o, "all-long", &s);
    o.suites = longs;
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_ERR_MODEL);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_CHECK);
    assert_int_equal(sum.answers, 0);
    assert_int_equal(sum.n_failures, 1);
    assert_int_equal(sum.failures[0].count, 2);
    assert_non_null(strstr(err.msg, "every request to"));

    /* no failure: no kind */
    memset(&sum, 0, sizeof sum);
    assert_null(drift_run_failure_main(&sum, &only));
    assert_int_equal(only, 0);
    drift_store_close(st);
}

/* Two configurations over suites (a JSON array's inside). */
static drift_matrix_spec *two_configs_on(const char *suites) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"suites\":[%s],\"limit\":%d,\"decoding\":{\"max_tokens\":6},\"baseline\":\"qwen\","
             "\"configs\":[{\"label\":\"qwen\",\"target\":\"%s\",\"dims\":{\"model\":\"tiny-qwen2\"}},"
             "{\"label\":\"moe\",\"target\":\"%s\",\"dims\":{\"model\":\"tiny-moe\"}}]}",
             suites, N_PROMPTS, target_qwen, target_moe);
    drift_matrix_spec *spec = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(json, strlen(json), "two.json", &spec, &err), DRIFT_OK);
    assert_int_equal(spec->n_configs, 2);
    return spec;
}

static drift_matrix_spec *two_configs(void) { return two_configs_on("\"builtin:math\""); }

static size_t math_total(const drift_score_summary *s) {
    return s->scored[DRIFT_WL_MATH] + s->already[DRIFT_WL_MATH] + s->eval_errors[DRIFT_WL_MATH];
}

static void test_matrix_two_configs(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    drift_matrix_spec *spec = two_configs();
    drift_matrix_opts o;
    drift_matrix_opts_default(&o);
    o.concurrency = 2;
    seen s = {.order_ok = 1};
    o.progress = count_progress;
    o.progress_user = &s;
    drift_matrix_summary sum;
    drift_error err = {0};
    assert_int_equal(drift_matrix_run(st, spec, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.in_shard, 2);
    assert_int_equal(sum.configs, 2);
    assert_int_equal(sum.skipped, 0);
    assert_int_equal(sum.run.step, DRIFT_RUN_STEP_DONE);
    assert_int_equal(s.matrix[DRIFT_PROGRESS_BEGIN], 1);
    assert_int_equal(s.matrix[DRIFT_PROGRESS_ITEM], 2);
    assert_int_equal(s.matrix[DRIFT_PROGRESS_SKIP], 0);
    assert_int_equal(s.matrix[DRIFT_PROGRESS_END], 1);
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 2);
    assert_int_equal(s.run[DRIFT_PROGRESS_STEP], 2 * N_PROMPTS);
    assert_int_equal(s.run[DRIFT_PROGRESS_END], 2);
    assert_true(s.order_ok);
    assert_int_equal(stored(st, "qwen"), N_PROMPTS);
    assert_int_equal(stored(st, "moe"), N_PROMPTS);
    assert_int_equal(math_total(&sum.score), 2 * N_PROMPTS); /* every answer judged */
    assert_int_equal(sum.score.already[DRIFT_WL_MATH], 0);

    /* again: both runs are finished, so skipped; their scores stay */
    memset(&s, 0, sizeof s);
    s.order_ok = 1;
    assert_int_equal(drift_matrix_run(st, spec, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.configs, 2);
    assert_int_equal(sum.skipped, 2);
    assert_int_equal(s.matrix[DRIFT_PROGRESS_SKIP], 2);
    assert_int_equal(s.matrix[DRIFT_PROGRESS_ITEM], 2);
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 0);
    assert_int_equal(sum.score.scored[DRIFT_WL_MATH], 0);
    assert_int_equal(sum.score.already[DRIFT_WL_MATH], 2 * N_PROMPTS);
    assert_int_equal(stored(st, "qwen"), N_PROMPTS);

    /* shard 2/2 is the second configuration alone */
    o.shard_index = 2;
    o.shard_count = 2;
    memset(&s, 0, sizeof s);
    assert_int_equal(drift_matrix_run(st, spec, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.in_shard, 1);
    assert_int_equal(sum.configs, 1);
    assert_string_equal(sum.label, "moe");
    assert_int_equal(sum.config_index, 1);

    /* a cancel stops after the configuration in hand */
    o.shard_index = o.shard_count = 1;
    o.cancel = always_cancel;
    assert_int_equal(drift_matrix_run(st, spec, &o, &sum, &err), DRIFT_ERR_CANCELLED);
    assert_int_equal(sum.configs, 1);
    assert_int_equal(sum.failed_in_run, 0);

    /* a bad shard */
    o.cancel = NULL;
    o.shard_index = 3;
    o.shard_count = 2;
    assert_int_equal(drift_matrix_run(st, spec, &o, &sum, &err), DRIFT_ERR_INVALID);
    drift_matrix_spec_free(spec);
    drift_store_close(st);
}

/* Both configurations fail entirely (long prompts, tiny context): the first
 * stops the matrix; with all_failed_ok both are listed and the call
 * succeeds; called again, neither is skipped as complete. A configuration
 * whose target does not open could not start: listed too, the next runs. */
static void test_matrix_failed_entirely(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    drift_matrix_spec *spec = two_configs_on("\"builtin:long?n=2\"");
    drift_matrix_opts o;
    drift_matrix_opts_default(&o);
    o.no_score = 1;
    seen s = {.order_ok = 1};
    o.progress = count_progress;
    o.progress_user = &s;
    drift_matrix_summary *sum = calloc(1, sizeof *sum);
    assert_non_null(sum);
    drift_error err = {0};
    assert_int_equal(drift_matrix_run(st, spec, &o, sum, &err), DRIFT_ERR_MODEL);
    assert_int_equal(sum->failed_in_run, 1);
    assert_string_equal(sum->label, "qwen");
    assert_int_equal(sum->run.step, DRIFT_RUN_STEP_CHECK);
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 1); /* moe never ran */

    o.all_failed_ok = 1;
    memset(&s, 0, sizeof s);
    s.order_ok = 1;
    assert_int_equal(drift_matrix_run(st, spec, &o, sum, &err), DRIFT_OK);
    assert_int_equal(sum->configs, 2);
    assert_int_equal(sum->skipped, 0); /* qwen's finished run has no answer: asked again */
    assert_int_equal(s.run[DRIFT_PROGRESS_BEGIN], 2);
    assert_int_equal(sum->all_failed, 2);
    for (size_t k = 0; k < 2; k++) {
        const drift_matrix_failure *f = &sum->failed[k];
        assert_int_equal(f->config_index, k);
        assert_int_equal(f->unstarted, 0);
        assert_int_equal(f->main.cause, DRIFT_FAIL_ENGINE);
        assert_int_equal(f->main.count, 2);
        assert_int_equal(f->main_only, 1);
        assert_non_null(strstr(f->msg, "every request to embedded:"));
    }
    assert_string_equal(sum->all_failed_msg, sum->failed[0].msg);
    drift_matrix_spec_free(spec);

    /* a target that does not open could not start: listed, the next one runs */
    char json[2048];
    snprintf(json, sizeof json,
             "{\"suites\":[\"builtin:math\"],\"limit\":%d,\"decoding\":{\"max_tokens\":6},\"baseline\":\"tiny\","
             "\"configs\":[{\"label\":\"gone\",\"target\":\"embedded:%s/none.gguf\",\"dims\":{\"model\":\"x\"}},"
             "{\"label\":\"tiny\",\"target\":\"%s\",\"dims\":{\"model\":\"tiny-qwen2\"}}]}",
             N_PROMPTS, tmpdir, target_qwen);
    drift_status prc = drift_matrix_spec_parse(json, strlen(json), "gone.json", &spec, &err);
    if (prc) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(prc, DRIFT_OK);
    assert_int_equal(drift_matrix_run(st, spec, &o, sum, &err), DRIFT_OK);
    assert_int_equal(sum->configs, 2);
    assert_int_equal(sum->all_failed, 1);
    assert_int_equal(sum->failed[0].config_index, 0);
    assert_int_equal(sum->failed[0].unstarted, 1);
    assert_int_equal(sum->failed[0].main.cause, DRIFT_FAIL_NONE);
    assert_non_null(strstr(sum->failed[0].msg, "none.gguf"));
    assert_int_equal(stored(st, "tiny"), N_PROMPTS);
    o.all_failed_ok = 0; /* without it, the target that does not open stops the matrix */
    assert_int_not_equal(drift_matrix_run(st, spec, &o, sum, &err), DRIFT_OK);
    assert_int_equal(sum->run.step, DRIFT_RUN_STEP_TARGET);
    free(sum);
    drift_matrix_spec_free(spec);
    drift_store_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_then_resume),
        cmocka_unit_test(test_run_failures),
        cmocka_unit_test(test_run_failure_kinds),
        cmocka_unit_test(test_matrix_two_configs),
        cmocka_unit_test(test_matrix_failed_entirely),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
