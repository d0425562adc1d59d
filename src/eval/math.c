/* math.c - the math evaluator: find the final number of an answer and
 * compare it with the reference numerically.
 *
 * Extraction tries four rules in order and keeps the first that yields a
 * number (a string with at least one digit after normalisation):
 *   1. strict     lm-eval's GSM8K regex `#### (\-?[0-9\.\,]+)`. Like
 *                 lm-eval (RegexFilter, group_select=0) the FIRST match wins
 *                 when "####" appears twice.
 *   2. boxed      the LAST \boxed{...} (or \fbox{...}), braces balanced;
 *                 inside it, LaTeX is cleaned ({,} -> ",", \$ and \% dropped,
 *                 \text{..} unwrapped) and \frac{a}{b} is kept as "a/b";
 *                 otherwise the last number inside the box.
 *   3. answer-is  the LAST "the (final) answer is N" (case-insensitive),
 *                 allowing ":", "**", "$", "\(" between the words and N;
 *                 "a/b" is kept as a fraction.
 *   4. flexible   lm-eval's `(-?[$0-9.,]{2,})|(-?[0-9]+)`, LAST match.
 *                 Deviation from lm-eval, on purpose: matches without any
 *                 digit ("...", "$,") are skipped, where lm-eval would take
 *                 them and judge the answer wrong.
 * Normalisation: drop "," "$" and blanks, drop trailing "." (lm-eval drops
 * one), drop trailing zeros of a decimal fraction and then a bare "." (so
 * "1.0", "1.00", "1.50" become "1", "1", "1.5"), drop leading zeros, "-0"
 * becomes "0". Comparison: two integers compare as exact strings (any
 * length); anything else (decimals, fractions) as long double with a 1e-9
 * relative tolerance. The regexes are compiled once (pthread_once) and only
 * read afterwards, so extraction is thread-safe. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "eval/evaluator.h"
#include "util/util.h"

#define MATH_NUM_MAX 128

static pcre2_code *re_strict, *re_answer_is, *re_flexible;
static pthread_once_t re_once = PTHREAD_ONCE_INIT;

static pcre2_code *compile_one(const char *pat, uint32_t flags) {
    int ec;
    PCRE2_SIZE off;
    return pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, flags, &ec, &off, NULL);
}

static void compile_all(void) {
    re_strict = compile_one("#### (\\-?[0-9\\.\\,]+)", 0);
    re_answer_is = compile_one("\\bthe\\s+(?:final\\s+)?answer\\s+is\\b[\\s:*$\\\\(\\[]*(-?)[\\s$]*"
                               "([0-9][0-9,]*(?:\\.[0-9]+)?(?:\\s*/\\s*[0-9][0-9,]*)?)",
                               PCRE2_CASELESS);
    re_flexible = compile_one("(-?[$0-9.,]{2,})|(-?[0-9]+)", 0);
}

static int has_digit(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isdigit((unsigned char)s[i])) return 1;
    return 0;
}

/* Normalises one plain number (no '/') in place: see the file comment. */
static void norm_plain(char *s) {
    char *w = s;
    for (char *r = s; *r; r++)
        if (*r != ',' && *r != '$' && !isspace((unsigned char)*r)) *w++ = *r;
    *w = '\0';
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '.') s[--n] = '\0';
    char *dot = strchr(s, '.');
    if (dot && !strchr(dot + 1, '.')) {
        while (n > 0 && s[n - 1] == '0') s[--n] = '\0';
        if (n > 0 && s[n - 1] == '.') s[--n] = '\0';
    }
    /* leading zeros of the integer part */
    char *p = s + (s[0] == '-');
    size_t z = 0;
    while (p[z] == '0' && isdigit((unsigned char)p[z + 1])) z++;
    if (z) memmove(p, p + z, strlen(p + z) + 1);
    if (p[0] == '.') { /* ".5" -> "0.5" */
        memmove(p + 1, p, strlen(p) + 1);
        p[0] = '0';
    }
    if (strcmp(s, "-0") == 0) strcpy(s, "0");
    if (s[0] == '-' && s[1] == '\0') s[0] = '\0';
}

