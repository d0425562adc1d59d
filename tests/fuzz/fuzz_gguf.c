/* fuzz_gguf.c - fuzz target for the GGUF reader (parse from memory), then
 * walk what was accepted: every KV getter, every tensor decoded, so that any
 * size the validator let through is exercised; and when the file carries a
 * tokenizer, load it and encode/decode a string (tokenizer metadata is
 * outside data too). Seeds: corpus/fuzz_gguf/. */
#include <stdint.h>
#include <stdlib.h>

#include "model/gguf.h"
#include "model/tokenizer.h"

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
        tok_free(tk);
    }
    gguf_close(f);
    return 0;
}
