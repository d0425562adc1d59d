/* shadow.c - the shadow proxy (shadow.h): its options, start and stop, and
 * its counters. A request's way through it:
 *
 *   client ──> relay (shadow_httpd.c) ──> primary, the reply back to the client
 *   relay thread ──shd_primary_done──> [sample, reserve a mirror slot] ──job──> writer   (shadow_queue.c)
 *   writer: store prompt + primary answer ──item──> mirror queue (bounded)                (shadow_writer.c)
 *   workers: item ──drift_target_send_raw──> candidate ──job──> writer                    (shadow_mirror.c)
 *   writer: store candidate answer, count, on_pair
 *
 * Start opens the store, begins (or resumes) both runs, applies the
 * retention once, loads what the store holds (shadow_pairs.c: the restart
 * backlog), then starts the writer, the workers and the listener. Stop
 * goes the other way: the listener drains its requests in flight, the
 * workers stop, the writer stores every job it holds. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/traffic.h"
#include "traffic/shadow_internal.h"

void drift_shadow_opts_default(drift_shadow_opts *o) {
    memset(o, 0, sizeof *o);
    o->listen_host = "127.0.0.1";
    o->name = "default";
    o->primary_label = "shadow-primary";
    o->candidate_label = "shadow-candidate";
    o->sample = 1.0;
    o->queue = 64;
    o->mirror_connections = 4;
    o->max_body_bytes = (size_t)4 << 20;
    o->max_store_reply_bytes = (size_t)8 << 20;
    o->max_connections = 256;
    o->idle_timeout_s = 60;
    o->primary_timeout_s = 600;
    o->drain_timeout_s = 30;
    o->retention_period_s = 3600;
    drift_target_opts_default(&o->candidate_opts);
    o->candidate_opts.max_retries = 1;
}

void shd_set_last_error(drift_shadow *s, const drift_error *e) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_error, sizeof s->last_error, "%s", e->msg);
    snprintf(s->stats.last_error, sizeof s->stats.last_error, "%s", e->msg);
    s->stats.store_errors++;
    pthread_mutex_unlock(&s->mu);
}

/* ---- start: the store, what it holds, the threads ---- */

/* The value of query parameter `key` in spec (malloc'd), NULL when absent. */
static char *spec_param(const char *spec, const char *key) {
    const char *q = strchr(spec, '?');
    size_t kl = strlen(key);
    while (q) {
        q++;
        if (!strncmp(q, key, kl) && q[kl] == '=') {
            const char *v = q + kl + 1;
            return util_strndup(v, strcspn(v, "&#"));
        }
        q = strchr(q, '&');
    }
    return NULL;
}

static int local_host(const char *url) {
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *at = strchr(h, '@'), *slash = strchr(h, '/');
    if (at && (!slash || at < slash)) h = at + 1;
    return !strncmp(h, "localhost", 9) || !strncmp(h, "127.", 4) || !strncmp(h, "[::1]", 5);
}

static drift_status begin_run(drift_shadow *s, const char *label, const char *spec, int64_t *run_id,
                              drift_error *err) {
    drift_target *t = NULL;
    drift_target_opts to;
    drift_target_opts_default(&to);
    to.default_key_env = NULL;
    drift_status rc = drift_target_open(spec, &to, &t, err);
    if (rc) return rc;
    const char *cfg = drift_target_config_json(t);
    char *config = util_strdup(cfg ? cfg : "{}");
    drift_target_close(t);
    json_t *sj = json_pack("[s]", s->suite);
    char *suites = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
    json_decref(sj);
    char version[64];
    snprintf(version, sizeof version, "driftbench %s", drift_version());
    drift_run_info info = {.label = (char *)label, .target = (char *)spec, .config_json = config,
                           .decoding_json = "{\"shadow\":\"as-requested\",\"stream\":false}",
                           .templates_json = "{}", .suites_json = suites, .tool_version = version};
    int resumed = 0;
    if (!config || !suites) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    else rc = drift_store_run_begin(s->st, &info, run_id, &resumed, err);
    free(config);
    free(suites);
    return rc;
}

static void shadow_free(drift_shadow *s) {
    if (!s) return;
    shd_item *it = s->ring_head;
    while (it) {
        shd_item *nx = it->next;
        shd_item_free(it);
        it = nx;
    }
    it = s->backlog_head;
    while (it) {
        shd_item *nx = it->next;
        shd_item_free(it);
        it = nx;
    }
    shd_job *j = s->jobs_head;
    while (j) {
        shd_job *nx = j->next;
        shd_job_free(j);
        j = nx;
    }
    if (s->st) {
        if (s->run_primary) drift_store_run_unlock(s->st, s->primary_label, NULL);
        if (s->run_candidate) drift_store_run_unlock(s->st, s->candidate_label, NULL);
        drift_store_close(s->st);
    }
    free(s->listen_host);
    free(s->name);
    free(s->primary_label);
    free(s->candidate_label);
    free(s->primary_spec);
    free(s->candidate_spec);
    free(s->primary_base);
    free(s->primary_key);
    free(s->candidate_model);
    free(s->workers);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_writer);
    pthread_cond_destroy(&s->cv_idle);
    pthread_cond_destroy(&s->cv_relay);
    free(s);
}

