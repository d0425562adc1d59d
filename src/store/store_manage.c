/* store_manage.c - managing the runs of a store (store.h, "managing
 * runs"): what identifies a run's target, the endpoints a run was begun
 * through, overviews of runs (list, show), renaming, deleting, and free
 * labels for runs nobody named.
 *
 * Identity. A run's answers are decided by its model, its prompts, what is
 * sent with them (templates, request fields) and its decoding; not by the
 * address of the server that answers. So a target's identity
 * (drift_store_target_identity) is its record's form (util_target_record:
 * no secrets, no credential parameters) without the endpoint: for an
 * http(s) target, the scheme, credentials, host, port and path go, and so
 * does max_reply_mb (a cap on reading the reply, not on what is answered);
 * the other parameters (model, api, ...) stay, sorted. An embedded target
 * has no endpoint: the model file and every parameter (profile, batch and
 * the profile's keys) decide its answers, so all of it stays (parameters
 * sorted). run_begin compares identities; a resume through another endpoint
 * is recorded in run_endpoints.
 *
 * Endpoints (schema v3): one row per stretch of begins through one target:
 * target (record form), first and last begin, begins. The run's own target
 * column holds the last one. A run created before v3 has no rows until it
 * is begun again; then a row for its stored target (from its start) comes
 * first. Readers of an older store (read-only handles do not migrate) take
 * the stored target as the only endpoint.
 *
 * Rename and delete run in one transaction each and refuse a run a live
 * writer holds (store_lock_live; PostgreSQL: its advisory lock is held
 * through the transaction, so no writer begins the run meanwhile). Rows key
 * a run by its id (responses.run_id, run_endpoints.run_id; scores and
 * embeddings by response id), so renaming changes runs.label and drops the
 * stale lock row of the old label; nothing else names a run by its label. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/util.h"

/* ---- identity ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char *drift_store_target_identity(const char *target) {
    char *rec = util_target_record(target ? target : "");
    if (!rec) return NULL;
    int http = !strncmp(rec, "http://", 7) || !strncmp(rec, "https://", 8);
    char *q = strchr(rec, '?');
    util_buf b = {0};
    char **params = NULL;
    size_t n = 0;
    int bad = http ? buf_puts(&b, "http") : buf_append(&b, rec, q ? (size_t)(q - rec) : strlen(rec));
    for (char *p = q ? q + 1 : NULL; p && *p && !bad;) {
        char *amp = strchr(p, '&');
        if (amp) *amp = '\0';
        int drop = !*p || (http && !strncmp(p, "max_reply_mb=", 13));
        if (!drop) {
            char **np = realloc(params, (n + 1) * sizeof *np);
            if (!np) bad = 1;
            else (params = np)[n++] = p;
        }
        p = amp ? amp + 1 : NULL;
    }
    if (n > 1) qsort(params, n, sizeof *params, cmp_str);
    for (size_t i = 0; i < n && !bad; i++) bad = buf_puts(&b, i ? "&" : "?") || buf_puts(&b, params[i]);
    free(params);
    free(rec);
    if (bad || !b.data) {
        buf_free(&b);
        return bad ? NULL : util_strdup("");
    }
    return buf_steal(&b);
}

/* ---- endpoints ---- */

drift_status store_endpoint_note(drift_store *st, int64_t id, const char *old_target, const char *old_started,
                                 const char *target, drift_error *err) {
    char now[32];
    util_utc_iso(now);
    store_q *q = sq_prepare(st, "SELECT id, target FROM run_endpoints WHERE run_id=? ORDER BY id DESC LIMIT 1", err);
    if (!q) return store_err_code(err);
    sq_bind_int64(q, 1, id);
    int rc = sq_step(q);
    int64_t last = rc == SQ_ROW ? sq_int64(q, 0) : 0;
    int same = rc == SQ_ROW && sq_text(q, 1) && !strcmp(sq_text(q, 1), target);
    sq_done(q);
    if (rc == SQ_ERROR) return store_db_error(st, err, "reading a run's endpoints");
    if (same) {
        q = sq_prepare(st, "UPDATE run_endpoints SET last_at=?, begins=begins+1 WHERE id=?", err);
        if (!q) return store_err_code(err);
        sq_bind_text(q, 1, now);
        sq_bind_int64(q, 2, last);
        rc = sq_step(q);
        sq_done(q);
        return rc == SQ_DONE ? DRIFT_OK : store_db_error(st, err, "recording a run's endpoint");
    }
    q = sq_prepare(st, "INSERT INTO run_endpoints(run_id,target,first_at,last_at,begins) VALUES(?,?,?,?,1)", err);
    if (!q) return store_err_code(err);
    if (!last && old_target) { /* a run of an older store: its first endpoint, from its start */
        sq_bind_int64(q, 1, id);
        sq_bind_text(q, 2, old_target);
        sq_bind_text(q, 3, old_started ? old_started : now);
        sq_bind_text(q, 4, old_started ? old_started : now);
        rc = sq_step(q);
        sq_reset(q);
        if (rc != SQ_DONE) {
            sq_done(q);
            return store_db_error(st, err, "recording a run's endpoint");
        }
        if (!strcmp(old_target, target)) { /* begun again through it */
            sq_done(q);
            return store_endpoint_note(st, id, NULL, NULL, target, err);
        }
    }
    sq_bind_int64(q, 1, id);
    sq_bind_text(q, 2, target);
    sq_bind_text(q, 3, now);
    sq_bind_text(q, 4, now);
    rc = sq_step(q);
    sq_done(q);
    return rc == SQ_DONE ? DRIFT_OK : store_db_error(st, err, "recording a run's endpoint");
}

