/* test_token_kl.c - teacher-forced token divergence (divergence.h).
 *
 * The math against hand-computed values: p = (1/2, 1/4, 1/4) and
 * q = (1/4, 1/2, 1/4) give KL(p||q) = ln(2)/4, top-1 tokens 0 and 1, and the
 * forced token's probabilities; a logit shift changes nothing; a NaN logit
 * is left out, not averaged; percentiles, the standard error and the
 * correlations on small known sets. Then the engine: the same stack twice
 * gives exactly 0 KL and 100% same top-1 on a text (llama-perplexity's
 * chunks: the positions counted as it counts them) and on two stored runs;
 * ref against cpu-f32 is small but not 0; an HTTP run whose server is
 * gone, one with api=chat (its prompts are not a completions baseline's; its
 * server gone; echo asked of it), an unknown label and a text too short are errors
 * that say so. Top-K lists (an HTTP server's prompt logprobs): identical
 * lists give 0; with every token listed the bound is the full KL; with the
 * top K of random rows it never passes the full KL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/model.h"
#include "driftbench/teacher_forced.h"
#include "driftbench/pipeline.h"
#include "driftbench/prompt_logprobs.h"
#include "driftbench/store.h"

#define LN2 0.69314718055994530942

static void test_two_distributions(void **state) {
    (void)state;
    /* softmax(ln2, 0, 0) = (1/2, 1/4, 1/4); softmax(0, ln2, 0) = (1/4, 1/2, 1/4) */
    float b[3] = {(float)LN2, 0, 0}, t[3] = {0, (float)LN2, 0};
    drift_tokdiv_pos p = drift_tokdiv_compare(b, t, 3, 2);
    /* 1/2 ln(2) + 1/4 ln(1/2) + 1/4 ln(1) = ln(2)/4, up to the float rounding of ln 2 */
    assert_true(fabs(p.kl - LN2 / 4) < 1e-7);
    assert_int_equal(p.top_base, 0);
    assert_int_equal(p.top_target, 1);
    assert_true(fabs(p.p_base - 0.25) < 1e-7 && fabs(p.p_target - 0.25) < 1e-7);
    p = drift_tokdiv_compare(b, t, 3, 0);
    assert_true(fabs(p.p_base - 0.5) < 1e-7 && fabs(p.p_target - 0.25) < 1e-7);
    /* the other direction: 1/4 ln(1/2) + 1/2 ln 2 = ln(2)/4 too (symmetric pair) */
    drift_tokdiv_pos r = drift_tokdiv_compare(t, b, 3, 0);
    assert_true(fabs(r.kl - LN2 / 4) < 1e-7);
    /* a shift of every logit is the same distribution */
    float b2[3] = {(float)LN2 + 7, 7, 7};
    p = drift_tokdiv_compare(b, b2, 3, 1);
    assert_true(p.kl < 1e-12);
    /* identical rows: exactly 0, not a rounding residue */
    p = drift_tokdiv_compare(b, b, 3, 1);
    assert_true(p.kl == 0.0);
    assert_int_equal(p.top_base, p.top_target);
    /* a target that gives a baseline token probability 0: infinite KL */
    float t3[3] = {0, 0, -INFINITY};
    p = drift_tokdiv_compare(b, t3, 3, 0);
    assert_true(isinf(p.kl));
    /* -inf in the baseline is a token of probability 0: its term counts 0 */
    float b4[3] = {0, 0, -INFINITY}, t4[3] = {0, 0, 5};
    p = drift_tokdiv_compare(b4, t4, 3, 0);
    assert_true(isfinite(p.kl) && p.kl > 0);
    /* NaN: no figures; an out-of-range token: no probabilities */
    float bn[3] = {0, NAN, 0};
    p = drift_tokdiv_compare(bn, t, 3, 0);
    assert_true(isnan(p.kl));
    p = drift_tokdiv_compare(b, t, 3, 3);
    assert_true(isfinite(p.kl) && isnan(p.p_base));
}

