/* kernels_ref.h - the test hook of the reference kernels (kernels_ref.c).
 *
 * The reference kernels' entry points are declared in numerics.h beside the
 * fast ones. Their dot products run one fixed order that is compiled three
 * times (x86-64 baseline, AVX2, AVX-512F) and picked at run time; the hook
 * below lets a test run each compiled form and compare their bits. The
 * reference's exp is exported too, for callers outside the kernels whose
 * results belong to the ref profile (they must not use libm's exp). So is
 * the MoE router, the one written for forward.c and for the tests' CPU
 * reference (tests/ops/test_cuda_ops.c) alike. */
#ifndef DRIFT_MODEL_KERNELS_REF_H
#define DRIFT_MODEL_KERNELS_REF_H

#include "driftbench/profile.h"

/* The widest compiled form the reference kernels may use:
 * DRIFT_ISA_AUTO (the default) = the best this CPU runs; DRIFT_ISA_AVX2 =
 * AVX2 at most; DRIFT_ISA_SCALAR = the x86-64 baseline (SSE2) build. Every
 * form gives the same bits. Not thread-safe: set it before a run. */
extern drift_isa num_ref_isa_cap;

/* e^x in double by the reference's own fixed sequence of operations (not
 * libm's, which differs between CPUs with and without FMA): within 1.2
 * units in the last place; NaN -> NaN, overflow -> inf, underflow -> 0 or
 * a subnormal rounded once. The same bits on every x86-64 CPU. */
double num_ref_exp(double x);

/* The MoE router of one row: softmax in double over the E router logits
 * lg (E,), the K experts of highest probability (ties: the lower index),
 * their weights renormalised to sum 1 over the K.
 *   lg (E,) -> sel (K,) expert indices by rank, wt (K,) weights
 * pr (E,) is scratch (the softmax's numerators). exp_fn is the exponential:
 * num_ref_exp for the ref profile (whose bits must not depend on libm),
 * libm's exp otherwise. 1 <= K <= E. */
void num_ref_moe_route(const float *lg, int E, int K, double (*exp_fn)(double), double *pr, int *sel, float *wt);

#endif
