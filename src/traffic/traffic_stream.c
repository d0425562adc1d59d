/* traffic_stream.c - the streaming judge (traffic_stream.h): one pair at a
 * time, judged, counted per class and per time window, and fed to one
 * alarm per gated class.
 *
 * What a pair counts, per class (the same rules as drift_traffic_summarize,
 * so a replay's table and its alarms agree): SAME and FLIP are
 * observations of the class's alarm; ERROR (the guard or the SDR could not
 * judge) is left out; a request error on either side is left out where the
 * class applies to the request (math: only once some pair was math-like);
 * a pair marked not comparable is counted as such and nothing else.
 *
 * Resume is exact: the state is integers and the settings (reals written
 * with 17 digits, which read back bit for bit), so to_json / from_json and
 * the rest of the pairs give the very state one stream fed everything
 * has (tests/unit/test_traffic_stream.c compares the two JSON texts). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/traffic_stream.h"
#include "traffic/traffic_internal.h"
#include "util/util.h"

#define STREAM_VERSION 1

struct drift_traffic_stream {
    drift_traffic_opts stats;
    double alpha;
    drift_guard *guard;
    drift_embedder *embedder;
    int guard_on, semantic_on;
    drift_alarm alarm[DRIFT_TC_COUNT];
    drift_traffic_stream_class cls[DRIFT_TC_COUNT];
    int64_t err_left_math;     /* request errors before the first math-like pair (math's rule) */
    int64_t pairs, compared, not_comparable, errors;
    drift_prom_hist sdr;
    drift_traffic_stream_event ev[DRIFT_TC_COUNT];
    size_t n_ev;
    int64_t window_ms;
    drift_traffic_window *win;
    size_t n_win, cap_win;
    int64_t win_dropped;
};

static int64_t now_unix_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static drift_status stream_init(drift_traffic_stream *s, const drift_traffic_opts *stats, double alpha,
                                drift_error *err) {
    if (stats) s->stats = *stats;
    else drift_traffic_opts_default(&s->stats);
    s->alpha = alpha;
    size_t nb = 0;
    const double *b = drift_prom_sdr_bounds(&nb);
    drift_status rc = drift_prom_hist_init(&s->sdr, b, nb, err);
    for (int c = 0; c < DRIFT_TC_COUNT && !rc; c++) {
        double bud = s->stats.budget[c];
        if (bud < 0) continue;
        s->cls[c].gated = 1;
        rc = drift_alarm_init(&s->alarm[c], drift_traffic_class_name(c), bud, alpha, err);
        if (rc) drift_error_prefix(err, "stream alarm for %s: ", drift_traffic_class_name(c));
    }
    return rc;
}

drift_status drift_traffic_stream_new(const drift_traffic_opts *stats, double alpha, drift_guard *guard,
                                      drift_embedder *embedder, drift_traffic_stream **out, drift_error *err) {
    *out = NULL;
    drift_traffic_stream *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    s->guard = guard;
    s->embedder = embedder;
    s->guard_on = guard != NULL;
    s->semantic_on = embedder != NULL;
    drift_status rc = stream_init(s, stats, alpha, err);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return DRIFT_OK;
}

void drift_traffic_stream_free(drift_traffic_stream *s) {
    if (!s) return;
    free(s->win);
    free(s);
}

drift_status drift_traffic_stream_set_window(drift_traffic_stream *s, int64_t window_ms, drift_error *err) {
    if (window_ms < 0) return drift_error_set(err, DRIFT_ERR_INVALID, "window: %lld ms is negative", (long long)window_ms);
    if (s->pairs) return drift_error_set(err, DRIFT_ERR_INVALID, "window: set it before the first pair");
    s->window_ms = window_ms;
    return DRIFT_OK;
}

