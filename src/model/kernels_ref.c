/* kernels_ref.c - the float64 reference kernels (isa=ref, and the oracle of
 * tests/ops).
 *
 * Plain scalar C, compiled with -ffp-contract=off (CMake does this for every
 * *_ref.c), every sum accumulated in double in index order, every
 * transcendental taken in double (exp, pow, sin, cos, sqrt). The only
 * roundings to float are the format's own (weights dequantized to f32,
 * activations rounded to p->acts, KV vectors) and the final store. Results
 * are therefore the same on any x86-64 machine, and much closer to the exact
 * value than any fast kernel: a fast kernel's error is measured against this.
 *
 * These kernels ignore the profile's accum/reduce/attn/exp/threads/isa
 * (drift_profile_validate rejects isa=ref with anything but the reference
 * choices); they honour the formats (weights, acts, kv). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/numerics.h"

drift_status num_ref_matmul(const drift_numeric_profile *p, float *y, const float *x,
                            const num_qmat *W, int64_t B, drift_error *err) {
    int64_t K = W->cols, N = W->rows;
    float *xa = malloc((size_t)(B * K) * sizeof(float));
    float *w = malloc((size_t)K * sizeof(float));
    if (!xa || !w) {
        free(xa);
        free(w);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "ref matmul: scratch for %lld x %lld",
                               (long long)B, (long long)K);
    }
    memcpy(xa, x, (size_t)(B * K) * sizeof(float));
    for (int64_t b = 0; b < B; b++) num_round_acts(p->acts, xa + b * K, K);
    for (int64_t n = 0; n < N; n++) {
        num_qmat_dequantize_row(W, n, w);
        for (int64_t b = 0; b < B; b++) {
            const float *xr = xa + b * K;
            double acc = 0.0;
            for (int64_t k = 0; k < K; k++) acc += (double)xr[k] * (double)w[k];
            y[b * N + n] = (float)acc;
        }
    }
    free(xa);
    free(w);
    return DRIFT_OK;
}

void num_ref_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                     int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    double r = 1.0 / sqrt(ss / (double)n + (double)eps);
    for (int64_t i = 0; i < n; i++) out[i] = (float)((double)x[i] * r * (double)w[i]);
}

void num_ref_softmax(const drift_numeric_profile *p, float *x, int64_t n) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    for (int64_t i = 0; i < n; i++) sum += exp((double)x[i] - m);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(exp((double)x[i] - m) / sum);
}

double num_rope_freq(const num_rope_params *rp, int i) {
    double freq = pow((double)rp->theta_base, -2.0 * i / (double)rp->n_rot);
    if (rp->scaling_factor > 1.0f && rp->orig_ctx > 0) {
        double factor = rp->scaling_factor, lo = rp->low_freq_factor, hi = rp->high_freq_factor;
        double wavelen = 2.0 * M_PI / freq;
        double lo_wl = rp->orig_ctx / lo, hi_wl = rp->orig_ctx / hi;
        if (wavelen > lo_wl) {
            freq = freq / factor;
        } else if (wavelen >= hi_wl && hi != lo) {
            double smooth = (rp->orig_ctx / wavelen - lo) / (hi - lo);
            freq = (1.0 - smooth) * freq / factor + smooth * freq;
        }
    }
    if (rp->freq_factors) freq /= (double)rp->freq_factors[i];
    return freq;
}

void num_ref_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
                  const num_rope_params *rp) {
    int half = rp->n_rot / 2;
    for (int i = 0; i < half; i++) {
        double a = (double)pos * num_rope_freq(rp, i);
        double c = cos(a), s = sin(a);
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * rp->head_dim;
            int i0 = rp->neox ? i : 2 * i, i1 = rp->neox ? i + half : 2 * i + 1;
            double x0 = v[i0], x1 = v[i1];
            v[i0] = (float)(x0 * c - x1 * s);
            v[i1] = (float)(x0 * s + x1 * c);
        }
    }
}

void num_ref_swiglu(const drift_numeric_profile *p, float *out, const float *gate,
                    const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i];
        out[i] = (float)(g / (1.0 + exp(-g)) * (double)up[i]);
    }
}

#define REF_MAX_HEAD_DIM 1024

void num_ref_attention(const drift_numeric_profile *p, float *out, const float *q,
                       const void *k, const void *v, size_t stride_bytes, int n_pos,
                       int head_dim, float scale, float *scratch) {
    assert(head_dim <= REF_MAX_HEAD_DIM);
    double acc[REF_MAX_HEAD_DIM];
    float *kv = scratch; /* (head_dim) one loaded K or V vector */
    double m = -INFINITY;
    /* pass 1: max score; pass 2: weights and the weighted sum of V */
    for (int pass = 0; pass < 2; pass++) {
        double sum = 0.0;
        for (int d = 0; d < head_dim; d++) acc[d] = 0.0;
        for (int t = 0; t < n_pos; t++) {
            num_kv_load(p->kv, kv, (const char *)k + (size_t)t * stride_bytes, head_dim);
            double s = 0.0;
            for (int d = 0; d < head_dim; d++) s += (double)q[d] * (double)kv[d];
            s *= (double)scale;
            if (pass == 0) {
                if (s > m) m = s;
                continue;
            }
            double e = exp(s - m);
            sum += e;
            num_kv_load(p->kv, kv, (const char *)v + (size_t)t * stride_bytes, head_dim);
            for (int d = 0; d < head_dim; d++) acc[d] += e * (double)kv[d];
        }
        if (pass == 1)
            for (int d = 0; d < head_dim; d++) out[d] = n_pos > 0 ? (float)(acc[d] / sum) : 0.0f;
    }
}
