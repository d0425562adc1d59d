/* config.c - a config file (YAML or JSON) read into measure's and matrix's
 * options (config.h; docs/config.md lists every key).
 *
 * The file becomes a jansson tree (YAML: util/yaml_json.c, which also says
 * where each key was written; JSON: jansson, no lines). Each section is
 * read by a small function that checks its keys against a table (an
 * unknown key is an error naming file:line, the key's path and the known
 * keys), the type and range of each value, and fills the options. Every
 * string the options point at lives in the tree or in the config's list
 * of made strings, both freed by drift_config_free.
 *
 * Ranges are the flags' (cmd_run.c, cmd_measure.c), so a file cannot say
 * what a flag could not. */
#include "driftbench/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix/spec_tree.h"
#include "util/target_fields.h"
#include "util/util.h"
#include "util/yaml_json.h"

#define CONFIG_MAX_SUITES 32 /* the CLI's --suite cap */
#define CONFIG_MAX_STOP 16

struct drift_config {
    char *name;               /* the file's name, for messages */
    json_t *root;
    json_t *aside;            /* matrix: the run settings taken out of root (their strings are used) */
    util_yaml_locator *loc;   /* NULL: a JSON file */
    int used;                 /* read once: drift_config_matrix takes keys out of the tree */
    char **made;              /* strings made from the tree (target specs, ...) */
    size_t n_made, cap_made;
    const char **ptrs[8];     /* arrays of pointers made (suites, stop, headers x 3) */
    size_t n_ptrs;
};

void drift_config_free(drift_config *c) {
    if (!c) return;
    free(c->name);
    json_decref(c->root);
    json_decref(c->aside);
    util_yaml_locator_free(c->loc);
    for (size_t i = 0; i < c->n_made; i++) free(c->made[i]);
    free(c->made);
    for (size_t i = 0; i < c->n_ptrs; i++) free(c->ptrs[i]);
    free(c);
}

drift_status drift_config_parse(const char *text, size_t len, const char *name, int json, drift_config **out,
                                drift_error *err) {
    *out = NULL;
    drift_config *c = calloc(1, sizeof *c);
    if (!c || !(c->name = util_strdup(name ? name : "config"))) {
        free(c);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_status rc;
    if (json) {
        json_error_t jerr;
        c->root = json_loadb(text ? text : "", text ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
        rc = c->root ? DRIFT_OK
                     : drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d:%d: not valid JSON: %s", c->name, jerr.line,
                                       jerr.column, jerr.text);
    } else {
        rc = util_yaml_parse(text, len, c->name, NULL, &c->root, &c->loc, err);
    }
    if (!rc && !json_is_object(c->root))
        rc = drift_error_set(err, DRIFT_ERR_INVALID, "%s: the file must be a mapping of keys (suites:, targets:, ...)%s",
                             c->name, json_is_null(c->root) ? "; it is empty" : "");
    if (rc) {
        drift_config_free(c);
        return rc;
    }
    *out = c;
    return DRIFT_OK;
}

drift_status drift_config_load(const char *path, drift_config **out, drift_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    drift_status rc = util_read_file(path, &text, &len, err);
    if (rc) return rc;
    size_t n = strlen(path);
    int json = n > 5 && !strcmp(path + n - 5, ".json");
    rc = drift_config_parse(text, len, path, json, out, err);
    free(text);
    return rc;
}

/* ---- reading, with the place in messages ---- */

typedef struct rd {
    drift_config *c;
    drift_error *err;
} rd;

/* "NAME:LINE: PATH: what" (no line for JSON), DRIFT_ERR_INVALID. */
static drift_status bad(rd *r, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static drift_status bad(rd *r, const char *path, const char *fmt, ...) {
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int line = util_yaml_path_line(r->c->loc, r->c->root, path);
    if (line > 0) return drift_error_set(r->err, DRIFT_ERR_INVALID, "%s:%d: %s: %s", r->c->name, line, path, what);
    return drift_error_set(r->err, DRIFT_ERR_INVALID, "%s: %s: %s", r->c->name, path, what);
}

static drift_status nomem(rd *r) { return drift_error_set(r->err, DRIFT_ERR_NOMEM, "out of memory"); }

/* path + "." + key into buf */
static const char *sub(char *buf, size_t cap, const char *path, const char *key) {
    snprintf(buf, cap, "%s%s%s", path, *path ? "." : "", key);
    return buf;
}

/* Every key of obj (at path) is in known (NULL-terminated) or extra. */
static drift_status check_keys(rd *r, const json_t *obj, const char *path, const char *const *known,
                               const char *const *extra) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        int ok = 0;
        for (size_t i = 0; known[i] && !ok; i++) ok = !strcmp(k, known[i]);
        for (size_t i = 0; extra && extra[i] && !ok; i++) ok = !strcmp(k, extra[i]);
        if (ok) continue;
        util_buf b = {0};
        for (size_t i = 0; known[i]; i++) buf_printf(&b, "%s%s", i ? ", " : "", known[i]);
        for (size_t i = 0; extra && extra[i]; i++) buf_printf(&b, ", %s", extra[i]);
        char p[256];
        drift_status rc = bad(r, sub(p, sizeof p, path, k), "unknown key (known: %s)", b.data ? b.data : "");
        buf_free(&b);
        return rc;
    }
    return DRIFT_OK;
}

