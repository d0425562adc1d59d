/* labelled_runs.h - a store in a temporary directory holding runs whose
 * per-prompt labels are known, built through the public store API, for
 * test_html.c and test_matrix.c.
 *
 * add_run(st, label, target, config, fail_mask) stores run `label` over the
 * first NP prompts of builtin:math: prompt i is labelled FAIL when fail_mask
 * has bit i, else PASS. Its answers carry markup, '&' and an invalid UTF-8
 * byte, "The answer is <b>D</b> (LABEL) & \xff <script>x</script>", so
 * every renderer has to escape them. */
#ifndef LABELLED_RUNS_H
#define LABELLED_RUNS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/store.h"
#include "driftbench/suite.h"

#define NP 10

static char tmpdir[256];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/drift_labelled_runs_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static void db_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", tmpdir, name); }

static void add_run(drift_store *st, const char *label, const char *target, const char *config, unsigned fail_mask) {
    drift_error err = {0};
    drift_suite *s = NULL;
    assert_int_equal(drift_suite_load("builtin:math?n=10", &s, &err), DRIFT_OK);
    assert_int_equal(s->n, NP);
    int64_t rowids[NP];
    assert_int_equal(drift_store_put_prompts(st, s, rowids, &err), DRIFT_OK);
    drift_run_info info = {0};
    info.label = (char *)label;
    info.target = (char *)target;
    info.config_json = (char *)config;
    info.decoding_json = "{\"temperature\":0}";
    info.templates_json = "{}";
    info.suites_json = "[\"builtin:math?n=10\"]";
    info.tool_version = "test";
    int64_t run_id = 0;
    int resumed = 0;
    assert_int_equal(drift_store_run_begin(st, &info, &run_id, &resumed, &err), DRIFT_OK);
    drift_answer r[NP];
    memset(r, 0, sizeof r);
    char texts[NP][64];
    for (int i = 0; i < NP; i++) {
        snprintf(texts[i], sizeof texts[i], "The answer is <b>%d</b> (%s) & \xff <script>x</script>", (fail_mask >> i) & 1u ? 1 : 0, label);
        r[i].prompt_rowid = rowids[i];
        r[i].text = texts[i];
        r[i].completion_tokens = 5;
        r[i].prompt_tokens = 9;
        r[i].attempts = 1;
    }
    assert_int_equal(drift_store_put_responses(st, run_id, r, NP, &err), DRIFT_OK);
    drift_answer *resp = NULL;
    drift_prompt *prompts = NULL;
    size_t n = 0;
    assert_int_equal(drift_store_unscored(st, run_id, NULL, 0, &resp, &prompts, &n, &err), DRIFT_OK);
    assert_int_equal(n, NP);
    drift_score sc[NP];
    for (size_t k = 0; k < n; k++) {
        int idx = -1;
        for (int i = 0; i < NP; i++)
            if (rowids[i] == resp[k].prompt_rowid) idx = i;
        assert_true(idx >= 0);
        sc[k].response_id = resp[k].id;
        sc[k].evaluator = "math";
        sc[k].label = (fail_mask >> idx) & 1u ? DRIFT_LABEL_FAIL : DRIFT_LABEL_PASS;
        sc[k].value = sc[k].label == DRIFT_LABEL_PASS ? 1 : 0;
        sc[k].detail_json = NULL;
    }
    assert_int_equal(drift_store_put_scores(st, sc, n, &err), DRIFT_OK);
    for (size_t k = 0; k < n; k++) {
        drift_answer_clear(&resp[k]);
        drift_prompt_clear(&prompts[k]);
    }
    free(resp);
    free(prompts);
    assert_int_equal(drift_store_run_finish(st, run_id, &err), DRIFT_OK);
    drift_suite_free(s);
}

/* Opens a new store NAME in the temporary directory (make_tmpdir first). */
static drift_store *open_store(const char *name) {
    char p[512];
    db_path(p, sizeof p, name);
    unlink(p);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(p, &st, &err), DRIFT_OK);
    return st;
}

#endif
