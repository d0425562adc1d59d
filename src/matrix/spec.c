/* spec.c - the matrix spec: which configurations to run, how to reach each,
 * and which one is the baseline.
 *
 * Format (JSON object, or the same keys in YAML for a .yaml/.yml file or a
 * matrix config file, docs/config.md; tests/data/matrix/example.json is a
 * complete one):
 *   "name":      string, optional
 *   "suites":    ["builtin:math", "path/to/suite.jsonl", ...]   required, >= 1
 *   "limit":     prompts per suite, integer >= 0 (0 = all)      optional
 *   "decoding":  {"temperature":0, "top_p":1, "seed":42, "max_tokens":512,
 *                 "replicates":1, "baseline_logprobs":0}       optional
 *                baseline_logprobs: top-k logprobs stored with the
 *                baseline runs' answers (flip risk), 0 = none
 *   "baseline":  label of the baseline run, required. It may hold "{dim}"
 *                placeholders, filled with each configuration's level of
 *                dim: "ref@{model}" compares every model with its own ref.
 *   "configs":   explicit configurations, optional:
 *                [{"label":"ref@tiny","target":"embedded:m.gguf?profile=ref",
 *                  "dims":{"model":"tiny","hardware":"ref",...}}, ...]
 *                instead of "target", an HTTP target's fields: "url" with
 *                "model", "api", "api_key_env", "embed_model", "detect",
 *                "allow_insecure_key" (util/target_fields.c writes the
 *                spec); other keys of a configuration are refused
 *   "system_prompt", "template", "headers", "extra_body": request control
 *                (target.h's drift_request_ctl; docs/config.md), at the top
 *                level for every configuration and in an explicit one for
 *                itself (its own fields win, field by field; headers by name)
 *   "dimensions" + "target" (+ "label", "exclude"): a product, optional:
 *     "dimensions": {"model": {"tiny":"models/tiny.gguf", ...},
 *                    "precision": ["f32","int4"], ...}
 *         each dimension's levels: an array of names, or an object mapping a
 *         level name to the text substituted into the target template;
 *     "target": "embedded:{model}?profile=cpu-f32&weights={precision}"
 *         "{dim}" becomes the level's text (its name for array levels);
 *     "label":  "{model}/{precision}" (default: level names joined by '/');
 *         "{dim}" becomes the level's name;
 *     "exclude": [{"precision":"int4","framework":"pairwise"}, ...]
 *         a combination matching every key of one entry is left out.
 *   "server": how to start the target's server, optional, in an explicit
 *                configuration (its "{dim}" placeholders are the
 *                configuration's "dims" levels) or at the top level for the
 *                product (placeholders as in "target": the level's text):
 *       {"start": "llama-server -m {model} --port {port} -np 1",
 *        "health": "/health", "ready_timeout_s": 120}
 *         start: a /bin/sh command (required); "{port}" is a free TCP port
 *         on 127.0.0.1 that DriftBench picks when it starts the server, and
 *         the target must use it too ("http://127.0.0.1:{port}/v1?..."); a
 *         brace group that is not a name ("${HOME}", JSON) is left as is.
 *         The template is a command, run with DriftBench's rights; what a
 *         placeholder puts into it is data: each value becomes one literal
 *         word (or part of one), quoted for /bin/sh, so "$(...)", ';' or a
 *         quote in a level never runs. So a placeholder must stand outside
 *         quotes (see substitute_shell below for the rule and what is
 *         refused), and a level is one word, not a string of flags;
 *         health: the path polled until HTTP 200 (default "/health");
 *         ready_timeout_s: how long it may take to get there (default 120).
 *       The matrix starts it before the configuration's run and stops it
 *       after; configurations one after another with the same start
 *       command (after substitution) share one process. "{port}" is only
 *       known with a server, so a dimension may not be called "port".
 *   Commands and data: "server"."start" is the only field that is a
 *   command. Every other field (labels, dims, level names and texts,
 *   targets, health) is data: no shell reads it, and values pasted into a
 *   start command are quoted as above.
 *   At least one configuration (explicit or product); labels are unique.
 * Explicit configurations come first, then the product in odometer order
 * (last dimension fastest), so a configuration's index is stable and shards
 * are deterministic. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/matrix.h"
#include "matrix/spec_tree.h"
#include "util/target_fields.h"
#include "util/util.h"
#include "util/yaml_json.h"

static drift_status perr(drift_error *err, const char *name, const char *field, const char *what) {
    return drift_error_set(err, DRIFT_ERR_PARSE, "%s: %s: %s", name, field, what);
}

static void config_clear(drift_matrix_config *c) {
    free(c->label);
    free(c->target);
    for (size_t i = 0; i < c->n_dims; i++) {
        free(c->dim_names[i]);
        free(c->dim_values[i]);
    }
    free(c->dim_names);
    free(c->dim_values);
    free(c->server.start);
    free(c->server.health);
    free(c->system_prompt);
    free(c->prompt_template);
    free(c->extra_body_json);
    for (size_t i = 0; i < c->n_headers; i++) free(c->headers[i]);
    free(c->headers);
    memset(c, 0, sizeof *c);
}

void drift_matrix_spec_free(drift_matrix_spec *s) {
    if (!s) return;
    free(s->name);
    free(s->baseline);
    for (size_t i = 0; i < s->n_suites; i++) free(s->suites[i]);
    free(s->suites);
    for (size_t i = 0; i < s->n_configs; i++) config_clear(&s->configs[i]);
    free(s->configs);
    free(s);
}

static int push_config(drift_matrix_spec *s, size_t *cap) {
    if (s->n_configs == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        drift_matrix_config *p = realloc(s->configs, nc * sizeof *p);
        if (!p) return -1;
        s->configs = p;
        *cap = nc;
    }
    memset(&s->configs[s->n_configs], 0, sizeof s->configs[0]);
    s->n_configs++;
    return 0;
}

enum {
    SUB_KEEP_PORT = 1 /* "{port}" stays (filled when the server starts) */
};

