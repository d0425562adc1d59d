/* view_api.c - the results browser's JSON API over a store (view.h lists
 * the endpoints; docs/view.md the fields). No HTTP here: view_httpd.c
 * hands in a path and its decoded query arguments and sends the reply.
 *
 * Each request opens the store read-only (no lock, nothing written) and
 * closes it at the end, so a run being written shows its answers as they
 * come and a long-lived viewer never pins an old snapshot.
 *
 * Pair tables. The unit of every pair listing is the table of one
 * comparison (baseline B, target T): every (prompt, replicate) both runs
 * answered, joined from their scored sets (drift_store_load_scored, the
 * store's order), with what compare says of each (drift_compare_runs, flip
 * risk on: counted or not, flipped, direction, the baseline's flip risk,
 * chat's SDR for a drifted pair). A table is cached and reused while both
 * runs' counts (responses, scores, finished_at; drift_store_run_overviews)
 * are unchanged, so paging and filtering do not recompute compare. The
 * answer texts are read into a table only when a text search needs them
 * (drift_store_answer_text, once per table). The comparisons listing keeps
 * each comparison's summary apart (vsum, the same stamp rule): it walks up
 * to VIEW_MAX_COMPARISONS of them, more than the table cache holds, so a
 * second listing would otherwise rebuild every table in turn. */
#include <ctype.h>
#include <stdarg.h>
#include <strings.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/store.h"
#include "suite/workload.h"
#include "util/util.h"
#include "view/view_internal.h"

#define VIEW_MAX_TABLES 64      /* cached comparisons */
#define VIEW_MAX_LIMIT 500      /* pairs per page */
#define VIEW_MAX_TARGETS 32     /* comparisons one pair listing spans (target left out); well under the cache */
#define VIEW_MAX_COMPARISONS 300 /* comparisons listed */
#define VIEW_MAX_SUMS 4096       /* cached comparison summaries (emptied when full) */

/* One answer pair of a comparison. */
typedef struct vpair {
    int64_t prompt_rowid;
    const char *prompt_id, *suite; /* in the table's scored sets */
    drift_workload wl;
    int replicate;
    int64_t base_resp, targ_resp;
    int base_label, targ_label;    /* drift_label */
    int base_err, targ_err;        /* a failed request */
    int counted;                   /* compare counted the pair */
    int flipped;
    int direction;                 /* drift_flip's: +1, -1, 0 */
    double risk, sdr;              /* NAN unknown */
    char *base_text, *targ_text;   /* search only (texts_loaded) */
} vpair;

typedef struct vtable {
    char *baseline, *target;
    char stamp[160];               /* both runs' counts when built */
    unsigned long used;            /* LRU clock */
    drift_scored_set bs, ts;
    vpair *p;
    size_t n;
    int texts_loaded;
    int risk_state;                /* drift_risk_state */
    const char *risk_version[DRIFT_WL_COUNT];
    char note[256];                /* why there are no pairs (compare's message), or "" */
} vtable;

/* The summary of one comparison as /api/comparisons lists it (without
 * target_config), NULL when the runs share no prompt. */
typedef struct vsum {
    char *baseline, *target;
    char stamp[160];
    json_t *summary;
} vsum;

struct view_api {
    char *path;
    vtable *tables[VIEW_MAX_TABLES];
    unsigned long clock;
    vsum *sums;
    size_t n_sums;
};

/* What one request holds: the store, its runs. */
typedef struct vreq {
    view_api *a;
    drift_store *st;
    drift_run_overview *runs;
    size_t n_runs;
    view_reply *r;
} vreq;

/* ---------------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------------- */

/* A JSON string of outside text: invalid UTF-8 repaired (jansson refuses it). */
static json_t *jtext(const char *s) {
    if (!s) return json_null();
    char *c = util_utf8_clean(s, strlen(s));
    json_t *j = c ? json_string(c) : NULL;
    free(c);
    return j ? j : json_null();
}

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Parsed JSON text from the store (a run's config, a score's detail), or
 * the text itself as a string when it is not JSON. */
static json_t *jparsed(const char *s) {
    if (!s) return json_null();
    json_t *j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    return j ? j : jtext(s);
}

static void reply_json(view_reply *r, int status, json_t *j) {
    r->status = status;
    r->ctype = "application/json; charset=utf-8";
    r->body = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(j);
    if (!r->body) {
        r->status = 500;
        r->body = util_strdup("{\"error\":\"out of memory\"}");
    }
    r->len = r->body ? strlen(r->body) : 0;
}

static int reply_error(view_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int reply_error(view_reply *r, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *j = json_object();
    json_object_set_new(j, "error", jtext(msg));
    reply_json(r, status, j);
    return -1;
}

/* A library error as a reply: not found 404, invalid 400, else 500. */
static int reply_status(view_reply *r, const drift_error *err) {
    int status = err->code == DRIFT_ERR_NOT_FOUND ? 404 : err->code == DRIFT_ERR_INVALID ? 400 : 500;
    return reply_error(r, status, "%s", err->msg[0] ? err->msg : drift_strerror(err->code));
}

/* ---------------------------------------------------------------------------
 * Arguments
 * ------------------------------------------------------------------------- */

static const char *arg_get(const view_arg *args, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(args[i].name, name)) return args[i].value;
    return NULL;
}

