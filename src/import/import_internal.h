/* import_internal.h - what the files of src/import/ share.
 *
 *   samples.c      sets, runs and samples (grow, free), prompt hashes,
 *                  format detection, drift_import_parse / load, check_pair
 *   lmeval.c       lm-evaluation-harness --log_samples jsonl
 *   promptfoo.c    promptfoo's results.json
 *   import_store.c drift_import_store: a private store, our evaluators,
 *                  one merge into the caller's store
 *
 * Why a module of its own (not src/suite/): suites are the prompts we ask;
 * these files are answers and verdicts another tool already produced, with
 * their own identity rules (doc_id, doc_hash, provider), so they become
 * whole runs, not prompt lists. */
#ifndef DRIFT_IMPORT_INTERNAL_H
#define DRIFT_IMPORT_INTERNAL_H

#include <jansson.h>

#include "driftbench/import.h"

/* Appends a run to s (zeroed); NULL when out of memory. */
drift_import_run *import_run_add(drift_import_set *s);
/* Appends a sample to r (zeroed, token counts -1); NULL when out of memory. */
drift_import_sample *import_sample_add(drift_import_run *r);
/* The reference our code evaluator judges by (HumanEval's prompt, test and
 * entry_point, strings of from) into ref: 1 when all three are there (ours
 * can judge the answer), 0 when not, -1 out of memory. */
int import_code_reference(const json_t *from, json_t *ref);
/* A sample's detail "sandbox": own (the tool's isolation, "lm-eval's own
 * (not DriftBench's)") when wl's evaluator runs code (the traits table),
 * so compare reports that DriftBench's sandbox did not judge it. det may
 * be NULL. */
void import_sandbox_detail(json_t *det, drift_workload wl, const char *own);
/* Frees what sample p holds (not p itself). */
void import_sample_clear(drift_import_sample *p);
/* Sets p->reference_json (sorted keys, compact) from ref and p->hash over
 * workload NUL input NUL reference, as suite prompts are hashed. Takes
 * nothing; returns -1 when out of memory. p->input must be set. */
int import_sample_finish(drift_import_sample *p, const json_t *ref);
/* The JSON text of j, compact with sorted keys (malloc'd; NULL nomem). */
char *import_json_canonical(const json_t *j);
/* 1 when s is valid UTF-8 (RFC 3629; no NUL inside, by construction), else 0. */
int import_utf8_ok(const char *s);
/* s made printable for a message: invalid bytes as U+FFFD (malloc'd; NULL nomem). */
char *import_utf8_shown(const char *s);
/* The workload a task name says ("gsm8k*" math, "humaneval*" code), else
 * DRIFT_WL_UNKNOWN. */
drift_workload import_task_workload(const char *task);

drift_status import_parse_lmeval(const char *name, const char *data, size_t len, const drift_import_opts *o,
                                 drift_import_set *out, drift_error *err);
drift_status import_parse_promptfoo(const char *name, const char *data, size_t len, const drift_import_opts *o,
                                    drift_import_set *out, drift_error *err);

#endif