/* 1 when p[0..len) is a dimension name (a-z, 0-9, '_', '-'). */
static int name_ok(const char *p, size_t len) {
    if (!len) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '_' || p[i] == '-')) return 0;
    return 1;
}

/* Index of the name p[0..len) in names[0..n); n when absent. */
static size_t name_index(char *const *names, size_t n, const char *p, size_t len) {
    size_t i;
    for (i = 0; i < n; i++)
        if (strlen(names[i]) == len && !strncmp(names[i], p, len)) break;
    return i;
}

/* Replaces "{key}" with values[i] for names[i]; unknown placeholders are an
 * error reported through *bad (the placeholder's name, malloc'd). flags:
 * SUB_*. For targets and labels, which no shell reads: values go in as
 * they are. */
static char *substitute_f(const char *tmpl, char *const *names, const char *const *values, size_t n, int flags,
                          char **bad) {
    util_buf b = {0};
    *bad = NULL;
    for (const char *p = tmpl; *p;) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            size_t len = close ? (size_t)(close - p - 1) : 0;
            if (close && (flags & SUB_KEEP_PORT) && len == 4 && !strncmp(p + 1, "port", 4)) {
                buf_puts(&b, "{port}");
                p = close + 1;
                continue;
            }
            if (close) {
                size_t i = name_index(names, n, p + 1, len);
                if (i == n) {
                    *bad = util_strndup(p + 1, len);
                    buf_free(&b);
                    return NULL;
                }
                buf_puts(&b, values[i]);
                p = close + 1;
                continue;
            }
        }
        buf_append(&b, p, 1);
        p++;
    }
    char *out = buf_steal(&b);
    return out ? out : util_strdup("");
}

/* ---- the server's start command: a shell command whose values are data ----
 *
 * The template is read as /bin/sh will read it, far enough to know where
 * each placeholder lands. A placeholder must stand in a bare word (outside
 * any quotes, also inside $(...)), where its value goes in quoted: as is
 * when it only holds [A-Za-z0-9_@%+:,./-], else '...' with each ' written
 * '\'' (POSIX): one literal word, or a literal part of one, whatever it
 * holds. Anywhere else its value cannot be made data for every reader:
 * inside '...' or "..." (often a command in a string, sh -c '...', that a
 * second shell parses again), `...`, $'...' (dash and bash disagree on where
 * it ends), a # comment, after a here-document's <<, or after a $(...) with
 * a case in it or a ${...} with quotes or expansions (where this reading
 * may lose its place): refused. "{port}" (a number) may stand anywhere;
 * "${...}" is the shell's; so is a brace group that is not a name
 * ({"x":1}); "\{" is a literal brace. */

enum { SH_WORD, SH_SINGLE, SH_DOUBLE, SH_BACK };

#define SH_DEPTH 32

typedef struct sh_scan {
    unsigned char kind[SH_DEPTH]; /* kind[0] = SH_WORD: the command itself */
    int parens[SH_DEPTH];         /* for a $( level: '(' not yet closed inside it */
    int has_case[SH_DEPTH];       /* for a $( level: a "case" word in it */
    int depth;                    /* the innermost level */
    int comment;                  /* inside a # comment, until the newline */
    const char *lost;             /* why placeholders after this point are refused */
} sh_scan;

#define SH_SAFE "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+:,./-"

/* Why a placeholder cannot stand where the scan is; NULL when it can. */
static const char *sh_refusal(const sh_scan *sc) {
    if (sc->lost) return sc->lost;
    if (sc->comment) return "is inside a # comment";
    switch (sc->kind[sc->depth]) {
    case SH_SINGLE: return "is inside '...' quotes";
    case SH_DOUBLE: return "is inside \"...\" quotes";
    case SH_BACK: return "is inside `...`";
    default: return NULL;
    }
}

/* v as one literal word (or part of one) for sh. */
static void sh_put_word(util_buf *b, const char *v) {
    if (*v && strspn(v, SH_SAFE) == strlen(v)) {
        buf_puts(b, v);
        return;
    }
    buf_puts(b, "'");
    for (; *v; v++) {
        if (*v == '\'') buf_puts(b, "'\\''");
        else buf_append(b, v, 1);
    }
    buf_puts(b, "'");
}

static void sh_push(sh_scan *sc, int kind) {
    if (sc->depth + 1 >= SH_DEPTH) {
        sc->lost = "comes after quotes nested too deep to follow";
        return;
    }
    sc->depth++;
    sc->kind[sc->depth] = (unsigned char)kind;
    sc->parens[sc->depth] = sc->has_case[sc->depth] = 0;
}

static void sh_pop(sh_scan *sc) {
    if (sc->depth > 0) sc->depth--;
}

/* 1 when c ends a word for the shell (so '#' or a keyword may follow). */
static int sh_breaks_word(char c) { return !c || strchr(" \t\n;&|()<>", c) != NULL; }

