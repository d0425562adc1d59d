/* store_runs.c - prompts, runs and responses in the store (store.h).
 *
 * Prompts are inserted or found by (suite, prompt_id) and must keep their
 * hash; a run is created, or resumed when its identity agrees: the target's
 * identity (drift_store_target_identity, store_manage.c: the endpoint left
 * out), decoding and config (compared as canonical JSON, the first
 * difference named by its key path) and the templates of the workloads
 * both name. The decoding record holds the request control (run.c: system
 * prompt, prompt template, extra body), which so decides a resume too;
 * the header names it records do not (decoding_identity). A resume
 * records its endpoint (run_endpoints) and adds new suites and templates to
 * the run's record; responses are
 * written in one transaction per batch, an answer never overwritten, an
 * error row replaced by a later result. Logprobs are kept as one zstd frame
 * of their JSON text. Whole-store counts (answers and failed requests per
 * workload, completion tokens) are read here too.
 *
 * A run's target is recorded without its secrets: util_target_record keeps
 * drift_redact's copy of the spec (a URL's password and secret parameters
 * "***") without the parameters that only say how to authenticate
 * (api_key_env, allow_insecure_key). Resuming compares those forms, of the
 * stored target and of the requested one, without the endpoint: a run
 * resumes with a changed password or key variable, host, port or path
 * (they are not what is measured), not with another model or any other
 * parameter. Targets read back are
 * in that form too, so a record written by an older driftbench with a
 * password in it shows "***" and still resumes (which rewrites it). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/util.h"

/* Canonical form of a JSON text (sorted keys, compact) for comparisons;
 * NULL or empty -> "{}"; invalid JSON is returned as it is. */
static char *json_canonical(const char *text) {
    if (!text || !*text) return util_strdup("{}");
    json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
    if (!j) return util_strdup(text);
    char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* The members an http target fills from what its server says
 * (engine/stack_probe.c, "detected_from" naming where from): a server's
 * answer may differ between a run and its resume (it was down, it was
 * upgraded, the run moved to another endpoint), and that is no other run.
 * When either config was detected, these are left out of the comparison
 * and the stored ones stay the run's. *a2, *b2: malloc'd JSON, or NULL to
 * compare a and b as they are. */
static void strip_detected(const char *a, const char *b, char **a2, char **b2) {
    static const char *const keys[] = {"framework", "framework_version", "precision",    "hardware", "server_model",
                                       "server_profile", "tensor_parallel", "n_ctx", "detected_from"};
    *a2 = *b2 = NULL;
    json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
    if (json_is_object(ja) && json_is_object(jb) &&
        (json_object_get(ja, "detected_from") || json_object_get(jb, "detected_from"))) {
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            json_object_del(ja, keys[i]);
            json_object_del(jb, keys[i]);
        }
        *a2 = json_dumps(ja, JSON_COMPACT | JSON_SORT_KEYS);
        *b2 = json_dumps(jb, JSON_COMPACT | JSON_SORT_KEYS);
        if (!*a2 || !*b2) {
            free(*a2);
            free(*b2);
            *a2 = *b2 = NULL;
        }
    }
    json_decref(ja);
    json_decref(jb);
}

/* Writes into out the first key path under `path` where objects a and b
 * differ ("decoding.request.system_prompt: stored A, requested B"),
 * descending into members that are objects on both sides. */
static void diff_path(const char *path, json_t *a, json_t *b, char *out, size_t outsz) {
    const char *key;
    json_t *va;
    json_t *both[2] = {a, b};
    for (int side = 0; side < 2; side++) {
        json_object_foreach(both[side], key, va) {
            json_t *x = json_object_get(a, key), *y = json_object_get(b, key);
            if (x && y && json_equal(x, y)) continue;
            char sub[256];
            snprintf(sub, sizeof sub, "%s.%s", path, key);
            if (json_is_object(x) && json_is_object(y)) {
                diff_path(sub, x, y, out, outsz);
                return;
            }
            char *sx = x ? json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
            char *sy = y ? json_dumps(y, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
            snprintf(out, outsz, "%s: stored %s, requested %s", sub, sx ? sx : "(absent)", sy ? sy : "(absent)");
            free(sx);
            free(sy);
            return;
        }
    }
}

/* Describes how two JSON objects differ: "field.key: stored A, requested B"
 * for the first key that differs (inside nested objects, their key path).
 * Returns 1 if they differ. */
static int json_diff(const char *field, const char *stored, const char *given, char *out, size_t outsz) {
    char *a = json_canonical(stored), *b = json_canonical(given);
    int differ = !a || !b || strcmp(a, b) != 0;
    if (differ) {
        json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
        if (json_is_object(ja) && json_is_object(jb)) diff_path(field, ja, jb, out, outsz);
        else snprintf(out, outsz, "%s: stored %s, requested %s", field, a ? a : "?", b ? b : "?");
        json_decref(ja);
        json_decref(jb);
    }
    free(a);
    free(b);
    return differ;
}

/* The decoding record without what is not a run's identity: the request
 * control's header names (run.c records them; their values, and so the
 * headers, may change between a run and its resume: a rotated token). The
 * text as it is when there is nothing to leave out; malloc'd, NULL on nomem. */
static char *decoding_identity(const char *text) {
    json_t *j = text && *text ? json_loads(text, 0, NULL) : NULL;
    json_t *req = json_object_get(j, "request");
    char *out;
    if (json_is_object(req) && json_object_get(req, "headers")) {
        json_object_del(req, "headers");
        if (json_object_size(req) == 0) json_object_del(j, "request");
        out = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17));
    } else {
        out = util_strdup(text ? text : "");
    }
    json_decref(j);
    return out;
}

