/* gguf.c - GGUF v3 reader: map, validate, look up, decode.
 *
 * Everything read from the file goes through a bounds-checked cursor
 * (struct cur), so a truncated or lying file can only ever produce an error.
 * Counts are capped by what could possibly fit in the remaining bytes before
 * anything is allocated (a KV needs >= 12 bytes, a tensor info >= 24), so an
 * absurd count cannot make us allocate gigabytes. After the tensor infos are
 * read, the data section start is aligned, every tensor's byte size is
 * computed with overflow checks, and the tensors are sorted by offset to
 * check that they are aligned, inside the file and do not overlap. */
#include "model/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define GGUF_MAX_STRING (1ull << 30)   /* a single string longer than 1 GiB is garbage */
#define GGUF_MAX_NEST 8                /* nested array depth */
#define GGUF_MAX_KEY 65535

typedef struct cur {
    const uint8_t *p;
    size_t size;
    size_t pos;
    const char *path;
    drift_error *err;
} cur;

static int need(cur *c, uint64_t n) { return c->pos <= c->size && n <= (uint64_t)(c->size - c->pos); }

static drift_status rd(cur *c, void *dst, size_t n, const char *what) {
    if (!need(c, n))
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: truncated reading %s: need %zu bytes at offset %zu, file size %zu",
                               c->path, what, n, c->pos, c->size);
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return DRIFT_OK;
}

static drift_status rd_u32(cur *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static drift_status rd_u64(cur *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

static drift_status rd_str(cur *c, gguf_str *s, const char *what) {
    uint64_t n = 0;
    drift_status st = rd_u64(c, &n, what);
    if (st) return st;
    if (n > GGUF_MAX_STRING || !need(c, n))
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: %s: string length %" PRIu64 " at offset %zu past end of file (size %zu)",
                               c->path, what, n, c->pos - 8, c->size);
    s->p = (const char *)c->p + c->pos;
    s->n = n;
    c->pos += (size_t)n;
    return DRIFT_OK;
}

size_t gguf_vtype_size(uint32_t t) {
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_vtype_name(uint32_t t) {
    static const char *names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                  "bool", "string", "array", "uint64", "int64", "float64"};
    return t < GGUF_VT_COUNT ? names[t] : "unknown";
}

/* Reads one scalar of type t at the cursor into kv->v. */
static drift_status rd_scalar(cur *c, uint32_t t, gguf_kv *kv, const char *key) {
    uint8_t b[8] = {0};
    size_t n = gguf_vtype_size(t);
    drift_status st = rd(c, b, n, key);
    if (st) return st;
    switch (t) {
    case GGUF_VT_UINT8: kv->v.u = b[0]; break;
    case GGUF_VT_BOOL:
        if (b[0] > 1) {
            c->pos -= 1;
            return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': bool value %u is neither 0 nor 1", c->path, key, b[0]);
        }
        kv->v.u = b[0];
        break;
    case GGUF_VT_INT8: kv->v.i = (int8_t)b[0]; break;
    case GGUF_VT_UINT16: { uint16_t x; memcpy(&x, b, 2); kv->v.u = x; break; }
    case GGUF_VT_INT16: { int16_t x; memcpy(&x, b, 2); kv->v.i = x; break; }
    case GGUF_VT_UINT32: { uint32_t x; memcpy(&x, b, 4); kv->v.u = x; break; }
    case GGUF_VT_INT32: { int32_t x; memcpy(&x, b, 4); kv->v.i = x; break; }
    case GGUF_VT_FLOAT32: { float x; memcpy(&x, b, 4); kv->v.f = x; break; }
    case GGUF_VT_UINT64: { uint64_t x; memcpy(&x, b, 8); kv->v.u = x; break; }
    case GGUF_VT_INT64: { int64_t x; memcpy(&x, b, 8); kv->v.i = x; break; }
    case GGUF_VT_FLOAT64: { double x; memcpy(&x, b, 8); kv->v.f = x; break; }
    default: return drift_error_set(c->err, DRIFT_ERR_INTERNAL, "bad scalar type");
    }
    return DRIFT_OK;
}

/* Skips (validating) an array body of element type t and count n; used for
 * nested arrays, which we keep opaque. */
static drift_status skip_array(cur *c, uint32_t t, uint64_t n, int depth, const char *key) {
    if (depth > GGUF_MAX_NEST)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': arrays nested deeper than %d", c->path, key, GGUF_MAX_NEST);
    size_t es = gguf_vtype_size(t);
    if (es) {
        if (n > (c->size - c->pos) / es)
            return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': array of %" PRIu64 " %s past end of file (size %zu)",
                                   c->path, key, n, gguf_vtype_name(t), c->size);
        if (t == GGUF_VT_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->p[c->pos + i] > 1)
                    return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': bool element %" PRIu64 " is %u", c->path, key, i,
                                           c->p[c->pos + i]);
        c->pos += (size_t)(n * es);
        return DRIFT_OK;
    }
    if (t == GGUF_VT_STRING) {
        if (n > (c->size - c->pos) / 8)
            return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': array of %" PRIu64 " strings past end of file (size %zu)",
                                   c->path, key, n, c->size);
        for (uint64_t i = 0; i < n; i++) {
            gguf_str s;
            drift_status st = rd_str(c, &s, key);
            if (st) return st;
        }
        return DRIFT_OK;
    }
    if (t == GGUF_VT_ARRAY) {
        if (n > (c->size - c->pos) / 12)
            return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': array of %" PRIu64 " arrays past end of file (size %zu)",
                                   c->path, key, n, c->size);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t et = 0;
            uint64_t en = 0;
            drift_status st = rd_u32(c, &et, key);
            if (!st) st = rd_u64(c, &en, key);
            if (!st && et >= GGUF_VT_COUNT)
                st = drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': nested array element type %u unknown", c->path, key, et);
            if (!st) st = skip_array(c, et, en, depth + 1, key);
            if (st) return st;
        }
        return DRIFT_OK;
    }
    return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': array element type %u unknown", c->path, key, t);
}