/* Copies the template's text at *pp that is not a placeholder (one
 * character, an escape pair, a whole "${...}", "$(" or "$'") into b and
 * moves the scan's state over it. */
static void sh_copy(util_buf *b, sh_scan *sc, const char *tmpl, const char **pp) {
    const char *p = *pp;
    char prev = p > tmpl ? p[-1] : 0;
    int k = sc->kind[sc->depth];
    size_t take = 1;
    if (sc->comment) {
        if (*p == '\n') sc->comment = 0;
    } else if (k == SH_SINGLE) {
        if (*p == '\'') sh_pop(sc);
    } else if (*p == '\\' && p[1]) {
        take = 2;
    } else if (k == SH_BACK) {
        if (*p == '`') sh_pop(sc);
    } else if (*p == '$' && p[1] == '{') {
        const char *close = strchr(p, '}');
        take = close ? (size_t)(close - p + 1) : strlen(p);
        size_t inner = close ? (size_t)(close - p - 2) : 0; /* between "${" and "}" */
        if (!close || strcspn(p + 2, "'\"`\\$") < inner)
            sc->lost = "comes after a ${...} with quotes or expansions in it";
    } else if (*p == '$' && p[1] == '(') {
        take = 2;
        sh_push(sc, SH_WORD);
    } else if (k == SH_DOUBLE) {
        if (*p == '"') sh_pop(sc);
        else if (*p == '`') sh_push(sc, SH_BACK);
    } else if (*p == '$' && p[1] == '\'') {
        take = 2;
        sc->lost = "comes after $'...', which shells read differently";
        sh_push(sc, SH_SINGLE);
    } else if (*p == '\'') {
        sh_push(sc, SH_SINGLE);
    } else if (*p == '"') {
        sh_push(sc, SH_DOUBLE);
    } else if (*p == '`') {
        sh_push(sc, SH_BACK);
    } else if (*p == '#' && sh_breaks_word(prev)) {
        sc->comment = 1;
    } else if (*p == '<' && p[1] == '<') {
        take = 2;
        sc->lost = "comes after a here-document's <<";
    } else if (sc->depth > 0 && sh_breaks_word(prev) && !strncmp(p, "case", 4) && sh_breaks_word(p[4])) {
        take = 4;
        sc->has_case[sc->depth] = 1;
    } else if (*p == '(' && sc->depth > 0) {
        sc->parens[sc->depth]++;
    } else if (*p == ')' && sc->depth > 0) {
        if (sc->parens[sc->depth]) {
            sc->parens[sc->depth]--;
        } else {
            if (sc->has_case[sc->depth]) sc->lost = "comes after a $(...) with a case in it";
            sh_pop(sc);
        }
    }
    buf_append(b, p, take);
    *pp = p + take;
}

/* The start command: tmpl with each "{name}" replaced by its value, one
 * literal word for the shell (see above); "{port}" kept. NULL on failure:
 * *bad = the placeholder's name (malloc'd), with *why = NULL when it is not
 * a dimension, or why it may not stand where it is; both NULL on nomem. */
static char *substitute_shell(const char *tmpl, char *const *names, const char *const *values, size_t n, char **bad,
                              const char **why) {
    util_buf b = {0};
    sh_scan sc;
    memset(&sc, 0, sizeof sc);
    *bad = NULL;
    *why = NULL;
    for (const char *p = tmpl; *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        size_t len = close ? (size_t)(close - p - 1) : 0;
        if (!close || !name_ok(p + 1, len)) {
            sh_copy(&b, &sc, tmpl, &p);
            continue;
        }
        if (len == 4 && !strncmp(p + 1, "port", 4)) {
            buf_puts(&b, "{port}");
        } else {
            size_t i = name_index(names, n, p + 1, len);
            if (i == n || (*why = sh_refusal(&sc)) != NULL) {
                *bad = util_strndup(p + 1, len);
                buf_free(&b);
                return NULL;
            }
            sh_put_word(&b, values[i]);
        }
        p = close + 1;
    }
    char *out = buf_steal(&b);
    return out ? out : util_strdup("");
}

static char *substitute(const char *tmpl, char *const *names, const char *const *values, size_t n, char **bad) {
    return substitute_f(tmpl, names, values, n, 0, bad);
}

int drift_matrix_server_same(const drift_matrix_server *a, const drift_matrix_server *b) {
    return a && b && a->start && b->start && !strcmp(a->start, b->start) && a->health && b->health &&
           !strcmp(a->health, b->health);
}

/* The "server" object js at `field` into out, its start command's
 * placeholders filled from names/values ("{port}" kept). */
