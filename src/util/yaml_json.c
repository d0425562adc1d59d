/* yaml_json.c - YAML text -> jansson tree + locator, over libyaml's event
 * parser (libyaml reads YAML 1.1 syntax; the values are typed here by the
 * YAML 1.2 core schema, which is what a config writer expects today).
 *
 * Scalars:
 *   quoted ('...', "..."), literal (|) and folded (>): strings, always.
 *   plain, by the 1.2 core schema:
 *     null, Null, NULL, ~, nothing        -> null
 *     true/True/TRUE, false/False/FALSE    -> true, false (yes/no/on/off
 *                                             are strings, as in 1.2)
 *     [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+ -> integer (out of int64: error)
 *     [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)? -> real
 *     .inf, .nan and overflowing reals     -> error (JSON holds no such number)
 *     anything else                         -> string
 *   tags: !!str, !!int, !!float, !!bool, !!null on scalars (the value must
 *   read as that type), !!map, !!seq on collections, "!" (a string); any
 *   other tag is refused.
 * Mappings: keys are scalars (their text: `200: x` has the key "200"); a
 *   key given twice is refused with both lines; "<<" (a plain key) merges
 *   a mapping, or a sequence of mappings, as YAML 1.1's merge key: keys of
 *   the mapping itself win, then earlier merged mappings over later ones.
 * Anchors and aliases: an alias is a copy of its anchor's node (copies
 *   count against max_nodes, so a "billion laughs" document stops at the
 *   cap); an alias inside the node it names is refused.
 * Refused too: a second document, a string holding NUL (the readers use C
 *   strings), a document past the caps (yaml_json.h).
 *
 * The locator maps each json_t* of the tree (one node per place: aliases
 * are copies) to where it was written, in a pointer-keyed hash table. */
#include "util/yaml_json.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/util.h"

/* ---- the locator ---- */

/* One member of a mapping (key) or item of a sequence (key NULL, index):
 * where its key and its value were written. true, false and null are one
 * shared node each in jansson, so places are kept per member, not per
 * node. */
typedef struct loc_entry {
    const json_t *parent; /* NULL with key NULL: the root */
    char *key;
    size_t index;
    int used;
    int kline, kcol, line, col;
} loc_entry;

struct util_yaml_locator {
    loc_entry *slot;
    size_t cap, n; /* cap a power of two */
};

static size_t loc_hash(const json_t *parent, const char *key, size_t index, size_t cap) {
    uint64_t x = (uint64_t)(uintptr_t)parent * 0x9e3779b97f4a7c15ULL;
    if (key) x ^= util_fnv1a64(key, strlen(key), 0);
    else x ^= (uint64_t)index * 0xff51afd7ed558ccdULL;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 29;
    return (size_t)x & (cap - 1);
}

static int loc_same(const loc_entry *e, const json_t *parent, const char *key, size_t index) {
    if (e->parent != parent) return 0;
    if (!key || !e->key) return !key && !e->key && e->index == index;
    return !strcmp(e->key, key);
}

static loc_entry *loc_find(const util_yaml_locator *l, const json_t *parent, const char *key, size_t index) {
    if (!l || !l->cap) return NULL;
    for (size_t i = loc_hash(parent, key, index, l->cap);; i = (i + 1) & (l->cap - 1)) {
        if (!l->slot[i].used) return NULL;
        if (loc_same(&l->slot[i], parent, key, index)) return &l->slot[i];
    }
}

/* Records where a member was written (kline/kcol: its key's place, the
 * value's for an item). 0 ok, -1 nomem. */