/* The section key of obj: NULL when absent; an error when not a mapping. */
static drift_status section(rd *r, const json_t *obj, const char *path, const char *key, json_t **out) {
    *out = json_object_get(obj, key);
    char p[256];
    if (*out && !json_is_object(*out)) {
        *out = NULL;
        return bad(r, sub(p, sizeof p, path, key), "must be a mapping of keys");
    }
    return DRIFT_OK;
}

static drift_status get_str(rd *r, const json_t *obj, const char *path, const char *key, const char **out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return DRIFT_OK;
    char p[256];
    if (!json_is_string(v) || !*json_string_value(v))
        return bad(r, sub(p, sizeof p, path, key), "must be a non-empty string");
    *out = json_string_value(v);
    return DRIFT_OK;
}

static drift_status get_bool(rd *r, const json_t *obj, const char *path, const char *key, int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return DRIFT_OK;
    char p[256];
    if (!json_is_boolean(v)) return bad(r, sub(p, sizeof p, path, key), "must be true or false");
    *out = json_is_true(v);
    return DRIFT_OK;
}

static drift_status get_int(rd *r, const json_t *obj, const char *path, const char *key, long lo, long hi,
                            long *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return DRIFT_OK;
    char p[256];
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return bad(r, sub(p, sizeof p, path, key), "must be an integer in [%ld, %ld]", lo, hi);
    *out = (long)json_integer_value(v);
    return DRIFT_OK;
}

static drift_status get_num(rd *r, const json_t *obj, const char *path, const char *key, double lo, double hi,
                            int lo_open, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) return DRIFT_OK;
    char p[256];
    double x = json_number_value(v);
    if (!json_is_number(v) || x < lo || x > hi || (lo_open && x == lo))
        return bad(r, sub(p, sizeof p, path, key), "must be a number in %c%g, %g]", lo_open ? '(' : '[', lo, hi);
    *out = x;
    return DRIFT_OK;
}

/* Keeps s (malloc'd) until drift_config_free; NULL on nomem (s freed). */
static char *keep(drift_config *c, char *s) {
    if (!s) return NULL;
    if (c->n_made == c->cap_made) {
        size_t nc = c->cap_made ? c->cap_made * 2 : 16;
        char **p = realloc(c->made, nc * sizeof *p);
        if (!p) {
            free(s);
            return NULL;
        }
        c->made = p;
        c->cap_made = nc;
    }
    c->made[c->n_made++] = s;
    return s;
}

static const char **keep_ptrs(drift_config *c, size_t n) {
    if (c->n_ptrs == sizeof c->ptrs / sizeof c->ptrs[0]) return NULL;
    const char **p = calloc(n ? n : 1, sizeof *p);
    if (p) c->ptrs[c->n_ptrs++] = p;
    return p;
}