static drift_status parse_server(json_t *js, const char *name, const char *field, char *const *names,
                                 const char *const *values, size_t n, drift_matrix_server *out, drift_error *err) {
    char f[192];
    if (!json_is_object(js)) return perr(err, name, field, "must be an object {\"start\": \"command with {port}\", ...}");
    const char *k;
    json_t *v;
    json_object_foreach(js, k, v) {
        if (strcmp(k, "start") && strcmp(k, "health") && strcmp(k, "ready_timeout_s")) {
            snprintf(f, sizeof f, "%s.%s", field, k);
            return perr(err, name, f, "unknown key (start, health, ready_timeout_s)");
        }
    }
    json_t *start = json_object_get(js, "start"), *health = json_object_get(js, "health");
    json_t *rt = json_object_get(js, "ready_timeout_s");
    snprintf(f, sizeof f, "%s.start", field);
    if (!json_is_string(start) || !*json_string_value(start))
        return perr(err, name, f, "missing or not a string (the shell command that starts the server)");
    if (!strstr(json_string_value(start), "{port}"))
        return perr(err, name, f, "must use {port} (the free port DriftBench picks; pass it to the server's --port)");
    snprintf(f, sizeof f, "%s.health", field);
    if (health && (!json_is_string(health) || json_string_value(health)[0] != '/' ||
                   strpbrk(json_string_value(health), " \t\r\n")))
        return perr(err, name, f, "must be a path starting with '/' (e.g. \"/health\")");
    snprintf(f, sizeof f, "%s.ready_timeout_s", field);
    if (rt && (!json_is_number(rt) || !(json_number_value(rt) > 0) || json_number_value(rt) > 86400))
        return perr(err, name, f, "must be a number of seconds in (0, 86400]");
    char *bad = NULL;
    const char *why = NULL;
    char *cmd = substitute_shell(json_string_value(start), names, values, n, &bad, &why);
    if (!cmd) {
        snprintf(f, sizeof f, "%s.start", field);
        drift_status rc =
            !bad ? drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory")
            : why ? drift_error_set(err, DRIFT_ERR_PARSE,
                                    "%s: %s: placeholder {%s} %s: a value may only stand in a bare word, where "
                                    "DriftBench quotes it (write {%s} without quotes; to give it to a command in a "
                                    "string, pass it as an argument: sh -c '... \"$1\" ...' sh {%s})",
                                    name, f, bad, why, bad, bad)
                  : drift_error_set(err, DRIFT_ERR_PARSE, "%s: %s: placeholder {%s} is not a dimension", name, f, bad);
        free(bad);
        return rc;
    }
    out->start = cmd;
    out->health = util_strdup(health ? json_string_value(health) : "/health");
    out->ready_timeout_s = rt ? json_number_value(rt) : 120;
    if (!out->health) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

/* A target and its server agree on "{port}": a server needs the target to
 * use it, and without one it is unknown. */
static drift_status check_port(const char *target, int has_server, const char *name, const char *field,
                               drift_error *err) {
    int uses = strstr(target, "{port}") != NULL;
    if (has_server && !uses)
        return perr(err, name, field, "must use {port} (the port of the server the matrix starts), e.g. "
                                      "http://127.0.0.1:{port}/v1?model=m");
    if (!has_server && uses) return perr(err, name, field, "uses {port}, which is only known with a \"server\" to start");
    return DRIFT_OK;
}

char *drift_matrix_baseline_for(const char *baseline, const drift_matrix_config *c) {
    if (!baseline) return NULL;
    char *bad = NULL;
    char *s = substitute(baseline, c->dim_names, (const char *const *)c->dim_values, c->n_dims, &bad);
    if (!s) {
        /* an unknown placeholder is kept literally: the label will not exist */
        free(bad);
        return util_strdup(baseline);
    }
    return s;
}

char *drift_matrix_config_dims(const drift_matrix_config *c) {
    util_buf b = {0};
    for (size_t i = 0; i < c->n_dims; i++) buf_printf(&b, "%s%s=%s", i ? "," : "", c->dim_names[i], c->dim_values[i]);
    return buf_steal(&b);
}

/* A dimension key may only use a-z, 0-9, '_' and '-' (as --config keys);
 * a level may not hold ',' or '=' (it travels in "k=v,k=v"). */
static int key_ok(const char *k) {
    if (!*k || !strcmp(k, "port")) return 0; /* {port} is the server's */
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_' || *k == '-')) return 0;
    return 1;
}
static int level_ok(const char *v) { return *v && !strchr(v, ',') && !strchr(v, '='); }

static drift_status parse_decoding(json_t *d, const char *name, drift_matrix_spec *s, drift_error *err) {
    if (!d) return DRIFT_OK;
    if (!json_is_object(d)) return perr(err, name, "decoding", "must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) {
        char field[96];
        snprintf(field, sizeof field, "decoding.%s", k);
        if (!json_is_number(v)) return perr(err, name, field, "must be a number");
        double x = json_number_value(v);
        if (!strcmp(k, "temperature")) {
            if (x < 0 || x > 10) return perr(err, name, field, "must be in [0, 10]");
            s->temperature = x;
        } else if (!strcmp(k, "top_p")) {
            if (x <= 0 || x > 1) return perr(err, name, field, "must be in (0, 1]");
            s->top_p = x;
        } else if (!strcmp(k, "seed")) {
            if (!json_is_integer(v)) return perr(err, name, field, "must be an integer");
            s->seed = json_integer_value(v);
        } else if (!strcmp(k, "max_tokens")) {
            if (!json_is_integer(v) || x < 1 || x > 1000000) return perr(err, name, field, "must be an integer >= 1");
            s->max_tokens = (int)x;
        } else if (!strcmp(k, "replicates")) {
            if (!json_is_integer(v) || x < 1 || x > 1000) return perr(err, name, field, "must be an integer in 1..1000");
            s->replicates = (int)x;
        } else if (!strcmp(k, "baseline_logprobs")) {
            if (!json_is_integer(v) || x < 0 || x > 20) return perr(err, name, field, "must be an integer in 0..20");
            s->baseline_logprobs = (int)x;
        } else {
            return perr(err, name, field,
                        "unknown key (temperature, top_p, seed, max_tokens, replicates, baseline_logprobs)");
        }
    }
    return DRIFT_OK;
}

/* The request fields of obj (at prefix: "" or "configs[2].") into *out. */
static drift_status parse_request(const json_t *obj, const char *name, const char *prefix, util_request_fields *out,
                                  drift_error *err) {
    const char *bad_key = NULL, *bad_sub = NULL;
    char why[256], field[300];
    if (!util_request_from_fields(obj, out, &bad_key, &bad_sub, why, sizeof why)) return DRIFT_OK;
    if (!bad_key) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    snprintf(field, sizeof field, "%s%s%s%s", prefix, bad_key, bad_sub ? "." : "", bad_sub ? bad_sub : "");
    return perr(err, name, field, why);
}

/* c's request control: its own fields (taken from own), the defaults' for
 * the ones it lacks (copied); headers by name, as a measure target's over
 * the file's shared ones: the defaults' whose name c's own do not have,
 * then c's own (util_headers_over). */
static drift_status config_request(drift_matrix_config *c, util_request_fields *own, const util_request_fields *dflt,
                                   drift_error *err) {
    c->system_prompt = own->system_prompt ? own->system_prompt : util_strdup(dflt->system_prompt);
    c->prompt_template = own->prompt_template ? own->prompt_template : util_strdup(dflt->prompt_template);
    c->extra_body_json = own->extra_body_json ? own->extra_body_json : util_strdup(dflt->extra_body_json);
    own->system_prompt = own->prompt_template = own->extra_body_json = NULL;
    int nomem = (dflt->system_prompt && !c->system_prompt) || (dflt->prompt_template && !c->prompt_template) ||
                (dflt->extra_body_json && !c->extra_body_json);
    size_t n = dflt->n_headers + own->n_headers;
    const char **merged = n ? calloc(n, sizeof *merged) : NULL;
    if (n && (!merged || !(c->headers = calloc(n, sizeof(char *))))) nomem = 1;
    if (n && !nomem) {
        size_t m = util_headers_over((const char *const *)dflt->headers, dflt->n_headers,
                                     (const char *const *)own->headers, own->n_headers, merged);
        for (size_t i = 0; i < m; i++, c->n_headers++)
            if (!(c->headers[i] = util_strdup(merged[i]))) nomem = 1;
    }
    free(merged);
    util_request_fields_free(own);
    return nomem ? drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory") : DRIFT_OK;
}

static drift_status parse_explicit(json_t *arr, const char *name, drift_matrix_spec *s, size_t *cap,
                                   const util_request_fields *dflt, drift_error *err) {
    if (!json_is_array(arr)) return perr(err, name, "configs", "must be an array");
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        char field[96];
        snprintf(field, sizeof field, "configs[%zu]", i);
        if (!json_is_object(c)) return perr(err, name, field, "must be an object");
        const char *ck;
        json_t *cv;
        json_object_foreach(c, ck, cv) {
            if (!strcmp(ck, "label") || !strcmp(ck, "dims") || !strcmp(ck, "server") || !strcmp(ck, "description") ||
                util_target_field(ck) || util_request_field(ck))
                continue;
            snprintf(field, sizeof field, "configs[%zu].%s", i, ck);
            return perr(err, name, field,
                        "unknown key (known: label, target, dims, server, description, url, model, api, api_key_env, "
                        "embed_model, detect, allow_insecure_key, system_prompt, template, headers, extra_body)");
        }
        json_t *label = json_object_get(c, "label");
        json_t *dims = json_object_get(c, "dims");
        snprintf(field, sizeof field, "configs[%zu].label", i);
        if (!json_is_string(label) || !*json_string_value(label)) return perr(err, name, field, "missing or not a string");
        char *target = NULL, why[256];
        const char *bad_key = NULL;
        int tf = util_target_from_fields(c, &target, &bad_key, why, sizeof why);
        if (tf < 0 && !bad_key) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        snprintf(field, sizeof field, "configs[%zu].%s", i, tf < 0 ? bad_key : "target");
        if (tf < 0) return perr(err, name, field, why);
        if (!tf) return perr(err, name, field, "missing (give target, or url with model, api, ...)");
        snprintf(field, sizeof field, "configs[%zu].dims", i);
        if (dims && !json_is_object(dims)) {
            free(target);
            return perr(err, name, field, "must be an object of strings");
        }
        if (push_config(s, cap)) {
            free(target);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        drift_matrix_config *mc = &s->configs[s->n_configs - 1];
        mc->label = util_strdup(json_string_value(label));
        mc->target = target;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "configs[%zu].", i);
        util_request_fields own;
        drift_status qrc = parse_request(c, name, prefix, &own, err);
        if (!qrc) qrc = config_request(mc, &own, dflt, err);
        if (qrc) return qrc;
        size_t nd = dims ? json_object_size(dims) : 0;
        mc->dim_names = calloc(nd ? nd : 1, sizeof(char *));
        mc->dim_values = calloc(nd ? nd : 1, sizeof(char *));
        if (!mc->dim_names || !mc->dim_values) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        const char *k;
        json_t *v;
        if (dims) json_object_foreach(dims, k, v) {
            snprintf(field, sizeof field, "configs[%zu].dims.%s", i, k);
            if (!key_ok(k))
                return perr(err, name, field, "dimension names use only a-z, 0-9, '_' and '-' (and \"port\" is the server's)");
            if (!json_is_string(v) || !level_ok(json_string_value(v)))
                return perr(err, name, field, "must be a non-empty string without ',' or '='");
            mc->dim_names[mc->n_dims] = util_strdup(k);
            mc->dim_values[mc->n_dims] = util_strdup(json_string_value(v));
            mc->n_dims++;
        }
        json_t *server = json_object_get(c, "server");
        if (server) {
            snprintf(field, sizeof field, "configs[%zu].server", i);
            drift_status rc = parse_server(server, name, field, mc->dim_names, (const char *const *)mc->dim_values,
                                           mc->n_dims, &mc->server, err);
            if (rc) return rc;
        }
        snprintf(field, sizeof field, "configs[%zu].target", i);
        drift_status rc = check_port(mc->target, server != NULL, name, field, err);
        if (rc) return rc;
    }
    return DRIFT_OK;
}

