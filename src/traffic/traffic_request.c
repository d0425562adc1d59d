/* traffic_request.c - one logged request made deterministic, and one reply
 * in the form drift is measured on (traffic.h).
 *
 * prepare: the request keeps its own parameters; only what would make two
 * asks of one stack answer differently is overridden (sampling, several
 * choices, a stream), plus the model name when the stack under test serves
 * another; every override is written down, field by field, with the value
 * it replaced, so a report can say what was not replayed as logged.
 *
 * reply_message: choices[0].message reduced to what an application reads:
 * content, tool calls (name, arguments as a JSON value) and refusal, as
 * canonical JSON; ids, timestamps, usage and the fingerprint are left out,
 * so "exact agreement" means the same answer, not the same envelope. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "traffic/traffic_internal.h"
#include "util/util.h"

const char *const drift_traffic_override_fields[8] = {"temperature", "top_p", "seed", "n", "stream",
                                                      "stream_options", "model", ""};

int trf_response_format(const json_t *req, const json_t **schema) {
    if (schema) *schema = NULL;
    const json_t *rf = json_object_get(req, "response_format");
    const char *ty = json_string_value(json_object_get(rf, "type"));
    if (!ty) return 0;
    if (!strcmp(ty, "json_object")) return 1;
    if (!strcmp(ty, "json_schema")) {
        const json_t *s = json_object_get(json_object_get(rf, "json_schema"), "schema");
        if (!json_is_object(s)) return 1;
        if (schema) *schema = s;
        return 2;
    }
    return 0;
}

int trf_has_tools(const json_t *req) {
    const json_t *t = json_object_get(req, "tools");
    return json_is_array(t) && json_array_size(t) > 0;
}

char *trf_last_user_text(const json_t *req) {
    if (trf_is_completions(req)) {
        const json_t *p = json_object_get(req, "prompt");
        const char *t = json_string_value(json_is_array(p) ? json_array_get(p, 0) : p);
        return util_strdup(t ? t : "");
    }
    const json_t *m = json_object_get(req, "messages");
    for (size_t i = json_array_size(m); i-- > 0;) {
        const json_t *x = json_array_get(m, i);
        const char *role = json_string_value(json_object_get(x, "role"));
        if (!role || strcmp(role, "user")) continue;
        const json_t *c = json_object_get(x, "content");
        if (json_is_string(c)) return util_strdup(json_string_value(c));
        util_buf b = {0};
        size_t j;
        const json_t *part;
        json_array_foreach(c, j, part) {
            const char *t = json_string_value(json_object_get(part, "text"));
            if (!t) continue;
            if (b.len) buf_puts(&b, "\n");
            buf_puts(&b, t);
        }
        return buf_steal(&b);
    }
    return util_strdup("");
}

/* Records one override: overrides[field] = {"was": was (NULL: null), "now": now}. */
static int record(json_t *ov, const char *field, const json_t *was, json_t *now) {
    json_t *e = json_object();
    if (!e || !now) {
        json_decref(e);
        json_decref(now);
        return -1;
    }
    int bad = json_object_set_new(e, "was", was ? json_deep_copy(was) : json_null());
    bad |= json_object_set(e, "now", now);
    bad |= json_object_set_new(ov, field, e);
    json_decref(now);
    return bad ? -1 : 0;
}

/* Sets req[field] = now (taking it) and records what it replaced. */
static int override(json_t *req, json_t *ov, const char *field, json_t *now) {
    const json_t *was = json_object_get(req, field);
    if (record(ov, field, was, json_incref(now))) {
        json_decref(now);
        return -1;
    }
    return json_object_set_new(req, field, now) ? -1 : 0;
}

