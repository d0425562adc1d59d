/* gguf.h - GGUF v3 (llama.cpp's model file format) reader and writer. Internal.
 *
 * Layout (little-endian, ggml docs/gguf.md):
 *
 *   "GGUF" u32 version (3; 2 accepted) u64 n_tensors u64 n_kv
 *   n_kv x  { string key ; u32 value_type ; value }
 *   n_tensors x { string name ; u32 n_dims ; u64 ne[n_dims] ; u32 ggml_type ; u64 offset }
 *   zero padding to `general.alignment` (u32, default 32)
 *   tensor data: each tensor at data_start + offset (offset % alignment == 0)
 *
 *   string = u64 len + bytes (no NUL); array = u32 elem_type + u64 count + elems
 *   (elements may be strings or arrays: nested).
 *
 * The reader maps the file (or takes a caller's buffer) and validates every
 * count, length, shape, type and offset against the size before trusting it;
 * a bad file is DRIFT_ERR_PARSE with a message naming the field. Strings and
 * tensor data point into the mapping; keys and names are copied NUL-terminated.
 * ne[0] is the contiguous dimension: a weight W of shape (out, in) in PyTorch
 * terms is stored as ne = {in, out}, row r at data + r * row_bytes. */
#ifndef DRIFT_GGUF_H
#define DRIFT_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"

/* Metadata value types (gguf_metadata_value_type). */
typedef enum gguf_vtype {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT = 13
} gguf_vtype;

/* Bytes of one scalar of value type t (1, 2, 4 or 8); 0 for STRING, ARRAY
 * and unknown types. */
size_t gguf_vtype_size(uint32_t t);

/* Tensor data types (ggml_type ids). Those the engine can decode are marked. */
typedef enum gguf_dtype {
    GGUF_DT_F32 = 0,   /* decoded */
    GGUF_DT_F16 = 1,   /* decoded */
    GGUF_DT_Q4_0 = 2,  /* decoded: block 32 = f16 d + 16 bytes of nibbles, x = (q - 8) * d */
    GGUF_DT_Q4_1 = 3,  /* decoded (to f32 at load, as the k-quants) */
    GGUF_DT_Q5_0 = 6,  /* decoded */
    GGUF_DT_Q5_1 = 7,  /* decoded */
    GGUF_DT_Q8_0 = 8,  /* decoded: block 32 = f16 d + 32 int8, x = q * d */
    GGUF_DT_Q8_1 = 9,
    GGUF_DT_Q2_K = 10,
    GGUF_DT_Q3_K = 11,
    GGUF_DT_Q4_K = 12, /* decoded (to f32 at load: the kernels have no k-quant format) */
    GGUF_DT_Q5_K = 13, /* decoded */
    GGUF_DT_Q6_K = 14, /* decoded */
    GGUF_DT_Q8_K = 15,
    GGUF_DT_I8 = 24,
    GGUF_DT_I16 = 25,
    GGUF_DT_I32 = 26,
    GGUF_DT_I64 = 27,
    GGUF_DT_F64 = 28,
    GGUF_DT_BF16 = 30  /* decoded */
} gguf_dtype;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_str {
    const char *p; /* into the mapping (not NUL-terminated) */
    uint64_t n;
} gguf_str;

typedef struct gguf_kv {
    char *key;             /* owned, NUL-terminated */
    gguf_vtype type;
    union {
        uint64_t u;        /* UINT8..UINT64, BOOL */
        int64_t i;         /* INT8..INT64 */
        double f;          /* FLOAT32, FLOAT64 */
    } v;
    gguf_str s;            /* STRING */
    gguf_vtype arr_type;   /* ARRAY: element type */
    uint64_t arr_n;        /* ARRAY: element count */
    const uint8_t *arr_data; /* ARRAY of fixed-size scalars: raw little-endian elements */
    gguf_str *arr_str;     /* ARRAY of STRING: owned table of arr_n strings */
} gguf_kv;