/* The top k of row x (n logits) as a drift_tokdiv_top over ids/lp (k). */
static drift_tokdiv_top top_of(const float *x, int n, int k, int32_t token, int32_t *ids, double *lp) {
    double *ls = malloc((size_t)n * sizeof *ls);
    drift_log_softmax(x, n, ls);
    int m = 0;
    for (int v = 0; v < n; v++) {
        if (m == k && !(ls[v] > lp[k - 1])) continue;
        int i = m < k ? m++ : k - 1;
        while (i > 0 && ls[v] > lp[i - 1]) {
            ids[i] = ids[i - 1];
            lp[i] = lp[i - 1];
            i--;
        }
        ids[i] = v;
        lp[i] = ls[v];
    }
    drift_tokdiv_top t = {(size_t)m, ids, NULL, lp, ls[token]};
    free(ls);
    return t;
}

static void test_top_lists(void **state) {
    (void)state;
    enum { V = 64 };
    float b[V], t[V];
    int32_t ib[V], it[V];
    double lb[V], lt[V];
    unsigned x = 12345;
    int below = 0;
    for (int round = 0; round < 50; round++) {
        for (int v = 0; v < V; v++) {
            x = x * 1103515245u + 12345u;
            b[v] = (float)((x >> 8) % 1000) / 200.0f;
            x = x * 1103515245u + 12345u;
            t[v] = b[v] + (float)((int)((x >> 8) % 1000) - 500) / 1000.0f;
        }
        drift_tokdiv_pos full = drift_tokdiv_compare(b, t, V, 3);
        /* every token listed: the full KL (to rounding) */
        drift_tokdiv_top tb = top_of(b, V, V, 3, ib, lb), tt = top_of(t, V, V, 3, it, lt);
        drift_tokdiv_pos all = drift_tokdiv_compare_top(&tb, &tt, 1);
        assert_true(fabs(all.kl - full.kl) < 1e-9 * (1 + full.kl));
        assert_int_equal(all.top_base, full.top_base);
        assert_int_equal(all.top_target, full.top_target);
        assert_true(fabs(all.p_base - full.p_base) < 1e-12 && fabs(all.p_target - full.p_target) < 1e-12);
        /* the top 8: a lower bound */
        tb = top_of(b, V, 8, 3, ib, lb);
        tt = top_of(t, V, 8, 3, it, lt);
        drift_tokdiv_pos k8 = drift_tokdiv_compare_top(&tb, &tt, 1);
        assert_true(k8.kl <= full.kl + 1e-12);
        below += k8.kl < full.kl;
        /* identical lists: exactly 0 */
        drift_tokdiv_pos same = drift_tokdiv_compare_top(&tb, &tb, 1);
        assert_true(same.kl == 0.0);
    }
    assert_true(below > 0);
    /* by text: p = (1/2, 1/4, rest 1/4) vs q = (1/4, 1/2, rest 1/4) over "a", "b" */
    const char *ta[2] = {"a", "b"}, *tb2[2] = {"b", "a"};
    double pa[2] = {log(0.5), log(0.25)}, qa[2] = {log(0.5), log(0.25)};
    drift_tokdiv_top p = {2, NULL, ta, pa, log(0.5)}, q = {2, NULL, tb2, qa, log(0.25)};
    drift_tokdiv_pos r = drift_tokdiv_compare_top(&p, &q, 0);
    assert_true(fabs(r.kl - LN2 / 4) < 1e-12); /* 1/2 ln 2 + 1/4 ln(1/2) + 1/4 ln 1 */
    assert_true(r.top_base != r.top_target);
    assert_true(fabs(r.p_base - 0.5) < 1e-12 && fabs(r.p_target - 0.25) < 1e-12);
    /* no list: NaN */
    drift_tokdiv_top none = {0, NULL, ta, pa, 0};
    assert_true(isnan(drift_tokdiv_compare_top(&none, &q, 0).kl));
}

