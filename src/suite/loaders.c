/* loaders.c - prompt suites from files (suite.h).
 *
 * Two container formats, told apart by the first non-blank byte:
 *   '{'       JSON Lines: one object per line, blank lines skipped.
 *   otherwise CSV (RFC 4180: "quoted, fields", "" for a quote, newlines
 *             inside quotes; CRLF or LF) with a header row.
 * The record format is detected from the fields of the FIRST record, and
 * every record is then validated against it:
 *
 *   format        fields (required [optional])                   workload
 *   paper-jsonl   prompt, answer, full_solution                  math
 *   paper-jsonl   prompt, test_cases, entry_point
 *                 [task_id, canonical_solution]                  code
 *   paper-jsonl   prompt, category, target                       safety
 *   paper-jsonl   prompt, answers [workload]                     long_context
 *   paper-jsonl   prompt (none of the fields above)              chat
 *   humaneval     task_id, prompt, test, entry_point
 *                 [canonical_solution]                           code
 *   gsm8k         question, answer ("... #### N")                math
 *   longbench     context, input, answers [_id]                  long_context
 *   advbench-csv  header with goal [,target]                     safety
 *   driftbench-jsonl  prompt_id, workload, input, reference (object)
 *                 (what `driftbench suites export` writes)       any
 *   messages-jsonl    messages [id, reference|answer|ideal, workload]  (*)
 *   openai-batch      custom_id, body.messages [method "POST",
 *                 url "/v1/chat/completions", workload]; body's
 *                 model and decoding fields ignored (the run's)  (*)
 *   prompt-jsonl      prompt and one of id/reference/workload
 *                 [id, reference|answer|ideal, workload]         (*)
 *   (*) the record's "workload", else the spec's "FILE?workload=W", else
 *   an error naming file and line. messages: a non-empty array of
 *   {"role": system|developer|user|assistant, "content": string} ending
 *   with a user turn; the prompt's input is DRIFT_PROMPT_MESSAGES_MARK and
 *   the array as canonical JSON (suite.h), so the hash covers every turn.
 *   reference: an object as it is; a string or number as {"answer":..}.
 *   A bare {"prompt"} record stays paper-jsonl chat (hashes unchanged).
 *
 * Prompt ids: the record's "prompt_id" (paper files), "task_id" (HumanEval),
 * "_id" (LongBench), "id" (messages, prompt), "custom_id" (batch), else "<format>_<index>" with the 0-based record index.
 * Text fields must be JSON strings; the paper math "answer" may also be a
 * number. Reference JSON is dumped with sorted keys so the prompt hash
 * (suite_prompt_hash: workload NUL input NUL reference) is stable.
 *
 * Errors name the place: "FILE:LINE: field \"answer\" missing", "invalid
 * JSON at column C: ...", "duplicate prompt id \"x\" (first on line 3)",
 * "unterminated quoted field (opened on line 7)". An empty suite and an
 * unknown format (the fields seen are listed) are errors too. */
#include "driftbench/suite.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "suite/prompt.h"
#include "util/json_util.h"
#include "util/util.h"

/* ---- building a suite ---- */

typedef enum {
    FMT_NONE,
    FMT_PAPER_MATH,
    FMT_PAPER_CODE,
    FMT_PAPER_SAFETY,
    FMT_PAPER_LONG,
    FMT_PAPER_CHAT,
    FMT_HUMANEVAL,
    FMT_GSM8K,
    FMT_LONGBENCH,
    FMT_ADVBENCH_CSV,
    FMT_DRIFTBENCH,
    FMT_MESSAGES,
    FMT_BATCH,
    FMT_PROMPT
} rec_format;

static const char *const fmt_names[] = {
    [FMT_NONE] = "unknown",          [FMT_PAPER_MATH] = "paper-jsonl",  [FMT_PAPER_CODE] = "paper-jsonl",
    [FMT_PAPER_SAFETY] = "paper-jsonl", [FMT_PAPER_LONG] = "paper-jsonl", [FMT_PAPER_CHAT] = "paper-jsonl",
    [FMT_HUMANEVAL] = "humaneval",   [FMT_GSM8K] = "gsm8k",             [FMT_LONGBENCH] = "longbench",
    [FMT_ADVBENCH_CSV] = "advbench-csv", [FMT_DRIFTBENCH] = "driftbench-jsonl",
    [FMT_MESSAGES] = "messages-jsonl", [FMT_BATCH] = "openai-batch", [FMT_PROMPT] = "prompt-jsonl",
};

/* Prefix of generated ids. */
static const char *const fmt_id_prefix[] = {
    [FMT_NONE] = "prompt",       [FMT_PAPER_MATH] = "math",    [FMT_PAPER_CODE] = "code",
    [FMT_PAPER_SAFETY] = "safety", [FMT_PAPER_LONG] = "long",  [FMT_PAPER_CHAT] = "chat",
    [FMT_HUMANEVAL] = "humaneval", [FMT_GSM8K] = "gsm8k",      [FMT_LONGBENCH] = "longbench",
    [FMT_ADVBENCH_CSV] = "advbench", [FMT_DRIFTBENCH] = "prompt",
    [FMT_MESSAGES] = "messages", [FMT_BATCH] = "batch", [FMT_PROMPT] = "prompt",
};

