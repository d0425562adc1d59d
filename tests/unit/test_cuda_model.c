/* test_cuda_model.c - the embedded engine with backend=cuda.
 *
 * Everywhere (no GPU needed): the cuda profiles and the gemm key (parse,
 * to_spec only for cuda, framework and JSON, validation: accum=bf16 is
 * INVALID; a build without CUDA says UNSUPPORTED), and, when no GPU is
 * visible, loading a model or opening an embedded target with backend=cuda
 * fails cleanly with DRIFT_ERR_UNSUPPORTED and a message saying why.
 *
 * With a GPU (drift_cuda_device_count() > 0), on the shipped models
 * ($DRIFT_SOURCE/models): cuda-f32 logits against profile ref (max |gpu -
 * ref| < 1e-3 * max |ref|), last-row-only logits equal to the last of all
 * rows, greedy 32-token generation identical to ref, embeddings close;
 * batch invariance with cuda-f32 and cuda-bf16 (a prompt's decode logits
 * alone and as one row of a batch of 8 sessions at other positions:
 * bit-identical; generate with batch 1 and 4: same tokens); cuda-fp8 loads
 * and generates; the MoE model on cuda-f32 close to ref; the embedded
 * target records the GPU as its hardware; a batch of 200 rows (logits
 * downloaded through pinned memory in pieces) equal to each row alone;
 * greedy steps (the pick made on the GPU) equal to the host's argmax of the
 * same step's logits, for 1 and 24 rows; four models generating side by side
 * in threads while another process loads the GPU give the texts each gives
 * alone on an idle GPU (the KV cache of a new generation was once cleared on
 * the legacy default stream, and the clear could land after the model had
 * written it: bench/BENCHMARKS.md, issue 24's CUDA lead).
 *
 * Without a GPU the GPU part is skipped: exit code 77 (ctest: skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/model.h"
#include "driftbench/profile.h"
#include "driftbench/target.h"
#ifdef DRIFT_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#endif

static const char *model_path(const char *name) {
    static char path[4][1024];
    static int slot;
    char *p = path[slot++ % 4];
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(p, 1024, "%s/models/%s.gguf", src ? src : "..", name);
    return p;
}

/* Parses without validating (drift_profile_set key by key from cpu-f32), so
 * cuda specs can be checked in a build without CUDA too. */
static void set_all(const char *spec, drift_numeric_profile *p) {
    drift_error err;
    assert_int_equal(drift_profile_get("cpu-f32", p, &err), DRIFT_OK);
    char *s = strdup(spec), *save = NULL;
    for (char *kv = strtok_r(s, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        assert_non_null(eq);
        *eq = 0;
        if (drift_profile_set(p, kv, eq + 1, &err)) fail_msg("%s=%s: %s", kv, eq + 1, err.msg);
    }
    free(s);
}

/* ---------------------------------------------------------- no GPU needed */

static void test_cuda_profiles(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    static const struct {
        const char *name;
        drift_dtype w, a, kv;
        drift_gemm gemm;
    } want[] = {
        {"cuda-f32", DRIFT_DTYPE_F32, DRIFT_DTYPE_F32, DRIFT_DTYPE_F32, DRIFT_GEMM_KERNEL},
        {"cuda-bf16", DRIFT_DTYPE_BF16, DRIFT_DTYPE_BF16, DRIFT_DTYPE_BF16, DRIFT_GEMM_KERNEL},
        {"cuda-fp8", DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_BF16, DRIFT_GEMM_VENDOR},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int listed = 0;
        for (size_t j = 0; j < drift_profile_count(); j++) listed |= !strcmp(drift_profile_name_at(j), want[i].name);
        assert_true(listed);
        assert_int_equal(drift_profile_get(want[i].name, &p, &err), DRIFT_OK);
        assert_int_equal(p.backend, DRIFT_BACKEND_CUDA);
        assert_int_equal(p.weights, want[i].w);
        assert_int_equal(p.acts, want[i].a);
        assert_int_equal(p.kv, want[i].kv);
        assert_int_equal(p.gemm, want[i].gemm);
        assert_int_equal(p.batch_invariant, 1);
        assert_int_equal(p.weight_scale, DRIFT_SCALE_PER_CHANNEL);
        /* the spec names gemm and round-trips (key by key: no validation) */
        char *spec = drift_profile_to_spec(&p);
        assert_non_null(spec);
        assert_non_null(strstr(spec, "backend=cuda"));
        assert_non_null(strstr(spec, want[i].gemm == DRIFT_GEMM_VENDOR ? "&gemm=vendor" : "&gemm=kernel"));
        drift_numeric_profile b;
        set_all(spec, &b);
        snprintf(b.name, sizeof b.name, "%s", p.name);
        if (memcmp(&p, &b, sizeof p)) fail_msg("%s: '%s' does not round-trip", p.name, spec);
        free(spec);
        /* validation: fine in a CUDA build (GPU or not), UNSUPPORTED without */
        drift_error_clear(&err);
        drift_status st = drift_profile_validate(&p, &err);
#ifdef DRIFT_HAVE_CUDA
        if (st) fail_msg("%s: %s", p.name, err.msg);
#else
        assert_int_equal(st, DRIFT_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "backend=cuda"));
        assert_non_null(strstr(err.msg, "no CUDA backend"));
#endif
        char *d = drift_profile_describe(&p);
        assert_non_null(d);
        assert_non_null(strstr(d, "gemm="));
        assert_non_null(strstr(d, "split-KV"));
        free(d);
    }
#ifndef DRIFT_HAVE_CUDA
    assert_int_equal(drift_cuda_device_count(), 0);
#endif
    assert_true(drift_cuda_device_count() >= 0);
}

