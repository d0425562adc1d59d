/* compare_runs.h - a comparison read from the store (compare_runs.c): the
 * reading behind drift_compare_runs (compare.h), which the comparison
 * report's loader (src/report/load.c) shares to read a flip's details in
 * the same pass. The analysis module's interface to report/, not public. */
#ifndef DRIFT_ANALYSIS_COMPARE_RUNS_H
#define DRIFT_ANALYSIS_COMPARE_RUNS_H

#include <stddef.h>

#include "driftbench/compare.h"
#include "driftbench/store.h"

/* What the reader calls back (any of them may be NULL), user passed on:
 *   begin  once the comparison c is computed (and its code sandboxes read),
 *          before the risk pass: sets want[k] (0 when left) to how many of
 *          workload k's first flips (c->wl[k].flipped) want their
 *          baseline answer; an error ends the read;
 *   flip   the risk pass read flip fi of workload k's baseline answer a
 *          (fi < want[k]); a is freed after the call; an error ends the read. */
typedef struct anl_compare_hooks {
    drift_status (*begin)(void *user, const drift_comparison *c, size_t want[DRIFT_WL_COUNT], drift_error *err);
    drift_status (*flip)(void *user, const drift_comparison *c, int k, size_t fi, const drift_answer *a,
                         drift_error *err);
    void *user;
} anl_compare_hooks;

/* Reads and compares two runs, the caller holding the read transaction
 * (drift_store_read_begin): 1. both runs, their scored answers for
 * opts->evaluator and the chat embeddings both need; 2. drift_compare_sets;
 * 3. the code sandboxes when code pairs are present; hooks->begin; 4. flip
 * risk when opts->risk (each counted pair's baseline answer read once,
 * hooks->flip for the flips begin wanted). opts not NULL; hooks may be.
 * *out on success; on error NULL, with the message in err. */
drift_status anl_compare_load(drift_store *st, const char *baseline_label, const char *target_label,
                              const drift_compare_opts *opts, const anl_compare_hooks *hooks, drift_comparison **out,
                              drift_error *err);

#endif
