/* kl_step.c - token KL as a step of its own (teacher_forced.h): the caller
 * runs it after computing what it reports and attaches the result, so
 * neither compare (src/analysis/) nor the renderers (src/report/) call
 * into the engine.
 *
 *   compare --kl   drift_tokdiv_step_run: drift_tokdiv_runs over the two
 *                  runs (embedded stacks, or HTTP servers through their
 *                  prompt logprobs); a run whose stack cannot be forced (a
 *                  server without prompt logprobs, an import: the
 *                  DRIFT_ERR_UNSUPPORTED message) or whose server cannot
 *                  be reached now (DRIFT_ERR_HTTP: a store outlives its
 *                  servers) is the step's note, not an error.
 *                  drift_tokdiv_step_attach runs it with compare's
 *                  options and attaches the result to the comparison
 *                  (drift_comparison_attach_kl) before rendering.
 *   report --kl N  drift_tokdiv_configs_run: the report's configurations
 *                  grouped by their baseline run; each group whose baseline
 *                  is an embedded stack makes one drift_tokdiv_runs_many
 *                  call over its embedded configurations, so every sampled
 *                  prompt's baseline logits are computed once per group. A
 *                  configuration whose run or baseline is an HTTP stack is
 *                  forced on its own (drift_tokdiv_runs, through the
 *                  server's prompt logprobs, as compare --kl); one that
 *                  cannot be forced (a server without prompt logprobs or
 *                  not reachable now, an import) is listed with the
 *                  library's reason, not an error. Each point keeps the pooled
 *                  figures of every sampled position (overall.kl_mean,
 *                  overall.same_top); html.c pairs them with the
 *                  configuration's flip rate from its comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/teacher_forced.h"
#include "driftbench/store.h"
#include "util/util.h"

/* See teacher_forced.h. */
drift_status drift_tokdiv_step_run(drift_store *st, const char *baseline_label, const char *target_label,
                                   const drift_tokdiv_opts *o, drift_tokdiv_step *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    drift_error e = {0};
    drift_status rc = drift_tokdiv_runs(st, baseline_label, target_label, o, &out->report, &e);
    if (rc == DRIFT_ERR_UNSUPPORTED || rc == DRIFT_ERR_HTTP) {
        drift_tokdiv_report_clear(&out->report);
        out->unsupported = 1;
        snprintf(out->note, sizeof out->note, "%s%s", rc == DRIFT_ERR_HTTP ? "not computed: " : "", e.msg);
        return DRIFT_OK;
    }
    if (rc) {
        drift_tokdiv_report_clear(&out->report);
        if (err) {
            *err = e;
            drift_error_prefix(err, "token KL: ");
        }
    }
    return rc;
}

/* See teacher_forced.h. */
drift_status drift_tokdiv_step_attach(drift_store *st, drift_comparison *c, const char *baseline_label,
                                      const char *target_label, const drift_compare_opts *co, drift_error *err) {
    drift_tokdiv_opts to;
    drift_tokdiv_opts_default(&to);
    to.limit = co->kl_limit;
    to.seed = co->kl_seed;
    to.models_dir = co->kl_models_dir;
    if (co->only_workload != DRIFT_WL_UNKNOWN) to.workloads = 1u << co->only_workload;
    drift_tokdiv_step ks;
    drift_status rc = drift_tokdiv_step_run(st, baseline_label, target_label, &to, &ks, err);
    if (rc) return rc;
    drift_comparison_attach_kl(c, ks.unsupported ? NULL : &ks.report, ks.note);
    drift_tokdiv_report_clear(&ks.report);
    return DRIFT_OK;
}

/* 1 when the run `label` is an embedded stack; -1 on a store error. */
static int run_embedded(drift_store *st, const char *label, drift_error *err) {
    drift_run_info ri = {0};
    if (drift_store_run_get(st, label, &ri, err)) return -1;
    int yes = ri.target && !strncmp(ri.target, "embedded:", 9);
    drift_run_info_clear(&ri);
    return yes;
}

