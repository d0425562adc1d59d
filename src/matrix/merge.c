/* merge.c - joins shard stores into one, and the whole-store counts the
 * matrix and lab report (matrix.h).
 *
 * Each input is copied by drift_store_merge (store.h says how: prompts
 * deduplicated, runs re-keyed, a label already present must be the same
 * run), one transaction per input: a failure leaves the output with whatever
 * earlier inputs added. The counts come from drift_store_count_outcomes and
 * drift_store_completion_tokens; this file holds no SQL. */
#include <stdio.h>
#include <string.h>

#include "driftbench/matrix.h"
#include "util/util.h"

drift_status drift_matrix_merge(drift_store *out, const char *const *in, size_t n, drift_merge_stats *stats,
                                drift_error *err) {
    if (!out || (n && !in)) return drift_error_set(err, DRIFT_ERR_INVALID, "merge: missing arguments");
    drift_merge_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    drift_store_merged m = {0};
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = drift_store_merge(out, in[i], &m, err);
    stats->runs = m.runs;
    stats->runs_skipped = m.runs_skipped;
    stats->prompts = m.prompts;
    stats->responses = m.responses;
    stats->scores = m.scores;
    stats->embeddings = m.embeddings;
    return rc;
}

drift_status drift_matrix_store_tokens(drift_store *st, int64_t *tokens, drift_error *err) {
    if (!st || !tokens) return drift_error_set(err, DRIFT_ERR_INVALID, "store tokens: missing arguments");
    drift_status rc = drift_store_completion_tokens(st, tokens, err);
    if (rc) drift_error_prefix(err, "store tokens: ");
    return rc;
}

drift_status drift_matrix_store_health(drift_store *st, drift_store_health *out, drift_error *err) {
    if (!st || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "store health: missing arguments");
    memset(out, 0, sizeof *out);
    drift_store_outcomes o;
    drift_status rc = drift_store_count_outcomes(st, &o, err);
    if (rc) {
        drift_error_prefix(err, "store health: ");
        return rc;
    }
    _Static_assert(sizeof out->common_error == sizeof o.common_error, "same error text size");
    memcpy(out->answers, o.answers, sizeof out->answers);
    memcpy(out->errors, o.errors, sizeof out->errors);
    memcpy(out->common_error, o.common_error, sizeof out->common_error);
    return DRIFT_OK;
}