static void test_gemm_key(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_get("cpu-f32", &p, &err), DRIFT_OK);
    assert_int_equal(p.gemm, DRIFT_GEMM_KERNEL);
    assert_int_equal(drift_profile_set(&p, "gemm", "vendor", &err), DRIFT_OK);
    assert_int_equal(p.gemm, DRIFT_GEMM_VENDOR);
    assert_int_equal(drift_profile_set(&p, "gemm", "kernel", &err), DRIFT_OK);
    assert_int_equal(p.gemm, DRIFT_GEMM_KERNEL);
    drift_error_clear(&err);
    assert_int_equal(drift_profile_set(&p, "gemm", "cublas", &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "gemm"));
    assert_non_null(strstr(err.msg, "cublas"));
    /* a CPU spec never mentions gemm (CPU spec strings are unchanged) */
    for (size_t i = 0; i < drift_profile_count(); i++) {
        assert_int_equal(drift_profile_get(drift_profile_name_at(i), &p, &err), DRIFT_OK);
        char *spec = drift_profile_to_spec(&p);
        assert_non_null(spec);
        if (p.backend == DRIFT_BACKEND_CPU && strstr(spec, "gemm")) fail_msg("%s: '%s'", p.name, spec);
        char *js = drift_profile_to_json(&p);
        json_error_t je;
        json_t *o = json_loads(js, 0, &je);
        assert_non_null(o);
        if (p.backend == DRIFT_BACKEND_CPU) assert_null(json_object_get(o, "gemm"));
        else assert_string_equal(json_string_value(json_object_get(o, "gemm")), p.gemm == DRIFT_GEMM_VENDOR ? "vendor" : "kernel");
        json_decref(o);
        free(js);
        free(spec);
    }
    assert_int_equal(drift_profile_parse("weights=bf16&gemm=vendor", &p, &err), DRIFT_OK); /* ignored on the CPU */
    char *spec = drift_profile_to_spec(&p);
    assert_null(strstr(spec, "gemm"));
    free(spec);
    /* attn=two-pass resets the block, so the spec (which omits it) stays exact */
    assert_int_equal(drift_profile_parse("attn=online:16&attn=two-pass", &p, &err), DRIFT_OK);
    assert_int_equal(p.attn_block, 64);
}

static void test_cuda_framework(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    char fw[256];
    assert_int_equal(drift_profile_get("cuda-bf16", &p, &err), DRIFT_OK);
    drift_profile_framework(&p, fw, sizeof fw);
    assert_string_equal(fw, "driftbench-embedded/cuda/gemm-kernel/attn-split:64/exp-libm/acc-f32");
    assert_int_equal(drift_profile_get("cuda-fp8", &p, &err), DRIFT_OK);
    drift_profile_framework(&p, fw, sizeof fw);
    assert_non_null(strstr(fw, "/gemm-vendor/"));
    drift_profile_precision(&p, fw, sizeof fw);
    assert_string_equal(fw, "fp8-e4m3");
    set_all("profile=cuda-f32&batch_invariant=0&attn=online:32", &p);
    drift_profile_framework(&p, fw, sizeof fw);
    assert_non_null(strstr(fw, "attn-split:auto"));
    assert_non_null(strstr(fw, "/batch-variant"));
    set_all("profile=cuda-f32&attn=online:32", &p);
    drift_profile_framework(&p, fw, sizeof fw);
    assert_non_null(strstr(fw, "attn-split:32"));
    set_all("profile=cuda-f32&attn=two-pass", &p); /* the backend's fixed split */
    drift_profile_framework(&p, fw, sizeof fw);
    assert_non_null(strstr(fw, "attn-split:256"));
    /* the CPU framework string of a cuda profile moved back to the CPU is the CPU's */
    set_all("profile=cuda-f32&backend=cpu", &p);
    drift_profile_framework(&p, fw, sizeof fw);
    assert_null(strstr(fw, "cuda"));
    assert_null(strstr(fw, "gemm"));
}

