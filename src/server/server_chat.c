/* server_chat.c - the prompt tokens of a chat request: its messages through
 * the served model's built-in template (drift_model_info.chat_template,
 * chosen at load from the vocabulary; src/model/model_text.c).
 *
 * One user message with the generation prompt (what the embedded target's
 * chat api sends) goes through drift_model_chat_tokens itself, so serve and
 * the embedded target feed the model the same tokens. Anything else
 * (a system prompt, earlier turns, an assistant turn left open for
 * scoring: vLLM's continue_final_message) is rendered turn by turn with the
 * same markers:
 *
 *   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n ...  [<|im_start|>assistant\n]
 *   llama3  <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
 *           [<|start_header_id|>assistant<|end_header_id|>\n\n]
 *   phi3    <|ROLE|>\nCONTENT<|end|>\n ...  [<|assistant|>\n]; a vocabulary
 *           without <|system|> gets the system prompt at the head of the
 *           next user message, a blank line between (tokenized apart, as
 *           drift_model_chat_system_tokens does)
 *   inst    [INST] SYSTEM\n\nUSER [/INST] ASSISTANT [INST] USER [/INST]
 *           (Llama-2's form as text, the system prompt inside the first
 *           [INST] in its <<SYS>> block; the turns are not closed by
 *           </s><s> tokens: a simplification, stated)
 *   none    the contents joined by blank lines
 * The model's default BOS first; markers parsed as special tokens; every
 * content with its markers neutralised (drift_markers_neutralise) and
 * never parsed, as drift_model_chat_tokens does. "developer" counts as
 * "system"; "tool" messages are refused (no tool calling here). With
 * continue_final_message the last (assistant) turn is left open: no end
 * marker after its content. */
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/util.h"

typedef struct idv {
    int32_t *v;
    size_t n, cap;
    int first; /* nothing added yet: the next piece gets the model's BOS */
} idv;

/* Appends the tokens of text (special: markers parsed; else neutralised and
 * plain). 0, or -1 with e set. */
static int add(const drift_model *m, idv *o, const char *text, int special, srv_error *e) {
    char *clean = special ? NULL : drift_markers_neutralise(text, strlen(text), DRIFT_MARKER_SET_CHAT, NULL);
    if (!special && !clean) return srv_error_set(e, 500, NULL, NULL, "out of memory");
    const char *t = special ? text : clean;
    int32_t *ids = NULL;
    size_t n = 0;
    drift_error err;
    drift_status st = drift_model_tokenize(m, t, strlen(t), o->first ? -1 : 0, special, &ids, &n, &err);
    free(clean);
    if (st) return srv_error_set(e, 400, "messages", "invalid_value", "cannot tokenize the messages: %s", err.msg);
    o->first = 0;
    if (o->n + n > o->cap) {
        size_t nc = (o->n + n) * 2 + 16;
        int32_t *v = realloc(o->v, nc * sizeof *v);
        if (!v) {
            free(ids);
            return srv_error_set(e, 500, NULL, NULL, "out of memory");
        }
        o->v = v;
        o->cap = nc;
    }
    if (n) memcpy(o->v + o->n, ids, n * sizeof *ids);
    o->n += n;
    free(ids);
    return 0;
}

/* 1 when text is one special token of m's vocabulary. */
static int has_special(const drift_model *m, const char *text) {
    int32_t *ids = NULL;
    size_t n = 0;
    drift_error err;
    if (drift_model_tokenize(m, text, strlen(text), 0, 1, &ids, &n, &err)) return 0;
    free(ids);
    return n == 1;
}

static const char *role_of(const srv_message *m) {
    return !strcmp(m->role, "developer") ? "system" : m->role;
}

/* One marker piece: pre + role + post, parsed for special tokens. */
static int add_marker(const drift_model *m, idv *o, srv_error *e, const char *pre, const char *role, const char *post) {
    char *s = util_asprintf("%s%s%s", pre, role, post);
    if (!s) return srv_error_set(e, 500, NULL, NULL, "out of memory");
    int rc = add(m, o, s, 1, e);
    free(s);
    return rc;
}

