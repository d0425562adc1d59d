/* flip_details.c - what a comparison report shows of its flips, read from
 * the store before rendering (report.h): where each flip's answers part
 * (divergence.c) and, for the few quoted, both answers. The renderers in
 * src/report/ then work from the comparison and these details alone.
 *
 * Which flips, and how, follows the format: JSON lists every flip and
 * reads them in one batch (drift_flip_divergences); text and markdown list
 * the first DRIFT_REPORT_LISTED_FLIPS per workload, one flip at a time
 * (drift_flip_divergence, whose message a failing flip shows), and quote
 * the first DRIFT_REPORT_QUOTED_FLIPS; JUnit shows none. */
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "util/util.h"

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

/* Both answers of a flip for quoting; left NULL when either cannot be read
 * (the report then shows no excerpt). */
static drift_status load_texts(drift_store *st, const drift_flip *f, drift_flip_detail *fd, drift_error *err) {
    drift_answer rb, rt;
    if (drift_store_response_get(st, f->base_response_id, &rb, NULL, NULL) != DRIFT_OK) return DRIFT_OK;
    if (drift_store_response_get(st, f->targ_response_id, &rt, NULL, NULL) != DRIFT_OK) {
        drift_answer_clear(&rb);
        return DRIFT_OK;
    }
    fd->base_text = util_strdup(rb.text ? rb.text : "");
    fd->targ_text = util_strdup(rt.text ? rt.text : "");
    drift_answer_clear(&rb);
    drift_answer_clear(&rt);
    if (fd->base_text && fd->targ_text) return DRIFT_OK;
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading answers");
}

/* Text and markdown: one flip at a time, the first few quoted. */
static drift_status load_listed(drift_store *st, const drift_wl_result *w, drift_flip_detail *out, size_t n,
                                drift_error *err) {
    for (size_t i = 0; i < n; i++) {
        drift_flip_detail *fd = &out[i];
        drift_error e = {0};
        if (drift_flip_divergence(st, &w->flipped[i], &fd->div, &e) != DRIFT_OK) {
            drift_divergence_clear(&fd->div);
            fd->div.error = util_strdup(e.msg);
            if (!fd->div.error) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            continue;
        }
        if (i < DRIFT_REPORT_QUOTED_FLIPS && !fd->div.identical) {
            drift_status rc = load_texts(st, &w->flipped[i], fd, err);
            if (rc) return rc;
        }
    }
    return DRIFT_OK;
}

/* JSON: every flip in one batch. */
static drift_status load_batch(drift_store *st, const drift_wl_result *w, drift_flip_detail *out, size_t n,
                               drift_error *err) {
    drift_divergence *divs = calloc(n, sizeof *divs);
    if (!divs) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering JSON");
    drift_status rc = drift_flip_divergences(st, w->flipped, n, divs, err);
    if (!rc)
        for (size_t i = 0; i < n; i++) out[i].div = divs[i];
    free(divs);
    return rc;
}

/* See report.h. */
drift_status drift_comparison_details_load(drift_store *st, const drift_comparison *c, drift_format fmt,
                                           drift_comparison_details *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!st || !c) return drift_error_set(err, DRIFT_ERR_INVALID, "flip details need a store and a comparison");
    if (fmt == DRIFT_FORMAT_JUNIT) return DRIFT_OK;
    int batch = fmt == DRIFT_FORMAT_JSON;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k] || !w->n_flipped) continue;
        size_t n = w->n_flipped;
        if (!batch && n > DRIFT_REPORT_LISTED_FLIPS) n = DRIFT_REPORT_LISTED_FLIPS;
        out->flips[k] = calloc(n, sizeof *out->flips[k]);
        if (!out->flips[k]) {
            drift_comparison_details_clear(out);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        drift_status rc = batch ? load_batch(st, w, out->flips[k], n, err) : load_listed(st, w, out->flips[k], n, err);
        out->n[k] = n; /* the clear frees what was filled; calloc'd entries free as empty */
        if (rc) {
            drift_comparison_details_clear(out);
            return rc;
        }
    }
    return DRIFT_OK;
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
