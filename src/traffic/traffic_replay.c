/* traffic_replay.c - the replay stage (traffic.h): a request log asked of a
 * baseline stack (or taken as logged) and of a target stack, stored, and
 * judged pair by pair.
 *
 * Storage is the store's own tables, nothing new: the log's requests are a
 * suite ("replay:" + the log's file name; each record's id is the prompt
 * id, its canonical request body the prompt's input, workload chat), each
 * side is a run (its answers in drift_traffic_reply_message's form, its
 * request errors as error rows, which the next call asks again), so a
 * replay resumes as `run` does and `runs`, `merge` and PostgreSQL stores
 * work on it unchanged. The run's decoding records the override rules, the
 * seed and how many requests each override touched: the same log replayed
 * another way is another run.
 *
 *   log ──prepare──> bodies ──drift_target_send_raw──> replies ──message──> store
 *   store ──pairs──> pair_judge (+ guard, + SDR) ──summarize──> report */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "driftbench/traffic_privacy.h"
#include "driftbench/traffic_stream.h"
#include "suite/prompt.h"
#include "traffic/traffic_internal.h"
#include "util/util.h"

#define FLUSH_EVERY 16   /* answers per store transaction, at most */
#define FLUSH_MS 1000.0  /* and at most this long between two (a kill -9 loses less) */

void drift_replay_opts_default(drift_replay_opts *o) {
    memset(o, 0, sizeof *o);
    drift_target_opts_default(&o->target_opts);
    o->seed = 42;
    drift_traffic_opts_default(&o->stats);
    o->alpha = 0.05;
}

void drift_replay_report_free(drift_replay_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_pairs; i++) free(r->pairs[i].id);
    free(r->pairs);
    free(r->log_name);
    free(r->baseline_label);
    free(r->target_label);
    free(r->baseline_target);
    free(r->target_target);
    free(r->guard);
    free(r->embedder);
    free(r->privacy);
    free(r->windows);
    free(r);
}

/* rowid -> record index, by binary search over (rowid, index) pairs. */
typedef struct row_ix {
    int64_t rowid;
    size_t ix;
} row_ix;

static int cmp_row(const void *a, const void *b) {
    const row_ix *x = a, *y = b;
    return x->rowid < y->rowid ? -1 : x->rowid > y->rowid;
}

static long find_ix(const row_ix *m, size_t n, int64_t rowid) {
    row_ix key = {rowid, 0};
    const row_ix *h = bsearch(&key, m, n, sizeof *m, cmp_row);
    return h ? (long)h->ix : -1;
}

/* The model a target's spec names (its config's "model"), malloc'd; NULL none. */
static char *target_model(const drift_target *t) {
    json_t *c = json_loads(drift_target_config_json(t) ? drift_target_config_json(t) : "", 0, NULL);
    const char *m = json_string_value(json_object_get(c, "model"));
    char *r = m && *m && strcmp(m, "unknown") ? util_strdup(m) : NULL;
    json_decref(c);
    return r;
}

/* What one side's run records as its decoding: the rules, the seed, and
 * per field how many of the log's requests it overrides. counts gets them. */
static drift_status side_decoding(const drift_traffic_log *log, const drift_traffic_prep_opts *po, long counts[8],
                                  char **out, drift_error *err) {
    memset(counts, 0, 8 * sizeof *counts);
    for (size_t i = 0; po && i < log->n; i++) {
        char *body = NULL, *ov = NULL;
        drift_status st = drift_traffic_prepare(log->recs[i].request_json, po, &body, &ov, err);
        free(body);
        if (st) return drift_error_prefix(err, "%s:%zu: ", log->name, log->recs[i].line);
        json_t *o = json_loads(ov, 0, NULL);
        free(ov);
        for (int f = 0; f < 7; f++)
            if (json_object_get(o, drift_traffic_override_fields[f])) counts[f]++;
        json_decref(o);
    }
    json_t *d = json_object();
    json_t *c = json_object();
    int bad = !d || !c;
    for (int f = 0; !bad && f < 7; f++)
        if (counts[f]) bad |= json_object_set_new(c, drift_traffic_override_fields[f], json_integer(counts[f]));
    bad |= json_object_set_new(d, "replay", json_string(po ? DRIFT_TRAFFIC_OVERRIDE_RULES : "logged"));
    if (po) bad |= json_object_set_new(d, "seed", json_integer((json_int_t)po->seed));
    bad |= json_object_set(d, "overrides", c);
    json_decref(c);
    *out = bad ? NULL : json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(d);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}

