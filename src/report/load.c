/* load.c - the comparison's loader: the only code of a comparison report
 * that reads the store (report.h). Load -> compute -> render: this file
 * reads, compare.c and divergence.c compute from plain structs, the
 * renderers (compare_render.c, github_render.c, html_compare.c) draw.
 *
 * One comparison is one read transaction (drift_store_read_begin/_end,
 * so every read sees the same snapshot and the file's lock is taken once):
 *   1.-4. the runs, their comparison, code sandboxes and flip risk, read
 *      as drift_compare_runs reads them (src/analysis/compare_runs.c,
 *      anl_compare_load); its hooks begin the details here once the
 *      comparison is known, and a flipped pair's baseline answer that the
 *      risk pass reads gives that flip's details (step 5), so it is not
 *      read again and no answer is held past its flip;
 *   5. the flip details the format shows (drift_comparison_load with
 *      details) not given by step 4: where each flip's answers part
 *      (drift_divergence_compute) and, for the few quoted, both answers.
 * Which flips, and how, follows the format: JSON lists every flip and
 * reads them in a batch (text and "has logprobs" by drift_store_answer_text,
 * one statement prepared per handle; logprobs decoded only where both
 * answers have them; a flip that fails gets its own error); text,
 * markdown, github and html list the first DRIFT_REPORT_LISTED_FLIPS per
 * workload, one flip at a time (whose message a failing flip shows), and
 * quote the first DRIFT_REPORT_QUOTED_FLIPS; JUnit shows none.
 * Token KL is not read here: it is the pipeline's step (kl_step.c) and its
 * caller attaches it. The matrix report's loader is load_matrix.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare_runs.h"
#include "driftbench/report.h"
#include "suite/workload.h"
#include "util/util.h"

/* ------------------------------------------------------------ compare */

/* The flip details being loaded: d (flips[k] allocated, n[k] set by
 * details_begin), the format, and which of them are done (the risk pass
 * fills those whose baseline answer it read). */
typedef struct details_ctx {
    drift_comparison_details *d;
    drift_format fmt;
    unsigned char *done[DRIFT_WL_COUNT];
} details_ctx;

/* Flipped pairs of each workload whose details fmt shows (load_details). */
static size_t details_count(const drift_comparison *c, int k, drift_format fmt) {
    if (fmt == DRIFT_FORMAT_JUNIT || !c->present[k]) return 0;
    size_t n = c->wl[k].n_flipped;
    if (fmt != DRIFT_FORMAT_JSON && n > DRIFT_REPORT_LISTED_FLIPS) n = DRIFT_REPORT_LISTED_FLIPS;
    return n;
}

/* ------------------------------------------------------ flip details */

/* See compare.h. */
drift_status drift_flip_divergence(drift_store *st, const drift_flip *f, drift_divergence *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!st || !f) return drift_error_set(err, DRIFT_ERR_INVALID, "divergence needs a store and a flip");
    drift_answer rb, rt;
    memset(&rt, 0, sizeof rt);
    drift_status rc = drift_store_response_get(st, f->base_response_id, &rb, NULL, err);
    if (!rc) rc = drift_store_response_get(st, f->targ_response_id, &rt, NULL, err);
    if (!rc)
        rc = drift_divergence_compute(rb.text ? rb.text : "", rb.logprobs_json, rt.text ? rt.text : "",
                                      rt.logprobs_json, out, err);
    if (rc)
        drift_error_prefix(err, "prompt %s (responses %lld, %lld): ", f->prompt_id ? f->prompt_id : "?",
                           (long long)f->base_response_id, (long long)f->targ_response_id);
    drift_answer_clear(&rb);
    drift_answer_clear(&rt);
    return rc;
}

/* One flip of a batch: DRIFT_OK with out filled, DRIFT_ERR_NOMEM/STORE
 * (fatal), or another status with the message in err (per flip). kb: the
 * baseline answer when already read (then the target is read once: its
 * text alone when the baseline has no logprobs, else whole), else NULL
 * (both texts first, the logprobs decoded only when both have them). */
