/* stack_probe.c - what an HTTP stack says it is: the parsers of the replies
 * of the introspection endpoints that serving frameworks expose, and one
 * short GET to fetch such a reply. http.c (eng_http_detect) asks them in
 * the order of eng_probe_paths at the start of a run and fills only the
 * configuration dimensions still absent; nothing here prints, and a reply
 * that is not what its endpoint documents gives nothing.
 *
 * Endpoints and fields, from each project's own documentation (as found
 * with the search tool, 2026-12-06):
 *   driftbench  GET /v1/driftbench/info   our own (src/server, README):
 *               framework, version, model, hardware, precision, profile
 *   SGLang      GET /get_server_info      docs "SGLang Native APIs"
 *               (basic_usage/native_api.md) and "Server Args"
 *               (docs/backend/server_arguments.md): the server args,
 *               model_path, dtype, quantization, tp_size; "version" where
 *               the build adds it
 *   llama.cpp   GET /props                tools/server README and the tour
 *               of llama-server endpoints (mvysny.github.io): model_alias,
 *               model_path, build_info, default_generation_settings.n_ctx
 *   TGI         GET /info                 TGI's docs/openapi.json, schema
 *               "Info": model_id, model_dtype, model_device_type, version,
 *               sha
 *   vLLM        GET /version              vLLM's OpenAI-compatible server
 *               (its tests compare it with vllm.version.__version__):
 *               {"version": "..."}
 *   any         GET <base>/models         OpenAI's list: data[].id,
 *               data[].owned_by ("vllm", "sglang", "llamacpp" on those
 *               servers) */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "engine/http_internal.h"

const char *const eng_probe_paths[ENG_PROBE_COUNT] = {
    [ENG_PROBE_DRIFTBENCH] = "/v1/driftbench/info", [ENG_PROBE_SGLANG] = "/get_server_info",
    [ENG_PROBE_LLAMACPP] = "/props",                 [ENG_PROBE_TGI] = "/info",
    [ENG_PROBE_VLLM] = "/version",                   [ENG_PROBE_MODELS] = "/models",
};

/* A string member fit to be a dimension's level: a JSON string of 1 to
 * ENG_PROBE_MAX_VALUE bytes with no control character; NULL otherwise. */
static const char *level(const json_t *o, const char *key) {
    const json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    if (!json_is_string(v)) return NULL;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    if (n == 0 || n > ENG_PROBE_MAX_VALUE || strlen(s) != n) return NULL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return NULL;
    return s;
}

/* Sets dims[key] = val unless val is NULL or key is there already; 1 set. */
static int fill(json_t *dims, const char *key, const char *val) {
    if (!val || json_object_get(dims, key)) return 0;
    return json_object_set_new(dims, key, json_string(val)) == 0;
}

static int fill_int(json_t *dims, const char *key, const json_t *v) {
    if (!json_is_integer(v) || json_object_get(dims, key)) return 0;
    json_int_t x = json_integer_value(v);
    if (x <= 0 || x > ((json_int_t)1 << 40)) return 0;
    return json_object_set_new(dims, key, json_integer(x)) == 0;
}

