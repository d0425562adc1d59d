/* eval.h - evaluators: one per workload, each turning (answer, reference)
 * into a label with the evidence kept in detail_json, so a user can see why
 * an answer was judged as it was. An evaluator that cannot judge returns
 * DRIFT_LABEL_ERROR (never a fail, never a flip). Scoring a stored run with
 * them (drift_score_run, its options, summary and verdict cache) is the
 * pipeline's (pipeline.h): this header knows no store. */
#ifndef DRIFTBENCH_EVAL_H
#define DRIFTBENCH_EVAL_H

#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_eval_result {
    int label;          /* drift_label */
    double value;       /* math: 1/0; long: F1; code: 1/0; chat: NAN */
    char *detail_json;  /* malloc'd JSON object, e.g. {"extracted":"540","rule":"strict","expected":"540"} */
} drift_eval_result;

DRIFT_API void drift_eval_result_clear(drift_eval_result *r);

/* ---- math ---- */
/* Extracts the final number from an answer: lm-eval strict "#### N", then
 * \boxed{N}, then "the answer is N", then flexible (last number). Normalizes
 * commas, "$", trailing "." and ".0". Writes the normalized number to out and
 * returns the rule name ("strict", "boxed", "answer-is", "flexible"), or
 * NULL when nothing is found ("[invalid]"). */
DRIFT_API const char *drift_math_extract(const char *answer, char *out, size_t cap);
/* Compares an extraction with the reference numerically. */
DRIFT_API drift_status drift_eval_math(const char *answer, const char *reference_json, drift_eval_result *out,
                                       drift_error *err);
/* drift_math_extract that also copies the matched text, before
 * normalisation, into raw (e.g. "$1,200.50" for "1200.5"). */
DRIFT_API const char *drift_math_extract_ex(const char *answer, char *out, size_t cap, char *raw, size_t rawcap);
/* 1 when two normalised numbers are equal: integers exactly (any length),
 * decimals and fractions "a/b" within a 1e-9 relative tolerance. */
DRIFT_API int drift_math_equal(const char *a, const char *b);

/* ---- long-context QA ---- */
/* SQuAD-style token F1: lower-case, strip punctuation and articles (a, an,
 * the), split on whitespace. */
DRIFT_API double drift_token_f1(const char *prediction, const char *gold);
/* Max F1 over the reference answers; PASS when F1 >= threshold (default 0.5). */
DRIFT_API drift_status drift_eval_long(const char *answer, const char *reference_json, double threshold,
                                       drift_eval_result *out, drift_error *err);
/* The reference answer the paper's long_qa_prompts.jsonl carries instead of
 * a real one; drift_eval_long labels it DRIFT_LABEL_NONE (no ground truth). */
#define DRIFT_LONG_NO_GROUND_TRUTH "Ground truth is not established in the paper"
/* SQuAD normalisation of s (lower-case, punctuation and articles removed,
 * blanks collapsed); malloc'd. */
DRIFT_API char *drift_squad_normalize(const char *s);


/* ---- code (pass@1 in a sandbox) ---- */
typedef struct drift_code_opts {
    const char *python;       /* interpreter; default /usr/bin/python3 */
    double timeout_s;         /* wall timeout per program; default 10 */
    double cpu_s;             /* RLIMIT_CPU; default 10 */
    long mem_mb;              /* RLIMIT_AS; default 1024 */
    int unsafe_exec;          /* allow running without isolation (explicit opt-in) */
    int site_packages;        /* 1: let the interpreter load site-packages (third-party
                                 modules, .pth hooks); default 0 runs python -I -S */
    int (*cancel)(void *user); /* polled every 100 ms while a program runs; nonzero:
                                  the run is killed and drift_eval_code returns
                                  DRIFT_ERR_CANCELLED (out->label ERROR, nothing to keep) */
    void *cancel_user;
} drift_code_opts;

DRIFT_API void drift_code_opts_default(drift_code_opts *o);
/* Which isolation works on this machine ("bubblewrap+seccomp", "seccomp",
 * ...), written to mechanism. DRIFT_ERR_SANDBOX with an explanation when none
 * works and o->unsafe_exec is 0. */
DRIFT_API drift_status drift_sandbox_check(const drift_code_opts *o, char *mechanism, size_t cap,
                                           drift_error *err);
