/* shadow_stream.c - what the shadow proxy (shadow.h) decides of a request
 * and a reply by themselves: whether a request is comparable, whether it is
 * in the sample, and a streamed (SSE) reply reassembled into the reply a
 * non-streamed request gets, so the primary's streamed answer and the
 * candidate's whole one are stored in the same form. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/shadow.h"
#include "util/util.h"

int drift_shadow_comparable(const char *request_json) {
    json_t *r = json_loads(request_json ? request_json : "", 0, NULL);
    int ok = 0;
    if (json_is_object(r)) {
        const json_t *t = json_object_get(r, "temperature");
        const json_t *n = json_object_get(r, "n");
        ok = json_is_number(t) && json_number_value(t) == 0.0 &&
             (!n || json_is_null(n) || (json_is_integer(n) && json_integer_value(n) == 1));
    }
    json_decref(r);
    return ok;
}

int drift_shadow_sampled(const char *body, size_t len, double sample) {
    if (sample >= 1.0) return 1;
    if (!(sample > 0.0)) return 0;
    uint64_t h = util_fnv1a64(body, len, 0);
    double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); /* 53 bits -> [0,1) */
    return u < sample;
}

/* One tool call being reassembled. */
typedef struct tc_acc {
    long index;
    util_buf id, name, args;
    int has_name;
} tc_acc;

#define MAX_TOOL_CALLS 128

typedef struct acc {
    util_buf content, refusal, text;
    int any_content, any_refusal, any_text, any_choice, chat;
    char finish[32];
    tc_acc tc[MAX_TOOL_CALLS];
    size_t n_tc;
    int too_many;
} acc;

static int buf_add_str(util_buf *b, const json_t *s) {
    return json_is_string(s) ? buf_append(b, json_string_value(s), json_string_length(s)) : 0;
}

static int take_tool_calls(acc *a, const json_t *calls) {
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c) {
        const json_t *ix = json_object_get(c, "index");
        long index = json_is_integer(ix) ? (long)json_integer_value(ix) : (long)i;
        tc_acc *t = NULL;
        for (size_t k = 0; k < a->n_tc; k++)
            if (a->tc[k].index == index) t = &a->tc[k];
        if (!t) {
            if (a->n_tc == MAX_TOOL_CALLS) {
                a->too_many = 1;
                continue;
            }
            t = &a->tc[a->n_tc++];
            memset(t, 0, sizeof *t);
            t->index = index;
        }
        const json_t *f = json_object_get(c, "function");
        if (buf_add_str(&t->id, json_object_get(c, "id"))) return -1;
        if (json_is_string(json_object_get(f, "name"))) t->has_name = 1;
        if (buf_add_str(&t->name, json_object_get(f, "name"))) return -1;
        if (buf_add_str(&t->args, json_object_get(f, "arguments"))) return -1;
    }
    return 0;
}

/* One event's JSON into a; -1 nomem. */
static int take_event(acc *a, const json_t *ev) {
    const json_t *ch = json_array_get(json_object_get(ev, "choices"), 0);
    if (!json_is_object(ch)) return 0; /* a usage-only chunk, or an error event */
    a->any_choice = 1;
    const json_t *fr = json_object_get(ch, "finish_reason");
    if (json_is_string(fr)) snprintf(a->finish, sizeof a->finish, "%s", json_string_value(fr));
    const json_t *d = json_object_get(ch, "delta");
    if (json_is_object(d)) {
        a->chat = 1;
        const json_t *c = json_object_get(d, "content"), *r = json_object_get(d, "refusal");
        if (json_is_string(c)) a->any_content = 1;
        if (json_is_string(r)) a->any_refusal = 1;
        if (buf_add_str(&a->content, c) || buf_add_str(&a->refusal, r)) return -1;
        const json_t *tc = json_object_get(d, "tool_calls");
        if (json_is_array(tc) && take_tool_calls(a, tc)) return -1;
        return 0;
    }
    const json_t *t = json_object_get(ch, "text");
    if (json_is_string(t)) {
        a->any_text = 1;
        if (buf_add_str(&a->text, t)) return -1;
    }
    return 0;
}

