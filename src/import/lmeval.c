/* lmeval.c - lm-evaluation-harness `--log_samples` files as one run.
 *
 * The format (lm_eval/evaluator.py builds each row, lm_eval/loggers/
 * evaluation_tracker.py writes samples_<task>_<date>.jsonl under a directory
 * named after the model): one JSON object per line and per (document,
 * filter) with
 *   doc_id          the document's index in the task's split
 *   doc             the dataset row (GSM8K: question, answer "... #### N";
 *                   HumanEval: task_id, prompt, canonical_solution, test, entry_point)
 *   target          doc_to_target(doc), as a string in recent versions
 *   arguments       the requests: {"gen_args_0": {"arg_0": context, "arg_1": gen_kwargs
 *                   or continuation}, ...}; older versions: [[context, ...], ...]
 *   resps           the raw outputs per request: [["generated text"]] for
 *                   generate_until, [[[loglikelihood, is_greedy]], ...] for choices
 *   filtered_resps  the outputs after the filter ("72", "[invalid]", [-1.2, false], ...)
 *   filter          the filter's name ("strict-match", "flexible-extract", "none")
 *   metrics         the metric names of the row, whose values are top-level keys
 *                   ("exact_match": 1.0, "acc": 0.0, "pass@1": 1.0)
 *   doc_hash, prompt_hash, target_hash   sha256 hex of the doc, the context, the target
 * Older versions lack filter, metrics and the hashes (then every row is
 * filter "none" and the metrics are the keys that are none of the above).
 *
 * One file is one run: the rows of one filter (--filter, else the first in
 * the file) are its samples; the tool's verdict is one pass/fail metric of
 * the row (values true/false or 0/1; anything else is refused, naming the
 * line and the value). The answer kept is the raw generation (resps), so
 * our evaluator extracts on its own; for choice tasks it is the continuation
 * with the highest filtered loglikelihood. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import/import_internal.h"
#include "util/util.h"

/* Keys of a row that are not metrics (older files have no "metrics" list). */
static const char *const BOOKKEEPING[] = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                                          "filter", "metrics", "doc_hash", "prompt_hash", "target_hash",
                                          "task_name", NULL};
/* Metrics tried first, in this order, when none is asked for. */
static const char *const PREFERRED[] = {"exact_match", "acc", "pass@1", "pass_at_1", "em", "accuracy", "correct",
                                        "acc_norm", NULL};

typedef struct {
    const char *name;
    const drift_import_opts *o;
    drift_import_run *run;
    char *task;
    char *filter;           /* the rows kept */
    char *metric;           /* the verdict's metric */
    drift_workload wl;
    int wl_known;
    json_t *gen_kwargs;     /* of the first kept row */
    int unnamed;            /* rows without "filter" (older versions): every filter's block
                               repeats the documents; the first block is kept */
    util_buf other_filters; /* names seen, for the message when --filter matches none */
} lm;

static int is_bookkeeping(const char *k) {
    for (int i = 0; BOOKKEEPING[i]; i++)
        if (!strcmp(BOOKKEEPING[i], k)) return 1;
    return 0;
}

/* The task from "DIR/samples_<task>_<date>.jsonl": the base name without
 * "samples_", ".jsonl" and a trailing "_<digit>..." date. */
static char *task_from_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (!strncmp(b, "samples_", 8)) b += 8;
    size_t n = strlen(b);
    if (n > 6 && !strcmp(b + n - 6, ".jsonl")) n -= 6;
    for (size_t i = n; i-- > 0;)
        if (b[i] == '_' && i + 1 < n && isdigit((unsigned char)b[i + 1])) {
            n = i;
            break;
        }
    return n ? util_strndup(b, n) : util_strdup("unknown");
}

/* The directory the harness names after the model (model_name_sanitized). */
static char *model_from_name(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return util_strdup("unknown");
    const char *start = slash;
    while (start > path && start[-1] != '/') start--;
    if (slash - start == 0 || (slash - start == 1 && *start == '.')) return util_strdup("unknown");
    return util_strndup(start, (size_t)(slash - start));
}