/* 0 when every argument is one of names (NULL-terminated) and none comes
 * twice; else a 400 naming it. */
static int args_check(view_reply *r, const view_arg *args, size_t n, const char *const *names) {
    for (size_t i = 0; i < n; i++) {
        int known = 0;
        for (const char *const *k = names; *k && !known; k++) known = !strcmp(*k, args[i].name);
        if (!known) {
            reply_error(r, 400, "unknown parameter '%s'", args[i].name);
            return -1;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(args[i].name, args[j].name)) {
                reply_error(r, 400, "parameter '%s' given twice", args[i].name);
                return -1;
            }
    }
    return 0;
}

/* A non-negative integer argument in [lo, hi] (def when absent); -1 and a 400 otherwise. */
static int arg_long(view_reply *r, const view_arg *args, size_t n, const char *name, long lo, long hi, long def,
                    long *out) {
    const char *s = arg_get(args, n, name);
    *out = def;
    if (!s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || !isdigit((unsigned char)s[0]) || v < lo || v > hi) {
        reply_error(r, 400, "%s: '%s' is not an integer in [%ld, %ld]", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------- */

/* A label in the workload's words (the traits table: "safe", "correct";
 * a pairwise workload's answers are "answered", not scored one by one). */
static const char *label_name(drift_workload wl, int label, int failed) {
    const wl_traits *t = wl_traits_of(wl);
    if (failed) return "failed request";
    switch (label) {
    case DRIFT_LABEL_PASS: return t && t->pass_word ? t->pass_word : "correct";
    case DRIFT_LABEL_FAIL: return t && t->fail_word ? t->fail_word : "incorrect";
    case DRIFT_LABEL_ERROR: return "evaluator error";
    default: return t && t->pairwise ? "answered" : "unscored";
    }
}

/* A flip's direction by name (the traits table's key style,
 * "safe_to_unsafe"; a pairwise workload's "drift"); NULL for a pair that
 * did not flip. */
static const char *direction_name(const vpair *p) {
    if (!p->flipped) return NULL;
    const wl_traits *t = wl_traits_of(p->wl);
    if ((t && t->pairwise) || p->direction == 0) return "drift";
    return wl_dir_name(p->wl, p->direction, WL_DIR_KEY);
}

static const char *const direction_names[] = {"correct_to_incorrect", "incorrect_to_correct", "safe_to_unsafe",
                                              "unsafe_to_safe", "drift", NULL};

/* ---------------------------------------------------------------------------
 * Runs and pair tables
 * ------------------------------------------------------------------------- */

static const drift_run_overview *run_find(const vreq *q, const char *label) {
    for (size_t i = 0; i < q->n_runs; i++)
        if (!strcmp(q->runs[i].info.label, label)) return &q->runs[i];
    return NULL;
}

static void run_stamp(const drift_run_overview *a, const drift_run_overview *b, char *out, size_t cap) {
    snprintf(out, cap, "%zu/%zu/%zu/%s|%zu/%zu/%zu/%s", a->responses, a->scores, a->embeddings,
             a->info.finished_at ? a->info.finished_at : "-", b->responses, b->scores, b->embeddings,
             b->info.finished_at ? b->info.finished_at : "-");
}

static void table_free(vtable *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->p[i].base_text);
        free(t->p[i].targ_text);
    }
    free(t->p);
    drift_scored_set_clear(&t->bs);
    drift_scored_set_clear(&t->ts);
    free(t->baseline);
    free(t->target);
    free(t);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* What compare said of the pair whose baseline answer is `resp`. */
typedef struct vmark {
    int64_t base_resp;             /* first: the sort key */
    int flipped, direction;
    double risk, sdr;
} vmark;

/* Pairs the two runs' scored sets and marks them with compare's verdicts. */
static drift_status table_build(vreq *q, const drift_run_overview *b, const drift_run_overview *t, vtable *tb,
                                drift_error *err) {
    drift_status rc = drift_store_load_scored(q->st, b->info.id, &tb->bs, err);
    if (!rc) rc = drift_store_load_scored(q->st, t->info.id, &tb->ts, err);
    if (rc) return rc;
    /* join on (prompt_rowid, replicate): both sets are in that order */
    size_t cap = tb->bs.n < tb->ts.n ? tb->bs.n : tb->ts.n;
    tb->p = calloc(cap ? cap : 1, sizeof *tb->p);
    if (!tb->p) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0, j = 0; i < tb->bs.n && j < tb->ts.n;) {
        const drift_scored *x = &tb->bs.rows[i], *y = &tb->ts.rows[j];
        if (x->prompt_rowid != y->prompt_rowid) {
            if (x->prompt_rowid < y->prompt_rowid) i++;
            else j++;
            continue;
        }
        if (x->replicate != y->replicate) {
            if (x->replicate < y->replicate) i++;
            else j++;
            continue;
        }
        tb->p[tb->n++] = (vpair){.prompt_rowid = x->prompt_rowid, .prompt_id = x->prompt_id, .suite = x->suite,
                                 .wl = x->workload, .replicate = x->replicate, .base_resp = x->response_id,
                                 .targ_resp = y->response_id, .base_label = x->label, .targ_label = y->label,
                                 .base_err = x->is_error, .targ_err = y->is_error, .risk = NAN, .sdr = NAN};
        i++;
        j++;
    }
    if (!tb->n) {
        snprintf(tb->note, sizeof tb->note, "the two runs share no prompt");
        return DRIFT_OK;
    }
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    o.risk = 1;
    drift_comparison *c = NULL;
    drift_error cerr = {0};
    if (drift_compare_runs(q->st, b->info.label, t->info.label, &o, &c, &cerr)) {
        /* pairs without compare's marks (e.g. nothing comparable): listed, not counted */
        if (cerr.code == DRIFT_ERR_NOMEM) return drift_error_set(err, DRIFT_ERR_NOMEM, "%s", cerr.msg);
        snprintf(tb->note, sizeof tb->note, "%s", cerr.msg);
        return DRIFT_OK;
    }
    size_t nm = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) nm += c->wl[k].n_pairs;
    vmark *m = calloc(nm ? nm : 1, sizeof *m);
    if (!m) {
        drift_comparison_free(c);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t im = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        tb->risk_version[k] = c->wl[k].risk_version;
        for (size_t i = 0; i < c->wl[k].n_pairs; i++)
            m[im++] = (vmark){.base_resp = c->wl[k].pairs[i].base_response_id,
                              .flipped = c->wl[k].pairs[i].flipped, .risk = c->wl[k].pairs[i].risk, .sdr = NAN};
    }
    qsort(m, nm, sizeof *m, cmp_i64);
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        for (size_t i = 0; i < c->wl[k].n_flipped; i++) {
            const drift_flip *f = &c->wl[k].flipped[i];
            vmark *hit = bsearch(&f->base_response_id, m, nm, sizeof *m, cmp_i64);
            if (hit) {
                hit->direction = f->direction;
                hit->sdr = f->value;
            }
        }
    tb->risk_state = c->risk_state;
    drift_comparison_free(c);
    for (size_t i = 0; i < tb->n; i++) {
        vmark *hit = bsearch(&tb->p[i].base_resp, m, nm, sizeof *m, cmp_i64);
        if (!hit) continue;
        tb->p[i].counted = 1;
        tb->p[i].flipped = hit->flipped;
        tb->p[i].direction = hit->direction;
        tb->p[i].risk = hit->risk;
        tb->p[i].sdr = hit->sdr;
    }
    free(m);
    return DRIFT_OK;
}