/* The bounds and state of every gated class now, into w. */
static void window_seal(const drift_traffic_stream *s, drift_traffic_window *w) {
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        if (!s->cls[c].gated) {
            w->lo[c] = w->hi[c] = NAN;
            w->state[c] = -1;
            continue;
        }
        drift_alarm_bounds(&s->alarm[c], &w->lo[c], &w->hi[c]);
        w->state[c] = (int)s->alarm[c].state;
    }
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The window a pair at t belongs to (created, the previous one sealed);
 * NULL without windows, or on nomem (the pair is still counted). Pairs
 * out of order go to the last window when older than its start. */
static drift_traffic_window *window_for(drift_traffic_stream *s, int64_t t) {
    if (s->window_ms <= 0) return NULL;
    int64_t start = floor_div(t, s->window_ms) * s->window_ms;
    if (s->n_win && start <= s->win[s->n_win - 1].start_ms) return &s->win[s->n_win - 1];
    if (s->n_win) window_seal(s, &s->win[s->n_win - 1]);
    if (s->n_win == DRIFT_TRAFFIC_STREAM_MAX_WINDOWS) {
        memmove(s->win, s->win + 1, (s->n_win - 1) * sizeof *s->win);
        s->n_win--;
        s->win_dropped++;
    }
    if (s->n_win == s->cap_win) {
        size_t cap = s->cap_win ? 2 * s->cap_win : 16;
        if (cap > DRIFT_TRAFFIC_STREAM_MAX_WINDOWS) cap = DRIFT_TRAFFIC_STREAM_MAX_WINDOWS;
        drift_traffic_window *w = realloc(s->win, cap * sizeof *w);
        if (!w) return NULL;
        s->win = w;
        s->cap_win = cap;
    }
    drift_traffic_window *w = &s->win[s->n_win++];
    memset(w, 0, sizeof *w);
    w->start_ms = start;
    window_seal(s, w);
    return w;
}

static void note_event(drift_traffic_stream *s, int c, drift_alarm_event e, int64_t t) {
    if (e == DRIFT_ALARM_EV_NONE) return;
    drift_traffic_stream_event *x = &s->ev[s->n_ev++];
    const drift_alarm *a = &s->alarm[c];
    x->cls = c;
    x->event = e;
    x->pair = s->pairs;
    x->observed = a->n;
    x->flips = a->flips;
    drift_alarm_bounds(a, &x->lo, &x->hi);
    x->budget = a->budget;
    x->t_unix_ms = t;
    if (e == DRIFT_ALARM_EV_RAISED) s->cls[c].raised_pair = s->pairs;
}

drift_status drift_traffic_stream_add_judged(drift_traffic_stream *s, const char *request_json,
                                             const drift_traffic_pair *pair, int err_base, int err_targ,
                                             int comparable, int64_t t_unix_ms, drift_error *err) {
    (void)err;
    s->n_ev = 0;
    int64_t t = t_unix_ms > 0 ? t_unix_ms : now_unix_ms();
    drift_traffic_window *w = window_for(s, t);
    s->pairs++;
    if (w) w->pairs++;
    if (err_base || err_targ) {
        s->errors++;
        json_t *req = json_loads(request_json ? request_json : "", 0, NULL);
        for (int c = 0; c < DRIFT_TC_COUNT; c++) {
            if (!trf_class_applies(c, req, s->guard_on, s->semantic_on)) continue;
            if (c == DRIFT_TC_MATH && s->cls[c].n + s->cls[c].left_out == 0) {
                s->err_left_math++; /* counted once a pair is math-like */
                continue;
            }
            s->cls[c].left_out++;
            if (w) w->left_out[c]++;
        }
        json_decref(req);
        return DRIFT_OK;
    }
    if (!comparable || !pair) {
        s->not_comparable++;
        return DRIFT_OK;
    }
    s->compared++;
    if (w) w->compared++;
    if (isfinite(pair->sdr)) drift_prom_hist_observe(&s->sdr, pair->sdr);
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        drift_traffic_stream_class *k = &s->cls[c];
        int st = pair->state[c];
        if (st == DRIFT_TP_NA) continue;
        if (c == DRIFT_TC_MATH && k->n + k->left_out == 0 && s->err_left_math) {
            k->left_out += s->err_left_math; /* the earlier error pairs, now that the class is present */
            s->err_left_math = 0;
        }
        if (st == DRIFT_TP_ERROR) {
            k->left_out++;
            if (w) w->left_out[c]++;
            continue;
        }
        int flip = st == DRIFT_TP_FLIP;
        k->n++;
        k->flips += flip;
        if (flip && pair->direction[c] < 0) k->worse++;
        if (flip && pair->direction[c] > 0) k->better++;
        if (w) w->flips[c] += flip;
        if (k->gated) note_event(s, c, drift_alarm_add(&s->alarm[c], flip), t);
    }
    return DRIFT_OK;
}