static int loc_put(util_yaml_locator *l, const json_t *parent, const char *key, size_t index, int kline, int kcol,
                   int line, int col) {
    if ((l->n + 1) * 2 > l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 256;
        loc_entry *ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (size_t i = 0; i < l->cap; i++) {
            if (!l->slot[i].used) continue;
            size_t j = loc_hash(l->slot[i].parent, l->slot[i].key, l->slot[i].index, nc);
            while (ns[j].used) j = (j + 1) & (nc - 1);
            ns[j] = l->slot[i];
        }
        free(l->slot);
        l->slot = ns;
        l->cap = nc;
    }
    size_t i = loc_hash(parent, key, index, l->cap);
    while (l->slot[i].used && !loc_same(&l->slot[i], parent, key, index)) i = (i + 1) & (l->cap - 1);
    loc_entry *e = &l->slot[i];
    if (!e->used) {
        char *k = key ? util_strdup(key) : NULL;
        if (key && !k) return -1;
        *e = (loc_entry){.parent = parent, .key = k, .index = index, .used = 1};
        l->n++;
    }
    e->kline = kline;
    e->kcol = kcol;
    e->line = line;
    e->col = col;
    return 0;
}

void util_yaml_locator_free(util_yaml_locator *loc) {
    if (!loc) return;
    for (size_t i = 0; i < loc->cap; i++) free(loc->slot[i].key);
    free(loc->slot);
    free(loc);
}

int util_yaml_where(const util_yaml_locator *loc, const json_t *parent, const char *key, size_t index, int *line,
                    int *col) {
    const loc_entry *e = loc_find(loc, parent, key, index);
    if (!e) return 0;
    if (line) *line = e->kline;
    if (col) *col = e->kcol;
    return 1;
}

int util_yaml_path_line(const util_yaml_locator *loc, const json_t *root, const char *path) {
    if (!loc || !root) return 0;
    const json_t *at = root;
    int line = 0;
    util_yaml_where(loc, NULL, NULL, 0, &line, NULL);
    const char *p = path ? path : "";
    while (*p && at) {
        const json_t *next = NULL;
        int l = 0;
        if (*p == '[') {
            char *end = NULL;
            unsigned long i = strtoul(p + 1, &end, 10);
            if (!end || *end != ']' || !json_is_array(at)) break;
            next = json_array_get(at, i);
            if (next) util_yaml_where(loc, at, NULL, i, &l, NULL);
            p = end + 1;
        } else {
            if (*p == '.') p++;
            size_t n = strcspn(p, ".[");
            if (!json_is_object(at) || !n) break;
            char *k = util_strndup(p, n);
            if (!k) break;
            next = json_object_get(at, k);
            if (next) util_yaml_where(loc, at, k, 0, &l, NULL);
            free(k);
            p += n;
        }
        if (!next) break;
        at = next;
        if (l) line = l;
    }
    return line;
}

/* ---- the parser's state ---- */

typedef struct anchor {
    char *name;
    json_t *node;  /* borrowed from the tree */
    int complete;  /* its end event was seen (an alias to an open one is a cycle) */
} anchor;

typedef struct frame {
    json_t *node;     /* the open sequence or mapping */
    char *key;        /* mapping: the key waiting for its value (NULL: a key is next) */
    int is_merge;     /* that key is the merge key "<<" */
    int kline, kcol;
    json_t *merges;   /* mapping: array of the mappings "<<" brought, in order */
    json_t *explicit_keys; /* mapping: object of the keys written in it (for merges) */
    long anchor;      /* index in anchors of this node's anchor, or -1 */
    int line, col;    /* where it starts */
} frame;

typedef struct yj {
    const char *name;
    util_yaml_limits lim;
    drift_error *err;
    util_yaml_locator *loc;
    frame *stack;
    size_t depth, stack_cap;
    anchor *anchors;
    size_t n_anchors, anchors_cap;
    json_t *anchor_index;     /* name -> index in anchors of its latest one */
    size_t nodes;
    json_t *root;
    int documents;
} yj;

