/* measure.c - the measure stage (measure.h): the baseline stack and the
 * candidate run over the same suites into one store, the two runs scored,
 * the target compared against the baseline.
 *
 *   baseline: [server started] -> run begin -> ask -> end -> [server stopped]
 *   target:   [server started] -> run begin -> ask -> end -> [server stopped]
 *   scorer open -> the two labels scored -> close
 *   drift_compare_runs(baseline, target)          -> the caller renders it
 *
 * Only the two labels are scored (drift_scorer_score_labels): other runs of
 * the store, someone else's on a shared store, are left as they are.
 *
 * Servers (side.start): started through server_run.c, the code matrix uses
 * too ("{port}" a free port in the command and the target, the health path
 * polled until 200 from a socket of the server's own: another process on
 * the port is refused). The run records the target with "{port}", so a
 * resumed measure on another port continues the same run. A server that
 * exits during its run stops the run at once (unfinished: the next call
 * restarts it and asks what is missing) and fails the measure with the
 * command, its status and the tail of its output. Without --sequential
 * each side's server is started just before its run and stopped right
 * after, so the two stacks never share the machine.
 *
 * Request control: a side whose side.request sets any field is asked with
 * it; the other with target_opts.request (shared). The CLI gives each side
 * the shared fields with its own --baseline-/--target- ones over them.
 *
 * Labels: a side without one gets a free label (drift_run_opts.label_free:
 * "baseline" / "target", or NAME-2, NAME-3, ... when that label holds a
 * run of another identity); sum->label says which, and scoring, compare
 * and risk use those.
 *
 * --order risk: the target is asked riskiest prompt first, by the flip
 * risk of risk_from's answers or of the baseline's own (run first, with
 * logprobs); a measure cut short then holds the riskiest pairs.
 *
 * Sequential (o->sequential): both sides are asked in chunks, in the
 * seeded random order: each chunk asks every gated workload (one with a
 * budget) its next DRIFT_MEASURE_SEQ_CHUNK pairs (the run's select hook:
 * rank < horizon, so baseline and target ask the same pairs, resumed or
 * not; workloads without a budget are asked whole in the first chunk; with
 * compare.only_workload W, only W is asked), scores them, and replays the
 * comparison through the sequential gate (drift_compare_sequential, the
 * same function as compare --sequential, over the suite's size recorded in
 * the runs): a workload whose verdict is certain is asked no more. It ends
 * when every gated workload has stopped or been asked whole; the runs stay
 * stored as ordinary (partial, unfinished) runs. The loop keeps its
 * resources open from the first chunk to the last: each side's server is
 * started once and its run session (target, suites) begun once, the
 * scorer's evaluators are opened once, and each chunk is one drift_run_ask
 * per side. The decision: both servers stay up for the whole loop (a chunk
 * needs both sides' answers before the gate can look, so one side's server
 * cannot be stopped for good before the other's is started, and restarting
 * them every chunk is what this replaced), but they are never asked at the
 * same time: each chunk asks the baseline, then the target. So with
 * --sequential the two stacks share the machine's memory (not its compute)
 * while the loop runs; both are stopped before the last scoring pass. The
 * scorer of the sequential loop reports no progress (each chunk is small);
 * after the loop, one more pass over the two labels (which finds nothing
 * new) gives the summary. */
#include "driftbench/measure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/server_run_internal.h"

static const char *const SIDE_NAME[2] = {"baseline", "target"};

void drift_measure_opts_default(drift_measure_opts *o) {
    memset(o, 0, sizeof *o);
    drift_target_opts_default(&o->target_opts);
    drift_gen_params_default(&o->params);
    o->replicates = 1;
    o->order_seed = 42;
    o->health_path = "/health";
    o->ready_timeout_s = 120;
    drift_score_opts_default(&o->score);
    drift_compare_opts_default(&o->compare);
    o->alpha = 0.05;
}

/* See measure.h. */
drift_status drift_measure_request_layer(const drift_measure_request_layers *l, drift_request_ctl *shared,
                                         drift_request_ctl side[2], const char ***hbuf, drift_error *err) {
    const drift_request_ctl *base[2];
    size_t need = l->file.n_headers + l->flags.n_headers;
    for (int k = 0; k < 2; k++) {
        base[k] = drift_request_ctl_any(&l->file_side[k]) ? &l->file_side[k] : &l->file;
        need += 2 * (base[k]->n_headers + l->flags.n_headers) + l->side_flags[k].n_headers;
    }
    const char **h = calloc(need ? need : 1, sizeof *h);
    if (!(*hbuf = h)) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_request_ctl_over(shared, &l->file, &l->flags, h);
    h += shared->n_headers;
    for (int k = 0; k < 2; k++) {
        memset(&side[k], 0, sizeof side[k]);
        if (!drift_request_ctl_any(&l->file_side[k]) && !drift_request_ctl_any(&l->side_flags[k])) continue;
        drift_request_ctl mid;
        drift_request_ctl_over(&mid, base[k], &l->flags, h);
        h += mid.n_headers;
        drift_request_ctl_over(&side[k], &mid, &l->side_flags[k], h);
        h += side[k].n_headers;
    }
    return DRIFT_OK;
}

