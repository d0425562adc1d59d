/* import_store.c - parsed imports into the store as runs, all or nothing.
 *
 *   checks      labels distinct and valid UTF-8; runs of one suite cover
 *               the same documents with the same content (this call's runs
 *               pairwise, and against the runs the store already holds),
 *               naming both files and the document; a label the store
 *               already holds must be the same import (below)
 *   private     a temporary store ($TMPDIR/driftbench-import-PID-XXXXXX,
 *   store       below) gets, per run: the prompts (suite, prompt id,
 *               workload, input, reference, hash), the run (target
 *               "import:<framework>:<file>", config, decoding, and in its
 *               templates record {"import":{"bytes":N,"fnv1a64":HEX}}: the
 *               file's size and content hash), the answers (tool errors as
 *               failed requests), the tool's verdicts as scores, then
 *               DriftBench's own evaluators through the caller's scoring
 *               (opts->score: the pipeline's drift_import_score, a
 *               drift_score_run with rescore, so ours is written after the
 *               tool's and is the latest; this layer never calls the
 *               pipeline itself), then the tool's verdicts again where ours cannot
 *               judge (or for every answer with DRIFT_IMPORT_VERDICT_TOOL),
 *               so they are the latest there
 *   merge       drift_store_merge_replace copies the private store into the
 *               caller's in one transaction, deleting first the stored runs
 *               this import replaces: a failure leaves it as it was
 *
 * Re-imports. A label already in the store is the same import when its
 * target names the same framework and file, its templates record the same
 * size and hash, and its config and decoding are the ones this import
 * writes: it is skipped (the merge skips it too). Anything else
 * is refused naming the file and the run: other content at the same path,
 * a run imported from another file, a run imported before the content was
 * recorded (whether it changed cannot be told), a run that was not imported.
 * With opts->replace, an imported run is replaced instead (never one of
 * our own measurements). Why the templates record: the target is printed in
 * reports and the decoding is compared by the flip table (two imports of
 * one task must pair), so neither may hold a per-file hash; no reader of
 * templates looks past its workload keys.
 *
 * The private store. Its directory's name holds the pid; the directory is
 * flock'd while in use and removed (through directory descriptors) when
 * drift_import_store returns. An import killed with SIGKILL leaves it: the
 * next import removes every "driftbench-import-PID-XXXXXX" of $TMPDIR whose
 * process is gone (kill(PID, 0): ESRCH; our own pid: a leftover of an
 * earlier process), that is a directory (not a symlink: O_NOFOLLOW) owned by
 * this user, and whose lock it can take (no live import in another pid
 * namespace holds it); its files are unlinked with unlinkat, never
 * followed, then the directory. As the sandbox cleans its dead dirs.
 *
 * The summary sets the two verdicts side by side per run, read back with
 * drift_store_load_scored before the tool's verdicts are rewritten. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "import/import_internal.h"
#include "util/json_util.h"
#include "util/util.h"

void drift_import_store_opts_default(drift_import_store_opts *o) {
    memset(o, 0, sizeof *o);
    o->verdict = DRIFT_IMPORT_VERDICT_OURS;
}

/* A run of this call with its label. */
typedef struct {
    drift_import_run *run;
    const drift_import_set *set; /* the file it came from */
    const char *label;
    int same;                    /* the store holds this label from the same import: skipped */
    int replace;                 /* the store holds this label from another import: replaced */
} item;

static char *run_config(const drift_import_run *r, const char *spec, drift_error *err) {
    json_t *c = json_pack("{s:s, s:s, s:s, s:s}", "model", r->model, "hardware", "unknown", "precision", "unknown",
                          "framework", r->framework);
    if (!c) {
        drift_error_set(err, DRIFT_ERR_INVALID, "%s: the model name is not valid UTF-8", r->source);
        return NULL;
    }
    char *out = NULL;
    if (!util_config_apply(c, spec, err) && !(out = import_json_canonical(c)))
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    json_decref(c);
    return out;
}