static drift_status batch_one(drift_store *st, const drift_flip *f, const drift_answer *kb, drift_divergence *out,
                              drift_error *err) {
    char *tb = NULL, *tt = NULL;
    int lb = 0, lt = 0;
    drift_status rc = DRIFT_OK;
    if (kb && kb->logprobs_json) {
        drift_answer rt;
        rc = drift_store_response_get(st, f->targ_response_id, &rt, NULL, err);
        /* a row that cannot be decoded (corrupt logprobs) fails this flip only */
        if (rc && rc != DRIFT_ERR_NOMEM) rc = DRIFT_ERR_PARSE;
        if (!rc)
            rc = drift_divergence_compute(kb->text ? kb->text : "", rt.logprobs_json ? kb->logprobs_json : NULL,
                                          rt.text ? rt.text : "", rt.logprobs_json, out, err);
        drift_answer_clear(&rt);
        return rc;
    }
    if (kb) {
        if (!(tb = util_strdup(kb->text ? kb->text : "")))
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading response %lld",
                                 (long long)f->base_response_id);
    } else {
        rc = drift_store_answer_text(st, f->base_response_id, &tb, &lb, err);
    }
    if (!rc) rc = drift_store_answer_text(st, f->targ_response_id, &tt, &lt, err);
    if (!rc && lb && lt) {
        drift_answer rb, rt;
        memset(&rt, 0, sizeof rt);
        rc = drift_store_response_get(st, f->base_response_id, &rb, NULL, err);
        if (!rc) rc = drift_store_response_get(st, f->targ_response_id, &rt, NULL, err);
        /* a row that cannot be decoded (corrupt logprobs) fails this flip only */
        if (rc && rc != DRIFT_ERR_NOMEM) rc = DRIFT_ERR_PARSE;
        if (!rc) rc = drift_divergence_compute(tb, rb.logprobs_json, tt, rt.logprobs_json, out, err);
        drift_answer_clear(&rb);
        drift_answer_clear(&rt);
    } else if (!rc) {
        rc = drift_divergence_compute(tb, NULL, tt, NULL, out, err);
    }
    free(tb);
    free(tt);
    return rc;
}

/* A divergence before it is computed: nothing found yet. */
static void div_init(drift_divergence *d) {
    memset(d, 0, sizeof *d);
    d->first_diff_byte = d->first_diff_char = d->first_diff_token = -1;
    d->margin = d->kl = NAN;
}

/* One flip of a batch into out (div_init'ed): DRIFT_OK, with out->error
 * (malloc'd) when this flip failed, or a fatal error (the store, memory)
 * in err. */
static drift_status batch_flip(drift_store *st, const drift_flip *f, const drift_answer *kb, drift_divergence *out,
                               drift_error *err) {
    drift_error e = {0};
    drift_status rc = batch_one(st, f, kb, out, &e);
    if (rc == DRIFT_ERR_NOMEM || rc == DRIFT_ERR_STORE)
        return drift_error_set(err, rc, "prompt %s: %s", f->prompt_id ? f->prompt_id : "?", e.msg);
    if (rc) {
        out->error = util_asprintf("prompt %s (responses %lld, %lld): %s", f->prompt_id ? f->prompt_id : "?",
                                   (long long)f->base_response_id, (long long)f->targ_response_id, e.msg);
        if (!out->error) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    return DRIFT_OK;
}

/* See compare.h. */
drift_status drift_flip_divergences(drift_store *st, const drift_flip *flips, size_t n, drift_divergence *out,
                                    drift_error *err) {
    for (size_t i = 0; i < n; i++) div_init(&out[i]);
    if (n == 0) return DRIFT_OK;
    if (!st || !flips) return drift_error_set(err, DRIFT_ERR_INVALID, "divergences need a store and flips");
    drift_store_read_begin(st); /* one snapshot for all reads */
    drift_status fatal = DRIFT_OK;
    for (size_t i = 0; i < n && !fatal; i++) fatal = batch_flip(st, &flips[i], NULL, &out[i], err);
    drift_store_read_end(st);
    if (fatal)
        for (size_t i = 0; i < n; i++) drift_divergence_clear(&out[i]);
    return fatal;
}

void drift_comparison_details_clear(drift_comparison_details *d) {
    if (!d) return;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        for (size_t i = 0; i < d->n[k]; i++) {
            drift_divergence_clear(&d->flips[k][i].div);
            free(d->flips[k][i].base_text);
            free(d->flips[k][i].targ_text);
        }
        free(d->flips[k]);
        d->flips[k] = NULL;
        d->n[k] = 0;
    }
}