typedef struct dim_levels {
    const char *name;
    size_t n;
    const char **names;   /* level names */
    const char **texts;   /* substituted into the target */
} dim_levels;

static int excluded(json_t *exclude, const dim_levels *d, size_t nd, const size_t *idx) {
    size_t i;
    json_t *rule;
    json_array_foreach(exclude, i, rule) {
        int all = 1;
        const char *k;
        json_t *v;
        json_object_foreach(rule, k, v) {
            size_t j;
            for (j = 0; j < nd; j++)
                if (!strcmp(d[j].name, k)) break;
            if (j == nd || strcmp(d[j].names[idx[j]], json_string_value(v))) {
                all = 0;
                break;
            }
        }
        if (all) return 1;
    }
    return 0;
}

static drift_status parse_product(json_t *root, const char *name, drift_matrix_spec *s, size_t *cap,
                                  const util_request_fields *dflt, drift_error *err) {
    json_t *dims = json_object_get(root, "dimensions");
    json_t *target = json_object_get(root, "target"), *label = json_object_get(root, "label");
    json_t *exclude = json_object_get(root, "exclude"), *server = json_object_get(root, "server");
    if (!dims) {
        if (target) return perr(err, name, "dimensions", "missing (a target template needs dimensions)");
        if (server)
            return perr(err, name, "server",
                        "is the product's (it needs \"dimensions\"); an explicit configuration takes its own \"server\"");
        return DRIFT_OK;
    }
    if (!json_is_object(dims) || !json_object_size(dims)) return perr(err, name, "dimensions", "must be a non-empty object");
    if (!json_is_string(target)) return perr(err, name, "target", "missing or not a string (the template of the product)");
    if (label && !json_is_string(label)) return perr(err, name, "label", "must be a string");
    if (exclude && !json_is_array(exclude)) return perr(err, name, "exclude", "must be an array of objects");
    {
        drift_status prc = check_port(json_string_value(target), server != NULL, name, "target", err);
        if (prc) return prc;
    }
    size_t nd = json_object_size(dims);
    dim_levels *d = calloc(nd, sizeof *d);
    size_t *idx = calloc(nd, sizeof *idx);
    drift_status rc = DRIFT_OK;
    char field[160];
    if (!d || !idx) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t j = 0;
    const char *k;
    json_t *v;
    json_object_foreach(dims, k, v) {
        snprintf(field, sizeof field, "dimensions.%s", k);
        if (!key_ok(k)) {
            rc = perr(err, name, field, "dimension names use only a-z, 0-9, '_' and '-' (and \"port\" is the server's)");
            goto out;
        }
        size_t n = json_is_array(v) ? json_array_size(v) : json_is_object(v) ? json_object_size(v) : 0;
        if (!n) {
            rc = perr(err, name, field, "must be a non-empty array of level names or object {level: text}");
            goto out;
        }
        d[j].name = k;
        d[j].n = n;
        d[j].names = calloc(n, sizeof(char *));
        d[j].texts = calloc(n, sizeof(char *));
        if (!d[j].names || !d[j].texts) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            goto out;
        }
        size_t li = 0;
        if (json_is_array(v)) {
            json_t *lv;
            json_array_foreach(v, li, lv) {
                if (!json_is_string(lv) || !level_ok(json_string_value(lv))) {
                    snprintf(field, sizeof field, "dimensions.%s[%zu]", k, li);
                    rc = perr(err, name, field, "must be a non-empty string without ',' or '='");
                    goto out;
                }
                d[j].names[li] = d[j].texts[li] = json_string_value(lv);
            }
        } else {
            const char *lk;
            json_t *lv;
            json_object_foreach(v, lk, lv) {
                snprintf(field, sizeof field, "dimensions.%s.%s", k, lk);
                if (!level_ok(lk)) {
                    rc = perr(err, name, field, "a level name may not be empty or hold ',' or '='");
                    goto out;
                }
                if (!json_is_string(lv)) {
                    rc = perr(err, name, field, "must be a string (the text put into the target)");
                    goto out;
                }
                d[j].names[li] = lk;
                d[j].texts[li] = json_string_value(lv);
                li++;
            }
        }
        j++;
    }
    if (exclude) {
        size_t i;
        json_t *rule;
        json_array_foreach(exclude, i, rule) {
            snprintf(field, sizeof field, "exclude[%zu]", i);
            if (!json_is_object(rule) || !json_object_size(rule)) {
                rc = perr(err, name, field, "must be a non-empty object {dimension: level}");
                goto out;
            }
            json_object_foreach(rule, k, v) {
                size_t q;
                for (q = 0; q < nd; q++)
                    if (!strcmp(d[q].name, k)) break;
                snprintf(field, sizeof field, "exclude[%zu].%s", i, k);
                if (q == nd || !json_is_string(v)) {
                    rc = perr(err, name, field, q == nd ? "not a dimension" : "must be a string");
                    goto out;
                }
            }
        }
    }
    char **dn = calloc(nd, sizeof(char *));
    const char **names = calloc(nd, sizeof(char *)), **texts = calloc(nd, sizeof(char *));
    if (!dn || !names || !texts) {
        free(dn);
        free(names);
        free(texts);
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t q = 0; q < nd; q++) dn[q] = (char *)d[q].name;
    for (;;) {
        if (!exclude || !excluded(exclude, d, nd, idx)) {
            for (size_t q = 0; q < nd; q++) {
                names[q] = d[q].names[idx[q]];
                texts[q] = d[q].texts[idx[q]];
            }
            char *bad = NULL;
            char *tg = substitute_f(json_string_value(target), dn, texts, nd, SUB_KEEP_PORT, &bad);
            char *lb = NULL;
            if (tg) {
                if (label) {
                    lb = substitute(json_string_value(label), dn, names, nd, &bad);
                } else {
                    util_buf b = {0};
                    for (size_t q = 0; q < nd; q++) buf_printf(&b, "%s%s", q ? "/" : "", names[q]);
                    lb = buf_steal(&b);
                }
            }
            if (!tg || !lb) {
                rc = bad ? drift_error_set(err, DRIFT_ERR_PARSE, "%s: %s: placeholder {%s} is not a dimension", name,
                                           tg ? "label" : "target", bad)
                         : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                free(bad);
                free(tg);
                free(lb);
                break;
            }
            if (push_config(s, cap)) {
                free(tg);
                free(lb);
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                break;
            }
            drift_matrix_config *mc = &s->configs[s->n_configs - 1];
            mc->label = lb;
            mc->target = tg;
            mc->dim_names = calloc(nd, sizeof(char *));
            mc->dim_values = calloc(nd, sizeof(char *));
            if (!mc->dim_names || !mc->dim_values) {
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                break;
            }
            mc->n_dims = nd;
            for (size_t q = 0; q < nd; q++) {
                mc->dim_names[q] = util_strdup(d[q].name);
                mc->dim_values[q] = util_strdup(names[q]);
            }
            util_request_fields none = {0};
            if ((rc = config_request(mc, &none, dflt, err))) break;
            if (server && (rc = parse_server(server, name, "server", dn, texts, nd, &mc->server, err))) break;
        }
        /* odometer: last dimension fastest */
        int done = 1;
        for (size_t q = nd; q-- > 0;) {
            if (++idx[q] < d[q].n) {
                done = 0;
                break;
            }
            idx[q] = 0;
        }
        if (done || rc) break;
    }
    free(dn);
    free(names);
    free(texts);