static drift_status check_opts(const drift_shadow_opts *o, drift_error *err) {
    if (!o->primary_spec || !o->candidate_spec || !o->store_path)
        return drift_error_set(err, DRIFT_ERR_INVALID, "shadow: a primary, a candidate and a store are needed");
    if (strncmp(o->primary_spec, "http://", 7) && strncmp(o->primary_spec, "https://", 8))
        return drift_error_set(err, DRIFT_ERR_INVALID, "the primary must be an http(s) target, not '%.*s'",
                               (int)strcspn(o->primary_spec, ":?"), o->primary_spec);
    if (strncmp(o->candidate_spec, "http://", 7) && strncmp(o->candidate_spec, "https://", 8))
        return drift_error_set(err, DRIFT_ERR_INVALID, "the candidate must be an http(s) target");
    if (!(o->sample >= 0 && o->sample <= 1)) return drift_error_set(err, DRIFT_ERR_INVALID, "sample must be in [0,1]");
    if (o->queue < 1 || o->queue > 1000000)
        return drift_error_set(err, DRIFT_ERR_INVALID, "queue must be 1..1000000");
    if (o->mirror_connections < 1 || o->mirror_connections > 1024)
        return drift_error_set(err, DRIFT_ERR_INVALID, "mirror connections must be 1..1024");
    if (o->max_connections < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "max connections must be >= 1");
    if (o->port < 0 || o->port > 65535) return drift_error_set(err, DRIFT_ERR_INVALID, "port must be 0..65535");
    if (!o->name || !*o->name) return drift_error_set(err, DRIFT_ERR_INVALID, "the name is empty");
    if (!(o->retention_period_s >= 0 && o->retention_period_s <= 31536000))
        return drift_error_set(err, DRIFT_ERR_INVALID, "the retention period must be 0..31536000 seconds");
    double age;
    int64_t keep;
    if (o->retention) return drift_traffic_retention_parse(o->retention, &age, &keep, err);
    return DRIFT_OK;
}

