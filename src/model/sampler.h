/* sampler.h - next-token choice and logprobs (internal; see model.h). */
#ifndef DRIFT_SAMPLER_H
#define DRIFT_SAMPLER_H

#include <stdint.h>
#include "driftbench/model.h"
#include "util/util.h"

/* Picks the next token from logits (n): greedy when p->temperature <= 0
 * (ties: lowest id), else a draw from softmax(logits / T) in double,
 * restricted to the top_k most likely (top_k > 0) and then to the smallest
 * prefix whose mass reaches top_p (top_p < 1), renormalised. One uniform
 * draw from rng per sampled token. Returns -1 only when n <= 0 or out of memory. */
int32_t samp_pick(const float *logits, int n, const drift_gen_params *p, util_rng *rng);

/* The greedy choice in x (n >= 1): index 0 until a value is larger than the
 * current best, so the first index of the largest value; NaN is never
 * larger (a row starting with NaN picks 0). The CUDA backend's device pick
 * (dcu_forward's next) makes the same choice. */
int32_t samp_argmax(const float *x, int n);

/* Fills out with the logprob of `chosen` and the k (<= 20) most likely
 * alternatives (ties: lowest id), from the log-softmax of logits in double. */
void samp_logprobs(const float *logits, int n, int32_t chosen, int k, drift_token_logprob *out);

#endif