/* ---- overviews ---- */

static drift_status nomem(drift_error *err) { return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading runs"); }

/* Counts of every run (or of run `only` when > 0) into the overviews ov[0..n), matched by id. */
static drift_status fill_counts(drift_store *st, drift_run_overview *ov, size_t n, int64_t only, drift_error *err) {
    static const char *const sql[3][2] = {
        {"SELECT run_id, count(*), coalesce(sum(failed), 0) FROM responses GROUP BY run_id",
         "SELECT run_id, count(*), coalesce(sum(failed), 0) FROM responses WHERE run_id = ? GROUP BY run_id"},
        {"SELECT r.run_id, count(DISTINCT s.response_id), count(*) FROM scores s JOIN responses r ON r.id = "
         "s.response_id GROUP BY r.run_id",
         "SELECT r.run_id, count(DISTINCT s.response_id), count(*) FROM scores s JOIN responses r ON r.id = "
         "s.response_id WHERE r.run_id = ? GROUP BY r.run_id"},
        {"SELECT r.run_id, count(*), 0 FROM embeddings e JOIN responses r ON r.id = e.response_id GROUP BY r.run_id",
         "SELECT r.run_id, count(*), 0 FROM embeddings e JOIN responses r ON r.id = e.response_id WHERE r.run_id = ? "
         "GROUP BY r.run_id"},
    };
    for (int k = 0; k < 3; k++) {
        const char *text = sql[k][only > 0];
        store_q *q = sq_prepare(st, text, err);
        if (!q) return store_err_code(err);
        if (only > 0) sq_bind_int64(q, 1, only);
        int rc;
        while ((rc = sq_step(q)) == SQ_ROW) {
            int64_t id = sq_int64(q, 0);
            for (size_t i = 0; i < n; i++) {
                if (ov[i].info.id != id) continue;
                size_t a = (size_t)sq_int64(q, 1), b = (size_t)sq_int64(q, 2);
                if (k == 0) ov[i].responses = a, ov[i].failed = b;
                else if (k == 1) ov[i].scored = a, ov[i].scores = b;
                else ov[i].embeddings = a;
                break;
            }
        }
        sq_done(q);
        if (rc != SQ_DONE) return store_db_error(st, err, "counting a run's rows");
    }
    return DRIFT_OK;
}

/* Endpoint history of ov (with `keep`: its rows kept in ov->endpoints). */
static drift_status fill_endpoints(drift_store *st, drift_run_overview *ov, int keep, drift_error *err) {
    if (st->version >= 3) {
        store_q *q = sq_prepare(
            st, "SELECT target, first_at, last_at, begins FROM run_endpoints WHERE run_id=? ORDER BY id", err);
        if (!q) return store_err_code(err);
        sq_bind_int64(q, 1, ov->info.id);
        int rc;
        size_t begins = 0;
        while ((rc = sq_step(q)) == SQ_ROW) {
            begins += (size_t)sq_int64(q, 3);
            if (!ov->last_begun || strcmp(ov->last_begun, sq_text(q, 2) ? sq_text(q, 2) : "") < 0) {
                free(ov->last_begun);
                ov->last_begun = store_col_strdup(q, 2);
            }
            if (keep) {
                drift_run_endpoint *ne = realloc(ov->endpoints, (ov->n_endpoints + 1) * sizeof *ne);
                if (!ne) break;
                ov->endpoints = ne;
                drift_run_endpoint *e = &ne[ov->n_endpoints];
                e->target = sq_text(q, 0) ? util_target_record(sq_text(q, 0)) : NULL;
                e->first_at = store_col_strdup(q, 1);
                e->last_at = store_col_strdup(q, 2);
                e->begins = (long)sq_int64(q, 3);
                if (!e->target || !e->first_at || !e->last_at) {
                    free(e->target);
                    free(e->first_at);
                    free(e->last_at);
                    break;
                }
            }
            ov->n_endpoints++;
        }
        sq_done(q);
        if (rc == SQ_ROW) return nomem(err);
        if (rc != SQ_DONE) return store_db_error(st, err, "reading a run's endpoints");
        ov->resumes = begins > 0 ? begins - 1 : 0;
        if (ov->resumes == 0) {
            free(ov->last_begun);
            ov->last_begun = NULL;
        }
    }
    if (ov->n_endpoints == 0) { /* never begun since v3: its stored target */
        ov->n_endpoints = 1;
        if (keep) {
            ov->endpoints = calloc(1, sizeof *ov->endpoints);
            if (!ov->endpoints) return nomem(err);
            ov->endpoints[0].target = util_strdup(ov->info.target);
            ov->endpoints[0].first_at = util_strdup(ov->info.started_at);
            ov->endpoints[0].last_at = util_strdup(ov->info.started_at);
            ov->endpoints[0].begins = 1;
            if (!ov->endpoints[0].target || !ov->endpoints[0].first_at || !ov->endpoints[0].last_at) return nomem(err);
        }
    }
    return DRIFT_OK;
}

static drift_status fill_one(drift_store *st, drift_run_overview *ov, int detail, drift_error *err) {
    drift_status ds = fill_endpoints(st, ov, detail, err);
    if (!ds && !(ov->identity = drift_store_target_identity(ov->info.target))) ds = nomem(err);
    if (!ds) ds = store_lock_live(st, ov->info.label, &ov->locked, ov->lock_holder, sizeof ov->lock_holder, err);
    return ds;
}

drift_status drift_store_run_overviews(drift_store *st, drift_run_overview **out, size_t *n, drift_error *err) {
    *out = NULL;
    *n = 0;
    drift_run_info *runs = NULL;
    size_t nr = 0;
    drift_store_read_begin(st);
    drift_status ds = drift_store_run_list(st, &runs, &nr, err);
    drift_run_overview *ov = ds ? NULL : calloc(nr ? nr : 1, sizeof *ov);
    if (!ds && !ov) ds = nomem(err);
    for (size_t i = 0; i < nr && ov; i++) ov[i].info = runs[i]; /* moved */
    if (ov) free(runs);
    else drift_run_info_array_free(runs, nr);
    if (!ds) ds = fill_counts(st, ov, nr, 0, err);
    for (size_t i = 0; i < nr && !ds; i++) ds = fill_one(st, &ov[i], 0, err);
    drift_store_read_end(st);
    if (ds) {
        drift_run_overview_array_free(ov, nr);
        return ds;
    }
    *out = ov;
    *n = nr;
    return DRIFT_OK;
}

drift_status drift_store_run_overview(drift_store *st, const char *label, drift_run_overview *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    drift_store_read_begin(st);
    drift_status ds = drift_store_run_get(st, label, &out->info, err);
    if (!ds) ds = fill_counts(st, out, 1, out->info.id, err);
    if (!ds) ds = fill_one(st, out, 1, err);
    if (!ds) ds = drift_store_count_run(st, label, &out->per_workload, err);
    if (!ds) { /* scored answers per workload */
        store_q *q = sq_prepare(st,
                                "SELECT p.workload, count(DISTINCT s.response_id) FROM scores s JOIN responses r ON "
                                "r.id = s.response_id JOIN prompts p ON p.id = r.prompt_rowid WHERE r.run_id = ? "
                                "GROUP BY p.workload",
                                err);
        if (!q) ds = store_err_code(err);
        else {
            sq_bind_int64(q, 1, out->info.id);
            int rc;
            while ((rc = sq_step(q)) == SQ_ROW) {
                drift_workload w = drift_workload_parse(sq_text(q, 0));
                if (w != DRIFT_WL_UNKNOWN) out->scored_per_workload[w] += (size_t)sq_int64(q, 1);
            }
            sq_done(q);
            if (rc != SQ_DONE) ds = store_db_error(st, err, "counting a run's scores");
        }
    }
    drift_store_read_end(st);
    if (ds) drift_run_overview_clear(out);
    return ds;
}

void drift_run_overview_clear(drift_run_overview *ov) {
    if (!ov) return;
    drift_run_info_clear(&ov->info);
    for (size_t i = 0; ov->endpoints && i < ov->n_endpoints; i++) {
        free(ov->endpoints[i].target);
        free(ov->endpoints[i].first_at);
        free(ov->endpoints[i].last_at);
    }
    free(ov->endpoints);
    free(ov->identity);
    free(ov->last_begun);
    memset(ov, 0, sizeof *ov);
}

void drift_run_overview_array_free(drift_run_overview *ov, size_t n) {
    if (!ov) return;
    for (size_t i = 0; i < n; i++) drift_run_overview_clear(&ov[i]);
    free(ov);
}

/* ---- rename, delete ---- */

int store_run_delete_rows(drift_store *st, int64_t id) {
    static const char *const sql[] = {
        "DELETE FROM embeddings WHERE response_id IN (SELECT id FROM responses WHERE run_id=?1)",
        "DELETE FROM scores WHERE response_id IN (SELECT id FROM responses WHERE run_id=?1)",
        "DELETE FROM responses WHERE run_id=?1",
        "DELETE FROM run_endpoints WHERE run_id=?1",
        "DELETE FROM runs WHERE id=?1",
    };
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) {
        if (i == 3 && st->version < 3) continue;
        store_q *q = sq_prepare(st, sql[i], NULL);
        if (!q) return -1;
        sq_bind_int64(q, 1, id);
        int rc = sq_step(q);
        sq_done(q);
        if (rc != SQ_DONE) return -1;
    }
    return 0;
}