/* The table of (b, t): the cached one while both runs are unchanged, else
 * built now. NULL with err set on failure. */
static vtable *table_get(vreq *q, const drift_run_overview *b, const drift_run_overview *t, drift_error *err) {
    view_api *a = q->a;
    char stamp[160];
    run_stamp(b, t, stamp, sizeof stamp);
    int free_slot = -1, lru = 0;
    for (int i = 0; i < VIEW_MAX_TABLES; i++) {
        vtable *x = a->tables[i];
        if (!x) {
            if (free_slot < 0) free_slot = i;
            continue;
        }
        if (!strcmp(x->baseline, b->info.label) && !strcmp(x->target, t->info.label)) {
            if (!strcmp(x->stamp, stamp)) {
                x->used = ++a->clock;
                return x;
            }
            table_free(x); /* stale */
            a->tables[i] = NULL;
            if (free_slot < 0) free_slot = i;
            continue;
        }
        if (a->tables[lru] == NULL || x->used < a->tables[lru]->used) lru = i;
    }
    int slot = free_slot >= 0 ? free_slot : lru;
    vtable *tb = calloc(1, sizeof *tb);
    if (!tb || !(tb->baseline = util_strdup(b->info.label)) || !(tb->target = util_strdup(t->info.label))) {
        table_free(tb);
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    snprintf(tb->stamp, sizeof tb->stamp, "%s", stamp);
    drift_store_read_begin(q->st);
    drift_status rc = table_build(q, b, t, tb, err);
    drift_store_read_end(q->st);
    if (rc) {
        table_free(tb);
        return NULL;
    }
    table_free(a->tables[slot]);
    a->tables[slot] = tb;
    tb->used = ++a->clock;
    return tb;
}

/* Reads both answers of every pair of tb (a text search needs them). */
static drift_status table_texts(vreq *q, vtable *tb, drift_error *err) {
    if (tb->texts_loaded) return DRIFT_OK;
    drift_status rc = DRIFT_OK;
    drift_store_read_begin(q->st);
    for (size_t i = 0; i < tb->n && !rc; i++) {
        int lp;
        if (!tb->p[i].base_text) rc = drift_store_answer_text(q->st, tb->p[i].base_resp, &tb->p[i].base_text, &lp, err);
        if (!rc && !tb->p[i].targ_text)
            rc = drift_store_answer_text(q->st, tb->p[i].targ_resp, &tb->p[i].targ_text, &lp, err);
    }
    drift_store_read_end(q->st);
    if (!rc) tb->texts_loaded = 1;
    return rc;
}

/* ---------------------------------------------------------------------------
 * Filters
 * ------------------------------------------------------------------------- */

/* Whether a run's config JSON has key = value (a string equal to it, or
 * another scalar whose JSON text is it). */
static int config_has(const char *config_json, const char *key, const char *value) {
    json_t *c = config_json ? json_loads(config_json, 0, NULL) : NULL;
    json_t *v = c ? json_object_get(c, key) : NULL;
    int hit = 0;
    if (json_is_string(v)) {
        hit = !strcmp(json_string_value(v), value);
    } else if (v) {
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        hit = t && !strcmp(t, value);
        free(t);
    }
    json_decref(c);
    return hit;
}

static int contains_ci(const char *hay, const char *needle) { return hay && strcasestr(hay, needle) != NULL; }

typedef struct vfilter {
    drift_workload wl;             /* DRIFT_WL_UNKNOWN = all */
    int flipped_only;
    const char *direction;         /* NULL = any */
    const char *q;                 /* NULL = no search */
} vfilter;

static int pair_matches(const vfilter *f, const vpair *p) {
    if (f->wl != DRIFT_WL_UNKNOWN && p->wl != f->wl) return 0;
    if (f->flipped_only && !p->flipped) return 0;
    if (f->direction) {
        const char *d = direction_name(p);
        if (!d || strcmp(d, f->direction)) return 0;
    }
    if (f->q && !contains_ci(p->prompt_id, f->q) && !contains_ci(p->base_text, f->q) &&
        !contains_ci(p->targ_text, f->q))
        return 0;
    return 1;
}

static json_t *pair_json(const vtable *tb, const vpair *p) {
    json_t *o = json_object();
    json_object_set_new(o, "baseline", jtext(tb->baseline));
    json_object_set_new(o, "target", jtext(tb->target));
    json_object_set_new(o, "prompt_id", jtext(p->prompt_id));
    json_object_set_new(o, "suite", jtext(p->suite));
    json_object_set_new(o, "workload", json_string(p->wl >= 0 ? drift_workload_name(p->wl) : "unknown"));
    json_object_set_new(o, "replicate", json_integer(p->replicate));
    json_object_set_new(o, "response", json_integer(p->base_resp));
    json_object_set_new(o, "target_response", json_integer(p->targ_resp));
    json_object_set_new(o, "baseline_label", json_string(label_name(p->wl, p->base_label, p->base_err)));
    json_object_set_new(o, "target_label", json_string(label_name(p->wl, p->targ_label, p->targ_err)));
    json_object_set_new(o, "counted", json_boolean(p->counted));
    json_object_set_new(o, "flipped", json_boolean(p->flipped));
    const char *d = direction_name(p);
    json_object_set_new(o, "direction", d ? json_string(d) : json_null());
    json_object_set_new(o, "risk", jnum(p->risk));
    json_object_set_new(o, "sdr", jnum(p->sdr));
    return o;
}

/* ---------------------------------------------------------------------------
 * Endpoints
 * ------------------------------------------------------------------------- */

static json_t *run_json(const drift_run_overview *ov) {
    json_t *o = json_object();
    json_object_set_new(o, "label", jtext(ov->info.label));
    json_object_set_new(o, "target", jtext(ov->info.target));
    json_object_set_new(o, "identity", jtext(ov->identity));
    json_object_set_new(o, "config", jparsed(ov->info.config_json));
    json_object_set_new(o, "decoding", jparsed(ov->info.decoding_json));
    json_object_set_new(o, "suites", jparsed(ov->info.suites_json));
    json_object_set_new(o, "tool_version", jtext(ov->info.tool_version));
    json_object_set_new(o, "started_at", jtext(ov->info.started_at));
    json_object_set_new(o, "finished_at", jtext(ov->info.finished_at));
    json_object_set_new(o, "responses", json_integer((json_int_t)ov->responses));
    json_object_set_new(o, "failed", json_integer((json_int_t)ov->failed));
    json_object_set_new(o, "scored", json_integer((json_int_t)ov->scored));
    json_object_set_new(o, "endpoints", json_integer((json_int_t)ov->n_endpoints));
    json_object_set_new(o, "resumes", json_integer((json_int_t)ov->resumes));
    json_object_set_new(o, "locked", json_boolean(ov->locked));
    return o;
}

static int ep_runs(vreq *q, const view_arg *args, size_t n) {
    static const char *const names[] = {NULL};
    if (args_check(q->r, args, n, names)) return -1;
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "store", jtext(drift_store_display(q->st)));
    for (size_t i = 0; i < q->n_runs; i++) json_array_append_new(arr, run_json(&q->runs[i]));
    json_object_set_new(o, "runs", arr);
    reply_json(q->r, 200, o);
    return 0;
}

