/* target_fields.c - see target_fields.h. The HTTP target's parameters are
 * documented in src/engine/http.c; this file only writes them. */
#include "util/target_fields.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

const char *const util_target_field_names[] = {"target",     "url",         "model",  "api",
                                               "api_key_env", "embed_model", "detect", "allow_insecure_key",
                                               NULL};

int util_target_field(const char *key) {
    for (size_t i = 0; util_target_field_names[i]; i++)
        if (!strcmp(key, util_target_field_names[i])) return 1;
    return 0;
}

static int fail(const char **bad_key, const char *key, char *why, size_t cap, const char *msg) {
    *bad_key = key;
    snprintf(why, cap, "%s", msg);
    return -1;
}

/* value as a query parameter's value: bytes outside [A-Za-z0-9-._~/:@{}] as %XX */
static void put_escaped(util_buf *b, const char *v) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~/:@{}", *p)) {
            buf_append(b, p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            buf_append(b, e, 3);
        }
    }
}

static int env_name_ok(const char *s) {
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
    return 1;
}

int util_target_from_fields(const json_t *obj, char **spec, const char **bad_key, char *why, size_t cap) {
    *spec = NULL;
    *bad_key = NULL;
    json_t *target = json_object_get(obj, "target"), *url = json_object_get(obj, "url");
    if (target) {
        for (size_t i = 1; util_target_field_names[i]; i++)
            if (json_object_get(obj, util_target_field_names[i]))
                return fail(bad_key, util_target_field_names[i], why, cap,
                            "goes with url, not with a whole target spec (give target, or url and its fields)");
        if (!json_is_string(target) || !*json_string_value(target))
            return fail(bad_key, "target", why, cap, "must be a non-empty string (a target spec)");
        *spec = util_strdup(json_string_value(target));
        return *spec ? 1 : -1;
    }
    if (!url) {
        for (size_t i = 2; util_target_field_names[i]; i++)
            if (json_object_get(obj, util_target_field_names[i]))
                return fail(bad_key, util_target_field_names[i], why, cap, "needs a url (missing url)");
        return 0;
    }
    const char *u = json_string_value(url);
    if (!json_is_string(url) || !*u || strpbrk(u, " \t\r\n"))
        return fail(bad_key, "url", why, cap, "must be a URL without spaces (http://HOST:PORT/v1)");
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))
        return fail(bad_key, "url", why, cap, "must start with http:// or https:// (an embedded engine: use target)");
    util_buf b = {0};
    buf_puts(&b, u);
    char sep = strchr(u, '?') ? '&' : '?';
    static const char *const strs[] = {"model", "embed_model"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(obj, strs[i]);
        if (!v) continue;
        if (!json_is_string(v) || !*json_string_value(v)) {
            buf_free(&b);
            return fail(bad_key, strs[i], why, cap, "must be a non-empty string");
        }
        buf_printf(&b, "%c%s=", sep, strs[i]);
        put_escaped(&b, json_string_value(v));
        sep = '&';
    }
    json_t *api = json_object_get(obj, "api");
    if (api) {
        const char *a = json_string_value(api);
        if (!a || (strcmp(a, "chat") && strcmp(a, "completions"))) {
            buf_free(&b);
            return fail(bad_key, "api", why, cap, "must be chat or completions");
        }
        buf_printf(&b, "%capi=%s", sep, a);
        sep = '&';
    }
    json_t *kenv = json_object_get(obj, "api_key_env");
    if (kenv) {
        const char *k = json_string_value(kenv);
        if (!k || !env_name_ok(k)) {
            buf_free(&b);
            return fail(bad_key, "api_key_env", why, cap,
                        "must be the NAME of an environment variable ([A-Za-z_][A-Za-z0-9_]*) that holds the key, "
                        "never the key itself");
        }
        buf_printf(&b, "%capi_key_env=%s", sep, k);
        sep = '&';
    }
    static const char *const bools[] = {"detect", "allow_insecure_key"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(obj, bools[i]);
        if (!v) continue;
        if (!json_is_boolean(v)) {
            buf_free(&b);
            return fail(bad_key, bools[i], why, cap, "must be true or false");
        }
        buf_printf(&b, "%c%s=%d", sep, bools[i], json_is_true(v) ? 1 : 0);
        sep = '&';
    }
    *spec = buf_steal(&b);
    return *spec ? 1 : -1;
}

/* ---- request control ---- */

#define REQUEST_MAX_HEADERS 64

