/* model_internal.h - the embedded engine's three structs, llama2.c style
 * (internal to src/model/; the API is driftbench/model.h).
 *
 *   drift_model      = config (drift_model_info + rope params) + weights
 *                      (layer_w: num_qmat views into the GGUF mapping, or
 *                      copies converted to the profile's weight format).
 *                      Immutable after loading; shared by threads.
 *   drift_session    = one sequence: position + KV cache (layer, n_ctx,
 *                      n_kv_heads, kv_vec_bytes) holding the profile's KV
 *                      format (on the CPU as the f32 values that format's
 *                      vectors decode to: see kv_f32), and the run state
 *                      its own forward calls use.
 *   model_run_state  = the forward pass's activations for a batch of rows,
 *                      kept between calls and grown to the largest batch
 *                      seen. Owned by a session (drift_session_forward, and
 *                      drift_session_forward_batch with the first session's)
 *                      or by one drift_model_generate call (its prefills and
 *                      its batched steps), and freed with its owner; one
 *                      thread at a time, like the session.
 *
 * The files that share them:
 *   model_load.c  GGUF metadata and tensors -> drift_model (+ the device copy)
 *   model_text.c  tokenizer calls, the built-in chat templates and the
 *                 neutraliser of template markers in untrusted text
 *   forward.c     sessions, the run state, the forward pass (CPU and the
 *                 CUDA backend's entry), batched steps
 *   generate.c    the sampling loop over batches of sequences, embeddings
 *
 * backend=cuda (built with DRIFT_HAVE_CUDA): the model keeps its host weights
 * and a dcu_model holding a device copy; a session holds a dcu_kv (its KV
 * cache on the device) instead of kc/vc. Calls into the backend for one
 * model are serialized by the model's mutex. */
#ifndef DRIFT_MODEL_INTERNAL_H
#define DRIFT_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/model.h"
#include "model/gguf.h"
#include "model/numerics.h"
#include "model/tokenizer.h"
#ifdef DRIFT_HAVE_CUDA
#include <pthread.h>
#include "model/cuda/cuda_backend.h"
#endif

typedef struct layer_w {
    float *attn_norm;          /* (dim) */
    num_qmat wq;             /* (n_heads * head_dim, dim) */
    num_qmat wk, wv;         /* (n_kv_heads * head_dim, dim) */
    float *bq, *bk, *bv;       /* (q_dim), (kv_dim), (kv_dim): qwen2 only, else NULL */
    num_qmat wo;             /* (dim, n_heads * head_dim) */
    float *ffn_norm;           /* (dim) */
    num_qmat w_gate, w_up;   /* (hidden, dim)   dense FFN */
    num_qmat w_down;         /* (dim, hidden) */
    num_qmat router;         /* (n_experts, dim)               MoE */
    num_qmat *e_gate, *e_up; /* n_experts x (hidden, dim) */
    num_qmat *e_down;        /* n_experts x (dim, hidden) */
} layer_w;

/* Built-in chat templates (model_text.c). */
typedef enum model_tpl { MODEL_TPL_NONE, MODEL_TPL_CHATML, MODEL_TPL_LLAMA3, MODEL_TPL_PHI3, MODEL_TPL_INST } model_tpl;

struct drift_model {
    gguf_file *f;
    drift_tokenizer *tok;
    drift_numeric_profile prof;
    drift_model_info info;
    num_rope_params rope;
    float *rope_freqs;         /* (n_rot / 2) or NULL */
    num_qmat tok_embd;       /* (n_vocab, dim) */
    num_qmat output;         /* (n_vocab, dim); a view of tok_embd when tied */
    float *output_norm;        /* (dim) */
    layer_w *layers;           /* (n_layers) */
    int q_dim, kv_dim;
    size_t kv_vec_bytes;       /* one head's K or V vector as the cache holds it */
    /* CPU with a KV format other than f32: each vector is stored in the
     * format and decoded once, at write time, to the f32 values every read
     * would decode it to (the same bits as keeping the format and decoding
     * at each read, which cost an O(n^2) decode per prefill); attn_prof is
     * prof with kv = f32, the profile the attention kernels read the cache
     * with. Otherwise kv_f32 = 0 and attn_prof = prof. */
    int kv_f32;
    drift_numeric_profile attn_prof;
#define MODEL_KV_F32_MAX_HD 512 /* kv_f32's staging buffer (heads wider keep the format) */
    model_tpl tpl;
#ifdef DRIFT_HAVE_CUDA
    dcu_model *dcu;            /* backend=cuda: the weights on the device; NULL on the CPU */
    pthread_mutex_t dcu_mu;    /* serializes this model's backend calls (init when dcu) */
#endif
};

