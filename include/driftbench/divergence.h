/* divergence.h - token-level divergence between two stacks, teacher-forced
 * ("tokdiv"): both models read the same token sequence and, at every scored
 * position, their two next-token distributions are compared over the full
 * vocabulary.
 *
 * Per position (drift_tokdiv_compare): KL(baseline || target) in nats, the
 * probability both give the forced token (the token that actually follows),
 * and both top-1 tokens. Over many positions (drift_tokdiv_acc): mean KL with
 * its standard error, KL percentiles, the share of positions whose top-1
 * tokens agree, and percentiles of delta-p = p_target(token) - p_base(token).
 * The figures are those llama.cpp's `llama-perplexity --kl-divergence`
 * prints, with the same percentile rule (linear between order statistics at
 * fraction * (n - 1)) and the same "±" (sqrt(variance / (n - 1))).
 *
 * Two sources of sequences (src/pipeline/teacher_forced.c, declared in
 * teacher_forced.h: the steps that run models):
 *   runs  two stored runs: the prompt as the baseline run rendered and
 *         tokenized it (its api and templates), followed by the baseline's
 *         answer tokens (the stored token ids when the run kept logprobs,
 *         else the answer text tokenized without BOS); scored at every
 *         answer position; figures per prompt, per workload, overall. An
 *         HTTP stack (api=completions) gives its server's top-K prompt
 *         logprobs of prompt + answer text instead of logits (vLLM's
 *         prompt_logprobs or OpenAI's echo, prompt_logprobs.h): a pair with
 *         an HTTP side is compared by drift_tokdiv_compare_top, a lower
 *         bound of the full KL, and the report says so (method, top_k);
 *         docs/divergence-http.md.
 *   text  a raw text split as llama-perplexity splits it: tokenized with the
 *         model's BOS, cut into floor(n / ctx) chunks of ctx tokens (at least
 *         2 * ctx tokens needed), each chunk's first token replaced by BOS
 *         when the model adds one, and only the second half scored: the
 *         logits at chunk positions ctx/2 .. ctx-2, each against the next
 *         token (ctx - 1 - ctx/2 positions per chunk).
 * This header holds the data and the math (src/analysis/token_kl.c) and
 * the renderer (src/report/divergence_render.c); teacher_forced.h the
 * pipeline's steps that fill the data. Nothing here prints. */
#ifndef DRIFTBENCH_DIVERGENCE_H
#define DRIFTBENCH_DIVERGENCE_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one position ---- */
typedef struct drift_tokdiv_pos {
    double kl;          /* KL(base || target), nats, over the full vocabulary; NaN when a logit is NaN or +inf */
    double p_base;      /* probability of the forced token under the baseline */
    double p_target;    /* ... and under the target */
    int32_t top_base;   /* argmax of the baseline's logits (the first on ties) */
    int32_t top_target;
    double lp_base;     /* log p_base(token), log p_target(token): the perplexities' terms */
    double lp_target;
} drift_tokdiv_pos;

/* Compares two next-token distributions given as logits (n_vocab floats
 * each; softmax at temperature 1, computed in double) at a position whose
 * actual next token is `token` (0 <= token < n_vocab, else p_* and lp_*
 * are NaN).
 * KL = sum_i p_b(i) (log p_b(i) - log p_t(i)); terms with p_b(i) = 0 count
 * 0; a value rounded below 0 is returned as 0, so identical logits give
 * exactly 0. */
DRIFT_API drift_tokdiv_pos drift_tokdiv_compare(const float *base_logits, const float *target_logits, int n_vocab,
                                                int32_t token);

/* One next-token distribution known only by its top alternatives (an HTTP
 * server's prompt logprobs, prompt_logprobs.h): n log-probabilities,
 * highest first, keyed by token id (ids) or, when the server gives no ids,
 * by token text (texts), and the forced token's own log-probability. */
typedef struct drift_tokdiv_top {
    size_t n;
    const int32_t *ids;         /* (n), or NULL */
    const char *const *texts;   /* (n), or NULL */
    const double *lp;           /* (n) */
    double lp_token;            /* log p(forced token); NaN when unknown */
} drift_tokdiv_top;

