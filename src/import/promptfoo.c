/* promptfoo.c - promptfoo's `eval -o results.json` as one run per provider.
 *
 * The file (promptfoo 0.121's EvaluateSummaryV3 under "results"):
 *   {"evalId":.., "results": {"version": 3, "timestamp":.., "prompts": [..],
 *     "results": [ one per (prompt template x provider x test case):
 *        {"provider": {"id":..,"label":..} (older: a string),
 *         "prompt": {"raw": rendered text, "label": template}, "promptId": hash of the template,
 *         "promptIdx": index into results.prompts (one entry per template AND provider),
 *         "testIdx": index of the test case, "testCase": {"description","vars","assert","metadata"},
 *         "vars": {..}, "response": {"output": text or JSON, "tokenUsage": {"prompt","completion"}},
 *         "error": text or null, "failureReason": 0 none, 1 assertion, 2 error,
 *         "success": bool, "score": number, "gradingResult": {"pass","score","reason",..},
 *         "latencyMs": number}],
 *     "stats": {..}},
 *   "config": {"description":.., "providers":.., "prompts":.., "tests":..}, ...}
 * A run is a provider (its label, else its id). A prompt is a test case of
 * a template: id "<testIdx>", or "<testIdx>@<promptId's first 8 bytes>"
 * when the file has several templates (cut back to a character boundary, so
 * the id stays valid UTF-8); files without testIdx number the test cases by
 * their vars, in the order they first appear (looked up by the vars'
 * canonical JSON in a hash table: linear in the results, not quadratic;
 * bench/promptfoo_import.c). The verdict is "success";
 * failureReason 2 (or an error without an output) is a failed request.
 * The workload comes from --workload, else the test's metadata or vars
 * "workload"; a math test's vars "answer", a code test's vars prompt, test
 * and entry_point let our evaluators judge it too. */
#include <stdlib.h>
#include <string.h>

#include "import/import_internal.h"
#include "util/util.h"

typedef struct {
    const char *name;
    const drift_import_opts *o;
    drift_import_set *out;
    char *suite;
    int many_templates;
    json_t *vars_seen;      /* files without testIdx: canonical vars JSON -> test index */
} pf;

/* The provider's key: label, else id, else the string itself. */
static const char *provider_key(json_t *prov) {
    if (json_is_string(prov)) return json_string_value(prov);
    if (!json_is_object(prov)) return NULL;
    json_t *l = json_object_get(prov, "label");
    if (json_is_string(l) && json_string_length(l)) return json_string_value(l);
    json_t *id = json_object_get(prov, "id");
    return json_is_string(id) ? json_string_value(id) : NULL;
}