static json_t *jstr(const util_buf *b) {
    return json_stringn(b->data ? b->data : "", b->len);
}

static json_t *build(const acc *a) {
    json_t *choice = json_object();
    int bad = !choice;
    if (a->chat) {
        json_t *m = json_object();
        bad |= !m || json_object_set_new(m, "role", json_string("assistant"));
        bad |= json_object_set_new(m, "content", a->any_content ? jstr(&a->content) : json_null());
        if (a->any_refusal) bad |= json_object_set_new(m, "refusal", jstr(&a->refusal));
        if (a->n_tc) {
            json_t *calls = json_array();
            bad |= !calls;
            for (size_t k = 0; !bad && k < a->n_tc; k++) {
                const tc_acc *t = &a->tc[k];
                json_t *f = json_pack("{s:o,s:o}", "name", jstr(&t->name), "arguments", jstr(&t->args));
                json_t *c =
                    f ? json_pack("{s:o,s:s,s:o}", "id", jstr(&t->id), "type", "function", "function", f) : NULL;
                bad |= !c || json_array_append_new(calls, c);
            }
            bad |= json_object_set_new(m, "tool_calls", calls);
        }
        bad |= json_object_set_new(choice, "message", m);
    } else {
        bad |= json_object_set_new(choice, "text", jstr(&a->text));
    }
    bad |= json_object_set_new(choice, "index", json_integer(0));
    bad |= json_object_set_new(choice, "finish_reason", a->finish[0] ? json_string(a->finish) : json_null());
    json_t *r = bad ? NULL : json_pack("{s:[o]}", "choices", choice);
    if (!r) json_decref(choice);
    return r;
}

static void acc_free(acc *a) {
    buf_free(&a->content);
    buf_free(&a->refusal);
    buf_free(&a->text);
    for (size_t k = 0; k < a->n_tc; k++) {
        buf_free(&a->tc[k].id);
        buf_free(&a->tc[k].name);
        buf_free(&a->tc[k].args);
    }
}

/* The event in data (its data lines) into a; clears data. */
static drift_status flush_event(acc *a, util_buf *data, size_t *event_no, drift_error *err) {
    drift_status rc = DRIFT_OK;
    if (!data->len) return rc;
    (*event_no)++;
    if (!(data->len == 6 && !memcmp(data->data, "[DONE]", 6))) {
        json_error_t je;
        json_t *ev = json_loadb(data->data, data->len, 0, &je);
        if (!ev) rc = drift_error_set(err, DRIFT_ERR_PARSE, "stream event %zu: not JSON: %s", *event_no, je.text);
        else if (take_event(a, ev)) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        json_decref(ev);
    }
    data->len = 0;
    return rc;
}

drift_status drift_shadow_sse_reassemble(const char *sse, size_t len, char **reply_json, drift_error *err) {
    *reply_json = NULL;
    acc *a = calloc(1, sizeof *a);
    if (!a) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status rc = DRIFT_OK;
    util_buf data = {0}; /* one event's data lines, joined by "\n" */
    size_t pos = 0, event_no = 0;
    while (pos < len && !rc) {
        const char *line = sse + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + 1;
        if (ll && line[ll - 1] == '\r') ll--;
        if (ll == 0) rc = flush_event(a, &data, &event_no, err); /* a blank line ends an event */
        else if (ll >= 5 && !memcmp(line, "data:", 5)) {
            size_t off = 5 + (ll > 5 && line[5] == ' ');
            if ((data.len && buf_append(&data, "\n", 1)) || buf_append(&data, line + off, ll - off))
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        } /* comments (":..."), event:, id:, retry: lines carry no answer */
    }
    if (!rc) rc = flush_event(a, &data, &event_no, err); /* the last event without its blank line */
    if (!rc && !a->any_choice) rc = drift_error_set(err, DRIFT_ERR_PARSE, "stream: no event has a choice");
    if (!rc && a->too_many)
        rc = drift_error_set(err, DRIFT_ERR_PARSE, "stream: more than %d tool calls", MAX_TOOL_CALLS);
    if (!rc) {
        json_t *r = build(a);
        *reply_json = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        if (!*reply_json) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    buf_free(&data);
    acc_free(a);
    free(a);
    return rc;
}
