/* test_transformer.c - the engine end to end on tiny random-weight models
 * written by tools/ref/tiny_model.c: logits at profile `ref` against the
 * independent float64 reference (tools/ref/ref_forward.c) for llama (GQA),
 * qwen2 (biases, NEOX RoPE), MoE, sliding window and Llama-3 RoPE scaling;
 * determinism (same profile twice: same bits); profiles that must differ;
 * batch invariance (prefill vs one token at a time, alone vs in a batch,
 * 1 vs 2 threads); generation, stop strings, seeded sampling, logprobs,
 * embeddings, chat template; bad models. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "driftbench/model.h"
#include "driftbench/target.h"
#include "model/sampler.h"
#include "../../tools/ref/ref_forward.c"
#include "../../tools/ref/tiny_model.c"


static char g_dir[256];

static const char *model_path(const char *name, const tiny_cfg *c) {
    static char path[8][512];
    static int slot;
    char *p = path[slot++ % 8];
    snprintf(p, 512, "%s/%s.gguf", g_dir, name);
    if (access(p, R_OK) != 0) {
        char err[256];
        int rc = tiny_model_write(c, p, err, sizeof err);
        if (rc) fprintf(stderr, "tiny_model_write: %s\n", err);
        assert_int_equal(rc, 0);
    }
    return p;
}

/* Tests run single-threaded unless the spec asks (the CI machine is shared:
 * OpenMP barriers on an oversubscribed machine cost more than the work). */