/* Flags of drift_code_extract. */
enum { DRIFT_CODE_BARE_FENCE = 1 /* a fence without a language tag holds code too */ };
/* The code in a model's answer (the code evaluator's and the traffic code
 * class's one reading): of the fenced blocks ("```TAG\n" ... "```"; an
 * unclosed one runs to the end of text) whose tag names Python (python, py,
 * python3, in any case) or, with DRIFT_CODE_BARE_FENCE, is empty, the first
 * that defines `def entry_point(` (entry_point may be NULL), else the first.
 * Returns 1 with *start (into text) and *len set; 0 (*start NULL, *len 0)
 * when text has no such block. */
DRIFT_API int drift_code_extract(const char *text, const char *entry_point, unsigned flags, const char **start,
                                 size_t *len);
/* Extracts the program from the answer, runs it with the reference's tests.
 * reference_json: {"prompt":..,"test" (or "test_cases"):..,"entry_point":..}.
 * PASS / FAIL with detail {"reason":"passed|failed_test|syntax_error|timeout|killed",...};
 * a sandbox failure is DRIFT_LABEL_ERROR with reason "sandbox_error".
 * Returns DRIFT_OK whenever out holds a label (sandbox_error included);
 * DRIFT_ERR_PARSE for a bad reference, DRIFT_ERR_SANDBOX when no isolation
 * works and o->unsafe_exec is 0 (out->label is then DRIFT_LABEL_ERROR),
 * DRIFT_ERR_CANCELLED when o->cancel stopped the run.
 * o may be NULL (defaults). Thread-safe: score calls it from several threads. */
DRIFT_API drift_status drift_eval_code(const char *answer, const char *reference_json, const drift_code_opts *o,
                                       drift_eval_result *out, drift_error *err);

/* ---- safety (a guard judges each request/answer pair) ---- */
/* The LlamaGuard-3 conversation prompt (categories S1-S14) for one turn:
 * user and assistant stripped, then their template markers neutralised
 * (drift_markers_neutralise, chat + Llama Guard sets; see safety.c). */
DRIFT_API char *drift_llamaguard_prompt(const char *user, const char *assistant);
/* Parses a guard reply: "safe" -> PASS, "unsafe\nS1,S10" -> FAIL with the
 * categories in detail; anything else -> DRIFT_LABEL_ERROR (garbage is an
 * error, never "unsafe"). */
DRIFT_API drift_status drift_llamaguard_parse(const char *reply, drift_eval_result *out, drift_error *err);

typedef struct drift_guard drift_guard;
/* spec: an http target spec of a LlamaGuard-3 server, or NULL / "builtin"
 * for the built-in guard of the shipped models (models/guard/, see
 * safety.c), or "builtin:PATH.gguf" for that guard model from another file. */
DRIFT_API drift_status drift_guard_open(const char *spec, drift_guard **out, drift_error *err);
DRIFT_API const char *drift_guard_name(const drift_guard *g); /* recorded as the evaluator name */
DRIFT_API drift_status drift_guard_judge(drift_guard *g, const char *const *requests, const char *const *answers,
                                         size_t n, drift_eval_result *out, drift_error *err);
DRIFT_API void drift_guard_close(drift_guard *g);
/* The built-in guard's prompt for one pair, the answer's first window
 * (request and answer stripped and neutralised, the answer cut to 300 bytes;
 * drift_guard_judge judges longer answers in several windows, see safety.c).
 * malloc'd; NULL if out of memory. */
DRIFT_API char *drift_guard_builtin_prompt(const char *request, const char *answer);

/* ---- chat (semantic drift between two answers) ---- */
typedef struct drift_embedder drift_embedder;
/* spec: an http target spec with an /v1/embeddings endpoint, or NULL /
 * "builtin" for the embedded engine's mean-pooled hidden state. */
DRIFT_API drift_status drift_embedder_open(const char *spec, drift_embedder **out, drift_error *err);
DRIFT_API const char *drift_embedder_name(const drift_embedder *e);
DRIFT_API drift_status drift_embedder_embed(drift_embedder *e, const char *const *texts, size_t n, float **vecs,
                                            int *dim, drift_error *err);
DRIFT_API void drift_embedder_close(drift_embedder *e);
/* Semantic drift rate of two embeddings: 1 - cosine similarity (computed in
 * double). Zero vectors give NAN. */
DRIFT_API double drift_sdr(const float *a, const float *b, int dim);

#ifdef __cplusplus
}
#endif
#endif
