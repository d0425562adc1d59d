/* answer_shape.c - how long some runs' answers are and how close their
 * greedy decisions were, per workload (analysis.h: drift_answer_shape_runs).
 *
 * For each run: every response row (drift_store_load_scored: workload,
 * failed or not), then each answer read once (drift_store_response_get,
 * which unpacks its zstd logprobs) inside one read transaction. Lengths are
 * the stored completion token counts; gaps come from the logprobs array,
 * one element per generated token: a token whose "top" lists two entries or
 * more has the gap best - second (anl_logprob_top2's margin, risk.c: the
 * one flip risk reads), a token with a shorter or absent list has none. An
 * answer whose logprobs do not read is counted in bad_logprobs and in no
 * gap figure (its length still counts): a figure over a partly read answer
 * would say what the data does not. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "driftbench/analysis.h"
#include "driftbench/store.h"

/* One answer's gaps: *n_gap tokens with one, *n_tie of them under
 * DRIFT_SHAPE_TIE_NATS, the smallest in *min_gap (NAN when none). -1 when
 * the JSON does not read as the logprobs array (its "token"s are not read). */
static int answer_gaps(const char *json, size_t *n_gap, size_t *n_tie, double *min_gap) {
    *n_gap = *n_tie = 0;
    *min_gap = NAN;
    json_t *root;
    size_t n;
    if (anl_logprobs_load(json, &root, &n, NULL)) return -1;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        anl_top2 t2;
        if (anl_logprob_top2(json_array_get(root, i), i, &t2, NULL)) {
            rc = -1;
            break;
        }
        if (t2.n_top < 2) continue;
        (*n_gap)++;
        *n_tie += t2.margin < DRIFT_SHAPE_TIE_NATS;
        if (isnan(*min_gap) || t2.margin < *min_gap) *min_gap = t2.margin;
    }
    json_decref(root);
    return rc;
}

/* Token counts of the answers of one workload, grown as read. */
typedef struct lens {
    double *v;
    size_t n, cap;
} lens;

static int lens_push(lens *l, double x) {
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 64;
        double *p = realloc(l->v, c * sizeof *p);
        if (!p) return -1;
        l->v = p;
        l->cap = c;
    }
    l->v[l->n++] = x;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Adds run `label`'s rows to out; seen[w] marks its workloads. */
static drift_status add_run(drift_store *st, const char *label, drift_answer_shape *out, lens *len,
                            drift_error *err) {
    static const double gap_nats[DRIFT_SHAPE_N_GAPS] = DRIFT_SHAPE_GAP_NATS;
    drift_run_info ri = {0};
    drift_error e = {0};
    drift_status rc = drift_store_run_get(st, label, &ri, &e);
    if (rc == DRIFT_ERR_NOT_FOUND) return DRIFT_OK; /* not run: nothing to add */
    if (rc) {
        *err = e;
        return rc;
    }
    drift_scored_set set = {0};
    rc = drift_store_load_scored(st, ri.id, &set, err);
    drift_run_info_clear(&ri);
    if (rc) return rc;
    int seen[DRIFT_WL_COUNT] = {0};
    drift_store_read_begin(st);
    for (size_t i = 0; !rc && i < set.n; i++) {
        const drift_scored *s = &set.rows[i];
        if (s->workload < 0 || s->workload >= DRIFT_WL_COUNT) continue;
        drift_answer_shape *x = &out[s->workload];
        seen[s->workload] = 1;
        if (s->is_error) {
            x->failed++;
            continue;
        }
        drift_answer a = {0};
        if ((rc = drift_store_response_get(st, s->response_id, &a, NULL, err))) break;
        if (a.error) { /* failed after all (the row changed since the listing) */
            x->failed++;
            drift_answer_clear(&a);
            continue;
        }
        x->answers++;
        if (a.completion_tokens >= 0) {
            x->n_len++;
            if (a.completion_tokens > x->len_max) x->len_max = a.completion_tokens;
            if (lens_push(&len[s->workload], a.completion_tokens))
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading run '%s'", label);
        }
        x->cut += a.finish_reason && !strcmp(a.finish_reason, "length");
        size_t n_gap, n_tie;
        double min_gap;
        if (!a.logprobs_json) x->no_logprobs++;
        else if (answer_gaps(a.logprobs_json, &n_gap, &n_tie, &min_gap)) x->bad_logprobs++;
        else if (!n_gap) x->no_gap++;
        else {
            x->with_gap++;
            x->gap_tokens += n_gap;
            x->tie_tokens += n_tie;
            for (int k = 0; k < DRIFT_SHAPE_N_GAPS; k++) x->min_gap_lt[k] += min_gap < gap_nats[k];
        }
        drift_answer_clear(&a);
    }
    drift_store_read_end(st);
    drift_scored_set_clear(&set);
    for (int w = 0; w < DRIFT_WL_COUNT; w++) out[w].runs += seen[w];
    return rc;
}

/* See analysis.h. */
drift_status drift_answer_shape_runs(struct drift_store *st, const char *const *labels, size_t n,
                                     drift_answer_shape out[DRIFT_WL_COUNT], drift_error *err) {
    if (!st || !out || (n && !labels))
        return drift_error_set(err, DRIFT_ERR_INVALID, "answer shape needs a store, runs and an output");
    lens len[DRIFT_WL_COUNT];
    memset(len, 0, sizeof len);
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        memset(&out[w], 0, sizeof out[w]);
        out[w].len_max = -1;
    }
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; !rc && i < n; i++)
        rc = labels[i] ? add_run(st, labels[i], out, len, err)
                       : drift_error_set(err, DRIFT_ERR_INVALID, "answer shape: run %zu has no label", i);
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        lens *l = &len[w];
        if (l->n) qsort(l->v, l->n, sizeof *l->v, cmp_double);
        out[w].len_median = anl_quantile_sorted(l->v, l->n, 0.5);
        out[w].len_p10 = anl_quantile_sorted(l->v, l->n, 0.1);
        out[w].len_p90 = anl_quantile_sorted(l->v, l->n, 0.9);
        free(l->v);
    }
    return rc;
}