static drift_status yj_fail(yj *s, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static drift_status yj_fail(yj *s, int line, int col, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return drift_error_set(s->err, DRIFT_ERR_PARSE, "%s:%d:%d: %s", s->name, line, col, what);
}

static drift_status yj_nomem(yj *s) { return drift_error_set(s->err, DRIFT_ERR_NOMEM, "out of memory"); }

static int mark_line(const yaml_mark_t *m) { return (int)m->line + 1; }
static int mark_col(const yaml_mark_t *m) { return (int)m->column + 1; }

static drift_status count_node(yj *s, int line, int col) {
    if (++s->nodes > s->lim.max_nodes)
        return yj_fail(s, line, col, "more than %zu nodes (aliases count as copies): refused", s->lim.max_nodes);
    return DRIFT_OK;
}

/* ---- scalars ---- */

static int all_in(const char *p, const char *set) { return *p && strspn(p, set) == strlen(p); }

static int is_null_text(const char *v) {
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}
static int bool_text(const char *v) { /* 1 true, 0 false, -1 neither */
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE")) return 1;
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE")) return 0;
    return -1;
}
static int is_int_text(const char *v) {
    if (!strncmp(v, "0o", 2)) return all_in(v + 2, "01234567");
    if (!strncmp(v, "0x", 2)) return all_in(v + 2, "0123456789abcdefABCDEF");
    if (*v == '-' || *v == '+') v++;
    return all_in(v, "0123456789");
}
static int is_float_text(const char *v) {
    if (*v == '-' || *v == '+') v++;
    size_t a = strspn(v, "0123456789");
    v += a;
    size_t b = 0;
    if (*v == '.') {
        v++;
        b = strspn(v, "0123456789");
        v += b;
    } else if (!a) {
        return 0;
    }
    if (!a && !b) return 0;
    if (*v == 'e' || *v == 'E') {
        v++;
        if (*v == '-' || *v == '+') v++;
        if (!all_in(v, "0123456789")) return 0;
        v += strlen(v);
    }
    return *v == 0;
}
static int is_special_float(const char *v) {
    if (*v == '-' || *v == '+') v++;
    return !strcmp(v, ".inf") || !strcmp(v, ".Inf") || !strcmp(v, ".INF") || !strcmp(v, ".nan") ||
           !strcmp(v, ".NaN") || !strcmp(v, ".NAN");
}

typedef enum { T_AUTO, T_STR, T_INT, T_FLOAT, T_BOOL, T_NULL } scalar_type;

static drift_status make_int(yj *s, const char *v, int line, int col, json_t **out) {
    errno = 0;
    char *end = NULL;
    long long x;
    if (!strncmp(v, "0o", 2)) x = strtoll(v + 2, &end, 8);
    else if (!strncmp(v, "0x", 2)) x = strtoll(v + 2, &end, 16);
    else x = strtoll(v, &end, 10);
    if (errno == ERANGE) return yj_fail(s, line, col, "integer '%.40s' is out of range (64 bits)", v);
    *out = json_integer((json_int_t)x);
    return *out ? DRIFT_OK : yj_nomem(s);
}

static drift_status make_float(yj *s, const char *v, int line, int col, json_t **out) {
    double x = is_special_float(v) ? NAN : strtod(v, NULL); /* strtod does not read ".inf" */
    if (!isfinite(x)) return yj_fail(s, line, col, "number '%.40s' is not finite (JSON holds no such number)", v);
    *out = json_real(x);
    return *out ? DRIFT_OK : yj_nomem(s);
}

/* The scalar event's value as a node. */
static drift_status scalar_node(yj *s, const yaml_event_t *ev, json_t **out) {
    const char *v = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    int line = mark_line(&ev->start_mark), col = mark_col(&ev->start_mark);
    const char *tag = (const char *)ev->data.scalar.tag;
    scalar_type t = T_AUTO;
    *out = NULL;
    if (memchr(v, 0, n)) return yj_fail(s, line, col, "a string holding a NUL character is refused");
    if (tag) {
        if (!strcmp(tag, "!") || !strcmp(tag, YAML_STR_TAG)) t = T_STR;
        else if (!strcmp(tag, YAML_INT_TAG)) t = T_INT;
        else if (!strcmp(tag, YAML_FLOAT_TAG)) t = T_FLOAT;
        else if (!strcmp(tag, YAML_BOOL_TAG)) t = T_BOOL;
        else if (!strcmp(tag, YAML_NULL_TAG)) t = T_NULL;
        else return yj_fail(s, line, col, "tag '%.60s' is not supported (!!str, !!int, !!float, !!bool, !!null)", tag);
    } else if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        t = T_STR;
    }
    if (t == T_AUTO) {
        int b;
        if (is_null_text(v)) t = T_NULL;
        else if ((b = bool_text(v)) >= 0) t = T_BOOL;
        else if (is_int_text(v)) t = T_INT;
        else if (is_float_text(v) || is_special_float(v)) t = T_FLOAT;
        else t = T_STR;
    }
    switch (t) {
    case T_NULL:
        if (!is_null_text(v)) return yj_fail(s, line, col, "'%.40s' is not null", v);
        *out = json_null();
        break;
    case T_BOOL: {
        int b = bool_text(v);
        if (b < 0) return yj_fail(s, line, col, "'%.40s' is not true or false", v);
        *out = json_boolean(b);
        break;
    }
    case T_INT:
        if (!is_int_text(v)) return yj_fail(s, line, col, "'%.40s' is not an integer", v);
        return make_int(s, v, line, col, out);
    case T_FLOAT:
        if (!is_float_text(v) && !is_int_text(v) && !is_special_float(v))
            return yj_fail(s, line, col, "'%.40s' is not a number", v);
        return make_float(s, v, line, col, out);
    default:
        *out = json_stringn(v, n);
        if (!*out) return yj_fail(s, line, col, "a string that is not valid UTF-8");
        break;
    }
    return *out ? DRIFT_OK : yj_nomem(s);
}