static drift_model *load(const char *path, const char *profile_spec) {
    drift_numeric_profile p;
    drift_error err;
    char spec[256];
    snprintf(spec, sizeof spec, "%s%s", profile_spec, strstr(profile_spec, "threads=") ? "" : "&threads=1");
    drift_status st = drift_profile_parse(spec, &p, &err);
    if (st) fprintf(stderr, "profile: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    drift_model *m;
    st = drift_model_load(path, &p, &m, &err);
    if (st) fprintf(stderr, "load: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    return m;
}

static const int TOKS[] = {84, 104, 101, 32, 99, 97, 116, 32, 115, 97, 116, 276, 260, 33, 10, 49, 50, 51};
#define NTOK ((int)(sizeof TOKS / sizeof *TOKS))

static float *all_logits(drift_model *m, const int *toks, int n) {
    const drift_model_info *in = drift_model_get_info(m);
    float *lg = malloc((size_t)n * in->n_vocab * sizeof *lg);
    int32_t ids[64];
    for (int i = 0; i < n; i++) ids[i] = toks[i];
    drift_session *s;
    drift_error err;
    assert_int_equal(drift_session_new(m, 0, &s, &err), DRIFT_OK);
    drift_status st = drift_session_forward(s, ids, (size_t)n, 1, lg, NULL, &err);
    if (st) fprintf(stderr, "forward: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    assert_int_equal(drift_session_pos(s), n);
    drift_session_free(s);
    return lg;
}

/* max |a - ref| / max |ref| over all logits */
static double rel_err(const float *a, const double *ref, size_t n) {
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= md)) md = d; /* NaN propagates */
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    return md / mr;
}

static void check_against_reference(const char *name, const tiny_cfg *c) {
    const char *path = model_path(name, c);
    drift_model *m = load(path, "profile=ref");
    int V = drift_model_get_info(m)->n_vocab;
    float *lg = all_logits(m, TOKS, NTOK);
    double *ref = malloc((size_t)NTOK * V * sizeof *ref);
    char err[256];
    assert_int_equal(ref_logits(path, TOKS, NTOK, ref, err, sizeof err), 0);
    double e = rel_err(lg, ref, (size_t)NTOK * V);
    fprintf(stderr, "%-14s ref profile vs float64 reference: max rel err %.3g\n", name, e);
    assert_true(e < 1e-4);
    /* the f32 SIMD profile is close too */
    drift_model *mf = load(path, "profile=cpu-f32");
    float *lf = all_logits(mf, TOKS, NTOK);
    double ef = rel_err(lf, ref, (size_t)NTOK * V);
    fprintf(stderr, "%-14s cpu-f32 vs float64 reference: max rel err %.3g\n", name, ef);
    assert_true(ef < 1e-4);
    free(lf);
    drift_model_free(mf);
    free(ref);
    free(lg);
    drift_model_free(m);
}

static void test_llama_vs_reference(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("llama");
    check_against_reference("llama", &c);
}

static void test_qwen2_vs_reference(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2");
    check_against_reference("qwen2", &c);
}

static void test_moe_vs_reference(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("llama");
    c.n_experts = 4;
    c.n_used = 2;
    c.hidden = 64;
    c.tied = 1;
    check_against_reference("moe", &c);
    drift_model *m = load(model_path("moe", &c), "profile=ref");
    assert_int_equal(drift_model_get_info(m)->n_experts, 4);
    assert_int_equal(drift_model_get_info(m)->tied_output, 1);
    /* older conversions: one tensor per expert, same values -> same logits */
    tiny_cfg cl = c;
    cl.legacy_experts = 1;
    drift_model *ml = load(model_path("moe_legacy", &cl), "profile=ref");
    float *a = all_logits(m, TOKS, NTOK), *b = all_logits(ml, TOKS, NTOK);
    assert_memory_equal(a, b, (size_t)NTOK * drift_model_get_info(m)->n_vocab * sizeof *a);
    free(a);
    free(b);
    drift_model_free(ml);
    drift_model_free(m);
}

static void test_window_and_rope_scaling(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("llama");
    c.sliding_window = 5;
    check_against_reference("swa", &c);
    tiny_cfg c3 = tiny_default("llama");
    c3.llama3_scaling = 1;
    c3.theta = 500000.0f;
    c3.n_kv_heads = 1;
    check_against_reference("llama3rope", &c3);
    tiny_cfg c4 = c3;
    c4.rope_freqs_tensor = 1; /* same scaling given as llama.cpp's rope_freqs.weight */
    check_against_reference("llama3freqs", &c4);
    /* the window and the scaling matter: logits differ from the plain model's */
    tiny_cfg c0 = tiny_default("llama");
    drift_model *a = load(model_path("llama", &c0), "profile=ref"), *b = load(model_path("swa", &c), "profile=ref");
    float *la = all_logits(a, TOKS, NTOK), *lb = all_logits(b, TOKS, NTOK);
    int V = drift_model_get_info(a)->n_vocab;
    /* same weights (same seed): positions < 5 agree exactly, later ones do not */
    assert_memory_equal(la, lb, (size_t)5 * V * sizeof *la);
    assert_true(memcmp(la + (size_t)(NTOK - 1) * V, lb + (size_t)(NTOK - 1) * V, (size_t)V * sizeof *la) != 0);
    free(la);
    free(lb);
    drift_model_free(a);
    drift_model_free(b);
}

static void test_determinism_and_profiles(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("llama");
    const char *path = model_path("llama", &c);
    drift_model *r1 = load(path, "profile=ref"), *r2 = load(path, "profile=ref");
    int V = drift_model_get_info(r1)->n_vocab;
    size_t n = (size_t)NTOK * V;
    float *a = all_logits(r1, TOKS, NTOK), *b = all_logits(r2, TOKS, NTOK);
    assert_memory_equal(a, b, n * sizeof *a);
    const char *others[] = {"profile=cpu-bf16", "profile=cpu-fp8", "profile=cpu-int4", "profile=cpu-f32"};
    double lo[] = {1e-4, 1e-3, 1e-3, 0}, hi[] = {0.2, 0.5, 0.5, 1e-4};
    double *ref = malloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = a[i];
    for (int k = 0; k < 4; k++) {
        drift_model *m = load(path, others[k]);
        float *x = all_logits(m, TOKS, NTOK), *y = all_logits(m, TOKS, NTOK);
        assert_memory_equal(x, y, n * sizeof *x); /* each profile is deterministic */
        double e = rel_err(x, ref, n);
        fprintf(stderr, "%-18s vs ref: max rel diff %.3g\n", others[k], e);
        assert_true(e >= lo[k] && e <= hi[k]);
        free(x);
        free(y);
        drift_model_free(m);
    }
    free(ref);
    free(a);
    free(b);
    drift_model_free(r1);
    drift_model_free(r2);
}

static void test_batch_invariance(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2");
    const char *path = model_path("qwen2", &c);
    const char *profiles[] = {"profile=cpu-f32&threads=1", "profile=cpu-f32&threads=2", "profile=cpu-bf16&threads=1", "profile=ref"};
    float *base = NULL;
    for (int pi = 0; pi < 4; pi++) {
        drift_model *m = load(path, profiles[pi]);
        int V = drift_model_get_info(m)->n_vocab;
        /* prefill of all tokens */
        float *pre = all_logits(m, TOKS, NTOK);
        if (pi == 1) { /* 2 threads: the same bits as 1 thread (only the prefill: barriers are slow on a shared CI machine) */
            assert_memory_equal(pre, base, (size_t)NTOK * V * sizeof *pre);
            free(pre);
            drift_model_free(m);
            continue;
        }
        /* one token at a time */
        drift_session *s, *o1, *o2;
        drift_error err;
        assert_int_equal(drift_session_new(m, 64, &s, &err), DRIFT_OK);
        assert_int_equal(drift_session_new(m, 64, &o1, &err), DRIFT_OK);
        assert_int_equal(drift_session_new(m, 64, &o2, &err), DRIFT_OK);
        float *lg = malloc((size_t)3 * V * sizeof *lg);
        for (int t = 0; t < NTOK; t++) {
            int32_t id = TOKS[t];
            assert_int_equal(drift_session_forward(s, &id, 1, 0, lg, NULL, &err), DRIFT_OK);
            assert_memory_equal(lg, pre + (size_t)t * V, (size_t)V * sizeof *lg);
        }
        /* in a batch with two other sequences at other positions */
        drift_session_reset(s);
        int32_t other[] = {300 - 1, 5, 260};
        int32_t id0 = other[0];
        assert_int_equal(drift_session_forward(o2, &id0, 1, 0, NULL, NULL, &err), DRIFT_OK); /* o2 one step ahead */
        for (int t = 0; t < NTOK; t++) {
            drift_session *ss[3] = {o1, s, o2};
            int32_t ids[3] = {other[t % 3], TOKS[t], other[(t + 1) % 3]};
            assert_int_equal(drift_session_forward_batch(ss, ids, 3, lg, &err), DRIFT_OK);
            assert_memory_equal(lg + V, pre + (size_t)t * V, (size_t)V * sizeof *lg);
        }
        { /* the greedy step: each session's pick is the argmax of that step's logits (fresh twins of the sessions) */
            drift_session *a[3], *g[3];
            int32_t first[3] = {TOKS[0], 5, 260}, ids[3] = {TOKS[1], 7, 9}, picks[3];
            for (int i = 0; i < 3; i++) {
                assert_int_equal(drift_session_new(m, 64, &a[i], &err), DRIFT_OK);
                assert_int_equal(drift_session_new(m, 64, &g[i], &err), DRIFT_OK);
                assert_int_equal(drift_session_forward(a[i], &first[i], 1, 0, NULL, NULL, &err), DRIFT_OK);
                assert_int_equal(drift_session_forward(g[i], &first[i], 1, 0, NULL, NULL, &err), DRIFT_OK);
            }
            assert_int_equal(drift_session_forward_batch(a, ids, 3, lg, &err), DRIFT_OK);
            assert_int_equal(drift_session_forward_greedy(g, ids, 3, picks, &err), DRIFT_OK);
            for (int i = 0; i < 3; i++) {
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (lg[(size_t)i * V + v] > lg[(size_t)i * V + best]) best = v;
                assert_int_equal(picks[i], best);
                assert_int_equal(drift_session_pos(g[i]), 2);
                drift_session_free(a[i]);
                drift_session_free(g[i]);
            }
        }
        { /* a session twice in one batch is refused before any row runs (no position moves) */
            drift_session *dup[3] = {o2, s, o2};
            int32_t ids[3] = {5, 5, 5};
            int p0 = drift_session_pos(s), p2 = drift_session_pos(o2);
            assert_int_equal(drift_session_forward_batch(dup, ids, 3, lg, &err), DRIFT_ERR_INVALID);
            assert_non_null(strstr(err.msg, "twice"));
            assert_int_equal(drift_session_pos(s), p0);
            assert_int_equal(drift_session_pos(o2), p2);
        }
        if (pi == 0) base = pre;
        else free(pre);
        free(lg);
        drift_session_free(s);
        drift_session_free(o1);
        drift_session_free(o2);
        drift_model_free(m);
    }
    free(base);
}


/* The lab's baseline and its levels: batch- and thread-invariant (the A/A
 * control is zero by construction: the same bits with 1 and 2 threads and
 * with the sequence alone or in a batch of 8 or 32 sessions at other
 * positions), and each close to the float64 reference (how far is each
 * level from exact; the hardware keys' levels by their accumulators). */
#define LAB_BASE "precision=w16a16&framework=vllm&hardware=avx2"
static void test_lab_levels_invariance(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2"); /* with q/k/v biases: bias=fused|unfused act */
    const char *path = model_path("qwen2", &c);
    const char *levels[] = {LAB_BASE,
                            LAB_BASE "&hardware=avx512-bf16",
                            LAB_BASE "&hardware=tc-fp8",
                            LAB_BASE "&hardware=sse2",
                            LAB_BASE "&framework=hf-eager",
                            LAB_BASE "&framework=sglang",
                            LAB_BASE "&framework=trtllm",
                            LAB_BASE "&bias=unfused", /* no preset sets it since hf-eager's bias is fused */
                            LAB_BASE "&precision=w8a8-int8",
                            LAB_BASE "&precision=w8a8-fp8"};
    const int n_levels = (int)(sizeof levels / sizeof *levels);
    double *ref = NULL;
    char rerr[256];
    for (int li = 0; li < n_levels; li++) {
        char spec[256];
        snprintf(spec, sizeof spec, "%s&threads=1", levels[li]);
        drift_model *m = load(path, spec);
        int V = drift_model_get_info(m)->n_vocab;
        float *pre = all_logits(m, TOKS, NTOK);
        if (!ref) {
            ref = malloc((size_t)NTOK * V * sizeof *ref);
            assert_int_equal(ref_logits(path, TOKS, NTOK, ref, rerr, sizeof rerr), 0);
        }
        double e = rel_err(pre, ref, (size_t)NTOK * V);
        fprintf(stderr, "%-72s vs float64 reference: max rel err %.3g\n", levels[li], e);
        assert_true(e > 1e-6); /* reduced precision: not the f32 engine */
        assert_true(e < 0.1);
        /* 2 threads: the same bits */
        snprintf(spec, sizeof spec, "%s&threads=2", levels[li]);
        drift_model *m2 = load(path, spec);
        float *pre2 = all_logits(m2, TOKS, NTOK);
        assert_memory_equal(pre, pre2, (size_t)NTOK * V * sizeof *pre);
        free(pre2);
        drift_model_free(m2);
        /* batches of 1, 8 and 32 sessions: the sequence's row is the prefill's */
        const int Bs[] = {1, 8, 32};
        drift_error err;
        float *lg = malloc((size_t)32 * V * sizeof *lg);
        for (int bi = 0; bi < 3; bi++) {
            int B = Bs[bi];
            drift_session *ss[32];
            for (int i = 0; i < B; i++) {
                assert_int_equal(drift_session_new(m, 64, &ss[i], &err), DRIFT_OK);
                for (int j = 0; j < i % 5; j++) { /* the others start at other positions */
                    int32_t id = (int32_t)(40 + 7 * i + j);
                    assert_int_equal(drift_session_forward(ss[i], &id, 1, 0, NULL, NULL, &err), DRIFT_OK);
                }
            }
            drift_session_reset(ss[0]);
            for (int t = 0; t < NTOK; t++) {
                int32_t ids[32];
                for (int i = 0; i < B; i++) ids[i] = i == 0 ? TOKS[t] : (int32_t)(50 + (3 * i + t) % 200);
                assert_int_equal(drift_session_forward_batch(ss, ids, (size_t)B, lg, &err), DRIFT_OK);
                if (memcmp(lg, pre + (size_t)t * V, (size_t)V * sizeof *lg))
                    fail_msg("%s: batch %d, token %d differs from the prefill", levels[li], B, t);
            }
            for (int i = 0; i < B; i++) drift_session_free(ss[i]);
        }
        free(lg);
        free(pre);
        drift_model_free(m);
    }
    free(ref);
}

static void test_generate(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2");
    drift_model *m = load(model_path("qwen2", &c), "profile=cpu-f32");
    const char *texts[] = {"the cat sat", "in 123", "hello there, world", "a"};
    int32_t *pr[4];
    size_t pl[4];
    drift_error err;
    for (int i = 0; i < 4; i++) assert_int_equal(drift_model_tokenize(m, texts[i], strlen(texts[i]), -1, 0, &pr[i], &pl[i], &err), DRIFT_OK);
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.max_tokens = 12;
    gp.logprobs = 3;
    drift_generation g1[4], g3[4];
    assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, 4, &gp, NULL, 1, g1, &err), DRIFT_OK);
    assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, 4, &gp, NULL, 3, g3, &err), DRIFT_OK);
    for (int i = 0; i < 4; i++) {
        assert_null(g1[i].error);
        assert_int_equal(g1[i].n_tokens, g3[i].n_tokens);
        assert_memory_equal(g1[i].tokens, g3[i].tokens, (size_t)g1[i].n_tokens * sizeof(int32_t));
        assert_string_equal(g1[i].text, g3[i].text);
        assert_int_equal(g1[i].prompt_tokens, (int)pl[i]);
        for (int t = 0; t < g1[i].n_tokens; t++) {
            const drift_token_logprob *lp = &g1[i].lp[t];
            assert_true(lp->logprob <= 0);
            assert_int_equal(lp->n_top, 3);
            /* greedy: the chosen token is the most likely one */
            assert_int_equal(lp->top_id[0], lp->id);
            assert_true(lp->top_logprob[0] >= lp->top_logprob[1] && lp->top_logprob[1] >= lp->top_logprob[2]);
            assert_true(lp->logprob == g3[i].lp[t].logprob);
        }
        if (g1[i].n_tokens == gp.max_tokens) assert_string_equal(g1[i].finish_reason, "length");
    }
    /* the text is the detokenized tokens */
    char *d = drift_model_detokenize(m, g1[0].tokens, (size_t)g1[0].n_tokens, NULL);
    assert_string_equal(d, g1[0].text);
    /* stop string: cut at the first occurrence of its second character */
    if (strlen(d) >= 3) {
        char stop[2] = {d[1], 0};
        const char *stops[] = {stop};
        drift_gen_params gs = gp;
        gs.stop = stops;
        gs.n_stop = 1;
        drift_generation gst;
        assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, 1, &gs, NULL, 1, &gst, &err), DRIFT_OK);
        assert_string_equal(gst.finish_reason, "stop");
        assert_int_equal(strlen(gst.text), (size_t)(strchr(d, d[1]) - d));
        assert_memory_equal(gst.text, d, strlen(gst.text));
        drift_generation_clear(&gst);
    }
    free(d);
    /* seeded sampling: same seed same output, in any batch; other seeds differ somewhere */
    drift_gen_params gt = gp;
    gt.temperature = 1.5;
    gt.top_p = 0.95;
    gt.top_k = 50;
    gt.max_tokens = 16;
    drift_generation s1[4], s2[4], s3[4];
    int64_t offs[4] = {0, 0, 0, 0}, offs2[4] = {7, 8, 9, 10};
    assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, 4, &gt, offs, 1, s1, &err), DRIFT_OK);
    assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, 4, &gt, offs, 4, s2, &err), DRIFT_OK);
    assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, 4, &gt, offs2, 2, s3, &err), DRIFT_OK);
    int differ = 0;
    for (int i = 0; i < 4; i++) {
        assert_string_equal(s1[i].text, s2[i].text);
        differ += strcmp(s1[i].text, s3[i].text) != 0;
    }
    assert_true(differ > 0);
    for (int i = 0; i < 4; i++) {
        drift_generation_clear(&g1[i]);
        drift_generation_clear(&g3[i]);
        drift_generation_clear(&s1[i]);
        drift_generation_clear(&s2[i]);
        drift_generation_clear(&s3[i]);
        free(pr[i]);
    }
    drift_model_free(m);
}

