/* samples.c - the import module's data: sets of runs of samples, their
 * prompt hashes, which format a file is in, and the pair check.
 *
 * Detection: a promptfoo output is one JSON document whose top level has
 * "results" holding an object with a "results" array (or, in old versions,
 * a "results" array with "table"); an lm-eval samples file is JSON lines
 * whose first object has "doc_id". Anything else is a parse error that says
 * which two formats were looked for.
 *
 * The pair check walks both runs' prompt ids sorted, so it reports the
 * smallest document id that differs, whatever the files' order.
 *
 * After a parse, every identifier of the set (the runs' label, suite,
 * evaluator, model and source path, the samples' prompt ids) is checked to
 * be valid UTF-8: jansson only gives valid strings, but labels, tasks and
 * models also come from file and directory names, which are any bytes. An
 * id that is not is a parse error naming the file and the line (result);
 * the set records the file's size and FNV-1a 64 hash (import_store.c keeps
 * them with the run to see a changed file). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "import/import_internal.h"
#include "suite/prompt.h"
#include "suite/workload.h"
#include "util/util.h"

void drift_import_opts_default(drift_import_opts *o) {
    memset(o, 0, sizeof *o);
    o->format = DRIFT_IMPORT_AUTO;
    o->workload = DRIFT_WL_UNKNOWN;
}

drift_import_run *import_run_add(drift_import_set *s) {
    drift_import_run *nr = realloc(s->runs, (s->n + 1) * sizeof *nr);
    if (!nr) return NULL;
    s->runs = nr;
    memset(&nr[s->n], 0, sizeof nr[0]);
    return &nr[s->n++];
}

drift_import_sample *import_sample_add(drift_import_run *r) {
    if ((r->n & (r->n - 1)) == 0) { /* capacity doubles at powers of two */
        size_t cap = r->n ? r->n * 2 : 16;
        drift_import_sample *ns = realloc(r->samples, cap * sizeof *ns);
        if (!ns) return NULL;
        r->samples = ns;
    }
    drift_import_sample *p = &r->samples[r->n++];
    memset(p, 0, sizeof *p);
    p->workload = DRIFT_WL_UNKNOWN;
    p->prompt_tokens = p->completion_tokens = -1;
    p->verdict = DRIFT_LABEL_NONE;
    return p;
}

char *import_json_canonical(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY); }

int import_sample_finish(drift_import_sample *p, const json_t *ref) {
    free(p->reference_json);
    free(p->hash);
    p->hash = NULL;
    if (!(p->reference_json = import_json_canonical(ref)) || !p->input) return -1;
    /* the layout of suite files (loaders.c), as imports always had */
    return (p->hash = suite_prompt_hash(p->workload, p->input, p->reference_json, SUITE_HASH_NUL)) ? 0 : -1;
}

int import_utf8_ok(const char *s) {
    size_t n = strlen(s);
    uint32_t cp;
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = util_utf8_decode(s + i, n - i, &cp))) return 0;
    return 1;
}

char *import_utf8_shown(const char *s) { return util_utf8_clean(s, strlen(s)); }

drift_workload import_task_workload(const char *task) {
    if (!task) return DRIFT_WL_UNKNOWN;
    if (!strncmp(task, "gsm8k", 5)) return DRIFT_WL_MATH;
    if (!strncmp(task, "humaneval", 9)) return DRIFT_WL_CODE;
    return DRIFT_WL_UNKNOWN;
}

/* See import_internal.h. */
int import_code_reference(const json_t *from, json_t *ref) {
    static const char *const keys[] = {"prompt", "test", "entry_point"};
    int have = 0;
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(from, keys[i]);
        if (!json_is_string(v)) continue;
        if (json_object_set(ref, keys[i], v)) return -1;
        have++;
    }
    return have == 3;
}

/* See import_internal.h. */
void import_sandbox_detail(json_t *det, drift_workload wl, const char *own) {
    const wl_traits *t = wl_traits_of(wl);
    if (det && t && t->runs_code) json_object_set_new(det, "sandbox", json_string(own));
}