/* Normalises raw[0..n) into out (cap bytes); "a/b" keeps its two parts.
 * Returns 1 if the result contains a digit. */
static int normalize(const char *raw, size_t n, char *out, size_t cap) {
    char tmp[MATH_NUM_MAX];
    if (n >= sizeof tmp) n = sizeof tmp - 1;
    memcpy(tmp, raw, n);
    tmp[n] = '\0';
    char *slash = strchr(tmp, '/');
    if (slash) {
        *slash = '\0';
        char a[MATH_NUM_MAX], b[MATH_NUM_MAX];
        snprintf(a, sizeof a, "%s", tmp);
        snprintf(b, sizeof b, "%s", slash + 1);
        norm_plain(a);
        norm_plain(b);
        if (!has_digit(a, strlen(a)) || !has_digit(b, strlen(b))) return 0;
        snprintf(out, cap, "%s/%s", a, b);
    } else {
        norm_plain(tmp);
        snprintf(out, cap, "%s", tmp);
    }
    return has_digit(out, strlen(out));
}

/* Copies the raw match into rawbuf (may be NULL). */
static void keep_raw(char *rawbuf, size_t rawcap, const char *s, size_t n) {
    if (!rawbuf || !rawcap) return;
    if (n >= rawcap) n = rawcap - 1;
    memcpy(rawbuf, s, n);
    rawbuf[n] = '\0';
}

static int rule_strict(const char *a, size_t len, char *out, size_t cap, char *raw, size_t rawcap) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re_strict, NULL);
    if (!md) return 0;
    int found = 0;
    size_t start = 0;
    /* the first match that is a number wins */
    while (start <= len && pcre2_match(re_strict, (PCRE2_SPTR)a, len, start, 0, md, NULL) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (normalize(a + ov[2], ov[3] - ov[2], out, cap)) {
            keep_raw(raw, rawcap, a + ov[2], ov[3] - ov[2]);
            found = 1;
            break;
        }
        start = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
    }
    pcre2_match_data_free(md);
    return found;
}

/* Last match of the flexible regex over s[0..len) that holds a digit. */
static int flexible_last(const char *s, size_t len, char *out, size_t cap, char *raw, size_t rawcap) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re_flexible, NULL);
    if (!md) return 0;
    size_t start = 0, best_s = 0, best_e = 0;
    int found = 0;
    while (start <= len && pcre2_match(re_flexible, (PCRE2_SPTR)s, len, start, 0, md, NULL) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char tmp[MATH_NUM_MAX];
        if (normalize(s + ov[0], ov[1] - ov[0], tmp, sizeof tmp)) {
            best_s = ov[0];
            best_e = ov[1];
            found = 1;
        }
        start = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
    }
    pcre2_match_data_free(md);
    if (!found) return 0;
    normalize(s + best_s, best_e - best_s, out, cap);
    keep_raw(raw, rawcap, s + best_s, best_e - best_s);
    return 1;
}

static int rule_answer_is(const char *a, size_t len, char *out, size_t cap, char *raw, size_t rawcap) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re_answer_is, NULL);
    if (!md) return 0;
    size_t start = 0;
    int found = 0;
    while (start <= len && pcre2_match(re_answer_is, (PCRE2_SPTR)a, len, start, 0, md, NULL) > 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        char num[MATH_NUM_MAX];
        size_t sl = ov[3] - ov[2], nl = ov[5] - ov[4];
        if (sl + nl < sizeof num) {
            memcpy(num, a + ov[2], sl);
            memcpy(num + sl, a + ov[4], nl);
            num[sl + nl] = '\0';
            if (normalize(num, sl + nl, out, cap)) { /* keep the last one */
                keep_raw(raw, rawcap, a + ov[2], ov[5] - ov[2]);
                found = 1;
            }
        }
        start = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
    }
    pcre2_match_data_free(md);
    return found;
}