const char *const util_request_field_names[] = {"system_prompt", "template", "headers", "extra_body", NULL};

int util_request_field(const char *key) {
    for (size_t i = 0; util_request_field_names[i]; i++)
        if (!strcmp(key, util_request_field_names[i])) return 1;
    return 0;
}

void util_request_fields_free(util_request_fields *f) {
    free(f->system_prompt);
    free(f->prompt_template);
    free(f->extra_body_json);
    for (size_t i = 0; i < f->n_headers; i++) free(f->headers[i]);
    free(f->headers);
    memset(f, 0, sizeof *f);
}

/* An RFC 9110 token (a header's name). */
static int token_ok(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return 0;
    return 1;
}

static int req_fail(util_request_fields *out, const char **bad_key, const char *key, char *why, size_t cap,
                    const char *msg) {
    util_request_fields_free(out);
    return fail(bad_key, key, why, cap, msg);
}

int util_request_from_fields(const json_t *obj, util_request_fields *out, const char **bad_key, const char **bad_sub,
                             char *why, size_t cap) {
    memset(out, 0, sizeof *out);
    *bad_key = *bad_sub = NULL;
    json_t *sp = json_object_get(obj, "system_prompt"), *tp = json_object_get(obj, "template");
    json_t *hd = json_object_get(obj, "headers"), *eb = json_object_get(obj, "extra_body");
    if (sp) {
        if (!json_is_string(sp)) return req_fail(out, bad_key, "system_prompt", why, cap, "must be a string");
        if (!(out->system_prompt = util_strdup(json_string_value(sp)))) return req_fail(out, bad_key, NULL, why, cap, "");
    }
    if (tp) {
        if (!json_is_string(tp) || !strstr(json_string_value(tp), "{input}"))
            return req_fail(out, bad_key, "template", why, cap, "must be a string that holds {input} (where the prompt's input goes)");
        if (!(out->prompt_template = util_strdup(json_string_value(tp)))) return req_fail(out, bad_key, NULL, why, cap, "");
    }
    if (hd) {
        if (!json_is_object(hd)) return req_fail(out, bad_key, "headers", why, cap, "must be a mapping of header names to values");
        if (json_object_size(hd) > REQUEST_MAX_HEADERS)
            return req_fail(out, bad_key, "headers", why, cap, "at most 64 headers");
        out->headers = calloc(json_object_size(hd) + 1, sizeof(char *));
        if (!out->headers) return req_fail(out, bad_key, NULL, why, cap, "");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)hd, k, v) {
            const char *val = json_string_value(v);
            const char *msg = !token_ok(k) ? "is not a header name (letters, digits, - and a few others)"
                              : !val || strpbrk(val, "\r\n") ? "must be a string on one line (\"env:VAR\" reads it from $VAR)"
                              : !strcmp(val, "env:") ? "env: needs a variable's name (env:VAR)"
                                                    : NULL;
            if (msg) {
                *bad_sub = k;
                return req_fail(out, bad_key, "headers", why, cap, msg);
            }
            if (!(out->headers[out->n_headers] = util_asprintf("%s: %s", k, val)))
                return req_fail(out, bad_key, NULL, why, cap, "");
            out->n_headers++;
        }
    }
    if (eb) {
        if (!json_is_object(eb))
            return req_fail(out, bad_key, "extra_body", why, cap, "must be a mapping (merged into every request's JSON body)");
        if (!(out->extra_body_json = json_dumps(eb, JSON_COMPACT))) return req_fail(out, bad_key, NULL, why, cap, "");
    }
    return 0;
}

/* The length of the name part of a "Name: value" line, blanks cut. */
static size_t header_name_len(const char *h) {
    const char *c = strchr(h, ':');
    size_t len = c ? (size_t)(c - h) : strlen(h);
    while (len && (h[len - 1] == ' ' || h[len - 1] == '\t')) len--;
    return len;
}

size_t util_headers_over(const char *const *base, size_t n_base, const char *const *over, size_t n_over,
                         const char **out) {
    size_t n = 0;
    for (size_t i = 0; i < n_base; i++) {
        size_t len = header_name_len(base[i]);
        int named = 0;
        for (size_t j = 0; j < n_over && !named; j++)
            named = header_name_len(over[j]) == len && !strncasecmp(over[j], base[i], len);
        if (!named) out[n++] = base[i];
    }
    for (size_t j = 0; j < n_over; j++) out[n++] = over[j];
    return n;
}
