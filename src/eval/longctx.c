/* longctx.c - the long-context QA evaluator: SQuAD / LongBench token F1.
 *
 * normalize(s): lower-case (Unicode, utf8proc), remove punctuation (ASCII
 * string.punctuation as SQuAD does, plus every Unicode P* character), drop
 * the articles a/an/the as whole tokens, split on whitespace.
 * F1 = 2PR/(P+R) over the token multisets (common = multiset intersection,
 * computed by sorting both token lists and merging). Both empty -> 1, one
 * empty -> 0 (SQuAD v2's rule).
 * drift_eval_long takes the max F1 over the reference answers; the
 * placeholder "Ground truth is not established in the paper" of the paper's
 * long_qa_prompts.jsonl is not an answer: with only placeholders the label
 * is DRIFT_LABEL_NONE (unscored, never a fail), detail says why. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <utf8proc.h>

#include "driftbench/eval.h"
#include "eval/evaluator.h"
#include "util/util.h"

static int ascii_punct(int32_t c) {
    return c < 128 && c > 32 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", (int)c) != NULL;
}

static int is_space(int32_t c) {
    if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
    utf8proc_category_t cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

static int is_punct(int32_t c) {
    if (ascii_punct(c)) return 1;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return 1;
    default:
        return 0;
    }
}

typedef struct tokens {
    char *buf;     /* the normalised text, tokens NUL-separated */
    char **tok;
    size_t n;
} tokens;

static int is_article(const char *t) { return !strcmp(t, "a") || !strcmp(t, "an") || !strcmp(t, "the"); }

/* Lower-cases and strips punctuation into b; an invalid UTF-8 byte becomes
 * U+FFFD (part of a token), so the result is valid UTF-8. */
static int lower_strip(const char *s, util_buf *b) {
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    size_t len = strlen(s), i = 0;
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) {
            if (buf_append(b, "\xEF\xBF\xBD", 3)) return -1;
            i++;
            continue;
        }
        i += (size_t)k;
        if (is_punct(c)) continue;
        if (is_space(c)) {
            if (buf_append(b, " ", 1)) return -1;
            continue;
        }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_tolower(c), enc);
        if (buf_append(b, enc, (size_t)m)) return -1;
    }
    return buf_append(b, "", 0); /* NUL-terminates even when empty */
}