static drift_import_run *run_for(pf *P, json_t *prov, const char *key, drift_error *err) {
    for (size_t i = 0; i < P->out->n; i++)
        if (!strcmp(P->out->runs[i].label, key)) return &P->out->runs[i];
    drift_import_run *r = import_run_add(P->out);
    if (!r) {
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    json_t *id = json_is_object(prov) ? json_object_get(prov, "id") : prov;
    json_t *dec = json_pack("{s:s, s:s, s:O?}", "source", "promptfoo", "provider", key, "provider_id",
                            json_is_string(id) ? id : NULL);
    r->source = util_strdup(P->name);
    r->label = util_strdup(key);
    r->model = util_strdup(json_is_string(id) ? json_string_value(id) : key);
    r->framework = util_strdup("promptfoo");
    r->suite = util_strdup(P->suite);
    r->evaluator = util_strdup("promptfoo");
    r->decoding_json = dec ? import_json_canonical(dec) : NULL;
    json_decref(dec);
    if (!r->source || !r->label || !r->model || !r->framework || !r->suite || !r->evaluator || !r->decoding_json) {
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return r;
}

/* The test's index: testIdx, else the position of its vars among those
 * seen (one hash lookup of the vars' canonical JSON). -1 when testIdx is
 * not an index, -2 when out of memory. */
static long test_index(pf *P, json_t *res, json_t *vars) {
    json_t *ti = json_object_get(res, "testIdx");
    if (json_is_integer(ti)) return json_integer_value(ti) >= 0 ? (long)json_integer_value(ti) : -1;
    if (ti) return -1;
    char *key = vars ? import_json_canonical(vars) : util_strdup("null");
    if (!key) return -2;
    json_t *seen = json_object_get(P->vars_seen, key);
    long idx = json_is_integer(seen) ? (long)json_integer_value(seen) : (long)json_object_size(P->vars_seen);
    if (!seen && json_object_set_new(P->vars_seen, key, json_integer(idx))) idx = -2;
    free(key);
    return idx;
}

/* Bytes of s's first at most max bytes that end on a character boundary
 * (s is valid UTF-8: jansson checked it). */
static int utf8_prefix(const char *s, int max) {
    int n = 0;
    while (n < max && s[n]) n++;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* s[n] continues a character: cut before it */
    return n;
}

/* The workload of a result: --workload, else metadata / vars "workload". */
static drift_workload result_workload(pf *P, json_t *tc, json_t *vars) {
    if (P->o->workload != DRIFT_WL_UNKNOWN) return P->o->workload;
    json_t *w = json_object_get(json_object_get(tc, "metadata"), "workload");
    if (!json_is_string(w)) w = json_object_get(vars, "workload");
    return json_is_string(w) ? drift_workload_parse(json_string_value(w)) : DRIFT_WL_UNKNOWN;
}

/* reference (and whether ours can judge) from the test's vars. */
static json_t *result_reference(drift_workload wl, json_t *vars, int *ours) {
    json_t *ref = json_object();
    *ours = 0;
    if (!ref) return NULL;
    if (wl == DRIFT_WL_MATH) {
        json_t *a = json_object_get(vars, "answer");
        char num[64] = "";
        if (json_is_string(a) && json_string_length(a) < sizeof num) snprintf(num, sizeof num, "%s", json_string_value(a));
        else if (json_is_integer(a)) snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(a));
        else if (json_is_real(a)) snprintf(num, sizeof num, "%.17g", json_real_value(a));
        if (num[0]) *ours = json_object_set_new(ref, "answer", json_string(num)) == 0;
    } else if (wl == DRIFT_WL_CODE) {
        *ours = import_code_reference(vars, ref) == 1;
    }
    if (!*ours && vars) json_object_set(ref, "vars", vars);
    return ref;
}

static drift_status do_result(pf *P, size_t idx, json_t *res, drift_error *err) {
    if (!json_is_object(res))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: not an object", P->name, idx);
    json_t *prov = json_object_get(res, "provider");
    const char *key = provider_key(prov);
    if (!key || !*key)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: field provider: no label or id", P->name, idx);
    json_t *prompt = json_object_get(res, "prompt");
    json_t *raw = json_object_get(prompt, "raw");
    if (!json_is_string(raw))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: field prompt.raw: missing or not a string",
                               P->name, idx);
    json_t *tc = json_object_get(res, "testCase");
    json_t *vars = json_object_get(res, "vars");
    if (!vars) vars = json_object_get(tc, "vars");
    if (vars && !json_is_object(vars))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: field vars: not an object", P->name, idx);
    long ti = test_index(P, res, vars);
    if (ti == -2) return drift_error_set(err, DRIFT_ERR_NOMEM, "%s: results[%zu]: out of memory", P->name, idx);
    if (ti < 0)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: field testIdx: not an index", P->name, idx);
    json_t *pid = json_object_get(res, "promptId");
    if (P->many_templates && !(json_is_string(pid) && json_string_length(pid) >= 8))
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "%s: results[%zu]: field promptId: missing (the file has several prompts)", P->name, idx);
    json_t *succ = json_object_get(res, "success");
    if (!json_is_boolean(succ))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: field success: missing or not a boolean",
                               P->name, idx);
    json_t *fr = json_object_get(res, "failureReason"), *errj = json_object_get(res, "error");
    json_t *resp = json_object_get(res, "response");
    json_t *output = json_object_get(resp, "output");
    json_t *rerr = json_object_get(resp, "error");
    int failed = (json_is_integer(fr) && json_integer_value(fr) == 2) ||
                 (!output && ((json_is_string(errj) && json_string_length(errj)) || json_is_string(rerr)));
    if (!failed && (!output || json_is_null(output)))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%zu]: field response.output: missing", P->name, idx);
    drift_workload wl = result_workload(P, tc, vars);
    if (wl == DRIFT_WL_UNKNOWN)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "%s: results[%zu]: no workload: give --workload (math, code, safety, chat, "
                               "long_context) or a test metadata \"workload\"",
                               P->name, idx);
    drift_import_run *r = run_for(P, prov, key, err);
    if (!r) return DRIFT_ERR_NOMEM;
    char id[64];
    if (P->many_templates)
        snprintf(id, sizeof id, "%ld@%.*s", ti, utf8_prefix(json_string_value(pid), 8), json_string_value(pid));
    else
        snprintf(id, sizeof id, "%ld", ti);
    drift_import_sample *p = import_sample_add(r);
    if (!p) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    p->where = (long)idx;
    p->workload = wl;
    p->prompt_id = util_strdup(id);
    p->input = util_strdup(json_string_value(raw));
    if (failed) {
        const char *why = json_is_string(errj) ? json_string_value(errj)
                          : json_is_string(rerr) ? json_string_value(rerr)
                                                 : "promptfoo recorded an error";
        p->error = util_asprintf("promptfoo: %s", why);
        p->verdict = DRIFT_LABEL_ERROR;
    } else {
        p->answer = json_is_string(output) ? util_strdup(json_string_value(output)) : import_json_canonical(output);
        p->verdict = json_is_true(succ) ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL;
    }
    json_t *score = json_object_get(res, "score");
    p->value = json_is_number(score) ? json_number_value(score) : json_is_true(succ);
    json_t *lat = json_object_get(res, "latencyMs");
    if (json_is_number(lat) && json_number_value(lat) >= 0) p->latency_ms = json_number_value(lat);
    json_t *tu = json_object_get(resp, "tokenUsage");
    json_t *pt = json_object_get(tu, "prompt"), *ct = json_object_get(tu, "completion");
    if (json_is_integer(pt) && json_integer_value(pt) >= 0 && json_integer_value(pt) < (1 << 30))
        p->prompt_tokens = (int)json_integer_value(pt);
    if (json_is_integer(ct) && json_integer_value(ct) >= 0 && json_integer_value(ct) < (1 << 30))
        p->completion_tokens = (int)json_integer_value(ct);
    json_t *gr = json_object_get(res, "gradingResult");
    json_t *det = json_pack("{s:O?, s:O?, s:O?}", "reason", json_object_get(gr, "reason"), "description",
                            json_object_get(tc, "description"), "score", score);
    import_sandbox_detail(det, wl, "promptfoo's own (not DriftBench's)");
    p->detail_json = det ? import_json_canonical(det) : NULL;
    json_decref(det);
    int ours = 0;
    json_t *ref = result_reference(wl, vars, &ours);
    p->ours = ours;
    int bad = !ref || !p->prompt_id || !p->input || (!p->answer && !p->error) || !p->detail_json ||
              import_sample_finish(p, ref);
    json_decref(ref);
    return bad ? drift_error_set(err, DRIFT_ERR_NOMEM, "%s: results[%zu]: out of memory", P->name, idx) : DRIFT_OK;
}