/* json_diff of two decoding records, their identity only (decoding_identity). */
static int decoding_differ(const char *stored, const char *given, char *out, size_t outsz) {
    char *a = decoding_identity(stored), *b = decoding_identity(given);
    int d = json_diff("decoding", a ? a : stored, b ? b : given, out, outsz);
    free(a);
    free(b);
    return d;
}

/* json_diff of two configs, what a server said of itself aside (strip_detected). */
static int config_differ(const char *stored, const char *given, char *out, size_t outsz) {
    char *a2, *b2;
    strip_detected(stored, given, &a2, &b2);
    int d = json_diff("config", a2 ? a2 : stored, b2 ? b2 : given, out, outsz);
    free(a2);
    free(b2);
    return d;
}

/* ---- prompts ---- */

/* A suite's stored prompts, sorted by prompt id (put_prompts' first read). */
typedef struct {
    char *pid, *hash;
    int64_t id;
} known_prompt;

static int known_cmp(const void *a, const void *b) {
    return strcmp(((const known_prompt *)a)->pid, ((const known_prompt *)b)->pid);
}

static void known_free(known_prompt *k, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(k[i].pid);
        free(k[i].hash);
    }
    free(k);
}

/* Reads every stored prompt of suite `name` into *out (sorted). */
static drift_status known_prompts(drift_store *st, const char *name, known_prompt **out, size_t *n, drift_error *err) {
    *out = NULL;
    *n = 0;
    store_q *q = sq_prepare(st, "SELECT prompt_id, id, hash FROM prompts WHERE suite = ?1", err);
    if (!q) return store_err_code(err);
    sq_bind_text(q, 1, name);
    size_t cap = 0;
    known_prompt *k = NULL;
    int rc;
    while ((rc = sq_step(q)) == SQ_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            known_prompt *nk = realloc(k, cap * sizeof *nk);
            if (!nk) break;
            k = nk;
        }
        known_prompt *e = &k[*n];
        e->pid = store_col_strdup(q, 0);
        e->id = sq_int64(q, 1);
        e->hash = util_strdup(sq_text(q, 2) ? sq_text(q, 2) : "");
        (*n)++;
        if (!e->pid || !e->hash) break;
    }
    sq_done(q);
    if (rc == SQ_ROW) {
        known_free(k, *n);
        *n = 0;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading prompts");
    }
    if (rc == SQ_ERROR) {
        known_free(k, *n);
        *n = 0;
        return store_db_error(st, err, "reading prompts");
    }
    if (*n > 1) qsort(k, *n, sizeof *k, known_cmp);
    *out = k;
    return DRIFT_OK;
}

/* The suite's prompts are read once; only those not stored yet are
 * inserted (and read back: another writer may insert the same one at the
 * same moment, and then its row is the one). A matrix's later
 * configurations of a suite so cost one read, not two statements per
 * prompt. */
drift_status drift_store_put_prompts(drift_store *st, const drift_suite *suite, int64_t *rowids,
                                     drift_error *err) {
    const char *suite_name = suite->name ? suite->name : "";
    drift_status ds = store_tx_begin(st, err);
    if (ds) return ds;
    known_prompt *known = NULL;
    size_t n_known = 0;
    if (known_prompts(st, suite_name, &known, &n_known, err)) goto fail;
    for (size_t i = 0; i < suite->n; i++) {
        const drift_prompt *p = &suite->prompts[i];
        known_prompt key = {.pid = p->prompt_id}, *hit = NULL;
        if (n_known && p->prompt_id) hit = bsearch(&key, known, n_known, sizeof *known, known_cmp);
        const char *h = NULL;
        int64_t id = 0;
        store_q *find = NULL;
        if (hit) {
            h = hit->hash;
            id = hit->id;
        } else {
            store_q *ins = sq_cached(st, STORE_STMT_PROMPT_INSERT,
                                     "INSERT INTO prompts(suite,prompt_id,workload,input,reference,hash) "
                                     "VALUES(?,?,?,?,?,?) ON CONFLICT(suite,prompt_id) DO NOTHING",
                                     err);
            if (!ins) goto fail;
            sq_bind_text(ins, 1, suite_name);
            sq_bind_text(ins, 2, p->prompt_id);
            sq_bind_text(ins, 3, drift_workload_name(p->workload));
            sq_bind_text(ins, 4, p->input ? p->input : "");
            sq_bind_text(ins, 5, p->reference_json ? p->reference_json : "{}");
            sq_bind_text(ins, 6, p->hash ? p->hash : "");
            if (sq_step(ins) != SQ_DONE) {
                store_db_error(st, err, "inserting a prompt");
                goto fail;
            }
            find = sq_cached(st, STORE_STMT_PROMPT_FIND, "SELECT id, hash FROM prompts WHERE suite=? AND prompt_id=?",
                             err);
            if (!find) goto fail;
            sq_bind_text(find, 1, suite_name);
            sq_bind_text(find, 2, p->prompt_id);
            if (sq_step(find) != SQ_ROW) {
                store_db_error(st, err, "finding a prompt");
                sq_done(find);
                goto fail;
            }
            h = sq_text(find, 1);
            id = sq_int64(find, 0);
        }
        if (strcmp(h ? h : "", p->hash ? p->hash : "") != 0) {
            drift_error_set(err, DRIFT_ERR_MISMATCH,
                            "%s: prompt %s of suite %s is stored with hash %s but the suite now gives hash %s "
                            "(its text or reference changed)",
                            st->shown, p->prompt_id, suite_name, h ? h : "", p->hash ? p->hash : "");
            sq_done(find);
            goto fail;
        }
        if (rowids) rowids[i] = id;
        sq_done(find);
    }
    known_free(known, n_known);
    return store_tx_commit(st, err);
fail:
    known_free(known, n_known);
    store_tx_rollback(st);
    return err ? err->code : DRIFT_ERR_STORE;
}