static drift_status rd_kv(cur *c, gguf_kv *kv, uint64_t index) {
    gguf_str k = {0};
    drift_status st = rd_str(c, &k, "key");
    if (st) return drift_error_prefix(c->err, "kv %" PRIu64 ": ", index);
    if (k.n == 0 || k.n > GGUF_MAX_KEY)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: kv %" PRIu64 ": key length %" PRIu64 " (must be 1..65535)", c->path,
                               index, k.n);
    kv->key = util_strndup(k.p, (size_t)k.n);
    if (!kv->key) return drift_error_set(c->err, DRIFT_ERR_NOMEM, "out of memory");
    if (strlen(kv->key) != k.n)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: kv %" PRIu64 ": key contains a NUL byte", c->path, index);
    uint32_t t = 0;
    if ((st = rd_u32(c, &t, kv->key))) return st;
    if (t >= GGUF_VT_COUNT)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': value type %u unknown", c->path, kv->key, t);
    kv->type = (gguf_vtype)t;
    if (t == GGUF_VT_STRING) return rd_str(c, &kv->s, kv->key);
    if (t != GGUF_VT_ARRAY) return rd_scalar(c, t, kv, kv->key);
    uint32_t et = 0;
    uint64_t n = 0;
    if ((st = rd_u32(c, &et, kv->key)) || (st = rd_u64(c, &n, kv->key))) return st;
    if (et >= GGUF_VT_COUNT)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: key '%s': array element type %u unknown", c->path, kv->key, et);
    kv->arr_type = (gguf_vtype)et;
    kv->arr_n = n;
    size_t start = c->pos;
    if ((st = skip_array(c, et, n, 1, kv->key))) return st;
    kv->arr_data = c->p + start;
    if (et == GGUF_VT_STRING && n) {
        /* skip_array proved all n strings fit: n <= bytes/8, so the table is bounded by the file size */
        kv->arr_str = malloc((size_t)n * sizeof *kv->arr_str);
        if (!kv->arr_str) return drift_error_set(c->err, DRIFT_ERR_NOMEM, "out of memory for %" PRIu64 " strings", n);
        cur c2 = *c;
        c2.pos = start;
        for (uint64_t i = 0; i < n; i++) rd_str(&c2, &kv->arr_str[i], kv->key);
    }
    return DRIFT_OK;
}