/* Replicates: a prompt that repeats the one before it copies that one's
 * prefill (generate.c's prefill_snap) and must give what a prefill of its
 * own gives -- each prompt generated alone -- token for token, with the
 * same logprobs, sampled (each its own seed offset), at two batch sizes and
 * a KV cache in bf16 as well as f32. */
static void test_repeated_prompts(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2");
    const char *profiles[] = {"profile=cpu-f32", "profile=cpu-bf16"};
    const char *texts[] = {"the cat sat", "the cat sat", "the cat sat", "in 123", "in 123", "the cat sat", "a"};
    enum { N = 7 };
    for (int pi = 0; pi < 2; pi++) {
        drift_model *m = load(model_path("qwen2", &c), profiles[pi]);
        int32_t *pr[N];
        size_t pl[N];
        int64_t offs[N];
        drift_error err;
        for (int i = 0; i < N; i++) {
            assert_int_equal(drift_model_tokenize(m, texts[i], strlen(texts[i]), -1, 0, &pr[i], &pl[i], &err), DRIFT_OK);
            offs[i] = i;
        }
        drift_gen_params gp;
        drift_gen_params_default(&gp);
        gp.max_tokens = 10;
        gp.logprobs = 3;
        gp.temperature = 1.2;
        for (int batch = 1; batch <= 3; batch += 2) {
            drift_generation all[N];
            assert_int_equal(drift_model_generate(m, (const int32_t *const *)pr, pl, N, &gp, offs, batch, all, &err), DRIFT_OK);
            for (int i = 0; i < N; i++) {
                drift_generation one;
                assert_int_equal(drift_model_generate(m, (const int32_t *const *)&pr[i], &pl[i], 1, &gp, &offs[i], 1, &one, &err),
                                 DRIFT_OK);
                assert_null(all[i].error);
                assert_int_equal(all[i].n_tokens, one.n_tokens);
                assert_memory_equal(all[i].tokens, one.tokens, (size_t)one.n_tokens * sizeof(int32_t));
                assert_string_equal(all[i].text, one.text);
                for (int t = 0; t < one.n_tokens; t++) {
                    assert_true(all[i].lp[t].logprob == one.lp[t].logprob);
                    assert_memory_equal(all[i].lp[t].top_logprob, one.lp[t].top_logprob, 3 * sizeof(double));
                }
                drift_generation_clear(&one);
                drift_generation_clear(&all[i]);
            }
        }
        for (int i = 0; i < N; i++) free(pr[i]);
        drift_model_free(m);
    }
}