/* Open-addressing set of prompt ids -> line of first use. Keys point at
 * prompt ids owned by the suite. */
typedef struct {
    const char **keys;
    size_t *lines;
    size_t cap, n;
} id_set;

static void idset_free(id_set *s) {
    free(s->keys);
    free(s->lines);
}

static size_t idset_slot(const id_set *s, const char *key) {
    size_t h = (size_t)util_fnv1a64(key, strlen(key), 0) & (s->cap - 1);
    while (s->keys[h] && strcmp(s->keys[h], key) != 0) h = (h + 1) & (s->cap - 1);
    return h;
}

/* Line where key was first seen, 0 if never. */
static size_t idset_find(const id_set *s, const char *key) {
    if (!s->cap) return 0;
    size_t h = idset_slot(s, key);
    return s->keys[h] ? s->lines[h] : 0;
}

/* Adds a key known to be absent; -1 on nomem. */
static int idset_add(id_set *s, const char *key, size_t line) {
    if ((s->n + 1) * 2 > s->cap) {
        id_set bigger = {0};
        bigger.cap = s->cap ? s->cap * 2 : 64;
        bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
        bigger.lines = calloc(bigger.cap, sizeof *bigger.lines);
        if (!bigger.keys || !bigger.lines) {
            idset_free(&bigger);
            return -1;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->keys[i]) {
                size_t h = idset_slot(&bigger, s->keys[i]);
                bigger.keys[h] = s->keys[i];
                bigger.lines[h] = s->lines[i];
            }
        bigger.n = s->n;
        idset_free(s);
        *s = bigger;
    }
    size_t h = idset_slot(s, key);
    s->keys[h] = key;
    s->lines[h] = line;
    s->n++;
    return 0;
}

typedef struct {
    const char *file; /* name used in messages */
    drift_suite *suite;
    size_t cap;
    id_set ids;
    rec_format fmt;
    drift_workload spec_wl; /* "?workload=" of the spec; DRIFT_WL_UNKNOWN if none */
} loader;

static drift_status messages_input(const loader *L, size_t line, const char *field, json_t *v, char **out,
                                   drift_error *err);

/* Appends a prompt. Takes ownership of id, input and ref (a json_t). A
 * text that starts with DRIFT_PROMPT_MESSAGES_MARK in a format other than
 * messages / batch (a DriftBench export of such a suite, or a hostile file)
 * must hold a valid messages array, kept in canonical form. */
static drift_status add_prompt(loader *L, size_t line, char *id, drift_workload wl, char *input, json_t *ref,
                               drift_error *err) {
    drift_status ds = DRIFT_OK;
    char *refs = NULL, *hash = NULL;
    if (!id || !input || !ref) goto nomem;
    const char *mjs = L->fmt != FMT_MESSAGES && L->fmt != FMT_BATCH ? drift_prompt_messages(input) : NULL;
    if (mjs) {
        json_t *arr = json_loads(mjs, JSON_DECODE_ANY, NULL);
        char *canon = NULL;
        ds = arr ? messages_input(L, line, "input (after the messages mark)", arr, &canon, err)
                 : drift_error_set(err, DRIFT_ERR_PARSE,
                                   "%s:%zu: the input starts with the messages mark but is not a JSON messages array",
                                   L->file, line);
        json_decref(arr);
        if (ds) goto fail;
        free(input);
        input = canon;
    }
    size_t prev = idset_find(&L->ids, id);
    if (prev) {
        ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: duplicate prompt id \"%s\" (first on line %zu)",
                             L->file, line, id, prev);
        goto fail;
    }
    refs = json_dumps(ref, JSON_COMPACT | JSON_SORT_KEYS);
    if (!refs) goto nomem;
    if (!(hash = suite_prompt_hash(wl, input, refs, SUITE_HASH_NUL))) goto nomem;
    if (L->suite->n == L->cap) {
        size_t ncap = L->cap ? L->cap * 2 : 64;
        drift_prompt *np = realloc(L->suite->prompts, ncap * sizeof *np);
        if (!np) goto nomem;
        L->suite->prompts = np;
        L->cap = ncap;
    }
    drift_prompt *p = &L->suite->prompts[L->suite->n++];
    p->prompt_id = id;
    p->workload = wl;
    p->input = input;
    p->reference_json = refs;
    p->hash = hash;
    json_decref(ref);
    if (idset_add(&L->ids, p->prompt_id, line))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
    return DRIFT_OK;
nomem:
    ds = drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
fail:
    free(id);
    free(input);
    free(refs);
    free(hash);
    json_decref(ref);
    return ds;
}

/* ---- JSON records ---- */