static void expect_invalid(const char *spec, const char *needle) {
    drift_numeric_profile p;
    drift_error err;
    drift_error_clear(&err);
    drift_status st = drift_profile_parse(spec, &p, &err);
    if (st != DRIFT_ERR_INVALID) fail_msg("'%s': status %d (%s), want invalid", spec, st, err.msg);
    if (!strstr(err.msg, needle)) fail_msg("'%s': message '%s' lacks '%s'", spec, err.msg, needle);
}

static void test_cuda_validation(void **state) {
    (void)state;
    expect_invalid("profile=cuda-f32&accum=bf16", "accum=bf16");
    expect_invalid("backend=cuda&accum=bf16", "backend=cuda");
    expect_invalid("profile=cuda-f32&gemm=magic", "gemm");
    /* accum=bf16 stays fine on the CPU */
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_parse("accum=bf16&isa=scalar", &p, &err), DRIFT_OK);
}

/* No GPU visible: loading fails with UNSUPPORTED and says why (no crash, no
 * model). With a GPU: an invalid cuda profile still fails before loading. */
static void test_cuda_load_without_gpu(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    drift_model *m = (drift_model *)&err; /* must be reset to NULL */
    if (drift_cuda_device_count() > 0) {
        set_all("profile=cuda-f32&accum=bf16", &p);
        assert_int_equal(drift_model_load(model_path("qwen2-7m"), &p, &m, &err), DRIFT_ERR_INVALID);
        assert_null(m);
        return;
    }
    assert_int_equal(drift_profile_get("cuda-f32", &p, &err), DRIFT_OK);
    drift_error_clear(&err);
    assert_int_equal(drift_model_load(model_path("qwen2-7m"), &p, &m, &err), DRIFT_ERR_UNSUPPORTED);
    assert_null(m);
    fprintf(stderr, "load with backend=cuda, no GPU: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "backend=cuda"));
#ifdef DRIFT_HAVE_CUDA
    assert_non_null(strstr(err.msg, "no CUDA GPU found"));
#else
    assert_non_null(strstr(err.msg, "no CUDA backend"));
#endif
    /* the same through an embedded target spec */
    char spec[1200];
    snprintf(spec, sizeof spec, "embedded:%s?profile=cuda-bf16", model_path("qwen2-7m"));
    drift_target *t = NULL;
    drift_error_clear(&err);
    assert_int_equal(drift_target_open(spec, NULL, &t, &err), DRIFT_ERR_UNSUPPORTED);
    assert_null(t);
    assert_non_null(strstr(err.msg, "backend=cuda"));
    /* and the CPU still loads the same file */
    assert_int_equal(drift_profile_get("cpu-f32", &p, &err), DRIFT_OK);
    assert_int_equal(drift_model_load(model_path("qwen2-7m"), &p, &m, &err), DRIFT_OK);
    drift_model_free(m);
}

/* ------------------------------------------------------------- GPU needed */

static drift_model *load(const char *name, const char *spec) {
    drift_numeric_profile p;
    drift_error err = {0};
    drift_model *m = NULL;
    if (drift_profile_parse(spec, &p, &err)) fail_msg("%s: %s", spec, err.msg);
    if (drift_model_load(model_path(name), &p, &m, &err)) fail_msg("%s (%s): %s", name, spec, err.msg);
    return m;
}

static int32_t *tokens(const drift_model *m, const char *text, size_t *n) {
    int32_t *ids = NULL;
    drift_error err;
    if (drift_model_tokenize(m, text, strlen(text), -1, 0, &ids, n, &err)) fail_msg("tokenize: %s", err.msg);
    return ids;
}

/* Logits of every position of text (n rows), from one prefill. */
static float *prefill_logits(drift_model *m, const int32_t *ids, size_t n, int all) {
    int V = drift_model_get_info(m)->n_vocab;
    float *lg = malloc((all ? n : 1) * (size_t)V * sizeof *lg);
    drift_session *s = NULL;
    drift_error err;
    if (drift_session_new(m, 0, &s, &err)) fail_msg("session: %s", err.msg);
    if (drift_session_forward(s, ids, n, all, lg, NULL, &err)) fail_msg("forward: %s", err.msg);
    assert_int_equal(drift_session_pos(s), (int)n);
    drift_session_free(s);
    return lg;
}

/* max |a - b| / max |b| */
static double rel_err(const float *a, const float *b, size_t n) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= md)) md = d; /* NaN propagates */
        if (fabs((double)b[i]) > mb) mb = fabs((double)b[i]);
    }
    return md / mb;
}