/* 1 when the run's suites_json (a JSON array of strings) holds suite. */
static int run_has_suite(const drift_run_info *ri, const char *suite) {
    json_t *a = ri->suites_json ? json_loads(ri->suites_json, 0, NULL) : NULL;
    int yes = 0;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), suite)) yes = 1;
    json_decref(a);
    return yes;
}

/* The file a stored run was imported from (its target after "import:X:"). */
static const char *stored_source(const drift_run_info *ri) {
    const char *t = ri->target ? ri->target : "";
    if (strncmp(t, "import:", 7) != 0) return t;
    const char *c = strchr(t + 7, ':');
    return c ? c + 1 : t;
}

/* The run's samples by prompt id (sorted index), for lookups by id. */
static int cmp_idx_id(const void *a, const void *b, void *ctx) {
    const drift_import_run *r = ctx;
    return strcmp(r->samples[*(const size_t *)a].prompt_id, r->samples[*(const size_t *)b].prompt_id);
}

static size_t *index_by_id(const drift_import_run *r) {
    size_t *ix = malloc((r->n ? r->n : 1) * sizeof *ix);
    if (!ix) return NULL;
    for (size_t i = 0; i < r->n; i++) ix[i] = i;
    qsort_r(ix, r->n, sizeof *ix, cmp_idx_id, (void *)r);
    return ix;
}

static int find_sample(const drift_import_run *r, const size_t *ix, const char *pid) {
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(r->samples[ix[mid]].prompt_id, pid);
        if (c == 0) return (int)ix[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* Checks run it against the stored run ri of the same suite: the same
 * documents (unless partial) and, once per suite (check_content), the same
 * content as the stored prompts. */
static drift_status check_stored(drift_store *st, const item *it, const drift_run_info *ri, int partial,
                                 int check_content, drift_error *err) {
    drift_scored_set set = {0};
    drift_status rc = drift_store_load_scored(st, ri->id, &set, err);
    if (rc) return rc;
    const drift_import_run *r = it->run;
    char *seen = calloc(r->n ? r->n : 1, 1);
    size_t *ix = index_by_id(r);
    if (!seen || !ix) {
        free(seen);
        free(ix);
        drift_scored_set_clear(&set);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < set.n && !rc; k++) {
        const drift_scored *row = &set.rows[k];
        if (!row->suite || strcmp(row->suite, r->suite) != 0 || row->replicate != 0) continue;
        int i = find_sample(r, ix, row->prompt_id);
        if (i < 0) {
            if (!partial)
                rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                     "%s and %s (stored run %s): document %s of %s is only in %s: the two runs "
                                     "cover different documents (--partial allows it)",
                                     r->source, stored_source(ri), ri->label, row->prompt_id, r->suite,
                                     stored_source(ri));
            continue;
        }
        seen[i] = 1;
        if (!check_content) continue;
        drift_prompt p = {0};
        drift_answer a = {0};
        rc = drift_store_response_get(st, row->response_id, &a, &p, err);
        drift_answer_clear(&a);
        if (!rc && strcmp(p.hash ? p.hash : "", r->samples[i].hash) != 0)
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "%s (line %ld) and %s (stored run %s): document %s of %s differs (content hash "
                                 "%s vs %s): not the same document",
                                 r->source, r->samples[i].where, stored_source(ri), ri->label, row->prompt_id,
                                 r->suite, r->samples[i].hash, p.hash ? p.hash : "");
        drift_prompt_clear(&p);
    }
    for (size_t i = 0; i < r->n && !rc && !partial; i++)
        if (!seen[i])
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "%s and %s (stored run %s): document %s of %s is only in %s (line %ld): the two "
                                 "runs cover different documents (--partial allows it)",
                                 r->source, stored_source(ri), ri->label, r->samples[i].prompt_id, r->suite,
                                 r->source, r->samples[i].where);
    free(seen);
    free(ix);
    drift_scored_set_clear(&set);
    return rc;
}

/* The file content a stored imported run records (its templates'
 * "import": size and hash): 1 when there is one. */