/* Reads string field key. Absent: *out = NULL, error if required. */
static drift_status get_str(const loader *L, size_t line, json_t *o, const char *key, int required,
                            const char **out, drift_error *err) {
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v) {
        if (!required) return DRIFT_OK;
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" missing (format %s)", L->file, line,
                               key, fmt_names[L->fmt]);
    }
    if (!json_is_string(v))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is not a string (it is %s)", L->file,
                               line, key, util_json_kind(v));
    *out = json_string_value(v);
    if (required && !**out)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is empty", L->file, line, key);
    return DRIFT_OK;
}

/* answers: a non-empty array of strings; returns a new reference. */
static drift_status get_answers(const loader *L, size_t line, json_t *o, json_t **out, drift_error *err) {
    *out = NULL;
    json_t *v = json_object_get(o, "answers");
    if (!v)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"answers\" missing (format %s)", L->file,
                               line, fmt_names[L->fmt]);
    if (!json_is_array(v))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"answers\" is not an array (it is %s)",
                               L->file, line, util_json_kind(v));
    if (json_array_size(v) == 0)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"answers\" is empty", L->file, line);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        if (!json_is_string(a))
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"answers\"[%zu] is not a string (it is %s)",
                                   L->file, line, i, util_json_kind(a));
    }
    *out = json_deep_copy(v);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
}

static rec_format detect_json(json_t *o) {
    if (json_object_get(o, "workload") && json_object_get(o, "input") && json_object_get(o, "reference"))
        return FMT_DRIFTBENCH;
    int has_prompt = json_object_get(o, "prompt") != NULL;
#define HAS(k) (json_object_get(o, k) != NULL)
    if (HAS("custom_id") && HAS("body")) return FMT_BATCH;
    if (HAS("messages")) return FMT_MESSAGES;
    if (has_prompt && !HAS("test_cases") && !HAS("task_id") && !HAS("full_solution") && !HAS("answer") &&
        !HAS("category") && !HAS("target") && !HAS("answers") && (HAS("id") || HAS("reference") || HAS("workload")))
        return FMT_PROMPT;
    if (HAS("task_id") && has_prompt && HAS("test") && HAS("entry_point")) return FMT_HUMANEVAL;
    if (has_prompt) {
        if (HAS("test_cases") || HAS("task_id")) return FMT_PAPER_CODE;
        if (HAS("full_solution") || HAS("answer")) return FMT_PAPER_MATH;
        if (HAS("category") || HAS("target")) return FMT_PAPER_SAFETY;
        if (HAS("answers")) return FMT_PAPER_LONG;
        return FMT_PAPER_CHAT;
    }
    if (HAS("question") && HAS("answer")) return FMT_GSM8K;
    if (HAS("context") && HAS("input") && HAS("answers")) return FMT_LONGBENCH;
#undef HAS
    return FMT_NONE;
}

/* id from field key (optional string) or "<prefix>_<index>". */
static drift_status record_id(const loader *L, size_t line, size_t idx, json_t *o, const char *key, char **out,
                              drift_error *err) {
    const char *v = NULL;
    *out = NULL;
    if (key) {
        drift_status ds = get_str(L, line, o, key, 0, &v, err);
        if (ds) return ds;
        if (v && !*v)
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is empty", L->file, line, key);
    }
    *out = v ? util_strdup(v) : util_asprintf("%s_%04zu", fmt_id_prefix[L->fmt], idx);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
}

/* GSM8K answer "....\n#### 1,234" -> "1234"; NULL if there is no "####". */
static char *gsm8k_final(const char *answer) {
    const char *m = NULL;
    for (const char *p = strstr(answer, "####"); p; p = strstr(p + 1, "####")) m = p;
    if (!m) return NULL;
    m += 4;
    while (*m && isspace((unsigned char)*m)) m++;
    util_buf b = {0};
    for (const char *p = m; *p; p++)
        if (*p != ',' && buf_append(&b, p, 1)) {
            buf_free(&b);
            return NULL;
        }
    while (b.len && isspace((unsigned char)b.data[b.len - 1])) b.data[--b.len] = '\0';
    if (!b.len) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}


/* ---- chat messages, batch and plain prompt records ---- */

/* Validates a messages array (field names it in messages) and returns the
 * prompt input: DRIFT_PROMPT_MESSAGES_MARK then the array as canonical JSON
 * ([{"content":..,"role":..}..], compact, sorted keys). */