/* Begins the transaction of a change to run `label`: the run must exist
 * (its id in *id) and no live writer may hold it. PostgreSQL: *pg_held = 1
 * when the label's advisory lock is now held (give it back after the
 * commit or rollback). */
static drift_status change_begin(drift_store *st, const char *what, const char *label, int64_t *id, int *pg_held,
                                 drift_error *err) {
    *pg_held = 0;
    if (st->readonly) return drift_error_set(err, DRIFT_ERR_STORE, "%s: opened read-only", st->shown);
    drift_status ds = store_tx_begin(st, err);
    if (ds) return ds;
    store_q *q = sq_prepare(st, "SELECT id FROM runs WHERE label=?", err);
    if (!q) goto fail;
    sq_bind_text(q, 1, label);
    int rc = sq_step(q);
    *id = rc == SQ_ROW ? sq_int64(q, 0) : 0;
    sq_done(q);
    if (rc == SQ_ERROR) {
        store_db_error(st, err, "reading runs");
        goto fail;
    }
    if (rc != SQ_ROW) {
        store_tx_rollback(st);
        drift_run_info none;
        ds = drift_store_run_get(st, label, &none, err); /* the message that lists the labels */
        drift_run_info_clear(&none);
        return ds ? ds : drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run labelled '%s'", st->shown, label);
    }
    if (st->kind == STORE_PG) {
        int got = store_pg_lock_try(st, label);
        if (got < 0) {
            store_db_error(st, err, "taking the run lock");
            goto fail;
        }
        if (!got) {
            drift_error_set(err, DRIFT_ERR_STORE,
                            "%s: run '%s' is being written by another driftbench; not %s it (wait for it to end)",
                            st->shown, label, what);
            goto fail;
        }
        *pg_held = 1;
    } else {
        int live = 0;
        char who[400];
        if (store_lock_live(st, label, &live, who, sizeof who, err)) goto fail;
        if (live) {
            drift_error_set(err, DRIFT_ERR_STORE,
                            "%s: run '%s' is being written by another driftbench (%s); not %s it: wait for it to "
                            "end or stop it",
                            st->shown, label, who, what);
            goto fail;
        }
    }
    return DRIFT_OK;
fail:
    store_tx_rollback(st);
    if (*pg_held) store_pg_lock_give(st, label);
    *pg_held = 0;
    return store_err_code(err);
}

