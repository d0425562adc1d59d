/* prompt.h - the prompt content hash (prompt.c), shared by the suite module
 * and the modules that make prompts of their own (import/). Internal,
 * cross-module (as sandbox/sandbox.h): suite_ is the module's tier, and
 * unlike a *_internal.h it may be included from another module. */
#ifndef DRIFT_SUITE_PROMPT_H
#define DRIFT_SUITE_PROMPT_H

#include "driftbench/types.h"

/* The two byte layouts a prompt's hash has been computed over. Both are
 * recorded in stores (prompts.hash), which compare a suite's hashes with
 * the stored ones on every run, resume and merge: each kind of prompt keeps
 * the layout it has always had. */
typedef enum suite_hash_layout {
    SUITE_HASH_NUL = 0,   /* workload NUL input NUL reference: suite files (loaders.c) and imports */
    SUITE_HASH_LINES = 1  /* workload LF input LF reference: built-in suites (builtin.c) */
} suite_hash_layout;

/* The content hash of a prompt: 16 lowercase hex chars of FNV-1a 64
 * (util_hash_hex) over its workload's name (drift_workload_name), input
 * and reference JSON (as stored: compact, sorted keys; NULL taken as "")
 * in the given layout. malloc'd; NULL when out of memory. The one place a
 * prompt's hash is computed. */
char *suite_prompt_hash(drift_workload wl, const char *input, const char *reference_json, suite_hash_layout layout);

#endif
