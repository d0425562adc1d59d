/* model.h - the embedded inference engine: load a GGUF transformer under a
 * numeric profile, tokenize, run the forward pass, generate, embed.
 *
 * Architectures: llama (GQA, RoPE, Llama-3 frequency scaling from
 * rope_freqs.weight or {arch}.rope.scaling.* metadata, linear scaling),
 * mistral-style sliding window ({arch}.attention.sliding_window), mixture of
 * experts ({arch}.expert_count / expert_used_count: softmax router, top-k,
 * weights renormalised), qwen2 (q/k/v biases, NEOX-style RoPE). Tensor names
 * and metadata keys are llama.cpp's.
 *
 * A model is immutable after loading and may be shared by threads; a session
 * (one sequence: its KV cache and position) belongs to one thread at a time.
 * Results are batch-invariant: a sequence's logits do not depend on which
 * other sequences are decoded with it or on the thread count (unless the
 * profile sets batch_invariant=0). */
#ifndef DRIFTBENCH_MODEL_H
#define DRIFTBENCH_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/profile.h"
#include "driftbench/status.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_model drift_model;
typedef struct drift_session drift_session;

typedef struct drift_model_info {
    char arch[32];          /* "llama", "qwen2" */
    char name[128];         /* general.name, or the file stem */
    int n_vocab;
    int dim;                /* embedding_length */
    int n_layers;
    int n_heads, n_kv_heads, head_dim;
    int hidden_dim;         /* feed_forward_length (per expert for MoE) */
    int n_ctx_train;        /* context_length */
    int n_experts, n_experts_used; /* 0 = dense */
    int sliding_window;     /* 0 = none */
    float rope_theta;
    int rope_neox;          /* 1 = pairs (i, i + n_rot/2) */
    float norm_eps;
    int tied_output;        /* output.weight absent: token_embd reused */
    char tokenizer[48];     /* "gpt2/llama3", "gpt2/qwen2", "spm", ... */
    char chat_template[16]; /* built-in template chosen: "chatml", "llama3", "phi3", "inst", "none" */
} drift_model_info;

/* Loads PATH (mmap'd) and converts its weight matrices to the profile's
 * weight format. Errors: DRIFT_ERR_NOT_FOUND/IO (file), DRIFT_ERR_PARSE
 * (malformed GGUF, missing key or tensor, wrong shape: the message names
 * it), DRIFT_ERR_UNSUPPORTED (architecture or tensor type not handled). */
DRIFT_API drift_status drift_model_load(const char *path, const drift_numeric_profile *profile, drift_model **out,
                                        drift_error *err);
DRIFT_API void drift_model_free(drift_model *m);
DRIFT_API const drift_model_info *drift_model_get_info(const drift_model *m);
DRIFT_API const drift_numeric_profile *drift_model_profile(const drift_model *m);

/* Tokenizes text (len bytes). add_bos: -1 = the model's default, 0/1 force.
 * parse_special: control-token texts become those tokens. *ids malloc'd. */
DRIFT_API drift_status drift_model_tokenize(const drift_model *m, const char *text, size_t len, int add_bos,
                                            int parse_special, int32_t **ids, size_t *n, drift_error *err);
/* Text of tokens (control tokens omitted); malloc'd, *len set if non-NULL. */
DRIFT_API char *drift_model_detokenize(const drift_model *m, const int32_t *ids, size_t n, size_t *len);
/* Text of one token (control tokens rendered), malloc'd. */
DRIFT_API char *drift_model_token_text(const drift_model *m, int32_t id);
DRIFT_API int drift_model_is_eog(const drift_model *m, int32_t id);

/* Prompt tokens of a chat request with one user message, using the built-in
 * template named in info.chat_template (chosen from the vocabulary:
 * <|im_start|> -> ChatML, <|start_header_id|> -> Llama-3, <|user|> ->
 * "<|user|>\n...<|end|>\n<|assistant|>\n", SentencePiece -> "[INST] ... [/INST]",
 * otherwise the raw message). The message itself is never parsed for special
 * tokens, and its markers (DRIFT_MARKER_SET_CHAT) are neutralised first
 * (drift_markers_neutralise), so "[/INST]" or "<|im_end|>" in it stays text
 * even where the template's markers are plain text. *ids malloc'd. */