void import_sample_clear(drift_import_sample *p) {
    free(p->prompt_id);
    free(p->doc_hash);
    free(p->input);
    free(p->reference_json);
    free(p->hash);
    free(p->answer);
    free(p->error);
    free(p->detail_json);
}

void drift_import_set_free(drift_import_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) {
        drift_import_run *r = &s->runs[i];
        for (size_t k = 0; k < r->n; k++) import_sample_clear(&r->samples[k]);
        free(r->samples);
        free(r->source);
        free(r->label);
        free(r->suite);
        free(r->evaluator);
        free(r->model);
        free(r->framework);
        free(r->decoding_json);
    }
    free(s->runs);
    free(s);
}

/* The first non-blank byte of data, or 0. */
static int first_byte(const char *data, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)data[i])) return (unsigned char)data[i];
    return 0;
}

/* Whether the whole buffer is one JSON object shaped like promptfoo's
 * output (checked on the parsed document, so a JSON-lines file whose first
 * line happens to hold "results" is not taken for one). */
static int looks_promptfoo(const char *data, size_t len) {
    json_t *root = json_loadb(data, len, JSON_DECODE_ANY, NULL);
    int yes = 0;
    if (json_is_object(root)) {
        json_t *res = json_object_get(root, "results");
        yes = (json_is_object(res) && json_is_array(json_object_get(res, "results"))) ||
              (json_is_array(res) && json_object_get(root, "table"));
    }
    json_decref(root);
    return yes;
}

/* DRIFT_ERR_PARSE when an identifier of s is not valid UTF-8 (see the top). */
static drift_status check_ids(const char *name, const drift_import_set *s, drift_error *err) {
    for (size_t k = 0; k < s->n; k++) {
        const drift_import_run *r = &s->runs[k];
        const char *what[] = {"the file's path", "the run's label", "the suite", "the evaluator", "the model"};
        const char *val[] = {r->source, r->label, r->suite, r->evaluator, r->model};
        for (int i = 0; i < 5; i++) {
            if (!val[i] || import_utf8_ok(val[i])) continue;
            char *shown = import_utf8_shown(val[i]);
            drift_error_set(err, DRIFT_ERR_PARSE,
                            "%s: %s '%s' is not valid UTF-8 (the store keeps it as text)%s", name, what[i],
                            shown ? shown : "?",
                            i == 0   ? ": rename the file"
                            : i == 4 ? ": give --model"
                                     : ": it comes from the file's name; give --task, --model or --label");
            free(shown);
            return DRIFT_ERR_PARSE;
        }
        for (size_t j = 0; j < r->n; j++) {
            const drift_import_sample *p = &r->samples[j];
            if (import_utf8_ok(p->prompt_id)) continue;
            if (s->format == DRIFT_IMPORT_PROMPTFOO)
                return drift_error_set(err, DRIFT_ERR_PARSE, "%s: results[%ld]: the prompt id is not valid UTF-8",
                                       name, p->where);
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%ld: field doc_id: not valid UTF-8", name, p->where);
        }
    }
    return DRIFT_OK;
}

drift_status drift_import_parse(const char *name, const char *data, size_t len, const drift_import_opts *opts,
                                drift_import_set **out, drift_error *err) {
    drift_import_opts def;
    if (!opts) {
        drift_import_opts_default(&def);
        opts = &def;
    }
    if (!name || (!data && len) || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "import: bad arguments");
    *out = NULL;
    drift_import_format fmt = opts->format;
    if (fmt == DRIFT_IMPORT_AUTO) {
        int c = first_byte(data, len);
        if (c == 0) return drift_error_set(err, DRIFT_ERR_PARSE, "%s: empty file: no samples to import", name);
        if (c != '{')
            return drift_error_set(err, DRIFT_ERR_PARSE,
                                   "%s:1: not JSON: neither an lm-eval samples file (JSON lines) nor promptfoo "
                                   "output (one JSON object)",
                                   name);
        fmt = looks_promptfoo(data, len) ? DRIFT_IMPORT_PROMPTFOO : DRIFT_IMPORT_LMEVAL;
    }
    drift_import_set *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory", name);
    s->format = fmt;
    drift_status rc = fmt == DRIFT_IMPORT_PROMPTFOO ? import_parse_promptfoo(name, data, len, opts, s, err)
                                                    : import_parse_lmeval(name, data, len, opts, s, err);
    if (!rc) rc = check_ids(name, s, err);
    if (rc) {
        drift_import_set_free(s);
        return rc;
    }
    s->file_bytes = len;
    util_hash_hex(data ? data : "", len, s->file_hash);
    *out = s;
    return DRIFT_OK;
}