/* Finds the last "\boxed" (or "\fbox") and its content; returns a malloc'd
 * copy of the content or NULL. Sets *raw_s / *raw_n to the whole command. */
static char *boxed_content(const char *a, const char **raw_s, size_t *raw_n) {
    const char *last = NULL;
    size_t cmdlen = 0;
    for (const char *p = a; (p = strchr(p, '\\')) != NULL; p++) {
        if (strncmp(p, "\\boxed", 6) == 0) {
            last = p;
            cmdlen = 6;
        } else if (strncmp(p, "\\fbox", 5) == 0) {
            last = p;
            cmdlen = 5;
        }
    }
    if (!last) return NULL;
    const char *q = last + cmdlen;
    while (*q == ' ') q++;
    if (*q == '{') {
        int depth = 0;
        const char *s = q;
        for (; *q; q++) {
            if (*q == '{') depth++;
            else if (*q == '}' && --depth == 0) break;
        }
        if (depth != 0) return NULL; /* unbalanced: not a box */
        *raw_s = last;
        *raw_n = (size_t)(q + 1 - last);
        return util_strndup(s + 1, (size_t)(q - s - 1));
    }
    /* "\boxed 5": the next token */
    const char *s = q;
    while (*q && !isspace((unsigned char)*q) && *q != '$') q++;
    if (q == s) return NULL;
    *raw_s = last;
    *raw_n = (size_t)(q - last);
    return util_strndup(s, (size_t)(q - s));
}

/* Replaces every occurrence of `from` by `to` (to no longer than from). */
static void replace_all(char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to);
    char *p = s;
    while ((p = strstr(p, from)) != NULL) {
        memcpy(p, to, tl);
        memmove(p + tl, p + fl, strlen(p + fl) + 1);
        p += tl;
    }
}

/* \frac{a}{b}, \dfrac{a}{b}, \tfrac{a}{b} with plain numbers a, b:
 * writes "[-]a/b" to out. */
static int boxed_frac(const char *c, char *out, size_t cap) {
    const char *f = strstr(c, "frac");
    if (!f || f == c || f[-1] != '\\') {
        if (!f || f < c + 2 || f[-2] != '\\' || (f[-1] != 'd' && f[-1] != 't')) return 0;
    }
    const char *cmd = f[-1] == '\\' ? f - 1 : f - 2;
    int neg = 0;
    for (const char *k = c; k < cmd; k++) {
        if (*k == '-') neg = !neg;
        else if (!isspace((unsigned char)*k)) return 0; /* something else before: not a plain fraction */
    }
    const char *q = f + 4;
    char parts[2][MATH_NUM_MAX];
    for (int i = 0; i < 2; i++) {
        while (isspace((unsigned char)*q)) q++;
        size_t n = 0;
        if (*q == '{') {
            q++;
            while (*q && *q != '}' && n + 1 < MATH_NUM_MAX) parts[i][n++] = *q++;
            if (*q != '}') return 0;
            q++;
        } else if (isdigit((unsigned char)*q)) {
            parts[i][n++] = *q++; /* \frac34 */
        } else {
            return 0;
        }
        parts[i][n] = '\0';
        for (size_t k = 0; k < n; k++)
            if (!isdigit((unsigned char)parts[i][k]) && !strchr(".,- ", parts[i][k])) return 0;
    }
    char raw[2 * MATH_NUM_MAX + 2];
    snprintf(raw, sizeof raw, "%s%s/%s", neg ? "-" : "", parts[0], parts[1]);
    return normalize(raw, strlen(raw), out, cap);
}