out:
    if (d)
        for (size_t q = 0; q < nd; q++) {
            free(d[q].names);
            free(d[q].texts);
        }
    free(d);
    free(idx);
    return rc;
}

/* The spec of a parsed tree (root: borrowed). */
static drift_status spec_from_root(json_t *root, const char *name, drift_matrix_spec **out, drift_error *err) {
    drift_matrix_spec *s = calloc(1, sizeof *s);
    size_t cap = 0;
    drift_status rc = DRIFT_OK;
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    s->top_p = 1;
    s->seed = 42;
    s->max_tokens = 512;
    s->replicates = 1;
    if (!json_is_object(root)) {
        rc = perr(err, name, "(top level)", "must be an object (a mapping)");
        goto fail;
    }
    static const char *const known[] = {"name",  "suites",      "limit",         "decoding", "baseline",
                                        "configs", "dimensions", "target",       "label",    "exclude",
                                        "description", "server", "system_prompt", "template", "headers",
                                        "extra_body"};
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        size_t i;
        for (i = 0; i < sizeof known / sizeof known[0]; i++)
            if (!strcmp(k, known[i])) break;
        if (i == sizeof known / sizeof known[0]) {
            rc = perr(err, name, k,
                      "unknown field (known: name, description, suites, limit, decoding, baseline, configs, "
                      "dimensions, target, label, exclude, server, system_prompt, template, headers, extra_body)");
            goto fail;
        }
    }
    json_t *nm = json_object_get(root, "name");
    if (nm && !json_is_string(nm)) {
        rc = perr(err, name, "name", "must be a string");
        goto fail;
    }
    s->name = util_strdup(nm ? json_string_value(nm) : "matrix");
    json_t *suites = json_object_get(root, "suites");
    if (!json_is_array(suites) || !json_array_size(suites)) {
        rc = perr(err, name, "suites", "missing or empty (e.g. [\"builtin:math\"])");
        goto fail;
    }
    s->suites = calloc(json_array_size(suites), sizeof(char *));
    if (!s->suites) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t i;
    json_array_foreach(suites, i, v) {
        if (!json_is_string(v) || !*json_string_value(v)) {
            char field[64];
            snprintf(field, sizeof field, "suites[%zu]", i);
            rc = perr(err, name, field, "must be a non-empty string");
            goto fail;
        }
        s->suites[s->n_suites++] = util_strdup(json_string_value(v));
    }
    json_t *limit = json_object_get(root, "limit");
    if (limit) {
        if (!json_is_integer(limit) || json_integer_value(limit) < 0) {
            rc = perr(err, name, "limit", "must be an integer >= 0");
            goto fail;
        }
        s->limit = (long)json_integer_value(limit);
    }
    if ((rc = parse_decoding(json_object_get(root, "decoding"), name, s, err))) goto fail;
    json_t *base = json_object_get(root, "baseline");
    if (!json_is_string(base) || !*json_string_value(base)) {
        rc = perr(err, name, "baseline", "missing or not a string (the label of the baseline configuration)");
        goto fail;
    }
    s->baseline = util_strdup(json_string_value(base));
    json_t *configs = json_object_get(root, "configs");
    util_request_fields dflt;
    if ((rc = parse_request(root, name, "", &dflt, err))) goto fail;
    if (configs) rc = parse_explicit(configs, name, s, &cap, &dflt, err);
    if (!rc) rc = parse_product(root, name, s, &cap, &dflt, err);
    util_request_fields_free(&dflt);
    if (rc) goto fail;
    if (!s->n_configs) {
        rc = perr(err, name, "configs", "no configuration (give \"configs\" or \"dimensions\" + \"target\")");
        goto fail;
    }
    for (size_t a = 0; a < s->n_configs; a++)
        for (size_t b = a + 1; b < s->n_configs; b++)
            if (!strcmp(s->configs[a].label, s->configs[b].label)) {
                rc = drift_error_set(err, DRIFT_ERR_PARSE, "%s: configs: label '%s' is used twice (configurations %zu and %zu)",
                                     name, s->configs[a].label, a, b);
                goto fail;
            }
    /* every configuration's baseline must be one of the configurations */
    for (size_t a = 0; a < s->n_configs; a++) {
        char *bl = drift_matrix_baseline_for(s->baseline, &s->configs[a]);
        int found = 0;
        for (size_t b = 0; bl && b < s->n_configs && !found; b++) found = !strcmp(bl, s->configs[b].label);
        if (!found) {
            rc = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s: baseline: '%s' (for configuration '%s') is not the label of any configuration",
                                 name, bl ? bl : s->baseline, s->configs[a].label);
            free(bl);
            goto fail;
        }
        free(bl);
    }
    *out = s;
    return DRIFT_OK;