/* ---- runs ---- */

static const char RUN_COLS[] =
    "id,label,target,config,decoding,templates,suites,tool_version,started_at,finished_at";

static drift_status run_from_row(store_q *s, drift_run_info *r) {
    memset(r, 0, sizeof *r);
    r->id = sq_int64(s, 0);
    r->label = store_col_strdup(s, 1);
    r->target = sq_text(s, 2) ? util_target_record(sq_text(s, 2)) : NULL; /* a record of an older driftbench may hold a password */
    r->config_json = store_col_strdup(s, 3);
    r->decoding_json = store_col_strdup(s, 4);
    r->templates_json = store_col_strdup(s, 5);
    r->suites_json = store_col_strdup(s, 6);
    r->tool_version = store_col_strdup(s, 7);
    r->started_at = store_col_strdup(s, 8);
    r->finished_at = store_col_strdup(s, 9);
    if (!r->label || !r->target || !r->config_json || !r->decoding_json || !r->started_at) {
        drift_run_info_clear(r);
        return DRIFT_ERR_NOMEM;
    }
    return DRIFT_OK;
}

drift_status drift_store_run_get(drift_store *st, const char *label, drift_run_info *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE label=?", RUN_COLS);
    store_q *s = sq_prepare(st, sql, err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_text(s, 1, label);
    int rc = sq_step(s);
    drift_status ds;
    if (rc == SQ_ROW) {
        ds = run_from_row(s, out);
        if (ds) drift_error_set(err, ds, "out of memory reading run %s", label);
        sq_done(s);
        return ds;
    }
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "reading runs");
    /* Not found: list what exists. */
    util_buf names = {0};
    s = sq_prepare(st, "SELECT label FROM runs ORDER BY id", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    int n = 0;
    while (sq_step(s) == SQ_ROW) {
        if (n < 50) buf_printf(&names, "%s%s", n ? ", " : "", sq_text(s, 0));
        n++;
    }
    sq_done(s);
    if (n == 0)
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run labelled '%s' (the store has no runs)",
                             st->shown, label);
    else
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run labelled '%s'; runs: %s%s", st->shown, label,
                             names.data, n > 50 ? ", ..." : "");
    buf_free(&names);
    return ds;
}

drift_status drift_store_run_list(drift_store *st, drift_run_info **out, size_t *n, drift_error *err) {
    *out = NULL;
    *n = 0;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs ORDER BY id", RUN_COLS);
    store_q *s = sq_prepare(st, sql, err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    drift_run_info *arr = NULL;
    size_t cnt = 0, cap = 0;
    int rc;
    while ((rc = sq_step(s)) == SQ_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            drift_run_info *na = realloc(arr, cap * sizeof *arr);
            if (!na) goto nomem;
            arr = na;
        }
        if (run_from_row(s, &arr[cnt])) goto nomem;
        cnt++;
    }
    sq_done(s);
    if (rc != SQ_DONE) {
        drift_run_info_array_free(arr, cnt);
        return store_db_error(st, err, "listing runs");
    }
    *out = arr;
    *n = cnt;
    return DRIFT_OK;
nomem:
    sq_done(s);
    drift_run_info_array_free(arr, cnt);
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory listing runs");
}

void drift_run_info_clear(drift_run_info *r) {
    if (!r) return;
    free(r->label);
    free(r->target);
    free(r->config_json);
    free(r->decoding_json);
    free(r->templates_json);
    free(r->suites_json);
    free(r->tool_version);
    free(r->started_at);
    free(r->finished_at);
    memset(r, 0, sizeof *r);
}

void drift_run_info_array_free(drift_run_info *infos, size_t n) {
    if (!infos) return;
    for (size_t i = 0; i < n; i++) drift_run_info_clear(&infos[i]);
    free(infos);
}

/* Checks that the stored templates agree with the requested ones on every
 * workload both name (a run resumed with another suite adds workloads);
 * 1 with `out` saying the first difference. */
