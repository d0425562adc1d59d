/* test_profile.c - named profiles, key=value parsing, errors naming the bad
 * key or value, to_spec round trip, describe and JSON (precision and
 * framework dimensions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/profile.h"
#include "model/numerics.h"

static void test_named(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    assert_true(drift_profile_count() >= 10);
    for (size_t i = 0; i < drift_profile_count(); i++) {
        const char *name = drift_profile_name_at(i);
        assert_non_null(name);
        assert_int_equal(drift_profile_get(name, &p, &err), DRIFT_OK);
        assert_string_equal(p.name, name);
#ifndef DRIFT_HAVE_CUDA
        /* cuda-* profiles exist in every build; only a CUDA build accepts them
         * (test_cuda_model.c checks them key by key) */
        if (p.backend == DRIFT_BACKEND_CUDA) {
            assert_int_equal(drift_profile_validate(&p, &err), DRIFT_ERR_UNSUPPORTED);
            continue;
        }
#endif
        assert_int_equal(drift_profile_validate(&p, &err), DRIFT_OK);
    }
    assert_null(drift_profile_name_at(drift_profile_count()));
    assert_int_equal(drift_profile_get("ref", &p, &err), DRIFT_OK);
    assert_int_equal(p.weights, DRIFT_DTYPE_F32);
    assert_int_equal(p.accum, DRIFT_ACCUM_F64);
    assert_int_equal(p.isa, DRIFT_ISA_REF);
    assert_int_equal(p.threads, 1);
    assert_int_equal(p.reduce, DRIFT_REDUCE_SEQUENTIAL);
    assert_int_equal(p.attn, DRIFT_ATTN_TWO_PASS);
    assert_int_equal(p.exp, DRIFT_EXP_LIBM);
    assert_int_equal(p.batch_invariant, 1);
    assert_int_equal(drift_profile_get("cpu-fp8", &p, &err), DRIFT_OK);
    assert_int_equal(p.weights, DRIFT_DTYPE_FP8_E4M3);
    assert_int_equal(p.weight_scale, DRIFT_SCALE_PER_CHANNEL);
    assert_int_equal(p.acts, DRIFT_DTYPE_BF16);
    assert_int_equal(drift_profile_get("gpu-fp8", &p, &err), DRIFT_OK);
    assert_int_equal(p.acts, DRIFT_DTYPE_FP8_E4M3);
    assert_int_equal(p.reduce, DRIFT_REDUCE_BLOCKED);
    assert_int_equal(p.split_k, 4);
    assert_int_equal(p.attn, DRIFT_ATTN_ONLINE);
    assert_int_equal(p.exp, DRIFT_EXP_FAST);
    assert_int_equal(drift_profile_get("cpu-int4", &p, &err), DRIFT_OK);
    assert_int_equal(p.group_size, 32);
    assert_int_equal(drift_profile_get("tpu-magic", &p, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "tpu-magic"));
}

static void test_parse(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_parse("weights=fp8-e4m3&acts=bf16&kv=f16&accum=f32&"
                                         "reduce=blocked:4&attn=online:64&exp=fast&threads=2&"
                                         "isa=avx2&batch_invariant=0",
                                         &p, &err),
                     DRIFT_OK);
    assert_int_equal(p.weights, DRIFT_DTYPE_FP8_E4M3);
    assert_int_equal(p.acts, DRIFT_DTYPE_BF16);
    assert_int_equal(p.kv, DRIFT_DTYPE_F16);
    assert_int_equal(p.accum, DRIFT_ACCUM_F32);
    assert_int_equal(p.reduce, DRIFT_REDUCE_BLOCKED);
    assert_int_equal(p.split_k, 4);
    assert_int_equal(p.attn, DRIFT_ATTN_ONLINE);
    assert_int_equal(p.attn_block, 64);
    assert_int_equal(p.exp, DRIFT_EXP_FAST);
    assert_int_equal(p.threads, 2);
    assert_int_equal(p.isa, DRIFT_ISA_AVX2);
    assert_int_equal(p.batch_invariant, 0);
    assert_string_equal(p.name, "custom");
    /* profile first, then overrides */
    assert_int_equal(drift_profile_parse("profile=cpu-bf16&weights=int4&group=128", &p, &err), DRIFT_OK);
    assert_int_equal(p.acts, DRIFT_DTYPE_BF16);
    assert_int_equal(p.weights, DRIFT_DTYPE_INT4);
    assert_int_equal(p.group_size, 128);
    assert_int_equal(drift_profile_parse("profile=ref", &p, &err), DRIFT_OK);
    assert_string_equal(p.name, "ref");
    assert_int_equal(drift_profile_parse("weights=fp8,reduce=blocked,attn=online", &p, &err), DRIFT_OK);
    assert_int_equal(p.weights, DRIFT_DTYPE_FP8_E4M3);
    assert_int_equal(p.split_k, 4);
    assert_int_equal(p.attn_block, 64);
    assert_int_equal(drift_profile_parse(NULL, &p, &err), DRIFT_OK);
    assert_string_equal(p.name, "cpu-f32");
}