typedef struct side {
    const char *spec;          /* NULL: logged */
    drift_target *t;
    char label[256];
    int64_t run_id;
    long overrides[8];
    size_t asked;
    char **mem;                /* with privacy: the messages answered now, in log order, as received
                                * (the store has the redacted or hashed form) */
} side;

static drift_status begin_side(drift_store *st, const drift_replay_opts *o, const drift_traffic_log *log,
                               const char *label, const char *base, side *sd, drift_error *err) {
    drift_traffic_prep_opts po = {o->seed, NULL};
    char *model = NULL, *decoding = NULL, *config = NULL, *target = NULL, *suites = NULL;
    drift_status rc = DRIFT_OK;
    if (sd->spec) {
        if ((rc = drift_target_open(sd->spec, &o->target_opts, &sd->t, err))) return rc;
        if (log->completions && drift_target_api(sd->t) == DRIFT_API_CHAT)
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "%s: the log holds /v1/completions requests but the target's spec says api=chat "
                                   "(give api=completions)",
                                   label ? label : base);
        po.model = model = target_model(sd->t);
        config = util_strdup(drift_target_config_json(sd->t) ? drift_target_config_json(sd->t) : "{}");
        target = util_strdup(sd->spec);
    } else {
        config = util_strdup("{\"framework\":\"logged\",\"hardware\":\"logged\",\"model\":\"logged\","
                             "\"precision\":\"logged\"}");
        target = util_asprintf("logged:%s", log->name);
    }
    json_t *sj = json_pack("[s]", log->name);
    suites = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
    json_decref(sj);
    if (!config || !target || !suites) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) rc = side_decoding(log, sd->spec ? &po : NULL, sd->overrides, &decoding, err);
    if (!rc) {
        char version[64];
        snprintf(version, sizeof version, "driftbench %s", drift_version());
        drift_run_info info = {.label = (char *)(label ? label : base), .target = target, .config_json = config,
                               .decoding_json = decoding, .templates_json = "{}", .suites_json = suites,
                               .tool_version = version};
        int resumed = 0;
        if (label) {
            rc = drift_store_run_begin(st, &info, &sd->run_id, &resumed, err);
            snprintf(sd->label, sizeof sd->label, "%s", label);
        } else {
            rc = drift_store_run_begin_free(st, &info, sd->label, sizeof sd->label, &sd->run_id, &resumed, err);
        }
    }
    free(model);
    free(decoding);
    free(config);
    free(target);
    free(suites);
    return rc;
}

/* ---- asking one side ---- */

typedef struct sink {
    drift_store *st;
    int64_t run_id;
    const int64_t *rowids;
    drift_answer buf[FLUSH_EVERY];
    size_t n, done, total;
    drift_status failed;
    drift_error err;
    const drift_replay_opts *o;
    const char *stage;
    double last_flush_ms;
    char **mem;                /* see side.mem; NULL: full texts */
} sink;

static int sink_flush(sink *s) {
    if (!s->n) return 0;
    drift_status rc = drift_store_put_responses(s->st, s->run_id, s->buf, s->n, &s->err);
    for (size_t i = 0; i < s->n; i++) drift_answer_clear(&s->buf[i]);
    s->n = 0;
    s->last_flush_ms = util_now_ms();
    if (rc) s->failed = rc;
    return rc ? -1 : 0;
}

