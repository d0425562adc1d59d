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


/* Presets: every combination parses, records its names, round-trips through
 * to_spec; a key that changes a field of an axis drops that axis's name;
 * presets of one axis leave the others alone; old keys keep their meaning. */
static void test_presets(void **state) {
    (void)state;
    drift_error err;
    char buf[256];
    for (int a = 0; a < DRIFT_AXIS_COUNT; a++) {
        assert_true(drift_profile_preset_count((drift_profile_axis)a) >= 4);
        assert_null(drift_profile_preset_name((drift_profile_axis)a, drift_profile_preset_count((drift_profile_axis)a)));
    }
    size_t np = drift_profile_preset_count(DRIFT_AXIS_PRECISION), nf = drift_profile_preset_count(DRIFT_AXIS_FRAMEWORK),
           nh = drift_profile_preset_count(DRIFT_AXIS_HARDWARE);
    for (size_t i = 0; i < np; i++)
        for (size_t j = 0; j < nf; j++)
            for (size_t k = 0; k < nh; k++) {
                char spec[256];
                snprintf(spec, sizeof spec, "hardware=%s&precision=%s&framework=%s&threads=2",
                         drift_profile_preset_name(DRIFT_AXIS_HARDWARE, k), drift_profile_preset_name(DRIFT_AXIS_PRECISION, i),
                         drift_profile_preset_name(DRIFT_AXIS_FRAMEWORK, j));
                drift_numeric_profile a, b;
                if (drift_profile_parse(spec, &a, &err)) fail_msg("%s: %s", spec, err.msg);
                drift_profile_precision(&a, buf, sizeof buf);
                assert_string_equal(buf, drift_profile_preset_name(DRIFT_AXIS_PRECISION, i));
                drift_profile_framework(&a, buf, sizeof buf);
                assert_string_equal(buf, drift_profile_preset_name(DRIFT_AXIS_FRAMEWORK, j));
                drift_profile_hardware(&a, buf, sizeof buf);
                assert_string_equal(buf, drift_profile_preset_name(DRIFT_AXIS_HARDWARE, k));
                char *ts = drift_profile_to_spec(&a);
                if (drift_profile_parse(ts, &b, &err)) fail_msg("%s: %s", ts, err.msg);
                if (memcmp(&a, &b, sizeof a)) fail_msg("'%s' does not round-trip", ts);
                free(ts);
                char *js = drift_profile_to_json(&a);
                json_t *o = json_loads(js, 0, NULL);
                assert_non_null(o);
                assert_string_equal(json_string_value(json_object_get(o, "hardware_preset")),
                                    drift_profile_preset_name(DRIFT_AXIS_HARDWARE, k));
                json_decref(o);
                free(js);
            }
    /* order of axes does not matter; each resets only its own */
    drift_numeric_profile x, y;
    assert_int_equal(drift_profile_parse("precision=w8a8-fp8&framework=hf-eager&hardware=tc-fp8", &x, &err), DRIFT_OK);
    assert_int_equal(drift_profile_parse("hardware=tc-fp8&framework=hf-eager&precision=w8a8-fp8", &y, &err), DRIFT_OK);
    assert_memory_equal(&x, &y, sizeof x);
    assert_int_equal(x.weights, DRIFT_DTYPE_FP8_E4M3);
    assert_int_equal(x.dtype, DRIFT_DTYPE_BF16);
    assert_int_equal(x.mma, 32);
    assert_int_equal(x.acc_bits, 14);
    assert_int_equal(x.scores_lowp, 1);
    /* a later key of an axis drops its name (and only its), a key with the same value keeps it */
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=vllm&hardware=avx2&weights=bf16&norm=round", &x, &err), DRIFT_OK);
    assert_string_equal(x.precision_preset, "w16a16");
    assert_string_equal(x.framework_preset, "vllm");
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=vllm&hardware=avx2&kv=fp8-e4m3&lanes=16", &x, &err), DRIFT_OK);
    assert_string_equal(x.precision_preset, "");
    assert_string_equal(x.framework_preset, "vllm");
    assert_string_equal(x.hardware_preset, "");
    drift_profile_precision(&x, buf, sizeof buf);
    assert_string_equal(buf, "bf16");
    drift_profile_hardware(&x, buf, sizeof buf);
    assert_string_equal(buf, "cpu-avx2/lanes-16");
    /* precision=FORMAT keeps its old meaning (the weight format) */
    assert_int_equal(drift_profile_parse("precision=int8", &x, &err), DRIFT_OK);
    assert_int_equal(x.weights, DRIFT_DTYPE_INT8);
    assert_string_equal(x.precision_preset, "");
    /* unknown preset names list the known ones */
    assert_int_equal(drift_profile_parse("framework=tgi", &x, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "sglang"));
    assert_int_equal(drift_profile_parse("hardware=h100", &x, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "tc-fp8"));
    /* inconsistent keys are refused, naming them */
    const char *bad[] = {"lanes=12", "isa=avx2&fma=0", "isa=avx2&mma=16&lanes=8", "isa=avx2&accbits=14", "isa=avx2&mma=32&promote=100",
                         "profile=ref&lanes=8", "acts=fp8-e4m3&store=dtype", "kv=int8", "isa=avx2&lanes=4&dot=bf16",
                         "isa=avx2&lanes=8&accum=f64", "dtype=fp8-e4m3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (drift_profile_parse(bad[i], &x, &err) != DRIFT_ERR_INVALID) fail_msg("'%s' accepted", bad[i]);
    /* the old profiles' specs did not change (no new key shows) */
    assert_int_equal(drift_profile_get("cpu-bf16", &x, &err), DRIFT_OK);
    char *ts = drift_profile_to_spec(&x);
    assert_string_equal(ts, "weights=bf16&wscale=per-channel&group=32&acts=bf16&kv=bf16&accum=f32&reduce=sequential&"
                            "attn=two-pass&exp=libm&threads=0&backend=cpu&batch_invariant=1&isa=auto");
    free(ts);
}

/* Descriptors: stable names and order, and what three levels are */
static void test_descriptors(void **state) {
    (void)state;
    static const char *NAMES[] = {"w_mant", "w_exp", "w_block", "a_mant", "a_exp", "a_dynamic", "kv_mant", "kv_exp",
                                  "dtype_mant", "resid_mant", "store_lowp", "norm_round", "addnorm_f32", "swiglu_round",
                                  "rope_lowp", "scores_lowp", "probs_lowp", "bias_unfused", "logits_lowp", "attn_block",
                                  "split_k", "exp_fast", "acc_mant", "lanes", "fma", "tree_linear", "dot_bf16", "mma_k",
                                  "promote", "acc_trunc"};
    const size_t N = sizeof NAMES / sizeof *NAMES;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=vllm&hardware=avx2", &p, &err), DRIFT_OK);
    assert_int_equal(drift_profile_descriptors(&p, NULL, NULL, 0), N);
    const char *names[64];
    double v[64];
    assert_int_equal(drift_profile_descriptors(&p, names, v, 64), N);
    for (size_t i = 0; i < N; i++) assert_string_equal(names[i], NAMES[i]);
#define D(name) v[({ size_t i_ = 0; while (strcmp(names[i_], name)) i_++; i_; })]
    assert_true(D("w_mant") == 7 && D("w_exp") == 8 && D("a_mant") == 7 && D("kv_mant") == 7 && D("dtype_mant") == 7);
    assert_true(D("acc_mant") == 23 && D("lanes") == 8 && D("fma") == 1 && D("attn_block") == 128);
    assert_true(D("norm_round") == 1 && D("swiglu_round") == 1 && D("logits_lowp") == 1 && D("store_lowp") == 1);
    assert_int_equal(drift_profile_parse("precision=w8a8-int8&framework=trtllm&hardware=tc-fp8", &p, &err), DRIFT_OK);
    drift_profile_descriptors(&p, names, v, 64);
    assert_true(D("w_mant") == 7 && D("w_exp") == 0 && D("w_block") == -1 && D("a_dynamic") == 1 && D("dtype_mant") == 7);
    assert_true(D("acc_mant") == 14 && D("mma_k") == 32 && D("promote") == 128 && D("acc_trunc") == 1 && D("lanes") == 1);
    assert_true(D("split_k") == 2 && D("norm_round") == 0 && D("logits_lowp") == 1 && D("attn_block") == 64);
    assert_int_equal(drift_profile_parse("precision=w4a16&hardware=avx512-bf16", &p, &err), DRIFT_OK);
    drift_profile_descriptors(&p, names, v, 64);
    assert_true(D("w_mant") == 3 && D("w_block") == 128 && D("lanes") == 16 && D("dot_bf16") == 1);
    /* rope: three values; the descriptor orders them (f32 0, dtype-table 0.5, dtype 1) */
    assert_true(D("rope_lowp") == 0);
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=vllm-compile&hardware=avx2", &p, &err), DRIFT_OK);
    assert_int_equal(p.rope_lowp, DRIFT_ROPE_TABLE);
    assert_true(p.norm_round == 0 && p.addnorm_f32 == 1 && p.swiglu_round == 0 && p.probs_lowp == 1 && p.attn_block == 128);
    drift_profile_descriptors(&p, names, v, 64);
    assert_true(D("rope_lowp") == 0.5 && D("norm_round") == 0 && D("addnorm_f32") == 1);
    /* vllm: today's rotary kernel (dtype cos/sin table, f32 arithmetic; session 23) */
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=vllm&hardware=avx2", &p, &err), DRIFT_OK);
    drift_profile_descriptors(&p, names, v, 64);
    assert_true(D("rope_lowp") == 0.5);
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=hf-eager&hardware=avx2", &p, &err), DRIFT_OK);
    drift_profile_descriptors(&p, names, v, 64);
    assert_true(D("rope_lowp") == 1);
    /* a rope key after the preset drops its name; the framework text names the value */
    assert_int_equal(drift_profile_parse("precision=w16a16&framework=vllm&hardware=avx2&rope=dtype", &p, &err), DRIFT_OK);
    assert_string_equal(p.framework_preset, "");
    char fw[256];
    drift_profile_framework(&p, fw, sizeof fw);
    assert_non_null(strstr(fw, "/rope-dtype"));
    assert_null(strstr(fw, "/rope-dtype-table"));
    char *ts = drift_profile_to_spec(&p);
    assert_non_null(strstr(ts, "&rope=dtype"));
    assert_null(strstr(ts, "&rope=dtype-table"));
    drift_numeric_profile q;
    assert_int_equal(drift_profile_parse(ts, &q, &err), DRIFT_OK);
    assert_memory_equal(&p, &q, sizeof p);
    free(ts);
    assert_int_equal(drift_profile_parse("rope=table", &q, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "f32, dtype or dtype-table"));
    assert_int_equal(drift_profile_parse("norm=dtype-table", &q, &err), DRIFT_ERR_INVALID); /* two-valued keys stay two */
    assert_non_null(strstr(err.msg, "f32 or round"));
    assert_int_equal(drift_profile_parse("rope=dtype-table&backend=cuda", &q, &err) == DRIFT_OK, 0);
    /* w4a16-g32: int4 with groups of 32 */
    assert_int_equal(drift_profile_parse("precision=w4a16-g32", &p, &err), DRIFT_OK);
    drift_profile_descriptors(&p, names, v, 64);
    assert_true(D("w_mant") == 3 && D("w_block") == 32 && D("a_mant") == 7);
    /* cap smaller than the total: only cap written */
    names[2] = NULL;
    assert_int_equal(drift_profile_descriptors(&p, names, v, 2), N);
    assert_null(names[2]);
#undef D
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named),          cmocka_unit_test(test_parse),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_spec_roundtrip),
        cmocka_unit_test(test_describe_json),
        cmocka_unit_test(test_presets),        cmocka_unit_test(test_descriptors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