/* Counts of one table, per workload and in all. */
static json_t *table_summary(const vtable *tb) {
    long pairs[DRIFT_WL_COUNT] = {0}, counted[DRIFT_WL_COUNT] = {0}, flips[DRIFT_WL_COUNT] = {0};
    long tp = 0, tc = 0, tf = 0;
    for (size_t i = 0; i < tb->n; i++) {
        const vpair *p = &tb->p[i];
        tp++;
        tc += p->counted;
        tf += p->flipped;
        if (p->wl < 0 || p->wl >= DRIFT_WL_COUNT) continue;
        pairs[p->wl]++;
        counted[p->wl] += p->counted;
        flips[p->wl] += p->flipped;
    }
    json_t *o = json_object(), *w = json_array();
    json_object_set_new(o, "baseline", jtext(tb->baseline));
    json_object_set_new(o, "target", jtext(tb->target));
    json_object_set_new(o, "pairs", json_integer(tp));
    json_object_set_new(o, "counted", json_integer(tc));
    json_object_set_new(o, "flips", json_integer(tf));
    json_object_set_new(o, "risk", json_boolean(tb->risk_state == DRIFT_RISK_DONE));
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!pairs[k]) continue;
        json_t *x = json_object();
        json_object_set_new(x, "workload", json_string(drift_workload_name((drift_workload)k)));
        json_object_set_new(x, "pairs", json_integer(pairs[k]));
        json_object_set_new(x, "counted", json_integer(counted[k]));
        json_object_set_new(x, "flips", json_integer(flips[k]));
        json_object_set_new(x, "risk_version", tb->risk_version[k] ? json_string(tb->risk_version[k]) : json_null());
        json_array_append_new(w, x);
    }
    json_object_set_new(o, "workloads", w);
    if (tb->note[0]) json_object_set_new(o, "note", jtext(tb->note));
    return o;
}

