/* cuda_attn.cu - the attention launcher (cuda_attn.cuh has the kernels,
 * cuda_attn_<format>.cu instantiate them per KV format): checks the shape,
 * picks the kernel (k_attn_row when a row's splits fit one block, else the
 * split grid of k_attn_part with its workspace), the lane width from
 * head_dim and the warps from the chunk, and slices the batch to the
 * workspace. */
#include "model/cuda/cuda_attn.cuh"

#include <stdlib.h>
#include <string.h>

size_t dcu_attn_part_floats(int B, int n_heads, int head_dim, int chunk, int max_npos) {
    size_t splits = (size_t)((max_npos + chunk - 1) / chunk);
    if (splits <= 1) return 0;
    return (size_t)B * (size_t)n_heads * splits * (size_t)(head_dim + 2);
}

#define ATT_MAX_HD 1024 /* 32 lanes x 32 dimensions */

/* Scheduling overrides (read once; the same operations per head either
 * way): DRIFT_CUDA_ATT_GM=1, 2 or 4 query heads per block where that
 * divides the group and the head size and KV format allow it (else chosen
 * from the grid size); DRIFT_CUDA_ATT_ROW=0 keeps the split grid where
 * k_attn_row would serve a row in one block. */
static void att_env(int *gm, int *row) {
    static int g = -1, r = -1;
    if (g < 0) {
        const char *e = getenv("DRIFT_CUDA_ATT_GM");
        g = e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "4")) ? e[0] - '0' : 0;
        r = dcu_env_not_zero("DRIFT_CUDA_ATT_ROW");
    }
    *gm = g;
    *row = r;
}