static int stored_content(const drift_run_info *ri, long long *bytes, char hash[17]) {
    json_t *t = ri->templates_json ? json_loads(ri->templates_json, 0, NULL) : NULL;
    json_t *imp = json_object_get(t, "import");
    json_t *b = json_object_get(imp, "bytes"), *h = json_object_get(imp, "fnv1a64");
    int ok = json_is_integer(b) && json_is_string(h) && json_string_length(h) == 16;
    if (ok) {
        *bytes = (long long)json_integer_value(b);
        memcpy(hash, json_string_value(h), 17);
    }
    json_decref(t);
    return ok;
}

/* The run's target: "import:<framework>:<file>" (malloc'd; NULL nomem). */
static char *import_target(const drift_import_run *r) { return util_asprintf("import:%s:%s", r->framework, r->source); }

/* Label it->label is already held by the stored run ri: the same import
 * (it->same), refused, or with replace one to replace (it->replace). See
 * "Re-imports" at the top. */
static drift_status check_reimport(item *it, const drift_run_info *ri, int replace, const char *config,
                                   drift_error *err) {
    const drift_import_run *r = it->run;
    const drift_import_set *set = it->set;
    const char *have_target = ri->target ? ri->target : "";
    if (strncmp(have_target, "import:", 7) != 0)
        return drift_error_set(err, DRIFT_ERR_MISMATCH,
                               "%s: run '%s' is already in the store and was not imported (target %s): give this "
                               "file's run another --label (--replace replaces imported runs only)",
                               r->source, it->label, have_target);
    char *target = import_target(r);
    if (!target) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    int same_file = !strcmp(have_target, target);
    free(target);
    long long bytes = 0;
    char hash[17] = "";
    int recorded = stored_content(ri, &bytes, hash);
    int same_content = same_file && recorded && bytes == (long long)set->file_bytes && !strcmp(hash, set->file_hash);
    char *cfg = same_content ? run_config(r, config, err) : NULL;
    if (same_content && !cfg) return err && err->code ? err->code : DRIFT_ERR_NOMEM;
    int same_record = cfg && !strcmp(cfg, ri->config_json ? ri->config_json : "") &&
                      !strcmp(r->decoding_json, ri->decoding_json ? ri->decoding_json : "");
    free(cfg);
    if (same_content && same_record) {
        it->same = 1;
        return DRIFT_OK;
    }
    if (replace) {
        it->replace = 1;
        return DRIFT_OK;
    }
    if (!same_file)
        return drift_error_set(err, DRIFT_ERR_MISMATCH,
                               "%s: run '%s' is already in the store, imported from %s: give this one another "
                               "--label, or --replace to replace the stored run",
                               r->source, it->label, stored_source(ri));
    if (same_content)
        return drift_error_set(err, DRIFT_ERR_MISMATCH,
                               "%s: run '%s' is already in the store from this file, with another configuration "
                               "(--config, --model) or decoding: --replace replaces it, --label stores this one "
                               "beside it",
                               r->source, it->label);
    if (!recorded)
        return drift_error_set(err, DRIFT_ERR_MISMATCH,
                               "%s: run '%s' is already in the store, imported by a DriftBench that did not record "
                               "the file's content, so whether the file changed cannot be told: --replace replaces "
                               "the stored run with this content",
                               r->source, it->label);
    return drift_error_set(err, DRIFT_ERR_MISMATCH,
                           "%s: the file changed since it was imported as run '%s' (now %zu bytes, content hash %s; "
                           "then %lld bytes, %s): --replace replaces the stored run, --label stores this one "
                           "beside it",
                           r->source, it->label, set->file_bytes, set->file_hash, bytes, hash);
}