static void test_accumulator(void **state) {
    (void)state;
    drift_tokdiv_acc a = {0};
    drift_error err = {0};
    for (int i = 0; i < 4; i++) {
        drift_tokdiv_pos p = {(double)i, 0.5, 0.5 + 0.1 * i, 3, i < 3 ? 3 : 4, log(0.5), log(0.5 + 0.1 * i)};
        assert_int_equal(drift_tokdiv_acc_add(&a, &p, &err), DRIFT_OK);
    }
    drift_tokdiv_pos bad = {NAN, 0.5, 0.5, 1, 1, log(0.5), log(0.5)};
    assert_int_equal(drift_tokdiv_acc_add(&a, &bad, &err), DRIFT_OK);
    drift_tokdiv_summary s;
    assert_int_equal(drift_tokdiv_acc_summary(&a, &s, &err), DRIFT_OK);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.n_nonfinite, 1);
    assert_true(fabs(s.kl_mean - 1.5) < 1e-12);
    /* population variance 1.25, / (n - 1): llama-perplexity's "±" */
    assert_true(fabs(s.kl_se - sqrt(1.25 / 3)) < 1e-12);
    assert_true(fabs(s.kl_p50 - 1.5) < 1e-12);
    assert_true(fabs(s.kl_p90 - 2.7) < 1e-12);
    assert_true(fabs(s.kl_max - 3) < 1e-12);
    assert_true(fabs(s.same_top - 0.75) < 1e-12);
    assert_true(fabs(s.dp_mean - 0.15) < 1e-12);
    assert_true(fabs(s.dp_max - 0.3) < 1e-12 && fabs(s.dp_min) < 1e-12);
    assert_true(fabs(s.dp_rms - sqrt((0.01 + 0.04 + 0.09) / 4)) < 1e-12);
    /* perplexities: exp of the mean -log p of the forced token */
    assert_true(fabs(s.ppl_base - 2.0) < 1e-12);
    assert_true(fabs(s.ppl_target - exp(-(log(0.5) + log(0.6) + log(0.7) + log(0.8)) / 4)) < 1e-12);
    /* merge doubles the positions, same shares */
    drift_tokdiv_acc m = {0};
    assert_int_equal(drift_tokdiv_acc_merge(&m, &a, &err), DRIFT_OK);
    assert_int_equal(drift_tokdiv_acc_merge(&m, &a, &err), DRIFT_OK);
    assert_int_equal(drift_tokdiv_acc_summary(&m, &s, &err), DRIFT_OK);
    assert_int_equal(s.n, 8);
    assert_int_equal(s.n_nonfinite, 2);
    assert_true(fabs(s.same_top - 0.75) < 1e-12);
    drift_tokdiv_acc_clear(&m);
    drift_tokdiv_acc_clear(&a);
    /* empty: NaN, not 0 */
    assert_int_equal(drift_tokdiv_acc_summary(&a, &s, &err), DRIFT_OK);
    assert_true(s.n == 0 && isnan(s.kl_mean) && isnan(s.same_top));
    double v[4] = {1, 2, 3, 4};
    assert_true(fabs(drift_tokdiv_percentile(v, 4, 0.5) - 2.5) < 1e-12);
    assert_true(drift_tokdiv_percentile(v, 4, 0) == 1 && drift_tokdiv_percentile(v, 4, 1) == 4);
    assert_true(isnan(drift_tokdiv_percentile(v, 0, 0.5)));
}

