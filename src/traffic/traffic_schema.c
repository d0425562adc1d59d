/* traffic_schema.c - a small JSON Schema validator for response_format
 * json_schema (traffic.h says which keywords): the subset structured
 * output uses in practice (OpenAI's strict mode accepts little more:
 * type, properties, required, additionalProperties false, enum, const,
 * items, anyOf, $defs/$ref). Keywords outside it pass: a schema adherence
 * flip is then never invented from a rule we do not check. Recursion is
 * bounded (depth 64) so a hostile schema or a self-referencing $ref ends. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "traffic/traffic_internal.h"
#include "util/util.h"

#define MAX_DEPTH 64

static int type_is(const json_t *v, const char *t) {
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "integer"))
        return json_is_integer(v) || (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return -1;
}

static int fail(char *why, size_t cap, const char *path, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t cap, const char *path, const char *fmt, ...) {
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(why, cap, "%s: %s", path[0] ? path : "$", msg);
    return 0;
}

static int bad_schema(char *why, size_t cap, const char *path, const char *what) {
    snprintf(why, cap, "%s: schema: %s", path[0] ? path : "$", what);
    return -1;
}

/* Resolves "#/$defs/NAME" or "#/definitions/NAME" in root. */
static const json_t *resolve(const json_t *root, const char *ref) {
    static const char *const prefix[] = {"#/$defs/", "#/definitions/"};
    static const char *const member[] = {"$defs", "definitions"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(prefix[i]);
        if (!strncmp(ref, prefix[i], n)) return json_object_get(json_object_get(root, member[i]), ref + n);
    }
    return NULL;
}