static drift_status check_all(drift_store *st, item *items, size_t n, const drift_import_store_opts *o,
                              drift_error *err) {
    int partial = o->partial;
    for (size_t i = 0; i < n; i++)
        if (!import_utf8_ok(items[i].label)) {
            char *shown = import_utf8_shown(items[i].label);
            drift_status rc = drift_error_set(err, DRIFT_ERR_INVALID,
                                              "%s: label '%s' is not valid UTF-8 (the store keeps it as text)",
                                              items[i].run->source, shown ? shown : "?");
            free(shown);
            return rc;
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(items[i].label, items[j].label))
                return drift_error_set(err, DRIFT_ERR_INVALID,
                                       "two runs would be stored as '%s' (%s and %s): give each its own --label",
                                       items[i].label, items[j].run->source, items[i].run->source);
    if (!partial)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (!strcmp(items[i].run->suite, items[j].run->suite)) {
                    drift_status rc = drift_import_check_pair(items[j].run, items[i].run, err);
                    if (rc) return rc;
                    break; /* the first of the suite stands for the others */
                }
    drift_run_info *infos = NULL;
    size_t n_infos = 0;
    drift_status rc = drift_store_run_list(st, &infos, &n_infos, err);
    if (rc) return rc;
    for (size_t i = 0; i < n && !rc; i++)
        for (size_t k = 0; k < n_infos && !rc; k++)
            if (!strcmp(infos[k].label, items[i].label))
                rc = check_reimport(&items[i], &infos[k], o->replace, o->config, err);
    for (size_t i = 0; i < n && !rc; i++) {
        int content_checked = 0;
        for (size_t k = 0; k < n_infos && !rc; k++) {
            const drift_run_info *ri = &infos[k];
            int ours = 0;
            for (size_t j = 0; j < n; j++)
                if (!strcmp(ri->label, items[j].label)) ours = 1;
            if (ours || !run_has_suite(ri, items[i].run->suite)) continue; /* a label of ours: checked above */
            rc = check_stored(st, &items[i], ri, partial, !content_checked, err);
            content_checked = 1;
        }
    }
    drift_run_info_array_free(infos, n_infos);
    return rc;
}

/* The response id of each sample (-1 none) from the private store. */
static drift_status response_ids(drift_store *tmp, int64_t run_id, const int64_t *rowids, size_t n, int64_t *ids,
                                 drift_error *err) {
    drift_scored_set set = {0};
    drift_status rc = drift_store_load_scored(tmp, run_id, &set, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        ids[i] = -1;
        size_t lo = 0, hi = set.n; /* rows are in prompt_rowid order */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (set.rows[mid].prompt_rowid < rowids[i]) lo = mid + 1;
            else hi = mid;
        }
        if (lo < set.n && set.rows[lo].prompt_rowid == rowids[i] && !set.rows[lo].is_error)
            ids[i] = set.rows[lo].response_id;
    }
    drift_scored_set_clear(&set);
    return DRIFT_OK;
}

/* Writes the tool's verdict of the samples (all, or only those ours cannot
 * judge) as scores. */
static drift_status put_tool_scores(drift_store *tmp, const drift_import_run *r, const int64_t *ids, int only_theirs,
                                    drift_error *err) {
    drift_score *sc = calloc(r->n ? r->n : 1, sizeof *sc);
    if (!sc) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
        const drift_import_sample *p = &r->samples[i];
        if (ids[i] < 0 || (only_theirs && p->ours)) continue;
        sc[m++] = (drift_score){.response_id = ids[i], .evaluator = r->evaluator, .label = p->verdict,
                                .value = p->value, .detail_json = p->detail_json};
    }
    drift_status rc = m ? drift_store_put_scores(tmp, sc, m, err) : DRIFT_OK;
    free(sc);
    return rc;
}