/* Takes res (the reply, or an error) into the sink as the message form. */
static int sink_take(sink *s, size_t ix, drift_answer *res) {
    drift_answer *a = &s->buf[s->n];
    *a = *res;
    memset(res, 0, sizeof *res);
    drift_answer_clear(res);
    a->prompt_rowid = s->rowids[ix];
    a->replicate = 0;
    a->id = 0;
    if (!a->error) {
        char *msg = NULL;
        drift_error perr = {0};
        if (drift_traffic_reply_message(a->text, &msg, &perr)) {
            a->error = util_asprintf("reply is not a chat message: %s", perr.msg);
            a->cause = DRIFT_FAIL_REPLY;
            free(a->text);
            a->text = NULL;
        } else if (s->mem && !drift_traffic_privacy_is_full(s->o->privacy)) {
            /* judged in memory; the store gets what privacy allows */
            char *stored = NULL;
            drift_error perr2 = {0};
            free(a->text);
            a->text = NULL;
            if (drift_traffic_privacy_apply(s->o->privacy, msg, &stored, NULL, &perr2)) {
                free(msg);
                s->failed = DRIFT_ERR_NOMEM;
                s->err = perr2;
                return -1;
            }
            free(s->mem[ix]);
            s->mem[ix] = msg;
            a->text = stored;
        } else {
            free(a->text);
            a->text = msg;
        }
        free(a->logprobs_json); /* the reply's logprobs are not kept by a replay */
        a->logprobs_json = NULL;
    }
    s->n++;
    s->done++;
    if (s->o->progress) s->o->progress(s->o->progress_user, s->stage, s->done, s->total);
    return s->n == FLUSH_EVERY || util_now_ms() - s->last_flush_ms >= FLUSH_MS ? sink_flush(s) : 0;
}

static int on_reply(void *user, const drift_gen_request *req, drift_answer *res) {
    return sink_take(user, req->index, res);
}

static drift_status ask_side(drift_store *st, const drift_replay_opts *o, const drift_traffic_log *log,
                             const int64_t *rowids, const row_ix *map, side *sd, const char *stage,
                             drift_error *err) {
    int64_t *pp = NULL;
    int *pr = NULL;
    size_t np = 0;
    drift_status rc = drift_store_pending(st, sd->run_id, rowids, log->n, 1, &pp, &pr, &np, err);
    if (rc) return rc;
    sink *s = calloc(1, sizeof *s);
    drift_gen_request *reqs = calloc(np ? np : 1, sizeof *reqs);
    char **bodies = calloc(np ? np : 1, sizeof *bodies);
    char *model = sd->t ? target_model(sd->t) : NULL;
    if (!s || !reqs || !bodies) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    *s = (sink){.st = st, .run_id = sd->run_id, .rowids = rowids, .total = np, .o = o, .stage = stage,
                .last_flush_ms = util_now_ms(), .mem = sd->mem};
    drift_traffic_prep_opts po = {o->seed, model};
    for (size_t k = 0; k < np && !rc; k++) {
        long ix = find_ix(map, log->n, pp[k]);
        if (ix < 0) {
            rc = drift_error_set(err, DRIFT_ERR_INTERNAL, "pending prompt row %lld is not in the log", (long long)pp[k]);
            break;
        }
        const drift_traffic_record *rec = &log->recs[ix];
        if (!sd->spec) { /* logged: the reference is what was served */
            drift_answer a = {0};
            drift_answer_clear(&a);
            if (rec->response_json) a.text = util_strdup(rec->response_json);
            else {
                a.error = util_strdup("the log has no response for this request");
                a.cause = DRIFT_FAIL_OTHER;
            }
            a.attempts = 0;
            if (sink_take(s, (size_t)ix, &a)) break;
            continue;
        }
        rc = drift_traffic_prepare(rec->request_json, &po, &bodies[k], NULL, err);
        if (rc) drift_error_prefix(err, "%s:%zu: ", log->name, rec->line);
        reqs[k] = (drift_gen_request){.index = (size_t)ix, .prompt = bodies[k], .replicate = 0};
    }
    if (!rc && sd->spec && np) rc = drift_target_send_raw(sd->t, reqs, np, on_reply, s, err);
    sink_flush(s);
    if (!rc && s->failed) {
        rc = s->failed;
        if (err) *err = s->err;
    }
    sd->asked = sd->spec ? s->done : 0;
out:
    for (size_t k = 0; k < np && bodies; k++) free(bodies[k]);
    free(bodies);
    free(reqs);
    free(model);
    free(s);
    free(pp);
    free(pr);
    return rc;
}