int gguf_dtype_info(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes) {
    uint32_t be, bb;
    switch (type) {
    case GGUF_DT_F32: be = 1; bb = 4; break;
    case GGUF_DT_F16: be = 1; bb = 2; break;
    case GGUF_DT_BF16: be = 1; bb = 2; break;
    case GGUF_DT_Q4_0: be = 32; bb = 18; break;
    case GGUF_DT_Q4_1: be = 32; bb = 20; break;
    case GGUF_DT_Q5_0: be = 32; bb = 22; break;
    case GGUF_DT_Q5_1: be = 32; bb = 24; break;
    case GGUF_DT_Q8_0: be = 32; bb = 34; break;
    case GGUF_DT_Q8_1: be = 32; bb = 36; break;
    case GGUF_DT_Q2_K: be = 256; bb = 84; break;
    case GGUF_DT_Q3_K: be = 256; bb = 110; break;
    case GGUF_DT_Q4_K: be = 256; bb = 144; break;
    case GGUF_DT_Q5_K: be = 256; bb = 176; break;
    case GGUF_DT_Q6_K: be = 256; bb = 210; break;
    case GGUF_DT_Q8_K: be = 256; bb = 292; break;
    case GGUF_DT_I8: be = 1; bb = 1; break;
    case GGUF_DT_I16: be = 1; bb = 2; break;
    case GGUF_DT_I32: be = 1; bb = 4; break;
    case GGUF_DT_I64: be = 1; bb = 8; break;
    case GGUF_DT_F64: be = 1; bb = 8; break;
    default: return -1;
    }
    if (block_elems) *block_elems = be;
    if (block_bytes) *block_bytes = bb;
    return 0;
}

const char *gguf_dtype_name(uint32_t type) {
    switch (type) {
    case GGUF_DT_F32: return "F32";
    case GGUF_DT_F16: return "F16";
    case GGUF_DT_BF16: return "BF16";
    case GGUF_DT_Q4_0: return "Q4_0";
    case GGUF_DT_Q4_1: return "Q4_1";
    case GGUF_DT_Q5_0: return "Q5_0";
    case GGUF_DT_Q5_1: return "Q5_1";
    case GGUF_DT_Q8_0: return "Q8_0";
    case GGUF_DT_Q8_1: return "Q8_1";
    case GGUF_DT_Q2_K: return "Q2_K";
    case GGUF_DT_Q3_K: return "Q3_K";
    case GGUF_DT_Q4_K: return "Q4_K";
    case GGUF_DT_Q5_K: return "Q5_K";
    case GGUF_DT_Q6_K: return "Q6_K";
    case GGUF_DT_Q8_K: return "Q8_K";
    case GGUF_DT_I8: return "I8";
    case GGUF_DT_I16: return "I16";
    case GGUF_DT_I32: return "I32";
    case GGUF_DT_I64: return "I64";
    case GGUF_DT_F64: return "F64";
    default: return "unknown";
    }
}