int trf_schema_check(const json_t *root, const json_t *s, const json_t *v, char *path, size_t pathcap, char *why,
                     size_t cap, int depth) {
    if (depth > MAX_DEPTH) return bad_schema(why, cap, path, "nested too deep");
    if (json_is_true(s)) return 1;
    if (json_is_false(s)) return fail(why, cap, path, "%s", "schema is false");
    if (!json_is_object(s)) return bad_schema(why, cap, path, "not an object");
    const char *ref = json_string_value(json_object_get(s, "$ref"));
    if (ref) {
        const json_t *t = resolve(root, ref);
        if (!t) return bad_schema(why, cap, path, "unresolved $ref");
        return trf_schema_check(root, t, v, path, pathcap, why, cap, depth + 1);
    }
    const json_t *ty = json_object_get(s, "type");
    if (ty) {
        int ok = 0;
        if (json_is_string(ty)) {
            ok = type_is(v, json_string_value(ty));
            if (ok < 0) return bad_schema(why, cap, path, "unknown type");
        } else if (json_is_array(ty)) {
            size_t i;
            const json_t *t;
            json_array_foreach(ty, i, t) {
                if (!json_is_string(t)) return bad_schema(why, cap, path, "type list holds a non-string");
                int r = type_is(v, json_string_value(t));
                if (r < 0) return bad_schema(why, cap, path, "unknown type");
                ok |= r;
            }
        } else {
            return bad_schema(why, cap, path, "type is not a string or a list");
        }
        if (!ok) return fail(why, cap, path, "not of type %s", json_is_string(ty) ? json_string_value(ty) : "(list)");
    }
    const json_t *en = json_object_get(s, "enum");
    if (en) {
        if (!json_is_array(en)) return bad_schema(why, cap, path, "enum is not an array");
        int found = 0;
        size_t i;
        const json_t *e;
        json_array_foreach(en, i, e) found |= json_equal(e, v);
        if (!found) return fail(why, cap, path, "%s", "not one of the enum");
    }
    const json_t *cn = json_object_get(s, "const");
    if (cn && !json_equal(cn, v)) return fail(why, cap, path, "%s", "not the const");
    const json_t *any = json_object_get(s, "anyOf");
    if (any) {
        if (!json_is_array(any) || !json_array_size(any)) return bad_schema(why, cap, path, "anyOf is not a non-empty array");
        size_t i;
        const json_t *sub;
        int ok = 0;
        json_array_foreach(any, i, sub) {
            char w2[8];
            int r = trf_schema_check(root, sub, v, path, pathcap, w2, sizeof w2, depth + 1);
            if (r < 0) return trf_schema_check(root, sub, v, path, pathcap, why, cap, depth + 1);
            if (r > 0) {
                ok = 1;
                break;
            }
        }
        if (!ok) return fail(why, cap, path, "%s", "matches no anyOf branch");
    }
    if (json_is_string(v)) {
        size_t cps = 0, n = json_string_length(v);
        const char *p = json_string_value(v);
        for (size_t i = 0; i < n; i++) cps += ((unsigned char)p[i] & 0xC0) != 0x80;
        const json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
        if (json_is_integer(mn) && (json_int_t)cps < json_integer_value(mn)) return fail(why, cap, path, "%s", "shorter than minLength");
        if (json_is_integer(mx) && (json_int_t)cps > json_integer_value(mx)) return fail(why, cap, path, "%s", "longer than maxLength");
    }
    if (json_is_number(v)) {
        const json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
        if (json_is_number(mn) && json_number_value(v) < json_number_value(mn)) return fail(why, cap, path, "%s", "below minimum");
        if (json_is_number(mx) && json_number_value(v) > json_number_value(mx)) return fail(why, cap, path, "%s", "above maximum");
    }
    size_t plen = strlen(path);
    if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties");
        if (props && !json_is_object(props)) return bad_schema(why, cap, path, "properties is not an object");
        const json_t *req = json_object_get(s, "required");
        if (req) {
            if (!json_is_array(req)) return bad_schema(why, cap, path, "required is not an array");
            size_t i;
            const json_t *k;
            json_array_foreach(req, i, k) {
                if (!json_is_string(k)) return bad_schema(why, cap, path, "required holds a non-string");
                if (!json_object_get(v, json_string_value(k)))
                    return fail(why, cap, path, "required property '%.60s' missing", json_string_value(k));
            }
        }
        const json_t *addl = json_object_get(s, "additionalProperties");
        const char *key;
        const json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            const json_t *sub = json_object_get(props, key);
            if (!sub && !addl) continue;
            if (!sub && json_is_false(addl)) return fail(why, cap, path, "property '%.60s' not allowed", key);
            snprintf(path + plen, pathcap - plen, ".%.60s", key);
            int r = trf_schema_check(root, sub ? sub : addl, val, path, pathcap, why, cap, depth + 1);
            path[plen] = '\0';
            if (r <= 0) return r;
        }
    }
    if (json_is_array(v)) {
        const json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
        if (json_is_integer(mn) && (json_int_t)json_array_size(v) < json_integer_value(mn)) return fail(why, cap, path, "%s", "fewer items than minItems");
        if (json_is_integer(mx) && (json_int_t)json_array_size(v) > json_integer_value(mx)) return fail(why, cap, path, "%s", "more items than maxItems");
        const json_t *items = json_object_get(s, "items");
        if (items) {
            size_t i;
            const json_t *x;
            json_array_foreach(v, i, x) {
                snprintf(path + plen, pathcap - plen, "[%zu]", i);
                int r = trf_schema_check(root, items, x, path, pathcap, why, cap, depth + 1);
                path[plen] = '\0';
                if (r <= 0) return r;
            }
        }
    }
    return 1;
}

int drift_traffic_schema_check(const char *schema_json, const char *value_json, char *why, size_t cap) {
    char dummy[8];
    if (!why || !cap) {
        why = dummy;
        cap = sizeof dummy;
    }
    why[0] = '\0';
    json_t *s = json_loads(schema_json ? schema_json : "", JSON_DECODE_ANY, NULL);
    if (!s) {
        snprintf(why, cap, "schema: not JSON");
        return -1;
    }
    json_t *v = json_loads(value_json ? value_json : "", JSON_DECODE_ANY, NULL);
    if (!v) {
        json_decref(s);
        snprintf(why, cap, "$: not JSON");
        return 0;
    }
    char path[512] = "";
    int r = trf_schema_check(s, s, v, path, sizeof path, why, cap, 0);
    json_decref(v);
    json_decref(s);
    return r;
}