int eng_stack_parse(eng_probe_kind kind, const char *body, size_t len, json_t *dims) {
    if (!body || !json_is_object(dims) || len == 0 || len > ENG_PROBE_MAX_BODY || kind < 0 || kind >= ENG_PROBE_COUNT)
        return 0;
    json_error_t jerr;
    json_t *r = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(r)) {
        json_decref(r);
        return 0;
    }
    int n = 0;
    switch (kind) {
    case ENG_PROBE_DRIFTBENCH: {
        const char *fw = level(r, "framework");
        if (!fw || strncmp(fw, "driftbench", 10)) break; /* not ours */
        n += fill(dims, "framework", fw);
        n += fill(dims, "framework_version", level(r, "version"));
        n += fill(dims, "hardware", level(r, "hardware"));
        n += fill(dims, "precision", level(r, "precision"));
        n += fill(dims, "server_model", level(r, "model"));
        n += fill(dims, "server_profile", level(r, "profile"));
        break;
    }
    case ENG_PROBE_SGLANG: {
        /* the server args are the top level (older builds) */
        const char *mp = level(r, "model_path");
        if (!mp) break;
        n += fill(dims, "framework", "sglang");
        n += fill(dims, "framework_version", level(r, "version"));
        n += fill(dims, "server_model", mp);
        const char *q = level(r, "quantization"), *dt = level(r, "dtype");
        /* a quantization names the weights' format; dtype "auto" says nothing */
        n += fill(dims, "precision", q ? q : (dt && strcmp(dt, "auto") ? dt : NULL));
        n += fill_int(dims, "tensor_parallel", json_object_get(r, "tp_size"));
        break;
    }
    case ENG_PROBE_LLAMACPP: {
        const char *bi = level(r, "build_info");
        const json_t *dgs = json_object_get(r, "default_generation_settings");
        if (!bi && !json_is_object(dgs)) break;
        n += fill(dims, "framework", "llama.cpp");
        n += fill(dims, "framework_version", bi);
        const char *alias = level(r, "model_alias"), *path = level(r, "model_path");
        n += fill(dims, "server_model", alias ? alias : path);
        if (json_is_object(dgs)) n += fill_int(dims, "n_ctx", json_object_get(dgs, "n_ctx"));
        break;
    }
    case ENG_PROBE_TGI: {
        const char *id = level(r, "model_id"), *dt = level(r, "model_dtype");
        if (!id || !dt) break;
        n += fill(dims, "framework", "tgi");
        n += fill(dims, "framework_version", level(r, "version"));
        n += fill(dims, "server_model", id);
        n += fill(dims, "precision", dt);
        n += fill(dims, "hardware", level(r, "model_device_type"));
        break;
    }
    case ENG_PROBE_VLLM:
        /* {"version": "..."} and nothing that names another server */
        if (json_object_size(r) == 1) n += fill(dims, "framework_version", level(r, "version"));
        break;
    case ENG_PROBE_MODELS: {
        const json_t *data = json_object_get(r, "data"), *m0 = json_is_array(data) ? json_array_get(data, 0) : NULL;
        if (!json_is_object(m0)) break;
        const char *own = level(m0, "owned_by"), *fw = NULL;
        if (own && !strcmp(own, "vllm")) fw = "vllm";
        else if (own && !strcmp(own, "sglang")) fw = "sglang";
        else if (own && !strcmp(own, "llamacpp")) fw = "llama.cpp";
        n += fill(dims, "framework", fw);
        n += fill(dims, "server_model", level(m0, "id"));
        break;
    }
    default: break;
    }
    json_decref(r);
    return n;
}

typedef struct probe_body {
    char buf[ENG_PROBE_MAX_BODY + 1];
    size_t n;
} probe_body;

static size_t probe_write(char *p, size_t size, size_t nmemb, void *user) {
    probe_body *b = user;
    size_t n = size * nmemb;
    if (n > ENG_PROBE_MAX_BODY - b->n) return 0; /* too big: abort, nothing parsed */
    memcpy(b->buf + b->n, p, n);
    b->n += n;
    return n;
}

int eng_stack_get(const char *url, const struct curl_slist *headers, int local, double timeout_s, json_t *dims,
                  eng_probe_kind kind) {
    CURL *e = curl_easy_init();
    if (!e) return -1;
    probe_body *b = calloc(1, sizeof *b);
    if (!b) {
        curl_easy_cleanup(e);
        return -1;
    }
    long ms = (long)ceil(timeout_s * 1000.0);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, probe_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "driftbench/" DRIFT_VERSION);
    if (local) curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    CURLcode rc = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    int out;
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_OPERATION_TIMEDOUT)
        out = -1;
    else
        out = (rc == CURLE_OK && status == 200) ? eng_stack_parse(kind, b->buf, b->n, dims) : 0;
    free(b);
    curl_easy_cleanup(e);
    return out;
}