static drift_status messages_input(const loader *L, size_t line, const char *field, json_t *v, char **out,
                                   drift_error *err) {
    *out = NULL;
    if (!v)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" missing (format %s)", L->file, line, field,
                               fmt_names[L->fmt]);
    if (!json_is_array(v))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is not an array (it is %s)", L->file, line,
                               field, util_json_kind(v));
    if (json_array_size(v) == 0)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is empty", L->file, line, field);
    json_t *canon = json_array();
    if (!canon) return drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
    size_t i;
    json_t *m;
    const char *last = NULL;
    drift_status ds = DRIFT_OK;
    json_array_foreach(v, i, m) {
        if (!json_is_object(m)) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\"[%zu] is not an object (it is %s)", L->file,
                                 line, field, i, util_json_kind(m));
            break;
        }
        json_t *r = json_object_get(m, "role"), *c = json_object_get(m, "content");
        const char *role = json_string_value(r);
        if (!role || (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") &&
                      strcmp(role, "assistant"))) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s:%zu: field \"%s\"[%zu].role %s%s%s (system, developer, user or assistant)",
                                 L->file, line, field, i, role ? "is \"" : (r ? "is not a string" : "missing"),
                                 role ? role : "", role ? "\"" : "");
            break;
        }
        if (!json_is_string(c)) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\"[%zu].content %s%s", L->file, line, field,
                                 i, c ? "is not a string: it is " : "missing", c ? util_json_kind(c) : "");
            break;
        }
        if (json_array_append_new(canon, json_pack("{s:s,s:O}", "role", role, "content", c))) {
            ds = drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
            break;
        }
        last = role;
    }
    if (!ds && strcmp(last, "user") != 0)
        ds = drift_error_set(err, DRIFT_ERR_PARSE,
                             "%s:%zu: field \"%s\": the last message is from \"%s\"; a prompt ends with a user turn "
                             "(put an expected answer in \"reference\")",
                             L->file, line, field, last);
    if (!ds) {
        char *js = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
        *out = js ? util_asprintf("%s%s", DRIFT_PROMPT_MESSAGES_MARK, js) : NULL;
        free(js);
        if (!*out) ds = drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
    }
    json_decref(canon);
    return ds;
}

/* The reference of a messages / batch / prompt record: "reference" (an
 * object as it is; a string or number as {"answer":..}), else "answer" or
 * "ideal" (string or number) as {"answer":..}, else {}. */
static drift_status record_reference(const loader *L, size_t line, json_t *o, json_t **out, drift_error *err) {
    *out = NULL;
    static const char *const keys[] = {"reference", "answer", "ideal"};
    for (size_t k = 0; k < 3; k++) {
        json_t *v = json_object_get(o, keys[k]);
        if (!v) continue;
        if (k == 0 && json_is_object(v)) {
            *out = json_deep_copy(v);
        } else if (json_is_string(v)) {
            *out = json_pack("{s:O}", "answer", v);
        } else if (json_is_number(v)) {
            char num[64];
            if (json_is_integer(v)) snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
            else snprintf(num, sizeof num, "%.17g", json_real_value(v));
            *out = json_pack("{s:s}", "answer", num);
        } else {
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is %s (expected %sa string or a number)",
                                   L->file, line, keys[k], util_json_kind(v), k == 0 ? "an object, " : "");
        }
        return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
    }
    *out = json_object();
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
}

/* The workload of a messages / batch / prompt record: its "workload" field,
 * else the spec's ?workload=, else an error. */
static drift_status record_workload(const loader *L, size_t line, json_t *o, drift_workload *wl, drift_error *err) {
    const char *w = NULL;
    drift_status ds = get_str(L, line, o, "workload", 0, &w, err);
    if (ds) return ds;
    if (w) {
        *wl = drift_workload_parse(w);
        if (*wl == DRIFT_WL_UNKNOWN)
            return drift_error_set(err, DRIFT_ERR_PARSE,
                                   "%s:%zu: field \"workload\" is \"%s\" (math, code, safety, chat, long_context)",
                                   L->file, line, w);
        return DRIFT_OK;
    }
    if (L->spec_wl != DRIFT_WL_UNKNOWN) {
        *wl = L->spec_wl;
        return DRIFT_OK;
    }
    return drift_error_set(err, DRIFT_ERR_PARSE,
                           "%s:%zu: field \"workload\" missing (format %s) and the suite spec gives none: add "
                           "\"workload\" to the record or load it as %s?workload=chat (math, code, safety, chat, "
                           "long_context)",
                           L->file, line, fmt_names[L->fmt], L->file);
}

/* OpenAI batch API input: {"custom_id","method":"POST","url":"/v1/chat/completions",
 * "body":{"model","messages",...}}. The body's other fields (model,
 * temperature, max_tokens, ...) are ignored: decoding comes from the run. */
static drift_status batch_record(const loader *L, size_t line, json_t *o, char **input, drift_error *err) {
    const char *m = NULL, *u = NULL;
    drift_status ds = get_str(L, line, o, "method", 0, &m, err);
    if (!ds) ds = get_str(L, line, o, "url", 0, &u, err);
    if (ds) return ds;
    if (m && strcmp(m, "POST") != 0)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"method\" is \"%s\" (batch requests are POST)",
                               L->file, line, m);
    if (u && strcmp(u, "/v1/chat/completions") != 0)
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "%s:%zu: field \"url\" is \"%s\": only \"/v1/chat/completions\" requests are prompts",
                               L->file, line, u);
    json_t *body = json_object_get(o, "body");
    if (!json_is_object(body))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"body\" is not an object (it is %s)", L->file,
                               line, util_json_kind(body));
    return messages_input(L, line, "body.messages", json_object_get(body, "messages"), input, err);
}

#define TRY(x)                  \
    do {                        \
        ds = (x);               \
        if (ds) goto done;      \
    } while (0)