/* Counts the two verdicts side by side from the latest scores. */
static drift_status summarize(drift_store *tmp, const item *it, int64_t run_id, const int64_t *rowids,
                              const char *why, drift_import_summary *out, drift_error *err) {
    const drift_import_run *r = it->run;
    memset(out, 0, sizeof *out);
    snprintf(out->label, sizeof out->label, "%s", it->label);
    snprintf(out->evaluator, sizeof out->evaluator, "%s", r->evaluator);
    drift_scored_set set = {0};
    drift_status rc = drift_store_load_scored(tmp, run_id, &set, err);
    if (rc) return rc;
    int any_ours = 0;
    for (size_t i = 0; i < r->n; i++) {
        const drift_import_sample *p = &r->samples[i];
        if (!p->answer) {
            out->errors++;
            continue;
        }
        out->answers++;
        if (p->verdict == DRIFT_LABEL_PASS) out->tool_pass++;
        else if (p->verdict == DRIFT_LABEL_FAIL) out->tool_fail++;
        if (!p->ours) continue;
        any_ours = 1;
        const drift_scored *row = NULL;
        size_t lo = 0, hi = set.n; /* rows are in prompt_rowid order */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (set.rows[mid].prompt_rowid < rowids[i]) lo = mid + 1;
            else hi = mid;
        }
        if (lo < set.n && set.rows[lo].prompt_rowid == rowids[i]) row = &set.rows[lo];
        if (!row || !row->evaluator || !strcmp(row->evaluator, r->evaluator)) continue; /* ours did not run */
        snprintf(out->ours_evaluator, sizeof out->ours_evaluator, "%s", row->evaluator);
        if (row->label != DRIFT_LABEL_PASS && row->label != DRIFT_LABEL_FAIL) {
            out->ours_error++;
            continue;
        }
        out->ours_scored++;
        out->ours_pass += row->label == DRIFT_LABEL_PASS;
        if (row->label == p->verdict) out->agree++;
        else if (p->verdict == DRIFT_LABEL_PASS) out->tool_pass_ours_fail++;
        else out->tool_fail_ours_pass++;
    }
    drift_scored_set_clear(&set);
    if (!any_ours)
        snprintf(out->ours_note, sizeof out->ours_note, "no reference DriftBench's evaluators can use (%s)",
                 r->samples && r->n ? drift_workload_name(r->samples[0].workload) : "empty");
    else if (!out->ours_evaluator[0] && why && why[0])
        snprintf(out->ours_note, sizeof out->ours_note, "%s", why);
    return DRIFT_OK;
}

/* One run into the private store. */
static drift_status store_run(drift_store *tmp, const item *it, const drift_import_store_opts *o,
                              drift_import_summary *sum, drift_error *err) {
    const drift_import_run *r = it->run;
    drift_status rc = DRIFT_OK;
    drift_prompt *pr = calloc(r->n ? r->n : 1, sizeof *pr);
    int64_t *rowids = calloc(r->n ? r->n : 1, sizeof *rowids), *ids = calloc(r->n ? r->n : 1, sizeof *ids);
    drift_answer *ans = calloc(r->n ? r->n : 1, sizeof *ans);
    char *config = NULL, *target = NULL, *suites = NULL, *templates = NULL;
    if (!pr || !rowids || !ids || !ans) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < r->n; i++) {
        const drift_import_sample *p = &r->samples[i];
        pr[i] = (drift_prompt){.prompt_id = p->prompt_id, .workload = p->workload, .input = p->input,
                               .reference_json = p->reference_json, .hash = p->hash};
    }
    drift_suite suite = {.name = r->suite, .source = r->source, .format = r->framework, .prompts = pr, .n = r->n};
    if ((rc = drift_store_put_prompts(tmp, &suite, rowids, err))) goto done;
    json_t *sj = json_pack("[s]", r->suite);
    suites = sj ? import_json_canonical(sj) : NULL;
    json_decref(sj);
    if (!(config = run_config(r, o->config, err))) {
        rc = err && err->code ? err->code : DRIFT_ERR_NOMEM;
        goto done;
    }
    target = import_target(r);
    json_t *tj = json_pack("{s:{s:I, s:s}}", "import", "bytes", (json_int_t)it->set->file_bytes, "fnv1a64",
                           it->set->file_hash);
    templates = tj ? import_json_canonical(tj) : NULL;
    json_decref(tj);
    if (!suites || !target || !templates) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    drift_run_info info = {.label = (char *)it->label, .target = target, .config_json = config,
                           .decoding_json = r->decoding_json, .templates_json = templates, .suites_json = suites,
                           .tool_version = (char *)drift_version()};
    int64_t run_id = 0;
    int resumed = 0;
    if ((rc = drift_store_run_begin(tmp, &info, &run_id, &resumed, err))) goto done;
    for (size_t i = 0; i < r->n; i++) {
        const drift_import_sample *p = &r->samples[i];
        ans[i] = (drift_answer){.prompt_rowid = rowids[i], .text = p->answer, .error = p->error,
                                .prompt_tokens = p->prompt_tokens, .completion_tokens = p->completion_tokens,
                                .latency_ms = p->latency_ms, .attempts = 1};
    }
    if ((rc = drift_store_put_responses(tmp, run_id, ans, r->n, err))) goto done;
    if ((rc = response_ids(tmp, run_id, rowids, r->n, ids, err))) goto done;
    if ((rc = put_tool_scores(tmp, r, ids, 0, err))) goto done;
    int any_ours = 0;
    for (size_t i = 0; i < r->n; i++) any_ours |= r->samples[i].ours && r->samples[i].answer;
    char why[256] = "";
    if (any_ours && !o->score) {
        snprintf(why, sizeof why, "no scoring given to the import (drift_import_store_opts.score)");
        any_ours = 0;
    }
    if (any_ours && (rc = o->score(tmp, it->label, o, why, sizeof why, err))) goto done;
    if (sum && (rc = summarize(tmp, it, run_id, rowids, why, sum, err))) goto done;
    if (any_ours && (rc = put_tool_scores(tmp, r, ids, o->verdict != DRIFT_IMPORT_VERDICT_TOOL, err))) goto done;
    rc = drift_store_run_finish(tmp, run_id, err);