/* ---- judging ---- */

/* Each record's answer of a run: response id (0: none) and error flag. */
static drift_status side_rows(drift_store *st, int64_t run_id, const row_ix *map, size_t n, int64_t *resp,
                              int *error, drift_error *err) {
    drift_scored_set set = {0};
    drift_status rc = drift_store_load_scored(st, run_id, &set, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        resp[i] = 0;
        error[i] = 1; /* no row: never asked (a cancelled replay): no answer */
    }
    for (size_t i = 0; i < set.n; i++) {
        long ix = find_ix(map, n, set.rows[i].prompt_rowid);
        if (ix < 0 || set.rows[i].replicate != 0) continue;
        resp[ix] = set.rows[i].response_id;
        error[ix] = set.rows[i].is_error;
    }
    drift_scored_set_clear(&set);
    return DRIFT_OK;
}

static drift_status judge_guard(const drift_replay_opts *o, drift_replay_report *rep, const drift_traffic_log *log,
                                char **ma, char **mb, const int *perr, drift_error *err) {
    drift_guard *g = NULL;
    drift_status rc = drift_guard_open(o->guard_spec, &g, err);
    if (rc) return drift_error_prefix(err, "guard: ");
    rep->guard = util_strdup(drift_guard_name(g));
    size_t n = log->n, m = 0;
    const char **reqs = calloc(2 * n + 1, sizeof *reqs);
    const char **ans = calloc(2 * n + 1, sizeof *ans);
    char **own = calloc(3 * n + 1, sizeof *own);
    size_t *ix = calloc(n + 1, sizeof *ix);
    drift_eval_result *res = calloc(2 * n + 1, sizeof *res);
    size_t n_own = 0;
    if (!reqs || !ans || !own || !ix || !res) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (perr[i]) continue;
        json_t *req = json_loads(log->recs[i].request_json, 0, NULL);
        char *u = trf_last_user_text(req);
        json_decref(req);
        char *a = trf_readable(ma[i]), *b = trf_readable(mb[i]);
        own[n_own++] = u;
        own[n_own++] = a;
        own[n_own++] = b;
        ix[m / 2] = i;
        reqs[m] = u;
        ans[m++] = a;
        reqs[m] = u;
        ans[m++] = b;
    }
    if (o->progress) o->progress(o->progress_user, "guard", 0, m);
    if (m) rc = drift_guard_judge(g, reqs, ans, m, res, err);
    if (rc) {
        drift_error_prefix(err, "guard: ");
        goto out;
    }
    if (o->progress) o->progress(o->progress_user, "guard", m, m);
    for (size_t k = 0; k < m; k += 2) drift_traffic_pair_set_guard(&rep->pairs[ix[k / 2]].p, res[k].label, res[k + 1].label);
out:
    for (size_t k = 0; res && k < m; k++) drift_eval_result_clear(&res[k]);
    for (size_t k = 0; own && k < n_own; k++) free(own[k]);
    free(reqs);
    free(ans);
    free(own);
    free(ix);
    free(res);
    drift_guard_close(g);
    return rc;
}

static drift_status judge_sdr(const drift_replay_opts *o, drift_replay_report *rep, size_t n, char **ma, char **mb,
                              const int *perr, drift_error *err) {
    drift_embedder *e = NULL;
    drift_status rc = drift_embedder_open(o->embedder_spec, &e, err);
    if (rc) return drift_error_prefix(err, "embedder: ");
    rep->embedder = util_strdup(drift_embedder_name(e));
    size_t m = 0;
    char **texts = calloc(2 * n + 1, sizeof *texts);
    size_t *ix = calloc(n + 1, sizeof *ix);
    float *vecs = NULL;
    int dim = 0;
    if (!texts || !ix) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (perr[i]) continue;
        ix[m / 2] = i;
        texts[m++] = trf_readable(ma[i]);
        texts[m++] = trf_readable(mb[i]);
    }
    if (o->progress) o->progress(o->progress_user, "embed", 0, m);
    if (m) rc = drift_embedder_embed(e, (const char *const *)texts, m, &vecs, &dim, err);
    if (rc) {
        drift_error_prefix(err, "embedder: ");
        goto out;
    }
    if (o->progress) o->progress(o->progress_user, "embed", m, m);
    for (size_t k = 0; k < m; k += 2)
        drift_traffic_pair_set_sdr(&rep->pairs[ix[k / 2]].p,
                                   drift_sdr(vecs + k * (size_t)dim, vecs + (k + 1) * (size_t)dim, dim),
                                   o->stats.sdr_threshold);