/* A pass/fail value: 1 pass, 0 fail, -1 not one. */
static int pass_fail(const json_t *v) {
    if (json_is_true(v)) return 1;
    if (json_is_false(v)) return 0;
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (d == 1.0) return 1;
        if (d == 0.0) return 0;
    }
    return -1;
}

/* Chooses the verdict's metric from the first kept row. */
static drift_status pick_metric(lm *L, size_t line, json_t *row, drift_error *err) {
    if (L->o->metric) {
        if (!json_object_get(row, L->o->metric))
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" (--metric): not in the row", L->name,
                                   line, L->o->metric);
        return (L->metric = util_strdup(L->o->metric)) ? DRIFT_OK
                                                       : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    const char *pick = NULL;
    json_t *names = json_object_get(row, "metrics");
    for (int i = 0; PREFERRED[i] && !pick; i++) {
        json_t *v = json_object_get(row, PREFERRED[i]);
        if (v && pass_fail(v) >= 0) pick = PREFERRED[i];
    }
    if (!pick && json_is_array(names)) {
        size_t i;
        json_t *n;
        json_array_foreach(names, i, n) if (json_is_string(n) && pass_fail(json_object_get(row, json_string_value(n))) >= 0) {
            pick = json_string_value(n);
            break;
        }
    }
    if (!pick) { /* older rows: the smallest non-bookkeeping key with a pass/fail value */
        const char *k;
        json_t *v;
        json_object_foreach(row, k, v) if (!is_bookkeeping(k) && pass_fail(v) >= 0 && (!pick || strcmp(k, pick) < 0))
            pick = k;
    }
    if (!pick)
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "%s:%zu: no pass/fail metric in the row (a key such as exact_match, acc or pass@1 "
                               "with value 0 or 1); name one with --metric",
                               L->name, line);
    return (L->metric = util_strdup(pick)) ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}

/* The request list as an array of argument arrays, whichever version wrote
 * it: {"gen_args_0":{"arg_0":..,"arg_1":..}} or [[..,..]]. Returns the i-th
 * request's j-th argument or NULL. */
static json_t *request_arg(json_t *args, size_t i, size_t j) {
    if (json_is_array(args)) {
        json_t *r = json_array_get(args, i);
        return json_is_array(r) ? json_array_get(r, j) : NULL;
    }
    if (json_is_object(args)) {
        char k1[32], k2[32];
        snprintf(k1, sizeof k1, "gen_args_%zu", i);
        snprintf(k2, sizeof k2, "arg_%zu", j);
        json_t *r = json_object_get(args, k1);
        return json_is_object(r) ? json_object_get(r, k2) : NULL;
    }
    return NULL;
}

/* The model's answer of a row: the raw generation, or for loglikelihood
 * rows the best-scored continuation. *mc = 1 for the latter. */
static char *row_answer(lm *L, size_t line, json_t *row, int *mc, drift_error *err) {
    json_t *resps = json_object_get(row, "resps"), *fr = json_object_get(row, "filtered_resps");
    *mc = 0;
    if (!json_is_array(resps)) {
        drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field resps: missing or not an array", L->name, line);
        return NULL;
    }
    json_t *r0 = json_array_get(resps, 0);
    if (json_is_array(r0) && json_is_string(json_array_get(r0, 0))) return util_strdup(json_string_value(json_array_get(r0, 0)));
    if (json_is_string(r0)) return util_strdup(json_string_value(r0));
    /* choices: filtered_resps = [[loglikelihood, is_greedy], ...] (or bare numbers) */
    if (json_is_array(fr) && json_array_size(fr) > 0) {
        size_t i, best = 0;
        double best_ll = -INFINITY;
        json_t *e;
        int ok = 1;
        json_array_foreach(fr, i, e) {
            json_t *ll = json_is_array(e) ? json_array_get(e, 0) : e;
            if (!json_is_number(ll)) {
                ok = 0;
                break;
            }
            double d = json_number_value(ll);
            if (i == 0 || d > best_ll) {
                best_ll = d;
                best = i;
            }
        }
        if (ok) {
            *mc = 1;
            json_t *cont = request_arg(json_object_get(row, "arguments"), best, 1);
            if (json_is_string(cont)) return util_strdup(json_string_value(cont));
            return util_asprintf("choice %zu", best);
        }
    }
    drift_error_set(err, DRIFT_ERR_PARSE,
                    "%s:%zu: field resps: no generated text ([[\"...\"]]) and filtered_resps holds no "
                    "loglikelihoods",
                    L->name, line);
    return NULL;
}