static drift_status rd_tensor(cur *c, gguf_tensor *t, uint64_t index) {
    gguf_str nm;
    drift_status st = rd_str(c, &nm, "tensor name");
    if (st) return drift_error_prefix(c->err, "tensor %" PRIu64 ": ", index);
    if (nm.n == 0 || nm.n > 4096)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor %" PRIu64 ": name length %" PRIu64 " (must be 1..4096)", c->path,
                               index, nm.n);
    t->name = util_strndup(nm.p, (size_t)nm.n);
    if (!t->name) return drift_error_set(c->err, DRIFT_ERR_NOMEM, "out of memory");
    if (strlen(t->name) != nm.n)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor %" PRIu64 ": name contains a NUL byte", c->path, index);
    if ((st = rd_u32(c, &t->n_dims, t->name))) return st;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor '%s': n_dims %u (must be 1..%d)", c->path, t->name, t->n_dims,
                               GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    uint64_t nel = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if ((st = rd_u64(c, &t->ne[d], t->name))) return st;
        if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 40))
            return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor '%s': dimension %u is %" PRIu64 " (must be 1..2^40)", c->path,
                                   t->name, d, t->ne[d]);
        if (nel > UINT64_MAX / t->ne[d] || nel * t->ne[d] > ((uint64_t)1 << 48))
            return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor '%s': element count overflows (dims too large)", c->path, t->name);
        nel *= t->ne[d];
    }
    t->n_elements = nel;
    uint32_t ty;
    if ((st = rd_u32(c, &ty, t->name))) return st;
    uint32_t be, bb;
    if (gguf_dtype_info(ty, &be, &bb))
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor '%s': type %u unknown", c->path, t->name, ty);
    t->type = (gguf_dtype)ty;
    if (t->ne[0] % be)
        return drift_error_set(c->err, DRIFT_ERR_PARSE, "%s: tensor '%s': row length %" PRIu64 " not a multiple of the %s block size %u",
                               c->path, t->name, t->ne[0], gguf_dtype_name(ty), be);
    t->n_bytes = nel / be * bb; /* nel <= 2^48, bb <= 292: no overflow */
    return rd_u64(c, &t->offset, t->name);
}

static int cmp_tensor_off(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Finds a duplicate among n names; returns it or NULL. */
static const char *find_dup(char **names, uint64_t n) {
    if (n < 2) return NULL;
    char **s = malloc((size_t)n * sizeof *s);
    if (!s) return NULL;
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_str);
    const char *dup = NULL;
    for (uint64_t i = 1; i < n && !dup; i++)
        if (!strcmp(s[i - 1], s[i])) dup = s[i];
    free(s);
    return dup;
}

static drift_status parse(gguf_file *f, drift_error *err) {
    cur c = {f->base, f->size, 0, f->path, err};
    char magic[4];
    drift_status st = rd(&c, magic, 4, "magic");
    if (st) return st;
    if (memcmp(magic, "GGUF", 4))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: bad magic %02x %02x %02x %02x (expected \"GGUF\")", f->path,
                               (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    if ((st = rd_u32(&c, &f->version, "version"))) return st;
    if (f->version != 3 && f->version != 2)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: GGUF version %u not supported (2 and 3 are)", f->path, f->version);
    uint64_t nt = 0, nkv = 0;
    if ((st = rd_u64(&c, &nt, "tensor_count")) || (st = rd_u64(&c, &nkv, "kv_count"))) return st;
    /* a KV needs >= 8 (key len) + 1 + 4 (type) + 1 bytes; a tensor info >= 8 + 1 + 4 + 8 + 4 + 8 */
    size_t rest = c.size - c.pos;
    if (nkv > rest / 14)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: kv_count %" PRIu64 " cannot fit in a file of %zu bytes", f->path, nkv, c.size);
    if (nt > rest / 33)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tensor_count %" PRIu64 " cannot fit in a file of %zu bytes", f->path, nt,
                               c.size);
    f->kv = calloc(nkv ? (size_t)nkv : 1, sizeof *f->kv);
    f->tensors = calloc(nt ? (size_t)nt : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < nkv; i++) {
        f->n_kv = i + 1;
        if ((st = rd_kv(&c, &f->kv[i], i))) return st;
    }
    f->n_kv = nkv;
    {
        char **names = malloc((nkv ? (size_t)nkv : 1) * sizeof *names);
        if (!names) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < nkv; i++) names[i] = f->kv[i].key;
        const char *dup = find_dup(names, nkv);
        free(names);
        if (dup) return drift_error_set(err, DRIFT_ERR_PARSE, "%s: key '%s' appears twice", f->path, dup);
    }
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_VT_UINT32)
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s: general.alignment has type %s (must be uint32)", f->path,
                                   gguf_vtype_name(al->type));
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)) || al->v.u > 65536)
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s: general.alignment %" PRIu64 " is not a power of two <= 65536", f->path,
                                   al->v.u);
        f->alignment = al->v.u;
    }
    for (uint64_t i = 0; i < nt; i++) {
        f->n_tensors = i + 1;
        if ((st = rd_tensor(&c, &f->tensors[i], i))) return st;
    }
    f->n_tensors = nt;
    {
        char **names = malloc((nt ? (size_t)nt : 1) * sizeof *names);
        if (!names) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < nt; i++) names[i] = f->tensors[i].name;
        const char *dup = find_dup(names, nt);
        free(names);
        if (dup) return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tensor '%s' appears twice", f->path, dup);
    }
    uint64_t ds = (c.pos + f->alignment - 1) / f->alignment * f->alignment;
    f->data_offset = ds;
    if (nt == 0) return DRIFT_OK;
    if (ds > f->size)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: data section starts at %" PRIu64 ", past end of file (size %zu)", f->path, ds,
                               f->size);
    gguf_tensor **order = malloc((size_t)nt * sizeof *order);
    if (!order) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < nt; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)nt, sizeof *order, cmp_tensor_off);
    uint64_t avail = f->size - ds, prev_end = 0;
    const char *prev_name = NULL;
    for (uint64_t i = 0; i < nt; i++) {
        gguf_tensor *t = order[i];
        if (t->offset % f->alignment) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: tensor '%s': offset %" PRIu64 " not a multiple of the alignment %" PRIu64,
                                 f->path, t->name, t->offset, f->alignment);
            break;
        }
        if (t->offset > avail || t->n_bytes > avail - t->offset) {
            st = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s: tensor '%s': data [%" PRIu64 ", %" PRIu64 ") past end of file (size %zu)", f->path, t->name,
                                 ds + t->offset, ds + t->offset + t->n_bytes, f->size);
            break;
        }
        if (prev_name && t->offset < prev_end) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: tensor '%s' at data offset %" PRIu64 " overlaps tensor '%s' (ends at %" PRIu64 ")",
                                 f->path, t->name, t->offset, prev_name, prev_end);
            break;
        }
        prev_end = t->offset + t->n_bytes;
        prev_name = t->name;
        t->data = f->base + ds + t->offset;
    }
    free(order);
    return st;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (uint64_t i = 0; i < f->n_kv && f->kv; i++) {
        free(f->kv[i].key);
        free(f->kv[i].arr_str);
    }
    free(f->kv);
    for (uint64_t i = 0; i < f->n_tensors && f->tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    if (f->mapped && f->base) munmap((void *)f->base, f->size);
    free(f->path);
    free(f);
}

