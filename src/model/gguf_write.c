/* gguf_write.c - GGUF v3 writer: builds test fixtures and (later) the
 * training tools' output.
 *
 * KVs are encoded as they are added into one byte buffer; tensors keep their
 * own data copies. Serialisation writes the header, the KV bytes, the tensor
 * infos with offsets assigned in call order (each rounded up to the
 * alignment), zero padding to the alignment, then the tensor data with zero
 * padding between tensors. The encoders for F16/BF16/Q8_0/Q4_0 round the same
 * way as ggml's reference quantizers (Q8_0: d = amax/127, q = round(x/d);
 * Q4_0: d = max/-8 where max is the signed value of largest magnitude,
 * q = min(15, (int)(x/d + 8.5))). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "util/util.h"

typedef struct wtensor {
    char *name;
    gguf_dtype type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint8_t *data;
    uint64_t n_bytes;
} wtensor;

struct gguf_writer {
    util_buf kv;
    uint64_t n_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint32_t alignment;
    int failed;
};

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    buf_free(&w->kv);
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w);
}

void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) { w->alignment = alignment ? alignment : 1; }

static int put(util_buf *b, const void *p, size_t n) { return buf_append(b, p, n); }
static int put_u32(util_buf *b, uint32_t v) { return put(b, &v, 4); }
static int put_u64(util_buf *b, uint64_t v) { return put(b, &v, 8); }
static int put_str(util_buf *b, const char *s) {
    size_t n = strlen(s);
    return put_u64(b, n) || put(b, s, n);
}

static int add_head(gguf_writer *w, const char *key, gguf_vtype t) {
    w->n_kv++;
    return put_str(&w->kv, key) || put_u32(&w->kv, t);
}

static int add_scalar(gguf_writer *w, const char *key, gguf_vtype t, const void *v, size_t n) {
    int rc = add_head(w, key, t) || put(&w->kv, v, n);
    w->failed |= rc;
    return rc ? -1 : 0;
}

int gguf_writer_add_u8(gguf_writer *w, const char *key, uint8_t v) { return add_scalar(w, key, GGUF_VT_UINT8, &v, 1); }
int gguf_writer_add_i8(gguf_writer *w, const char *key, int8_t v) { return add_scalar(w, key, GGUF_VT_INT8, &v, 1); }
int gguf_writer_add_u16(gguf_writer *w, const char *key, uint16_t v) { return add_scalar(w, key, GGUF_VT_UINT16, &v, 2); }
int gguf_writer_add_i16(gguf_writer *w, const char *key, int16_t v) { return add_scalar(w, key, GGUF_VT_INT16, &v, 2); }
int gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v) { return add_scalar(w, key, GGUF_VT_UINT32, &v, 4); }
int gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v) { return add_scalar(w, key, GGUF_VT_INT32, &v, 4); }
int gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v) { return add_scalar(w, key, GGUF_VT_UINT64, &v, 8); }
int gguf_writer_add_i64(gguf_writer *w, const char *key, int64_t v) { return add_scalar(w, key, GGUF_VT_INT64, &v, 8); }
int gguf_writer_add_f32(gguf_writer *w, const char *key, float v) { return add_scalar(w, key, GGUF_VT_FLOAT32, &v, 4); }
int gguf_writer_add_f64(gguf_writer *w, const char *key, double v) { return add_scalar(w, key, GGUF_VT_FLOAT64, &v, 8); }
int gguf_writer_add_bool(gguf_writer *w, const char *key, int v) {
    uint8_t b = v ? 1 : 0;
    return add_scalar(w, key, GGUF_VT_BOOL, &b, 1);
}

int gguf_writer_add_string(gguf_writer *w, const char *key, const char *v) {
    int rc = add_head(w, key, GGUF_VT_STRING) || put_str(&w->kv, v);
    w->failed |= rc;
    return rc ? -1 : 0;
}

int gguf_writer_add_array(gguf_writer *w, const char *key, gguf_vtype elem_type, const void *data, uint64_t n) {
    size_t es = gguf_vtype_size(elem_type);
    if (!es) return w->failed = 1, -1;
    int rc = add_head(w, key, GGUF_VT_ARRAY) || put_u32(&w->kv, elem_type) || put_u64(&w->kv, n) ||
             put(&w->kv, data, (size_t)n * es);
    w->failed |= rc;
    return rc ? -1 : 0;
}

int gguf_writer_add_string_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
    int rc = add_head(w, key, GGUF_VT_ARRAY) || put_u32(&w->kv, GGUF_VT_STRING) || put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n && !rc; i++) rc = put_str(&w->kv, v[i]);
    w->failed |= rc;
    return rc ? -1 : 0;
}

int gguf_writer_add_raw(gguf_writer *w, const char *key, gguf_vtype type, const void *bytes, size_t n) {
    int rc = add_head(w, key, type) || put(&w->kv, bytes, n);
    w->failed |= rc;
    return rc ? -1 : 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, gguf_dtype type, uint32_t n_dims, const uint64_t *ne,
                           const void *data, uint64_t n_bytes) {
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return w->failed = 1, -1;
    if (w->n_t == w->cap_t) {
        size_t nc = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt) return w->failed = 1, -1;
        w->t = nt;
        w->cap_t = nc;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = util_strdup(name);
    t->data = malloc(n_bytes ? (size_t)n_bytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        return w->failed = 1, -1;
    }
    if (n_bytes) memcpy(t->data, data, (size_t)n_bytes);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < n_dims; d++) t->ne[d] = ne[d];
    t->n_bytes = n_bytes;
    w->n_t++;
    return 0;
}

static void enc_q8_0(const float *x, uint8_t *out) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = gguf_f32_to_f16(d);
    memcpy(out, &h, 2);
    for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

static void enc_q4_0(const float *x, uint8_t *out) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    uint16_t h = gguf_f32_to_f16(d);
    memcpy(out, &h, 2);
    for (int j = 0; j < 16; j++) {
        int a = (int)(x[j] * id + 8.5f), b = (int)(x[j + 16] * id + 8.5f);
        if (a > 15) a = 15;
        if (b > 15) b = 15;
        if (a < 0) a = 0;
        if (b < 0) b = 0;
        out[2 + j] = (uint8_t)(a | (b << 4));
    }
}

/* Q6_K from floats: one int8 scale per 16 elements relative to the f16 d of
 * the 256-element super-block, 6-bit values (q + 32), packed as ggml does
 * (low nibbles in ql, two high bits per element in qh). A plain round-to-
 * nearest encoder (ggml's searches scales more cleverly); for test files. */
