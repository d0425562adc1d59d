/* shadow_metrics.c - the shadow proxy's GET /metrics (docs/shadow.md's
 * table): its counters and gauges copied under the proxy's mutex, rendered
 * as Prometheus text with the added-latency histogram, then the caller's
 * families (metrics_extra: the live judge's). */
#include <math.h>
#include <stdlib.h>

#include "traffic/shadow_internal.h"

static int fam(drift_prom *p, const char *name, drift_prom_type t, const char *help, double v) {
    drift_error e = {0};
    if (drift_prom_family(p, name, t, help, &e)) return -1;
    return v == v ? (drift_prom_sample(p, NULL, 0, v, &e) ? -1 : 0) : 0;
}

char *shd_metrics(drift_shadow *s) {
    drift_shadow_stats st;
    drift_prom_hist h;
    pthread_mutex_lock(&s->mu);
    st = s->stats;
    st.queue_depth = s->ring_n + s->backlog_n;
    h = s->added;
    pthread_mutex_unlock(&s->mu);
    drift_prom p;
    drift_prom_init(&p);
    drift_error e = {0};
    int bad = 0;
    bad |= fam(&p, "driftbench_shadow_requests_total", DRIFT_PROM_COUNTER,
               "Client requests proxied to the primary (every path).", (double)st.requests);
    bad |= fam(&p, "driftbench_shadow_primary_errors_total", DRIFT_PROM_COUNTER,
               "chat/completions and completions requests the primary failed (non-2xx or unreachable).",
               (double)st.primary_errors);
    bad |= fam(&p, "driftbench_shadow_sampled_out_total", DRIFT_PROM_COUNTER,
               "Requests left out of the sample (--sample; not a drop).", (double)st.sampled_out);
    bad |= fam(&p, "driftbench_shadow_mirrored_total", DRIFT_PROM_COUNTER,
               "Requests stored with the primary's answer and queued for the candidate (resumes from the store).",
               (double)st.mirrored);
    bad |= fam(&p, "driftbench_shadow_dropped_total", DRIFT_PROM_COUNTER,
               "Sampled requests not mirrored for lack of room, by reason.", NAN);
    drift_prom_label l1 = {"reason", "queue_full"}, l2 = {"reason", "store_busy"}, l3 = {"reason", "reply_too_large"};
    bad |= drift_prom_sample(&p, &l1, 1, (double)st.dropped_queue_full, &e) != 0;
    bad |= drift_prom_sample(&p, &l2, 1, (double)st.dropped_store_busy, &e) != 0;
    bad |= drift_prom_sample(&p, &l3, 1, (double)st.dropped_reply_too_large, &e) != 0;
    bad |= fam(&p, "driftbench_shadow_skipped_total", DRIFT_PROM_COUNTER,
               "Sampled requests not mirrored by rule, by reason.", NAN);
    drift_prom_label k1 = {"reason", "not_comparable"}, k2 = {"reason", "not_mirrorable"};
    bad |= drift_prom_sample(&p, &k1, 1, (double)st.skipped_not_comparable, &e) != 0;
    bad |= drift_prom_sample(&p, &k2, 1, (double)st.skipped_other, &e) != 0;
    bad |= fam(&p, "driftbench_shadow_mirror_errors_total", DRIFT_PROM_COUNTER,
               "Mirrored requests the candidate failed (an error pair, never a flip).", (double)st.mirror_errors);
    bad |= fam(&p, "driftbench_shadow_pairs_total", DRIFT_PROM_COUNTER,
               "Pairs completed: the candidate's answer or error stored.", (double)st.pairs);
    bad |= fam(&p, "driftbench_shadow_compared_total", DRIFT_PROM_COUNTER,
               "Completed pairs with both answers whose request is deterministic (comparable).", (double)st.compared);
    bad |= fam(&p, "driftbench_shadow_not_comparable_total", DRIFT_PROM_COUNTER,
               "Completed pairs with both answers whose request samples (left out of flips).",
               (double)st.not_comparable);
    bad |= fam(&p, "driftbench_shadow_primary_error_pairs_total", DRIFT_PROM_COUNTER,
               "Sampled requests the primary failed: stored as error pairs, not mirrored.",
               (double)st.primary_error_pairs);
    bad |= fam(&p, "driftbench_shadow_store_errors_total", DRIFT_PROM_COUNTER,
               "Store writes that failed, or a mirror worker whose candidate could not work at all.",
               (double)st.store_errors);
    bad |= fam(&p, "driftbench_shadow_resumed_total", DRIFT_PROM_COUNTER,
               "Unfinished pairs found in the store at start and mirrored again.", (double)st.resumed);
    bad |= fam(&p, "driftbench_shadow_retention_deleted_total", DRIFT_PROM_COUNTER,
               "Stored answers deleted by --retention (at start and every period while running).",
               (double)st.retention_deleted);
    bad |= fam(&p, "driftbench_shadow_queue_depth", DRIFT_PROM_GAUGE,
               "Pairs waiting for the candidate (queue and restart backlog).", (double)st.queue_depth);
    bad |= fam(&p, "driftbench_shadow_queue_capacity", DRIFT_PROM_GAUGE, "The mirror queue's capacity (--queue).",
               (double)s->o.queue);
    bad |= fam(&p, "driftbench_shadow_in_flight", DRIFT_PROM_GAUGE, "Client requests being answered now.",
               (double)st.in_flight);
    bad |= drift_prom_family(&p, "driftbench_shadow_primary_added_latency_seconds", DRIFT_PROM_HISTOGRAM,
                             "The proxy's own overhead: time to first byte via the proxy minus the primary's own, "
                             "measured inside the proxy.",
                             &e) != 0;
    bad |= drift_prom_histogram(&p, NULL, 0, &h, &e) != 0;
    if (!bad && s->o.metrics_extra && s->o.metrics_extra(s->o.user, &p)) bad = 1;
    char *text = bad ? NULL : drift_prom_steal(&p);
    drift_prom_free(&p);
    return text;
}