static const char *PROMPT = "Q: What is 12 plus 30? Answer with a number.\nA:";

static void check_close_to_ref(const char *model, const char *profile, double tol) {
    drift_model *g = load(model, profile), *r = load(model, "profile=ref");
    int V = drift_model_get_info(g)->n_vocab;
    size_t n;
    int32_t *ids = tokens(r, PROMPT, &n);
    float *lg = prefill_logits(g, ids, n, 1), *lr = prefill_logits(r, ids, n, 1);
    double e = rel_err(lg, lr, n * (size_t)V);
    fprintf(stderr, "%s %s vs ref: %zu positions, max rel err %.3g\n", model, profile, n, e);
    assert_true(e < tol);
    /* only the last row asked: the same numbers as the last of all rows */
    float *last = prefill_logits(g, ids, n, 0);
    assert_memory_equal(last, lg + (n - 1) * (size_t)V, (size_t)V * sizeof *last);
    free(last);
    free(lg);
    free(lr);
    free(ids);
    drift_model_free(g);
    drift_model_free(r);
}

static void test_qwen2_f32_logits(void **state) {
    (void)state;
    check_close_to_ref("qwen2-7m", "profile=cuda-f32", 1e-3);
}

static void test_moe_f32_logits(void **state) {
    (void)state;
    check_close_to_ref("llama-moe-6m", "profile=cuda-f32", 1e-3);
}

static drift_generation greedy(drift_model *m, const int32_t *ids, size_t n, int max_tokens) {
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.temperature = 0;
    gp.max_tokens = max_tokens;
    drift_generation g;
    drift_error err;
    const int32_t *pp = ids;
    if (drift_model_generate(m, &pp, &n, 1, &gp, NULL, 1, &g, &err)) fail_msg("generate: %s", err.msg);
    if (g.error) fail_msg("generate: %s", g.error);
    return g;
}

static void test_qwen2_f32_greedy(void **state) {
    (void)state;
    drift_model *g = load("qwen2-7m", "profile=cuda-f32"), *r = load("qwen2-7m", "profile=ref");
    size_t n;
    int32_t *ids = tokens(r, "Describe winter in simple words.", &n);
    drift_generation a = greedy(g, ids, n, 32), b = greedy(r, ids, n, 32);
    fprintf(stderr, "qwen2-7m greedy 32: cuda-f32 '%s'\n                     ref      '%s'\n", a.text, b.text);
    assert_int_equal(a.n_tokens, b.n_tokens);
    assert_memory_equal(a.tokens, b.tokens, (size_t)a.n_tokens * sizeof *a.tokens);
    assert_string_equal(a.text, b.text);
    drift_generation_clear(&a);
    drift_generation_clear(&b);
    /* embeddings: mean final hidden state, close to ref */
    int D = drift_model_get_info(g)->dim;
    float *eg = malloc((size_t)D * sizeof *eg), *er = malloc((size_t)D * sizeof *er);
    drift_error err;
    assert_int_equal(drift_model_embed(g, "the cat sat on the mat", eg, &err), DRIFT_OK);
    assert_int_equal(drift_model_embed(r, "the cat sat on the mat", er, &err), DRIFT_OK);
    double e = rel_err(eg, er, (size_t)D);
    fprintf(stderr, "qwen2-7m embed cuda-f32 vs ref: max rel err %.3g\n", e);
    assert_true(e < 1e-3);
    free(eg);
    free(er);
    free(ids);
    drift_model_free(g);
    drift_model_free(r);
}