static void sums_clear(view_api *a) {
    for (size_t i = 0; i < a->n_sums; i++) {
        free(a->sums[i].baseline);
        free(a->sums[i].target);
        json_decref(a->sums[i].summary);
    }
    a->n_sums = 0;
}

/* The summary of (b, t) (*out: a new reference, NULL when they share no
 * prompt): the cached one while both runs are unchanged, else from their
 * table (table_get) and kept. -1 with err set on failure. */
static int summary_get(vreq *q, const drift_run_overview *b, const drift_run_overview *t, json_t **out,
                       drift_error *err) {
    view_api *a = q->a;
    char stamp[160];
    run_stamp(b, t, stamp, sizeof stamp);
    vsum *hit = NULL;
    for (size_t i = 0; i < a->n_sums && !hit; i++)
        if (!strcmp(a->sums[i].baseline, b->info.label) && !strcmp(a->sums[i].target, t->info.label))
            hit = &a->sums[i];
    if (hit && !strcmp(hit->stamp, stamp)) {
        *out = hit->summary ? json_copy(hit->summary) : NULL;
        if (hit->summary && !*out) goto nomem;
        return 0;
    }
    vtable *tb = table_get(q, b, t, err);
    if (!tb) return -1;
    json_t *s = tb->n ? table_summary(tb) : NULL;
    if (!hit) {
        if (a->n_sums == VIEW_MAX_SUMS) sums_clear(a);
        if (!a->sums && !(a->sums = calloc(VIEW_MAX_SUMS, sizeof *a->sums))) goto nokeep;
        hit = &a->sums[a->n_sums];
        if (!(hit->baseline = util_strdup(b->info.label)) || !(hit->target = util_strdup(t->info.label))) {
            free(hit->baseline);
            hit->baseline = NULL;
            goto nokeep;
        }
        hit->summary = NULL;
        a->n_sums++;
    }
    json_decref(hit->summary);
    hit->summary = s ? json_incref(s) : NULL;
    snprintf(hit->stamp, sizeof hit->stamp, "%s", stamp);
nokeep: /* not kept (no memory for the cache): the reply is still whole */
    *out = s ? json_copy(s) : NULL;
    int lost = s && !*out;
    json_decref(s);
    if (!lost) return 0;
nomem:
    drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return -1;
}

static int ep_comparisons(vreq *q, const view_arg *args, size_t n) {
    static const char *const names[] = {NULL};
    if (args_check(q->r, args, n, names)) return -1;
    json_t *o = json_object(), *arr = json_array();
    size_t listed = 0;
    int truncated = 0;
    for (size_t i = 0; i < q->n_runs && !truncated; i++)
        for (size_t j = i + 1; j < q->n_runs; j++) {
            if (listed == VIEW_MAX_COMPARISONS) {
                truncated = 1;
                break;
            }
            drift_error err = {0};
            json_t *s = NULL;
            if (summary_get(q, &q->runs[i], &q->runs[j], &s, &err)) {
                json_decref(o);
                json_decref(arr);
                reply_status(q->r, &err);
                return -1;
            }
            if (!s) continue; /* no shared prompt: no comparison */
            json_object_set_new(s, "target_config", jparsed(q->runs[j].info.config_json));
            json_array_append_new(arr, s);
            listed++;
        }
    json_object_set_new(o, "comparisons", arr);
    json_object_set_new(o, "truncated", json_boolean(truncated));
    reply_json(q->r, 200, o);
    return 0;
}

