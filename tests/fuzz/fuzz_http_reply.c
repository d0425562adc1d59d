/* fuzz_http_reply.c - fuzzes the HTTP target's reply side: the reply parser
 * of both APIs (text, usage, finish_reason, logprobs normalisation), the
 * error-message extractor and the embeddings parser. The first byte picks
 * the API and the embeddings count; the rest is the body. Every outcome must
 * be a result or a DRIFT_ERR_PARSE, never a crash or a leak; a success must
 * give text and, when present, logprobs that are a JSON array. The body is
 * also fed to the reply cap (eng_http_body_append) in chunks its bytes
 * choose, under a cap the first byte chooses: what it keeps is a prefix of
 * the body, never past the cap, in a buffer never past cap + 1. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/http_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned sel = data[0];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    drift_answer r;
    memset(&r, 0, sizeof r);
    drift_error err = {0};
    drift_api api = (sel & 1) ? DRIFT_API_CHAT : DRIFT_API_COMPLETIONS;
    drift_status st = eng_http_parse_reply(api, body, len, &r, &err);
    if (st == DRIFT_OK) {
        if (!r.text) abort();
        if (r.logprobs_json) {
            json_t *a = json_loads(r.logprobs_json, 0, NULL);
            if (!json_is_array(a)) abort();
            json_decref(a);
        }
    } else if (r.text || r.logprobs_json || r.finish_reason || err.msg[0] == '\0') {
        abort();
    }
    drift_answer_clear(&r);

    char msg[256];
    eng_http_error_message(body, len, msg, sizeof msg);
    if (strlen(msg) >= sizeof msg) abort();

    float *vecs = NULL;
    int dim = 0;
    size_t n = (sel >> 1) & 7;
    if (eng_http_parse_embeddings(body, len, n, &vecs, &dim, &err) == DRIFT_OK) {
        if (n > 0 && (!vecs || dim <= 0)) abort();
    } else if (vecs) {
        abort();
    }
    free(vecs);

    util_buf b = {0};
    size_t cap = (size_t)sel * 7, off = 0;
    int over = 0;
    while (off < len && !over) {
        size_t step = 1 + (unsigned char)body[off] % 61;
        if (step > len - off) step = len - off;
        int rc = eng_http_body_append(&b, body + off, step, cap);
        if (rc < 0) abort();
        over = rc == 1;
        if (!over) off += step;
        if (b.len != off || b.len > cap || (b.data && (b.cap > cap + 1 || memcmp(b.data, body, b.len)))) abort();
        if (over && off + step <= cap) abort();
    }
    buf_free(&b);
    return 0;
}