static void expect_bad(const char *spec, const char *needle) {
    drift_numeric_profile p;
    drift_error err;
    drift_error_clear(&err);
    drift_status st = drift_profile_parse(spec, &p, &err);
    if (st != DRIFT_ERR_INVALID) fail_msg("'%s': status %d, want invalid", spec, st);
    if (!strstr(err.msg, needle)) fail_msg("'%s': message '%s' lacks '%s'", spec, err.msg, needle);
}

static void test_errors(void **state) {
    (void)state;
    expect_bad("weights=fp9", "fp9");
    expect_bad("weights=fp9", "weights");
    expect_bad("colour=blue", "colour");
    expect_bad("acts=int4", "acts");
    expect_bad("kv=q4_0", "kv");
    expect_bad("reduce=blocked:0", "blocked:0");
    expect_bad("reduce=blocked:x", "reduce");
    expect_bad("reduce=random", "random");
    expect_bad("attn=online:-3", "attn");
    expect_bad("exp=slow", "exp");
    expect_bad("threads=-1", "threads");
    expect_bad("threads=two", "threads");
    expect_bad("isa=neon", "isa");
    expect_bad("batch_invariant=maybe", "batch_invariant");
    expect_bad("weights", "not key=value");
    expect_bad("weights=bf16&profile=ref", "must come first");
    expect_bad("profile=nope", "nope");
    expect_bad("profile=ref&accum=f32", "isa=ref");
    expect_bad("profile=ref&attn=online:4", "two-pass");
    expect_bad("weights=int4&group=64", "group");
    /* set: unknown key is NOT_FOUND so callers can try their own keys */
    drift_numeric_profile p;
    drift_error err;
    drift_profile_parse("", &p, &err);
    assert_int_equal(drift_profile_set(&p, "model", "x.gguf", &err), DRIFT_ERR_NOT_FOUND);
    assert_int_equal(drift_profile_set(&p, "exp", "fast", &err), DRIFT_OK);
}

static void test_spec_roundtrip(void **state) {
    (void)state;
    drift_error err;
    for (size_t i = 0; i < drift_profile_count(); i++) {
        drift_numeric_profile a, b;
        assert_int_equal(drift_profile_get(drift_profile_name_at(i), &a, &err), DRIFT_OK);
#ifndef DRIFT_HAVE_CUDA
        if (a.backend == DRIFT_BACKEND_CUDA) continue; /* parse refuses it here: test_cuda_model.c */
#endif
        char *spec = drift_profile_to_spec(&a);
        assert_non_null(spec);
        if (drift_profile_parse(spec, &b, &err)) fail_msg("%s: '%s': %s", a.name, spec, err.msg);
        snprintf(b.name, sizeof b.name, "%s", a.name);
        if (memcmp(&a, &b, sizeof a)) fail_msg("%s: '%s' does not round-trip", a.name, spec);
        free(spec);
    }
}

static void test_describe_json(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_parse("profile=gpu-fp8", &p, &err), DRIFT_OK);
    char *d = drift_profile_describe(&p);
    assert_non_null(d);
    assert_non_null(strstr(d, "gpu-fp8"));
    assert_non_null(strstr(d, "reduce=blocked:4"));
    assert_non_null(strstr(d, "attn=online:64"));
    assert_non_null(strstr(d, "per-tensor"));
    free(d);
    char *js = drift_profile_to_json(&p);
    assert_non_null(js);
    json_error_t je;
    json_t *o = json_loads(js, 0, &je);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "precision")), "fp8-e4m3");
    assert_string_equal(json_string_value(json_object_get(o, "acts")), "fp8-e4m3");
    assert_string_equal(json_string_value(json_object_get(o, "reduce")), "blocked:4");
    const char *fw = json_string_value(json_object_get(o, "framework"));
    assert_non_null(fw);
    assert_true(strncmp(fw, "driftbench-embedded/", 20) == 0);
    assert_non_null(strstr(fw, "blocked:4"));
    assert_non_null(strstr(fw, "online:64"));
    assert_non_null(strstr(fw, "exp-fast"));
    assert_true(json_is_true(json_object_get(o, "batch_invariant")));
    json_decref(o);
    free(js);
    char fwb[128];
    assert_int_equal(drift_profile_parse("profile=ref", &p, &err), DRIFT_OK);
    drift_profile_framework(&p, fwb, sizeof fwb);
    assert_string_equal(fwb, "driftbench-embedded/ref");
    drift_profile_precision(&p, fwb, sizeof fwb);
    assert_string_equal(fwb, "f32");
    /* dtype names round-trip */
    for (int t = 0; t < DRIFT_DTYPE_COUNT; t++) {
        drift_dtype back;
        assert_int_equal(drift_dtype_parse(drift_dtype_name((drift_dtype)t), &back), 0);
        assert_int_equal(back, t);
        assert_string_equal(drift_dtype_name((drift_dtype)t), num_traits_of((drift_dtype)t)->name);
    }
    drift_dtype back;
    assert_int_equal(drift_dtype_parse("nope", &back), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named),          cmocka_unit_test(test_parse),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_spec_roundtrip),
        cmocka_unit_test(test_describe_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
