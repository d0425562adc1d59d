/* shadow_report.c - drift over time of a shadow store, after the fact
 * (driftbench shadow --report; docs/shadow.md): the stored pairs
 * (drift_shadow_read_pairs) sorted by time, judged by a fresh streaming
 * judge (traffic_stream.h) with the given budgets and alpha, and rendered
 * as text (per class flips and alarm, then a table of time windows) or as
 * the judge's JSON state. Pairs stored as hashes (--store-texts hashes)
 * cannot be judged again and are counted, not judged. No request is sent;
 * the guard and semantic classes are not judged here. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/shadow.h"
#include "driftbench/text.h"
#include "driftbench/traffic_privacy.h"
#include "driftbench/traffic_stream.h"

typedef struct rp_pair {
    char *req, *pm, *cm;
    int pe, ce, comp;
    int64_t t;
} rp_pair;
typedef struct rp_list {
    rp_pair *v;
    size_t n, cap;
    int nomem;
} rp_list;

static char *dup_or_null(const char *x) { return x ? strdup(x) : NULL; }

static int rp_collect(void *user, const char *req, const char *pm, const char *cm, int pe, int ce, int comp,
                      int64_t t) {
    rp_list *l = user;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        rp_pair *v = realloc(l->v, cap * sizeof *v);
        if (!v) return l->nomem = 1;
        l->v = v;
        l->cap = cap;
    }
    rp_pair *p = &l->v[l->n++];
    p->req = dup_or_null(req);
    p->pm = dup_or_null(pm);
    p->cm = dup_or_null(cm);
    p->pe = pe;
    p->ce = ce;
    p->comp = comp;
    p->t = t;
    if ((req && !p->req) || (pm && !p->pm) || (cm && !p->cm)) return l->nomem = 1;
    return 0;
}

static int rp_cmp_time(const void *a, const void *b) {
    const rp_pair *x = a, *y = b;
    return (x->t > y->t) - (x->t < y->t);
}

/* The smallest round window that cuts the span into at most 20. */
static int64_t rp_auto_window(const rp_list *l) {
    static const int64_t sizes[] = {60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400};
    int64_t span = l->n ? (l->v[l->n - 1].t - l->v[0].t) / 1000 : 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (span / sizes[i] < 20) return sizes[i];
    return 365 * 86400;
}

static int is_hashed(const rp_pair *p) {
    return drift_traffic_privacy_is_hash(p->req ? p->req : "") || (p->pm && drift_traffic_privacy_is_hash(p->pm)) ||
           (p->cm && drift_traffic_privacy_is_hash(p->cm));
}

static void render_text(drift_buf *b, drift_traffic_stream *s, const char *store_name, const char *plabel,
                        const char *clabel, long hashed, int64_t window_s) {
    drift_buf_printf(b, "shadow store %s: %s -> %s\n", store_name ? store_name : "(store)",
                     plabel ? plabel : "shadow-primary", clabel ? clabel : "shadow-candidate");
    drift_buf_printf(b, "pairs %lld: %lld compared, %lld not comparable, %lld with a request error",
                     (long long)drift_traffic_stream_pairs(s), (long long)drift_traffic_stream_compared(s),
                     (long long)drift_traffic_stream_not_comparable(s), (long long)drift_traffic_stream_errors(s));
    if (hashed) drift_buf_printf(b, "; %ld stored as hashes, not judged", hashed);
    drift_buf_printf(b, "\n\n%-10s %8s %8s %9s  %s\n", "class", "flips", "pairs", "left out", "alarm");
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        const drift_traffic_stream_class *k = drift_traffic_stream_class_get(s, c);
        const drift_alarm *a = drift_traffic_stream_alarm(s, c);
        if (!k || (!k->n && !k->left_out)) continue;
        drift_buf_printf(b, "%-10s %8lld %8lld %9lld  ", drift_traffic_class_name(c), (long long)k->flips,
                         (long long)k->n, (long long)k->left_out);
        if (!a) drift_buf_puts(b, "not gated\n");
        else {
            double lo = 0, hi = 1;
            drift_alarm_bounds(a, &lo, &hi);
            drift_buf_printf(b, "%s", a->state == DRIFT_ALARM_FIRING ? "ALARM" : drift_alarm_state_name(a->state));
            if (k->raised_pair) drift_buf_printf(b, " raised at pair %lld,", (long long)k->raised_pair);
            drift_buf_printf(b, " flip rate in [%.2f%%, %.2f%%], budget %.2f%%\n", lo * 100, hi * 100,
                             a->budget * 100);
        }
    }
    size_t nw = 0;
    int64_t dropped = 0;
    const drift_traffic_window *w = drift_traffic_stream_windows(s, &nw, &dropped);
    if (!nw) return;
    drift_buf_printf(b, "\ndrift over time (windows of %lld s, UTC; flips per class):\n%-20s %6s %8s",
                     (long long)window_s, "window start", "pairs", "compared");
    for (int c = 0; c < DRIFT_TC_COUNT; c++)
        if (drift_traffic_stream_class_get(s, c)->n) drift_buf_printf(b, " %9s", drift_traffic_class_name(c));
    drift_buf_puts(b, "\n");
    for (size_t i = 0; i < nw; i++) {
        time_t ts = (time_t)(w[i].start_ms / 1000);
        struct tm tmv;
        char when[32];
        gmtime_r(&ts, &tmv);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tmv);
        drift_buf_printf(b, "%-20s %6lld %8lld", when, (long long)w[i].pairs, (long long)w[i].compared);
        for (int c = 0; c < DRIFT_TC_COUNT; c++)
            if (drift_traffic_stream_class_get(s, c)->n)
                drift_buf_printf(b, " %8lld%s", (long long)w[i].flips[c], w[i].state[c] == DRIFT_ALARM_FIRING ? "!" : " ");
        drift_buf_puts(b, "\n");
    }
    drift_buf_puts(b, "(! : the class's alarm is raised at the window's end)\n");
    if (dropped) drift_buf_printf(b, "(%lld older windows dropped)\n", (long long)dropped);
}