/* The workload of the file: --workload, the task's name, else the shape of
 * the first document. */
static void pick_workload(lm *L, json_t *doc) {
    L->wl_known = 1;
    if (L->o->workload != DRIFT_WL_UNKNOWN) {
        L->wl = L->o->workload;
        return;
    }
    L->wl = import_task_workload(L->task);
    if (L->wl != DRIFT_WL_UNKNOWN) return;
    json_t *ans = json_object_get(doc, "answer");
    if (json_is_string(json_object_get(doc, "prompt")) && json_is_string(json_object_get(doc, "test")) &&
        json_is_string(json_object_get(doc, "entry_point")))
        L->wl = DRIFT_WL_CODE;
    else if (json_is_string(json_object_get(doc, "question")) && json_is_string(ans) &&
             strstr(json_string_value(ans), "####"))
        L->wl = DRIFT_WL_MATH;
}

/* The text after the last "####" of s, trimmed; NULL when there is none. */
static char *after_hashes(const char *s) {
    const char *h = NULL;
    for (const char *p = s; (p = strstr(p, "####")); p += 4) h = p + 4;
    if (!h) return NULL;
    while (isspace((unsigned char)*h)) h++;
    size_t n = strlen(h);
    while (n && isspace((unsigned char)h[n - 1])) n--;
    return n ? util_strndup(h, n) : NULL;
}

/* input, reference and hash of a sample from its document. */
static drift_status sample_prompt(lm *L, size_t line, drift_import_sample *p, json_t *doc, json_t *target,
                                  drift_error *err) {
    json_t *ref = json_object();
    int oom = !ref;
    p->workload = L->wl;
    if (!oom && L->wl == DRIFT_WL_MATH) {
        json_t *q = json_object_get(doc, "question");
        json_t *a = json_object_get(doc, "answer");
        char *num = json_is_string(a) ? after_hashes(json_string_value(a)) : NULL;
        if (!num && json_is_string(target)) num = after_hashes(json_string_value(target));
        if (num) {
            oom |= json_object_set_new(ref, "answer", json_string(num)) != 0;
            p->ours = 1;
        }
        free(num);
        p->input = json_is_string(q) ? util_strdup(json_string_value(q)) : import_json_canonical(doc);
    } else if (!oom && L->wl == DRIFT_WL_CODE) {
        int have = import_code_reference(doc, ref);
        oom |= have < 0;
        p->ours = have == 1;
        json_t *pr = json_object_get(doc, "prompt");
        p->input = json_is_string(pr) ? util_strdup(json_string_value(pr)) : import_json_canonical(doc);
    } else if (!oom) {
        if (target) oom |= json_object_set(ref, "target", target) != 0;
        p->input = import_json_canonical(doc);
    }
    if (oom || !p->input || import_sample_finish(p, ref)) {
        json_decref(ref);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->name, line);
    }
    json_decref(ref);
    return DRIFT_OK;
}