static int cmp_where_id(const void *a, const void *b) {
    const drift_import_sample *x = *(const drift_import_sample *const *)a, *y = *(const drift_import_sample *const *)b;
    int c = strcmp(x->prompt_id, y->prompt_id);
    return c ? c : (x->where > y->where) - (x->where < y->where);
}

/* A test of a provider twice is an error naming both results. */
static drift_status check_duplicates(const pf *P, drift_error *err) {
    for (size_t k = 0; k < P->out->n; k++) {
        const drift_import_run *r = &P->out->runs[k];
        const drift_import_sample **v = malloc((r->n ? r->n : 1) * sizeof *v);
        if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < r->n; i++) v[i] = &r->samples[i];
        qsort(v, r->n, sizeof *v, cmp_where_id);
        drift_status rc = DRIFT_OK;
        for (size_t i = 1; i < r->n && !rc; i++)
            if (!strcmp(v[i]->prompt_id, v[i - 1]->prompt_id))
                rc = drift_error_set(err, DRIFT_ERR_PARSE,
                                     "%s: results[%ld]: test %s of provider %s appears twice (first at results[%ld])",
                                     P->name, v[i]->where, v[i]->prompt_id, r->label, v[i - 1]->where);
        free(v);
        if (rc) return rc;
    }
    return DRIFT_OK;
}

drift_status import_parse_promptfoo(const char *name, const char *data, size_t len, const drift_import_opts *o,
                                    drift_import_set *out, drift_error *err) {
    json_error_t je;
    json_t *root = json_loadb(data, len, 0, &je);
    if (!root)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: not JSON (%s)", name, je.line, je.text);
    pf P = {.name = name, .o = o, .out = out, .vars_seen = json_object()};
    drift_status rc = DRIFT_OK;
    json_t *res = json_object_get(root, "results");
    json_t *list = json_is_object(res) ? json_object_get(res, "results") : res;
    if (!json_is_array(list)) {
        rc = drift_error_set(err, DRIFT_ERR_PARSE, "%s: field results.results: missing or not an array", name);
        goto done;
    }
    if (json_array_size(list) == 0) {
        rc = drift_error_set(err, DRIFT_ERR_PARSE, "%s: results.results is empty: nothing to import", name);
        goto done;
    }
    json_t *desc = json_object_get(json_object_get(root, "config"), "description");
    P.suite = json_is_string(desc) && json_string_length(desc)
                  ? util_asprintf("promptfoo:%s", json_string_value(desc))
                  : util_strdup("promptfoo");
    if (!P.suite || !P.vars_seen) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* several templates: results of two distinct promptIds */
    const char *first = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        json_t *pid = json_object_get(e, "promptId");
        if (!json_is_string(pid)) continue;
        if (!first) first = json_string_value(pid);
        else if (strcmp(first, json_string_value(pid)) != 0) P.many_templates = 1;
    }
    json_array_foreach(list, i, e) {
        if ((rc = do_result(&P, i, e, err))) break;
    }
    if (!rc) rc = check_duplicates(&P, err);
done:
    free(P.suite);
    json_decref(P.vars_seen);
    json_decref(root);
    return rc;
}