/* Activations of a batch of rows (row b = one token of one session). Every
 * call writes what it reads, so the contents between calls mean nothing;
 * only the sizes are kept. All NULL / 0 when empty (calloc'd owner). */
typedef struct model_run_state {
    int idx_rows;              /* rows the three index arrays hold */
    int *pos;                  /* (idx_rows) position of each row */
    drift_session **sess;      /* (idx_rows) session of each row */
    drift_session **sorted;    /* (idx_rows) a batch's sessions, sorted to find repeats */

    int act_rows;              /* rows the activation buffers hold */
    float *x;                  /* (act_rows, dim) residual stream */
    float *xb;                 /* (act_rows, dim) normed input of a branch */
    float *xb2;                /* (act_rows, dim) branch output */
    float *q;                  /* (act_rows, n_heads * head_dim) */
    float *k, *v;              /* (act_rows, n_kv_heads * head_dim) */
    float *att;                /* (act_rows, n_heads * head_dim) attention output */
    float *h1, *h3;            /* (act_rows, hidden) FFN gate and up (MoE: one expert's rows) */
    float *hid;                /* (act_rows, dim) final hidden states no caller asked back */
    float *router;             /* MoE: (act_rows, n_experts) router logits */
    int *sel;                  /* MoE: (act_rows, n_experts_used) chosen experts, by rank */
    float *wt;                 /* MoE: (act_rows, n_experts_used) their renormalised weights */
    float *slot;               /* MoE: (act_rows, n_experts_used, dim) each choice's output */
    float *gath;               /* MoE: (act_rows, dim) one expert's rows, gathered */
    float *eout;               /* MoE: (act_rows, dim) one expert's output rows */
    int *who;                  /* MoE: (act_rows) slot of each gathered row */
    double *prob;              /* MoE: (n_experts) one row's router softmax */

    int logit_rows;            /* rows of logits */
    float *logits;             /* (logit_rows, n_vocab): greedy steps nobody asked logits of */

    int scratch_threads;       /* attention scratch: threads ... */
    size_t scratch_stride;     /* ... x floats each (>= positions + 2 * head_dim + 16) */
    float *scratch;            /* (scratch_threads, scratch_stride) */

    /* f32 copies of the weights whose format the matmul would convert panel
     * by panel in every call (int8, int4, fp8, mxfp4, nvfp4), made on first
     * use (forward.c: rs_weights) */
    int n_wcopy, cap_wcopy;
    struct model_wcopy {
        const num_qmat *src;   /* the model's matrix */
        num_qmat f32;          /* its values as f32, wrapping data */
        float *data;
    } *wcopy;
    size_t wcopy_bytes;        /* held by the copies */
} model_run_state;

struct drift_session {
    const drift_model *m;
    int n_ctx, pos;
    uint8_t *kc, *vc;          /* (n_layers, n_ctx, n_kv_heads, kv_vec_bytes); NULL on cuda */
    model_run_state rs;        /* used by this session's own forward calls */
#ifdef DRIFT_HAVE_CUDA
    dcu_kv *dkv;               /* backend=cuda: (n_layers, n_ctx, ...) on the device */
#endif
};

/* Chooses m->tpl and info.chat_template from the vocabulary (model_text.c). */
void model_pick_template(drift_model *m);

/* Frees the buffers of rs and leaves it empty (reusable). */
void model_run_state_free(model_run_state *rs);

/* drift_session_forward with the buffers of rs (forward.c). */
drift_status model_forward_seq(model_run_state *rs, drift_session *s, const int32_t *tokens, size_t n, int all_logits,
                               float *logits, float *hidden, drift_error *err);

/* One step of n sessions with the buffers of rs: each row's logits
 * (n, n_vocab) and / or greedy pick next (n); either may be NULL
 * (forward.c). */
/* Test hooks of kernels_cpu.c's attention: 1 in num_fast_attention_sse_only
 * makes num_fast_attention take its SSE path (scalar expf) even where the
 * AVX2 path applies; the two must agree bit for bit.
 * num_fast_attention_avx2_active() says whether the AVX2 path can be taken
 * here (AVX2 and FMA, and the vectorised expf gave this process's expf bits
 * in the self-check). */
extern int num_fast_attention_sse_only;
int num_fast_attention_avx2_active(void);

drift_status model_forward_step(model_run_state *rs, drift_session *const *sessions, const int32_t *tokens, size_t n,
                                float *logits, int32_t *next, drift_error *err);

#endif