static int ep_pairs(vreq *q, const view_arg *args, size_t n) {
    static const char *const names[] = {"baseline", "target", "workload", "flipped", "direction",
                                        "config", "q", "offset", "limit", NULL};
    if (args_check(q->r, args, n, names)) return -1;
    const char *base = arg_get(args, n, "baseline"), *targ = arg_get(args, n, "target");
    const char *wl = arg_get(args, n, "workload"), *fl = arg_get(args, n, "flipped");
    const char *dir = arg_get(args, n, "direction"), *cfg = arg_get(args, n, "config"), *text = arg_get(args, n, "q");
    long offset, limit;
    if (arg_long(q->r, args, n, "offset", 0, 1L << 40, 0, &offset)) return -1;
    if (arg_long(q->r, args, n, "limit", 1, VIEW_MAX_LIMIT, 50, &limit)) return -1;
    if (!base || !*base) return reply_error(q->r, 400, "baseline is required");
    vfilter f = {.wl = DRIFT_WL_UNKNOWN};
    if (wl && *wl) {
        f.wl = drift_workload_parse(wl);
        if (f.wl == DRIFT_WL_UNKNOWN)
            return reply_error(q->r, 400, "workload: '%s' is not one of math, code, safety, chat, long_context", wl);
    }
    if (fl && *fl) {
        if (strcmp(fl, "1") && strcmp(fl, "0")) return reply_error(q->r, 400, "flipped: '%s' is not 0 or 1", fl);
        f.flipped_only = fl[0] == '1';
    }
    if (dir && *dir) {
        int known = 0;
        for (const char *const *k = direction_names; *k && !known; k++) known = !strcmp(*k, dir);
        if (!known)
            return reply_error(q->r, 400,
                               "direction: '%s' is not one of correct_to_incorrect, incorrect_to_correct, "
                               "safe_to_unsafe, unsafe_to_safe, drift", dir);
        f.direction = dir;
    }
    char ckey[256] = "";
    const char *cval = NULL;
    if (cfg && *cfg) {
        const char *eq = strchr(cfg, '=');
        if (!eq || eq == cfg || (size_t)(eq - cfg) >= sizeof ckey)
            return reply_error(q->r, 400, "config: '%s' is not KEY=VALUE", cfg);
        memcpy(ckey, cfg, (size_t)(eq - cfg));
        ckey[eq - cfg] = '\0';
        cval = eq + 1;
    }
    if (text && *text) f.q = text;
    const drift_run_overview *b = run_find(q, base);
    if (!b) return reply_error(q->r, 404, "no run labelled '%s'", base);
    const drift_run_overview *t1 = NULL;
    if (targ && *targ) {
        if (!(t1 = run_find(q, targ))) return reply_error(q->r, 404, "no run labelled '%s'", targ);
        if (t1 == b) return reply_error(q->r, 400, "baseline and target are the same run");
    }
    /* the comparisons the listing spans: the target, or every other run (config-filtered) */
    vtable *tabs[VIEW_MAX_TARGETS];
    size_t nt = 0;
    int truncated = 0;
    for (size_t i = 0; i < q->n_runs; i++) {
        const drift_run_overview *t = &q->runs[i];
        if (t == b || (t1 && t != t1)) continue;
        if (cval && !config_has(t->info.config_json, ckey, cval)) continue;
        if (nt == VIEW_MAX_TARGETS) {
            truncated = 1;
            break;
        }
        drift_error err = {0};
        vtable *tb = table_get(q, b, t, &err);
        if (!tb) return reply_status(q->r, &err);
        if (f.q) {
            drift_status rc = table_texts(q, tb, &err);
            if (rc) return reply_status(q->r, &err);
        }
        if (tb->n) tabs[nt++] = tb;
    }
    long all = 0, total = 0;
    json_t *arr = json_array();
    for (size_t k = 0; k < nt; k++)
        for (size_t i = 0; i < tabs[k]->n; i++) {
            all++;
            if (!pair_matches(&f, &tabs[k]->p[i])) continue;
            if (total >= offset && total < offset + limit) json_array_append_new(arr, pair_json(tabs[k], &tabs[k]->p[i]));
            total++;
        }
    json_t *o = json_object(), *cmp = json_array();
    for (size_t k = 0; k < nt; k++) json_array_append_new(cmp, table_summary(tabs[k]));
    json_object_set_new(o, "comparisons", cmp);
    json_object_set_new(o, "all", json_integer(all));
    json_object_set_new(o, "total", json_integer(total));
    json_object_set_new(o, "offset", json_integer(offset));
    json_object_set_new(o, "limit", json_integer(limit));
    json_object_set_new(o, "truncated", json_boolean(truncated));
    json_object_set_new(o, "pairs", arr);
    reply_json(q->r, 200, o);
    return 0;
}

/* One answer of a pair, with its prompt-side fields left to the caller. */
static json_t *answer_json(vreq *q, int64_t resp, drift_prompt *prompt, char **logprobs, drift_error *err) {
    drift_answer a = {0};
    if (drift_store_response_get(q->st, resp, &a, prompt, err)) return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "response", json_integer(resp));
    json_object_set_new(o, "text", jtext(a.text));
    json_object_set_new(o, "error", jtext(a.error));
    json_object_set_new(o, "finish_reason", jtext(a.finish_reason));
    json_object_set_new(o, "prompt_tokens", a.prompt_tokens >= 0 ? json_integer(a.prompt_tokens) : json_null());
    json_object_set_new(o, "completion_tokens",
                        a.completion_tokens >= 0 ? json_integer(a.completion_tokens) : json_null());
    json_object_set_new(o, "latency_ms", jnum(a.latency_ms));
    json_object_set_new(o, "http_status", a.http_status ? json_integer(a.http_status) : json_null());
    json_object_set_new(o, "has_logprobs", json_boolean(a.logprobs_json != NULL));
    drift_score *sc = NULL;
    size_t ns = 0;
    if (drift_store_response_scores(q->st, resp, &sc, &ns, err)) {
        drift_answer_clear(&a);
        json_decref(o);
        return NULL;
    }
    json_t *scores = json_array();
    for (size_t i = 0; i < ns; i++) {
        json_t *s = json_object();
        json_object_set_new(s, "evaluator", jtext(sc[i].evaluator));
        json_object_set_new(s, "label", json_string(sc[i].label == DRIFT_LABEL_PASS    ? "pass"
                                                    : sc[i].label == DRIFT_LABEL_FAIL  ? "fail"
                                                    : sc[i].label == DRIFT_LABEL_ERROR ? "error"
                                                                                       : "none"));
        json_object_set_new(s, "value", jnum(sc[i].value));
        json_object_set_new(s, "detail", jparsed(sc[i].detail_json));
        json_object_set_new(s, "latest", json_boolean(i == 0));
        json_array_append_new(scores, s);
    }
    free(sc);
    json_object_set_new(o, "scores", scores);
    if (logprobs) {
        *logprobs = a.logprobs_json;
        a.logprobs_json = NULL;
    }
    drift_answer_clear(&a);
    return o;
}