/* ---- the tree ---- */

static drift_status anchor_add(yj *s, const char *name, json_t *node, int complete) {
    if (!name) return DRIFT_OK;
    if (s->n_anchors == s->anchors_cap) {
        size_t nc = s->anchors_cap ? s->anchors_cap * 2 : 16;
        anchor *p = realloc(s->anchors, nc * sizeof *p);
        if (!p) return yj_nomem(s);
        s->anchors = p;
        s->anchors_cap = nc;
    }
    char *copy = util_strdup(name);
    if (!copy) return yj_nomem(s);
    if (!s->anchor_index && !(s->anchor_index = json_object())) {
        free(copy);
        return yj_nomem(s);
    }
    if (json_object_set_new(s->anchor_index, name, json_integer((json_int_t)s->n_anchors))) {
        free(copy);
        return yj_nomem(s);
    }
    s->anchors[s->n_anchors++] = (anchor){copy, node, complete};
    return DRIFT_OK;
}

/* The latest anchor of that name (a later one of the same name wins). */
static anchor *anchor_find(yj *s, const char *name) {
    json_t *i = s->anchor_index ? json_object_get(s->anchor_index, name) : NULL;
    return i ? &s->anchors[json_integer_value(i)] : NULL;
}

/* Copies the place of member (src, key, index) to (dst, key, index). */
static int loc_copy(util_yaml_locator *l, const json_t *src, const json_t *dst, const char *key, size_t index) {
    const loc_entry *e = loc_find(l, src, key, index);
    if (!e) return 0;
    loc_entry c = *e; /* loc_put may move the table */
    return loc_put(l, dst, key, index, c.kline, c.kcol, c.line, c.col);
}

/* A copy of node (deep), its members located where the original's were;
 * depth is where the copy lands. */