static int render_turns(const drift_model *m, const char *tpl, const srv_request *rq, idv *o, srv_error *e) {
    size_t n = rq->n_messages;
    int open_last = rq->continue_final_message;
    int inst = !strcmp(tpl, "inst"), none = !strcmp(tpl, "none");
    if (inst || none) { /* plain text, one piece */
        util_buf b = {0};
        int bad = 0, in_inst = 0;
        for (size_t i = 0; i < n && !bad; i++) {
            const char *r = role_of(&rq->messages[i]);
            char *c = drift_markers_neutralise(rq->messages[i].content, strlen(rq->messages[i].content),
                                               DRIFT_MARKER_SET_CHAT, NULL);
            if (!c) bad = 1;
            else if (none) bad = buf_printf(&b, "%s%s", i ? "\n\n" : "", c) != 0;
            else if (!strcmp(r, "system")) {
                bad = buf_printf(&b, "%s<<SYS>>\n%s\n<</SYS>>\n\n", in_inst ? "" : b.len ? " [INST] " : "[INST] ", c) != 0;
                in_inst = 1;
            } else if (!strcmp(r, "user")) {
                bad = buf_printf(&b, "%s%s [/INST]", in_inst ? "" : b.len ? " [INST] " : "[INST] ", c) != 0;
                in_inst = 0;
            } else {
                bad = buf_printf(&b, " %s", c) != 0;
            }
            free(c);
        }
        if (!bad && inst && in_inst) bad = buf_printf(&b, " [/INST]") != 0;
        (void)open_last; /* nothing closes a turn in these forms */
        int rc = bad ? srv_error_set(e, 500, NULL, NULL, "out of memory") : 0;
        if (!rc) {
            /* markers here are plain text (the content was neutralised) */
            int32_t *ids = NULL;
            size_t k = 0;
            drift_error err;
            if (drift_model_tokenize(m, b.data ? b.data : "", b.len, -1, 0, &ids, &k, &err))
                rc = srv_error_set(e, 400, "messages", "invalid_value", "cannot tokenize the messages: %s", err.msg);
            else {
                o->v = ids;
                o->n = o->cap = k;
                o->first = 0;
            }
        }
        buf_free(&b);
        return rc;
    }
    int chatml = !strcmp(tpl, "chatml"), llama3 = !strcmp(tpl, "llama3");
    int fold_system = !chatml && !llama3 && !has_special(m, "<|system|>");
    char *pending = NULL; /* a folded system prompt, for the next user message */
    for (size_t i = 0; i < n; i++) {
        const char *r = role_of(&rq->messages[i]);
        int last_open = open_last && i + 1 == n;
        if (fold_system && !strcmp(r, "system")) {
            if (i + 1 < n) { /* held for the next user message */
                char *p2 = pending ? util_asprintf("%s\n\n%s", pending, rq->messages[i].content)
                                   : util_strdup(rq->messages[i].content);
                free(pending);
                if (!(pending = p2)) return srv_error_set(e, 500, NULL, NULL, "out of memory");
                continue;
            }
            r = "user"; /* nothing follows: a turn of its own */
        }
        int rc = chatml   ? add_marker(m, o, e, "<|im_start|>", r, "\n")
                 : llama3 ? add_marker(m, o, e, "<|start_header_id|>", r, "<|end_header_id|>\n\n")
                          : add_marker(m, o, e, "<|", r, "|>\n");
        if (!rc && pending && !strcmp(r, "user")) { /* the text, then the blank line: two pieces, as the engine's */
            rc = add(m, o, pending, 0, e);
            if (!rc) rc = add(m, o, "\n\n", 0, e);
            free(pending);
            pending = NULL;
        }
        if (!rc) rc = add(m, o, rq->messages[i].content, 0, e);
        if (!rc && !last_open) rc = add(m, o, chatml ? "<|im_end|>\n" : llama3 ? "<|eot_id|>" : "<|end|>\n", 1, e);
        if (rc) {
            free(pending);
            return rc;
        }
    }
    if (pending) {
        free(pending);
        return srv_error_set(e, 400, "messages", "invalid_value",
                             "this model's template has no system turn: a system message needs a user message after it");
    }
    if (rq->add_generation_prompt)
        return add(m, o,
                   chatml   ? "<|im_start|>assistant\n"
                   : llama3 ? "<|start_header_id|>assistant<|end_header_id|>\n\n"
                            : "<|assistant|>\n",
                   1, e);
    return 0;
}

int srv_chat_tokens(const drift_model *m, const srv_request *rq, int32_t **ids, size_t *n, srv_error *e) {
    for (size_t i = 0; i < rq->n_messages; i++)
        if (!strcmp(rq->messages[i].role, "tool"))
            return srv_error_set(e, 400, "messages", "unsupported_value",
                                 "messages[%zu] is a tool message: tool calling is not supported", i);
    if (rq->n_messages == 1 && !strcmp(rq->messages[0].role, "user") && rq->add_generation_prompt) {
        drift_error err;
        if (drift_model_chat_tokens(m, rq->messages[0].content, ids, n, &err))
            return srv_error_set(e, 400, "messages", "invalid_value", "cannot tokenize the message: %s", err.msg);
        return 0;
    }
    idv o = {.first = 1};
    if (render_turns(m, drift_model_get_info(m)->chat_template, rq, &o, e)) {
        free(o.v);
        return -1;
    }
    *ids = o.v ? o.v : malloc(sizeof(int32_t));
    *n = o.n;
    if (!*ids) return srv_error_set(e, 500, NULL, NULL, "out of memory");
    return 0;
}