static drift_status change_end(drift_store *st, const char *label, int pg_held, drift_status ds, drift_error *err) {
    if (!ds) ds = store_tx_commit(st, err);
    else store_tx_rollback(st);
    if (pg_held) store_pg_lock_give(st, label);
    return ds;
}

drift_status drift_store_run_rename(drift_store *st, const char *old_label, const char *new_label, drift_error *err) {
    if (!old_label || !*old_label || !new_label || !*new_label)
        return drift_error_set(err, DRIFT_ERR_INVALID, "rename: a label is empty");
    if (!strcmp(old_label, new_label)) return drift_error_set(err, DRIFT_ERR_INVALID, "rename: the two labels are the same");
    int64_t id = 0;
    int held = 0;
    drift_status ds = change_begin(st, "renaming", old_label, &id, &held, err);
    if (ds) return ds;
    store_q *q = sq_prepare(st, "SELECT 1 FROM runs WHERE label=?", err);
    int rc = SQ_ERROR;
    if (q) {
        sq_bind_text(q, 1, new_label);
        rc = sq_step(q);
        sq_done(q);
    }
    if (!q) ds = store_err_code(err);
    else if (rc == SQ_ROW)
        ds = drift_error_set(err, DRIFT_ERR_MISMATCH, "%s: a run labelled '%s' exists already; not renaming '%s'",
                             st->shown, new_label, old_label);
    else if (rc != SQ_DONE) ds = store_db_error(st, err, "reading runs");
    int live = 0;
    char who[400];
    if (!ds && st->kind == STORE_SQLITE && (ds = store_lock_live(st, new_label, &live, who, sizeof who, err)) == 0 &&
        live)
        ds = drift_error_set(err, DRIFT_ERR_STORE, "%s: a driftbench is writing a run labelled '%s' (%s); not renaming",
                             st->shown, new_label, who);
    static const char *const sql[] = {
        "DELETE FROM run_locks WHERE label=?2", /* stale rows of either label: nobody writes them */
        "DELETE FROM run_locks WHERE label=?3",
        "UPDATE runs SET label=?3 WHERE id=?1",
    };
    for (size_t i = 0; i < 3 && !ds; i++) {
        if (i < 2 && st->version < 2) continue;
        if (!(q = sq_prepare(st, sql[i], err))) {
            ds = store_err_code(err);
            break;
        }
        sq_bind_int64(q, 1, id);
        sq_bind_text(q, 2, old_label);
        sq_bind_text(q, 3, new_label);
        if (sq_step(q) != SQ_DONE) ds = store_db_error(st, err, "renaming a run");
        sq_done(q);
    }
    return change_end(st, old_label, held, ds, err);
}