static void test_correlation(void **state) {
    (void)state;
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {1, 4, 9, 16, 25}, z[5] = {5, 4, 3, 2, 2};
    drift_tokdiv_corr c;
    drift_error err = {0};
    assert_int_equal(drift_tokdiv_correlate(x, y, 5, 500, 7, &c, &err), DRIFT_OK);
    assert_true(fabs(c.pearson - 0.9811049102515929) < 1e-12);
    assert_true(fabs(c.spearman - 1.0) < 1e-12);
    assert_true(c.n_boot > 0 && c.pearson_ci[0] <= c.pearson && c.pearson <= c.pearson_ci[1] + 1e-12);
    /* ties get average ranks: ranks of z are 5, 4, 3, 1.5, 1.5 */
    assert_int_equal(drift_tokdiv_correlate(x, z, 5, 0, 7, &c, &err), DRIFT_OK);
    double rx[5] = {1, 2, 3, 4, 5}, rz[5] = {5, 4, 3, 1.5, 1.5}, mx = 3, mz = 3, sxy = 0, sxx = 0, szz = 0;
    for (int i = 0; i < 5; i++) {
        sxy += (rx[i] - mx) * (rz[i] - mz);
        sxx += (rx[i] - mx) * (rx[i] - mx);
        szz += (rz[i] - mz) * (rz[i] - mz);
    }
    assert_true(fabs(c.spearman - sxy / sqrt(sxx * szz)) < 1e-12);
    assert_true(c.spearman < -0.9);
    /* no variance: undefined */
    double k[5] = {2, 2, 2, 2, 2};
    assert_int_equal(drift_tokdiv_correlate(x, k, 5, 100, 7, &c, &err), DRIFT_OK);
    assert_true(isnan(c.pearson) && isnan(c.spearman));
}

static char *model_spec(const char *model, const char *profile) {
    static char buf[4][1024];
    static int k;
    const char *src = getenv("DRIFT_SOURCE");
    char *b = buf[k++ % 4];
    snprintf(b, 1024, "embedded:%s/models/%s.gguf?profile=%s", src ? src : "..", model, profile);
    return b;
}

static char *read_readme(size_t *len) {
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/README.md", src ? src : "..");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    /* its first 8 KB: some 2,000 tokens, 30-odd chunks of 64 */
    char *t = malloc(8192);
    *len = fread(t, 1, 8191, f);
    t[*len] = 0;
    fclose(f);
    return t;
}

static void test_text_mode(void **state) {
    (void)state;
    size_t len;
    char *text = read_readme(&len);
    drift_tokdiv_report r;
    drift_error err = {0};
    /* the same stack twice: exactly 0 */
    assert_int_equal(drift_tokdiv_text(model_spec("qwen2-7m", "cpu-f32"), model_spec("qwen2-7m", "cpu-f32"), text, len,
                                       64, NULL, &r, &err),
                     DRIFT_OK);
    assert_true(r.n_chunks >= 2);
    assert_int_equal(r.n_chunks, (int)(r.n_text_tokens / 64));
    assert_int_equal(r.overall.n, (size_t)r.n_chunks * (64 - 1 - 32));
    assert_true(r.overall.kl_mean == 0.0 && r.overall.kl_max == 0.0);
    assert_true(r.overall.same_top == 1.0);
    assert_true(r.overall.dp_max == 0.0 && r.overall.dp_min == 0.0);
    for (size_t i = 0; i < r.n_prompts; i++) assert_int_equal(r.prompts[i].first_diff, -1);
    char *out = NULL;
    assert_int_equal(drift_tokdiv_render(&r, 0, 5, &out, &err), DRIFT_OK);
    assert_non_null(strstr(out, "Mean    KLD:   0.000000"));
    assert_non_null(strstr(out, "Same top p: 100.000"));
    free(out);
    drift_tokdiv_report_clear(&r);
    /* ref (f64 accumulation) against cpu-f32: small, not 0 */
    assert_int_equal(drift_tokdiv_text(model_spec("qwen2-7m", "ref"), model_spec("qwen2-7m", "cpu-f32"), text, len, 64,
                                       NULL, &r, &err),
                     DRIFT_OK);
    assert_true(r.overall.kl_mean > 0 && r.overall.kl_mean < 1e-4);
    assert_true(r.overall.same_top > 0.99);
    drift_tokdiv_report_clear(&r);
    /* int4 weights: clearly larger */
    assert_int_equal(drift_tokdiv_text(model_spec("qwen2-7m", "ref"), model_spec("qwen2-7m", "cpu-int4"), text, len,
                                       64, NULL, &r, &err),
                     DRIFT_OK);
    assert_true(r.overall.kl_mean > 1e-3);
    assert_true(r.overall.same_top < 1.0);
    assert_int_equal(drift_tokdiv_render(&r, 1, 0, &out, &err), DRIFT_OK);
    assert_non_null(strstr(out, "\"kl_mean\""));
    free(out);
    drift_tokdiv_report_clear(&r);
    /* too short for the context */
    assert_int_equal(drift_tokdiv_text(model_spec("qwen2-7m", "ref"), model_spec("qwen2-7m", "ref"), "hello world", 11,
                                       64, NULL, &r, &err),
                     DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "needs at least 128"));
    /* an HTTP stack */
    assert_int_equal(drift_tokdiv_text("http://127.0.0.1:9/v1?model=x", model_spec("qwen2-7m", "ref"), text, len, 64,
                                       NULL, &r, &err),
                     DRIFT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "the raw-text form needs embedded stacks"));
    /* a missing model file */
    assert_int_equal(drift_tokdiv_text("embedded:/nonexistent/m.gguf?profile=ref", model_spec("qwen2-7m", "ref"), text,
                                       len, 64, NULL, &r, &err),
                     DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "/nonexistent/m.gguf"));
    free(text);
}