static drift_status copy_node(yj *s, const json_t *node, size_t depth, int line, int col, json_t **out) {
    *out = NULL;
    drift_status rc = count_node(s, line, col);
    if (rc) return rc;
    if (!json_is_object(node) && !json_is_array(node)) {
        *out = json_deep_copy(node);
        return *out ? DRIFT_OK : yj_nomem(s);
    }
    if (depth > s->lim.max_depth)
        return yj_fail(s, line, col, "nested deeper than %zu levels (aliases expanded): refused", s->lim.max_depth);
    json_t *c = json_is_object(node) ? json_object() : json_array();
    if (!c) return yj_nomem(s);
    if (json_is_object(node)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)node, k, v) {
            json_t *cv;
            if ((rc = copy_node(s, v, depth + 1, line, col, &cv))) break;
            if (json_object_set_new(c, k, cv) || loc_copy(s->loc, node, c, k, 0)) {
                rc = yj_nomem(s);
                break;
            }
        }
    } else {
        size_t i;
        json_t *v;
        json_array_foreach(node, i, v) {
            json_t *cv;
            if ((rc = copy_node(s, v, depth + 1, line, col, &cv))) break;
            if (json_array_append_new(c, cv) || loc_copy(s->loc, node, c, NULL, i)) {
                rc = yj_nomem(s);
                break;
            }
        }
    }
    if (rc) {
        json_decref(c);
        return rc;
    }
    *out = c;
    return DRIFT_OK;
}

/* Puts a finished node where the innermost open collection wants it (a
 * mapping's value, a sequence's item) or as the root. Takes node's
 * reference, also on failure. */
static drift_status attach(yj *s, json_t *node, int line, int col) {
    if (!s->depth) {
        s->root = node;
        return loc_put(s->loc, NULL, NULL, 0, line, col, line, col) ? yj_nomem(s) : DRIFT_OK;
    }
    frame *f = &s->stack[s->depth - 1];
    if (json_is_array(f->node)) {
        if (json_array_append_new(f->node, node)) return yj_nomem(s);
        size_t i = json_array_size(f->node) - 1;
        return loc_put(s->loc, f->node, NULL, i, line, col, line, col) ? yj_nomem(s) : DRIFT_OK;
    }
    /* a mapping's value */
    char *key = f->key;
    f->key = NULL;
    drift_status rc = DRIFT_OK;
    if (f->is_merge) {
        f->is_merge = 0;
        int ok = json_is_object(node);
        if (json_is_array(node)) {
            ok = 1;
            size_t i;
            json_t *m;
            json_array_foreach(node, i, m) ok = ok && json_is_object(m);
        }
        if (!ok) rc = yj_fail(s, line, col, "the merge key '<<' takes a mapping or a sequence of mappings");
        else if (!f->merges && !(f->merges = json_array())) rc = yj_nomem(s);
        else if (json_is_object(node)) rc = json_array_append(f->merges, node) ? yj_nomem(s) : DRIFT_OK;
        else rc = json_array_extend(f->merges, node) ? yj_nomem(s) : DRIFT_OK;
        json_decref(node);
        free(key);
        return rc;
    }
    if (json_object_set_new(f->node, key, node)) rc = yj_nomem(s);
    else if (!f->explicit_keys && !(f->explicit_keys = json_object())) rc = yj_nomem(s);
    else if (json_object_set_new(f->explicit_keys, key, json_true())) rc = yj_nomem(s);
    else if (loc_put(s->loc, f->node, key, 0, f->kline, f->kcol, line, col)) rc = yj_nomem(s);
    free(key);
    return rc;
}

/* A scalar (or alias) read where a mapping wants its key. */
static drift_status take_key(yj *s, frame *f, const char *key, int plain, int line, int col) {
    if (!strcmp(key, "<<") && plain) {
        f->is_merge = 1;
    } else if (f->explicit_keys && json_object_get(f->explicit_keys, key)) {
        int fl = 0;
        util_yaml_where(s->loc, f->node, key, 0, &fl, NULL);
        return yj_fail(s, line, col, "key '%.80s' is given twice (first on line %d)", key, fl);
    }
    f->key = util_strdup(key);
    if (!f->key) return yj_nomem(s);
    f->kline = line;
    f->kcol = col;
    return DRIFT_OK;
}