/* A list of non-empty strings at obj.key: *out (kept), *n. */
static drift_status get_str_list(rd *r, const json_t *obj, const char *path, const char *key, size_t max,
                                 const char ***out, size_t *n) {
    json_t *v = json_object_get(obj, key);
    if (!v) return DRIFT_OK;
    char p[256], q[300];
    sub(p, sizeof p, path, key);
    if (!json_is_array(v) || !json_array_size(v)) return bad(r, p, "must be a non-empty list of strings");
    if (json_array_size(v) > max) return bad(r, p, "at most %zu entries", max);
    const char **a = keep_ptrs(r->c, json_array_size(v));
    if (!a) return nomem(r);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e) || !*json_string_value(e)) {
            snprintf(q, sizeof q, "%s[%zu]", p, i);
            return bad(r, q, "must be a non-empty string");
        }
        a[i] = json_string_value(e);
    }
    *out = a;
    *n = json_array_size(v);
    return DRIFT_OK;
}

/* ---- request control: system_prompt, template, headers, extra_body ---- */

#define REQUEST_KEYS util_request_field_names

/* obj's request keys into q (fields it does not have are left as they are). */
static drift_status read_request(rd *r, const json_t *obj, const char *path, drift_request_ctl *q) {
    util_request_fields f;
    const char *bad_key = NULL, *bad_sub = NULL;
    char why[256], p[256], h[400];
    if (util_request_from_fields(obj, &f, &bad_key, &bad_sub, why, sizeof why)) {
        if (!bad_key) return nomem(r);
        sub(p, sizeof p, path, bad_key);
        if (bad_sub) snprintf(h, sizeof h, "%s.%s", p, bad_sub);
        return bad(r, bad_sub ? h : p, "%s", why);
    }
    /* the strings are the config's from here */
    drift_status rc = DRIFT_OK;
    const char **lines = f.n_headers ? keep_ptrs(r->c, f.n_headers) : NULL;
    if (f.n_headers && !lines) rc = nomem(r);
    for (size_t i = 0; !rc && i < f.n_headers; i++) {
        lines[i] = keep(r->c, f.headers[i]);
        f.headers[i] = NULL;
        if (!lines[i]) rc = nomem(r);
    }
    char *strs[3] = {f.system_prompt, f.prompt_template, f.extra_body_json};
    f.system_prompt = f.prompt_template = f.extra_body_json = NULL;
    for (int i = 0; i < 3; i++) /* keep() owns each, or frees it when it cannot */
        if (strs[i] && !keep(r->c, strs[i])) rc = nomem(r);
    if (!rc) {
        if (strs[0]) q->system_prompt = strs[0];
        if (strs[1]) q->prompt_template = strs[1];
        if (strs[2]) q->extra_body_json = strs[2];
        if (lines) {
            q->headers = lines;
            q->n_headers = f.n_headers;
        }
    }
    util_request_fields_free(&f);
    return rc;
}

/* ---- measure ---- */

static const char *const SIDE_KEYS[] = {"label", "config", "start", NULL};

/* A side's "config" (dimensions): a mapping {k: v} or "k=v,...". */
static drift_status read_dims(rd *r, const json_t *obj, const char *path, const char **out) {
    json_t *v = json_object_get(obj, "config");
    if (!v) return DRIFT_OK;
    char p[256], q[400];
    sub(p, sizeof p, path, "config");
    if (json_is_string(v)) {
        *out = json_string_value(v);
        return DRIFT_OK;
    }
    if (!json_is_object(v)) return bad(r, p, "must be a mapping of dimensions ({hardware: h100, framework: vllm})");
    util_buf b = {0};
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        snprintf(q, sizeof q, "%s.%s", p, k);
        char num[64];
        const char *val = json_is_string(x) ? json_string_value(x) : NULL;
        if (json_is_integer(x)) snprintf(num, sizeof num, "%lld", (long long)json_integer_value(x)), val = num;
        else if (json_is_real(x)) snprintf(num, sizeof num, "%g", json_real_value(x)), val = num;
        if (!val || !*val || strpbrk(val, ",=") || !*k || strpbrk(k, ",= ")) {
            buf_free(&b);
            return bad(r, q, "a dimension is a name and a non-empty value without ',' or '='");
        }
        buf_printf(&b, "%s%s=%s", b.len ? "," : "", k, val);
    }
    char *s = keep(r->c, buf_steal(&b));
    if (!s) return nomem(r);
    *out = s;
    return DRIFT_OK;
}