/* drift_tokdiv_compare for two top-K lists: the KL of the two
 * distributions coarse-grained onto the tokens both lists give (matched by
 * id when by_id, else by text) plus one "rest" bucket holding the rest of
 * each side's mass (1 - what it gives those tokens, floored at 0; the
 * target's floored at 1e-12 where the baseline's is not 0):
 *     KL_K = sum_{i in both} p_b(i) log(p_b(i) / p_t(i)) + r_b log(r_b / r_t).
 * By the data-processing inequality KL_K <= the full-vocabulary KL, with
 * equality when the lists hold all the mass both sides put anywhere but
 * the rest in the same proportions: a lower bound, exact for identical
 * lists (0). p_* and lp_* are the forced token's; top_base / top_target are
 * each list's first id when by_id; by text they are 0 and 0 when the two
 * first texts are equal, else 0 and 1 (only their equality means
 * anything). */
DRIFT_API drift_tokdiv_pos drift_tokdiv_compare_top(const drift_tokdiv_top *base, const drift_tokdiv_top *target,
                                                    int by_id);

/* ---- many positions ---- */
typedef struct drift_tokdiv_acc {
    double *kl;          /* (n) per-position KL */
    double *dp;          /* (n) per-position p_target - p_base */
    size_t n, cap;
    double sum_nll_base, sum_nll_target; /* sums of -log p(token) over the n positions */
    size_t n_same_top;   /* positions whose two top-1 tokens agree */
    size_t n_nonfinite;  /* positions left out: KL or a probability not finite */
} drift_tokdiv_acc;

/* Adds one position (a non-finite one only counts in n_nonfinite).
 * DRIFT_ERR_NOMEM. Zero-initialise the accumulator first. */
DRIFT_API drift_status drift_tokdiv_acc_add(drift_tokdiv_acc *a, const drift_tokdiv_pos *p, drift_error *err);
/* Appends every position of src to dst. DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_tokdiv_acc_merge(drift_tokdiv_acc *dst, const drift_tokdiv_acc *src, drift_error *err);
/* Frees what a holds and empties it. */
DRIFT_API void drift_tokdiv_acc_clear(drift_tokdiv_acc *a);

typedef struct drift_tokdiv_summary {
    size_t n;                       /* positions with finite figures */
    size_t n_nonfinite;
    double kl_mean, kl_se;          /* se = sqrt(var / (n - 1)); NaN when n < 2 */
    double kl_p50, kl_p90, kl_p99, kl_max;
    double same_top, same_top_se;   /* share in [0,1]; se = sqrt(p (1 - p) / (n - 1)) */
    double dp_mean, dp_se, dp_rms;
    double dp_min, dp_p01, dp_p05, dp_p10, dp_p25, dp_p50, dp_p75, dp_p90, dp_p95, dp_p99, dp_max;
    double ppl_base, ppl_target;    /* exp(mean -log p(token)) of each stack over the positions */
} drift_tokdiv_summary;

/* Summarises a (a is left as it was). With n = 0 every figure is NaN. */
DRIFT_API drift_status drift_tokdiv_acc_summary(const drift_tokdiv_acc *a, drift_tokdiv_summary *out,
                                               drift_error *err);

/* The fraction-quantile of sorted[0..n) (ascending): linear between the
 * order statistics around fraction * (n - 1), as llama-perplexity; fraction
 * <= 0 gives the minimum, >= 1 the maximum; NaN when n = 0. */
DRIFT_API double drift_tokdiv_percentile(const double *sorted, size_t n, double fraction);

/* Pearson and Spearman (average ranks for ties) correlation of x and y over
 * n pairs, and percentile-bootstrap 95% intervals over the pairs (n_boot
 * resamples from seed; a resample with no variance in x or y is drawn
 * again, up to n_boot more times). NaN when n < 3 or a side has no variance.
 * For bench/kl_flip_bench.c: mean KL per configuration against flip rate. */
typedef struct drift_tokdiv_corr {
    size_t n;
    double pearson, pearson_ci[2];
    double spearman, spearman_ci[2];
    int n_boot;
} drift_tokdiv_corr;
DRIFT_API drift_status drift_tokdiv_correlate(const double *x, const double *y, size_t n, int n_boot, uint64_t seed,
                                             drift_tokdiv_corr *out, drift_error *err);