/* A mapping's end: the merged mappings' keys it does not have. */
static drift_status apply_merges(yj *s, frame *f) {
    if (!f->merges) return DRIFT_OK;
    size_t i;
    json_t *m;
    json_array_foreach(f->merges, i, m) {
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v) {
            if (json_object_get(f->node, k)) continue; /* its own, or an earlier merge's */
            if (json_object_set(f->node, k, v) || loc_copy(s->loc, m, f->node, k, 0)) return yj_nomem(s);
        }
    }
    return DRIFT_OK;
}

static drift_status push(yj *s, json_t *node, const char *anchor_name, int line, int col) {
    if (s->depth >= s->lim.max_depth) {
        json_decref(node);
        return yj_fail(s, line, col, "nested deeper than %zu levels: refused", s->lim.max_depth);
    }
    if (s->depth == s->stack_cap) {
        size_t nc = s->stack_cap ? s->stack_cap * 2 : 16;
        frame *p = realloc(s->stack, nc * sizeof *p);
        if (!p) {
            json_decref(node);
            return yj_nomem(s);
        }
        s->stack = p;
        s->stack_cap = nc;
    }
    s->stack[s->depth++] = (frame){.node = node, .anchor = -1, .line = line, .col = col};
    drift_status rc = anchor_add(s, anchor_name, node, 0);
    if (rc) return rc;
    s->stack[s->depth - 1].anchor = anchor_name ? (long)s->n_anchors - 1 : -1;
    return DRIFT_OK;
}

static void frame_clear(frame *f) {
    free(f->key);
    json_decref(f->merges);
    json_decref(f->explicit_keys);
    f->key = NULL;
    f->merges = f->explicit_keys = NULL;
}

static drift_status pop(yj *s) {
    frame *f = &s->stack[s->depth - 1];
    int line = f->line, col = f->col;
    drift_status rc = json_is_object(f->node) ? apply_merges(s, f) : DRIFT_OK;
    if (f->anchor >= 0) s->anchors[f->anchor].complete = 1; /* complete now */
    json_t *node = f->node;
    frame_clear(f);
    s->depth--;
    if (rc) {
        json_decref(node);
        return rc;
    }
    return attach(s, node, line, col);
}

static int expecting_key(const yj *s) {
    if (!s->depth) return 0;
    const frame *f = &s->stack[s->depth - 1];
    return json_is_object(f->node) && !f->key && !f->is_merge;
}

static drift_status on_event(yj *s, const yaml_event_t *ev) {
    int line = mark_line(&ev->start_mark), col = mark_col(&ev->start_mark);
    drift_status rc;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++s->documents > 1)
            return yj_fail(s, line, col, "a second document ('---'): one document per file");
        return DRIFT_OK;
    case YAML_SCALAR_EVENT: {
        if ((rc = count_node(s, line, col))) return rc;
        if (expecting_key(s)) {
            const char *k = (const char *)ev->data.scalar.value;
            if (memchr(k, 0, ev->data.scalar.length))
                return yj_fail(s, line, col, "a key holding a NUL character is refused");
            if (ev->data.scalar.anchor) return yj_fail(s, line, col, "an anchor on a key is not supported");
            return take_key(s, &s->stack[s->depth - 1], k,
                            ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag, line, col);
        }
        json_t *node;
        if ((rc = scalar_node(s, ev, &node))) return rc;
        if ((rc = anchor_add(s, (const char *)ev->data.scalar.anchor, node, 1))) {
            json_decref(node);
            return rc;
        }
        return attach(s, node, line, col);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        int seq = ev->type == YAML_SEQUENCE_START_EVENT;
        const char *tag = (const char *)(seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag);
        const char *an = (const char *)(seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor);
        if (expecting_key(s)) return yj_fail(s, line, col, "a key must be a scalar (not a %s)", seq ? "sequence" : "mapping");
        if (tag && strcmp(tag, "!") && strcmp(tag, seq ? YAML_SEQ_TAG : YAML_MAP_TAG))
            return yj_fail(s, line, col, "tag '%.60s' is not supported on a %s", tag, seq ? "sequence" : "mapping");
        if ((rc = count_node(s, line, col))) return rc;
        json_t *node = seq ? json_array() : json_object();
        if (!node) return yj_nomem(s);
        return push(s, node, an, line, col);
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: return pop(s);
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        anchor *a = anchor_find(s, name);
        if (!a) return yj_fail(s, line, col, "alias '*%.60s' names no anchor before it", name);
        if (!a->complete) return yj_fail(s, line, col, "alias '*%.60s' is inside the node it names (a cycle)", name);
        if (expecting_key(s)) {
            if (!json_is_string(a->node)) return yj_fail(s, line, col, "an alias as a key must name a string");
            if ((rc = count_node(s, line, col))) return rc;
            return take_key(s, &s->stack[s->depth - 1], json_string_value(a->node), 0, line, col);
        }
        json_t *copy;
        if ((rc = copy_node(s, a->node, s->depth + 1, line, col, &copy))) return rc;
        return attach(s, copy, line, col);
    }
    default: return DRIFT_OK;
    }
}