static void enc_q6_k(const float *x, uint8_t *out) {
    float gs[16], maxs = 0;
    for (int g = 0; g < 16; g++) {
        float amax = 0;
        for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(x[16 * g + j]));
        gs[g] = amax / 31.0f;
        maxs = fmaxf(maxs, gs[g]);
    }
    float d = maxs / 127.0f;
    uint16_t dh = gguf_f32_to_f16(d);
    d = gguf_f16_to_f32(dh);
    int8_t sc[16];
    uint8_t L[256];
    for (int g = 0; g < 16; g++) {
        int v = d > 0 ? (int)lroundf(gs[g] / d) : 0;
        sc[g] = (int8_t)(v > 127 ? 127 : v);
        float step = d * sc[g];
        for (int j = 0; j < 16; j++) {
            int q = step > 0 ? (int)lroundf(x[16 * g + j] / step) : 0;
            q = q < -32 ? -32 : q > 31 ? 31 : q;
            L[16 * g + j] = (uint8_t)(q + 32);
        }
    }
    uint8_t *ql = out, *qh = out + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((L[j + l] & 0xF) | ((L[j + l + 64] & 0xF) << 4));
            ql[l + 32] = (uint8_t)((L[j + l + 32] & 0xF) | ((L[j + l + 96] & 0xF) << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
        }
    memcpy(out + 192, sc, 16);
    memcpy(out + 208, &dh, 2);
}