static int templates_differ(const char *stored, const char *given, char *out, size_t outsz) {
    json_t *a = json_loads(stored && *stored ? stored : "{}", 0, NULL), *b = json_loads(given && *given ? given : "{}", 0, NULL);
    int differ = 0;
    if (json_is_object(a) && json_is_object(b)) {
        const char *key;
        json_t *va;
        json_object_foreach(a, key, va) {
            json_t *vb = json_object_get(b, key);
            if (!vb || json_equal(va, vb)) continue;
            char *sa = json_dumps(va, JSON_ENCODE_ANY | JSON_COMPACT), *sb = json_dumps(vb, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(out, outsz, "templates.%s: stored %s, requested %s", key, sa ? sa : "?", sb ? sb : "?");
            free(sa);
            free(sb);
            differ = 1;
            break;
        }
    }
    json_decref(a);
    json_decref(b);
    return differ;
}

/* The union of stored and given (JSON objects: stored's keys win; arrays:
 * stored's items, then given's new ones), canonical; NULL on nomem. Text
 * that is not JSON of that kind: given. */
static char *json_union(const char *stored, const char *given) {
    json_t *a = json_loads(stored && *stored ? stored : "null", JSON_DECODE_ANY, NULL);
    json_t *b = json_loads(given && *given ? given : "null", JSON_DECODE_ANY, NULL);
    char *out = NULL;
    if (json_is_object(a) && json_is_object(b)) {
        json_object_update_missing(a, b);
        out = json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT);
    } else if (json_is_array(a) && json_is_array(b)) {
        size_t i, j;
        json_t *v, *w;
        json_array_foreach(b, i, v) {
            int have = 0;
            json_array_foreach(a, j, w) if (json_equal(v, w)) have = 1;
            if (!have) json_array_append(a, v);
        }
        out = json_dumps(a, JSON_COMPACT);
    } else {
        out = util_strdup(given ? given : "");
    }
    json_decref(a);
    json_decref(b);
    return out;
}

/* drift_store_run_begin with the record's form of the target. */
static drift_status run_begin(drift_store *st, const drift_run_info *info, const char *target, int64_t *run_id,
                              int *resumed, drift_error *err) {
    char *ident = drift_store_target_identity(target);
    if (!ident) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory beginning run %s", info->label);
    drift_status ds = store_tx_begin(st, err);
    if (ds) {
        free(ident);
        return ds;
    }
    int lock_taken = 0;
    if (store_lock_take(st, info->label, &lock_taken, err)) goto fail;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM runs WHERE label=?", RUN_COLS);
    store_q *s = sq_prepare(st, sql, err);
    if (!s) goto fail;
    sq_bind_text(s, 1, info->label);
    int rc = sq_step(s);
    if (rc == SQ_ROW) {
        drift_run_info old;
        if (run_from_row(s, &old)) {
            sq_done(s);
            drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading run %s", info->label);
            goto fail;
        }
        sq_done(s);
        char diff[768];
        char *old_ident = drift_store_target_identity(old.target);
        if (!old_ident) {
            drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading run %s", info->label);
        } else if (strcmp(old_ident, ident) != 0) {
            drift_error_set(err, DRIFT_ERR_MISMATCH,
                            "run '%s' exists with another target: stored '%s', requested '%s' (a run may move to "
                            "another endpoint, not to another model or parameters: %s vs %s; use a new label for a "
                            "new run)",
                            info->label, old.target, target, old_ident, ident);
        } else if (decoding_differ(old.decoding_json, info->decoding_json, diff, sizeof diff) ||
                   config_differ(old.config_json, info->config_json, diff, sizeof diff) ||
                   templates_differ(old.templates_json, info->templates_json, diff, sizeof diff)) {
            drift_error_set(err, DRIFT_ERR_MISMATCH,
                            "run '%s' exists with other settings: %s (use a new label for a new run)",
                            info->label, diff);
        } else {
            int64_t id = old.id;
            char *tpl = json_union(old.templates_json, info->templates_json ? info->templates_json : "{}");
            char *sui = json_union(old.suites_json, info->suites_json ? info->suites_json : "[]");
            /* the target in its record's form: a record of an older driftbench loses its password here */
            store_q *u = tpl && sui ? sq_prepare(st, "UPDATE runs SET finished_at=NULL, target=?, templates=?, suites=? WHERE id=?", err) : NULL;
            if (!tpl || !sui) drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory resuming run %s", info->label);
            rc = SQ_ERROR;
            if (u) {
                sq_bind_text(u, 1, target);
                sq_bind_text(u, 2, tpl);
                sq_bind_text(u, 3, sui);
                sq_bind_int64(u, 4, id);
                rc = sq_step(u);
                sq_done(u);
                if (rc != SQ_DONE) store_db_error(st, err, "resuming a run");
            }
            free(tpl);
            free(sui);
            if (rc == SQ_DONE && st->version >= 3 && store_endpoint_note(st, id, old.target, old.started_at, target, err))
                rc = SQ_ERROR;
            free(old_ident);
            drift_run_info_clear(&old);
            if (rc != SQ_DONE) goto fail;
            *run_id = id;
            if (resumed) *resumed = 1;
            if ((ds = store_tx_commit(st, err)) && lock_taken && st->kind == STORE_PG)
                store_pg_lock_release(st, info->label);
            free(ident);
            return ds;
        }
        free(old_ident);
        drift_run_info_clear(&old);
        goto fail;
    }
    sq_done(s);
    if (rc != SQ_DONE) {
        store_db_error(st, err, "reading runs");
        goto fail;
    }
    {
        char now[32];
        util_utc_iso(now);
        char *cfg = json_canonical(info->config_json), *dec = json_canonical(info->decoding_json);
        store_q *ins =
            sq_prepare(st,
                         "INSERT INTO runs(label,target,config,decoding,templates,suites,tool_version,"
                         "started_at) VALUES(?,?,?,?,?,?,?,?) RETURNING id",
                         err);
        if (!ins || !cfg || !dec) {
            free(cfg);
            free(dec);
            sq_done(ins);
            if (ins) drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory creating run %s", info->label);
            goto fail;
        }
        sq_bind_text(ins, 1, info->label);
        sq_bind_text(ins, 2, target);
        sq_bind_text(ins, 3, cfg);
        sq_bind_text(ins, 4, dec);
        sq_bind_text(ins, 5, info->templates_json ? info->templates_json : "{}");
        sq_bind_text(ins, 6, info->suites_json ? info->suites_json : "[]");
        sq_bind_text(ins, 7, info->tool_version ? info->tool_version : drift_version());
        sq_bind_text(ins, 8, now);
        rc = sq_step(ins);
        if (rc == SQ_ROW) *run_id = sq_int64(ins, 0);
        else store_db_error(st, err, "creating a run");
        sq_done(ins);
        free(cfg);
        free(dec);
        if (rc != SQ_ROW) goto fail;
        if (st->version >= 3 && store_endpoint_note(st, *run_id, NULL, NULL, target, err)) goto fail;
    }
    free(ident);
    if ((ds = store_tx_commit(st, err)) && lock_taken && st->kind == STORE_PG) store_pg_lock_release(st, info->label);
    return ds;
fail:
    free(ident);
    store_tx_rollback(st);
    if (lock_taken && st->kind == STORE_PG) store_pg_lock_release(st, info->label); /* a row lock rolls back by itself */
    return err && err->code ? err->code : DRIFT_ERR_STORE;
}

