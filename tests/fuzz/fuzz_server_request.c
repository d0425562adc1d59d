/* fuzz_server_request.c - fuzzes the server's request parser/validator
 * (srv_request_parse) and its UTF-8 cleaner. The first byte picks the
 * endpoint (completions, chat, embeddings); the rest is the body. Every
 * outcome must be a request within the limits or a 4xx/5xx error with a
 * message, never a crash or a leak; the error body must be valid JSON in the
 * OpenAI shape, and the cleaner's output must be valid UTF-8 (jansson
 * accepts it) whatever bytes go in. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    srv_endpoint ep = (srv_endpoint)(data[0] % 3);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    srv_limits lim = {8, 4096};
    srv_request r;
    srv_error e;
    memset(&e, 0, sizeof e);
    if (srv_request_parse(ep, body, len, &lim, &r, &e) == 0) {
        if (ep == SRV_EP_CHAT) {
            if (r.n_messages == 0 || !r.messages) abort();
            for (size_t i = 0; i < r.n_messages; i++)
                if (!r.messages[i].role || !r.messages[i].content) abort();
        } else {
            if (r.n_prompts == 0 || !r.prompts) abort();
            for (size_t i = 0; i < r.n_prompts; i++)
                if (!r.prompts[i]) abort();
        }
        if (ep != SRV_EP_EMBEDDINGS) {
            if (r.n < 1 || r.n > lim.max_n) abort();
            /* 0 only when the prompt is scored (prompt_logprobs, echo) */
            int scores = r.prompt_logprobs >= 0 || r.echo;
            if (r.params.max_tokens < (scores ? 0 : 1) || r.params.max_tokens > lim.max_tokens_limit) abort();
            if (r.prompt_logprobs < -1 || r.prompt_logprobs > SRV_MAX_TOP) abort();
            if (scores && r.stream) abort();
            if (ep == SRV_EP_CHAT && r.echo) abort();
            if (r.continue_final_message &&
                (r.add_generation_prompt || strcmp(r.messages[r.n_messages - 1].role, "assistant"))) abort();
            if (r.params.n_stop < 0 || r.params.n_stop > SRV_MAX_STOP) abort();
            for (int i = 0; i < r.params.n_stop; i++)
                if (!r.params.stop[i] || !r.params.stop[i][0]) abort();
            if (r.params.temperature < 0 || r.params.top_p <= 0 || r.params.top_p > 1) abort();
            if (r.top_logprobs < 0 || r.top_logprobs > SRV_MAX_TOP) abort();
        }
        srv_request_free(&r);
    } else {
        if (e.http_status < 400 || !e.message[0]) abort();
        if (r.prompts || r.messages || r.model) abort(); /* nothing left owned */
        char *js = srv_error_json(&e);
        json_t *o = js ? json_loads(js, 0, NULL) : NULL;
        if (!json_is_string(json_object_get(json_object_get(o, "error"), "message"))) abort();
        json_decref(o);
        free(js);
    }
    /* the cleaner on the raw bytes */
    char *c = util_utf8_clean(body, len);
    if (!c) abort();
    json_t *s = json_string(c);
    if (!s) abort();
    json_decref(s);
    free(c);
    return 0;
}
