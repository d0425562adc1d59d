/* monitor_render.c - what a distribution monitor says about a migration,
 * beside what flipped (report.h), pure: the four detectors (score, alarm,
 * rule), the flips per workload of the comparison, and the verdict that
 * names the flips no alarm caught. Text for a terminal; JSON with the same
 * figures (rates as fractions). The labels and the embedder's name come
 * from outside: sanitised in text, repaired in JSON (report_safe.c). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"
#include "suite/workload.h"
#include "util/util.h"

static char *render_text(const drift_monitor_data *d, const drift_monitor_report *rep, const drift_comparison *cmp,
                         const char *base, const char *targ) {
    util_buf b = {0};
    buf_puts(&b, "monitor: baseline '");
    report_put_name(&b, base);
    buf_puts(&b, "' vs target '");
    report_put_name(&b, targ);
    buf_puts(&b, "'\nembeddings: ");
    report_put_name(&b, d->embedder);
    buf_printf(&b, ", dim %d: %zu of %zu baseline answers, %zu of %zu target answers\n\n", d->dim, d->n_ref,
               d->answered_ref, d->n_cur, d->answered_cur);
    buf_puts(&b, "distribution-drift detectors (Evidently defaults)\n");
    buf_printf(&b, "  %-9s %10s  %-5s  %s\n", "method", "score", "alarm", "rule");
    for (int m = 0; m < DRIFT_MON_COUNT; m++) {
        const drift_monitor_result *r = &rep->r[m];
        buf_printf(&b, "  %-9s %10.4f  %-5s  %s\n", drift_monitor_method_name((drift_monitor_method)m), r->score,
                   r->drift ? "YES" : "no", r->rule);
    }
    buf_printf(&b, "  (model: random-classifier AUC q95 %.4f; ratio: %zu of %d components drifted; mmd: sigma^2 %.4g)\n",
               rep->model_random_auc_q, rep->ratio_drifted, rep->dim, rep->mmd_sigma2);
    buf_printf(&b, "alarms: %d of %d\n\n", rep->alarms, DRIFT_MON_COUNT);

    buf_puts(&b, "functional flips (driftbench compare)\n");
    buf_printf(&b, "  %-13s %6s %6s %10s  %s\n", "workload", "n", "flips", "flip rate", "95% CI");
    long total = 0;
    int shown = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (!cmp->present[w]) continue;
        const drift_wl_result *r = &cmp->wl[w];
        buf_printf(&b, "  %-13s %6ld %6ld %9.2f%%  [%.2f%%, %.2f%%]", drift_workload_name((drift_workload)w), r->n,
                   r->flips, 100.0 * r->flip_rate, 100.0 * r->ci95[0], 100.0 * r->ci95[1]);
        const wl_traits *tr = wl_traits_of((drift_workload)w);
        if (tr->pairwise && !isnan(r->sdr_mean)) buf_printf(&b, "  (mean SDR %.4f)", r->sdr_mean);
        if (tr->taxonomy == WL_CLASS_SAFETY)
            buf_printf(&b, "  (%s %ld, %s %ld)", wl_dir_name((drift_workload)w, -1, WL_DIR_TEXT), r->correct_to_incorrect,
                       wl_dir_name((drift_workload)w, 1, WL_DIR_TEXT), r->incorrect_to_correct);
        buf_puts(&b, "\n");
        total += r->flips;
        shown++;
    }
    if (!shown) buf_puts(&b, "  (no scored pairs: run `driftbench score` on both runs)\n");
    buf_puts(&b, "\n");
    if (total > 0 && rep->alarms == 0)
        buf_printf(&b, "verdict: %ld flipped answers, 0 distribution alarms: no distribution monitor above would have "
                       "caught them\n",
                   total);
    else
        buf_printf(&b, "verdict: %ld flipped answers, %d of %d distribution alarms\n", total, rep->alarms,
                   DRIFT_MON_COUNT);
    char *out = NULL;
    drift_error err = {0};
    report_text_finish(&b, &out, &err);
    return out;
}

static char *render_json(const drift_monitor_data *d, const drift_monitor_report *rep, const drift_comparison *cmp,
                         const char *base, const char *targ) {
    json_t *o = json_object(), *dets = json_array(), *flips = json_array();
    if (!o || !dets || !flips) {
        json_decref(o);
        json_decref(dets);
        json_decref(flips);
        return NULL;
    }
    json_object_set_new(o, "baseline", report_json_str(base));
    json_object_set_new(o, "target", report_json_str(targ));
    json_object_set_new(o, "embedder", report_json_str(d->embedder));
    json_object_set_new(o, "dim", json_integer(d->dim));
    json_object_set_new(o, "n_baseline", json_integer((json_int_t)d->n_ref));
    json_object_set_new(o, "n_target", json_integer((json_int_t)d->n_cur));
    for (int m = 0; m < DRIFT_MON_COUNT; m++) {
        const drift_monitor_result *r = &rep->r[m];
        json_t *x = json_object();
        json_object_set_new(x, "method", json_string(drift_monitor_method_name((drift_monitor_method)m)));
        json_object_set_new(x, "score", json_real(r->score));
        json_object_set_new(x, "threshold", json_real(r->threshold));
        json_object_set_new(x, "drift", json_boolean(r->drift));
        json_object_set_new(x, "rule", json_string(r->rule));
        json_array_append_new(dets, x);
    }
    json_object_set_new(o, "detectors", dets);
    json_object_set_new(o, "alarms", json_integer(rep->alarms));
    json_object_set_new(o, "model_random_auc_q95", json_real(rep->model_random_auc_q));
    json_object_set_new(o, "ratio_drifted_components", json_integer((json_int_t)rep->ratio_drifted));
    json_object_set_new(o, "mmd_sigma2", json_real(rep->mmd_sigma2));
    long total = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (!cmp->present[w]) continue;
        const drift_wl_result *r = &cmp->wl[w];
        json_t *x = json_object();
        json_object_set_new(x, "workload", json_string(drift_workload_name((drift_workload)w)));
        json_object_set_new(x, "n", json_integer(r->n));
        json_object_set_new(x, "flips", json_integer(r->flips));
        json_object_set_new(x, "flip_rate", json_real(r->flip_rate));
        json_object_set_new(x, "ci95", json_pack("[ff]", r->ci95[0], r->ci95[1]));
        json_array_append_new(flips, x);
        total += r->flips;
    }
    json_object_set_new(o, "workloads", flips);
    json_object_set_new(o, "total_flips", json_integer(total));
    char *line = report_json_dump(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(o);
    return line;
}

/* See report.h. */
drift_status drift_monitor_render(const drift_monitor_data *d, const drift_monitor_report *rep,
                                  const drift_comparison *cmp, const char *baseline, const char *target,
                                  drift_format fmt, char **out, drift_error *err) {
    *out = NULL;
    if (!d || !rep || !cmp || !baseline || !target)
        return drift_error_set(err, DRIFT_ERR_INVALID, "monitor report: missing arguments");
    if (fmt == DRIFT_FORMAT_TEXT) *out = render_text(d, rep, cmp, baseline, target);
    else if (fmt == DRIFT_FORMAT_JSON) *out = render_json(d, rep, cmp, baseline, target);
    else return drift_error_set(err, DRIFT_ERR_INVALID, "a monitor report renders as text or json");
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}