drift_status drift_store_run_begin(drift_store *st, const drift_run_info *info, int64_t *run_id, int *resumed,
                                   drift_error *err) {
    if (!info->label || !*info->label) return drift_error_set(err, DRIFT_ERR_INVALID, "run label is empty");
    if (resumed) *resumed = 0;
    /* the record's target: no secrets, no credential parameters (see the top) */
    char *target = util_target_record(info->target ? info->target : "");
    if (!target) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory beginning run %s", info->label);
    drift_status ds = run_begin(st, info, target, run_id, resumed, err);
    free(target);
    return ds;
}

#define FREE_LABEL_TRIES 1000

drift_status drift_store_run_begin_free(drift_store *st, const drift_run_info *info, char *label, size_t cap,
                                        int64_t *run_id, int *resumed, drift_error *err) {
    if (!info->label || !*info->label) return drift_error_set(err, DRIFT_ERR_INVALID, "run label is empty");
    drift_run_info try = *info;
    for (int k = 1; k <= FREE_LABEL_TRIES; k++) {
        if (k == 1) snprintf(label, cap, "%s", info->label);
        else snprintf(label, cap, "%s-%d", info->label, k);
        try.label = label;
        drift_error e = {0};
        drift_status ds = drift_store_run_begin(st, &try, run_id, resumed, &e);
        if (ds != DRIFT_ERR_MISMATCH) {
            if (ds && err) *err = e;
            return ds;
        }
    }
    return drift_error_set(err, DRIFT_ERR_MISMATCH, "%s: runs '%s' to '%s-%d' all exist with other settings; give a label",
                           st->shown, info->label, info->label, FREE_LABEL_TRIES);
}

drift_status drift_store_run_finish(drift_store *st, int64_t run_id, drift_error *err) {
    char now[32];
    util_utc_iso(now);
    store_q *s = sq_prepare(st, "UPDATE runs SET finished_at=? WHERE id=?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_text(s, 1, now);
    sq_bind_int64(s, 2, run_id);
    int rc = sq_step(s);
    long changed = rc == SQ_DONE ? sq_changes(s) : 0;
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "finishing a run");
    if (changed == 0)
        return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no run with id %lld", st->shown, (long long)run_id);
    if (!st->holds_locks) return DRIFT_OK;
    s = sq_prepare(st, "DELETE FROM run_locks WHERE token=? AND label=(SELECT label FROM runs WHERE id=?)", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_text(s, 1, st->token);
    sq_bind_int64(s, 2, run_id);
    rc = sq_step(s);
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "releasing the run lock");
    if (st->kind == STORE_PG) { /* the advisory lock of the run's label */
        s = sq_prepare(st, "SELECT label FROM runs WHERE id=?", err);
        if (!s) return store_err_code(err);
        sq_bind_int64(s, 1, run_id);
        if (sq_step(s) == SQ_ROW && sq_text(s, 0)) store_pg_lock_release(st, sq_text(s, 0));
        sq_done(s);
    }
    return DRIFT_OK;
}