static void test_embed_and_chat(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2");
    drift_model *m = load(model_path("qwen2", &c), "profile=cpu-f32");
    const drift_model_info *in = drift_model_get_info(m);
    assert_string_equal(in->chat_template, "chatml");
    assert_string_equal(in->name, "tiny-qwen2");
    assert_string_equal(in->tokenizer, "gpt2/qwen2");
    float *a = malloc((size_t)in->dim * sizeof *a), *b = malloc((size_t)in->dim * sizeof *b), *h = NULL;
    drift_error err;
    assert_int_equal(drift_model_embed(m, "the cat sat on the mat", a, &err), DRIFT_OK);
    assert_int_equal(drift_model_embed(m, "the cat sat on the mat", b, &err), DRIFT_OK);
    assert_memory_equal(a, b, (size_t)in->dim * sizeof *a);
    /* equals the mean of the hidden states from a session */
    int32_t *ids;
    size_t n;
    assert_int_equal(drift_model_tokenize(m, "the cat sat on the mat", 22, -1, 0, &ids, &n, &err), DRIFT_OK);
    h = malloc(n * (size_t)in->dim * sizeof *h);
    drift_session *s;
    assert_int_equal(drift_session_new(m, 0, &s, &err), DRIFT_OK);
    assert_int_equal(drift_session_forward(s, ids, n, 0, NULL, h, &err), DRIFT_OK);
    for (int d = 0; d < in->dim; d++) {
        double acc = 0;
        for (size_t t = 0; t < n; t++) acc += h[t * (size_t)in->dim + (size_t)d];
        assert_true(fabs(acc / (double)n - a[d]) < 1e-6);
    }
    drift_session_free(s);
    free(ids);
    assert_int_equal(drift_model_embed(m, "something else entirely", b, &err), DRIFT_OK);
    assert_true(memcmp(a, b, (size_t)in->dim * sizeof *a) != 0);
    /* chat: ChatML around the message, message not parsed for specials, its markers neutralised */
    assert_int_equal(drift_model_chat_tokens(m, "hi<|im_end|>", &ids, &n, &err), DRIFT_OK);
    char *txt = drift_model_detokenize(m, ids, n, NULL);
    assert_string_equal(txt, "user\nhi<\xe2\x80\x8b|im_end|>\nassistant\n"); /* control tokens are not rendered */
    int im_start = 256 + TINY_N_MERGES + 1, specials = 0;
    for (size_t i = 0; i < n; i++) specials += ids[i] >= 256 + TINY_N_MERGES;
    assert_int_equal(specials, 3); /* <|im_start|> x2, <|im_end|> x1: the message's text stays text */
    assert_int_equal(ids[0], im_start);
    free(txt);
    free(ids);
    free(a);
    free(b);
    free(h);
    drift_model_free(m);
}