typedef struct gguf_tensor {
    char *name;            /* owned */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1; ne[0] contiguous */
    gguf_dtype type;
    uint64_t offset;       /* relative to the data section */
    uint64_t n_elements;
    uint64_t n_bytes;
    const void *data;      /* into the mapping */
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *base;
    size_t size;
    int mapped;            /* 1 = we mmap'd it and unmap on close */
    char *path;            /* owned; "<memory>" for buffers */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;  /* start of the tensor data section */
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
} gguf_file;

/* Maps and validates PATH. On success *out is a new file (gguf_close it);
 * on failure *out is NULL and err names the problem (DRIFT_ERR_IO for an
 * unreadable file, DRIFT_ERR_PARSE for a malformed one). */
drift_status gguf_open(const char *path, gguf_file **out, drift_error *err);

/* Same from a buffer the caller keeps alive until gguf_close. */
drift_status gguf_open_memory(const void *data, size_t size, gguf_file **out, drift_error *err);

void gguf_close(gguf_file *f);

/* Lookups (NULL when absent). */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters: 0 = found and convertible, -1 = absent or wrong type.
 * Integers of any width/sign convert (range-checked for get_int);
 * floats accept FLOAT32/FLOAT64 and integers. */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_float(const gguf_file *f, const char *key, double *out);
int gguf_get_bool(const gguf_file *f, const char *key, int *out);
/* Returns a malloc'd NUL-terminated copy, or NULL. */
char *gguf_get_string(const gguf_file *f, const char *key);
/* Array element i of a numeric array as double / int64 (no bounds check
 * beyond i < arr_n, which the caller guarantees). */
double gguf_arr_float(const gguf_kv *kv, uint64_t i);
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);

/* Type facts. gguf_dtype_info returns 0 for known types (block size in
 * elements, bytes per block), -1 for unknown ids. */
int gguf_dtype_info(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);
const char *gguf_dtype_name(uint32_t type);
const char *gguf_vtype_name(uint32_t type);

/* Decodes `n` elements starting at element `first` (must be a multiple of the
 * block size) of tensor T into dst as float. DRIFT_ERR_UNSUPPORTED for types
 * the engine does not decode (k-quants etc.), naming the tensor. */
drift_status gguf_tensor_to_f32(const gguf_tensor *t, uint64_t first, uint64_t n, float *dst, drift_error *err);

/* IEEE half / bfloat16 bit conversions used by the decoder and writer. */
float gguf_f16_to_f32(uint16_t h);
uint16_t gguf_f32_to_f16(float f);   /* round to nearest even */
float gguf_bf16_to_f32(uint16_t h);
uint16_t gguf_f32_to_bf16(float f);  /* round to nearest even */

/* ---- writer (gguf_write.c) ----
 * Builds a file in memory: KVs in call order, tensors in call order with data
 * aligned to `alignment` (general.alignment is written when != 32). */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
void gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment);
int gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_add_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_add_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_add_f64(gguf_writer *w, const char *key, double v);
int gguf_writer_add_bool(gguf_writer *w, const char *key, int v);
int gguf_writer_add_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_add_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_add_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_add_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_add_string(gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size scalars (elem_type not STRING/ARRAY), raw little-endian. */
int gguf_writer_add_array(gguf_writer *w, const char *key, gguf_vtype elem_type, const void *data, uint64_t n);
int gguf_writer_add_string_array(gguf_writer *w, const char *key, const char *const *v, uint64_t n);
/* Raw KV: key, then `value_type` + pre-encoded value bytes (for nested arrays). */
int gguf_writer_add_raw(gguf_writer *w, const char *key, gguf_vtype type, const void *bytes, size_t n);
/* Tensor: data is n_bytes for its type and shape (copied). The F32-source
 * helper encodes to F32/F16/BF16/Q8_0/Q4_0/Q6_K from floats. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, gguf_dtype type, uint32_t n_dims,
                           const uint64_t *ne, const void *data, uint64_t n_bytes);
int gguf_writer_add_tensor_f32(gguf_writer *w, const char *name, gguf_dtype type, uint32_t n_dims,
                               const uint64_t *ne, const float *data);
/* Serialises; *out malloc'd. */
drift_status gguf_writer_to_memory(gguf_writer *w, uint8_t **out, size_t *len, drift_error *err);
drift_status gguf_writer_save(gguf_writer *w, const char *path, drift_error *err);

#endif