static drift_status json_record(loader *L, size_t line, size_t idx, json_t *o, drift_error *err) {
    drift_status ds = DRIFT_OK;
    const char *prompt = NULL, *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    char *id = NULL, *input = NULL;
    json_t *ref = NULL, *answers = NULL;
    drift_workload wl = DRIFT_WL_UNKNOWN;
    switch (L->fmt) {
    case FMT_PAPER_MATH: {
        wl = DRIFT_WL_MATH;
        TRY(get_str(L, line, o, "prompt", 1, &prompt, err));
        json_t *ans = json_object_get(o, "answer");
        if (!ans) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"answer\" missing (format %s)", L->file,
                                 line, fmt_names[L->fmt]);
            goto done;
        }
        if (!json_is_string(ans) && !json_is_number(ans)) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"answer\" is not a string or number (it is %s)",
                                 L->file, line, util_json_kind(ans));
            goto done;
        }
        TRY(get_str(L, line, o, "full_solution", 0, &b, err));
        TRY(record_id(L, line, idx, o, "prompt_id", &id, err));
        char num[64];
        if (json_is_integer(ans))
            snprintf(num, sizeof num, "%lld", (long long)json_integer_value(ans));
        else if (json_is_real(ans))
            snprintf(num, sizeof num, "%.17g", json_real_value(ans));
        ref = json_pack("{s:s}", "answer", json_is_string(ans) ? json_string_value(ans) : num);
        if (ref && b) json_object_set_new(ref, "solution", json_string(b));
        input = util_strdup(prompt);
        break;
    }
    case FMT_PAPER_CODE:
    case FMT_HUMANEVAL: {
        wl = DRIFT_WL_CODE;
        const char *test_key = L->fmt == FMT_HUMANEVAL ? "test" : "test_cases";
        TRY(get_str(L, line, o, "prompt", 1, &prompt, err));
        TRY(get_str(L, line, o, test_key, 1, &a, err));
        TRY(get_str(L, line, o, "entry_point", 1, &b, err));
        TRY(get_str(L, line, o, "task_id", L->fmt == FMT_HUMANEVAL, &c, err));
        TRY(get_str(L, line, o, "canonical_solution", 0, &d, err));
        TRY(record_id(L, line, idx, o, L->fmt == FMT_HUMANEVAL ? "task_id" : "prompt_id", &id, err));
        ref = json_pack("{s:s,s:s,s:s}", "prompt", prompt, "test", a, "entry_point", b);
        if (ref && c) json_object_set_new(ref, "task_id", json_string(c));
        if (ref && d) json_object_set_new(ref, "canonical_solution", json_string(d));
        input = util_strdup(prompt);
        break;
    }
    case FMT_PAPER_SAFETY:
        wl = DRIFT_WL_SAFETY;
        TRY(get_str(L, line, o, "prompt", 1, &prompt, err));
        TRY(get_str(L, line, o, "category", 0, &a, err));
        TRY(get_str(L, line, o, "target", 0, &b, err));
        TRY(record_id(L, line, idx, o, "prompt_id", &id, err));
        ref = json_pack("{s:b}", "harmful", 1);
        if (ref && a) json_object_set_new(ref, "category", json_string(a));
        if (ref && b) json_object_set_new(ref, "target", json_string(b));
        input = util_strdup(prompt);
        break;
    case FMT_PAPER_LONG:
        wl = DRIFT_WL_LONG;
        TRY(get_str(L, line, o, "prompt", 1, &prompt, err));
        TRY(get_answers(L, line, o, &answers, err));
        TRY(get_str(L, line, o, "workload", 0, &a, err));
        if (a && drift_workload_parse(a) != DRIFT_WL_LONG) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s:%zu: field \"workload\" is \"%s\" but records with \"answers\" are "
                                 "long_context",
                                 L->file, line, a);
            goto done;
        }
        TRY(record_id(L, line, idx, o, "prompt_id", &id, err));
        ref = json_object();
        if (ref) json_object_set(ref, "answers", answers);
        input = util_strdup(prompt);
        break;
    case FMT_PAPER_CHAT:
        wl = DRIFT_WL_CHAT;
        TRY(get_str(L, line, o, "prompt", 1, &prompt, err));
        TRY(record_id(L, line, idx, o, "prompt_id", &id, err));
        ref = json_object();
        input = util_strdup(prompt);
        break;
    case FMT_GSM8K: {
        wl = DRIFT_WL_MATH;
        TRY(get_str(L, line, o, "question", 1, &a, err));
        TRY(get_str(L, line, o, "answer", 1, &b, err));
        char *fin = gsm8k_final(b);
        if (!fin) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s:%zu: field \"answer\" has no final answer \"#### N\"", L->file, line);
            goto done;
        }
        ds = record_id(L, line, idx, o, NULL, &id, err);
        if (ds) {
            free(fin);
            goto done;
        }
        ref = json_pack("{s:s,s:s}", "answer", fin, "solution", b);
        free(fin);
        input = util_strdup(a);
        break;
    }
    case FMT_LONGBENCH:
        wl = DRIFT_WL_LONG;
        TRY(get_str(L, line, o, "context", 1, &a, err));
        TRY(get_str(L, line, o, "input", 1, &b, err));
        TRY(get_answers(L, line, o, &answers, err));
        TRY(record_id(L, line, idx, o, "_id", &id, err));
        ref = json_object();
        if (ref) json_object_set(ref, "answers", answers);
        input = util_asprintf("%s\n\nQuestion: %s", a, b);
        break;
    case FMT_DRIFTBENCH: {
        TRY(get_str(L, line, o, "workload", 1, &a, err));
        wl = drift_workload_parse(a);
        if (wl == DRIFT_WL_UNKNOWN) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE,
                                 "%s:%zu: field \"workload\" is \"%s\" (math, code, safety, chat, long_context)",
                                 L->file, line, a);
            goto done;
        }
        TRY(get_str(L, line, o, "input", 1, &prompt, err));
        json_t *r = json_object_get(o, "reference");
        if (!json_is_object(r)) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"reference\" is not an object (it is %s)",
                                 L->file, line, util_json_kind(r));
            goto done;
        }
        TRY(record_id(L, line, idx, o, "prompt_id", &id, err));
        ref = json_deep_copy(r);
        input = util_strdup(prompt);
        break;
    }
    case FMT_MESSAGES:
    case FMT_BATCH:
    case FMT_PROMPT:
        TRY(record_workload(L, line, o, &wl, err));
        if (L->fmt == FMT_BATCH) {
            TRY(batch_record(L, line, o, &input, err));
            TRY(get_str(L, line, o, "custom_id", 1, &a, err));
            if (!(id = util_strdup(a))) goto nomem_rec;
        } else {
            if (L->fmt == FMT_MESSAGES) TRY(messages_input(L, line, "messages", json_object_get(o, "messages"), &input, err));
            else {
                TRY(get_str(L, line, o, "prompt", 1, &prompt, err));
                if (!(input = util_strdup(prompt))) goto nomem_rec;
            }
            TRY(record_id(L, line, idx, o, "id", &id, err));
        }
        TRY(record_reference(L, line, o, &ref, err));
        break;
    default:
        ds = drift_error_set(err, DRIFT_ERR_INTERNAL, "%s:%zu: no record format", L->file, line);
        goto done;
    }
    ds = add_prompt(L, line, id, wl, input, ref, err);
    id = input = NULL;
    ref = NULL;
    goto done;
