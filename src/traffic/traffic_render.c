/* traffic_render.c - the replay report as text and as JSON
 * ("driftbench.replay/1"). Outside text (ids, labels, targets) goes
 * through the sanitiser in the text form and through jansson in JSON. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/text.h"
#include "driftbench/traffic_stream.h"
#include "traffic/traffic_internal.h"
#include "util/util.h"

#define MAX_EXAMPLES 10

static const char *safe(drift_buf *tmp, const char *s) {
    tmp->len = 0;
    if (tmp->data) tmp->data[0] = '\0';
    drift_sanitize_append(tmp, s ? s : "", s ? strlen(s) : 0, DRIFT_SAN_LINE);
    return tmp->data ? tmp->data : "";
}

/* Whether a class has an alarm worth showing: gated and some pair it applies to. */
static int alarm_shown(const drift_replay_report *r, int c) { return r->alarm_on[c] && r->sum.cls[c].present; }

static void alarms_text(drift_buf *b, drift_buf *tmp, const drift_replay_report *r) {
    int any = 0;
    for (int c = 0; c < DRIFT_TC_COUNT; c++) any |= alarm_shown(r, c);
    if (!any) return;
    buf_printf(b, "\nstream alarms (pairs in %s order; anytime-valid %.0f%% confidence sequence, alpha %g per class):\n",
               r->window_s ? "time" : "log", 100 * (1 - r->alpha), r->alpha);
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        if (!alarm_shown(r, c)) continue;
        const drift_alarm *a = &r->alarm[c];
        double lo, hi;
        drift_alarm_bounds(a, &lo, &hi);
        buf_printf(b, "  %-10s ", drift_traffic_class_name(c));
        size_t k = r->alarm_raised_pair[c];
        if (a->state == DRIFT_ALARM_FIRING && k >= 1 && k <= r->n_pairs)
            buf_printf(b, "ALARM raised at %s (line %zu), the class's pair %lld; now %lld flips in %lld pairs, "
                          "[%.2f%%, %.2f%%] > budget %.2f%%\n",
                       safe(tmp, r->pairs[k - 1].id), r->pairs[k - 1].line, (long long)a->raised_at,
                       (long long)a->flips, (long long)a->n, 100 * lo, 100 * hi, 100 * a->budget);
        else if (a->state == DRIFT_ALARM_CLEAR)
            buf_printf(b, "clear: upper bound %.2f%% < budget %.2f%% (%lld pairs, %lld flips)\n", 100 * hi,
                       100 * a->budget, (long long)a->n, (long long)a->flips);
        else
            buf_printf(b, "not raised: the evidence is not enough yet, lower bound %.2f%% vs budget %.2f%% "
                          "(upper %.2f%%; %lld pairs, %lld flips)\n",
                       100 * lo, 100 * a->budget, 100 * hi, (long long)a->n, (long long)a->flips);
    }
}

static void iso_utc(int64_t unix_ms, char out[32]) {
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm)) snprintf(out, 32, "?");
}

/* Drift over time: a line per window, the classes with some pair. */
static void windows_text(drift_buf *b, const drift_replay_report *r) {
    if (!r->window_s) return;
    buf_printf(b, "\ndrift over time (windows of %lld s by the answers' stored times, UTC; the alarms fed in time "
                  "order; bounds after the window's last pair):\n",
               (long long)r->window_s);
    for (size_t i = 0; i < r->n_windows; i++) {
        const drift_traffic_window *w = &r->windows[i];
        char when[32];
        iso_utc(w->start_ms, when);
        buf_printf(b, "  %s  pairs %lld", when, (long long)w->pairs);
        const char *sep = "  flips ";
        for (int c = 0; c < DRIFT_TC_COUNT; c++) {
            if (!r->sum.cls[c].present) continue;
            buf_printf(b, "%s%s %lld", sep, drift_traffic_class_name(c), (long long)w->flips[c]);
            sep = ", ";
        }
        for (int c = 0; c < DRIFT_TC_COUNT; c++) {
            if (!r->sum.cls[c].present || w->state[c] < 0) continue;
            buf_printf(b, "  %s [%.1f%%, %.1f%%]%s", drift_traffic_class_name(c), 100 * w->lo[c], 100 * w->hi[c],
                       w->state[c] == DRIFT_ALARM_FIRING ? " ALARM" : "");
        }
        buf_puts(b, "\n");
    }
}