/* ---- responses ---- */

/* Logprobs are one zstd frame of the JSON text. *blob malloc'd (NULL for
 * NULL json); DRIFT_ERR_NOMEM / DRIFT_ERR_INTERNAL. */
static drift_status logprobs_pack(drift_store *st, const char *json, void **blob, size_t *len) {
    *blob = NULL;
    *len = 0;
    if (!json) return DRIFT_OK;
    if (!st->zc && !(st->zc = ZSTD_createCCtx())) return DRIFT_ERR_NOMEM;
    size_t n = strlen(json);
    size_t cap = ZSTD_compressBound(n);
    void *b = malloc(cap ? cap : 1);
    if (!b) return DRIFT_ERR_NOMEM;
    size_t z = ZSTD_compressCCtx(st->zc, b, cap, json, n, 3);
    if (ZSTD_isError(z)) {
        free(b);
        return DRIFT_ERR_INTERNAL;
    }
    *blob = b;
    *len = z;
    return DRIFT_OK;
}

/* Decompresses a logprobs blob; NULL on absent or corrupt data (*bad set). */
static char *logprobs_unpack(const void *blob, size_t len, int *bad) {
    *bad = 0;
    if (!blob || len == 0) return NULL;
    unsigned long long n = ZSTD_getFrameContentSize(blob, len);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (1ull << 31)) {
        *bad = 1;
        return NULL;
    }
    char *out = malloc((size_t)n + 1);
    if (!out) return NULL;
    size_t got = ZSTD_decompress(out, (size_t)n, blob, len);
    if (ZSTD_isError(got) || got != n) {
        free(out);
        *bad = 1;
        return NULL;
    }
    out[n] = '\0';
    return out;
}

drift_status drift_store_put_responses(drift_store *st, int64_t run_id, const drift_answer *r, size_t n,
                                       drift_error *err) {
    if (n == 0) return DRIFT_OK;
    char now[32];
    util_utc_iso(now);
    drift_status ds = store_tx_begin(st, err);
    if (ds) return ds;
    sq_pipeline_begin(st);
    for (size_t i = 0; i < n; i++) {
        const drift_answer *x = &r[i];
        store_q *s = sq_cached(
            st, STORE_STMT_PUT_RESPONSE,
            "INSERT INTO responses(run_id,prompt_rowid,replicate,text,prompt_tokens,completion_tokens,"
            "finish_reason,latency_ms,logprobs,error,http_status,attempts,created_at,failed) "
            "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,CASE WHEN ?10 IS NULL THEN 0 ELSE 1 END) "
            "ON CONFLICT(run_id,prompt_rowid,replicate) DO UPDATE SET text=excluded.text,failed=excluded.failed,"
            "prompt_tokens=excluded.prompt_tokens,completion_tokens=excluded.completion_tokens,"
            "finish_reason=excluded.finish_reason,latency_ms=excluded.latency_ms,logprobs=excluded.logprobs,"
            "error=excluded.error,http_status=excluded.http_status,attempts=excluded.attempts,"
            "created_at=excluded.created_at WHERE responses.failed <> 0",
            err);
        if (!s) goto fail;
        /* An answer is the text; an error row never carries text. */
        const char *text = x->error ? NULL : (x->text ? x->text : "");
        void *blob = NULL;
        size_t blen = 0;
        if (!x->error && logprobs_pack(st, x->logprobs_json, &blob, &blen)) {
            drift_error_set(err, DRIFT_ERR_NOMEM, "compressing logprobs");
            goto fail;
        }
        sq_bind_int64(s, 1, run_id);
        sq_bind_int64(s, 2, x->prompt_rowid);
        sq_bind_int64(s, 3, x->replicate);
        sq_bind_bytes_text(s, 4, text);
        if (x->prompt_tokens >= 0) sq_bind_int64(s, 5, x->prompt_tokens);
        if (x->completion_tokens >= 0) sq_bind_int64(s, 6, x->completion_tokens);
        sq_bind_text(s, 7, x->finish_reason);
        sq_bind_double(s, 8, x->latency_ms);
        if (blob) sq_bind_blob(s, 9, blob, blen);
        sq_bind_bytes_text(s, 10, x->error);
        sq_bind_int64(s, 11, x->http_status);
        sq_bind_int64(s, 12, x->attempts);
        sq_bind_text(s, 13, now);
        int rc = sq_step(s);
        sq_reset(s);
        free(blob);
        if (rc != SQ_DONE) {
            drift_error_set(err, DRIFT_ERR_STORE, "%s: storing the response to prompt row %lld replicate %d: %s",
                            st->shown, (long long)x->prompt_rowid, x->replicate, sq_errmsg(st));
            goto fail;
        }
    }
    long bad = -1;
    if (sq_pipeline_end(st, &bad, NULL)) {
        const drift_answer *x = bad >= 0 && (size_t)bad < n ? &r[bad] : NULL;
        if (x)
            drift_error_set(err, DRIFT_ERR_STORE, "%s: storing the response to prompt row %lld replicate %d: %s",
                            st->shown, (long long)x->prompt_rowid, x->replicate, sq_errmsg(st));
        else
            store_db_error(st, err, "storing responses");
        goto fail;
    }
    return store_tx_commit(st, err);
fail:
    return store_pipeline_abort(st, err);
}

