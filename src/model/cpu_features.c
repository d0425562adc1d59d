/* cpu_features.c - run-time detection of the CPU's vector features.
 *
 * The only file that asks the CPU what it supports (GCC's
 * __builtin_cpu_supports, which reads cpuid once per process). The kernels
 * and the profile code ask here, by drift_isa, so the rule that picks an ISA
 * and the names a spec and a run's "hardware" dimension use are written
 * once. */
#include "model/cpu_features.h"

#include <string.h>

static const char *const ISA_NAMES[] = {
    [DRIFT_ISA_AUTO] = "auto", [DRIFT_ISA_REF] = "ref", [DRIFT_ISA_SCALAR] = "scalar",
    [DRIFT_ISA_AVX2] = "avx2", [DRIFT_ISA_AVX512] = "avx512",
};
#define N_ISA (sizeof ISA_NAMES / sizeof ISA_NAMES[0])

drift_isa num_isa_resolve(drift_isa want) {
    if (want == DRIFT_ISA_REF || want == DRIFT_ISA_SCALAR) return want;
    __builtin_cpu_init();
    int has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl");
    int has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    if ((want == DRIFT_ISA_AUTO || want == DRIFT_ISA_AVX512) && has512) return DRIFT_ISA_AVX512;
    if (has2) return DRIFT_ISA_AVX2;
    return DRIFT_ISA_SCALAR;
}

const char *num_isa_name(drift_isa isa) {
    if ((int)isa < 0 || (size_t)isa >= N_ISA) return "?";
    return ISA_NAMES[isa];
}

int num_isa_parse(const char *name, drift_isa *out) {
    for (size_t i = 0; name && i < N_ISA; i++)
        if (!strcmp(name, ISA_NAMES[i])) {
            *out = (drift_isa)i;
            return 0;
        }
    return -1;
}

int num_cpu_has_f16c(void) { return __builtin_cpu_supports("f16c"); }
