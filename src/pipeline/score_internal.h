/* score_internal.h - what the score stage's files share (score.c,
 * score_cache.c): the verdict cache's lookups and inserts. Keys are byte
 * strings the caller builds (score.c: evaluator, its settings, the prompt's
 * reference or request, the answer text, each length-prefixed). */
#ifndef DRIFT_PIPELINE_SCORE_INTERNAL_H
#define DRIFT_PIPELINE_SCORE_INTERNAL_H

#include <stddef.h>

#include "driftbench/pipeline.h"

/* 1 and a copy of the cached verdict in out (detail malloc'd) when key is
 * held, else 0 (also when c is NULL or out of memory). Counts a hit or a
 * miss for workload wl. */
int score_cache_get(drift_score_cache *c, int wl, const void *key, size_t key_len, drift_eval_result *out);

/* Keeps res under key unless it is an evaluator error (DRIFT_LABEL_ERROR)
 * or key is held already. Out of memory: nothing kept. */
void score_cache_put(drift_score_cache *c, const void *key, size_t key_len, const drift_eval_result *res);

/* The embedding cached under key: 1 with a malloc'd copy in *vec and its
 * dimension, else 0. Counts a hit or a miss for workload wl (chat). */
int score_cache_get_vec(drift_score_cache *c, int wl, const void *key, size_t key_len, float **vec, int *dim);

/* Keeps a copy of vec (dim floats) under key unless held already. */
void score_cache_put_vec(drift_score_cache *c, const void *key, size_t key_len, const float *vec, int dim);

#endif