out:
    for (size_t k = 0; texts && k < m; k++) free(texts[k]);
    free(texts);
    free(ix);
    free(vecs);
    drift_embedder_close(e);
    return rc;
}

/* Each pair's time in unix ms: the later of its two answers' stored times
 * (0 when neither side has a row). */
static drift_status pair_times(drift_store *st, const row_ix *map, size_t n, int64_t run_a, int64_t run_b,
                               int64_t *t, drift_error *err) {
    for (size_t i = 0; i < n; i++) t[i] = 0;
    int64_t runs[2] = {run_a, run_b};
    for (int k = 0; k < 2; k++) {
        drift_response_time *rt = NULL;
        size_t m = 0;
        drift_status rc = drift_store_response_times(st, runs[k], &rt, &m, err);
        if (rc) return rc;
        for (size_t j = 0; j < m; j++) {
            long ix = find_ix(map, n, rt[j].prompt_rowid);
            if (ix >= 0 && rt[j].unix_s > 0 && rt[j].unix_s * 1000 > t[ix]) t[ix] = rt[j].unix_s * 1000;
        }
        free(rt);
    }
    return DRIFT_OK;
}

/* The automatic window: the smallest of a few round sizes that cuts the
 * span into at most 20 windows. */
static int64_t auto_window(const int64_t *t, size_t n) {
    static const int64_t sizes[] = {1,    2,    5,    10,    15,    30,    60,    120,   300,   600,
                                    900,  1800, 3600, 7200,  10800, 21600, 43200, 86400, 604800};
    int64_t lo = INT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] > 0) {
            if (t[i] < lo) lo = t[i];
            if (t[i] > hi) hi = t[i];
        }
    int64_t span = hi > lo ? (hi - lo) / 1000 : 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        if (span / sizes[k] < 20) return sizes[k];
    return 2592000;
}