done:
    free(pr);
    free(rowids);
    free(ids);
    free(ans);
    free(config);
    free(target);
    free(suites);
    free(templates);
    return rc;
}

/* ---- the private store's directory (see the top) ---- */

#define PRIVATE_PREFIX "driftbench-import-"

static const char *tmp_root(void) {
    const char *td = getenv("TMPDIR");
    return td && *td ? td : "/tmp";
}

/* "driftbench-import-PID-XXXXXX" -> PID; 0 when name is not one. */
static long private_pid(const char *name) {
    const size_t np = sizeof PRIVATE_PREFIX - 1;
    if (strncmp(name, PRIVATE_PREFIX, np) != 0) return 0;
    char *end;
    long pid = strtol(name + np, &end, 10);
    if (end == name + np || *end != '-' || strlen(end + 1) != 6 || pid <= 0) return 0;
    return pid;
}

/* Removes the private store directory `name` of the directory parent: its
 * entries other than directories are unlinked (a symlink is removed, never
 * followed), then the directory. fd: the directory, opened and locked by
 * the caller, or -1: then it is opened here without following a symlink,
 * and left alone unless it is a directory owned by this user whose lock is
 * free. Closes fd. 0 removed, -1 not. */
static int remove_private_at(int parent, const char *name, int fd) {
    if (fd < 0) {
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -1;
        struct stat sb;
        if (fstat(fd, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() ||
            flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd);
            return -1;
        }
    }
    int dfd = dup(fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d && dfd >= 0) close(dfd);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            struct stat sb;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            if (fstatat(fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(sb.st_mode))
                unlinkat(fd, e->d_name, 0);
        }
        closedir(d);
    }
    int rc = unlinkat(parent, name, AT_REMOVEDIR);
    close(fd); /* drops the lock */
    return rc == 0 ? 0 : -1;
}

/* Removes the private stores that imports killed before they could. */
static void clean_stale(int parent) {
    int dfd = dup(parent);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0) close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = private_pid(e->d_name);
        if (!pid || pid > 0x7fffffffL) continue;
        if (pid != (long)getpid() && !(kill((pid_t)pid, 0) != 0 && errno == ESRCH)) continue;
        remove_private_at(parent, e->d_name, -1);
    }
    closedir(d);
}

/* A fresh private directory under $TMPDIR, locked: *parent (the tmp dir),
 * *fd (the directory), *name (its name, malloc'd) and *db (the store's
 * path, malloc'd). Stale ones are removed first. */