static drift_status do_row(lm *L, size_t line, json_t *row, drift_error *err) {
    if (!json_is_object(row))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: not a JSON object", L->name, line);
    json_t *id = json_object_get(row, "doc_id");
    char idbuf[32];
    if (json_is_integer(id))
        snprintf(idbuf, sizeof idbuf, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
    else if (json_is_string(id) && json_string_length(id) > 0 && json_string_length(id) < sizeof idbuf &&
             !memchr(json_string_value(id), 0, json_string_length(id)))
        snprintf(idbuf, sizeof idbuf, "%s", json_string_value(id));
    else
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field doc_id: missing or not an integer", L->name, line);
    json_t *f = json_object_get(row, "filter");
    if (f && !json_is_string(f))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field filter: not a string", L->name, line);
    const char *filter = f ? json_string_value(f) : "none";
    if (!f) L->unnamed = 1;
    if (!L->filter && !(L->filter = util_strdup(L->o->filter ? L->o->filter : filter)))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (strcmp(filter, L->filter) != 0) {
        if (!strstr(L->other_filters.data ? L->other_filters.data : "", filter)) {
            buf_printf(&L->other_filters, "%s%s", L->other_filters.len ? ", " : "", filter);
        }
        return DRIFT_OK;
    }
    json_t *doc = json_object_get(row, "doc");
    if (!json_is_object(doc))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field doc: missing or not an object", L->name, line);
    if (!L->metric) {
        drift_status rc = pick_metric(L, line, row, err);
        if (rc) return rc;
    }
    json_t *mv = json_object_get(row, L->metric);
    int pf = pass_fail(mv);
    if (pf < 0) {
        char *shown = mv ? json_dumps(mv, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        drift_error_set(err, DRIFT_ERR_PARSE,
                        "%s:%zu: field \"%s\": %.60s is not pass/fail (0 or 1); name a pass/fail metric with "
                        "--metric",
                        L->name, line, L->metric, shown ? shown : "missing");
        free(shown);
        return DRIFT_ERR_PARSE;
    }
    json_t *dh = json_object_get(row, "doc_hash");
    if (dh && !json_is_string(dh))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field doc_hash: not a string", L->name, line);
    if (!L->wl_known) pick_workload(L, doc);
    if (L->wl == DRIFT_WL_UNKNOWN)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "%s: task %s: DriftBench does not know its workload; say which budget gates it "
                               "with --workload (math, code, safety, chat, long_context)",
                               L->name, L->task);
    int mc = 0;
    char *answer = row_answer(L, line, row, &mc, err);
    if (!answer) return err && err->code ? err->code : DRIFT_ERR_NOMEM;
    drift_import_sample *p = import_sample_add(L->run);
    if (!p) {
        free(answer);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    p->answer = answer;
    p->where = (long)line;
    p->verdict = pf ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL;
    p->value = pf;
    if (!(p->prompt_id = util_strdup(idbuf)) || (dh && !(p->doc_hash = util_strdup(json_string_value(dh)))))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    json_t *target = json_object_get(row, "target");
    drift_status rc = sample_prompt(L, line, p, doc, target, err);
    if (rc) return rc;
    if (mc) p->ours = 0; /* our evaluators judge generated text, not a chosen continuation */
    json_t *fr = json_object_get(row, "filtered_resps");
    json_t *det = json_pack("{s:s, s:s, s:O?, s:O?}", "metric", L->metric, "filter", L->filter, "filtered",
                            json_is_array(fr) ? json_array_get(fr, 0) : NULL, "target", target);
    /* compare reports which isolation ran code answers (the "sandbox" field):
     * the harness ran these itself, outside DriftBench's sandbox */
    import_sandbox_detail(det, L->wl, "lm-eval's own (not DriftBench's)");
    p->detail_json = det ? import_json_canonical(det) : NULL;
    json_decref(det);
    if (!p->detail_json) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!L->gen_kwargs) {
        json_t *gk = request_arg(json_object_get(row, "arguments"), 0, 1);
        if (json_is_object(gk)) L->gen_kwargs = json_incref(gk);
    }
    return DRIFT_OK;
}

static int cmp_id(const void *a, const void *b) {
    const drift_import_sample *x = *(const drift_import_sample *const *)a, *y = *(const drift_import_sample *const *)b;
    int c = strcmp(x->prompt_id, y->prompt_id);
    return c ? c : (x->where < y->where ? -1 : x->where > y->where);
}

/* Rows without filter names: a doc_id seen again starts the next filter's
 * block, which is dropped (the file order is kept). */
static drift_status keep_first_block(lm *L, drift_error *err) {
    drift_import_run *r = L->run;
    drift_import_sample **v = malloc((r->n ? r->n : 1) * sizeof *v);
    char *drop = calloc(r->n ? r->n : 1, 1);
    if (!v || !drop) {
        free(v);
        free(drop);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < r->n; i++) v[i] = &r->samples[i];
    qsort(v, r->n, sizeof *v, cmp_id);
    for (size_t i = 1; i < r->n; i++)
        if (!strcmp(v[i]->prompt_id, v[i - 1]->prompt_id)) drop[v[i] - r->samples] = 1;
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (drop[i]) import_sample_clear(&r->samples[i]);
        else r->samples[m++] = r->samples[i];
    }
    r->n = m;
    free(v);
    free(drop);
    return DRIFT_OK;
}