/* What a guard or an embedder reads of an answer (trf_readable) for both. */
static void stream_guard(drift_traffic_stream *s, const char *request_json, const char *a, const char *b,
                         drift_traffic_pair *p) {
    json_t *req = json_loads(request_json ? request_json : "", 0, NULL);
    char *u = trf_last_user_text(req);
    json_decref(req);
    char *ta = trf_readable(a), *tb = trf_readable(b);
    drift_eval_result res[2];
    memset(res, 0, sizeof res);
    drift_error gerr = {0};
    if (u && ta && tb) {
        const char *reqs[2] = {u, u}, *ans[2] = {ta, tb};
        if (drift_guard_judge(s->guard, reqs, ans, 2, res, &gerr) == DRIFT_OK)
            drift_traffic_pair_set_guard(p, res[0].label, res[1].label);
        else drift_traffic_pair_set_guard(p, DRIFT_LABEL_ERROR, DRIFT_LABEL_ERROR);
        drift_eval_result_clear(&res[0]);
        drift_eval_result_clear(&res[1]);
    } else {
        drift_traffic_pair_set_guard(p, DRIFT_LABEL_ERROR, DRIFT_LABEL_ERROR);
    }
    free(u);
    free(ta);
    free(tb);
}

static void stream_sdr(drift_traffic_stream *s, const char *a, const char *b, drift_traffic_pair *p) {
    char *t[2] = {trf_readable(a), trf_readable(b)};
    float *v = NULL;
    int dim = 0;
    drift_error eerr = {0};
    double sdr = NAN;
    if (t[0] && t[1] && drift_embedder_embed(s->embedder, (const char *const *)t, 2, &v, &dim, &eerr) == DRIFT_OK)
        sdr = drift_sdr(v, v + dim, dim);
    drift_traffic_pair_set_sdr(p, sdr, s->stats.sdr_threshold);
    free(v);
    free(t[0]);
    free(t[1]);
}

drift_status drift_traffic_stream_add(drift_traffic_stream *s, const char *request_json, const char *base_msg,
                                      const char *targ_msg, int err_base, int err_targ, int comparable,
                                      int64_t t_unix_ms, drift_traffic_pair *out_pair, drift_error *err) {
    drift_traffic_pair p;
    memset(&p, 0, sizeof p);
    p.first_diff_char = p.first_diff_word = -1;
    p.sdr = NAN;
    if (!err_base && !err_targ && comparable) {
        drift_status rc = drift_traffic_pair_judge(request_json, base_msg, targ_msg, &p, err);
        if (rc) {
            s->n_ev = 0;
            return rc;
        }
        /* the code class runs the answers' code in the sandbox, here, synchronously
         * (only for a pair with a Python block whose two sides' code differs) */
        drift_traffic_pair_set_code(&p, request_json, base_msg, targ_msg, NULL);
        if (s->guard) stream_guard(s, request_json, base_msg, targ_msg, &p);
        if (s->embedder) stream_sdr(s, base_msg, targ_msg, &p);
    }
    if (out_pair) *out_pair = p;
    return drift_traffic_stream_add_judged(s, request_json, &p, err_base, err_targ, comparable, t_unix_ms, err);
}

const drift_traffic_stream_event *drift_traffic_stream_events(const drift_traffic_stream *s, size_t *n) {
    *n = s->n_ev;
    return s->n_ev ? s->ev : NULL;
}