fail:
    drift_matrix_spec_free(s);
    return rc;
}

drift_status drift_matrix_spec_parse(const char *text, size_t len, const char *name, drift_matrix_spec **out,
                                     drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "matrix spec: no output");
    *out = NULL;
    if (!name) name = "matrix spec";
    json_error_t jerr;
    json_t *root = json_loadb(text ? text : "", text ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d:%d: not valid JSON: %s", name, jerr.line, jerr.column,
                               jerr.text);
    drift_status rc = spec_from_root(root, name, out, err);
    json_decref(root);
    return rc;
}

drift_status matrix_spec_from_tree(json_t *root, const char *name, const util_yaml_locator *loc,
                                   drift_matrix_spec **out, drift_error *err) {
    *out = NULL;
    if (!name) name = "matrix spec";
    drift_status rc = spec_from_root(root, name, out, err);
    /* every message of a bad field is "NAME: FIELD: what": put the line in */
    size_t nl = strlen(name);
    if (rc == DRIFT_ERR_PARSE && loc && !strncmp(err->msg, name, nl) && !strncmp(err->msg + nl, ": ", 2)) {
        const char *field = err->msg + nl + 2, *end = strstr(field, ": ");
        char *path = end ? util_strndup(field, (size_t)(end - field)) : NULL;
        int line = path ? util_yaml_path_line(loc, root, path) : 0;
        if (line > 0) {
            char *rest = util_strdup(field);
            if (rest) drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: %s", name, line, rest);
            free(rest);
        }
        free(path);
    }
    return rc;
}