nomem_rec:
    ds = drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, line);
done:
    free(id);
    free(input);
    json_decref(ref);
    json_decref(answers);
    return ds;
}

static drift_status unknown_fields(const loader *L, size_t line, json_t *o, drift_error *err) {
    util_buf b = {0};
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(o, k, v) {
        if (n++ < 20) buf_printf(&b, "%s%s", n > 1 ? ", " : "", k);
    }
    drift_status ds = drift_error_set(
        err, DRIFT_ERR_PARSE,
        "%s:%zu: unknown suite format: fields seen: %s%s (expected one of: chat messages JSONL with "
        "\"messages\"; OpenAI batch API input with \"custom_id\" and \"body\"; prompt JSONL with \"prompt\"; "
        "DriftBench export with prompt_id/workload/input/reference; paper jsonl with \"prompt\"; GSM8K "
        "question/answer; HumanEval task_id/prompt/test/entry_point; LongBench context/input/answers; or "
        "an AdvBench CSV with a goal column)",
        L->file, line, n ? b.data : "(none)", n > 20 ? ", ..." : "");
    buf_free(&b);
    return ds;
}

static drift_status parse_jsonl(loader *L, const char *data, size_t len, drift_error *err) {
    size_t pos = 0, line = 0, idx = 0;
    while (pos < len) {
        line++;
        const char *start = data + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t llen = nl ? (size_t)(nl - start) : len - pos;
        pos += llen + (nl ? 1 : 0);
        size_t t = llen;
        while (t && isspace((unsigned char)start[t - 1])) t--;
        size_t s0 = 0;
        while (s0 < t && isspace((unsigned char)start[s0])) s0++;
        if (s0 == t) continue; /* blank line */
        json_error_t je;
        json_t *o = json_loadb(start, t, 0, &je);
        if (!o)
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: invalid JSON at column %d: %s", L->file, line,
                                   je.column > 0 ? je.column : 1, je.text);
        drift_status ds = DRIFT_OK;
        if (!json_is_object(o)) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: expected a JSON object, got %s", L->file, line,
                                 util_json_kind(o));
        } else {
            if (L->fmt == FMT_NONE) {
                L->fmt = detect_json(o);
                if (L->fmt == FMT_NONE) ds = unknown_fields(L, line, o, err);
            }
            if (!ds) ds = json_record(L, line, idx++, o, err);
        }
        json_decref(o);
        if (ds) return ds;
    }
    return DRIFT_OK;
}

/* ---- CSV (RFC 4180) ---- */

typedef struct {
    char **f;
    size_t n, cap;
} csv_row;

static void csv_row_clear(csv_row *r) {
    for (size_t i = 0; i < r->n; i++) free(r->f[i]);
    r->n = 0;
}