drift_status drift_traffic_prepare(const char *request_json, const drift_traffic_prep_opts *o, char **body,
                                   char **overrides_json, drift_error *err) {
    *body = NULL;
    if (overrides_json) *overrides_json = NULL;
    drift_traffic_prep_opts def = {42, NULL};
    if (!o) o = &def;
    json_error_t je;
    json_t *req = json_loads(request_json ? request_json : "", JSON_REJECT_DUPLICATES, &je);
    if (!req) return drift_error_set(err, DRIFT_ERR_PARSE, "request: not JSON: %s", je.text);
    drift_status st = trf_request_check_json(req, err);
    json_t *ov = json_object();
    if (st || !ov) goto done;
    int bad = 0;
    const json_t *v = json_object_get(req, "temperature");
    if (!json_is_number(v) || json_number_value(v) != 0) bad |= override(req, ov, "temperature", json_integer(0));
    v = json_object_get(req, "top_p");
    if (v && !json_is_null(v) && (!json_is_number(v) || json_number_value(v) != 1))
        bad |= override(req, ov, "top_p", json_integer(1));
    v = json_object_get(req, "seed");
    if (!v || json_is_null(v)) bad |= override(req, ov, "seed", json_integer((json_int_t)o->seed));
    v = json_object_get(req, "n");
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) != 1))
        bad |= override(req, ov, "n", json_integer(1));
    v = json_object_get(req, "stream");
    if (json_is_true(v)) bad |= override(req, ov, "stream", json_false());
    v = json_object_get(req, "stream_options");
    if (v) {
        bad |= record(ov, "stream_options", v, json_null());
        json_object_del(req, "stream_options");
    }
    v = json_object_get(req, "model");
    if (o->model && *o->model && (!json_is_string(v) || strcmp(json_string_value(v), o->model)))
        bad |= override(req, ov, "model", json_string(o->model));
    if (bad) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    *body = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
    if (overrides_json) *overrides_json = json_dumps(ov, JSON_COMPACT | JSON_SORT_KEYS);
    if (!*body || (overrides_json && !*overrides_json)) {
        free(*body);
        *body = NULL;
        if (overrides_json) {
            free(*overrides_json);
            *overrides_json = NULL;
        }
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
done:
    json_decref(ov);
    json_decref(req);
    return st;
}

/* A tool call's arguments as a JSON value: parsed when the string is JSON,
 * else the string itself (a model may emit broken JSON: that is a value
 * too, compared as text). */
static json_t *args_value(const json_t *a) {
    if (json_is_string(a)) {
        json_t *p = json_loadb(json_string_value(a), json_string_length(a), JSON_DECODE_ANY, NULL);
        return p ? p : json_deep_copy(a);
    }
    return a ? json_deep_copy(a) : json_null();
}

drift_status drift_traffic_reply_message(const char *reply_json, char **message_json, drift_error *err) {
    *message_json = NULL;
    json_error_t je;
    json_t *r = json_loads(reply_json ? reply_json : "", 0, &je);
    if (!r) return drift_error_set(err, DRIFT_ERR_PARSE, "reply: not JSON: %s", je.text);
    drift_status st = DRIFT_OK;
    json_t *out = json_object();
    const json_t *c0 = json_array_get(json_object_get(r, "choices"), 0);
    const json_t *msg = json_object_get(c0, "message");
    if (!out) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!json_is_object(c0)) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "reply: no choices[0]");
        goto done;
    }
    int bad = 0;
    if (!json_is_object(msg)) {
        const json_t *text = json_object_get(c0, "text");
        if (!json_is_string(text)) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "reply: choices[0] has neither a message nor a text");
            goto done;
        }
        bad |= json_object_set(out, "content", (json_t *)text);
    } else {
        const json_t *c = json_object_get(msg, "content");
        if (c && !json_is_string(c) && !json_is_null(c)) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "reply: choices[0].message.content is not a string");
            goto done;
        }
        bad |= json_object_set_new(out, "content", c ? json_deep_copy(c) : json_null());
        const json_t *tc = json_object_get(msg, "tool_calls");
        if (json_is_array(tc) && json_array_size(tc) > 0) {
            json_t *calls = json_array();
            size_t i;
            const json_t *x;
            json_array_foreach(tc, i, x) {
                const json_t *f = json_object_get(x, "function");
                const json_t *name = json_object_get(f, "name");
                json_t *call = json_object();
                bad |= !call || json_object_set_new(call, "name", json_is_string(name) ? json_deep_copy(name) : json_null());
                bad |= json_object_set_new(call, "arguments", args_value(json_object_get(f, "arguments")));
                bad |= json_array_append_new(calls, call);
            }
            bad |= json_object_set_new(out, "tool_calls", calls);
        }
        const json_t *ref = json_object_get(msg, "refusal");
        if (json_is_string(ref)) bad |= json_object_set(out, "refusal", (json_t *)ref);
    }
    if (bad) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    *message_json = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    if (!*message_json) st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
done:
    json_decref(out);
    json_decref(r);
    return st;
}
