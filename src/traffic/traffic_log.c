/* traffic_log.c - request logs (traffic.h): one JSON object per line, in
 * one of three shapes decided by the first line (chat/completions bodies,
 * OpenAI batch API input lines, request/response pairs), each body checked
 * as a chat request and kept as canonical JSON (compact, sorted keys) so
 * that a prompt's hash in the store is the request's, whatever the key
 * order or spacing of the log. A bad line fails the whole log with
 * "NAME:LINE: FIELD: what is wrong": a replay of half a log would measure
 * another traffic than the one asked. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/traffic.h"
#include "traffic/traffic_internal.h"
#include "util/json_util.h"
#include "util/util.h"

enum { FMT_NONE = -1, FMT_CHAT = 0, FMT_BATCH = 1, FMT_PAIR = 2 };
static const char *const FORMAT_NAMES[] = {"chat-jsonl", "openai-batch", "request-response"};

static drift_status check_messages(const json_t *o, drift_error *err) {
    const json_t *m = json_object_get(o, "messages");
    if (!m) return drift_error_set(err, DRIFT_ERR_PARSE, "messages: missing (a chat/completions request has messages)");
    if (!json_is_array(m)) return drift_error_set(err, DRIFT_ERR_PARSE, "messages: must be an array, not %s", util_json_kind(m));
    if (json_array_size(m) == 0) return drift_error_set(err, DRIFT_ERR_PARSE, "messages: is empty");
    size_t i;
    const json_t *x;
    json_array_foreach(m, i, x) {
        if (!json_is_object(x))
            return drift_error_set(err, DRIFT_ERR_PARSE, "messages[%zu]: must be an object, not %s", i, util_json_kind(x));
        const json_t *role = json_object_get(x, "role");
        if (!json_is_string(role))
            return drift_error_set(err, DRIFT_ERR_PARSE, "messages[%zu].role: must be a string", i);
        const json_t *c = json_object_get(x, "content");
        if (c && !json_is_string(c) && !json_is_array(c) && !json_is_null(c))
            return drift_error_set(err, DRIFT_ERR_PARSE, "messages[%zu].content: must be a string, an array or null, not %s",
                                   i, util_json_kind(c));
        if (!c && !json_object_get(x, "tool_calls"))
            return drift_error_set(err, DRIFT_ERR_PARSE, "messages[%zu].content: missing", i);
    }
    return DRIFT_OK;
}

static drift_status check_tools(const json_t *o, drift_error *err) {
    const json_t *t = json_object_get(o, "tools");
    if (!t || json_is_null(t)) return DRIFT_OK;
    if (!json_is_array(t)) return drift_error_set(err, DRIFT_ERR_PARSE, "tools: must be an array, not %s", util_json_kind(t));
    size_t i;
    const json_t *x;
    json_array_foreach(t, i, x) {
        if (!json_is_object(x))
            return drift_error_set(err, DRIFT_ERR_PARSE, "tools[%zu]: must be an object, not %s", i, util_json_kind(x));
        const json_t *ty = json_object_get(x, "type");
        if (!json_is_string(ty) || strcmp(json_string_value(ty), "function"))
            return drift_error_set(err, DRIFT_ERR_PARSE, "tools[%zu].type: must be \"function\"", i);
        const json_t *f = json_object_get(x, "function");
        if (!json_is_object(f) || !json_is_string(json_object_get(f, "name")))
            return drift_error_set(err, DRIFT_ERR_PARSE, "tools[%zu].function.name: must be a string", i);
    }
    return DRIFT_OK;
}

static drift_status check_response_format(const json_t *o, drift_error *err) {
    const json_t *rf = json_object_get(o, "response_format");
    if (!rf || json_is_null(rf)) return DRIFT_OK;
    if (!json_is_object(rf))
        return drift_error_set(err, DRIFT_ERR_PARSE, "response_format: must be an object, not %s", util_json_kind(rf));
    const char *ty = json_string_value(json_object_get(rf, "type"));
    if (!ty) return drift_error_set(err, DRIFT_ERR_PARSE, "response_format.type: must be a string");
    if (!strcmp(ty, "text") || !strcmp(ty, "json_object")) return DRIFT_OK;
    if (strcmp(ty, "json_schema"))
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "response_format.type: '%.40s' is not text, json_object or json_schema", ty);
    const json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js)) return drift_error_set(err, DRIFT_ERR_PARSE, "response_format.json_schema: must be an object");
    const json_t *schema = json_object_get(js, "schema");
    if (!json_is_object(schema))
        return drift_error_set(err, DRIFT_ERR_PARSE, "response_format.json_schema.schema: must be an object");
    return DRIFT_OK;
}

/* A completions request's prompt: a string, or an array of one string
 * (several prompts ask several answers: not one pair). */