typedef struct {
    int64_t prompt;
    int rep;
} pair_key;

static int pair_cmp(const void *a, const void *b) {
    const pair_key *x = a, *y = b;
    if (x->prompt != y->prompt) return x->prompt < y->prompt ? -1 : 1;
    return (x->rep > y->rep) - (x->rep < y->rep);
}

drift_status drift_store_pending(drift_store *st, int64_t run_id, const int64_t *prompt_rowids, size_t n_prompts,
                                 int replicates, int64_t **out_prompts, int **out_replicates, size_t *n_out,
                                 drift_error *err) {
    *out_prompts = NULL;
    *out_replicates = NULL;
    *n_out = 0;
    if (replicates < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "replicates must be >= 1 (got %d)", replicates);
    store_q *s = sq_prepare(
        st, "SELECT prompt_rowid, replicate FROM responses WHERE run_id=? AND failed = 0 ORDER BY 1,2", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, run_id);
    pair_key *done = NULL;
    size_t nd = 0, cap = 0;
    int rc;
    while ((rc = sq_step(s)) == SQ_ROW) {
        if (nd == cap) {
            cap = cap ? cap * 2 : 1024;
            pair_key *nn = realloc(done, cap * sizeof *done);
            if (!nn) {
                free(done);
                sq_done(s);
                return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading responses");
            }
            done = nn;
        }
        done[nd].prompt = sq_int64(s, 0);
        done[nd].rep = sq_int(s, 1);
        nd++;
    }
    sq_done(s);
    if (rc != SQ_DONE) {
        free(done);
        return store_db_error(st, err, "reading responses");
    }
    size_t total = n_prompts * (size_t)replicates;
    int64_t *op = malloc((total ? total : 1) * sizeof *op);
    int *orp = malloc((total ? total : 1) * sizeof *orp);
    if (!op || !orp) {
        free(op);
        free(orp);
        free(done);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n_prompts; i++)
        for (int r = 0; r < replicates; r++) {
            pair_key key = {prompt_rowids[i], r};
            if (nd && bsearch(&key, done, nd, sizeof *done, pair_cmp)) continue;
            op[k] = prompt_rowids[i];
            orp[k] = r;
            k++;
        }
    free(done);
    *out_prompts = op;
    *out_replicates = orp;
    *n_out = k;
    return DRIFT_OK;
}

/* ---- single responses and unscored batches ---- */

/* See store_internal.h. */
drift_status store_answer_from_row(store_q *s, drift_answer *r, drift_prompt *p) {
    memset(r, 0, sizeof *r);
    r->id = sq_int64(s, 0);
    r->prompt_rowid = sq_int64(s, 1);
    r->replicate = sq_int(s, 2);
    r->text = store_col_strdup(s, 3);
    r->prompt_tokens = sq_is_null(s, 4) ? -1 : sq_int(s, 4);
    r->completion_tokens = sq_is_null(s, 5) ? -1 : sq_int(s, 5);
    r->finish_reason = store_col_strdup(s, 6);
    r->latency_ms = sq_double(s, 7);
    int bad = 0;
    r->logprobs_json = logprobs_unpack(sq_blob(s, 8), (size_t)sq_bytes(s, 8), &bad);
    r->error = store_col_strdup(s, 9);
    r->http_status = sq_int(s, 10);
    r->attempts = sq_int(s, 11);
    int oom = (!sq_is_null(s, 3) && !r->text) ||
              (!sq_is_null(s, 9) && !r->error);
    if (p) {
        memset(p, 0, sizeof *p);
        p->prompt_id = store_col_strdup(s, 12);
        p->workload = drift_workload_parse(sq_text(s, 13));
        p->input = store_col_strdup(s, 14);
        p->reference_json = store_col_strdup(s, 15);
        p->hash = store_col_strdup(s, 16);
        if (!p->prompt_id || !p->input || !p->reference_json || !p->hash) oom = 1;
    }
    if (oom) {
        drift_answer_clear(r);
        if (p) drift_prompt_clear(p);
        return DRIFT_ERR_NOMEM;
    }
    return bad ? DRIFT_ERR_STORE : DRIFT_OK;
}

drift_status drift_store_response_get(drift_store *st, int64_t response_id, drift_answer *out,
                                      drift_prompt *prompt_out, drift_error *err) {
    memset(out, 0, sizeof *out);
    if (prompt_out) memset(prompt_out, 0, sizeof *prompt_out);
    store_q *s = sq_prepare(
        st, "SELECT " STORE_RESP_COLS " FROM responses r JOIN prompts p ON p.id = r.prompt_rowid WHERE r.id = ?", err);
    if (!s) return err ? err->code : DRIFT_ERR_STORE;
    sq_bind_int64(s, 1, response_id);
    int rc = sq_step(s);
    drift_status ds;
    if (rc == SQ_ROW) {
        ds = store_answer_from_row(s, out, prompt_out);
        if (ds == DRIFT_ERR_NOMEM)
            drift_error_set(err, ds, "out of memory reading response %lld", (long long)response_id);
        else if (ds) {
            drift_error_set(err, ds, "%s: response %lld has corrupt logprobs data", st->shown,
                            (long long)response_id);
            drift_answer_clear(out);
            if (prompt_out) drift_prompt_clear(prompt_out);
        }
    } else if (rc == SQ_DONE) {
        ds = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: no response with id %lld", st->shown,
                             (long long)response_id);
    } else {
        ds = store_db_error(st, err, "reading a response");
    }
    sq_done(s);
    return ds;
}