/* A prompt decoded alone, then as row 3 of a batch of 8 sessions whose other
 * prompts have other lengths (so other positions): its logits, for a few
 * greedy steps, are the same bits. */
static void check_batch_invariance(const char *profile) {
    enum { NB = 8, ROW = 3, STEPS = 4 };
    static const char *const OTHERS[NB] = {
        "Hello.", "Write a haiku about the sea and the wind over it.", "2 + 2 =", NULL,
        "User: Name three colours.\nAssistant:", "Once upon a time there was", "def add(a, b):",
        "The capital of France is Paris. The capital of Italy is"};
    drift_model *m = load("qwen2-7m", profile);
    int V = drift_model_get_info(m)->n_vocab;
    drift_error err;
    drift_session *ss[NB];
    int32_t next[NB];
    float *lg = malloc((size_t)NB * V * sizeof *lg);
    float *alone = malloc((size_t)STEPS * V * sizeof *alone);
    /* alone: prefill all but the last token, then batches of one */
    size_t n;
    int32_t *ids = tokens(m, PROMPT, &n);
    drift_session *s;
    assert_int_equal(drift_session_new(m, 0, &s, &err), DRIFT_OK);
    assert_int_equal(drift_session_forward(s, ids, n - 1, 0, NULL, NULL, &err), DRIFT_OK);
    int32_t t = ids[n - 1];
    for (int k = 0; k < STEPS; k++) {
        if (drift_session_forward_batch(&s, &t, 1, alone + (size_t)k * V, &err)) fail_msg("%s", err.msg);
        int best = 0;
        for (int v = 1; v < V; v++)
            if (alone[(size_t)k * V + v] > alone[(size_t)k * V + best]) best = v;
        t = best;
    }
    drift_session_free(s);
    /* in a batch of 8 */
    for (int b = 0; b < NB; b++) {
        size_t nb;
        int32_t *pb = tokens(m, b == ROW ? PROMPT : OTHERS[b], &nb);
        assert_int_equal(drift_session_new(m, 0, &ss[b], &err), DRIFT_OK);
        assert_int_equal(drift_session_forward(ss[b], pb, nb - 1, 0, NULL, NULL, &err), DRIFT_OK);
        next[b] = pb[nb - 1];
        free(pb);
    }
    for (int k = 0; k < STEPS; k++) {
        if (drift_session_forward_batch(ss, next, NB, lg, &err)) fail_msg("%s", err.msg);
        if (memcmp(lg + (size_t)ROW * V, alone + (size_t)k * V, (size_t)V * sizeof *lg)) {
            fprintf(stderr, "%s step %d: batch of %d vs alone: max rel diff %.3g\n", profile, k, NB,
                    rel_err(lg + (size_t)ROW * V, alone + (size_t)k * V, (size_t)V));
            fail_msg("%s: logits depend on the batch (step %d)", profile, k);
        }
        for (int b = 0; b < NB; b++) {
            int best = 0;
            for (int v = 1; v < V; v++)
                if (lg[(size_t)b * V + v] > lg[(size_t)b * V + best]) best = v;
            next[b] = best;
        }
    }
    fprintf(stderr, "%s: %d decode steps alone and in a batch of %d: bit-identical\n", profile, STEPS, NB);
    for (int b = 0; b < NB; b++) drift_session_free(ss[b]);
    /* generate: batch 1 and batch 4 give the same tokens */
    const int32_t *pp[4];
    size_t pl[4];
    int32_t *own[4];
    for (int i = 0; i < 4; i++) {
        own[i] = tokens(m, i == 0 ? PROMPT : OTHERS[i + 3 < NB ? i + 3 : 0], &pl[i]);
        pp[i] = own[i];
    }
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.temperature = 0;
    gp.max_tokens = 16;
    drift_generation g1[4], g4[4];
    assert_int_equal(drift_model_generate(m, pp, pl, 4, &gp, NULL, 1, g1, &err), DRIFT_OK);
    assert_int_equal(drift_model_generate(m, pp, pl, 4, &gp, NULL, 4, g4, &err), DRIFT_OK);
    for (int i = 0; i < 4; i++) {
        assert_null(g1[i].error);
        assert_null(g4[i].error);
        assert_int_equal(g1[i].n_tokens, g4[i].n_tokens);
        assert_memory_equal(g1[i].tokens, g4[i].tokens, (size_t)g1[i].n_tokens * sizeof(int32_t));
        drift_generation_clear(&g1[i]);
        drift_generation_clear(&g4[i]);
        free(own[i]);
    }
    free(ids);
    free(lg);
    free(alone);
    drift_model_free(m);
}