/* What deleting run id removes. */
static drift_status removal_counts(drift_store *st, int64_t id, const char *label, drift_run_removal *out,
                                   drift_error *err) {
    drift_run_overview ov;
    memset(&ov, 0, sizeof ov);
    ov.info.id = id;
    drift_status ds = fill_counts(st, &ov, 1, id, err);
    out->responses = ov.responses;
    out->failed = ov.failed;
    out->scores = ov.scores;
    out->embeddings = ov.embeddings;
    out->endpoints = 0;
    if (!ds && st->version >= 3) {
        store_q *q = sq_prepare(st, "SELECT count(*) FROM run_endpoints WHERE run_id=?", err);
        if (!q) return store_err_code(err);
        sq_bind_int64(q, 1, id);
        if (sq_step(q) == SQ_ROW) out->endpoints = (size_t)sq_int64(q, 0);
        else ds = store_db_error(st, err, "counting a run's endpoints");
        sq_done(q);
    }
    (void)label;
    return ds;
}

drift_status drift_store_run_removal(drift_store *st, const char *label, drift_run_removal *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    drift_run_info ri;
    drift_store_read_begin(st);
    drift_status ds = drift_store_run_get(st, label, &ri, err);
    if (!ds) {
        ds = removal_counts(st, ri.id, label, out, err);
        drift_run_info_clear(&ri);
    }
    if (!ds) ds = store_lock_live(st, label, &out->locked, out->lock_holder, sizeof out->lock_holder, err);
    drift_store_read_end(st);
    return ds;
}

drift_status drift_store_run_delete(drift_store *st, const char *label, drift_run_removal *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!label || !*label) return drift_error_set(err, DRIFT_ERR_INVALID, "delete: the label is empty");
    int64_t id = 0;
    int held = 0;
    drift_status ds = change_begin(st, "deleting", label, &id, &held, err);
    if (ds) return ds;
    ds = removal_counts(st, id, label, out, err);
    if (!ds && store_run_delete_rows(st, id)) ds = store_db_error(st, err, "deleting a run");
    if (!ds && st->version >= 2) {
        store_q *q = sq_prepare(st, "DELETE FROM run_locks WHERE label=?", err);
        if (!q) ds = store_err_code(err);
        else {
            sq_bind_text(q, 1, label);
            if (sq_step(q) != SQ_DONE) ds = store_db_error(st, err, "deleting a run's lock");
            sq_done(q);
        }
    }
    ds = change_end(st, label, held, ds, err);
    if (ds) memset(out, 0, sizeof *out);
    return ds;
}