char *drift_replay_render_text(const drift_replay_report *r) {
    drift_buf b = {0}, t1 = {0}, t2 = {0};
    const drift_traffic_summary *s = &r->sum;
    buf_printf(&b, "replay of %s (%s): %zu requests\n", safe(&t1, r->log_name), r->log_format, s->pairs);
    buf_printf(&b, "  baseline: %s (run %s)%s\n", safe(&t1, r->baseline_target), safe(&t2, r->baseline_label),
               r->logged ? " - the logged responses" : "");
    buf_printf(&b, "  target:   %s (run %s)\n", safe(&t1, r->target_target), safe(&t2, r->target_label));
    buf_printf(&b, "  asked now: baseline %zu, target %zu (the rest were stored: resumed)\n", r->asked_baseline,
               r->asked_target);
    buf_printf(&b, "  overrides for determinism (" DRIFT_TRAFFIC_OVERRIDE_RULES "):");
    int any = 0;
    for (int f = 0; f < 7; f++)
        if (r->overrides[f]) {
            buf_printf(&b, "%s %s %ld", any ? "," : "", drift_traffic_override_fields[f], r->overrides[f]);
            any = 1;
        }
    buf_printf(&b, "%s\n", any ? "" : " none");
    if (r->privacy) buf_printf(&b, "  store: %s\n", r->privacy);
    if (r->not_judged)
        buf_printf(&b, "  not judged again: %zu pairs stored as hashes by an earlier call (their texts are gone)\n",
                   r->not_judged);
    buf_printf(&b, "  answered pairs: %zu; request errors (never answers, left out of every flip): baseline %zu, "
                   "target %zu\n",
               s->answered, s->errors_baseline, s->errors_target);
    buf_printf(&b, "\n%-10s %7s %7s %8s %17s %6s %6s %9s %8s  %s\n", "class", "pairs", "flips", "rate", "95% CI",
               "worse", "better", "McNemar p", "budget", "decision");
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        const drift_traffic_class_result *x = &s->cls[c];
        if (!x->present) {
            const char *why = c == DRIFT_TC_GUARD && !r->guard ? "off (no --guard)"
                              : c == DRIFT_TC_SEMANTIC && !r->embedder ? "off (no --embedder)"
                                                                       : "no pair it applies to";
            buf_printf(&b, "%-10s %s\n", drift_traffic_class_name(c), why);
            continue;
        }
        char budget[16], p[16], wb[2][16];
        if (x->budget < 0) snprintf(budget, sizeof budget, "none");
        else snprintf(budget, sizeof budget, "%.2f%%", 100 * x->budget);
        if (isnan(x->mcnemar_p)) {
            snprintf(p, sizeof p, "-");
            snprintf(wb[0], sizeof wb[0], "-");
            snprintf(wb[1], sizeof wb[1], "-");
        } else {
            snprintf(p, sizeof p, "%.3g", x->mcnemar_p);
            snprintf(wb[0], sizeof wb[0], "%ld", x->worse);
            snprintf(wb[1], sizeof wb[1], "%ld", x->better);
        }
        buf_printf(&b, "%-10s %7ld %7ld %7.2f%% [%6.2f%%,%6.2f%%] %6s %6s %9s %8s  %s", drift_traffic_class_name(c),
                   x->n, x->flips, 100 * x->rate, 100 * x->ci95[0], 100 * x->ci95[1], wb[0], wb[1], p, budget,
                   drift_decision_name(x->decision));
        if (x->left_out) buf_printf(&b, " (%ld left out)", x->left_out);
        if (x->decision == DRIFT_DECISION_INCONCLUSIVE && x->more_pairs > 0)
            buf_printf(&b, " (~%ld more pairs would decide)", x->more_pairs);
        buf_puts(&b, "\n");
    }
    alarms_text(&b, &t1, r);
    windows_text(&b, r);
    const drift_traffic_taxonomy *tx = &s->taxonomy;
    buf_printf(&b, "\ntaxonomy (pairs, highest risk first): safety %ld (safe->unsafe %ld, unsafe->safe %ld), "
                   "functional %ld (%ld worse), semantic %ld, text only %ld\n",
               tx->safety, tx->safe_to_unsafe, tx->unsafe_to_safe, tx->functional, tx->functional_worse,
               tx->semantic, tx->textual_only);
    if (r->embedder) buf_printf(&b, "semantic: SDR > %.2f with embedder %s\n", s->sdr_threshold, safe(&t1, r->embedder));
    if (r->guard) buf_printf(&b, "guard: %s\n", safe(&t1, r->guard));
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        if (!s->cls[c].flips) continue;
        buf_printf(&b, "\n%s flips (first %d):\n", drift_traffic_class_name(c), MAX_EXAMPLES);
        int shown = 0;
        for (size_t i = 0; i < r->n_pairs && shown < MAX_EXAMPLES; i++) {
            const drift_replay_pair *p = &r->pairs[i];
            if (p->error_baseline || p->error_target || p->p.state[c] != DRIFT_TP_FLIP) continue;
            buf_printf(&b, "  %s (line %zu)", safe(&t1, p->id), p->line);
            if (p->p.direction[c]) buf_printf(&b, " %s", p->p.direction[c] < 0 ? "worse" : "better");
            if (p->p.first_diff_char >= 0)
                buf_printf(&b, " parts at char %ld, word %ld", p->p.first_diff_char, p->p.first_diff_word);
            if (c == DRIFT_TC_SEMANTIC) buf_printf(&b, " SDR %.3f", p->p.sdr);
            buf_puts(&b, "\n");
            shown++;
        }
    }
    buf_printf(&b, "\ndecision: %s\n", drift_decision_name(s->decision));
    drift_buf_free(&t1);
    drift_buf_free(&t2);
    return buf_steal(&b);
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

