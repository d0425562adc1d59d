/* fp8_exhaustive.c - every one of the 2^32 floats through numerics_fast.c's
 * forms against numerics.c's definitions, bit for bit:
 *   e4m3, e5m2, e2m1 codes      num_f32_to_*      vs num_f32_to_*_ref
 *   e4m3, e5m2 values (scalar)  num_round_fp8_value vs the table of the reference code
 *   e4m3, e5m2 values (rows)    num_round_fp8_scaled at scale 1 (AVX2 where the CPU has it)
 *   f16, bf16 values (rows)     num_round_acts     vs num_round_acts_ref
 * Prints the mismatches of each form (and the first few), exits 1 if any.
 * Usage: bench_fp8_exhaustive [FIRST LAST] (high 16 bits, default 0 65535:
 * all). Single-threaded; about five minutes here. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/numerics.h"

enum { CHUNK = 1 << 16, N_FORMS = 9 };
static const char *FORM[N_FORMS] = {"e4m3 code", "e5m2 code", "e2m1 code", "e4m3 value", "e5m2 value",
                                    "e4m3 row", "e5m2 row", "f16 row", "bf16 row"};
static uint64_t bad[N_FORMS];

static void miss(int form, uint32_t u, uint32_t got, uint32_t want) {
    if (bad[form]++ < 5) fprintf(stderr, "%s of 0x%08x: 0x%08x, reference 0x%08x\n", FORM[form], u, got, want);
}

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

int main(int argc, char **argv) {
    long first = 0, last = 65535;
    if (argc == 3) {
        first = strtol(argv[1], NULL, 0);
        last = strtol(argv[2], NULL, 0);
    }
    if ((argc != 1 && argc != 3) || first < 0 || last > 65535 || first > last) {
        fprintf(stderr, "usage: bench_fp8_exhaustive [FIRST LAST] (0 <= FIRST <= LAST <= 65535)\n");
        return 2;
    }
    static float x[CHUNK], r[4][CHUNK], ref[2][CHUNK];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long hi = first; hi <= last; hi++) {
        for (uint32_t lo = 0; lo < CHUNK; lo++) {
            uint32_t u = (uint32_t)hi << 16 | lo;
            memcpy(&x[lo], &u, 4);
        }
        for (int k = 0; k < 4; k++) memcpy(r[k], x, sizeof x);
        memcpy(ref[0], x, sizeof x);
        memcpy(ref[1], x, sizeof x);
        num_round_fp8_scaled(DRIFT_DTYPE_FP8_E4M3, r[0], CHUNK, 1.0f);
        num_round_fp8_scaled(DRIFT_DTYPE_FP8_E5M2, r[1], CHUNK, 1.0f);
        num_round_acts(DRIFT_DTYPE_F16, r[2], CHUNK);
        num_round_acts(DRIFT_DTYPE_BF16, r[3], CHUNK);
        num_round_acts_ref(DRIFT_DTYPE_F16, ref[0], CHUNK);
        num_round_acts_ref(DRIFT_DTYPE_BF16, ref[1], CHUNK);
        for (uint32_t lo = 0; lo < CHUNK; lo++) {
            uint32_t u = (uint32_t)hi << 16 | lo;
            float f = x[lo];
            uint8_t c4 = num_f32_to_e4m3_ref(f), c5 = num_f32_to_e5m2_ref(f), c1 = num_f32_to_e2m1_ref(f);
            uint8_t g;
            if ((g = num_f32_to_e4m3(f)) != c4) miss(0, u, g, c4);
            if ((g = num_f32_to_e5m2(f)) != c5) miss(1, u, g, c5);
            if ((g = num_f32_to_e2m1(f)) != c1) miss(2, u, g, c1);
            uint32_t w4 = bits(num_e4m3_to_f32(c4)), w5 = bits(num_e5m2_to_f32(c5));
            uint32_t v;
            if ((v = bits(num_round_fp8_value(DRIFT_DTYPE_FP8_E4M3, f))) != w4) miss(3, u, v, w4);
            if ((v = bits(num_round_fp8_value(DRIFT_DTYPE_FP8_E5M2, f))) != w5) miss(4, u, v, w5);
            if ((v = bits(r[0][lo])) != w4) miss(5, u, v, w4);
            if ((v = bits(r[1][lo])) != w5) miss(6, u, v, w5);
            if ((v = bits(r[2][lo])) != bits(ref[0][lo])) miss(7, u, v, bits(ref[0][lo]));
            if ((v = bits(r[3][lo])) != bits(ref[1][lo])) miss(8, u, v, bits(ref[1][lo]));
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t n = (uint64_t)(last - first + 1) * CHUNK, total = 0;
    printf("floats 0x%04lx0000..0x%04lxffff: %llu, %.1f s\n", first, last, (unsigned long long)n,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    for (int k = 0; k < N_FORMS; k++) {
        printf("  %-11s %llu mismatches\n", FORM[k], (unsigned long long)bad[k]);
        total += bad[k];
    }
    return total ? 1 : 0;
}
