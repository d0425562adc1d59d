/* labelled_runs.h - a store in a temporary directory holding runs whose
 * per-prompt labels are known, built through the public store API, for
 * test_html.c and test_matrix.c (tests/support/store_builder.h builds it).
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
#include "support/store_builder.h"
#include "driftbench/suite.h"

#define NP 10

static char tmpdir[256];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/drift_labelled_runs_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
}

static void db_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", tmpdir, name); }

typedef struct labelled {
    const int64_t *rowids;
    unsigned fail_mask;
} labelled;

/* FAIL where fail_mask has the bit of the prompt's index, else PASS. */
static int label_of(void *user, int64_t prompt_rowid) {
    const labelled *lb = user;
    int idx = -1;
    for (int i = 0; i < NP; i++)
        if (lb->rowids[i] == prompt_rowid) idx = i;
    assert_true(idx >= 0);
    return (lb->fail_mask >> idx) & 1u ? DRIFT_LABEL_FAIL : DRIFT_LABEL_PASS;
}

static void add_run(drift_store *st, const char *label, const char *target, const char *config, unsigned fail_mask) {
    drift_error err = {0};
    drift_suite *s = NULL;
    assert_int_equal(drift_suite_load("builtin:math?n=10", &s, &err), DRIFT_OK);
    assert_int_equal(s->n, NP);
    int64_t rowids[NP];
    sb_put_prompts(st, s, rowids);
    drift_run_info info = {0};
    info.label = (char *)label;
    info.target = (char *)target;
    info.config_json = (char *)config;
    info.decoding_json = "{\"temperature\":0}";
    info.templates_json = "{}";
    info.suites_json = "[\"builtin:math?n=10\"]";
    info.tool_version = "test";

    int64_t run_id = sb_run_begin(st, &info);
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
    sb_put_answers(st, run_id, r, NP);
    labelled lb = {rowids, fail_mask};
    assert_int_equal(sb_score_run(st, run_id, "math", label_of, &lb), NP);
    sb_run_finish(st, run_id);
    drift_suite_free(s);
}

/* Opens a new store NAME in the temporary directory (make_tmpdir first). */
static drift_store *open_store(const char *name) {
    char p[512];
    db_path(p, sizeof p, name);
    return sb_open_new(p);
}

#endif