static int ep_pair(vreq *q, const view_arg *args, size_t n) {
    static const char *const names[] = {"baseline", "target", "response", NULL};
    if (args_check(q->r, args, n, names)) return -1;
    const char *base = arg_get(args, n, "baseline"), *targ = arg_get(args, n, "target");
    long resp;
    if (arg_long(q->r, args, n, "response", 1, 1L << 62, 0, &resp)) return -1;
    if (!base || !targ || !resp) return reply_error(q->r, 400, "baseline, target and response are required");
    const drift_run_overview *b = run_find(q, base), *t = run_find(q, targ);
    if (!b) return reply_error(q->r, 404, "no run labelled '%s'", base);
    if (!t) return reply_error(q->r, 404, "no run labelled '%s'", targ);
    if (b == t) return reply_error(q->r, 400, "baseline and target are the same run");
    drift_error err = {0};
    vtable *tb = table_get(q, b, t, &err);
    if (!tb) return reply_status(q->r, &err);
    const vpair *p = NULL;
    for (size_t i = 0; i < tb->n && !p; i++)
        if (tb->p[i].base_resp == resp) p = &tb->p[i];
    if (!p) return reply_error(q->r, 404, "no pair of '%s' and '%s' with baseline response %ld", base, targ, resp);
    drift_prompt pr = {0};
    char *lp = NULL;
    drift_store_read_begin(q->st);
    json_t *ba = answer_json(q, p->base_resp, &pr, &lp, &err);
    json_t *ta = ba ? answer_json(q, p->targ_resp, NULL, NULL, &err) : NULL;
    drift_store_read_end(q->st);
    if (!ba || !ta) {
        json_decref(ba);
        drift_prompt_clear(&pr);
        free(lp);
        return reply_status(q->r, &err);
    }
    json_t *o = pair_json(tb, p);
    json_t *prompt = json_object();
    json_object_set_new(prompt, "input", jtext(pr.input));
    json_object_set_new(prompt, "reference", jparsed(pr.reference_json));
    json_object_set_new(o, "prompt", prompt);
    json_object_set_new(o, "baseline_answer", ba);
    json_object_set_new(o, "target_answer", ta);
    /* flip risk from the baseline answer's logprobs: compare's score and what it is made of */
    json_t *risk = json_object();
    if (lp) {
        drift_risk_features rf;
        drift_error rerr = {0};
        if (drift_risk_features_for(lp, p->wl, &rf, &rerr)) {
            json_object_set_new(risk, "error", jtext(rerr.msg));
        } else {
            const char *version = NULL;
            json_object_set_new(risk, "score", jnum(drift_risk_score_for(&rf, p->wl, &version)));
            json_object_set_new(risk, "version", version ? json_string(version) : json_null());
            json_object_set_new(risk, "tokens", json_integer(rf.n_tokens));
            json_object_set_new(risk, "min_margin", jnum(rf.min_margin));
            json_object_set_new(risk, "min_margin_token", json_integer(rf.min_margin_pos));
            json_object_set_new(risk, "near_ties", json_integer(rf.n_near));
            json_object_set_new(risk, "mean_entropy", jnum(rf.mean_entropy));
            json_object_set_new(risk, "region_margin", jnum(rf.region_margin));
        }
    } else {
        json_object_set_new(risk, "error", json_string("the baseline answer has no stored logprobs"));
    }
    json_object_set_new(o, "risk_detail", risk);
    drift_prompt_clear(&pr);
    free(lp);
    reply_json(q->r, 200, o);
    return 0;
}