static void test_batch_invariance_f32(void **state) {
    (void)state;
    check_batch_invariance("profile=cuda-f32");
}

static void test_batch_invariance_bf16(void **state) {
    (void)state;
    check_batch_invariance("profile=cuda-bf16");
}

/* A batch large enough that its logits come back through pinned memory in
 * pieces (cuda_backend.cu's fwd_download, from 1 MB): each row's logits are
 * the bits of the same row decoded alone (cuda-bf16 is batch-invariant). */
static void test_large_batch(void **state) {
    (void)state;
    enum { NB = 200 };
    static const char *const P[4] = {"Hello.", "2 + 2 =", "def add(a, b):", "Once upon a time there was"};
    drift_model *m = load("qwen2-7m", "profile=cuda-bf16");
    int V = drift_model_get_info(m)->n_vocab;
    drift_error err;
    drift_session **ss = calloc(NB, sizeof *ss);
    int32_t *next = malloc(NB * sizeof *next);
    float *lg = malloc((size_t)NB * V * sizeof *lg), *one = malloc((size_t)V * sizeof *one);
    assert_true(ss && next && lg && one);
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < NB; b++) {
            size_t n;
            int32_t *ids = tokens(m, P[b % 4], &n);
            drift_session *s;
            assert_int_equal(drift_session_new(m, 0, &s, &err), DRIFT_OK);
            assert_int_equal(drift_session_forward(s, ids, n, 0, NULL, NULL, &err), DRIFT_OK);
            free(ids);
            int32_t t = (int32_t)((b * 37 + 11) % V);
            if (pass == 0) {
                ss[b] = s, next[b] = t;
                continue;
            }
            if (drift_session_forward_batch(&s, &t, 1, one, &err)) fail_msg("%s", err.msg);
            drift_session_free(s);
            if (memcmp(one, lg + (size_t)b * V, (size_t)V * sizeof *one))
                fail_msg("row %d of a batch of %d: logits differ from the row alone (max rel diff %.3g)", b, NB,
                         rel_err(lg + (size_t)b * V, one, (size_t)V));
        }
        if (pass == 0) {
            if (drift_session_forward_batch(ss, next, NB, lg, &err)) fail_msg("%s", err.msg);
            for (int b = 0; b < NB; b++) drift_session_free(ss[b]);
        }
    }
    fprintf(stderr, "cuda-bf16: %d rows in one batch (%.1f MB of logits) == each alone, bit for bit\n", NB,
            (double)NB * V * sizeof(float) / 1e6);
    free(ss), free(next), free(lg), free(one);
    drift_model_free(m);
}

/* drift_session_forward_greedy on the GPU (the pick made on the device, no
 * logits back): each row's pick is the host's argmax of the logits of the
 * same step, for 1 row and for 24 (twin sessions fed the same tokens). */
static void test_greedy_picks(void **state) {
    (void)state;
    enum { NB = 24, STEPS = 3 };
    static const char *const P[4] = {"Hello.", "2 + 2 =", "def add(a, b):", "Once upon a time there was"};
    drift_model *m = load("qwen2-7m", "profile=cuda-bf16");
    int V = drift_model_get_info(m)->n_vocab;
    drift_error err;
    drift_session *a[NB], *g[NB];
    int32_t next[NB], picks[NB];
    float *lg = malloc((size_t)NB * V * sizeof *lg);
    for (int nb = 1; nb <= NB; nb += NB - 1) {
        for (int b = 0; b < nb; b++) {
            size_t n;
            int32_t *ids = tokens(m, P[b % 4], &n);
            assert_int_equal(drift_session_new(m, 0, &a[b], &err), DRIFT_OK);
            assert_int_equal(drift_session_new(m, 0, &g[b], &err), DRIFT_OK);
            assert_int_equal(drift_session_forward(a[b], ids, n - 1, 0, NULL, NULL, &err), DRIFT_OK);
            assert_int_equal(drift_session_forward(g[b], ids, n - 1, 0, NULL, NULL, &err), DRIFT_OK);
            next[b] = ids[n - 1];
            free(ids);
        }
        for (int k = 0; k < STEPS; k++) {
            if (drift_session_forward_batch(a, next, (size_t)nb, lg, &err)) fail_msg("%s", err.msg);
            if (drift_session_forward_greedy(g, next, (size_t)nb, picks, &err)) fail_msg("%s", err.msg);
            for (int b = 0; b < nb; b++) {
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (lg[(size_t)b * V + v] > lg[(size_t)b * V + best]) best = v;
                if (picks[b] != best) fail_msg("batch of %d, step %d, row %d: GPU pick %d, host argmax %d", nb, k, b, picks[b], best);
                next[b] = best;
            }
        }
        fprintf(stderr, "greedy picks on the GPU: %d steps of %d rows equal to the host's argmax of the logits\n", STEPS, nb);
        for (int b = 0; b < nb; b++) {
            drift_session_free(a[b]);
            drift_session_free(g[b]);
        }
    }
    free(lg);
    drift_model_free(m);
}