static drift_status check_prompt(const json_t *o, drift_error *err) {
    const json_t *p = json_object_get(o, "prompt");
    if (json_is_string(p)) return DRIFT_OK;
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) return DRIFT_OK;
    if (json_is_array(p) && json_array_size(p) != 1)
        return drift_error_set(err, DRIFT_ERR_PARSE, "prompt: an array of %zu prompts (one request, one prompt)",
                               json_array_size(p));
    return drift_error_set(err, DRIFT_ERR_PARSE, "prompt: must be a string (token ids are not replayed), not %s",
                           util_json_kind(json_is_array(p) ? json_array_get(p, 0) : p));
}

int trf_is_completions(const json_t *o) { return json_object_get(o, "prompt") && !json_object_get(o, "messages"); }

drift_status trf_request_check_json(const json_t *o, drift_error *err) {
    if (!json_is_object(o)) return drift_error_set(err, DRIFT_ERR_PARSE, "request: must be an object, not %s", util_json_kind(o));
    drift_status st = trf_is_completions(o) ? check_prompt(o, err) : check_messages(o, err);
    if (!st) st = check_tools(o, err);
    if (!st) st = check_response_format(o, err);
    if (!st) {
        const json_t *model = json_object_get(o, "model");
        if (model && !json_is_string(model) && !json_is_null(model))
            st = drift_error_set(err, DRIFT_ERR_PARSE, "model: must be a string, not %s", util_json_kind(model));
    }
    return st;
}

drift_status drift_traffic_request_check(const char *request_json, drift_error *err) {
    json_error_t je;
    json_t *o = json_loads(request_json ? request_json : "", JSON_REJECT_DUPLICATES, &je);
    if (!o) return drift_error_set(err, DRIFT_ERR_PARSE, "request: not JSON: %s", je.text);
    drift_status st = trf_request_check_json(o, err);
    json_decref(o);
    return st;
}

/* A logged response: a chat.completion, or batch output's {status_code, body}. */
static drift_status take_response(const json_t *r, json_t **out, drift_error *err) {
    *out = NULL;
    if (!r || json_is_null(r)) return DRIFT_OK;
    if (!json_is_object(r)) return drift_error_set(err, DRIFT_ERR_PARSE, "response: must be an object, not %s", util_json_kind(r));
    const json_t *body = json_object_get(r, "body");
    if (json_object_get(r, "status_code") && json_is_object(body)) {
        json_int_t sc = json_integer_value(json_object_get(r, "status_code"));
        if (sc < 200 || sc > 299)
            return drift_error_set(err, DRIFT_ERR_PARSE, "response.status_code: %lld is not a served answer", (long long)sc);
        r = body;
    }
    const json_t *ch = json_object_get(r, "choices");
    if (!json_is_array(ch) || json_array_size(ch) == 0)
        return drift_error_set(err, DRIFT_ERR_PARSE, "response.choices: must be a non-empty array");
    const json_t *c0 = json_array_get(ch, 0);
    if (!json_is_object(c0) || (!json_is_object(json_object_get(c0, "message")) && !json_is_string(json_object_get(c0, "text"))))
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "response.choices[0]: needs a message object (chat) or a text string (completions)");
    *out = (json_t *)r;
    return DRIFT_OK;
}