/* 1 when path names a YAML file (.yaml, .yml). */
static int yaml_name(const char *path) {
    size_t n = strlen(path);
    return (n > 5 && !strcmp(path + n - 5, ".yaml")) || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

drift_status drift_matrix_spec_load(const char *path, drift_matrix_spec **out, drift_error *err) {
    char *text = NULL;
    size_t len = 0;
    if (out) *out = NULL;
    drift_status rc = util_read_file(path, &text, &len, err);
    if (rc) return rc;
    if (!yaml_name(path)) {
        rc = drift_matrix_spec_parse(text, len, path, out, err);
        free(text);
        return rc;
    }
    json_t *root = NULL;
    util_yaml_locator *loc = NULL;
    rc = util_yaml_parse(text, len, path, NULL, &root, &loc, err);
    free(text);
    if (rc) return rc;
    rc = matrix_spec_from_tree(root, path, loc, out, err);
    json_decref(root);
    util_yaml_locator_free(loc);
    return rc;
}

drift_status drift_matrix_shard_parse(const char *s, int *index, int *count, drift_error *err) {
    char *end = NULL;
    long i = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end != '/')
        return drift_error_set(err, DRIFT_ERR_INVALID, "--shard: '%s' is not I/N (e.g. 3/8)", s ? s : "");
    const char *p = end + 1;
    long n = strtol(p, &end, 10);
    if (end == p || *end || n < 1 || n > DRIFT_MATRIX_SHARD_MAX || i < 1 || i > n)
        return drift_error_set(err, DRIFT_ERR_INVALID, "--shard: '%s' must be I/N with 1 <= I <= N <= %d", s,
                               DRIFT_MATRIX_SHARD_MAX);
    *index = (int)i;
    *count = (int)n;
    return DRIFT_OK;
}

int drift_matrix_in_shard(size_t config_index, int index, int count) {
    if (count <= 1) return 1;
    return (int)(config_index % (size_t)count) == index - 1;
}