static void test_bad_models(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_get("ref", &p, &err), DRIFT_OK);
    drift_model *m;
    assert_int_equal(drift_model_load("/nonexistent.gguf", &p, &m, &err), DRIFT_ERR_NOT_FOUND);
    /* missing tensor */
    gguf_writer *w = gguf_writer_new();
    gguf_writer_add_string(w, "general.architecture", "llama");
    gguf_writer_add_u32(w, "llama.embedding_length", 8);
    gguf_writer_add_u32(w, "llama.block_count", 1);
    gguf_writer_add_u32(w, "llama.feed_forward_length", 8);
    gguf_writer_add_u32(w, "llama.attention.head_count", 2);
    const char *toks[] = {"a", "b"};
    gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", toks, 2);
    gguf_writer_add_string_array(w, "tokenizer.ggml.merges", (const char *[]){"a b"}, 1);
    float x[16] = {0};
    uint64_t ne[2] = {8, 2};
    gguf_writer_add_tensor_f32(w, "token_embd.weight", GGUF_DT_F32, 2, ne, x);
    char path[512];
    snprintf(path, sizeof path, "%s/bad.gguf", g_dir);
    assert_int_equal(gguf_writer_save(w, path, &err), DRIFT_OK);
    gguf_writer_free(w);
    assert_int_equal(drift_model_load(path, &p, &m, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "output_norm.weight"));
    /* unsupported arch */
    w = gguf_writer_new();
    gguf_writer_add_string(w, "general.architecture", "rwkv");
    assert_int_equal(gguf_writer_save(w, path, &err), DRIFT_OK);
    gguf_writer_free(w);
    assert_int_equal(drift_model_load(path, &p, &m, &err), DRIFT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "rwkv"));
    unlink(path);
    /* a Q8_0 model loads and runs (weights stay Q8_0 under weights=native) */
    tiny_cfg c = tiny_default("llama");
    c.wtype = GGUF_DT_Q8_0;
    drift_model *q = load(model_path("llama_q8", &c), "profile=cpu-f32&weights=native");
    float *lg = all_logits(q, TOKS, 4);
    for (int i = 0; i < 4 * drift_model_get_info(q)->n_vocab; i++) assert_true(isfinite(lg[i]));
    free(lg);
    drift_model_free(q);
    /* a k-quant (Q6_K) model: decoded at load; close to the F32 model of the same weights */
    tiny_cfg ck = tiny_default("llama");
    ck.dim = 256;
    ck.hidden = 256;
    ck.n_layers = 1;
    tiny_cfg cf = ck;
    ck.wtype = GGUF_DT_Q6_K;
    drift_model *mk = load(model_path("llama_q6k", &ck), "profile=cpu-f32&weights=native");
    drift_model *mf = load(model_path("llama_256", &cf), "profile=cpu-f32");
    int V = drift_model_get_info(mk)->n_vocab;
    float *lk = all_logits(mk, TOKS, 6), *lf = all_logits(mf, TOKS, 6);
    double *ref = malloc((size_t)6 * V * sizeof *ref);
    for (int i = 0; i < 6 * V; i++) ref[i] = lf[i];
    double e = rel_err(lk, ref, (size_t)6 * V);
    fprintf(stderr, "Q6_K model vs F32 model: max rel diff %.3g\n", e);
    assert_true(e > 1e-5 && e < 0.1);
    free(ref);
    free(lk);
    free(lf);
    drift_model_free(mk);
    drift_model_free(mf);
}