/* See suite.h. */

/* ---- whole-store counts ---- */

drift_status drift_store_count_outcomes(drift_store *st, drift_store_outcomes *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    store_q *s = sq_prepare(st,
                                         "SELECT p.workload, r.failed, count(*) FROM responses r JOIN prompts p "
                                         "ON p.id = r.prompt_rowid GROUP BY p.workload, r.failed",
                                         err);
    if (!s) return store_err_code(err);
    int rc;
    while ((rc = sq_step(s)) == SQ_ROW) {
        drift_workload w = drift_workload_parse(sq_text(s, 0));
        if (w == DRIFT_WL_UNKNOWN) continue;
        size_t n = (size_t)sq_int64(s, 2);
        if (sq_int(s, 1)) out->errors[w] += n;
        else out->answers[w] += n;
    }
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "counting answers");
    s = sq_prepare(st,
                           "SELECT p.workload, substr(r.error, 1, 190), count(*) AS c FROM responses r JOIN prompts p "
                           "ON p.id = r.prompt_rowid WHERE r.failed = 1 GROUP BY 1, 2 ORDER BY c DESC",
                           err);
    if (!s) return store_err_code(err);
    while ((rc = sq_step(s)) == SQ_ROW) {
        drift_workload w = drift_workload_parse(sq_text(s, 0));
        const char *e = sq_text(s, 1);
        if (w == DRIFT_WL_UNKNOWN || out->common_error[w][0] || !e) continue;
        snprintf(out->common_error[w], sizeof out->common_error[w], "%s", e);
    }
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "counting errors");
    return DRIFT_OK;
}

drift_status drift_store_count_run(drift_store *st, const char *label, drift_store_run_counts *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    store_q *s = sq_prepare(st,
                                         "SELECT p.workload, r.failed, count(*), "
                                         "coalesce(sum(CASE WHEN r.failed = 0 AND r.finish_reason = 'length' THEN 1 ELSE 0 END), 0) "
                                         "FROM responses r JOIN prompts p ON p.id = r.prompt_rowid "
                                         "JOIN runs u ON u.id = r.run_id WHERE u.label = ? GROUP BY 1, 2",
                                         err);
    if (!s) return store_err_code(err);
    sq_bind_text(s, 1, label);
    int rc;
    while ((rc = sq_step(s)) == SQ_ROW) {
        drift_workload w = drift_workload_parse(sq_text(s, 0));
        if (w == DRIFT_WL_UNKNOWN) continue;
        size_t n = (size_t)sq_int64(s, 2);
        if (sq_int(s, 1)) out->errors[w] += n;
        else out->answers[w] += n;
        out->cut[w] += (size_t)sq_int64(s, 3);
    }
    sq_done(s);
    if (rc != SQ_DONE) return store_db_error(st, err, "counting a run's answers");
    return DRIFT_OK;
}

drift_status drift_store_completion_tokens(drift_store *st, int64_t *tokens, drift_error *err) {
    *tokens = 0;
    store_q *s = sq_prepare(
        st, "SELECT coalesce(sum(completion_tokens),0) FROM responses WHERE failed=0 AND completion_tokens > 0", err);
    if (!s) return store_err_code(err);
    int rc = sq_step(s);
    if (rc == SQ_ROW) *tokens = sq_int64(s, 0);
    sq_done(s);
    if (rc != SQ_ROW) return store_db_error(st, err, "counting tokens");
    return DRIFT_OK;
}

drift_status drift_store_response_times(drift_store *st, int64_t run_id, drift_response_time **out, size_t *n,
                                        drift_error *err) {
    *out = NULL;
    *n = 0;
    store_q *s = sq_prepare(st,
                            "SELECT prompt_rowid, created_at FROM responses WHERE run_id = ?1 AND replicate = 0 "
                            "ORDER BY prompt_rowid",
                            err);
    if (!s) return store_err_code(err);
    sq_bind_int64(s, 1, run_id);
    size_t cap = 0;
    int rc;
    while ((rc = sq_step(s)) == SQ_ROW) {
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 256;
            drift_response_time *nr = realloc(*out, nc * sizeof *nr);
            if (!nr) {
                sq_done(s);
                free(*out);
                *out = NULL;
                *n = 0;
                return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            }
            *out = nr;
            cap = nc;
        }
        drift_response_time *r = &(*out)[(*n)++];
        r->prompt_rowid = sq_int64(s, 0);
        r->unix_s = -1;
        const char *t = sq_text(s, 1);
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        if (t && sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                        &tm.tm_sec) == 6) {
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            r->unix_s = (int64_t)timegm(&tm);
        }
    }
    sq_done(s);
    if (rc != SQ_DONE) {
        free(*out);
        *out = NULL;
        *n = 0;
        return store_db_error(st, err, "reading the answers' times");
    }
    return DRIFT_OK;
}