drift_status drift_shadow_report(drift_store *st, const drift_shadow_report_opts *o, char **out, drift_error *err) {
    *out = NULL;
    rp_list l = {0};
    drift_traffic_stream *s = NULL;
    long hashed = 0;
    drift_buf b = {0};
    drift_status rc = drift_shadow_read_pairs(st, o->primary_label, o->candidate_label, rp_collect, &l, err);
    if (!rc && l.nomem) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "shadow report: out of memory");
    if (rc) goto out;
    qsort(l.v, l.n, sizeof *l.v, rp_cmp_time); /* windows over time; ties keep no promised order */
    int64_t window_s = o->window_s < 0 ? rp_auto_window(&l) : o->window_s;
    if ((rc = drift_traffic_stream_new(&o->stats, o->alpha, NULL, NULL, &s, err))) goto out;
    if (window_s && (rc = drift_traffic_stream_set_window(s, window_s * 1000, err))) goto out;
    for (size_t i = 0; i < l.n; i++) {
        rp_pair *p = &l.v[i];
        if (is_hashed(p)) {
            hashed++;
            continue;
        }
        if ((rc = drift_traffic_stream_add(s, p->req, p->pm, p->cm, p->pe, p->ce, p->comp, p->t > 0 ? p->t : 1, NULL,
                                           err)))
            goto out;
    }
    if (o->json) {
        /* {"schema_version", "schema", the store and runs, the window, the
         * pairs not judged, "judge": the judge's whole state} */
        char *j = drift_traffic_stream_to_json(s);
        json_t *state = j ? json_loads(j, 0, NULL) : NULL;
        free(j);
        json_t *root = state ? json_object() : NULL;
        char *txt = NULL;
        if (root) {
            json_object_set_new(root, "schema_version", json_integer(DRIFT_JSON_SCHEMA_VERSION));
            json_object_set_new(root, "schema", json_string("driftbench.shadow-report/1"));
            json_object_set_new(root, "store", json_string(o->store_name ? o->store_name : ""));
            json_object_set_new(root, "primary", json_string(o->primary_label ? o->primary_label : "shadow-primary"));
            json_object_set_new(root, "candidate",
                                json_string(o->candidate_label ? o->candidate_label : "shadow-candidate"));
            json_object_set_new(root, "window_s", json_integer(window_s));
            json_object_set_new(root, "hashed_not_judged", json_integer(hashed));
            json_object_set(root, "judge", state);
            txt = json_dumps(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        }
        if (!txt || drift_buf_puts(&b, txt) || drift_buf_puts(&b, "\n"))
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "shadow report: out of memory");
        free(txt);
        json_decref(root);
        json_decref(state);
    } else {
        render_text(&b, s, o->store_name, o->primary_label, o->candidate_label, hashed, window_s);
    }
    if (!rc) {
        *out = drift_buf_steal(&b);
        if (!*out) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "shadow report: out of memory");
    }
out:
    drift_buf_free(&b);
    drift_traffic_stream_free(s);
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].req);
        free(l.v[i].pm);
        free(l.v[i].cm);
    }
    free(l.v);
    return rc;
}