/* Lists label as left out, with why (NULL: none) after it: "label (why)". */
static drift_status list_left_out(drift_tokdiv_configs *out, const char *label, const char *why, drift_error *err) {
    char *s = why ? util_asprintf("%s (%s)", label, why) : util_strdup(label);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    out->not_embedded[out->n_not_embedded++] = s;
    return DRIFT_OK;
}

static drift_status add_point(drift_tokdiv_configs *out, const char *label, const drift_tokdiv_report *rep,
                              drift_error *err) {
    drift_tokdiv_config_kl *p = &out->points[out->n];
    if (!(p->label = util_strdup(label))) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    p->kl_mean = rep->overall.kl_mean;
    p->same_top = rep->overall.same_top;
    p->positions = rep->overall.n;
    out->n++;
    return DRIFT_OK;
}

/* A configuration with an HTTP side, forced on its own as compare --kl
 * forces it: a point, or listed with the reason it cannot be forced. */
static drift_status one_pair(drift_store *st, const char *base, const char *label, const drift_tokdiv_opts *o,
                             drift_tokdiv_configs *out, drift_error *err) {
    drift_tokdiv_step ks;
    drift_status rc = drift_tokdiv_step_run(st, base, label, o, &ks, err);
    if (rc) {
        drift_error_prefix(err, "configuration \"%s\": ", label);
        return rc;
    }
    rc = ks.unsupported ? list_left_out(out, label, ks.note, err) : add_point(out, label, &ks.report, err);
    drift_tokdiv_report_clear(&ks.report);
    return rc;
}

/* See teacher_forced.h. */
drift_status drift_tokdiv_configs_run(drift_store *st, const char *const *labels, const char *const *baselines,
                                      size_t n, size_t limit, uint64_t seed, const char *models_dir,
                                      drift_progress_fn progress, void *progress_user, drift_tokdiv_configs *out,
                                      drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!st || (n && (!labels || !baselines)) || limit == 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "token KL: needs a store, a report and a sample size >= 1");
    out->limit = limit;
    out->seed = seed;
    out->points = calloc(n + 1, sizeof *out->points);
    out->not_embedded = calloc(n + 1, sizeof *out->not_embedded);
    char *done = calloc(n + 1, 1);
    const char **group = calloc(n + 1, sizeof *group);
    if (!out->points || !out->not_embedded || !done || !group) {
        free(done);
        free(group);
        drift_tokdiv_configs_clear(out);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    double t0 = util_now_ms();
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (done[i]) continue;
        const char *base = baselines[i];
        int base_emb = run_embedded(st, base, err);
        if (base_emb < 0) {
            rc = err ? err->code : DRIFT_ERR_STORE;
            break;
        }
        drift_tokdiv_opts o;
        drift_tokdiv_opts_default(&o);
        o.limit = limit;
        o.seed = seed;
        o.models_dir = models_dir;
        o.progress = progress;
        o.progress_user = progress_user;
        size_t m = 0;
        for (size_t j = i; j < n && !rc; j++) {
            if (done[j] || strcmp(baselines[j], base) != 0) continue;
            done[j] = 1;
            int emb = run_embedded(st, labels[j], err);
            if (emb < 0) rc = err ? err->code : DRIFT_ERR_STORE;
            else if (emb && base_emb) group[m++] = labels[j];
            else rc = one_pair(st, base, labels[j], &o, out, err);
        }
        if (rc || m == 0) continue;
        drift_tokdiv_report *rep = NULL;
        rc = drift_tokdiv_runs_many(st, base, group, m, &o, &rep, err);
        if (rc) {
            drift_error_prefix(err, "token KL against baseline \"%s\": ", base);
            break;
        }
        for (size_t k = 0; k < m && !rc; k++) rc = add_point(out, group[k], &rep[k], err);
        drift_tokdiv_reports_free(rep, m);
    }
    free(done);
    free(group);
    out->elapsed_ms = util_now_ms() - t0;
    if (rc) drift_tokdiv_configs_clear(out);
    return rc;
}