/* Fills rec from one parsed line of format fmt. */
static drift_status take_line(int fmt, const json_t *o, size_t line, drift_traffic_record *rec, drift_error *err) {
    const json_t *req = o, *resp = NULL;
    const char *id = NULL;
    if (fmt == FMT_BATCH) {
        const json_t *cid = json_object_get(o, "custom_id");
        if (!json_is_string(cid) || !json_string_length(cid))
            return drift_error_set(err, DRIFT_ERR_PARSE, "custom_id: must be a non-empty string");
        id = json_string_value(cid);
        const char *method = json_string_value(json_object_get(o, "method"));
        if (!method || strcmp(method, "POST"))
            return drift_error_set(err, DRIFT_ERR_PARSE, "method: must be \"POST\"");
        const char *url = json_string_value(json_object_get(o, "url"));
        if (!url) return drift_error_set(err, DRIFT_ERR_PARSE, "url: must be a string");
        int compl = !strcmp(url, "/v1/completions") || !strcmp(url, "/completions");
        if (!compl && strcmp(url, "/v1/chat/completions") && strcmp(url, "/chat/completions"))
            return drift_error_set(err, DRIFT_ERR_PARSE,
                                   "url: '%.80s' is not replayed (only /v1/chat/completions and /v1/completions)", url);
        req = json_object_get(o, "body");
        if (!req) return drift_error_set(err, DRIFT_ERR_PARSE, "body: missing");
        if (json_is_object(req) && compl != trf_is_completions(req))
            return drift_error_set(err, DRIFT_ERR_PARSE, "body: %s for url %s",
                                   compl ? "a completions url needs a body with a prompt and no messages"
                                         : "a chat url needs a body with messages",
                                   url);
        resp = json_object_get(o, "response");
    } else if (fmt == FMT_PAIR) {
        req = json_object_get(o, "request");
        if (!req) return drift_error_set(err, DRIFT_ERR_PARSE, "request: missing");
        resp = json_object_get(o, "response");
        const json_t *jid = json_object_get(o, "id");
        if (jid && !json_is_null(jid)) {
            if (!json_is_string(jid) || !json_string_length(jid))
                return drift_error_set(err, DRIFT_ERR_PARSE, "id: must be a non-empty string");
            id = json_string_value(jid);
        }
    }
    drift_status st = trf_request_check_json(req, err);
    if (st) {
        if (fmt != FMT_CHAT) drift_error_prefix(err, "%s.", fmt == FMT_BATCH ? "body" : "request");
        return st;
    }
    json_t *r = NULL;
    if ((st = take_response(resp, &r, err))) return st;
    rec->line = line;
    rec->id = id ? util_strdup(id) : util_asprintf("line-%zu", line);
    rec->request_json = json_dumps(req, JSON_COMPACT | JSON_SORT_KEYS);
    rec->response_json = r ? json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!rec->id || !rec->request_json || (r && !rec->response_json))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

static int detect(const json_t *o) {
    if (json_object_get(o, "custom_id") || json_object_get(o, "url")) return FMT_BATCH;
    if (json_object_get(o, "request")) return FMT_PAIR;
    return FMT_CHAT;
}

void drift_traffic_log_free(drift_traffic_log *log) {
    if (!log) return;
    for (size_t i = 0; i < log->n; i++) {
        free(log->recs[i].id);
        free(log->recs[i].request_json);
        free(log->recs[i].response_json);
    }
    free(log->recs);
    free(log->name);
    free(log);
}

static int cmp_id(const void *a, const void *b) {
    const drift_traffic_record *const *x = a, *const *y = b;
    int c = strcmp((*x)->id, (*y)->id);
    return c ? c : ((*x)->line < (*y)->line ? -1 : 1);
}

