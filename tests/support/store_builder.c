/* store_builder.c - the store fixtures of tests and benches, built once
 * (see store_builder.h): thin, checked calls of the public store API plus
 * the one place a fixture's prompt is made and hashed. Aborting on error
 * keeps the callers to their data. */
#include "store_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/util.h"

void sb_check(drift_status rc, const drift_error *err, const char *what) {
    if (rc == DRIFT_OK) return;
    fprintf(stderr, "store builder: %s: %s\n", what, err && err->msg[0] ? err->msg : drift_strerror(rc));
    abort();
}

char *sb_tmpdir(const char *prefix) {
    char *dir = util_asprintf("/tmp/%sXXXXXX", prefix);
    if (!mkdtemp(dir)) {
        perror("store builder: mkdtemp");
        abort();
    }
    return dir;
}

void sb_rmtree(const char *dir) {
    if (!dir || !dir[0]) return;
    char *cmd = util_asprintf("rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "store builder: cleanup of %s failed\n", dir);
    free(cmd);
}

drift_store *sb_open_new(const char *path) {
    char side[1024];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    drift_store *st = NULL;
    drift_error err = {0};
    sb_check(drift_store_open(path, &st, &err), &err, "open");
    return st;
}

drift_suite *sb_suite_new(const char *name, const char *source, const char *format, size_t n) {
    drift_suite *s = calloc(1, sizeof *s);
    if (!s) abort();
    s->name = util_strdup(name);
    s->source = util_strdup(source);
    s->format = util_strdup(format);
    s->prompts = calloc(n ? n : 1, sizeof *s->prompts);
    if (!s->prompts) abort();
    s->n = n;
    return s;
}

void sb_prompt_fill(drift_prompt *p, const char *id, drift_workload wl, const char *input,
                    const char *reference_json) {
    p->prompt_id = util_strdup(id);
    p->workload = wl;
    p->input = input ? util_strdup(input) : util_asprintf("input of %s", id);
    p->reference_json = util_strdup(reference_json ? reference_json : "{}");
    char h[17];
    util_hash_hex(p->input, strlen(p->input), h);
    p->hash = util_strdup(h);
}

void sb_prompt_set(drift_suite *s, size_t i, const char *id, drift_workload wl, const char *input,
                   const char *reference_json) {
    if (i >= s->n) abort();
    sb_prompt_fill(&s->prompts[i], id, wl, input, reference_json);
}

void sb_put_prompts(drift_store *st, const drift_suite *s, int64_t *rowids) {
    drift_error err = {0};
    sb_check(drift_store_put_prompts(st, s, rowids, &err), &err, "put_prompts");
}

int64_t sb_run_begin(drift_store *st, const drift_run_info *info) {
    drift_error err = {0};
    int64_t id = 0;
    int resumed = 0;
    sb_check(drift_store_run_begin(st, info, &id, &resumed, &err), &err, "run_begin");
    return id;
}

void sb_put_answers(drift_store *st, int64_t run_id, const drift_answer *a, size_t n) {
    drift_error err = {0};
    sb_check(drift_store_put_responses(st, run_id, a, n, &err), &err, "put_responses");
}

void sb_put_scores(drift_store *st, const drift_score *s, size_t n) {
    drift_error err = {0};
    sb_check(drift_store_put_scores(st, s, n, &err), &err, "put_scores");
}

void sb_run_finish(drift_store *st, int64_t run_id) {
    drift_error err = {0};
    sb_check(drift_store_run_finish(st, run_id, &err), &err, "run_finish");
}

size_t sb_score_run(drift_store *st, int64_t run_id, const char *evaluator,
                  int (*label_of)(void *user, int64_t prompt_rowid), void *user) {
    drift_error err = {0};
    drift_answer *resp = NULL;
    drift_prompt *prompts = NULL;
    size_t n = 0;
    sb_check(drift_store_unscored(st, run_id, NULL, 0, &resp, &prompts, &n, &err), &err, "unscored");
    drift_score *sc = calloc(n ? n : 1, sizeof *sc);
    if (!sc) abort();
    for (size_t k = 0; k < n; k++) {
        int label = label_of(user, resp[k].prompt_rowid);
        sc[k] = (drift_score){resp[k].id, evaluator, label, label == DRIFT_LABEL_PASS ? 1 : 0, NULL};
    }
    sb_put_scores(st, sc, n);
    for (size_t k = 0; k < n; k++) {
        drift_answer_clear(&resp[k]);
        drift_prompt_clear(&prompts[k]);
    }
    free(sc);
    free(resp);
    free(prompts);
    return n;
}