static drift_status read_side(rd *r, const json_t *obj, const char *path, const drift_request_ctl *defaults,
                              drift_measure_side *side) {
    drift_status rc;
    const char *k;
    json_t *v;
    char p[256];
    json_object_foreach((json_t *)obj, k, v) {
        int ok = util_target_field(k);
        for (size_t i = 0; SIDE_KEYS[i] && !ok; i++) ok = !strcmp(k, SIDE_KEYS[i]);
        for (size_t i = 0; REQUEST_KEYS[i] && !ok; i++) ok = !strcmp(k, REQUEST_KEYS[i]);
        if (!ok)
            return bad(r, sub(p, sizeof p, path, k),
                       "unknown key (known: url, model, api, api_key_env, label, config, start, headers, extra_body, "
                       "system_prompt, template, detect, embed_model, allow_insecure_key, target)");
    }
    char *spec = NULL, why[256];
    const char *bad_key = NULL;
    int tf = util_target_from_fields(obj, &spec, &bad_key, why, sizeof why);
    if (tf < 0) return bad_key ? bad(r, sub(p, sizeof p, path, bad_key), "%s", why) : nomem(r);
    if (!tf) return bad(r, path, "missing url (or a whole target spec as target)");
    if (!keep(r->c, spec)) return nomem(r);
    side->target = spec;
    if ((rc = get_str(r, obj, path, "label", &side->label)) || (rc = read_dims(r, obj, path, &side->config)) ||
        (rc = get_str(r, obj, path, "start", &side->start)))
        return rc;
    drift_request_ctl own = {0};
    if ((rc = read_request(r, obj, path, &own))) return rc;
    if (drift_request_ctl_any(&own)) { /* the side's own over the defaults: field by field, headers by name */
        const char **m = keep_ptrs(r->c, defaults->n_headers + own.n_headers);
        if (!m) return nomem(r);
        drift_request_ctl_over(&side->request, defaults, &own, m);
    }
    return DRIFT_OK;
}

static drift_status read_decoding(rd *r, const json_t *top, drift_gen_params *g) {
    static const char *const keys[] = {"temperature", "top_p", "top_k", "seed", "max_tokens", "stop", "logprobs", NULL};
    json_t *d;
    drift_status rc;
    if ((rc = section(r, top, "", "decoding", &d)) || !d) return rc;
    if ((rc = check_keys(r, d, "decoding", keys, NULL))) return rc;
    long v = -1;
    if ((rc = get_num(r, d, "decoding", "temperature", 0, 10, 0, &g->temperature)) ||
        (rc = get_num(r, d, "decoding", "top_p", 0, 1, 0, &g->top_p)))
        return rc;
    if ((rc = get_int(r, d, "decoding", "top_k", 0, 1000000, &v))) return rc;
    if (v >= 0) g->top_k = (int)v, v = -1;
    if ((rc = get_int(r, d, "decoding", "seed", 0, 0x7fffffffL, &v))) return rc;
    if (v >= 0) g->seed = v, v = -1;
    if ((rc = get_int(r, d, "decoding", "max_tokens", 1, 1000000, &v))) return rc;
    if (v >= 0) g->max_tokens = (int)v, v = -1;
    if ((rc = get_int(r, d, "decoding", "logprobs", 0, 20, &v))) return rc;
    if (v >= 0) g->logprobs = (int)v;
    const char **stop = NULL;
    size_t n = 0;
    if ((rc = get_str_list(r, d, "decoding", "stop", CONFIG_MAX_STOP, &stop, &n))) return rc;
    if (stop) {
        g->stop = stop;
        g->n_stop = (int)n;
    }
    return DRIFT_OK;
}