static drift_status finish_open(gguf_file *f, gguf_file **out, drift_error *err) {
    drift_status st = parse(f, err);
    if (st) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return DRIFT_OK;
}

drift_status gguf_open_memory(const void *data, size_t size, gguf_file **out, drift_error *err) {
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    f->base = data;
    f->size = size;
    f->path = util_strdup("<memory>");
    if (!f->path) return gguf_close(f), drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return finish_open(f, out, err);
}

drift_status gguf_open(const char *path, gguf_file **out, drift_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return drift_error_set(err, errno == ENOENT ? DRIFT_ERR_NOT_FOUND : DRIFT_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return drift_error_set(err, DRIFT_ERR_IO, "%s: not a regular file", path);
    }
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) return close(fd), drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    f->path = util_strdup(path);
    f->size = (size_t)sb.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            gguf_close(f);
            return drift_error_set(err, DRIFT_ERR_IO, "%s: mmap: %s", path, strerror(errno));
        }
        f->base = m;
        f->mapped = 1;
    } else {
        f->base = (const uint8_t *)"";
    }
    close(fd);
    if (!f->path) return gguf_close(f), drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return finish_open(f, out, err);
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!strcmp(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static int is_uint(gguf_vtype t) {
    return t == GGUF_VT_UINT8 || t == GGUF_VT_UINT16 || t == GGUF_VT_UINT32 || t == GGUF_VT_UINT64;
}
static int is_sint(gguf_vtype t) {
    return t == GGUF_VT_INT8 || t == GGUF_VT_INT16 || t == GGUF_VT_INT32 || t == GGUF_VT_INT64;
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (is_uint(kv->type)) {
        if (kv->v.u > INT64_MAX) return -1;
        *out = (int64_t)kv->v.u;
        return 0;
    }
    if (is_sint(kv->type)) {
        *out = kv->v.i;
        return 0;
    }
    return -1;
}

int gguf_get_float(const gguf_file *f, const char *key, double *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return -1;
    if (kv->type == GGUF_VT_FLOAT32 || kv->type == GGUF_VT_FLOAT64) *out = kv->v.f;
    else if (is_uint(kv->type)) *out = (double)kv->v.u;
    else if (is_sint(kv->type)) *out = (double)kv->v.i;
    else return -1;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_VT_BOOL) return -1;
    *out = (int)kv->v.u;
    return 0;
}