drift_status drift_traffic_log_parse(const char *name, const char *data, size_t len, drift_traffic_log **out,
                                     drift_error *err) {
    *out = NULL;
    if (!name) name = "log";
    if (!data) len = 0;
    if (memchr(data ? data : "", '\0', len))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: holds a NUL byte (not a JSON Lines text)", name);
    drift_traffic_log *log = calloc(1, sizeof *log);
    if (!log || !(log->name = util_strdup(name))) {
        free(log);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_status st = DRIFT_OK;
    size_t cap = 0, line = 0, pos = 0;
    int fmt = FMT_NONE;
    while (pos < len) {
        const char *s = data + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        size_t b = 0;
        while (b < n && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) b++;
        if (b == n) continue;
        if (n > DRIFT_TRAFFIC_MAX_LINE_BYTES) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: line of %zu bytes is over the %zu-byte limit", name,
                                 line, n, DRIFT_TRAFFIC_MAX_LINE_BYTES);
            break;
        }
        json_error_t je;
        json_t *o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
        if (!o) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: not JSON: %s (column %d)", name, line, je.text,
                                 je.column);
            break;
        }
        if (!json_is_object(o)) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: a line must be a JSON object, not %s", name, line,
                                 util_json_kind(o));
            json_decref(o);
            break;
        }
        int f = detect(o);
        if (fmt == FMT_NONE) fmt = f;
        if (f != fmt) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: a %s line in a %s log (one shape per log)", name, line,
                                 FORMAT_NAMES[f], FORMAT_NAMES[fmt]);
            json_decref(o);
            break;
        }
        if (log->n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            drift_traffic_record *nr = realloc(log->recs, nc * sizeof *nr);
            if (!nr) {
                json_decref(o);
                st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                break;
            }
            log->recs = nr;
            cap = nc;
        }
        drift_traffic_record *rec = &log->recs[log->n];
        memset(rec, 0, sizeof *rec);
        log->n++;
        st = take_line(fmt, o, line, rec, err);
        if (!st) {
            const json_t *body = fmt == FMT_BATCH ? json_object_get(o, "body")
                                 : fmt == FMT_PAIR ? json_object_get(o, "request")
                                                   : o;
            int compl = trf_is_completions(body);
            if (log->n == 1) log->completions = compl;
            else if (compl != log->completions)
                st = drift_error_set(err, DRIFT_ERR_PARSE,
                                     "a %s request in a log of %s requests (one endpoint per log)",
                                     compl ? "completions" : "chat/completions",
                                     log->completions ? "completions" : "chat/completions");
        }
        json_decref(o);
        if (st) {
            drift_error_prefix(err, "%s:%zu: ", name, line);
            break;
        }
        if (rec->response_json) log->with_response++;
    }
    if (!st && log->n == 0) st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: no request in the log", name);
    if (!st) {
        drift_traffic_record **byid = malloc(log->n * sizeof *byid);
        if (!byid) {
            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        } else {
            for (size_t i = 0; i < log->n; i++) byid[i] = &log->recs[i];
            qsort(byid, log->n, sizeof *byid, cmp_id);
            for (size_t i = 1; i < log->n && !st; i++)
                if (!strcmp(byid[i - 1]->id, byid[i]->id))
                    st = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: id '%.80s' is also the id of line %zu", name,
                                         byid[i]->line, byid[i]->id, byid[i - 1]->line);
            free(byid);
        }
    }
    if (st) {
        drift_traffic_log_free(log);
        return st;
    }
    log->format = FORMAT_NAMES[fmt];
    *out = log;
    return DRIFT_OK;
}

drift_status drift_traffic_log_load(const char *path, drift_traffic_log **out, drift_error *err) {
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    drift_status st = util_read_file(path, &data, &len, err);
    if (st) return st;
    st = drift_traffic_log_parse(path, data, len, out, err);
    free(data);
    return st;
}