static drift_status read_budgets(rd *r, const json_t *top, drift_compare_opts *co) {
    json_t *b;
    drift_status rc;
    if ((rc = section(r, top, "", "budgets", &b)) || !b) return rc;
    const char *k;
    json_t *v;
    char p[256];
    json_object_foreach(b, k, v) {
        sub(p, sizeof p, "budgets", k);
        drift_workload w = drift_workload_parse(k);
        if (w == DRIFT_WL_UNKNOWN) return bad(r, p, "unknown workload (known: math, code, safety, chat, long_context)");
        if (json_is_string(v) && !strcmp(json_string_value(v), "none")) co->budget[w] = -1;
        else if (json_is_number(v) && json_number_value(v) >= 0 && json_number_value(v) <= 100)
            co->budget[w] = json_number_value(v) / 100.0;
        else return bad(r, p, "must be a percentage in [0, 100], or none (not gated)");
    }
    return DRIFT_OK;
}

static drift_status read_gate(rd *r, const json_t *top, drift_measure_opts *o) {
    static const char *const keys[] = {"sequential", "alpha", "decide", "max_left_out", NULL};
    json_t *g;
    drift_status rc;
    if ((rc = section(r, top, "", "gate", &g)) || !g) return rc;
    if ((rc = check_keys(r, g, "gate", keys, NULL)) || (rc = get_bool(r, g, "gate", "sequential", &o->sequential)) ||
        (rc = get_num(r, g, "gate", "alpha", 1e-9, 0.5, 0, &o->alpha)))
        return rc;
    const char *decide = NULL;
    if ((rc = get_str(r, g, "gate", "decide", &decide))) return rc;
    if (decide && !strcmp(decide, "interval")) o->compare.rule = DRIFT_DECIDE_INTERVAL;
    else if (decide && !strcmp(decide, "point")) o->compare.rule = DRIFT_DECIDE_POINT;
    else if (decide) return bad(r, "gate.decide", "must be interval or point");
    double pct = -1;
    if ((rc = get_num(r, g, "gate", "max_left_out", 0, 100, 0, &pct))) return rc;
    if (pct >= 0) o->compare.max_left_out = pct / 100.0;
    return DRIFT_OK;
}

static drift_status read_evaluators(rd *r, const json_t *top, drift_score_opts *s) {
    static const char *const keys[] = {"guard", "embedder", "unsafe_code_exec", "jobs", NULL};
    json_t *e;
    drift_status rc;
    if ((rc = section(r, top, "", "evaluators", &e)) || !e) return rc;
    long jobs = -1;
    if ((rc = check_keys(r, e, "evaluators", keys, NULL)) || (rc = get_str(r, e, "evaluators", "guard", &s->guard_spec)) ||
        (rc = get_str(r, e, "evaluators", "embedder", &s->embedder_spec)) ||
        (rc = get_bool(r, e, "evaluators", "unsafe_code_exec", &s->unsafe_code_exec)) ||
        (rc = get_int(r, e, "evaluators", "jobs", 0, 1024, &jobs)))
        return rc;
    if (jobs >= 0) s->jobs = (int)jobs;
    return DRIFT_OK;
}

static drift_status read_requests(rd *r, const json_t *top, drift_target_opts *t, int *concurrency) {
    static const char *const keys[] = {"concurrency", "timeout", "connect_timeout", "retries", "backoff",
                                       "backoff_max", NULL};
    json_t *q;
    drift_status rc;
    if ((rc = section(r, top, "", "requests", &q)) || !q) return rc;
    long conc = -1, retries = -1;
    if ((rc = check_keys(r, q, "requests", keys, NULL)) ||
        (rc = get_int(r, q, "requests", "concurrency", 1, 4096, &conc)) ||
        (rc = get_num(r, q, "requests", "timeout", 0.001, 86400, 0, &t->read_timeout_s)) ||
        (rc = get_num(r, q, "requests", "connect_timeout", 0.001, 3600, 0, &t->connect_timeout_s)) ||
        (rc = get_int(r, q, "requests", "retries", 0, 100, &retries)) ||
        (rc = get_num(r, q, "requests", "backoff", 0, 3600, 0, &t->backoff_base_s)) ||
        (rc = get_num(r, q, "requests", "backoff_max", 0, 3600, 0, &t->backoff_max_s)))
        return rc;
    if (conc > 0) t->concurrency = (int)conc;
    if (concurrency && conc > 0) *concurrency = (int)conc;
    if (retries >= 0) t->max_retries = (int)retries;
    return DRIFT_OK;
}