char *drift_replay_render_json(const drift_replay_report *r) {
    const drift_traffic_summary *s = &r->sum;
    json_t *o = json_object();
    json_object_set_new(o, "schema_version", json_integer(DRIFT_JSON_SCHEMA_VERSION));
    json_object_set_new(o, "schema", json_string("driftbench.replay/1"));
    json_object_set_new(o, "log", json_string(r->log_name ? r->log_name : ""));
    json_object_set_new(o, "format", json_string(r->log_format ? r->log_format : ""));
    json_object_set_new(o, "baseline", json_pack("{s:s,s:s,s:b,s:I}", "label", r->baseline_label, "target",
                                                 r->baseline_target, "logged", r->logged, "asked",
                                                 (json_int_t)r->asked_baseline));
    json_object_set_new(o, "target", json_pack("{s:s,s:s,s:I}", "label", r->target_label, "target", r->target_target,
                                               "asked", (json_int_t)r->asked_target));
    json_t *ov = json_object();
    for (int f = 0; f < 7; f++)
        if (r->overrides[f]) json_object_set_new(ov, drift_traffic_override_fields[f], json_integer(r->overrides[f]));
    json_object_set_new(o, "override_rules", json_string(DRIFT_TRAFFIC_OVERRIDE_RULES));
    json_object_set_new(o, "overrides", ov);
    json_object_set_new(o, "pairs", json_integer((json_int_t)s->pairs));
    json_object_set_new(o, "answered", json_integer((json_int_t)s->answered));
    json_object_set_new(o, "errors", json_pack("{s:I,s:I,s:I}", "baseline", (json_int_t)s->errors_baseline, "target",
                                               (json_int_t)s->errors_target, "both", (json_int_t)s->errors_both));
    json_object_set_new(o, "guard", r->guard ? json_string(r->guard) : json_null());
    json_object_set_new(o, "embedder", r->embedder ? json_string(r->embedder) : json_null());
    json_object_set_new(o, "sdr_threshold", json_real(s->sdr_threshold));
    json_object_set_new(o, "decide", json_string(s->rule == DRIFT_DECIDE_POINT ? "point" : "interval"));
    json_object_set_new(o, "alpha", json_real(r->alpha));
    json_object_set_new(o, "store", r->privacy ? json_string(r->privacy) : json_null());
    json_object_set_new(o, "not_judged", json_integer((json_int_t)r->not_judged));
    json_t *cls = json_object();
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        const drift_traffic_class_result *x = &s->cls[c];
        json_t *e = json_object();
        json_object_set_new(e, "present", json_boolean(x->present));
        json_object_set_new(e, "n", json_integer(x->n));
        json_object_set_new(e, "flips", json_integer(x->flips));
        json_object_set_new(e, "left_out", json_integer(x->left_out));
        json_object_set_new(e, "rate", json_real(x->rate));
        json_object_set_new(e, "ci95", json_pack("[f,f]", x->ci95[0], x->ci95[1]));
        if (trf_class_directional(c)) {
            json_object_set_new(e, "worse", json_integer(x->worse));
            json_object_set_new(e, "better", json_integer(x->better));
            json_object_set_new(e, "mcnemar_p", num_or_null(x->mcnemar_p));
        }
        json_object_set_new(e, "budget", x->budget < 0 ? json_null() : json_real(x->budget));
        json_object_set_new(e, "decision", json_string(x->decision == DRIFT_DECISION_NOT_GATED
                                                           ? "not_gated"
                                                           : drift_decision_name(x->decision)));
        json_object_set_new(e, "decide_ci", json_pack("[f,f]", x->decide_ci[0], x->decide_ci[1]));
        json_object_set_new(e, "left_out_share", json_real(x->left_out_share));
        if (x->decision == DRIFT_DECISION_INCONCLUSIVE) json_object_set_new(e, "more_pairs", json_integer(x->more_pairs));
        json_t *fl = json_array();
        for (size_t i = 0; i < r->n_pairs; i++) {
            const drift_replay_pair *p = &r->pairs[i];
            if (p->error_baseline || p->error_target || p->p.state[c] != DRIFT_TP_FLIP) continue;
            json_t *f = json_pack("{s:s,s:I}", "id", p->id, "line", (json_int_t)p->line);
            if (p->p.direction[c]) json_object_set_new(f, "direction", json_integer(p->p.direction[c]));
            if (p->p.first_diff_char >= 0) {
                json_object_set_new(f, "first_diff_char", json_integer(p->p.first_diff_char));
                json_object_set_new(f, "first_diff_word", json_integer(p->p.first_diff_word));
            }
            if (c == DRIFT_TC_SEMANTIC) json_object_set_new(f, "sdr", num_or_null(p->p.sdr));
            json_array_append_new(fl, f);
        }
        json_object_set_new(e, "flipped", fl);
        if (r->alarm_on[c]) {
            const drift_alarm *a = &r->alarm[c];
            double lo, hi;
            drift_alarm_bounds(a, &lo, &hi);
            size_t k = r->alarm_raised_pair[c];
            int raised = a->state == DRIFT_ALARM_FIRING && k >= 1 && k <= r->n_pairs;
            json_t *al = json_pack("{s:s,s:I,s:I,s:f,s:f,s:f}", "state", drift_alarm_state_name(a->state), "n",
                                   (json_int_t)a->n, "flips", (json_int_t)a->flips, "lower", lo, "upper", hi,
                                   "budget", a->budget);
            json_object_set_new(al, "raised_at_pair", raised ? json_integer((json_int_t)k) : json_null());
            json_object_set_new(al, "raised_at_id", raised ? json_string(r->pairs[k - 1].id) : json_null());
            json_object_set_new(al, "raised_after", raised ? json_integer((json_int_t)a->raised_at) : json_null());
            json_object_set_new(e, "alarm", al);
        } else {
            json_object_set_new(e, "alarm", json_null());
        }
        json_object_set_new(cls, drift_traffic_class_name(c), e);
    }
    json_object_set_new(o, "classes", cls);
    if (r->window_s) {
        json_t *wl = json_array();
        for (size_t i = 0; i < r->n_windows; i++) {
            const drift_traffic_window *w = &r->windows[i];
            char when[32];
            iso_utc(w->start_ms, when);
            json_t *fl = json_object(), *lo = json_object(), *al = json_object();
            for (int c = 0; c < DRIFT_TC_COUNT; c++) {
                if (!s->cls[c].present) continue;
                const char *nm = drift_traffic_class_name(c);
                json_object_set_new(fl, nm, json_integer((json_int_t)w->flips[c]));
                json_object_set_new(lo, nm, json_integer((json_int_t)w->left_out[c]));
                if (w->state[c] >= 0)
                    json_object_set_new(al, nm, json_pack("{s:f,s:f,s:s}", "lower", w->lo[c], "upper", w->hi[c], "state",
                                                          drift_alarm_state_name((drift_alarm_state)w->state[c])));
            }
            json_array_append_new(wl, json_pack("{s:s,s:I,s:I,s:I,s:o,s:o,s:o}", "start", when, "start_unix_ms",
                                                (json_int_t)w->start_ms, "pairs", (json_int_t)w->pairs, "compared",
                                                (json_int_t)w->compared, "flips", fl, "left_out", lo, "alarm", al));
        }
        json_object_set_new(o, "windows", json_pack("{s:I,s:s,s:o}", "size_s", (json_int_t)r->window_s, "order",
                                                    "time", "list", wl));
    } else {
        json_object_set_new(o, "windows", json_null());
    }
    const drift_traffic_taxonomy *tx = &s->taxonomy;
    json_object_set_new(o, "taxonomy",
                        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "safety", (json_int_t)tx->safety, "safe_to_unsafe",
                                  (json_int_t)tx->safe_to_unsafe, "unsafe_to_safe", (json_int_t)tx->unsafe_to_safe,
                                  "functional", (json_int_t)tx->functional, "functional_worse",
                                  (json_int_t)tx->functional_worse, "semantic", (json_int_t)tx->semantic,
                                  "text_only", (json_int_t)tx->textual_only));
    json_t *errs = json_array();
    for (size_t i = 0; i < r->n_pairs; i++) {
        const drift_replay_pair *p = &r->pairs[i];
        if (!p->error_baseline && !p->error_target) continue;
        json_array_append_new(errs, json_pack("{s:s,s:I,s:b,s:b}", "id", p->id, "line", (json_int_t)p->line,
                                              "baseline", p->error_baseline, "target", p->error_target));
    }
    json_object_set_new(o, "error_pairs", errs);
    json_object_set_new(o, "decision", json_string(s->decision == DRIFT_DECISION_NOT_GATED
                                                       ? "not_gated"
                                                       : drift_decision_name(s->decision)));
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(o);
    char *hard = txt ? drift_json_harden(txt) : NULL;
    free(txt);
    return hard;
}