/* One listed flip (text, markdown, github, html): both answers read once
 * (the baseline's kb when already read), where they part, and both texts
 * when quoted. A flip whose answers cannot be read or compared gets
 * div.error; only running out of memory is an error. */
static drift_status listed_one(drift_store *st, const drift_flip *f, const drift_answer *kb, int quote,
                               drift_flip_detail *fd, drift_error *err) {
    drift_answer rb, rt;
    memset(&rb, 0, sizeof rb);
    memset(&rt, 0, sizeof rt);
    drift_error e = {0};
    drift_status rc = kb ? DRIFT_OK : drift_store_response_get(st, f->base_response_id, &rb, NULL, &e);
    const drift_answer *b = kb ? kb : &rb;
    if (!rc) rc = drift_store_response_get(st, f->targ_response_id, &rt, NULL, &e);
    if (!rc)
        rc = drift_divergence_compute(b->text ? b->text : "", b->logprobs_json, rt.text ? rt.text : "",
                                      rt.logprobs_json, &fd->div, &e);
    drift_status out = DRIFT_OK;
    if (rc) {
        drift_error_prefix(&e, "prompt %s (responses %lld, %lld): ", f->prompt_id ? f->prompt_id : "?",
                           (long long)f->base_response_id, (long long)f->targ_response_id);
        drift_divergence_clear(&fd->div);
        if (!(fd->div.error = util_strdup(e.msg))) out = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    } else if (quote && !fd->div.identical) {
        fd->base_text = util_strdup(b->text ? b->text : "");
        fd->targ_text = util_strdup(rt.text ? rt.text : "");
        if (!fd->base_text || !fd->targ_text)
            out = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading answers");
    }
    drift_answer_clear(&rb);
    drift_answer_clear(&rt);
    return out;
}

/* Allocates the details fmt shows of c's flips into d (empty entries,
 * none done). */
static drift_status details_begin(const drift_comparison *c, drift_format fmt, drift_comparison_details *d,
                                  details_ctx *x, drift_error *err) {
    memset(d, 0, sizeof *d);
    memset(x, 0, sizeof *x);
    x->d = d;
    x->fmt = fmt;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        size_t n = details_count(c, k, fmt);
        if (!n) continue;
        d->flips[k] = calloc(n, sizeof *d->flips[k]);
        x->done[k] = calloc(n, 1);
        if (!d->flips[k] || !x->done[k])
            return drift_error_set(err, DRIFT_ERR_NOMEM, fmt == DRIFT_FORMAT_JSON ? "out of memory rendering JSON"
                                                                                : "out of memory");
        d->n[k] = n; /* the clear frees what was filled; calloc'd entries free as empty */
        if (fmt == DRIFT_FORMAT_JSON)
            for (size_t i = 0; i < n; i++) div_init(&d->flips[k][i].div);
    }
    return DRIFT_OK;
}

static void details_end(details_ctx *x) {
    for (int k = 0; k < DRIFT_WL_COUNT; k++) free(x->done[k]);
    memset(x->done, 0, sizeof x->done);
}

/* The details of flip i of workload k (kb: its baseline answer when read
 * already, else NULL). */
static drift_status detail_one(drift_store *st, const drift_comparison *c, details_ctx *x, int k, size_t i,
                               const drift_answer *kb, drift_error *err) {
    const drift_flip *f = &c->wl[k].flipped[i];
    drift_flip_detail *fd = &x->d->flips[k][i];
    x->done[k][i] = 1;
    if (x->fmt == DRIFT_FORMAT_JSON) return batch_flip(st, f, kb, &fd->div, err);
    return listed_one(st, f, kb, i < DRIFT_REPORT_QUOTED_FLIPS, fd, err);
}