drift_status drift_config_measure(drift_config *c, drift_measure_opts *o, drift_measure_file *f, drift_error *err) {
    static const char *const top_keys[] = {"store", "suites", "limit", "replicates", "decoding", "order", "targets",
                                           "system_prompt", "template", "headers", "extra_body", "evaluators",
                                           "budgets", "gate", "compare", "report", "servers", "requests",
                                           "description", NULL};
    memset(f, 0, sizeof *f);
    rd r = {c, err};
    if (c->used) return drift_error_set(err, DRIFT_ERR_INVALID, "%s: read already", c->name);
    c->used = 1;
    const json_t *top = c->root;
    drift_status rc;
    long v = -1;
    if ((rc = check_keys(&r, top, "", top_keys, NULL)) || (rc = get_str(&r, top, "", "store", &f->store))) return rc;
    const char **suites = NULL;
    size_t ns = 0;
    if ((rc = get_str_list(&r, top, "", "suites", CONFIG_MAX_SUITES, &suites, &ns))) return rc;
    if (suites) {
        o->suites = suites;
        o->n_suites = ns;
        f->suites = suites;
        f->n_suites = ns;
    }
    if ((rc = get_int(&r, top, "", "limit", 1, 100000000, &v))) return rc;
    if (v > 0) o->limit = v, v = -1;
    if ((rc = get_int(&r, top, "", "replicates", 1, 1000, &v))) return rc;
    if (v > 0) o->replicates = (int)v;
    if ((rc = read_decoding(&r, top, &o->params))) return rc;
    /* order */
    json_t *ord;
    if ((rc = section(&r, top, "", "order", &ord))) return rc;
    if (ord) {
        static const char *const keys[] = {"by", "seed", "risk_from", NULL};
        const char *by = NULL;
        long seed = -1;
        if ((rc = check_keys(&r, ord, "order", keys, NULL)) || (rc = get_str(&r, ord, "order", "by", &by)) ||
            (rc = get_int(&r, ord, "order", "seed", 0, 0x7fffffffffffffffL, &seed)) ||
            (rc = get_str(&r, ord, "order", "risk_from", &o->risk_from)))
            return rc;
        if (by) {
            drift_error e2 = {0};
            if (drift_run_order_parse(by, &o->order, &e2)) return bad(&r, "order.by", "%s", e2.msg);
            f->order_set = 1;
        }
        if (seed >= 0) o->order_seed = (uint64_t)seed;
    }
    /* request defaults, then the targets */
    if ((rc = read_request(&r, top, "", &o->target_opts.request))) return rc;
    json_t *targets;
    if ((rc = section(&r, top, "", "targets", &targets))) return rc;
    if (targets) {
        static const char *const keys[] = {"baseline", "target", NULL};
        if ((rc = check_keys(&r, targets, "targets", keys, NULL))) return rc;
        for (int k = 0; k < 2; k++) {
            json_t *side;
            char p[64];
            snprintf(p, sizeof p, "targets.%s", keys[k]);
            if ((rc = section(&r, targets, "targets", keys[k], &side))) return rc;
            if (side && (rc = read_side(&r, side, p, &o->target_opts.request, &o->side[k]))) return rc;
        }
    }
    if ((rc = read_evaluators(&r, top, &o->score)) || (rc = read_budgets(&r, top, &o->compare)) ||
        (rc = read_gate(&r, top, o)))
        return rc;
    if (o->sequential && f->order_set && o->order != DRIFT_ORDER_RANDOM)
        return bad(&r, "order.by", "gate.sequential asks in a seeded random order: only random goes with it");
    json_t *cmp;
    if ((rc = section(&r, top, "", "compare", &cmp))) return rc;
    if (cmp) {
        static const char *const keys[] = {"workload", "sdr_threshold", NULL};
        const char *wl = NULL;
        if ((rc = check_keys(&r, cmp, "compare", keys, NULL)) || (rc = get_str(&r, cmp, "compare", "workload", &wl)) ||
            (rc = get_num(&r, cmp, "compare", "sdr_threshold", 0, 2, 0, &o->compare.sdr_threshold)))
            return rc;
        if (wl && (o->compare.only_workload = drift_workload_parse(wl)) == DRIFT_WL_UNKNOWN)
            return bad(&r, "compare.workload", "unknown workload (known: math, code, safety, chat, long_context)");
    }
    json_t *rep;
    if ((rc = section(&r, top, "", "report", &rep))) return rc;
    if (rep) {
        static const char *const keys[] = {"format", "output", NULL};
        const char *fmt = NULL;
        if ((rc = check_keys(&r, rep, "report", keys, NULL)) || (rc = get_str(&r, rep, "report", "format", &fmt)) ||
            (rc = get_str(&r, rep, "report", "output", &f->output)))
            return rc;
        if (fmt) {
            drift_error e2 = {0};
            if (drift_format_parse(fmt, &f->format, &e2)) return bad(&r, "report.format", "%s", e2.msg);
            f->has_format = 1;
        }
    }
    json_t *srv;
    if ((rc = section(&r, top, "", "servers", &srv))) return rc;
    if (srv) {
        static const char *const keys[] = {"health_path", "start_timeout", NULL};
        if ((rc = check_keys(&r, srv, "servers", keys, NULL)) ||
            (rc = get_str(&r, srv, "servers", "health_path", &o->health_path)) ||
            (rc = get_num(&r, srv, "servers", "start_timeout", 0, 86400, 1, &o->ready_timeout_s)))
            return rc;
        if (o->health_path[0] != '/') return bad(&r, "servers.health_path", "must start with '/'");
    }
    return read_requests(&r, top, &o->target_opts, NULL);
}