static int cancelled(const drift_measure_opts *o) { return o->cancel && o->cancel(o->cancel_user); }

/* ---- one side: its server, its run session ---- */

typedef struct measure_side {
    int k;                     /* DRIFT_MEASURE_BASELINE or DRIFT_MEASURE_TARGET */
    const drift_measure_side *spec;
    drift_run_opts r;          /* its run's options (target_url and cancel set with a server) */
    drift_server_proc *proc;   /* NULL: no server (or stopped) */
    server_run_watch w;        /* the run's cancel hook's state while proc runs */
    char *url;                 /* the target with the server's port */
    drift_run_session *ss;     /* NULL until begun */
} measure_side;

static void side_init(measure_side *m, int k, const drift_measure_opts *o) {
    memset(m, 0, sizeof *m);
    m->k = k;
    m->spec = &o->side[k];
    drift_run_opts *r = &m->r;
    drift_run_opts_default(r);
    r->label = m->spec->label ? m->spec->label : SIDE_NAME[k]; /* NULL: a free label (see measure.h) */
    r->label_free = !m->spec->label;
    r->target = m->spec->target;
    r->config = m->spec->config;
    r->suites = o->suites;
    r->n_suites = o->n_suites;
    r->target_opts = o->target_opts;
    const drift_request_ctl *q = &m->spec->request;
    if (q->system_prompt || q->prompt_template || q->extra_body_json || q->n_headers)
        r->target_opts.request = *q; /* this side's own request control (measure.h) */
    r->params = o->params;
    r->replicates = o->replicates;
    r->limit = o->limit;
    r->order = o->order;
    r->order_seed = o->order_seed;
    r->risk_from = o->risk_from;
    r->cancel = o->cancel;
    r->cancel_user = o->cancel_user;
    r->progress = o->progress;
    r->progress_user = o->progress_user;
}

/* The side's target and start go together: "{port}" in both or neither. */
static drift_status side_check(const measure_side *m, drift_error *err) {
    const char *side = SIDE_NAME[m->k], *start = m->spec->start, *target = m->spec->target;
    int uses_port = strstr(target, "{port}") != NULL;
    if (!start) {
        if (!uses_port) return DRIFT_OK;
        char *shown = drift_redact(target);
        drift_status rc = drift_error_set(err, DRIFT_ERR_INVALID, "--%s '%s' uses {port}, which only --%s-start gives",
                                          side, shown ? shown : "(target withheld)", side);
        free(shown);
        return rc;
    }
    if (!uses_port)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "--%s must use {port} with --%s-start (e.g. http://127.0.0.1:{port}/v1?model=m)", side,
                               side);
    if (!strstr(start, "{port}"))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "--%s-start must use {port} (the free port measure picks for the server)", side);
    return DRIFT_OK;
}

/* A server that exited during the side's run (or its begin) is the failure. */
static drift_status side_after(measure_side *m, drift_status rc, drift_measure_summary *sum, drift_error *err) {
    snprintf(sum->run_target, sizeof sum->run_target, "%s", m->url ? m->url : m->spec->target);
    if (!m->proc || !server_run_died(m->proc, &m->w, rc, &sum->run)) return rc;
    char stopped[160];
    snprintf(stopped, sizeof stopped, "run '%s' stopped", drift_run_label(m->ss) ? drift_run_label(m->ss) : m->r.label);
    rc = server_run_died_error(m->proc, stopped, &sum->run, err);
    if (!rc) rc = drift_error_set(err, DRIFT_ERR_INTERNAL, "run '%s': server state", m->r.label);
    sum->server_died = 1;
    return rc;
}