static drift_status private_make(int *parent, int *fd, char **name, char **db, drift_error *err) {
    const char *root = tmp_root();
    *parent = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *fd = -1;
    *name = *db = NULL;
    if (*parent < 0)
        return drift_error_set(err, DRIFT_ERR_IO, "import: cannot open the temporary directory %s: %s", root,
                               strerror(errno));
    clean_stale(*parent);
    char *tmpl = util_asprintf("%s/" PRIVATE_PREFIX "%ld-XXXXXX", root, (long)getpid());
    char *made = tmpl ? mkdtemp(tmpl) : NULL;
    if (!made) {
        int e = errno, nomem = !tmpl;
        free(tmpl);
        close(*parent);
        *parent = -1;
        return nomem ? drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory")
                     : drift_error_set(err, DRIFT_ERR_IO, "import: cannot make a temporary directory under %s: %s",
                                       root, strerror(e));
    }
    *fd = open(made, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const char *base = strrchr(made, '/') + 1;
    if (*fd < 0 || flock(*fd, LOCK_EX) != 0 || !(*name = util_strdup(base)) ||
        !(*db = util_asprintf("%s/import.db", made))) {
        int e = errno;
        if (*fd >= 0) close(*fd);
        unlinkat(*parent, base, AT_REMOVEDIR);
        close(*parent);
        free(*name);
        *name = NULL;
        *fd = *parent = -1;
        drift_error_set(err, DRIFT_ERR_IO, "import: cannot use the temporary directory %s: %s", made, strerror(e));
        free(tmpl);
        return DRIFT_ERR_IO;
    }
    free(tmpl);
    return DRIFT_OK;
}

drift_status drift_import_store(drift_store *st, drift_import_set *const *sets, size_t n_sets,
                                const char *const *labels, size_t n_labels, const drift_import_store_opts *opts,
                                drift_import_summary **summaries, size_t *n_summaries, drift_error *err) {
    drift_import_store_opts def;
    if (!opts) {
        drift_import_store_opts_default(&def);
        opts = &def;
    }
    if (summaries) *summaries = NULL;
    if (n_summaries) *n_summaries = 0;
    if (!st || (!sets && n_sets)) return drift_error_set(err, DRIFT_ERR_INVALID, "import: bad arguments");
    size_t n = 0;
    for (size_t s = 0; s < n_sets; s++) n += sets[s]->n;
    if (n == 0) return drift_error_set(err, DRIFT_ERR_INVALID, "import: no runs to store");
    if (n_labels > n)
        return drift_error_set(err, DRIFT_ERR_INVALID, "import: %zu labels for %zu runs", n_labels, n);
    item *items = calloc(n, sizeof *items);
    drift_import_summary *sums = calloc(n, sizeof *sums);
    if (!items || !sums) {
        free(items);
        free(sums);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t s = 0; s < n_sets; s++)
        for (size_t i = 0; i < sets[s]->n; i++, k++) {
            items[k].run = &sets[s]->runs[i];
            items[k].set = sets[s];
            items[k].label = labels && k < n_labels && labels[k] ? labels[k] : items[k].run->label;
        }
    drift_status rc = check_all(st, items, n, opts, err);
    char *db = NULL, *name = NULL;
    const char **replace = NULL;
    int parent = -1, dir = -1;
    drift_store *tmp = NULL;
    if (rc) goto done;
    if (!(replace = calloc(n, sizeof *replace))) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((rc = private_make(&parent, &dir, &name, &db, err))) goto done;
    if (!(rc = drift_store_open(db, &tmp, err))) {
        for (size_t i = 0; i < n && !rc; i++) {
            rc = store_run(tmp, &items[i], opts, &sums[i], err);
            if (rc) drift_error_prefix(err, "%s: ", items[i].run->source);
        }
        drift_store_close(tmp);
    }
    size_t n_replace = 0;
    for (size_t i = 0; i < n; i++) {
        sums[i].already = items[i].same;
        sums[i].replaced = items[i].replace;
        if (items[i].replace) replace[n_replace++] = items[i].label;
    }
    if (!rc) {
        drift_store_merged m = {0};
        rc = drift_store_merge_replace(st, db, replace, n_replace, &m, err);
    }
    remove_private_at(parent, name, dir);
    close(parent);
done:
    free(db);
    free(name);
    free(replace);
    free(items);
    if (!rc && summaries) {
        *summaries = sums;
        if (n_summaries) *n_summaries = n;
    } else {
        free(sums);
    }
    return rc;
}