drift_status util_yaml_parse(const char *text, size_t len, const char *name, const util_yaml_limits *lim,
                             json_t **root, util_yaml_locator **locp, drift_error *err) {
    *root = NULL;
    if (locp) *locp = NULL;
    yj s;
    memset(&s, 0, sizeof s);
    s.name = name ? name : "(yaml)";
    s.err = err;
    s.lim.max_bytes = lim && lim->max_bytes ? lim->max_bytes : UTIL_YAML_MAX_BYTES;
    s.lim.max_nodes = lim && lim->max_nodes ? lim->max_nodes : UTIL_YAML_MAX_NODES;
    s.lim.max_depth = lim && lim->max_depth ? lim->max_depth : UTIL_YAML_MAX_DEPTH;
    if (len > s.lim.max_bytes)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: %zu bytes: larger than the %zu bytes a document may have",
                               s.name, len, s.lim.max_bytes);
    s.loc = calloc(1, sizeof *s.loc);
    if (!s.loc) return yj_nomem(&s);
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        util_yaml_locator_free(s.loc);
        return yj_nomem(&s);
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)(text ? text : ""), text ? len : 0);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    drift_status rc = DRIFT_OK;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            const yaml_mark_t *m = p.problem ? &p.problem_mark : &p.mark;
            if (p.error == YAML_MEMORY_ERROR) rc = yj_nomem(&s);
            else if (p.context)
                rc = yj_fail(&s, mark_line(m), mark_col(m), "%s %s (line %d)", p.problem ? p.problem : "syntax error",
                             p.context, mark_line(&p.context_mark));
            else rc = yj_fail(&s, mark_line(m), mark_col(m), "%s", p.problem ? p.problem : "syntax error");
            break;
        }
        int end = ev.type == YAML_STREAM_END_EVENT;
        rc = on_event(&s, &ev);
        yaml_event_delete(&ev);
        if (rc || end) break;
    }
    yaml_parser_delete(&p);
    for (size_t i = 0; i < s.depth; i++) {
        json_decref(s.stack[i].node);
        frame_clear(&s.stack[i]);
    }
    free(s.stack);
    for (size_t i = 0; i < s.n_anchors; i++) free(s.anchors[i].name);
    free(s.anchors);
    json_decref(s.anchor_index);
    if (!rc && !s.root) { /* an empty document (or stream) */
        s.root = json_null();
        if (!s.root || loc_put(s.loc, NULL, NULL, 0, 1, 1, 1, 1)) rc = yj_nomem(&s);
    }
    if (rc) {
        json_decref(s.root);
        util_yaml_locator_free(s.loc);
        return rc;
    }
    *root = s.root;
    if (locp) *locp = s.loc;
    else util_yaml_locator_free(s.loc);
    return DRIFT_OK;
}