/* Starts the side's server (when it has one) and begins its run session. */
static drift_status side_open(drift_store *st, const drift_measure_opts *o, measure_side *m,
                              drift_measure_summary *sum, drift_error *err) {
    sum->side = m->k;
    sum->step = DRIFT_MEASURE_STEP_CHECK;
    drift_status rc = side_check(m, err);
    if (rc) return rc;
    if (m->spec->start) {
        sum->step = DRIFT_MEASURE_STEP_SERVER;
        if (o->on_server) o->on_server(o->event_user, m->k, m->spec->start, 0);
        rc = server_run_start(m->spec->start, o->health_path, o->ready_timeout_s, o->cancel, o->cancel_user, &m->proc,
                              err);
        if (rc) return rc;
        sum->step = DRIFT_MEASURE_STEP_CHECK;
        rc = server_run_attach(&m->r, m->proc, &m->w, &m->url, err);
        if (rc) return rc;
        if (o->on_server) o->on_server(o->event_user, m->k, m->spec->start, drift_server_proc_port(m->proc));
    }
    sum->step = DRIFT_MEASURE_STEP_RUN;
    rc = drift_run_begin(st, &m->r, &m->ss, &sum->run, err);
    return side_after(m, rc, sum, err);
}

/* One ask of the side's run (sum->run says how it went). */
static drift_status side_ask(measure_side *m, drift_measure_summary *sum, drift_error *err) {
    sum->side = m->k;
    sum->step = DRIFT_MEASURE_STEP_RUN;
    drift_status rc = drift_run_ask(m->ss, &sum->run, err);
    snprintf(sum->label[m->k], sizeof sum->label[m->k], "%s", drift_run_label(m->ss));
    if (!rc && m->k == DRIFT_MEASURE_TARGET && !strcmp(sum->label[0], sum->label[1]))
        rc = drift_error_set(err, DRIFT_ERR_INVALID, "measure: both runs are labelled '%s'; give the two different labels",
                             sum->label[1]);
    return side_after(m, rc, sum, err);
}

/* Ends the session and stops the server (with every process it started). */
static void side_close(measure_side *m) {
    drift_run_end(m->ss);
    m->ss = NULL;
    drift_server_proc_free(m->proc);
    m->proc = NULL;
    free(m->url);
    m->url = NULL;
}

/* ---- scoring the two labels ---- */

static drift_status score_two(drift_scorer *sc, const drift_measure_summary *sum, drift_score_summary *s,
                              drift_error *err) {
    const char *labels[2] = {sum->label[0], sum->label[1]};
    return drift_scorer_score_labels(sc, labels, 2, s, err);
}

/* The scorer for the measure: o->score with the cancel hook, a verdict
 * cache (own, in *own, when o has none) and, sequential, no progress. */
static drift_status scorer_open(drift_store *st, const drift_measure_opts *o, drift_score_cache **own,
                                drift_scorer **out, drift_error *err) {
    drift_score_opts so = o->score;
    so.cancel = o->cancel;
    so.cancel_user = o->cancel_user;
    if (o->sequential) so.progress = NULL;
    if (!so.cache) {
        so.cache = *own = drift_score_cache_new();
        if (!*own) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    return drift_scorer_open(st, &so, out, err);
}

/* ---- the sequential loop ---- */

typedef struct seq_state {
    const double *budget;                 /* compare's budgets: < 0 = not gated */
    int only;                             /* only_workload: the only one asked; DRIFT_WL_UNKNOWN = all */
    long horizon[DRIFT_WL_COUNT];         /* ask pairs of rank < horizon */
    int stopped[DRIFT_WL_COUNT];          /* verdict certain, or asked whole */
    size_t n_wl[DRIFT_WL_COUNT];          /* the suite's pairs (from the hook) */
} seq_state;

static int seq_select(void *user, drift_workload wl, size_t rank, size_t n_wl) {
    seq_state *q = user;
    q->n_wl[wl] = n_wl;
    if (q->only != DRIFT_WL_UNKNOWN && (int)wl != q->only) return 0; /* compare would leave it out */
    if (q->budget[wl] < 0) return 1;
    return !q->stopped[wl] && rank < (size_t)q->horizon[wl];
}

/* Chunks until every gated workload has stopped (see the top); *c is the
 * last chunk's comparison, sum->seq its replay. Sides are left open. */
static drift_status seq_loop(drift_store *st, const drift_measure_opts *o, measure_side m[2], drift_scorer *sc,
                             drift_comparison **c, drift_measure_summary *sum, drift_error *err) {
    seq_state q;
    memset(&q, 0, sizeof q);
    q.budget = o->compare.budget;
    q.only = o->compare.only_workload;
    for (int k = 0; k < 2; k++) {
        m[k].r.order = DRIFT_ORDER_RANDOM;
        m[k].r.select = seq_select;
        m[k].r.select_user = &q;
        m[k].r.seq_alpha = o->alpha;
        m[k].r.seq_budget = o->compare.budget;
    }
    drift_status rc = DRIFT_OK;
    for (int chunk = 1;; chunk++) {
        for (int k = 0; k < DRIFT_WL_COUNT; k++)
            if (!q.stopped[k]) q.horizon[k] += DRIFT_MEASURE_SEQ_CHUNK;
        sum->chunks = chunk;
        for (int k = 0; k < 2 && !rc; k++) {
            if (!m[k].ss) rc = side_open(st, o, &m[k], sum, err);
            if (!rc) rc = side_ask(&m[k], sum, err);
        }
        if (rc) return rc;
        if (cancelled(o)) {
            sum->step = DRIFT_MEASURE_STEP_STOPPED;
            return drift_error_set(err, DRIFT_ERR_CANCELLED, "interrupted; calling again resumes");
        }
        sum->step = DRIFT_MEASURE_STEP_CHUNK;
        drift_score_summary chunk_sum;
        rc = score_two(sc, sum, &chunk_sum, err);
        if (rc) return rc;
        drift_comparison_free(*c);
        *c = NULL;
        rc = drift_compare_runs(st, sum->label[0], sum->label[1], &o->compare, c, err);
        if (!rc) rc = drift_compare_sequential(*c, o->alpha, o->order_seed, &sum->seq, err);
        if (rc) return rc;
        int open = 0;
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            if (q.budget[k] < 0 || q.n_wl[k] == 0) continue; /* not gated, or not in the suites */
            if (q.only != DRIFT_WL_UNKNOWN && k != q.only) continue;
            if (sum->seq.wl[k].early || (size_t)q.horizon[k] >= q.n_wl[k]) q.stopped[k] = 1;
            if (!q.stopped[k]) open = 1;
        }
        if (o->on_chunk) o->on_chunk(o->event_user, chunk, &sum->seq, q.stopped);
        if (!open) return DRIFT_OK;
    }
}