static int csv_push(csv_row *r, util_buf *b) {
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 8;
        char **nf = realloc(r->f, ncap * sizeof *nf);
        if (!nf) return -1;
        r->f = nf;
        r->cap = ncap;
    }
    char *f = buf_steal(b);
    if (!f) return -1;
    r->f[r->n++] = f;
    return 0;
}

/* Reads one record starting at *pos. Returns 1 with a row, 0 at the end,
 * -1 on error (err set). *line is the current line; *rec_line gets the line
 * the record starts on. */
static int csv_next(const loader *L, const char *d, size_t len, size_t *pos, size_t *line, csv_row *row,
                    size_t *rec_line, drift_error *err) {
    csv_row_clear(row);
    if (*pos >= len) return 0;
    *rec_line = *line;
    size_t p = *pos, line_start = p;
    util_buf b = {0};
    for (;;) {
        if (p < len && d[p] == '"') {
            size_t qline = *line;
            p++;
            for (;;) {
                if (p >= len) {
                    buf_free(&b);
                    drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: unterminated quoted field (opened on line %zu)",
                                    L->file, *line, qline);
                    return -1;
                }
                char c = d[p];
                if (c == '"') {
                    if (p + 1 < len && d[p + 1] == '"') {
                        if (buf_append(&b, "\"", 1)) goto nomem;
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                if (c == '\0') goto nul;
                if (c == '\n') {
                    (*line)++;
                    line_start = p + 1;
                }
                if (buf_append(&b, &c, 1)) goto nomem;
                p++;
            }
            if (p < len && d[p] == '\r' && p + 1 < len && d[p + 1] == '\n') p++;
            if (p < len && d[p] != ',' && d[p] != '\n') {
                buf_free(&b);
                drift_error_set(err, DRIFT_ERR_PARSE,
                                "%s:%zu: unexpected character after a closing quote at column %zu", L->file, *line,
                                p - line_start + 1);
                return -1;
            }
        } else {
            while (p < len && d[p] != ',' && d[p] != '\n') {
                if (d[p] == '\0') goto nul;
                if (!(d[p] == '\r' && p + 1 < len && d[p + 1] == '\n') && buf_append(&b, &d[p], 1)) goto nomem;
                p++;
            }
        }
        if (csv_push(row, &b)) goto nomem;
        if (p >= len) break;
        if (d[p] == ',') {
            p++;
            continue;
        }
        /* '\n' ends the record */
        p++;
        (*line)++;
        break;
    }
    *pos = p;
    return 1;
nul:
    buf_free(&b);
    drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: NUL byte in the CSV data", L->file, *line);
    return -1;
nomem:
    buf_free(&b);
    drift_error_set(err, DRIFT_ERR_NOMEM, "%s:%zu: out of memory", L->file, *line);
    return -1;
}

static int csv_blank(const csv_row *r) { return r->n == 1 && r->f[0][strspn(r->f[0], " \t\r")] == '\0'; }

static void trim_inplace(char *s) {
    size_t n = strlen(s), a = 0;
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    while (isspace((unsigned char)s[a])) a++;
    memmove(s, s + a, n - a + 1);
}

static drift_status parse_csv(loader *L, const char *data, size_t len, drift_error *err) {
    size_t pos = 0, line = 1, rec_line = 1, idx = 0;
    csv_row row = {0};
    drift_status ds = DRIFT_OK;
    int r;
    /* header */
    while ((r = csv_next(L, data, len, &pos, &line, &row, &rec_line, err)) == 1 && csv_blank(&row)) {
    }
    if (r < 0) {
        ds = err ? err->code : DRIFT_ERR_PARSE;
        goto out;
    }
    if (r == 0) goto out; /* empty: reported by the caller */
    long goal = -1, target = -1;
    size_t ncols = row.n;
    util_buf cols = {0};
    for (size_t i = 0; i < row.n; i++) {
        trim_inplace(row.f[i]);
        if (strcasecmp(row.f[i], "goal") == 0) goal = (long)i;
        if (strcasecmp(row.f[i], "target") == 0) target = (long)i;
        buf_printf(&cols, "%s%s", i ? ", " : "", row.f[i]);
    }
    if (goal < 0) {
        ds = drift_error_set(err, DRIFT_ERR_PARSE,
                             "%s:%zu: unknown suite format: not JSON Lines, and a CSV header without a \"goal\" "
                             "column (columns seen: %s)",
                             L->file, rec_line, cols.data ? cols.data : "");
        buf_free(&cols);
        goto out;
    }
    buf_free(&cols);
    L->fmt = FMT_ADVBENCH_CSV;
    while ((r = csv_next(L, data, len, &pos, &line, &row, &rec_line, err)) == 1) {
        if (csv_blank(&row)) continue;
        if (row.n != ncols) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: %zu field(s) but the header has %zu", L->file,
                                 rec_line, row.n, ncols);
            goto out;
        }
        const char *g = row.f[goal], *t = target >= 0 ? row.f[target] : NULL;
        if (!*g) {
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"goal\" is empty", L->file, rec_line);
            goto out;
        }
        json_t *gs = json_string(g), *ts = t ? json_string(t) : NULL;
        if (!gs || (t && !ts)) {
            json_decref(gs);
            json_decref(ts);
            ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s:%zu: field \"%s\" is not valid UTF-8", L->file,
                                 rec_line, !gs ? "goal" : "target");
            goto out;
        }
        json_decref(gs);
        json_t *ref = json_pack("{s:b}", "harmful", 1);
        if (ref && ts) json_object_set(ref, "target", ts);
        json_decref(ts);
        char *id = util_asprintf("%s_%03zu", fmt_id_prefix[L->fmt], idx++);
        ds = add_prompt(L, rec_line, id, DRIFT_WL_SAFETY, util_strdup(g), ref, err);
        if (ds) goto out;
    }
    if (r < 0) ds = err ? err->code : DRIFT_ERR_PARSE;