/* ---- matrix ---- */

drift_status drift_config_matrix(drift_config *c, drift_matrix_spec **spec, drift_matrix_file *f, drift_error *err) {
    *spec = NULL;
    memset(f, 0, sizeof *f);
    f->no_score = -1;
    drift_score_opts_default(&f->score);
    rd r = {c, err};
    if (c->used) return drift_error_set(err, DRIFT_ERR_INVALID, "%s: read already", c->name);
    c->used = 1;
    json_t *top = c->root;
    drift_status rc;
    long v = -1;
    int ns = -1;
    static const char *const spec_keys[] = {"name", "description", "suites", "limit", "decoding", "baseline",
                                            "configs", "dimensions", "target", "label", "exclude", "server",
                                            "system_prompt", "template", "headers", "extra_body", NULL};
    static const char *const run_keys[] = {"store", "parallel", "no_score", "evaluators", "requests", NULL};
    if ((rc = check_keys(&r, top, "", spec_keys, run_keys))) return rc;
    if ((rc = get_str(&r, top, "", "store", &f->store)) || (rc = get_int(&r, top, "", "parallel", 1, 256, &v)) ||
        (rc = get_bool(&r, top, "", "no_score", &ns)) || (rc = read_evaluators(&r, top, &f->score)))
        return rc;
    if (v > 0) f->parallel = (int)v;
    f->no_score = ns;
    json_t *q;
    if ((rc = section(&r, top, "", "requests", &q))) return rc;
    if (q) {
        static const char *const keys[] = {"concurrency", NULL};
        long conc = -1;
        if ((rc = check_keys(&r, q, "requests", keys, NULL)) ||
            (rc = get_int(&r, q, "requests", "concurrency", 1, 4096, &conc)))
            return rc;
        if (conc > 0) f->concurrency = (int)conc;
    }
    /* the rest is the spec's: the run settings out of the tree first (the
     * locator keeps the places of what stays) */
    if (!(c->aside = json_object())) return nomem(&r);
    for (size_t i = 0; run_keys[i]; i++) {
        json_t *x = json_object_get(top, run_keys[i]);
        if (!x) continue;
        if (json_object_set(c->aside, run_keys[i], x) || json_object_del(top, run_keys[i])) return nomem(&r);
    }
    return matrix_spec_from_tree(top, c->name, c->loc, spec, err);
}
