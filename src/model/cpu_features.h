/* cpu_features.h - what this CPU can run (internal to the model folder).
 *
 * The fast kernels choose their vector ISA at run time; the choice is also
 * the "hardware" dimension a run records (embedded.c), so it lives here, in
 * one place: detection (cpu_features.c, the only file that asks the CPU),
 * the ISA names the profile spec uses, and the one extra feature a kernel
 * asks about on its own (F16C). */
#ifndef DRIFT_MODEL_CPU_FEATURES_H
#define DRIFT_MODEL_CPU_FEATURES_H

#include "driftbench/profile.h"

/* ISA the fast kernels will use for a profile: ref and scalar as asked;
 * auto -> the best this CPU has (avx512 needs AVX-512 F+BW+VL, avx2 needs
 * AVX2+FMA+F16C); an ISA the CPU lacks -> the best it has below that. */
drift_isa num_isa_resolve(drift_isa want);

/* The ISA's name in profile specs ("auto", "ref", "scalar", "avx2",
 * "avx512"); "?" when out of range. num_isa_parse is its inverse: 0 and
 * *out set, or -1 for an unknown name. */
const char *num_isa_name(drift_isa isa);
int num_isa_parse(const char *name, drift_isa *out);

/* Nonzero when the CPU converts f16 in hardware (F16C). */
int num_cpu_has_f16c(void);

#endif