static void test_fp8_generates(void **state) {
    (void)state;
    drift_model *m = load("qwen2-7m", "profile=cuda-fp8");
    size_t n;
    int32_t *ids = tokens(m, PROMPT, &n);
    float *lg = prefill_logits(m, ids, n, 1);
    int V = drift_model_get_info(m)->n_vocab;
    for (size_t i = 0; i < n * (size_t)V; i++)
        if (!isfinite(lg[i])) fail_msg("cuda-fp8: logit %zu is %g", i, (double)lg[i]);
    drift_generation g = greedy(m, ids, n, 24);
    fprintf(stderr, "qwen2-7m cuda-fp8 greedy: '%s' (%d tokens, %s)\n", g.text, g.n_tokens, g.finish_reason);
    assert_true(g.n_tokens > 0);
    drift_generation_clear(&g);
    free(lg);
    free(ids);
    drift_model_free(m);
}

static void test_target_records_gpu(void **state) {
    (void)state;
    char spec[1200];
    snprintf(spec, sizeof spec, "embedded:%s?profile=cuda-f32&batch=4", model_path("qwen2-7m"));
    drift_target *t = NULL;
    drift_error err;
    if (drift_target_open(spec, NULL, &t, &err)) fail_msg("%s: %s", spec, err.msg);
    const char *cfg = drift_target_config_json(t);
    assert_non_null(cfg);
    fprintf(stderr, "config: %s\n", cfg);
    json_error_t je;
    json_t *o = json_loads(cfg, 0, &je);
    assert_non_null(o);
    const char *hw = json_string_value(json_object_get(o, "hardware"));
    assert_non_null(hw);
    assert_true(strncmp(hw, "cpu-", 4) != 0 && strcmp(hw, "cuda") != 0);
    assert_non_null(json_string_value(json_object_get(o, "device")));
    assert_non_null(strchr(json_string_value(json_object_get(o, "compute_capability")), '.'));
    assert_non_null(json_string_value(json_object_get(o, "cuda_driver")));
    assert_non_null(json_string_value(json_object_get(o, "cuda_runtime")));
    assert_non_null(strstr(json_string_value(json_object_get(o, "framework")), "/cuda/"));
    json_decref(o);
    drift_target_close(t);
}


/* ---- side by side under load ---- */

enum { SBS_MODELS = 4, SBS_SEQS = 16, SBS_TOKENS = 64, SBS_ROUNDS = 8 };

typedef struct {
    drift_model *m;
    int32_t *ids[SBS_SEQS];
    size_t n[SBS_SEQS];
    drift_generation ref[SBS_SEQS]; /* alone, idle GPU */
    int differ, seqs;
} sbs_job;

/* SBS_SEQS greedy generations in batches of SBS_SEQS (sessions side by
 * side, each with a new KV cache) into out. */
static void sbs_generate(const sbs_job *j, drift_generation *out) {
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.temperature = 0;
    gp.max_tokens = SBS_TOKENS;
    drift_error err;
    if (drift_model_generate(j->m, (const int32_t *const *)j->ids, j->n, SBS_SEQS, &gp, NULL, SBS_SEQS, out, &err))
        fail_msg("generate: %s", err.msg);
}

static void *sbs_worker(void *arg) {
    sbs_job *j = arg;
    drift_generation g[SBS_SEQS];
    for (int r = 0; r < SBS_ROUNDS; r++) {
        sbs_generate(j, g);
        for (int k = 0; k < SBS_SEQS; k++) {
            j->differ += g[k].n_tokens != j->ref[k].n_tokens ||
                         memcmp(g[k].tokens, j->ref[k].tokens, (size_t)g[k].n_tokens * sizeof *g[k].tokens) != 0;
            j->seqs++;
            drift_generation_clear(&g[k]);
        }
    }
    return NULL;
}