drift_status drift_import_load(const char *path, const drift_import_opts *opts, drift_import_set **out,
                               drift_error *err) {
    char *data = NULL;
    size_t len = 0;
    if (!path) return drift_error_set(err, DRIFT_ERR_INVALID, "import: no file given");
    drift_status rc = util_read_file(path, &data, &len, err);
    if (rc) return rc;
    rc = drift_import_parse(path, data, len, opts, out, err);
    free(data);
    return rc;
}

static int cmp_sample_ptr(const void *a, const void *b) {
    const drift_import_sample *x = *(const drift_import_sample *const *)a;
    const drift_import_sample *y = *(const drift_import_sample *const *)b;
    /* numeric ids (lm-eval doc_id) in number order, then by text */
    char *ex, *ey;
    long nx = strtol(x->prompt_id, &ex, 10), ny = strtol(y->prompt_id, &ey, 10);
    if (!*ex && !*ey && *x->prompt_id && *y->prompt_id && nx != ny) return nx < ny ? -1 : 1;
    return strcmp(x->prompt_id, y->prompt_id);
}

static drift_import_sample **sorted_samples(const drift_import_run *r) {
    drift_import_sample **v = malloc((r->n ? r->n : 1) * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < r->n; i++) v[i] = &r->samples[i];
    qsort(v, r->n, sizeof *v, cmp_sample_ptr);
    return v;
}

drift_status drift_import_check_pair(const drift_import_run *a, const drift_import_run *b, drift_error *err) {
    if (strcmp(a->suite, b->suite) != 0)
        return drift_error_set(err, DRIFT_ERR_MISMATCH, "%s and %s hold different tasks (%s, %s): nothing to pair",
                               a->source, b->source, a->suite, b->suite);
    drift_import_sample **va = sorted_samples(a), **vb = sorted_samples(b);
    drift_status rc = DRIFT_OK;
    if (!va || !vb) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "import: out of memory");
        goto done;
    }
    size_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        int c = i == a->n ? 1 : j == b->n ? -1 : cmp_sample_ptr(&va[i], &vb[j]);
        if (c != 0) {
            const drift_import_sample *only = c < 0 ? va[i] : vb[j];
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "%s and %s: document %s of %s is only in %s (line %ld): the two runs "
                                 "cover different documents",
                                 a->source, b->source, only->prompt_id, a->suite, c < 0 ? a->source : b->source,
                                 only->where);
            goto done;
        }
        const drift_import_sample *x = va[i], *y = vb[j];
        int by_doc = x->doc_hash && y->doc_hash && strcmp(x->doc_hash, y->doc_hash) != 0;
        if (by_doc || strcmp(x->hash, y->hash) != 0) {
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "%s (line %ld) and %s (line %ld): document %s of %s differs (%s %s vs %s): "
                                 "not the same document",
                                 a->source, x->where, b->source, y->where, x->prompt_id, a->suite,
                                 by_doc ? "doc_hash" : "content hash", by_doc ? x->doc_hash : x->hash,
                                 by_doc ? y->doc_hash : y->hash);
            goto done;
        }
        i++;
        j++;
    }
done:
    free(va);
    free(vb);
    return rc;
}