char *gguf_get_string(const gguf_file *f, const char *key) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_VT_STRING) return NULL;
    return util_strndup(kv->s.p, (size_t)kv->s.n);
}

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    const uint8_t *p = kv->arr_data + i * gguf_vtype_size(kv->arr_type);
    switch (kv->arr_type) {
    case GGUF_VT_FLOAT32: { float x; memcpy(&x, p, 4); return x; }
    case GGUF_VT_FLOAT64: { double x; memcpy(&x, p, 8); return x; }
    default: return (double)gguf_arr_int(kv, i);
    }
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    const uint8_t *p = kv->arr_data + i * gguf_vtype_size(kv->arr_type);
    switch (kv->arr_type) {
    case GGUF_VT_UINT8: case GGUF_VT_BOOL: return p[0];
    case GGUF_VT_INT8: return (int8_t)p[0];
    case GGUF_VT_UINT16: { uint16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_VT_INT16: { int16_t x; memcpy(&x, p, 2); return x; }
    case GGUF_VT_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_VT_INT32: { int32_t x; memcpy(&x, p, 4); return x; }
    case GGUF_VT_UINT64: { uint64_t x; memcpy(&x, p, 8); return (int64_t)x; }
    case GGUF_VT_INT64: { int64_t x; memcpy(&x, p, 8); return x; }
    case GGUF_VT_FLOAT32: { float x; memcpy(&x, p, 4); return (int64_t)x; }
    case GGUF_VT_FLOAT64: { double x; memcpy(&x, p, 8); return (int64_t)x; }
    default: return 0;
    }
}

float gguf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gguf_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* m * 2^(e-150) in units of 2^-24 = m >> (126 - e); 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xfff + ((ax >> 13) & 1); /* round to nearest even on the 13 dropped bits */
    r -= (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

float gguf_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gguf_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* k-quants (super-blocks of 256 = 8 sub-blocks of 32 or 16 of 16), as ggml lays them out:
 *   Q4_K (144 B): f16 d, f16 dmin, u8 scales[12] (6-bit scale and min per sub-block), u8 qs[128]
 *                 x = d * sc * nib - dmin * m; 64 elements per 32 qs bytes: low nibbles then high
 *   Q5_K (176 B): as Q4_K plus u8 qh[32] after the scales: bit (2j, 2j+1) of qh[l] is the 5th bit
 *   Q6_K (210 B): u8 ql[128], u8 qh[64], i8 scales[16], f16 d; x = d * sc[16-block] * (q6 - 32) */
static void k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static float rd_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return gguf_f16_to_f32(h);
}