/* Step 5: the details not done yet (the caller holds the read transaction). */
static drift_status load_details(drift_store *st, const drift_comparison *c, details_ctx *x, drift_error *err) {
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < DRIFT_WL_COUNT && !rc; k++)
        for (size_t i = 0; i < x->d->n[k] && !rc; i++)
            if (!x->done[k][i]) rc = detail_one(st, c, x, k, i, NULL, err);
    return rc;
}

/* See report.h. */
drift_status drift_comparison_details_load(drift_store *st, const drift_comparison *c, drift_format fmt,
                                           drift_comparison_details *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!st || !c) return drift_error_set(err, DRIFT_ERR_INVALID, "flip details need a store and a comparison");
    details_ctx x;
    drift_store_read_begin(st);
    drift_status rc = details_begin(c, fmt, out, &x, err);
    if (!rc) rc = load_details(st, c, &x, err);
    drift_store_read_end(st);
    details_end(&x);
    if (rc) drift_comparison_details_clear(out);
    return rc;
}

/* The report's hooks into the comparison's read (anl_compare_load): the
 * details of fmt begun once the comparison is computed, and those of the
 * flips whose baseline answer the risk pass reads, filled from that read. */
typedef struct details_hooks {
    drift_store *st;
    drift_format fmt;
    drift_comparison_details *d;
    details_ctx *x;
} details_hooks;

static drift_status hook_begin(void *user, const drift_comparison *c, size_t want[DRIFT_WL_COUNT], drift_error *err) {
    details_hooks *h = user;
    drift_status rc = details_begin(c, h->fmt, h->d, h->x, err);
    for (int k = 0; !rc && k < DRIFT_WL_COUNT; k++) want[k] = h->d->n[k];
    return rc;
}

static drift_status hook_flip(void *user, const drift_comparison *c, int k, size_t fi, const drift_answer *a,
                              drift_error *err) {
    details_hooks *h = user;
    return detail_one(h->st, c, h->x, k, fi, a, err);
}

/* See report.h. */
drift_status drift_comparison_load(drift_store *st, const char *baseline_label, const char *target_label,
                                   const drift_compare_opts *opts, drift_format fmt, drift_comparison **out,
                                   drift_comparison_details *details, drift_error *err) {
    drift_compare_opts defaults;
    if (!opts) {
        drift_compare_opts_default(&defaults);
        opts = &defaults;
    }
    *out = NULL;
    drift_comparison_details scratch;
    drift_comparison_details *d = details ? details : &scratch;
    memset(d, 0, sizeof *d);
    details_ctx x;
    memset(&x, 0, sizeof x);
    drift_store_read_begin(st);
    details_hooks h = {st, fmt, d, &x};
    const anl_compare_hooks hooks = {hook_begin, hook_flip, &h};
    drift_status rc = anl_compare_load(st, baseline_label, target_label, opts, details ? &hooks : NULL, out, err);
    if (!rc && details && (rc = load_details(st, *out, &x, err))) {
        drift_comparison_free(*out);
        *out = NULL;
    }
    drift_store_read_end(st);
    details_end(&x);
    if (rc && details) drift_comparison_details_clear(details);
    return rc;
}

/* See report.h. */
drift_status drift_report_comparison(const drift_comparison *c, drift_store *st, drift_format fmt, char **out,
                                     drift_error *err) {
    *out = NULL;
    if (!c) return drift_error_set(err, DRIFT_ERR_INVALID, "no comparison to report");
    if (!st) return drift_comparison_render(c, NULL, fmt, out, err);
    drift_comparison_details d;
    drift_status rc = drift_comparison_details_load(st, c, fmt, &d, err);
    if (rc) return rc;
    rc = drift_comparison_render(c, &d, fmt, out, err);
    drift_comparison_details_clear(&d);
    return rc;
}