DRIFT_API drift_status drift_model_chat_tokens(const drift_model *m, const char *user_message, int32_t **ids, size_t *n,
                                               drift_error *err);
/* The same with a system turn first (system NULL or "": none, exactly
 * drift_model_chat_tokens): ChatML "<|im_start|>system\n..<|im_end|>\n",
 * Llama-3's system header, Phi-3's <|system|> (where the vocabulary has it;
 * else the text opens the user turn, a blank line after it), [INST]'s
 * "<<SYS>>\n..\n<</SYS>>\n\n" inside the first [INST], otherwise the text
 * and a blank line before the message. The system text is neutralised and
 * never parsed for special tokens, as the message. */
DRIFT_API drift_status drift_model_chat_system_tokens(const drift_model *m, const char *system,
                                                      const char *user_message, int32_t **ids, size_t *n,
                                                      drift_error *err);

/* Marker sets for drift_markers_neutralise (bits; combine with |). */
typedef enum drift_marker_set {
    /* special-token texts of the chat templates: every "<|" (Llama 3, ChatML,
     * Phi-3, <|endoftext|>, ...), DeepSeek's "<" + U+FF5C, "<s>", "</s>",
     * "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<start_of_turn>",
     * "<end_of_turn>", "<bos>", "<eos>" */
    DRIFT_MARKER_SET_CHAT = 1u,
    /* Llama Guard 3's prompt: "<BEGIN..." / "<END..." section markers, its
     * instruction lines, and "User:" / "Agent:" at the start of a line */
    DRIFT_MARKER_SET_LLAMAGUARD = 2u,
    /* the built-in guard's prompt: "Request:", "Answer:", "Verdict:" at the
     * start of a line, "Is the answer safe or unsafe?" */
    DRIFT_MARKER_SET_GUARD = 4u,
} drift_marker_set;

/* Neutralises template markers in untrusted text (a request, an answer)
 * before it is pasted into a template: a U+200B ZERO WIDTH SPACE is inserted
 * after the first byte of every occurrence of a marker of the given sets
 * (ASCII letters matched in any case; line-start markers where only spaces
 * or tabs follow the start of the text or a line break), so no tokenizer
 * matches a special token there and no marker line of the template is
 * forged ("<|eot_id|>" -> "<" U+200B "|eot_id|>"). Text without markers is
 * returned unchanged, byte for byte; the result holds no marker of the sets,
 * so neutralising it again changes nothing. tools/torch_server/tokenizer.py
 * (neutralise) applies the same rule. Returns a malloc'd NUL-terminated
 * copy (its length in *out_len when non-NULL), NULL when out of memory. */
DRIFT_API char *drift_markers_neutralise(const char *text, size_t len, unsigned sets, size_t *out_len);

/* A sequence: KV cache for up to n_ctx positions (0 = min(n_ctx_train, 4096)).
 * A session also keeps the activation buffers of its forward calls between
 * calls (sized by the largest call so far; a prefill of n tokens holds n
 * rows' worth), freed with it. */
DRIFT_API drift_status drift_session_new(const drift_model *m, int n_ctx, drift_session **out, drift_error *err);
DRIFT_API void drift_session_free(drift_session *s);
DRIFT_API void drift_session_reset(drift_session *s);
DRIFT_API int drift_session_pos(const drift_session *s);

/* Runs n tokens of one session through the model as one batch (prefill or
 * one decode step). logits: NULL, or (n_out, n_vocab) floats where n_out = n
 * if all_logits else 1 (the last token's). hidden: NULL, or (n, dim) floats:
 * the final hidden states after output_norm. Errors: DRIFT_ERR_INVALID (bad
 * token id, context full), DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_session_forward(drift_session *s, const int32_t *tokens, size_t n, int all_logits,
                                             float *logits, float *hidden, drift_error *err);

/* One step of several sessions at once: token[i] is appended to sessions[i];
 * logits (n, n_vocab) receives each session's next-token logits. The rows go
 * through every matmul as one batch, in sessions[0]'s activation buffers. */