int64_t drift_traffic_stream_pairs(const drift_traffic_stream *s) { return s->pairs; }
int64_t drift_traffic_stream_compared(const drift_traffic_stream *s) { return s->compared; }
int64_t drift_traffic_stream_not_comparable(const drift_traffic_stream *s) { return s->not_comparable; }
int64_t drift_traffic_stream_errors(const drift_traffic_stream *s) { return s->errors; }

const drift_traffic_stream_class *drift_traffic_stream_class_get(const drift_traffic_stream *s, int cls) {
    return cls >= 0 && cls < DRIFT_TC_COUNT ? &s->cls[cls] : NULL;
}

const drift_alarm *drift_traffic_stream_alarm(const drift_traffic_stream *s, int cls) {
    return cls >= 0 && cls < DRIFT_TC_COUNT && s->cls[cls].gated ? &s->alarm[cls] : NULL;
}

const drift_prom_hist *drift_traffic_stream_sdr_hist(const drift_traffic_stream *s) { return &s->sdr; }

const drift_traffic_window *drift_traffic_stream_windows(const drift_traffic_stream *s, size_t *n,
                                                          int64_t *dropped) {
    *n = s->n_win;
    if (dropped) *dropped = s->win_dropped;
    /* the last window's bounds are the alarms' now */
    if (s->n_win) window_seal(s, (drift_traffic_window *)&s->win[s->n_win - 1]);
    return s->win;
}

int drift_traffic_stream_describe_event(const drift_traffic_stream *s, const drift_traffic_stream_event *e,
                                        drift_buf *out) {
    (void)s;
    const char *what = e->event == DRIFT_ALARM_EV_RAISED    ? "alarm raised"
                       : e->event == DRIFT_ALARM_EV_CLEARED ? "clear"
                                                            : "reopened";
    const char *rel = e->event == DRIFT_ALARM_EV_RAISED    ? "> budget"
                      : e->event == DRIFT_ALARM_EV_CLEARED ? "< budget"
                                                           : "holds budget";
    return buf_printf(out, "%s: %s at pair %lld (%lld flips in %lld pairs; %.0f%% confidence sequence [%.2f%%, %.2f%%] "
                      "%s %.2f%%)",
                      what, drift_traffic_class_name(e->cls), (long long)e->pair, (long long)e->flips,
                      (long long)e->observed, 100 * (1 - s->alpha), 100 * e->lo, 100 * e->hi, rel, 100 * e->budget) < 0
               ? -1
               : 0;
}

/* ---- metrics ---- */

static drift_status fam(drift_prom *p, const char *name, drift_prom_type t, const char *help, double v,
                        drift_error *err) {
    drift_status rc = drift_prom_family(p, name, t, help, err);
    return rc ? rc : drift_prom_sample(p, NULL, 0, v, err);
}

