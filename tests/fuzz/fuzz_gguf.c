/* fuzz_gguf.c - fuzz target for the GGUF reader (parse from memory), then
 * walk what was accepted: every KV getter, every tensor decoded, so that any
 * size the validator let through is exercised; and when the file carries a
 * tokenizer, load it and encode/decode a fixed string (tokenizer metadata is
 * outside data too) and the fuzzed text.
 *
 * Fuzzed text: the bytes after the file's last tensor (or after the header
 * when it has none), which the reader ignores: seed_text_*.gguf are the
 * tokenizer seeds with text appended (special tokens, invalid UTF-8, long
 * runs), so mutations of the tail reach the tokenizer with a vocabulary
 * that loads. At most TEXT_MAX bytes of it, encoded with and without
 * special-token parsing, then decoded. Checked besides not crashing: every
 * id is in the vocabulary and decodes, and a decode returns text.
 * Seeds: corpus/fuzz_gguf/. */
#include <stdint.h>
#include <stdlib.h>

#include "model/gguf.h"
#include "model/tokenizer.h"

#define TEXT_MAX 2048

/* Encodes text both ways and decodes the ids; abort() on a broken promise. */
static void round_trip(const drift_tokenizer *tk, const char *text, size_t len) {
    drift_error err;
    int nv = tok_n_vocab(tk);
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tok_encode(tk, text, len, special, special, &ids, &n, &err) != DRIFT_OK) continue;
        util_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= nv) abort();
            if (tok_decode_token(tk, ids[i], 1, &b) != 0) abort();
        }
        buf_free(&b);
        size_t dl = 0;
        char *d = tok_decode(tk, ids, n, 1, &dl);
        if (!d) abort();
        free(d);
        free(ids);
    }
}

/* Offset of the bytes after the last tensor's data (after the header when
 * there is none); size when nothing follows. */
static size_t text_offset(const gguf_file *f) {
    uint64_t end = f->data_offset;
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        uint64_t e = f->data_offset + f->tensors[t].offset + f->tensors[t].n_bytes;
        if (e > end) end = e;
    }
    return end < f->size ? (size_t)end : f->size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = NULL;
    drift_error err;
    if (gguf_open_memory(data, size, &f, &err) != DRIFT_OK) return 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        int64_t iv;
        double dv;
        int bv;
        gguf_get_int(f, kv->key, &iv);
        gguf_get_float(f, kv->key, &dv);
        gguf_get_bool(f, kv->key, &bv);
        free(gguf_get_string(f, kv->key));
        if (kv->type == GGUF_VT_ARRAY && kv->arr_type != GGUF_VT_STRING && kv->arr_type != GGUF_VT_ARRAY)
            for (uint64_t j = 0; j < kv->arr_n && j < 64; j++) (void)gguf_arr_float(kv, j);
        if (kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_STRING)
            for (uint64_t j = 0; j < kv->arr_n; j++) (void)(kv->arr_str[j].n ? kv->arr_str[j].p[kv->arr_str[j].n - 1] : 0);
    }
    for (uint64_t t = 0; t < f->n_tensors; t++) {
        const gguf_tensor *ts = &f->tensors[t];
        if (ts->n_elements > (1u << 22)) continue;
        float *tmp = malloc(ts->n_elements * sizeof(float));
        if (tmp) gguf_tensor_to_f32(ts, 0, ts->n_elements, tmp, &err);
        free(tmp);
    }
    drift_tokenizer *tk;
    if (tok_load(f, &tk, &err) == DRIFT_OK) {
        static const char text[] = "Hello world 123 <|im_end|> \xe4\xb8\xad\xff";
        int32_t *ids;
        size_t n;
        if (tok_encode(tk, text, sizeof text - 1, 1, 1, &ids, &n, &err) == DRIFT_OK) {
            free(tok_decode(tk, ids, n, 1, NULL));
            free(ids);
        }
        size_t at = text_offset(f), len = size - at;
        if (len > TEXT_MAX) len = TEXT_MAX;
        if (len) round_trip(tk, (const char *)data + at, len);
        tok_free(tk);
    }
    gguf_close(f);
    return 0;
}