static int rule_boxed(const char *a, char *out, size_t cap, char *raw, size_t rawcap) {
    const char *rs = NULL;
    size_t rn = 0;
    char *c = boxed_content(a, &rs, &rn);
    if (!c) return 0;
    int ok = 0;
    replace_all(c, "{,}", ",");
    replace_all(c, "\\!", "");
    replace_all(c, "\\,", "");
    replace_all(c, "\\$", "");
    replace_all(c, "\\%", "%");
    if (boxed_frac(c, out, cap)) {
        ok = 1;
    } else {
        /* drop LaTeX commands (\text, \mathrm, \left, ...) and braces */
        char *w = c;
        for (char *r = c; *r;) {
            if (*r == '\\') {
                r++;
                while (isalpha((unsigned char)*r)) r++;
                *w++ = ' ';
            } else if (*r == '{' || *r == '}') {
                r++;
                *w++ = ' ';
            } else {
                *w++ = *r++;
            }
        }
        *w = '\0';
        char ignored[MATH_NUM_MAX];
        ok = flexible_last(c, strlen(c), out, cap, ignored, sizeof ignored);
    }
    if (ok) keep_raw(raw, rawcap, rs, rn);
    free(c);
    return ok;
}

/* Like drift_math_extract, and also copies the text the rule matched (before
 * normalisation) into raw. */
const char *drift_math_extract_ex(const char *answer, char *out, size_t cap, char *raw, size_t rawcap) {
    pthread_once(&re_once, compile_all);
    if (cap) out[0] = '\0';
    if (raw && rawcap) raw[0] = '\0';
    if (!answer || !re_strict || !re_answer_is || !re_flexible || cap == 0) {
        if (cap) snprintf(out, cap, "[invalid]");
        return NULL;
    }
    size_t len = strlen(answer);
    if (rule_strict(answer, len, out, cap, raw, rawcap)) return "strict";
    if (rule_boxed(answer, out, cap, raw, rawcap)) return "boxed";
    if (rule_answer_is(answer, len, out, cap, raw, rawcap)) return "answer-is";
    if (flexible_last(answer, len, out, cap, raw, rawcap)) return "flexible";
    snprintf(out, cap, "[invalid]");
    return NULL;
}

/* See eval.h. On no match out holds "[invalid]" and NULL is returned. */
const char *drift_math_extract(const char *answer, char *out, size_t cap) {
    return drift_math_extract_ex(answer, out, cap, NULL, 0);
}

/* A normalised number: "-?digits(.digits)?" or two such joined by '/'. */
static int parse_value(const char *s, long double *v, int *is_int) {
    const char *slash = strchr(s, '/');
    char *end;
    *is_int = 0;
    if (slash) {
        char a[MATH_NUM_MAX];
        size_t n = (size_t)(slash - s);
        if (n >= sizeof a) return 0;
        memcpy(a, s, n);
        a[n] = '\0';
        long double x = strtold(a, &end);
        if (end == a || *end) return 0;
        long double y = strtold(slash + 1, &end);
        if (end == slash + 1 || *end || y == 0) return 0;
        *v = x / y;
        return 1;
    }
    const char *p = s + (*s == '-');
    if (!*p) return 0;
    int dots = 0;
    for (const char *k = p; *k; k++) {
        if (*k == '.') dots++;
        else if (!isdigit((unsigned char)*k)) return 0;
    }
    if (dots > 1) return 0;
    *is_int = dots == 0;
    *v = strtold(s, &end);
    return *end == '\0';
}

/* Numeric equality of two normalised numbers (see the file comment). Exported
 * for the tests. */
int drift_math_equal(const char *a, const char *b) {
    long double x, y;
    int xi, yi;
    if (!parse_value(a, &x, &xi) || !parse_value(b, &y, &yi)) return strcmp(a, b) == 0;
    if (xi && yi) return strcmp(a, b) == 0;
    if (x == y) return 1;
    if (isinf(x) || isinf(y) || isnan(x) || isnan(y)) return 0;
    long double m = fabsl(x) > fabsl(y) ? fabsl(x) : fabsl(y);
    return fabsl(x - y) <= 1e-9L * m;
}

static drift_status fail_result(drift_eval_result *out, drift_error *err, drift_status code, const char *msg) {
    json_t *o = json_pack("{s:s}", "error", msg);
    out->label = DRIFT_LABEL_ERROR;
    out->value = NAN;
    out->detail_json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return drift_error_set(err, code, "math: %s", msg);
}

