/* report_kl.c - token KL per configuration for the HTML report
 * (drift_html_kl_load, report_html.h).
 *
 * The report's configurations are grouped by their baseline run; each
 * group whose baseline is an embedded stack makes one
 * drift_tokdiv_runs_many call over its embedded configurations, so every
 * sampled prompt's baseline logits are computed once per group. A
 * configuration whose run or baseline is not embedded ("http://...",
 * "import:...") has no logits to compare: it is listed, not an error.
 * Each point keeps the pooled figures of every sampled position
 * (overall.kl_mean, overall.same_top); html.c pairs them with the
 * configuration's flip rate from its comparison. */
#include <stdlib.h>
#include <string.h>

#include "driftbench/divergence.h"
#include "driftbench/report_html.h"
#include "util/util.h"

/* 1 when the run `label` is an embedded stack; -1 on a store error. */
static int run_embedded(drift_store *st, const char *label, drift_error *err) {
    drift_run_info ri = {0};
    if (drift_store_run_get(st, label, &ri, err)) return -1;
    int yes = ri.target && !strncmp(ri.target, "embedded:", 9);
    drift_run_info_clear(&ri);
    return yes;
}

void drift_html_kl_clear(drift_html_kl *k) {
    if (!k) return;
    for (size_t i = 0; i < k->n; i++) free(k->points[i].label);
    for (size_t i = 0; i < k->n_not_embedded; i++) free(k->not_embedded[i]);
    free(k->points);
    free(k->not_embedded);
    memset(k, 0, sizeof *k);
}

static drift_status list_left_out(drift_html_kl *out, const char *label, drift_error *err) {
    char *s = util_strdup(label);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    out->not_embedded[out->n_not_embedded++] = s;
    return DRIFT_OK;
}

drift_status drift_html_kl_load(drift_store *st, const drift_matrix_report *r, size_t limit, uint64_t seed,
                                const char *models_dir, drift_progress_fn progress, void *progress_user,
                                drift_html_kl *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!st || !r || limit == 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "token KL: needs a store, a report and a sample size >= 1");
    out->limit = limit;
    out->seed = seed;
    size_t n = r->n_experiments;
    out->points = calloc(n + 1, sizeof *out->points);
    out->not_embedded = calloc(n + 1, sizeof *out->not_embedded);
    char *done = calloc(n + 1, 1);
    const char **labels = calloc(n + 1, sizeof *labels);
    if (!out->points || !out->not_embedded || !done || !labels) {
        free(done);
        free(labels);
        drift_html_kl_clear(out);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    double t0 = util_now_ms();
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (done[i]) continue;
        const char *base = r->experiments[i].baseline;
        int base_emb = run_embedded(st, base, err);
        if (base_emb < 0) {
            rc = err ? err->code : DRIFT_ERR_STORE;
            break;
        }
        size_t m = 0;
        for (size_t j = i; j < n && !rc; j++) {
            const drift_report_experiment *e = &r->experiments[j];
            if (done[j] || strcmp(e->baseline, base) != 0) continue;
            done[j] = 1;
            int emb = base_emb ? run_embedded(st, e->label, err) : 0;
            if (emb < 0) rc = err ? err->code : DRIFT_ERR_STORE;
            else if (emb) labels[m++] = e->label;
            else rc = list_left_out(out, e->label, err);
        }
        if (rc || m == 0) continue;
        drift_tokdiv_opts o;
        drift_tokdiv_opts_default(&o);
        o.limit = limit;
        o.seed = seed;
        o.models_dir = models_dir;
        o.progress = progress;
        o.progress_user = progress_user;
        drift_tokdiv_report *rep = NULL;
        rc = drift_tokdiv_runs_many(st, base, labels, m, &o, &rep, err);
        if (rc) {
            drift_error_prefix(err, "token KL against baseline \"%s\": ", base);
            break;
        }
        for (size_t k = 0; k < m && !rc; k++) {
            drift_html_kl_point *p = &out->points[out->n];
            if (!(p->label = util_strdup(labels[k]))) {
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                break;
            }
            p->kl_mean = rep[k].overall.kl_mean;
            p->same_top = rep[k].overall.same_top;
            p->positions = rep[k].overall.n;
            out->n++;
        }
        drift_tokdiv_reports_free(rep, m);
    }
    free(done);
    free(labels);
    out->elapsed_ms = util_now_ms() - t0;
    if (rc) drift_html_kl_clear(out);
    return rc;
}