drift_status dcu_launch_attention(dcu_ctx *c, const dcu_attn_args *a, int B, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    if (a->head_dim < 1 || a->head_dim > ATT_MAX_HD || a->n_heads > 65535 || a->chunk < 1 || a->n_kvh < 1 ||
        a->n_heads % a->n_kvh)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                               "cuda: attention with %d heads (%d kv) of dimension %d, chunk %d", a->n_heads,
                               a->n_kvh, a->head_dim, a->chunk);
    int max_splits = (a->max_npos + a->chunk - 1) / a->chunk;
    if (max_splits < 1) max_splits = 1;
    att_k P;
    P.q = a->q;
    P.ldq = a->ldq;
    P.out = a->out;
    P.ldo = a->ldo;
    P.rows = a->rows;
    P.part = a->part;
    P.cnt = a->cnt;
    P.layer = a->layer;
    P.n_heads = a->n_heads;
    P.n_kvh = a->n_kvh;
    P.hd = a->head_dim;
    P.window = a->window;
    P.kvfmt = a->kvfmt;
    P.fast = a->fast_exp;
    P.chunk = a->chunk;
    P.max_splits = max_splits;
    P.vb = a->vb;
    P.scale = a->scale;
    P.B = B;
    P.b0 = 0;
    P.acts = DRIFT_DTYPE_F32;
    P.oh = NULL;
    P.okp = 0;
    P.qk = 0;
    memset(&P.qa, 0, sizeof P.qa);
    if (a->oa) {
        if (dcu_is_fp8(a->oacts) || (a->oneeds & DCU_NEED_Q))
            return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: attention cannot write fp8 matmul inputs");
        P.out = a->oa->f;
        P.ldo = (int64_t)a->n_heads * a->head_dim;
        P.acts = a->oacts;
        P.oh = (a->oneeds & DCU_NEED_H) ? a->oa->h : NULL;
        P.okp = dcu_pad16(P.ldo);
    }
    int hd = a->head_dim;
    int npl = hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : hd <= 256 ? 8 : 32;
    long nwl = ((long)a->chunk + ATT_TILE - 1) / ATT_TILE; /* warps: from the chunk only */
    int nw = nwl < ATT_MAX_WARPS ? (int)nwl : ATT_MAX_WARPS;
    size_t per_row = (size_t)a->n_heads * (size_t)max_splits * (size_t)(a->head_dim + 2);
    int slice = 65535;
    if (max_splits > 1) {
        size_t fit = a->part ? a->part_floats / per_row : 0;
        size_t cfit = a->cnt ? a->cnt_rows : 0;
        if (fit < 1 || cfit < 1)
            return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: attention workspace of %zu floats < %zu (%zu counter rows)",
                                   a->part_floats, per_row, cfit);
        if (fit < (size_t)slice) slice = (int)fit;
        if (cfit < (size_t)slice) slice = (int)cfit;
    }
    /* query heads per block: the largest of 4, 2, 1 dividing the group (2 at
     * most for head_dim > 128, 1 above 256; 1 for the KV formats without
     * GM > 1 kernels: dcu_attn_gm_max), halved while the grid would leave
     * SMs idle. A scheduling choice only: per head the same operations. */
    int group = a->n_heads / a->n_kvh;
    int gmax = npl <= 4 ? 4 : npl <= 8 ? 2 : 1;
    if (gmax > dcu_attn_gm_max(a->kvfmt)) gmax = dcu_attn_gm_max(a->kvfmt);
    int gm = gmax;
    while (gm > 1 && group % gm) gm /= 2;
    int nb0 = B < slice ? B : slice;
    while (gm > 1 && (long)nb0 * (a->n_heads / gm) * max_splits < 2L * c->sm_count) gm /= 2;
    int gm_env, row_env;
    att_env(&gm_env, &row_env);
    if (gm_env && group % gm_env == 0 && gm_env <= gmax) gm = gm_env;
    int hq = (hd + 3) & ~3;
    /* one block per (row, head group) when its splits' warps fit (k_attn_row: the same operations) */
    const bool row = dcu_fuse_on() && row_env && (long)max_splits * nw <= ATT_RW_MAX &&
                     (size_t)(gm * hq + max_splits * nw * gm * (hd + 2)) * sizeof(float) <= 48u * 1024u;
    const int threads = row ? 32 * max_splits * nw : 32 * nw;
    size_t smem = (size_t)(gm * hq + (threads / 32) * gm * (hd + 2)) * sizeof(float); /* <= 37 KB */
    if (row) slice = 65535; /* no workspace */
    static int qka = -1; /* DRIFT_CUDA_QKA=0: k_qkv always its own launch (read once; the same bits) */
    if (qka < 0) qka = dcu_env_not_zero("DRIFT_CUDA_QKA");
    if (a->qkv) { /* k_qkv's work: in k_attn_row (one row), else its own launch first */
        const int npair = a->qkv->n_rot / 2;
        const size_t qk_smem = ((smem / sizeof(float) + 2 * (size_t)hq + 1) & ~(size_t)1) * sizeof(float) +
                               2 * (size_t)npair * sizeof(double);
        if (qka && row && B == 1 && npair <= threads && qk_smem <= 48u * 1024u && a->qkv->q == a->q) {
            P.qk = 1;
            P.qa = *a->qkv;
            smem = qk_smem;
        } else {
            drift_status st = dcu_launch_qkv(c, a->qkv, B, err);
            if (st) return st;
        }
    }
    for (int b0 = 0; b0 < B; b0 += slice) {
        int nb = B - b0 < slice ? B - b0 : slice;
        att_k S = P;
        S.q += (size_t)b0 * P.ldq;
        S.out += (size_t)b0 * P.ldo;
        if (S.oh) S.oh += (size_t)b0 * P.okp;
        S.b0 = b0;
        S.rows += b0;
        dim3 g1 = row ? dim3((unsigned)(a->n_heads / gm), (unsigned)nb)
                      : dim3((unsigned)max_splits, (unsigned)(a->n_heads / gm), (unsigned)nb);
        switch (a->kvfmt) {
        case DRIFT_DTYPE_F16: dcu_attn_launch_fmt<DRIFT_DTYPE_F16>(npl, gm, row, g1, threads, smem, c->st, S); break;
        case DRIFT_DTYPE_BF16: dcu_attn_launch_fmt<DRIFT_DTYPE_BF16>(npl, gm, row, g1, threads, smem, c->st, S); break;
        case DRIFT_DTYPE_FP8_E4M3:
            dcu_attn_launch_fmt<DRIFT_DTYPE_FP8_E4M3>(npl, gm, row, g1, threads, smem, c->st, S);
            break;
        case DRIFT_DTYPE_FP8_E5M2:
            dcu_attn_launch_fmt<DRIFT_DTYPE_FP8_E5M2>(npl, gm, row, g1, threads, smem, c->st, S);
            break;
        default: dcu_attn_launch_fmt<DRIFT_DTYPE_F32>(npl, gm, row, g1, threads, smem, c->st, S); break;
        }
        DCU_LAUNCHED("attention kernel");
    }
    return DRIFT_OK;
}

#ifdef DCU_TRACE
extern "C" int dcu_trace_a_f32(int op, FILE *f);
extern "C" int dcu_trace_a_f16(int op, FILE *f);
extern "C" int dcu_trace_a_bf16(int op, FILE *f);
extern "C" int dcu_trace_a_e4m3(int op, FILE *f);
extern "C" int dcu_trace_a_e5m2(int op, FILE *f);
/* DCU_TRACE_HOST's contract for the attention units together (one per KV
 * format): the records taken by all, -1 when any fails */
extern "C" int dcu_trace_a(int op, FILE *f) {
    int (*const units[])(int, FILE *) = {dcu_trace_a_f32, dcu_trace_a_f16, dcu_trace_a_bf16, dcu_trace_a_e4m3,
                                         dcu_trace_a_e5m2};
    int n = 0, bad = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        int r = units[i](op, f);
        if (r < 0) bad = 1;
        else n += r;
    }
    return bad ? -1 : n;
}
#endif