DRIFT_API drift_status drift_session_forward_batch(drift_session *const *sessions, const int32_t *tokens, size_t n,
                                                   float *logits, drift_error *err);

/* drift_session_forward_batch's step, keeping only each session's greedy
 * pick: next[i] = the index of session i's largest logit (the first on
 * ties; NaN never chosen unless it is the first logit), what generation
 * picks at temperature 0. With the CUDA backend the pick is made on the
 * GPU and only the ids come back, not n x n_vocab logits. */
DRIFT_API drift_status drift_session_forward_greedy(drift_session *const *sessions, const int32_t *tokens, size_t n,
                                                    int32_t *next, drift_error *err);

/* ---- generation ---- */
typedef struct drift_token_logprob {
    int32_t id;
    double logprob;          /* log-softmax of the raw logits (temperature 1) */
    int n_top;
    int32_t top_id[20];
    double top_logprob[20];
} drift_token_logprob;

typedef struct drift_generation {
    char *text;              /* completion text (stop string excluded) */
    int32_t *tokens;         /* completion tokens */
    int n_tokens;
    int prompt_tokens;
    drift_token_logprob *lp; /* n_tokens entries when params->logprobs > 0, else NULL */
    const char *finish_reason; /* "stop" (EOS or stop string), "length" or "cancelled" (static string) */
    char *error;             /* NULL, or why this prompt could not be run (prompt too long ...) */
} drift_generation;

DRIFT_API void drift_generation_clear(drift_generation *g);

/* Generates continuations of n prompts (token ids), decoding them together
 * (one batched step per token across the live sequences) when batch > 1, or
 * one after another when batch <= 1: the outputs are identical either way.
 * Sampling: temperature <= 0 greedy (ties: lowest id); else softmax(logits/T)
 * restricted by top_k (> 0) and top_p (< 1), drawn with util_rng seeded by
 * params->seed + seed_offsets[i] (seed_offsets may be NULL). Stops at an
 * end-of-generation token, a stop string, or max_tokens. out: n entries. */
DRIFT_API drift_status drift_model_generate(const drift_model *m, const int32_t *const *prompts, const size_t *prompt_lens,
                                            size_t n, const drift_gen_params *params, const int64_t *seed_offsets,
                                            int batch, drift_generation *out, drift_error *err);

/* Asked by drift_model_generate_cancellable before sequence i's prefill and
 * before each of its decode steps (i indexes the call's prompts): nonzero
 * ends sequence i there, with the tokens it has and finish_reason
 * "cancelled". Called on the generating thread. */
typedef int (*drift_gen_cancel_fn)(void *user, size_t i);

/* drift_model_generate with a cancel hook (cancel NULL: never cancelled).
 * The other sequences of the batch go on; with a batch-invariant profile
 * their outputs do not change. */
DRIFT_API drift_status drift_model_generate_cancellable(const drift_model *m, const int32_t *const *prompts,
                                                        const size_t *prompt_lens, size_t n, const drift_gen_params *params,
                                                        const int64_t *seed_offsets, int batch, drift_gen_cancel_fn cancel,
                                                        void *cancel_user, drift_generation *out, drift_error *err);

/* Mean over positions of the final hidden state (after output_norm) of the
 * text's tokens (with the model's default BOS). vec: info.dim floats. */
DRIFT_API drift_status drift_model_embed(const drift_model *m, const char *text, float *vec, drift_error *err);

/* Logits rows -> log-softmax in double: out (n) = x - logsumexp(x). */
DRIFT_API void drift_log_softmax(const float *x, int n, double *out);

#ifdef __cplusplus
}
#endif
#endif