static void dec_q4_k(const uint8_t *b, float *y) {
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *scales = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        uint8_t sc, m;
        k_scale_min(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        k_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void dec_q5_k(const uint8_t *b, float *y) {
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
        uint8_t sc, m;
        k_scale_min(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        k_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
}

static void dec_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd_f16(b + 208);
    for (int nb = 0; nb < 256; nb += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[nb + l] = d * (float)sc[is] * (float)q1;
            y[nb + l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[nb + l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[nb + l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
    }
}

/* The legacy blocks of 32 beside Q4_0 / Q8_0, as ggml lays them out (the
 * element j < 16 from the low nibble of qs[j], j + 16 from its high nibble;
 * Q5's fifth bit of element i is bit i of the little-endian u32 qh):
 *   Q4_1 (20 B): f16 d, f16 m, u8 qs[16]            x = nib * d + m
 *   Q5_0 (22 B): f16 d, u8 qh[4], u8 qs[16]         x = (q5 - 16) * d
 *   Q5_1 (24 B): f16 d, f16 m, u8 qh[4], u8 qs[16]  x = q5 * d + m
 * Each product and sum is rounded to float on its own (no contraction in
 * ISO C11), as ggml's reference dequantizers compute them. */
static void dec_q4_1(const uint8_t *b, float *y) {
    float d = rd_f16(b), m = rd_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0xF) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static uint32_t rd_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void dec_q5(const uint8_t *qh4, const uint8_t *qs, float d, float m, int has_min, float *y) {
    uint32_t qh = rd_u32le(qh4);
    for (int j = 0; j < 16; j++) {
        int q0 = (qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
        int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        if (has_min) {
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        } else {
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

drift_status gguf_tensor_to_f32(const gguf_tensor *t, uint64_t first, uint64_t n, float *dst, drift_error *err) {
    uint32_t be, bb;
    if (gguf_dtype_info(t->type, &be, &bb))
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "tensor '%s': unknown type %u", t->name, t->type);
    if (first > t->n_elements || n > t->n_elements - first || first % be || n % be)
        return drift_error_set(err, DRIFT_ERR_INVALID, "tensor '%s': range [%" PRIu64 ", +%" PRIu64 ") bad for %" PRIu64 " elements",
                               t->name, first, n, t->n_elements);
    const uint8_t *p = (const uint8_t *)t->data + first / be * bb;
    switch (t->type) {
    case GGUF_DT_F32:
        memcpy(dst, p, n * 4);
        return DRIFT_OK;
    case GGUF_DT_F16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = gguf_f16_to_f32(h);
        }
        return DRIFT_OK;
    case GGUF_DT_BF16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = gguf_bf16_to_f32(h);
        }
        return DRIFT_OK;
    case GGUF_DT_Q8_0:
        for (uint64_t b = 0; b < n / 32; b++, p += 34) {
            uint16_t h;
            memcpy(&h, p, 2);
            float d = gguf_f16_to_f32(h);
            for (int j = 0; j < 32; j++) dst[b * 32 + j] = (float)(int8_t)p[2 + j] * d;
        }
        return DRIFT_OK;
    case GGUF_DT_Q4_0:
        for (uint64_t b = 0; b < n / 32; b++, p += 18) {
            uint16_t h;
            memcpy(&h, p, 2);
            float d = gguf_f16_to_f32(h);
            for (int j = 0; j < 16; j++) {
                dst[b * 32 + j] = (float)((p[2 + j] & 0x0f) - 8) * d;
                dst[b * 32 + j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
            }
        }
        return DRIFT_OK;
    case GGUF_DT_Q4_1:
        for (uint64_t b = 0; b < n / 32; b++, p += 20) dec_q4_1(p, dst + b * 32);
        return DRIFT_OK;
    case GGUF_DT_Q5_0:
        for (uint64_t b = 0; b < n / 32; b++, p += 22) dec_q5(p + 2, p + 6, rd_f16(p), 0.0f, 0, dst + b * 32);
        return DRIFT_OK;
    case GGUF_DT_Q5_1:
        for (uint64_t b = 0; b < n / 32; b++, p += 24) dec_q5(p + 4, p + 8, rd_f16(p), rd_f16(p + 2), 1, dst + b * 32);
        return DRIFT_OK;
    case GGUF_DT_Q4_K:
        for (uint64_t b = 0; b < n / 256; b++, p += 144) dec_q4_k(p, dst + b * 256);
        return DRIFT_OK;
    case GGUF_DT_Q5_K:
        for (uint64_t b = 0; b < n / 256; b++, p += 176) dec_q5_k(p, dst + b * 256);
        return DRIFT_OK;
    case GGUF_DT_Q6_K:
        for (uint64_t b = 0; b < n / 256; b++, p += 210) dec_q6_k(p, dst + b * 256);
        return DRIFT_OK;
    default:
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                               "tensor '%s': type %s is not decoded by this engine (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K are)",
                               t->name, gguf_dtype_name(t->type));
    }
}