/* ---- retention ---- */

/* Runs sql with ?1 run_id and ?2 (text when t, else the integer v); the
 * count of the first column into *count when it is a SELECT. */
static int prune_exec(drift_store *st, const char *sql, int64_t run_id, const char *t, int64_t v, int64_t *count) {
    store_q *q = sq_prepare(st, sql, NULL);
    if (!q) return -1;
    sq_bind_int64(q, 1, run_id);
    if (t) sq_bind_text(q, 2, t);
    else sq_bind_int64(q, 2, v);
    int rc = sq_step(q);
    if (count && rc == SQ_ROW) *count = sq_int64(q, 0);
    sq_done(q);
    return rc == SQ_DONE || (count && rc == SQ_ROW) ? 0 : -1;
}

drift_status drift_store_prune_responses(drift_store *st, int64_t run_id, const char *before_iso,
                                         int64_t keep_newest, int64_t *deleted, drift_error *err) {
    *deleted = 0;
    /* the two limits, each a condition on responses r's own columns */
    static const char *const cond[2] = {"run_id=?1 AND created_at < ?2",
                                        "run_id=?1 AND id NOT IN (SELECT id FROM responses WHERE run_id=?1 "
                                        "ORDER BY id DESC LIMIT ?2)"};
    drift_status rc = store_tx_begin(st, err);
    if (rc) return rc;
    char **suites = NULL;
    size_t n_suites = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        if ((k == 0 && !before_iso) || (k == 1 && keep_newest < 0)) continue;
        const char *t = k == 0 ? before_iso : NULL;
        char sql[512];
        int64_t n = 0;
        snprintf(sql, sizeof sql,
                 "SELECT DISTINCT p.suite FROM prompts p WHERE p.id IN (SELECT prompt_rowid FROM responses WHERE %s)",
                 cond[k]);
        store_q *q = sq_prepare(st, sql, NULL);
        if (!q) {
            rc = store_db_error(st, err, "retention: reading the suites");
            break;
        }
        sq_bind_int64(q, 1, run_id);
        if (t) sq_bind_text(q, 2, t);
        else sq_bind_int64(q, 2, keep_newest);
        int step = store_col_strings(q, 0, &suites, &n_suites);
        sq_done(q);
        if (step != SQ_DONE) {
            rc = store_db_error(st, err, "retention: reading the suites");
            break;
        }
        static const char *const head[4] = {"SELECT count(*) FROM responses WHERE ",
                                            "DELETE FROM embeddings WHERE response_id IN (SELECT id FROM responses WHERE ",
                                            "DELETE FROM scores WHERE response_id IN (SELECT id FROM responses WHERE ",
                                            "DELETE FROM responses WHERE "};
        for (int w = 0; w < 4 && !rc; w++) {
            snprintf(sql, sizeof sql, "%s%s%s", head[w], cond[k], w == 1 || w == 2 ? ")" : "");
            if (prune_exec(st, sql, run_id, t, keep_newest, w == 0 ? &n : NULL))
                rc = store_db_error(st, err, "retention: deleting old responses");
        }
        *deleted += n;
    }
    for (size_t i = 0; i < n_suites && !rc; i++) {
        store_q *q = sq_prepare(st,
                                SQ_SQL(st,
                                       "DELETE FROM prompts WHERE suite=?1 AND id NOT IN (SELECT prompt_rowid FROM "
                                       "responses)",
                                       "DELETE FROM prompts p WHERE p.suite=?1 AND NOT EXISTS (SELECT 1 FROM responses r "
                                       "WHERE r.prompt_rowid = p.id)"),
                                NULL);
        int step = SQ_ERROR;
        if (q) {
            sq_bind_text(q, 1, suites[i]);
            step = sq_step(q);
            sq_done(q);
        }
        if (step != SQ_DONE) rc = store_db_error(st, err, "retention: deleting unused prompts");
    }
    for (size_t i = 0; i < n_suites; i++) free(suites[i]);
    free(suites);
    if (rc) {
        store_tx_rollback(st);
        *deleted = 0;
        return rc;
    }
    return store_tx_commit(st, err);
}