static int tokenize(const char *s, tokens *t) {
    util_buf b = {0};
    memset(t, 0, sizeof *t);
    if (lower_strip(s ? s : "", &b)) {
        buf_free(&b);
        return -1;
    }
    t->buf = buf_steal(&b);
    size_t cap = 0;
    char *save = NULL;
    for (char *w = strtok_r(t->buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        if (is_article(w)) continue;
        if (t->n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nt = realloc(t->tok, cap * sizeof *nt);
            if (!nt) return -1;
            t->tok = nt;
        }
        t->tok[t->n++] = w;
    }
    return 0;
}

static void tokens_free(tokens *t) {
    free(t->buf);
    free(t->tok);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* See eval.h. */
char *drift_squad_normalize(const char *s) {
    tokens t;
    if (tokenize(s, &t)) {
        tokens_free(&t);
        return NULL;
    }
    util_buf b = {0};
    for (size_t i = 0; i < t.n; i++) {
        if ((i && buf_append(&b, " ", 1)) || buf_puts(&b, t.tok[i])) {
            buf_free(&b);
            tokens_free(&t);
            return NULL;
        }
    }
    tokens_free(&t);
    return buf_steal(&b);
}

/* F1 of two sorted token lists. */
static double f1_sorted(char **p, size_t np, char **g, size_t ng) {
    if (np == 0 && ng == 0) return 1.0;
    if (np == 0 || ng == 0) return 0.0;
    size_t i = 0, j = 0, common = 0;
    while (i < np && j < ng) {
        int c = strcmp(p[i], g[j]);
        if (c == 0) {
            common++;
            i++;
            j++;
        } else if (c < 0) {
            i++;
        } else {
            j++;
        }
    }
    if (common == 0) return 0.0;
    double prec = (double)common / (double)np, rec = (double)common / (double)ng;
    return 2.0 * prec * rec / (prec + rec);
}

/* See eval.h. Returns NAN only when memory runs out. */
double drift_token_f1(const char *prediction, const char *gold) {
    tokens p, g;
    int bad = tokenize(prediction, &p);
    bad |= tokenize(gold, &g);
    double f = NAN;
    if (!bad) {
        if (p.n > 1) qsort(p.tok, p.n, sizeof *p.tok, cmp_str);
        if (g.n > 1) qsort(g.tok, g.n, sizeof *g.tok, cmp_str);
        f = f1_sorted(p.tok, p.n, g.tok, g.n);
    }
    tokens_free(&p);
    tokens_free(&g);
    return f;
}

static int is_placeholder(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    size_t n = strlen(DRIFT_LONG_NO_GROUND_TRUTH);
    if (strncasecmp(s, DRIFT_LONG_NO_GROUND_TRUTH, n) != 0) return 0;
    for (s += n; *s; s++)
        if (!strchr(" \t\n.", *s)) return 0;
    return 1;
}

static drift_status set_detail(drift_eval_result *out, json_t *d, drift_error *err) {
    if (!d) return drift_error_set(err, DRIFT_ERR_NOMEM, "longctx: out of memory");
    out->detail_json = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(d);
    if (!out->detail_json) return drift_error_set(err, DRIFT_ERR_NOMEM, "longctx: out of memory");
    return DRIFT_OK;
}

/* See eval.h. Reference {"answers":[..]} (or {"answer":".."}); detail
 * {"f1":..,"best_gold":..,"threshold":..,"prediction":normalised (<=300 bytes)}.
 * No usable answer: DRIFT_LABEL_NONE with {"no_ground_truth":..}. A reference
 * that is not JSON: DRIFT_ERR_PARSE, label ERROR. */
drift_status drift_eval_long(const char *answer, const char *reference_json, double threshold,
                             drift_eval_result *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    out->label = DRIFT_LABEL_ERROR;
    out->value = NAN;
    if (!(threshold >= 0 && threshold <= 1)) threshold = 0.5;
    json_error_t je;
    json_t *ref = reference_json ? json_loads(reference_json, 0, &je) : NULL;
    json_t *answers = ref ? json_object_get(ref, "answers") : NULL;
    json_t *single = ref ? json_object_get(ref, "answer") : NULL;
    if (!json_is_object(ref) || (!json_is_array(answers) && !json_is_string(single))) {
        json_decref(ref);
        set_detail(out, json_pack("{s:s}", "error", "reference has no \"answers\" list"), NULL);
        return drift_error_set(err, DRIFT_ERR_PARSE, "longctx: reference has no \"answers\" list");
    }
    size_t n = json_is_array(answers) ? json_array_size(answers) : 1;
    double best = -1;
    const char *best_gold = NULL;
    size_t placeholders = 0, real = 0;
    tokens p;
    if (tokenize(answer ? answer : "", &p)) {
        tokens_free(&p);
        json_decref(ref);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "longctx: out of memory");
    }
    if (p.n > 1) qsort(p.tok, p.n, sizeof *p.tok, cmp_str);
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_is_array(answers) ? json_array_get(answers, i) : single;
        if (!json_is_string(a)) continue;
        const char *gold = json_string_value(a);
        if (is_placeholder(gold)) {
            placeholders++;
            continue;
        }
        real++;
        tokens g;
        if (tokenize(gold, &g)) {
            tokens_free(&g);
            continue;
        }
        if (g.n > 1) qsort(g.tok, g.n, sizeof *g.tok, cmp_str);
        double f = f1_sorted(p.tok, p.n, g.tok, g.n);
        if (f > best) {
            best = f;
            best_gold = gold;
        }
        tokens_free(&g);
    }
    tokens_free(&p);
    drift_status rc;
    if (real == 0) {
        out->label = DRIFT_LABEL_NONE;
        rc = set_detail(out,
                        json_pack("{s:s}", "no_ground_truth",
                                  placeholders ? "the reference says: " DRIFT_LONG_NO_GROUND_TRUTH
                                               : "the reference lists no answer"),
                        err);
    } else {
        out->value = best;
        out->label = best >= threshold ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL;
        char *norm = drift_squad_normalize(answer ? answer : "");
        if (norm && strlen(norm) > 300) {
            /* cut at a UTF-8 boundary */
            size_t k = 300;
            while (k > 0 && ((unsigned char)norm[k] & 0xC0) == 0x80) k--;
            norm[k] = '\0';
        }
        json_t *d = json_pack("{s:f, s:s, s:f, s:s}", "f1", best, "best_gold", best_gold, "threshold", threshold,
                              "prediction", norm ? norm : "");
        free(norm);
        rc = set_detail(out, d, err);
    }
    json_decref(ref);
    return rc;
}

/* ---- the method (eval/evaluator.h) ---- */

static void longctx_key(const eval_config *cfg, const void *state, eval_key_add add, void *k) {
    (void)state;
    char num[96];
    snprintf(num, sizeof num, "%.17g", cfg->long_f1_threshold);
    add(k, num);
}

static drift_status longctx_judge(const eval_config *cfg, void *state, const char *answer, const char *reference_json,
                                  drift_eval_result *out, drift_error *err) {
    (void)state;
    return drift_eval_long(answer, reference_json, cfg->long_f1_threshold, out, err);
}

const eval_method eval_longctx_method = {.name = "longctx-f1", .how = EVAL_EACH, .key_input = EVAL_KEY_REFERENCE,
                                         .key = longctx_key, .judge = longctx_judge};