drift_status drift_traffic_stream_write_prom(const drift_traffic_stream *s, drift_prom *p, drift_error *err) {
    drift_status rc;
    if ((rc = fam(p, "driftbench_traffic_pairs_total", DRIFT_PROM_COUNTER, "Pairs of answers judged (errors included).",
                  (double)s->pairs, err)) ||
        (rc = fam(p, "driftbench_traffic_compared_total", DRIFT_PROM_COUNTER,
                  "Pairs with both answers, compared in every class that applies.", (double)s->compared, err)) ||
        (rc = fam(p, "driftbench_traffic_not_comparable_total", DRIFT_PROM_COUNTER,
                  "Pairs the caller marked not comparable (not judged).", (double)s->not_comparable, err)) ||
        (rc = fam(p, "driftbench_traffic_errors_total", DRIFT_PROM_COUNTER,
                  "Pairs with a request error on either side (never a flip).", (double)s->errors, err)))
        return rc;
    static const char *const names[2] = {"driftbench_traffic_flips_total", "driftbench_traffic_left_out_total"};
    static const char *const help[2] = {"Pairs whose answers flipped in the class.",
                                        "Pairs left out of the class (a request error, or the class could not judge)."};
    for (int f = 0; f < 2; f++) {
        if ((rc = drift_prom_family(p, names[f], DRIFT_PROM_COUNTER, help[f], err))) return rc;
        for (int c = 0; c < DRIFT_TC_COUNT; c++) {
            const drift_traffic_stream_class *k = &s->cls[c];
            if (k->n + k->left_out == 0 && !k->gated) continue;
            drift_prom_label l = {"class", drift_traffic_class_name(c)};
            if ((rc = drift_prom_sample(p, &l, 1, (double)(f ? k->left_out : k->flips), err))) return rc;
        }
    }
    if (s->semantic_on) {
        if ((rc = drift_prom_family(p, "driftbench_traffic_sdr", DRIFT_PROM_HISTOGRAM,
                                    "Semantic drift (1 - cosine of the two answers' embeddings) per compared pair.",
                                    err)) ||
            (rc = drift_prom_histogram(p, NULL, 0, &s->sdr, err)))
            return rc;
    }
    drift_alarm al[DRIFT_TC_COUNT];
    int n = 0;
    for (int c = 0; c < DRIFT_TC_COUNT; c++)
        if (s->cls[c].gated) al[n++] = s->alarm[c];
    return n ? drift_alarm_write_prom(al, n, p, err) : DRIFT_OK;
}

/* ---- exact resume ---- */

static json_t *real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

char *drift_traffic_stream_to_json(const drift_traffic_stream *s) {
    json_t *o = json_object(), *bud = json_array(), *cls = json_array(), *al = json_array(), *wins = json_array();
    json_t *hc = json_array();
    int bad = !o || !bud || !cls || !al || !wins || !hc;
    for (int c = 0; !bad && c < DRIFT_TC_COUNT; c++) {
        const drift_traffic_stream_class *k = &s->cls[c];
        bad |= json_array_append_new(bud, s->stats.budget[c] < 0 ? json_null() : json_real(s->stats.budget[c]));
        bad |= json_array_append_new(cls, json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "n", (json_int_t)k->n, "flips",
                                                    (json_int_t)k->flips, "worse", (json_int_t)k->worse, "better",
                                                    (json_int_t)k->better, "left_out", (json_int_t)k->left_out,
                                                    "raised_pair", (json_int_t)k->raised_pair));
        json_t *a = NULL;
        if (k->gated) {
            char *t = drift_alarm_to_json(&s->alarm[c]);
            a = t ? json_loads(t, 0, NULL) : NULL;
            free(t);
            bad |= !a;
        }
        bad |= json_array_append_new(al, a ? a : json_null());
    }
    for (size_t i = 0; !bad && i <= s->sdr.n_bounds; i++) bad |= json_array_append_new(hc, json_integer((json_int_t)s->sdr.counts[i]));
    for (size_t i = 0; !bad && i < s->n_win; i++) {
        drift_traffic_window w = s->win[i];
        if (i + 1 == s->n_win) window_seal(s, &w);
        json_t *fl = json_array(), *lo = json_array(), *lb = json_array(), *hb = json_array(), *stt = json_array();
        for (int c = 0; fl && lo && lb && hb && stt && c < DRIFT_TC_COUNT; c++) {
            json_array_append_new(fl, json_integer((json_int_t)w.flips[c]));
            json_array_append_new(lo, json_integer((json_int_t)w.left_out[c]));
            json_array_append_new(lb, real_or_null(w.lo[c]));
            json_array_append_new(hb, real_or_null(w.hi[c]));
            json_array_append_new(stt, json_integer(w.state[c]));
        }
        bad |= json_array_append_new(wins, json_pack("{s:I,s:I,s:I,s:o,s:o,s:o,s:o,s:o}", "start_ms",
                                                     (json_int_t)w.start_ms, "pairs", (json_int_t)w.pairs, "compared",
                                                     (json_int_t)w.compared, "flips", fl, "left_out", lo, "lo", lb,
                                                     "hi", hb, "state", stt));
    }
    if (!bad) {
        json_t *h = json_pack("{s:o,s:f,s:I}", "counts", hc, "sum", s->sdr.sum, "count", (json_int_t)s->sdr.count);
        hc = NULL;
        bad |= !h || json_object_set_new(o, "driftbench_traffic_stream", json_integer(STREAM_VERSION)) ||
               json_object_set_new(o, "alpha", json_real(s->alpha)) || json_object_set(o, "budget", bud) ||
               json_object_set_new(o, "sdr_threshold", json_real(s->stats.sdr_threshold)) ||
               json_object_set_new(o, "guard", json_boolean(s->guard_on)) ||
               json_object_set_new(o, "embedder", json_boolean(s->semantic_on)) ||
               json_object_set_new(o, "window_ms", json_integer((json_int_t)s->window_ms)) ||
               json_object_set_new(o, "pairs", json_integer((json_int_t)s->pairs)) ||
               json_object_set_new(o, "compared", json_integer((json_int_t)s->compared)) ||
               json_object_set_new(o, "not_comparable", json_integer((json_int_t)s->not_comparable)) ||
               json_object_set_new(o, "errors", json_integer((json_int_t)s->errors)) ||
               json_object_set_new(o, "err_left_math", json_integer((json_int_t)s->err_left_math)) ||
               json_object_set(o, "classes", cls) || json_object_set(o, "alarms", al) ||
               json_object_set_new(o, "sdr_hist", h) || json_object_set(o, "windows", wins) ||
               json_object_set_new(o, "windows_dropped", json_integer((json_int_t)s->win_dropped));
    }
    char *r = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    json_decref(bud);
    json_decref(cls);
    json_decref(al);
    json_decref(wins);
    json_decref(hc);
    return r;
}