/* Another process that keeps the GPU busy (bf16 GEMMs through cuBLAS) until
 * it is killed, or 300 s; it dies with its parent. */
static pid_t start_gpu_load(void) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = 0;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl(self, self, "--gpu-load", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void test_side_by_side_under_load(void **state) {
    (void)state;
    static const char *const NAMES[SBS_MODELS] = {"qwen2-7m", "llama-moe-6m", "qwen2-7m", "llama-moe-6m"};
    sbs_job jobs[SBS_MODELS];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < SBS_MODELS; i++) {
        jobs[i].m = load(NAMES[i], "profile=cuda-f32");
        for (int k = 0; k < SBS_SEQS; k++) {
            char text[128];
            snprintf(text, sizeof text, "Q: Tom has %d apples and buys %d more. How many now?\nA:", 3 + k + i, 5 + 2 * k);
            jobs[i].ids[k] = tokens(jobs[i].m, text, &jobs[i].n[k]);
        }
        sbs_generate(&jobs[i], jobs[i].ref);
    }
    pid_t load_pid = start_gpu_load();
    assert_true(load_pid > 0);
    sleep(3); /* the load's context and first GEMMs */
    pthread_t th[SBS_MODELS];
    for (int i = 0; i < SBS_MODELS; i++) assert_int_equal(pthread_create(&th[i], NULL, sbs_worker, &jobs[i]), 0);
    for (int i = 0; i < SBS_MODELS; i++) pthread_join(th[i], NULL);
    int load_alive = waitpid(load_pid, NULL, WNOHANG) == 0;
    kill(load_pid, SIGKILL);
    waitpid(load_pid, NULL, 0);
    int differ = 0;
    for (int i = 0; i < SBS_MODELS; i++) {
        fprintf(stderr, "side by side under load: %s: %d of %d generations differ from the idle ones\n", NAMES[i],
                jobs[i].differ, jobs[i].seqs);
        differ += jobs[i].differ;
        for (int k = 0; k < SBS_SEQS; k++) {
            drift_generation_clear(&jobs[i].ref[k]);
            free(jobs[i].ids[k]);
        }
        drift_model_free(jobs[i].m);
    }
    assert_true(load_alive); /* the load ran the whole time */
    assert_int_equal(differ, 0);
}

int main(int argc, char **argv) {
#ifdef DRIFT_HAVE_CUDA
    if (argc > 1 && !strcmp(argv[1], "--gpu-load")) { /* start_gpu_load's child */
        time_t t0 = time(NULL);
        double tf;
        drift_error err;
        while (time(NULL) - t0 < 300)
            if (dcu_bench_gemm(8192, 20, &tf, &err)) return 1;
        return 0;
    }
#else
    (void)argc;
    (void)argv;
#endif
    const struct CMUnitTest cpu[] = {
        cmocka_unit_test(test_cuda_profiles),   cmocka_unit_test(test_gemm_key),
        cmocka_unit_test(test_cuda_framework),  cmocka_unit_test(test_cuda_validation),
        cmocka_unit_test(test_cuda_load_without_gpu),
    };
    int rc = cmocka_run_group_tests_name("cuda: profiles and no-GPU behaviour", cpu, NULL, NULL);
    if (rc) return rc;
    int n_gpu = drift_cuda_device_count();
    if (n_gpu == 0) {
#ifdef DRIFT_HAVE_CUDA
        fprintf(stderr, "SKIP: the GPU tests need a CUDA GPU; none is visible (the CPU-side checks above passed)\n");
#else
        fprintf(stderr, "SKIP: this build has no CUDA backend (nvcc not found at configure time); the CPU-side checks above passed\n");
#endif
        return 77;
    }
    const struct CMUnitTest gpu[] = {
        cmocka_unit_test(test_qwen2_f32_logits),      cmocka_unit_test(test_qwen2_f32_greedy),
        cmocka_unit_test(test_batch_invariance_f32),  cmocka_unit_test(test_batch_invariance_bf16),
        cmocka_unit_test(test_fp8_generates),         cmocka_unit_test(test_moe_f32_logits),
        cmocka_unit_test(test_target_records_gpu),    cmocka_unit_test(test_large_batch),
        cmocka_unit_test(test_greedy_picks),          cmocka_unit_test(test_side_by_side_under_load),
    };
    return cmocka_run_group_tests_name("cuda: models on the GPU", gpu, NULL, NULL);
}