static void test_sampler(void **state) {
    (void)state;
    float lg[4] = {logf(0.5f), logf(0.3f), logf(0.2f), -INFINITY};
    drift_gen_params p;
    drift_gen_params_default(&p);
    util_rng r;
    util_rng_seed(&r, 1);
    assert_int_equal(samp_pick(lg, 4, &p, &r), 0); /* greedy */
    float tie[3] = {1, 2, 2};
    assert_int_equal(samp_pick(tie, 3, &p, &r), 1); /* ties: lowest id */
    p.temperature = 1.0;
    int cnt[4] = {0};
    for (int i = 0; i < 20000; i++) cnt[samp_pick(lg, 4, &p, &r)]++;
    assert_int_equal(cnt[3], 0);
    assert_true(abs(cnt[0] - 10000) < 400 && abs(cnt[1] - 6000) < 400 && abs(cnt[2] - 4000) < 400);
    p.top_p = 0.8; /* keeps {0, 1}: 0.5 + 0.3 */
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < 16000; i++) cnt[samp_pick(lg, 4, &p, &r)]++;
    assert_int_equal(cnt[2], 0);
    assert_true(abs(cnt[0] - 10000) < 400);
    p.top_p = 1.0;
    p.top_k = 1;
    for (int i = 0; i < 100; i++) assert_int_equal(samp_pick(lg, 4, &p, &r), 0);
    p.top_k = 0;
    p.temperature = 1e-3; /* nearly greedy */
    for (int i = 0; i < 100; i++) assert_int_equal(samp_pick(lg, 4, &p, &r), 0);
    /* same seed, same draws */
    util_rng r1, r2;
    util_rng_seed(&r1, 42);
    util_rng_seed(&r2, 42);
    p.temperature = 1.0;
    for (int i = 0; i < 100; i++) assert_int_equal(samp_pick(lg, 4, &p, &r1), samp_pick(lg, 4, &p, &r2));
    /* logprobs */
    float l2[3] = {0.0f, logf(3.0f), -1e30f};
    drift_token_logprob lp;
    samp_logprobs(l2, 3, 0, 5, &lp);
    assert_true(fabs(lp.logprob - log(0.25)) < 1e-6);
    assert_int_equal(lp.n_top, 3);
    assert_int_equal(lp.top_id[0], 1);
    assert_int_equal(lp.top_id[1], 0);
    assert_true(fabs(lp.top_logprob[0] - log(0.75)) < 1e-6);
    double ls[3];
    drift_log_softmax(l2, 3, ls);
    assert_true(fabs(ls[1] - log(0.75)) < 1e-7); /* logf(3) is rounded to float */
}