drift_status drift_shadow_start(const drift_shadow_opts *o, drift_shadow **out, drift_error *err) {
    *out = NULL;
    drift_status rc = check_opts(o, err);
    if (rc) return rc;
    drift_shadow *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_writer, NULL);
    pthread_cond_init(&s->cv_idle, NULL);
    pthread_cond_init(&s->cv_relay, NULL);
    s->o = *o;
    s->listen_host = util_strdup(o->listen_host ? o->listen_host : "127.0.0.1");
    s->name = util_strdup(o->name);
    s->primary_label = util_strdup(o->primary_label ? o->primary_label : "shadow-primary");
    s->candidate_label = util_strdup(o->candidate_label ? o->candidate_label : "shadow-candidate");
    s->primary_spec = util_strdup(o->primary_spec);
    s->candidate_spec = util_strdup(o->candidate_spec);
    s->primary_base = util_strndup(o->primary_spec, strcspn(o->primary_spec, "?#"));
    s->candidate_model = spec_param(o->candidate_spec, "model");
    s->retention = o->retention != NULL;
    if (s->retention) /* checked by check_opts */
        drift_traffic_retention_parse(o->retention, &s->retention_max_age_s, &s->retention_keep_newest, err);
    s->retention_period_ms = (o->retention_period_s > 0 ? o->retention_period_s : 3600) * 1000;
    if (!s->listen_host || !s->name || !s->primary_label || !s->candidate_label || !s->primary_spec ||
        !s->candidate_spec || !s->primary_base) {
        shadow_free(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t bl = strlen(s->primary_base);
    while (bl && s->primary_base[bl - 1] == '/') s->primary_base[--bl] = 0;
    if (!strcmp(s->primary_label, s->candidate_label)) {
        shadow_free(s);
        return drift_error_set(err, DRIFT_ERR_INVALID, "the primary and candidate labels are the same");
    }
    /* the primary's key: the spec's api_key_env (for a client that sends no Authorization) */
    char *kenv = spec_param(o->primary_spec, "api_key_env");
    if (kenv) {
        const char *v = getenv(kenv);
        char *insecure = spec_param(o->primary_spec, "allow_insecure_key");
        int allow = insecure && !strcmp(insecure, "1");
        free(insecure);
        if (!v || !*v) rc = drift_error_set(err, DRIFT_ERR_INVALID, "the primary's api_key_env %s is not set", kenv);
        else if (!strncmp(s->primary_base, "http://", 7) && !local_host(s->primary_base) && !allow)
            rc = drift_error_set(err, DRIFT_ERR_INVALID,
                                 "the primary's key would go over plain http to another host "
                                 "(use https, or allow_insecure_key=1)");
        else s->primary_key = util_strdup(v);
        free(kenv);
        if (rc) {
            shadow_free(s);
            return rc;
        }
    }
    double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
    drift_prom_hist_init(&s->added, bounds, sizeof bounds / sizeof bounds[0], NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->start_wall_ms = (double)ts.tv_sec * 1000.0 + (double)(ts.tv_nsec / 1000000);
    snprintf(s->suite, sizeof s->suite, "shadow:%s", s->name);

    /* the candidate's api, and its spec checked, before anything is stored */
    drift_target *ct = NULL;
    drift_target_opts cto = o->candidate_opts;
    if ((rc = drift_target_open(s->candidate_spec, &cto, &ct, err))) {
        drift_error_prefix(err, "the candidate: ");
        shadow_free(s);
        return rc;
    }
    s->candidate_api = drift_target_api(ct);
    drift_target_close(ct);
    drift_target *pt = NULL;
    drift_target_opts pto;
    drift_target_opts_default(&pto);
    pto.default_key_env = NULL;
    if ((rc = drift_target_open(s->primary_spec, &pto, &pt, err))) {
        drift_error_prefix(err, "the primary: ");
        shadow_free(s);
        return rc;
    }
    drift_target_close(pt);

    if ((rc = drift_store_open(o->store_path, &s->st, err)) ||
        (rc = begin_run(s, s->primary_label, s->primary_spec, &s->run_primary, err)) ||
        (rc = begin_run(s, s->candidate_label, s->candidate_spec, &s->run_candidate, err)) ||
        (s->retention && (rc = shd_apply_retention(s, 0, err))) || (rc = shd_load_state(s, err))) {
        shadow_free(s);
        return rc;
    }
    s->stats.queue_capacity = (size_t)o->queue;
    if (pthread_create(&s->writer, NULL, shd_writer_main, s)) {
        shadow_free(s);
        return drift_error_set(err, DRIFT_ERR_IO, "cannot start the writer thread");
    }
    s->writer_started = 1;
    s->workers = calloc((size_t)o->mirror_connections, sizeof *s->workers);
    for (int i = 0; s->workers && i < o->mirror_connections; i++) {
        if (pthread_create(&s->workers[i], NULL, shd_mirror_main, s)) break;
        s->n_workers++;
    }
    if (s->n_workers != o->mirror_connections)
        rc = drift_error_set(err, DRIFT_ERR_IO, "cannot start the mirror workers");
    if (!rc) rc = shd_httpd_start(s, err);
    if (rc) {
        drift_shadow_stop(s, NULL, NULL);
        return rc;
    }
    *out = s;
    return DRIFT_OK;
}

int drift_shadow_port(const drift_shadow *s) {
    return s ? s->port : 0;
}

void drift_shadow_get_stats(drift_shadow *s, drift_shadow_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->queue_depth = s->ring_n + s->backlog_n;
    out->queue_capacity = (size_t)s->o.queue;
    pthread_mutex_unlock(&s->mu);
}

void drift_shadow_last_error(drift_shadow *s, char *buf, size_t cap) {
    pthread_mutex_lock(&s->mu);
    snprintf(buf, cap, "%s", s->last_error);
    pthread_mutex_unlock(&s->mu);
}

void drift_shadow_stop(drift_shadow *s, size_t *left_queued, drift_shadow_stats *final) {
    if (!s) return;
    shd_httpd_stop(s); /* drains the requests in flight; their primary jobs are queued */
    pthread_mutex_lock(&s->mu);
    s->stop_mirror = 1;
    pthread_cond_broadcast(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_workers; i++) pthread_join(s->workers[i], NULL);
    pthread_mutex_lock(&s->mu);
    s->stop_writer = 1;
    pthread_cond_broadcast(&s->cv_writer);
    pthread_mutex_unlock(&s->mu);
    if (s->writer_started) pthread_join(s->writer, NULL);
    /* the writer stored every primary it held: those items are in the ring now */
    if (left_queued) *left_queued = s->ring_n + s->backlog_n + s->left_cancelled;
    if (final) {
        *final = s->stats;
        final->queue_depth = s->ring_n + s->backlog_n;
        final->queue_capacity = (size_t)s->o.queue;
    }
    shadow_free(s);
}