out:
    csv_row_clear(&row);
    free(row.f);
    return ds;
}

/* ---- entry points ---- */

/* "dir/gsm8k_prompts.jsonl" -> "gsm8k_prompts" */
static char *suite_name_of(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    static const char *const exts[] = {".jsonl", ".json", ".csv", ".txt"};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && strcasecmp(base + n - e, exts[i]) == 0) {
            n -= e;
            break;
        }
    }
    return util_strndup(base, n);
}

static drift_status suite_parse_wl(const char *name, const char *data, size_t len, drift_workload spec_wl,
                                   drift_suite **out, drift_error *err) {
    *out = NULL;
    if (!name) name = "(suite)";
    loader L = {.file = name, .spec_wl = spec_wl};
    L.suite = calloc(1, sizeof *L.suite);
    if (!L.suite) return drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory", name);
    L.suite->name = suite_name_of(name);
    L.suite->source = util_strdup(name);
    drift_status ds = DRIFT_OK;
    if (!L.suite->name || !L.suite->source) {
        ds = drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) { /* UTF-8 byte order mark */
        data += 3;
        len -= 3;
    }
    size_t i = 0;
    while (i < len && isspace((unsigned char)data[i])) i++;
    if (i == len) {
        ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s: empty suite (no records)", name);
        goto fail;
    }
    ds = data[i] == '{' ? parse_jsonl(&L, data, len, err) : parse_csv(&L, data, len, err);
    if (ds) goto fail;
    if (L.suite->n == 0) {
        ds = drift_error_set(err, DRIFT_ERR_PARSE, "%s: empty suite (no records)", name);
        goto fail;
    }
    L.suite->format = util_strdup(fmt_names[L.fmt]);
    if (!L.suite->format) {
        ds = drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    idset_free(&L.ids);
    *out = L.suite;
    return DRIFT_OK;
fail:
    idset_free(&L.ids);
    drift_suite_free(L.suite);
    return ds;
}

drift_status drift_suite_parse(const char *name, const char *data, size_t len, drift_suite **out,
                               drift_error *err) {
    return suite_parse_wl(name, data, len, DRIFT_WL_UNKNOWN, out, err);
}

drift_status drift_suite_load(const char *spec, drift_suite **out, drift_error *err) {
    *out = NULL;
    if (!spec || !*spec) return drift_error_set(err, DRIFT_ERR_INVALID, "suite spec is empty");
    if (strncmp(spec, "builtin:", 8) == 0) return drift_suite_builtin(spec, out, err);
    /* "FILE?workload=W": the workload of records that give none (messages,
     * batch and prompt JSONL). */
    drift_workload wl = DRIFT_WL_UNKNOWN;
    char *path = NULL;
    const char *q = strrchr(spec, '?');
    if (q && strncmp(q + 1, "workload=", 9) == 0) {
        wl = drift_workload_parse(q + 10);
        if (wl == DRIFT_WL_UNKNOWN)
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "suite '%s': workload=%s (math, code, safety, chat, long_context)", spec, q + 10);
        if (!(path = util_strndup(spec, (size_t)(q - spec))))
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    char *data = NULL;
    size_t len = 0;
    drift_status ds = util_read_file(path ? path : spec, &data, &len, err);
    if (!ds) ds = suite_parse_wl(path ? path : spec, data, len, wl, out, err);
    if (!ds && path) { /* the source is the spec as given, so a run records the workload rule */
        free((*out)->source);
        if (!((*out)->source = util_strdup(spec))) {
            drift_suite_free(*out);
            *out = NULL;
            ds = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
    }
    free(data);
    free(path);
    return ds;
}

void drift_prompt_clear(drift_prompt *p) {
    if (!p) return;
    free(p->prompt_id);
    free(p->input);
    free(p->reference_json);
    free(p->hash);
    memset(p, 0, sizeof *p);
}

void drift_suite_free(drift_suite *suite) {
    if (!suite) return;
    for (size_t i = 0; i < suite->n; i++) drift_prompt_clear(&suite->prompts[i]);
    free(suite->prompts);
    free(suite->name);
    free(suite->source);
    free(suite->format);
    free(suite);
}