/* ---- a whole comparison ---- */
typedef struct drift_tokdiv_prompt {
    char *prompt_id;
    drift_workload workload;
    int n_prompt_tokens;        /* -1 for a pair with an HTTP side (the server tokenizes the prompt) */
    int n_answer_tokens;        /* positions scored */
    int tokens_from_logprobs;   /* 1: the answer's stored token ids; 0: its text re-tokenized */
    int n_unaligned;            /* HTTP: answer tokens of one side with no token at the same place on the other */
    drift_tokdiv_summary s;
    int first_diff;             /* answer index of the first top-1 disagreement, -1 when none */
    int32_t first_base_id, first_target_id;
    char *first_base_text;      /* those two tokens' text (valid UTF-8), NULL when first_diff < 0 */
    char *first_target_text;
    char *error;                /* NULL, or why this prompt has no figures (too long, empty answer, ...) */
} drift_tokdiv_prompt;

typedef struct drift_tokdiv_report {
    int text_mode;              /* 0: two runs; 1: a raw text (llama-perplexity's chunks) */
    char *baseline, *target;    /* run labels (runs) or the specs (text) */
    char *baseline_spec, *target_spec; /* the stacks as opened (a remapped model path shows here) */
    char *api;                  /* "completions" or "chat" (runs) */
    char *method;               /* how the figures were made: "logits" (both stacks embedded: the full
                                 * vocabulary), or "top-K" with the server's way ("prompt_logprobs",
                                 * "echo"): drift_tokdiv_compare_top's bound; NULL in text mode */
    int top_k;                  /* the K of a top-K method, else 0 */
    size_t limit;               /* per workload; 0 = all (runs) */
    uint64_t seed;              /* the sample's seed (runs, limit > 0) */
    drift_tokdiv_prompt *prompts; /* (n_prompts) runs: in prompt order */
    size_t n_prompts;
    size_t n_skipped;           /* prompts with an error */
    int present[DRIFT_WL_COUNT];
    drift_tokdiv_summary wl[DRIFT_WL_COUNT]; /* positions of all prompts of a workload pooled */
    drift_tokdiv_summary overall;            /* every position pooled */
    int ctx;                    /* text: chunk length */
    size_t n_text_tokens;       /* text: tokens of the file (BOS included) */
    int n_chunks;               /* text */
    double elapsed_ms;
} drift_tokdiv_report;

/* Frees what r holds and empties it. */
DRIFT_API void drift_tokdiv_report_clear(drift_tokdiv_report *r);

/* Clears r[0..n) and frees the array. NULL is fine. */
DRIFT_API void drift_tokdiv_reports_free(drift_tokdiv_report *r, size_t n);

/* Token KL per configuration, for the HTML report's "token KL against flip
 * rate" section (report --kl N). */
typedef struct drift_tokdiv_config_kl {
    char *label;                /* the configuration's run label */
    double kl_mean;             /* mean KL(baseline || configuration), nats, over every sampled position */
    double same_top;            /* share of those positions whose top-1 tokens agree */
    size_t positions;           /* positions scored */
} drift_tokdiv_config_kl;

typedef struct drift_tokdiv_configs {
    size_t limit;               /* prompts per workload sampled */
    uint64_t seed;              /* the sample's seed */
    drift_tokdiv_config_kl *points; /* (n) one per configuration forced against its baseline */
    size_t n;
    char **not_embedded;        /* (n_not_embedded) configurations left out, "label (why)": their stack or
                                 * their baseline's cannot be forced (an HTTP server without prompt
                                 * logprobs or down now, an import) */
    size_t n_not_embedded;
    double elapsed_ms;
} drift_tokdiv_configs;

/* Frees what k holds and empties it. */
DRIFT_API void drift_tokdiv_configs_clear(drift_tokdiv_configs *k);


/* Renders r: fmt 0 text, 1 JSON, 2 markdown (drift_format's values;
 * src/report/divergence_render.c). max_prompts: per-prompt rows shown in
 * text and markdown (the highest mean KL first; 0 = none); JSON has all. */
DRIFT_API drift_status drift_tokdiv_render(const drift_tokdiv_report *r, int fmt, size_t max_prompts, char **out,
                                          drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