/* A doc_id twice among the kept rows is an error naming both lines. */
static drift_status check_duplicates(lm *L, drift_error *err) {
    if (L->unnamed) {
        drift_status rc = keep_first_block(L, err);
        if (rc) return rc;
    }
    drift_import_run *r = L->run;
    drift_import_sample **v = malloc((r->n ? r->n : 1) * sizeof *v);
    if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->n; i++) v[i] = &r->samples[i];
    qsort(v, r->n, sizeof *v, cmp_id);
    drift_status rc = DRIFT_OK;
    for (size_t i = 1; i < r->n && !rc; i++)
        if (!strcmp(v[i]->prompt_id, v[i - 1]->prompt_id))
            rc = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%ld: doc_id %s appears twice for filter %s (first on line %ld)",
                                 L->name, v[i]->where, v[i]->prompt_id, L->filter, v[i - 1]->where);
    free(v);
    return rc;
}

drift_status import_parse_lmeval(const char *name, const char *data, size_t len, const drift_import_opts *o,
                                 drift_import_set *out, drift_error *err) {
    lm L = {.name = name, .o = o, .wl = DRIFT_WL_UNKNOWN};
    drift_status rc = DRIFT_OK;
    if (!(L.run = import_run_add(out)) || !(L.task = o->task ? util_strdup(o->task) : task_from_name(name)))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t line = 0, pos = 0;
    while (pos < len && !rc) {
        const char *s = data + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        size_t k = 0;
        while (k < n && isspace((unsigned char)s[k])) k++;
        if (k == n) continue; /* blank line */
        json_error_t je;
        json_t *row = json_loadb(s, n, 0, &je);
        if (!row)
            rc = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: not a JSON object (column %d: %s)", name, line,
                                 je.column, je.text);
        else
            rc = do_row(&L, line, row, err);
        json_decref(row);
    }
    if (!rc && L.run->n == 0)
        rc = L.other_filters.len
                 ? drift_error_set(err, DRIFT_ERR_PARSE, "%s: no rows of filter %s (the file has: %s)", name,
                                   L.filter, L.other_filters.data)
                 : drift_error_set(err, DRIFT_ERR_PARSE, "%s: no samples (an empty file?)", name);
    if (!rc) rc = check_duplicates(&L, err);
    if (!rc) {
        drift_import_run *r = L.run;
        r->source = util_strdup(name);
        r->model = o->model ? util_strdup(o->model) : model_from_name(name);
        r->framework = util_strdup("lm-eval");
        r->suite = util_asprintf("lm-eval:%s", L.task);
        r->evaluator = strcmp(L.filter, "none") ? util_asprintf("lm_eval:%s,%s", L.metric, L.filter)
                                                : util_asprintf("lm_eval:%s", L.metric);
        r->label = r->model ? util_asprintf("%s/%s", r->model, L.task) : NULL;
        json_t *dec = json_pack("{s:s, s:s, s:s, s:s, s:O?}", "source", "lm-eval", "task", L.task, "filter",
                                L.filter, "metric", L.metric, "gen_kwargs", L.gen_kwargs);
        r->decoding_json = dec ? import_json_canonical(dec) : NULL;
        json_decref(dec);
        if (!r->source || !r->model || !r->framework || !r->suite || !r->evaluator || !r->label || !r->decoding_json)
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    json_decref(L.gen_kwargs);
    free(L.task);
    free(L.filter);
    free(L.metric);
    buf_free(&L.other_filters);
    return rc;
}