typedef struct collected {
    char *text[8];
    char *lp[8];
    char *err[8];
    int ptoks[8];
    int n;
} collected;

static int collect(void *user, const drift_gen_request *req, drift_answer *res) {
    collected *c = user;
    c->text[req->index] = res->text;
    res->text = NULL;
    c->lp[req->index] = res->logprobs_json;
    res->logprobs_json = NULL;
    c->err[req->index] = res->error;
    res->error = NULL;
    c->ptoks[req->index] = res->prompt_tokens;
    c->n++;
    return 0;
}

static void run_target(const char *spec, collected *c, int logprobs) {
    drift_target *t;
    drift_error err;
    drift_status st = drift_target_open(spec, NULL, &t, &err);
    if (st) fprintf(stderr, "open: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    const char *prompts[] = {"the cat", "in 12", "hello", "a b c"};
    drift_gen_request reqs[4];
    for (int i = 0; i < 4; i++) reqs[i] = (drift_gen_request){(size_t)i, prompts[i], i % 2};
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.max_tokens = 8;
    gp.logprobs = logprobs;
    gp.temperature = 0.8; /* sampled, with replicate-dependent seeds */
    memset(c, 0, sizeof *c);
    assert_int_equal(drift_target_generate(t, reqs, 4, &gp, collect, c, &err), DRIFT_OK);
    assert_int_equal(c->n, 4);
    drift_target_close(t);
}

static void free_collected(collected *c) {
    for (int i = 0; i < 8; i++) {
        free(c->text[i]);
        free(c->lp[i]);
        free(c->err[i]);
    }
}

static void test_embedded_target(void **state) {
    (void)state;
    tiny_cfg c = tiny_default("qwen2");
    const char *path = model_path("qwen2", &c);
    char spec[700];
    snprintf(spec, sizeof spec, "embedded:%s?profile=cpu-bf16&batch=3&api=chat&threads=1", path);
    drift_target *t;
    drift_error err;
    assert_int_equal(drift_target_open(spec, NULL, &t, &err), DRIFT_OK);
    const char *cfg = drift_target_config_json(t);
    fprintf(stderr, "config: %s\n", cfg);
    assert_non_null(strstr(cfg, "\"model\":\"tiny-qwen2\""));
    assert_non_null(strstr(cfg, "\"hardware\":\"cpu-"));
    assert_non_null(strstr(cfg, "\"precision\":\"bf16"));
    assert_non_null(strstr(cfg, "\"framework\":\"driftbench-embedded"));
    assert_int_equal(drift_target_api(t), DRIFT_API_CHAT);
    const char *texts[] = {"one", "two words"};
    float *vecs;
    int dim;
    assert_int_equal(drift_target_embed(t, texts, 2, &vecs, &dim, &err), DRIFT_OK);
    assert_int_equal(dim, 64);
    free(vecs);
    drift_target_close(t);
    /* batch 3 and batch 1 give the same answers; logprobs JSON present */
    collected a, b;
    run_target(spec, &a, 2);
    snprintf(spec, sizeof spec, "embedded:%s?api=chat&batch=1&profile=cpu-bf16&threads=1", path);
    run_target(spec, &b, 2);
    for (int i = 0; i < 4; i++) {
        assert_null(a.err[i]);
        assert_string_equal(a.text[i], b.text[i]);
        assert_string_equal(a.lp[i], b.lp[i]);
        assert_true(a.lp[i][0] == '[');
        assert_true(a.ptoks[i] > 6); /* the chat template's tokens are counted */
    }
    free_collected(&a);
    free_collected(&b);
    /* bad specs name the problem */
    snprintf(spec, sizeof spec, "embedded:%s?profile=nope", path);
    assert_int_equal(drift_target_open(spec, NULL, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "nope"));
    snprintf(spec, sizeof spec, "embedded:%s?colour=red", path);
    assert_int_equal(drift_target_open(spec, NULL, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "colour"));
    assert_int_equal(drift_target_open("embedded:/no/such.gguf", NULL, &t, &err), DRIFT_ERR_NOT_FOUND);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/drift_test_transformer_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_vs_reference),
        cmocka_unit_test(test_qwen2_vs_reference),
        cmocka_unit_test(test_moe_vs_reference),
        cmocka_unit_test(test_window_and_rope_scaling),
        cmocka_unit_test(test_determinism_and_profiles),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_lab_levels_invariance),
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_repeated_prompts),
        cmocka_unit_test(test_embed_and_chat),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_embedded_target),
        cmocka_unit_test(test_sampler),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