/* qsort_r order of pair indices by time, then log order. */
static int cmp_time(const void *a, const void *b, void *user) {
    const int64_t *cmp_t = user;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (cmp_t[x] != cmp_t[y]) return cmp_t[x] < cmp_t[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The stream judge over the judged pairs, in log order (or, with windows,
 * in time order): each gated class's alarm, and the pair at which it was
 * raised. */
static drift_status replay_alarms(drift_store *st, const row_ix *map, const side *sb, const side *stg,
                                  const drift_replay_opts *o, drift_replay_report *rep, const char **reqs,
                                  drift_error *err) {
    drift_traffic_stream *s = NULL;
    double alpha = o->alpha > 0 ? o->alpha : 0.05;
    size_t n = rep->n_pairs;
    int64_t *t = calloc(n + 1, sizeof *t);
    size_t *order = calloc(n + 1, sizeof *order);
    if (!t || !order) {
        free(t);
        free(order);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) order[i] = i;
    drift_status rc = drift_traffic_stream_new(&o->stats, alpha, NULL, NULL, &s, err);
    if (!rc && o->window_s) {
        drift_store_read_begin(st);
        rc = pair_times(st, map, n, sb->run_id, stg->run_id, t, err);
        drift_store_read_end(st);
        if (!rc) {
            int64_t last = 1;
            for (size_t i = 0; i < n; i++) last = t[i] > last ? t[i] : last;
            for (size_t i = 0; i < n; i++)
                if (t[i] <= 0) t[i] = last; /* never answered: counted with the last */
            rep->window_s = o->window_s > 0 ? o->window_s : auto_window(t, n);
            rc = drift_traffic_stream_set_window(s, rep->window_s * 1000, err);
            qsort_r(order, n, sizeof *order, cmp_time, t);
        }
    }
    if (!rc) rep->alpha = alpha;
    for (size_t k = 0; k < n && !rc; k++) {
        size_t i = order[k];
        const drift_replay_pair *p = &rep->pairs[i];
        int e = p->error_baseline || p->error_target;
        rc = drift_traffic_stream_add_judged(s, reqs[i], e ? NULL : &p->p, p->error_baseline, p->error_target,
                                             !p->not_judged, o->window_s ? t[i] : 1, err);
    }
    for (int c = 0; c < DRIFT_TC_COUNT && !rc; c++) {
        const drift_alarm *a = drift_traffic_stream_alarm(s, c);
        rep->alarm_on[c] = a != NULL;
        if (a) rep->alarm[c] = *a;
        int64_t k = drift_traffic_stream_class_get(s, c)->raised_pair;
        rep->alarm_raised_pair[c] = k > 0 && (size_t)k <= n ? order[k - 1] + 1 : 0;
    }
    if (!rc && rep->window_s) {
        size_t nw = 0;
        const drift_traffic_window *w = drift_traffic_stream_windows(s, &nw, NULL);
        rep->windows = nw ? malloc(nw * sizeof *w) : NULL;
        if (nw && !rep->windows) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else if (nw) memcpy(rep->windows, w, nw * sizeof *w);
        rep->n_windows = rep->windows ? nw : 0;
    }
    drift_traffic_stream_free(s);
    free(t);
    free(order);
    return rc;
}

static drift_status judge(drift_store *st, const drift_replay_opts *o, const drift_traffic_log *log,
                          const row_ix *map, const side *sb, const side *stg, drift_replay_report *rep,
                          drift_error *err) {
    size_t n = log->n;
    int64_t *ra = calloc(n, sizeof *ra), *rb = calloc(n, sizeof *rb);
    int *ea = calloc(n, sizeof *ea), *eb = calloc(n, sizeof *eb), *perr = calloc(n, sizeof *perr);
    int *perr_judge = calloc(n, sizeof *perr_judge); /* an error, or not judged: no guard, no SDR */
    char **ma = calloc(n, sizeof *ma), **mb = calloc(n, sizeof *mb);
    const char **reqs = calloc(n, sizeof *reqs);
    drift_traffic_pair *pairs = calloc(n, sizeof *pairs);
    drift_status rc = DRIFT_OK;
    if (!ra || !rb || !ea || !eb || !perr || !perr_judge || !ma || !mb || !reqs || !pairs) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    drift_store_read_begin(st);
    rc = side_rows(st, sb->run_id, map, n, ra, ea, err);
    if (!rc) rc = side_rows(st, stg->run_id, map, n, rb, eb, err);
    for (size_t i = 0; i < n && !rc; i++) {
        perr[i] = perr_judge[i] = ea[i] || eb[i];
        reqs[i] = log->recs[i].request_json;
        if (perr[i]) continue;
        int lp = 0;
        if (sb->mem && sb->mem[i]) ma[i] = util_strdup(sb->mem[i]);
        else rc = drift_store_answer_text(st, ra[i], &ma[i], &lp, err);
        if (rc) break;
        if (stg->mem && stg->mem[i]) mb[i] = util_strdup(stg->mem[i]);
        else rc = drift_store_answer_text(st, rb[i], &mb[i], &lp, err);
        if (!rc && (!ma[i] || !mb[i])) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_store_read_end(st);
    if (rc) goto out;
    drift_code_opts code_opts; /* the code class's sandbox: defaults, stopped by the replay's cancel */
    drift_code_opts_default(&code_opts);
    code_opts.cancel = o->target_opts.cancel;
    code_opts.cancel_user = o->target_opts.cancel_user;
    for (size_t i = 0; i < n; i++) {
        drift_replay_pair *p = &rep->pairs[i];
        p->error_baseline = ea[i];
        p->error_target = eb[i];
        memset(&p->p, 0, sizeof p->p);
        p->p.first_diff_char = p->p.first_diff_word = -1;
        p->p.sdr = NAN;
        if (perr[i]) continue;
        if (drift_traffic_privacy_is_hash(ma[i]) || drift_traffic_privacy_is_hash(mb[i])) {
            /* stored as a hash by an earlier call: the text is gone, the pair is not judged again */
            p->not_judged = 1;
            rep->not_judged++;
            free(ma[i]);
            free(mb[i]);
            ma[i] = mb[i] = NULL;
            perr_judge[i] = 1;
            continue;
        }
        if ((rc = drift_traffic_pair_judge(reqs[i], ma[i], mb[i], &p->p, err))) {
            drift_error_prefix(err, "%s:%zu: ", log->name, log->recs[i].line);
            goto out;
        }
        drift_traffic_pair_set_code(&p->p, reqs[i], ma[i], mb[i], &code_opts); /* runs code: only where it applies */
    }
    if (o->guard_spec && (rc = judge_guard(o, rep, log, ma, mb, perr_judge, err))) goto out;
    if (o->embedder_spec && (rc = judge_sdr(o, rep, n, ma, mb, perr_judge, err))) goto out;
    for (size_t i = 0; i < n; i++) {
        pairs[i] = rep->pairs[i].p;
        rep->sum.errors_baseline += ea[i] != 0;
        rep->sum.errors_target += eb[i] != 0;
        rep->sum.errors_both += ea[i] && eb[i];
    }
    size_t eb_, et_, e2_;
    eb_ = rep->sum.errors_baseline;
    et_ = rep->sum.errors_target;
    e2_ = rep->sum.errors_both;
    drift_traffic_summarize(pairs, perr, reqs, n, o->guard_spec != NULL, o->embedder_spec != NULL, &o->stats,
                            &rep->sum);
    rep->sum.errors_baseline = eb_;
    rep->sum.errors_target = et_;
    rep->sum.errors_both = e2_;
    rc = replay_alarms(st, map, sb, stg, o, rep, reqs, err);
out:
    for (size_t i = 0; i < n; i++) {
        if (ma) free(ma[i]);
        if (mb) free(mb[i]);
    }
    free(ra);
    free(rb);
    free(ea);
    free(eb);
    free(perr);
    free(perr_judge);
    free(ma);
    free(mb);
    free(reqs);
    free(pairs);
    return rc;
}

static char *file_name(const char *path) {
    const char *s = strrchr(path, '/');
    return util_asprintf("replay:%s", s ? s + 1 : path);
}

drift_status drift_replay_run(drift_store *st, const drift_replay_opts *o, drift_replay_report **out,
                              drift_error *err) {
    *out = NULL;
    if (!st || !o || (!o->log_path && !o->log) || !o->target_spec)
        return drift_error_set(err, DRIFT_ERR_INVALID, "replay: a log, a store and a target are needed");
    drift_traffic_log *own = NULL;
    drift_status rc = DRIFT_OK;
    if (!o->log && (rc = drift_traffic_log_load(o->log_path, &own, err))) return rc;
    const drift_traffic_log *log = o->log ? o->log : own;
    if (!o->baseline_spec && log->with_response == 0) {
        rc = drift_error_set(err, DRIFT_ERR_INVALID,
                             "%s: no line has a logged response: give a baseline stack (--baseline URL)", log->name);
        drift_traffic_log_free(own);
        return rc;
    }
    drift_replay_report *rep = calloc(1, sizeof *rep);
    drift_prompt *prompts = calloc(log->n, sizeof *prompts);
    int64_t *rowids = calloc(log->n, sizeof *rowids);
    row_ix *map = calloc(log->n, sizeof *map);
    char *suite_name = file_name(log->name);
    side sb = {.spec = o->baseline_spec}, stg = {.spec = o->target_spec};
    char **inputs = calloc(log->n, sizeof *inputs);
    if (!drift_traffic_privacy_is_full(o->privacy)) {
        sb.mem = calloc(log->n, sizeof *sb.mem);
        stg.mem = calloc(log->n, sizeof *stg.mem);
    }
    if (!rep || !prompts || !rowids || !map || !suite_name || !inputs ||
        (!drift_traffic_privacy_is_full(o->privacy) && (!sb.mem || !stg.mem)) ||
        !(rep->pairs = calloc(log->n, sizeof *rep->pairs))) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto out;
    }
    rep->n_pairs = log->n;
    for (size_t i = 0; i < log->n; i++) {
        rep->pairs[i].id = util_strdup(log->recs[i].id);
        rep->pairs[i].line = log->recs[i].line;
        prompts[i].prompt_id = log->recs[i].id;
        prompts[i].workload = DRIFT_WL_CHAT;
        prompts[i].input = log->recs[i].request_json;
        if (!drift_traffic_privacy_is_full(o->privacy)) {
            char *stored = NULL;
            if ((rc = drift_traffic_privacy_apply(o->privacy, log->recs[i].request_json, &stored, NULL, err))) goto out;
            prompts[i].input = inputs[i] = stored;
        }
        prompts[i].reference_json = "{}";
        prompts[i].hash = suite_prompt_hash(DRIFT_WL_CHAT, prompts[i].input, "{}", SUITE_HASH_NUL);
        if (!rep->pairs[i].id || !prompts[i].hash) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    drift_suite suite = {.name = suite_name, .source = log->name, .format = (char *)log->format,
                         .prompts = prompts, .n = log->n};
    if ((rc = drift_store_put_prompts(st, &suite, rowids, err))) goto out;
    for (size_t i = 0; i < log->n; i++) map[i] = (row_ix){rowids[i], i};
    qsort(map, log->n, sizeof *map, cmp_row);

    if ((rc = begin_side(st, o, log, o->baseline_label, o->baseline_spec ? "replay-baseline" : "replay-logged", &sb,
                         err)))
        goto out;
    if ((rc = begin_side(st, o, log, o->target_label, "replay-target", &stg, err))) goto out;
    if (!strcmp(sb.label, stg.label)) {
        rc = drift_error_set(err, DRIFT_ERR_INVALID, "replay: baseline and target are the same run '%s'", sb.label);
        goto out;
    }
    if ((rc = ask_side(st, o, log, rowids, map, &sb, "baseline", err))) goto out;
    if ((rc = ask_side(st, o, log, rowids, map, &stg, "target", err))) goto out;
    if ((rc = drift_store_run_finish(st, sb.run_id, err))) goto out;
    if ((rc = drift_store_run_finish(st, stg.run_id, err))) goto out;

    rep->log_name = util_strdup(log->name);
    rep->log_format = log->format;
    rep->logged = o->baseline_spec == NULL;
    rep->baseline_label = util_strdup(sb.label);
    rep->target_label = util_strdup(stg.label);
    rep->baseline_target = o->baseline_spec ? drift_redact(o->baseline_spec) : util_asprintf("logged:%s", log->name);
    rep->target_target = drift_redact(o->target_spec);
    rep->privacy = drift_traffic_privacy_describe(o->privacy);
    memcpy(rep->overrides, stg.overrides, sizeof rep->overrides);
    rep->asked_baseline = sb.asked;
    rep->asked_target = stg.asked;
    rc = judge(st, o, log, map, &sb, &stg, rep, err);
out:
    if (sb.run_id && rc) drift_store_run_unlock(st, sb.label, NULL);
    if (stg.run_id && rc) drift_store_run_unlock(st, stg.label, NULL);
    drift_target_close(sb.t);
    drift_target_close(stg.t);
    for (size_t i = 0; prompts && i < log->n; i++) free(prompts[i].hash);
    for (size_t i = 0; inputs && i < log->n; i++) free(inputs[i]);
    free(inputs);
    for (size_t i = 0; sb.mem && i < log->n; i++) free(sb.mem[i]);
    for (size_t i = 0; stg.mem && i < log->n; i++) free(stg.mem[i]);
    free(sb.mem);
    free(stg.mem);
    free(prompts);
    free(rowids);
    free(map);
    free(suite_name);
    drift_traffic_log_free(own);
    if (rc) {
        drift_replay_report_free(rep);
        return rc;
    }
    *out = rep;
    return DRIFT_OK;
}