static void make_run(drift_store *st, const char *label, const char *target, int logprobs) {
    drift_run_opts o;
    drift_run_opts_default(&o);
    const char *suites[] = {"builtin:math", "builtin:chat"};
    o.label = label;
    o.target = target;
    o.suites = suites;
    o.n_suites = 2;
    o.limit = 3;
    o.params.max_tokens = 24;
    o.params.logprobs = logprobs;
    drift_run_summary sum;
    drift_error err = {0};
    drift_status rc = drift_run_execute(st, &o, &sum, &err);
    if (rc) fprintf(stderr, "run %s: %s\n", label, err.msg);
    assert_int_equal(rc, DRIFT_OK);
}

static void test_runs_mode(void **state) {
    (void)state;
    char path[] = "/tmp/test_token_kl_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(path, &st, &err), DRIFT_OK);
    make_run(st, "base", model_spec("qwen2-7m", "ref"), 0);
    make_run(st, "same", model_spec("qwen2-7m", "ref"), 0);
    make_run(st, "f32", model_spec("qwen2-7m", "cpu-f32"), 0);
    make_run(st, "base-lp", model_spec("qwen2-7m", "ref"), 3);
    drift_tokdiv_report r;
    assert_int_equal(drift_tokdiv_runs(st, "base", "same", NULL, &r, &err), DRIFT_OK);
    assert_int_equal(r.n_prompts, 6);
    assert_int_equal(r.n_skipped, 0);
    assert_true(r.present[DRIFT_WL_MATH] && r.present[DRIFT_WL_CHAT] && !r.present[DRIFT_WL_CODE]);
    assert_true(r.overall.n > 0 && r.overall.kl_mean == 0.0 && r.overall.same_top == 1.0);
    size_t sum_pos = 0;
    for (size_t i = 0; i < r.n_prompts; i++) {
        assert_null(r.prompts[i].error);
        assert_int_equal(r.prompts[i].tokens_from_logprobs, 0);
        assert_true(r.prompts[i].n_prompt_tokens > 0);
        sum_pos += (size_t)r.prompts[i].n_answer_tokens;
    }
    assert_int_equal(sum_pos, r.overall.n);
    assert_int_equal(r.wl[DRIFT_WL_MATH].n + r.wl[DRIFT_WL_CHAT].n, r.overall.n);
    drift_tokdiv_report_clear(&r);
    /* several targets at once: the same figures as one at a time */
    drift_tokdiv_report one;
    assert_int_equal(drift_tokdiv_runs(st, "base", "f32", NULL, &one, &err), DRIFT_OK);
    assert_true(one.overall.kl_mean > 0);
    const char *many_labels[] = {"same", "f32"};
    drift_tokdiv_report *many = NULL;
    assert_int_equal(drift_tokdiv_runs_many(st, "base", many_labels, 2, NULL, &many, &err), DRIFT_OK);
    assert_true(many[0].overall.kl_mean == 0.0 && many[0].overall.n == one.overall.n);
    assert_true(many[1].overall.kl_mean == one.overall.kl_mean && many[1].overall.same_top == one.overall.same_top);
    assert_string_equal(many[1].target, "f32");
    drift_tokdiv_reports_free(many, 2);
    drift_tokdiv_report_clear(&one);
    /* stored token ids: used, and at ref against ref the greedy answer is each position's top-1 */
    drift_tokdiv_opts o;
    drift_tokdiv_opts_default(&o);
    o.workloads = 1u << DRIFT_WL_MATH;
    o.limit = 2;
    assert_int_equal(drift_tokdiv_runs(st, "base-lp", "f32", &o, &r, &err), DRIFT_OK);
    assert_int_equal(r.n_prompts, 2);
    assert_true(r.prompts[0].tokens_from_logprobs == 1 && r.prompts[0].workload == DRIFT_WL_MATH);
    assert_true(r.overall.kl_mean > 0 && r.overall.kl_mean < 1e-3);
    char *out = NULL;
    assert_int_equal(drift_tokdiv_render(&r, 0, 5, &out, &err), DRIFT_OK);
    assert_non_null(strstr(out, "overall"));
    free(out);
    assert_int_equal(drift_tokdiv_render(&r, 2, 5, &out, &err), DRIFT_OK);
    assert_non_null(strstr(out, "| math |"));
    free(out);
    drift_tokdiv_report_clear(&r);
    /* an unknown label */
    assert_int_equal(drift_tokdiv_runs(st, "base", "nope", NULL, &r, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "nope"));
    /* an HTTP run */
    drift_run_info info = {0};
    info.label = "http";
    info.target = "http://127.0.0.1:9/v1?model=x&api=completions";
    info.config_json = "{}";
    info.decoding_json = "{}";
    int64_t id;
    int resumed;
    assert_int_equal(drift_store_run_begin(st, &info, &id, &resumed, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_finish(st, id, &err), DRIFT_OK);
    /* an HTTP run whose server is gone: an error naming it; compare --kl's
     * step makes it its note */
    assert_int_equal(drift_tokdiv_runs(st, "base", "http", NULL, &r, &err), DRIFT_ERR_HTTP);
    assert_non_null(strstr(err.msg, "cannot be reached"));
    drift_tokdiv_step ks;
    assert_int_equal(drift_tokdiv_step_run(st, "base", "http", NULL, &ks, &err), DRIFT_OK);
    assert_int_equal(ks.unsupported, 1);
    assert_non_null(strstr(ks.note, "not computed: "));
    /* an HTTP run with api=chat: forced through the chat endpoint, so
     * against a completions baseline the prompts differ (said why); its
     * server gone is the same error as above; echo is a completions field */
    info.label = "httpchat";
    info.target = "http://127.0.0.1:9/v1?model=x&api=chat";
    assert_int_equal(drift_store_run_begin(st, &info, &id, &resumed, &err), DRIFT_OK);
    assert_int_equal(drift_store_run_finish(st, id, &err), DRIFT_OK);
    assert_int_equal(drift_tokdiv_runs(st, "base", "httpchat", NULL, &r, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "api=chat"));
    char chat_spec[1100];
    snprintf(chat_spec, sizeof chat_spec, "%s&api=chat", model_spec("qwen2-7m", "ref"));
    make_run(st, "basechat", chat_spec, 0);
    assert_int_equal(drift_tokdiv_runs(st, "basechat", "httpchat", NULL, &r, &err), DRIFT_ERR_HTTP);
    assert_non_null(strstr(err.msg, "chat/completions"));
    assert_non_null(strstr(err.msg, "cannot be reached"));
    drift_tokdiv_opts eo;
    drift_tokdiv_opts_default(&eo);
    eo.http_method = DRIFT_PLP_ECHO;
    assert_int_equal(drift_tokdiv_runs(st, "basechat", "httpchat", &eo, &r, &err), DRIFT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "echo+logprobs is a completions field"));
    drift_store_close(st);
    unlink(path);
    char side[1100];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_distributions), cmocka_unit_test(test_top_lists), cmocka_unit_test(test_accumulator),
        cmocka_unit_test(test_correlation),       cmocka_unit_test(test_text_mode),
        cmocka_unit_test(test_runs_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