/* Reads the expected answer: "answer" as a string or a number; else the
 * "#### N" of "solution" / "full_solution". Writes the normalised form. */
static int reference_answer(json_t *ref, char *out, size_t cap, char *why, size_t whycap) {
    json_t *a = json_object_get(ref, "answer");
    char tmp[MATH_NUM_MAX];
    if (json_is_string(a)) {
        const char *s = json_string_value(a);
        size_t n = strlen(s);
        while (n && isspace((unsigned char)*s)) { s++; n--; }
        while (n && isspace((unsigned char)s[n - 1])) n--;
        if (n < sizeof tmp && normalize(s, n, out, cap)) {
            long double v;
            int isint;
            if (parse_value(out, &v, &isint)) return 1;
        }
        /* "#### 42" or text: extract with the same rules */
        if (drift_math_extract(json_string_value(a), out, cap)) return 1;
        snprintf(why, whycap, "reference answer \"%.60s\" holds no number", json_string_value(a));
        return 0;
    }
    if (json_is_integer(a)) {
        snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(a));
        return normalize(tmp, strlen(tmp), out, cap);
    }
    if (json_is_real(a)) {
        snprintf(tmp, sizeof tmp, "%.17g", json_real_value(a));
        return normalize(tmp, strlen(tmp), out, cap);
    }
    const char *keys[] = {"solution", "full_solution"};
    for (int i = 0; i < 2; i++) {
        json_t *s = json_object_get(ref, keys[i]);
        if (json_is_string(s) && pthread_once(&re_once, compile_all) == 0 &&
            rule_strict(json_string_value(s), strlen(json_string_value(s)), out, cap, NULL, 0))
            return 1;
    }
    snprintf(why, whycap, "reference has no \"answer\" field");
    return 0;
}

/* See eval.h. PASS/FAIL with detail {"extracted","raw","rule","expected"};
 * a reference without a usable answer is DRIFT_ERR_PARSE and label ERROR. */
drift_status drift_eval_math(const char *answer, const char *reference_json, drift_eval_result *out,
                             drift_error *err) {
    memset(out, 0, sizeof *out);
    out->label = DRIFT_LABEL_ERROR;
    out->value = NAN;
    json_error_t je;
    json_t *ref = reference_json ? json_loads(reference_json, 0, &je) : NULL;
    if (!json_is_object(ref)) {
        json_decref(ref);
        return fail_result(out, err, DRIFT_ERR_PARSE, "reference is not a JSON object");
    }
    char expected[MATH_NUM_MAX], why[160];
    if (!reference_answer(ref, expected, sizeof expected, why, sizeof why)) {
        json_decref(ref);
        return fail_result(out, err, DRIFT_ERR_PARSE, why);
    }
    json_decref(ref);
    char got[MATH_NUM_MAX], raw[MATH_NUM_MAX];
    const char *rule = drift_math_extract_ex(answer ? answer : "", got, sizeof got, raw, sizeof raw);
    int ok = rule && drift_math_equal(got, expected);
    out->label = ok ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL;
    out->value = ok ? 1.0 : 0.0;
    json_t *d = json_pack("{s:s, s:s, s:s?, s:s, s:b}", "extracted", got, "raw", rule ? raw : "", "rule", rule,
                          "expected", expected, "match", ok);
    if (!d) return fail_result(out, err, DRIFT_ERR_NOMEM, "out of memory");
    out->detail_json = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    if (!out->detail_json) return fail_result(out, err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

/* ---- the method (eval/evaluator.h) ---- */

static drift_status math_judge(const eval_config *cfg, void *state, const char *answer, const char *reference_json,
                               drift_eval_result *out, drift_error *err) {
    (void)cfg;
    (void)state;
    return drift_eval_math(answer, reference_json, out, err);
}

const eval_method eval_math_method = {.name = "math", .how = EVAL_EACH, .key_input = EVAL_KEY_REFERENCE,
                                      .judge = math_judge};