/* Reads an integer member >= 0 (min) into *v; 0 ok, -1 missing or wrong. */
static int get_int(const json_t *o, const char *k, int64_t min, int64_t *v) {
    const json_t *x = json_object_get(o, k);
    if (!json_is_integer(x) || json_integer_value(x) < min) return -1;
    *v = (int64_t)json_integer_value(x);
    return 0;
}

static double get_real(const json_t *x) { return json_is_number(x) ? json_number_value(x) : NAN; }

drift_status drift_traffic_stream_from_json(const char *text, drift_guard *guard, drift_embedder *embedder,
                                            drift_traffic_stream **out, drift_error *err) {
    *out = NULL;
    json_error_t je;
    json_t *o = json_loads(text ? text : "", 0, &je);
    drift_traffic_stream *s = NULL;
    drift_status rc = DRIFT_OK;
#define BAD(code, ...)                                  \
    do {                                                \
        rc = drift_error_set(err, code, __VA_ARGS__);   \
        goto out;                                       \
    } while (0)
    if (!json_is_object(o)) BAD(DRIFT_ERR_PARSE, "stream snapshot: not a JSON object (%s)", je.text);
    int64_t ver = 0;
    if (get_int(o, "driftbench_traffic_stream", 0, &ver)) BAD(DRIFT_ERR_PARSE, "stream snapshot: no version member");
    if (ver != STREAM_VERSION) BAD(DRIFT_ERR_INVALID, "stream snapshot: version %lld (this build reads 1)", (long long)ver);
    const json_t *bud = json_object_get(o, "budget"), *cls = json_object_get(o, "classes"),
                 *al = json_object_get(o, "alarms"), *h = json_object_get(o, "sdr_hist"),
                 *wins = json_object_get(o, "windows");
    /* nc: the snapshot's classes; one taken before the code class (8) reads with
     * that class at its start (no pairs, the default budget) */
    int nc = (int)json_array_size(bud);
    if (nc != DRIFT_TC_COUNT && nc != DRIFT_TC_CODE) nc = -1;
    if (!json_is_array(bud) || nc < 0 || !json_is_array(cls) || json_array_size(cls) != (size_t)nc ||
        !json_is_array(al) || json_array_size(al) != (size_t)nc ||
        !json_is_object(h) || !json_is_array(wins) || !json_is_boolean(json_object_get(o, "guard")) ||
        !json_is_boolean(json_object_get(o, "embedder")))
        BAD(DRIFT_ERR_PARSE, "stream snapshot: budget, classes, alarms (9 each, or 8), sdr_hist, windows, guard, embedder "
                             "are needed");
    if (json_is_true(json_object_get(o, "guard")) != (guard != NULL) ||
        json_is_true(json_object_get(o, "embedder")) != (embedder != NULL))
        BAD(DRIFT_ERR_INVALID, "stream snapshot: it was taken with the guard %s and the embedder %s; give the same",
            json_is_true(json_object_get(o, "guard")) ? "on" : "off",
            json_is_true(json_object_get(o, "embedder")) ? "on" : "off");
    drift_traffic_opts st;
    drift_traffic_opts_default(&st);
    for (int c = 0; c < nc; c++) {
        const json_t *b = json_array_get(bud, c);
        st.budget[c] = json_is_null(b) ? -1 : get_real(b);
        if (!(st.budget[c] == -1 || (st.budget[c] >= 0 && st.budget[c] <= 1)))
            BAD(DRIFT_ERR_INVALID, "stream snapshot: budget of %s out of range", drift_traffic_class_name(c));
    }
    st.sdr_threshold = get_real(json_object_get(o, "sdr_threshold"));
    if (!isfinite(st.sdr_threshold)) BAD(DRIFT_ERR_PARSE, "stream snapshot: sdr_threshold missing");
    double alpha = get_real(json_object_get(o, "alpha"));
    if ((rc = drift_traffic_stream_new(&st, alpha, guard, embedder, &s, err))) goto out;
    if (get_int(o, "window_ms", 0, &s->window_ms) || get_int(o, "pairs", 0, &s->pairs) ||
        get_int(o, "compared", 0, &s->compared) || get_int(o, "not_comparable", 0, &s->not_comparable) ||
        get_int(o, "errors", 0, &s->errors) || get_int(o, "err_left_math", 0, &s->err_left_math) ||
        get_int(o, "windows_dropped", 0, &s->win_dropped))
        BAD(DRIFT_ERR_PARSE, "stream snapshot: a count is missing or negative");
    if (s->compared + s->not_comparable + s->errors != s->pairs)
        BAD(DRIFT_ERR_INVALID, "stream snapshot: compared + not_comparable + errors != pairs");
    for (int c = 0; c < nc; c++) {
        drift_traffic_stream_class *k = &s->cls[c];
        const json_t *x = json_array_get(cls, c), *a = json_array_get(al, c);
        if (get_int(x, "n", 0, &k->n) || get_int(x, "flips", 0, &k->flips) || get_int(x, "worse", 0, &k->worse) ||
            get_int(x, "better", 0, &k->better) || get_int(x, "left_out", 0, &k->left_out) ||
            get_int(x, "raised_pair", 0, &k->raised_pair))
            BAD(DRIFT_ERR_PARSE, "stream snapshot: classes[%d] lacks a count", c);
        if (k->flips > k->n || k->worse + k->better > k->flips)
            BAD(DRIFT_ERR_INVALID, "stream snapshot: %s has more flips than pairs", drift_traffic_class_name(c));
        if (!k->gated) {
            if (!json_is_null(a)) BAD(DRIFT_ERR_INVALID, "stream snapshot: an alarm for ungated %s", drift_traffic_class_name(c));
            continue;
        }
        char *t = json_is_object(a) ? json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        if (!t) BAD(DRIFT_ERR_PARSE, "stream snapshot: no alarm for gated %s", drift_traffic_class_name(c));
        rc = drift_alarm_from_json(t, &s->alarm[c], err);
        free(t);
        if (rc) {
            drift_error_prefix(err, "stream snapshot: ");
            goto out;
        }
        if (s->alarm[c].n != k->n || s->alarm[c].flips != k->flips || s->alarm[c].budget != st.budget[c])
            BAD(DRIFT_ERR_INVALID, "stream snapshot: the alarm of %s disagrees with its counts", drift_traffic_class_name(c));
    }
    const json_t *hc = json_object_get(h, "counts");
    if (!json_is_array(hc) || json_array_size(hc) != s->sdr.n_bounds + 1)
        BAD(DRIFT_ERR_PARSE, "stream snapshot: sdr_hist.counts must have %zu numbers", s->sdr.n_bounds + 1);
    uint64_t total = 0;
    for (size_t i = 0; i <= s->sdr.n_bounds; i++) {
        const json_t *x = json_array_get(hc, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0) BAD(DRIFT_ERR_PARSE, "stream snapshot: sdr_hist.counts");
        s->sdr.counts[i] = (uint64_t)json_integer_value(x);
        total += s->sdr.counts[i];
    }
    int64_t cnt = 0;
    if (get_int(h, "count", 0, &cnt) || (uint64_t)cnt != total)
        BAD(DRIFT_ERR_INVALID, "stream snapshot: sdr_hist.count is not the sum of its buckets");
    s->sdr.count = total;
    s->sdr.sum = get_real(json_object_get(h, "sum"));
    if (!isfinite(s->sdr.sum)) BAD(DRIFT_ERR_PARSE, "stream snapshot: sdr_hist.sum");
    size_t nw = json_array_size(wins);
    if (nw > DRIFT_TRAFFIC_STREAM_MAX_WINDOWS) BAD(DRIFT_ERR_INVALID, "stream snapshot: too many windows");
    if (nw && s->window_ms <= 0) BAD(DRIFT_ERR_INVALID, "stream snapshot: windows without a window size");
    if (nw) {
        s->win = calloc(nw, sizeof *s->win);
        if (!s->win) BAD(DRIFT_ERR_NOMEM, "out of memory");
        s->cap_win = nw;
    }
    for (size_t i = 0; i < nw; i++) {
        const json_t *x = json_array_get(wins, i);
        drift_traffic_window *w = &s->win[i];
        const json_t *arr[5] = {json_object_get(x, "flips"), json_object_get(x, "left_out"), json_object_get(x, "lo"),
                                json_object_get(x, "hi"), json_object_get(x, "state")};
        int ok = !get_int(x, "start_ms", INT64_MIN, &w->start_ms) && !get_int(x, "pairs", 0, &w->pairs) &&
                 !get_int(x, "compared", 0, &w->compared);
        for (int k = 0; k < 5; k++) ok &= json_is_array(arr[k]) && json_array_size(arr[k]) == (size_t)nc;
        if (!ok || (i && w->start_ms <= s->win[i - 1].start_ms) || w->start_ms % s->window_ms)
            BAD(DRIFT_ERR_PARSE, "stream snapshot: windows[%zu] is malformed", i);
        for (int c = nc; c < DRIFT_TC_COUNT; c++) { /* a class the snapshot lacks: at its start */
            w->lo[c] = w->hi[c] = NAN;
            w->state[c] = -1;
            if (!s->cls[c].gated) continue;
            drift_alarm_bounds(&s->alarm[c], &w->lo[c], &w->hi[c]);
            w->state[c] = (int)s->alarm[c].state;
        }
        for (int c = 0; c < nc; c++) {
            w->flips[c] = json_integer_value(json_array_get(arr[0], c));
            w->left_out[c] = json_integer_value(json_array_get(arr[1], c));
            w->lo[c] = get_real(json_array_get(arr[2], c));
            w->hi[c] = get_real(json_array_get(arr[3], c));
            w->state[c] = (int)json_integer_value(json_array_get(arr[4], c));
        }
        s->n_win++;
    }
    *out = s;
    s = NULL;
out:
#undef BAD
    drift_traffic_stream_free(s);
    json_decref(o);
    return rc;
}