int gguf_writer_add_tensor_f32(gguf_writer *w, const char *name, gguf_dtype type, uint32_t n_dims, const uint64_t *ne,
                               const float *data) {
    uint32_t be, bb;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS || gguf_dtype_info(type, &be, &bb)) return w->failed = 1, -1;
    uint64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) nel *= ne[d];
    if (ne[0] % be) return w->failed = 1, -1;
    uint64_t nb = nel / be * bb;
    uint8_t *buf = malloc(nb ? (size_t)nb : 1);
    if (!buf) return w->failed = 1, -1;
    int ok = 1;
    for (uint64_t i = 0; i < nel / be; i++) {
        const float *x = data + i * be;
        uint8_t *o = buf + i * bb;
        switch (type) {
        case GGUF_DT_F32: memcpy(o, x, 4); break;
        case GGUF_DT_F16: { uint16_t h = gguf_f32_to_f16(*x); memcpy(o, &h, 2); break; }
        case GGUF_DT_BF16: { uint16_t h = gguf_f32_to_bf16(*x); memcpy(o, &h, 2); break; }
        case GGUF_DT_Q8_0: enc_q8_0(x, o); break;
        case GGUF_DT_Q4_0: enc_q4_0(x, o); break;
        case GGUF_DT_Q6_K: enc_q6_k(x, o); break;
        default: ok = 0; break;
        }
        if (!ok) break;
    }
    int rc = ok ? gguf_writer_add_tensor(w, name, type, n_dims, ne, buf, nb) : -1;
    free(buf);
    if (rc) w->failed = 1;
    return rc;
}

drift_status gguf_writer_to_memory(gguf_writer *w, uint8_t **out, size_t *len, drift_error *err) {
    *out = NULL;
    *len = 0;
    if (w->failed) return drift_error_set(err, DRIFT_ERR_INVALID, "gguf writer: an earlier add failed (bad argument or out of memory)");
    util_buf b = {0};
    uint64_t n_kv = w->n_kv + (w->alignment != GGUF_DEFAULT_ALIGNMENT);
    int rc = put(&b, "GGUF", 4) || put_u32(&b, 3) || put_u64(&b, w->n_t) || put_u64(&b, n_kv);
    if (!rc && w->alignment != GGUF_DEFAULT_ALIGNMENT)
        rc = put_str(&b, "general.alignment") || put_u32(&b, GGUF_VT_UINT32) || put_u32(&b, w->alignment);
    if (!rc && w->kv.len) rc = put(&b, w->kv.data, w->kv.len);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t && !rc; i++) {
        const wtensor *t = &w->t[i];
        rc = put_str(&b, t->name) || put_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && !rc; d++) rc = put_u64(&b, t->ne[d]);
        rc = rc || put_u32(&b, t->type) || put_u64(&b, off);
        off += (t->n_bytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    static const uint8_t zeros[256] = {0};
    for (size_t i = 0; i <= w->n_t && !rc; i++) {
        while (!rc && b.len % w->alignment) {
            size_t pad = w->alignment - b.len % w->alignment;
            rc = put(&b, zeros, pad < sizeof zeros ? pad : sizeof zeros);
        }
        if (i < w->n_t && !rc && w->t[i].n_bytes) rc = put(&b, w->t[i].data, (size_t)w->t[i].n_bytes);
    }
    if (rc) {
        buf_free(&b);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "gguf writer: out of memory");
    }
    *len = b.len;
    *out = (uint8_t *)buf_steal(&b);
    return DRIFT_OK;
}

drift_status gguf_writer_save(gguf_writer *w, const char *path, drift_error *err) {
    uint8_t *p;
    size_t n;
    drift_status st = gguf_writer_to_memory(w, &p, &n, err);
    if (st) return st;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(p);
        return drift_error_set(err, DRIFT_ERR_IO, "%s: cannot create", path);
    }
    size_t wr = fwrite(p, 1, n, f);
    int cl = fclose(f);
    free(p);
    if (wr != n || cl) return drift_error_set(err, DRIFT_ERR_IO, "%s: write failed", path);
    return DRIFT_OK;
}
