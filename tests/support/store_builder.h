/* store_builder.h - one way for tests and benches to build a store: a
 * fresh file in a private temporary directory, prompts made and hashed in
 * one place, runs begun, answers and scores put, every step through the
 * public store API (include/driftbench/store.h).
 *
 * A fixture that cannot be built is a broken test, not a case: every
 * function here prints "store builder: WHAT: MESSAGE" to stderr and aborts
 * on an error, so callers never check a status. The data (labels, texts,
 * run fields) stays the caller's: the builder adds nothing to a run's
 * fields (a NULL field is stored as the store stores NULL).
 *
 * Users: tests/unit/compare_fixture.h, labelled_runs.h, test_score.c,
 * test_score_cache.c, test_monitor.c, test_compare.c, test_html.c,
 * test_pipeline.c, test_stages.c (their private store), and
 * bench/compare_bench.c, store_bench.c, store_writers.c. */
#ifndef STORE_BUILDER_H
#define STORE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/store.h"
#include "driftbench/suite.h"

/* Aborts with "store builder: WHAT: err->msg" unless rc is DRIFT_OK. */
void sb_check(drift_status rc, const drift_error *err, const char *what);

/* A new private directory /tmp/PREFIXXXXXXX (malloc'd path); sb_rmtree
 * removes it and everything in it. */
char *sb_tmpdir(const char *prefix);
void sb_rmtree(const char *dir);

/* Opens a new, empty SQLite store at path (an old file there, and its
 * -wal and -shm, are removed first). */
drift_store *sb_open_new(const char *path);

/* A suite of n empty prompts (free with drift_suite_free); name, source and
 * format are copied. */
drift_suite *sb_suite_new(const char *name, const char *source, const char *format, size_t n);

/* Sets prompt i of s: id, workload, input (NULL: "input of ID") and
 * reference (NULL: "{}"), all copied; the prompt's hash is the fixtures'
 * content hash of its input (util_hash_hex), computed here and nowhere
 * else in tests/ and bench/. */
void sb_prompt_set(drift_suite *s, size_t i, const char *id, drift_workload wl, const char *input,
                   const char *reference_json);

/* The same for a suite the caller owns on the stack (its prompts array
 * allocated by the caller, its strings freed by the caller). */
void sb_prompt_fill(drift_prompt *p, const char *id, drift_workload wl, const char *input,
                    const char *reference_json);

/* drift_store_put_prompts; rowids gets s->n row ids. */
void sb_put_prompts(drift_store *st, const drift_suite *s, int64_t *rowids);

/* drift_store_run_begin of info as given; returns the run's id. */
int64_t sb_run_begin(drift_store *st, const drift_run_info *info);

/* drift_store_put_responses / put_scores / run_finish. */
void sb_put_answers(drift_store *st, int64_t run_id, const drift_answer *a, size_t n);
void sb_put_scores(drift_store *st, const drift_score *s, size_t n);
void sb_run_finish(drift_store *st, int64_t run_id);

/* Scores every unscored answer of run_id with evaluator: label_of(user,
 * prompt_rowid) gives its drift_label; the value is 1 for PASS, else 0.
 * Returns how many answers it scored. */
size_t sb_score_run(drift_store *st, int64_t run_id, const char *evaluator,
                  int (*label_of)(void *user, int64_t prompt_rowid), void *user);

#endif