/* ---- the stage ---- */

drift_status drift_measure_run(drift_store *st, const drift_measure_opts *o, drift_comparison **out,
                               drift_measure_summary *sum, drift_error *err) {
    *out = NULL;
    memset(sum, 0, sizeof *sum);
    if (!st || !o->side[0].target || !o->side[1].target ||
        (o->side[0].label && o->side[1].label && !strcmp(o->side[0].label, o->side[1].label)) || !o->n_suites ||
        !o->suites)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "measure: a store, two targets, two different labels and suites are needed");
    measure_side m[2];
    side_init(&m[0], DRIFT_MEASURE_BASELINE, o);
    side_init(&m[1], DRIFT_MEASURE_TARGET, o);
    drift_comparison *c = NULL;
    drift_score_cache *own = NULL;
    drift_scorer *sc = NULL;
    drift_status rc = DRIFT_OK;
    if (o->sequential) {
        rc = scorer_open(st, o, &own, &sc, err);
        if (rc) sum->step = DRIFT_MEASURE_STEP_CHUNK;
        if (!rc) rc = seq_loop(st, o, m, sc, &c, sum, err);
        side_close(&m[0]);
        side_close(&m[1]);
    } else {
        /* the baseline: in risk_from's order, or in suite order when the
         * measure's own baseline is what ranks the target */
        if (o->order == DRIFT_ORDER_RISK && !o->risk_from) m[0].r.order = DRIFT_ORDER_SUITE;
        for (int k = 0; k < 2 && !rc; k++) {
            if (k == 1) m[1].r.risk_from = o->risk_from ? o->risk_from : sum->label[0]; /* the label the baseline took */
            rc = side_open(st, o, &m[k], sum, err);
            if (!rc) rc = side_ask(&m[k], sum, err);
            side_close(&m[k]);
        }
        if (!rc) {
            sum->step = DRIFT_MEASURE_STEP_SCORE;
            rc = scorer_open(st, o, &own, &sc, err);
        }
    }
    /* (sequential: a signal during the last chunk's replay is seen by the
     * summary's pass, which has nothing left to score) */
    if (!rc && !o->sequential && cancelled(o)) {
        sum->step = DRIFT_MEASURE_STEP_STOPPED;
        rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "interrupted; calling again resumes");
    }
    if (!rc) {
        sum->step = DRIFT_MEASURE_STEP_SCORE;
        rc = score_two(sc, sum, &sum->score, err);
        if (!rc) sum->scored = 1;
    }
    if (!rc && !o->sequential && cancelled(o)) {
        sum->step = DRIFT_MEASURE_STEP_STOPPED;
        rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "interrupted; calling again resumes");
    }
    if (!rc && !o->sequential) {
        sum->step = DRIFT_MEASURE_STEP_COMPARE;
        rc = drift_compare_runs(st, sum->label[0], sum->label[1], &o->compare, &c, err);
    }
    drift_scorer_close(sc);
    drift_score_cache_free(own);
    if (rc) {
        drift_comparison_free(c);
        return rc;
    }
    sum->step = DRIFT_MEASURE_STEP_DONE;
    *out = c;
    return DRIFT_OK;
}