static int ep_history(vreq *q, const view_arg *args, size_t n) {
    static const char *const names[] = {"label", NULL};
    if (args_check(q->r, args, n, names)) return -1;
    const char *label = arg_get(args, n, "label");
    if (!label || !*label) return reply_error(q->r, 400, "label is required");
    drift_run_overview ov;
    memset(&ov, 0, sizeof ov);
    drift_error err = {0};
    if (drift_store_run_overview(q->st, label, &ov, &err)) return reply_status(q->r, &err);
    json_t *o = run_json(&ov), *eps = json_array();
    for (size_t i = 0; i < ov.n_endpoints && ov.endpoints; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "target", jtext(ov.endpoints[i].target));
        json_object_set_new(e, "first_at", jtext(ov.endpoints[i].first_at));
        json_object_set_new(e, "last_at", jtext(ov.endpoints[i].last_at));
        json_object_set_new(e, "begins", json_integer(ov.endpoints[i].begins));
        json_array_append_new(eps, e);
    }
    json_object_set_new(o, "endpoint_history", eps);
    json_t *wls = json_array();
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_store_run_counts *c = &ov.per_workload;
        if (!c->answers[k] && !c->errors[k]) continue;
        json_t *w = json_object();
        json_object_set_new(w, "workload", json_string(drift_workload_name((drift_workload)k)));
        json_object_set_new(w, "answers", json_integer((json_int_t)c->answers[k]));
        json_object_set_new(w, "failed", json_integer((json_int_t)c->errors[k]));
        json_object_set_new(w, "cut", json_integer((json_int_t)c->cut[k]));
        json_object_set_new(w, "scored", json_integer((json_int_t)ov.scored_per_workload[k]));
        json_array_append_new(wls, w);
    }
    json_object_set_new(o, "per_workload", wls);
    /* the same stack under other labels: same target identity, or same configuration */
    json_t *same = json_array();
    for (size_t i = 0; i < q->n_runs; i++) {
        const drift_run_overview *r = &q->runs[i];
        int ident = r->identity && ov.identity && !strcmp(r->identity, ov.identity);
        int config = r->info.config_json && ov.info.config_json && !strcmp(r->info.config_json, ov.info.config_json);
        if (!ident && !config) continue;
        json_t *x = run_json(r);
        json_object_set_new(x, "same_identity", json_boolean(ident));
        json_object_set_new(x, "same_config", json_boolean(config));
        json_object_set_new(x, "this", json_boolean(!strcmp(r->info.label, label)));
        json_array_append_new(same, x);
    }
    json_object_set_new(o, "history", same);
    drift_run_overview_clear(&ov);
    reply_json(q->r, 200, o);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Dispatch
 * ------------------------------------------------------------------------- */

view_api *view_api_new(const char *store_path) {
    view_api *a = calloc(1, sizeof *a);
    if (a && !(a->path = util_strdup(store_path))) {
        free(a);
        a = NULL;
    }
    return a;
}

void view_api_free(view_api *a) {
    if (!a) return;
    for (int i = 0; i < VIEW_MAX_TABLES; i++) table_free(a->tables[i]);
    sums_clear(a);
    free(a->sums);
    free(a->path);
    free(a);
}

void view_api_handle(view_api *a, const char *path, const view_arg *args, size_t n, view_reply *r) {
    static const struct {
        const char *path;
        int (*fn)(vreq *, const view_arg *, size_t);
    } routes[] = {{"/api/runs", ep_runs},
                  {"/api/comparisons", ep_comparisons},
                  {"/api/pairs", ep_pairs},
                  {"/api/pair", ep_pair},
                  {"/api/history", ep_history}};
    memset(r, 0, sizeof *r);
    int (*fn)(vreq *, const view_arg *, size_t) = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0] && !fn; i++)
        if (!strcmp(path, routes[i].path)) fn = routes[i].fn;
    if (!fn) {
        reply_error(r, 404, "no such endpoint: %s", path);
        return;
    }
    vreq q = {.a = a, .r = r};
    drift_error err = {0};
    if (drift_store_open_readonly(a->path, &q.st, &err)) {
        reply_status(r, &err);
        return;
    }
    if (drift_store_run_overviews(q.st, &q.runs, &q.n_runs, &err)) {
        reply_status(r, &err);
    } else {
        (void)fn(&q, args, n);
        drift_run_overview_array_free(q.runs, q.n_runs);
    }
    drift_store_close(q.st);
}

/* ---------------------------------------------------------------------------
 * Host header (DNS rebinding)
 * ------------------------------------------------------------------------- */

static int is_ipv4(const char *s, size_t n) {
    int dots = 0, digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            if (!digits) return 0;
            dots++;
            digits = 0;
        } else if (isdigit((unsigned char)s[i]) && digits < 3) {
            digits++;
        } else {
            return 0;
        }
    }
    return dots == 3 && digits;
}

int view_host_allowed(const char *host, const char *const *allow, size_t n) {
    if (!host || !*host) return 0;
    size_t len = strlen(host);
    const char *colon = NULL;
    if (host[0] == '[') { /* [v6]:port */
        const char *close = strchr(host, ']');
        if (!close) return 0;
        for (const char *c = host + 1; c < close; c++)
            if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.') return 0;
        return close[1] == '\0' || close[1] == ':';
    }
    colon = strrchr(host, ':');
    size_t hl = colon ? (size_t)(colon - host) : len;
    if (colon)
        for (const char *c = colon + 1; *c; c++)
            if (!isdigit((unsigned char)*c)) return 0;
    if (hl == 9 && !strncasecmp(host, "localhost", 9)) return 1;
    if (is_ipv4(host, hl)) return 1;
    for (size_t i = 0; i < n; i++)
        if (allow[i] && strlen(allow[i]) == hl && !strncasecmp(host, allow[i], hl)) return 1;
    return 0;
}
