/* traffic_drift.c - label-free drift classes of one pair of answers, and
 * their paired statistics (traffic.h).
 *
 * Real traffic has no ground truth, so every class is a check that needs
 * none: the two answers agree or not (exact; where they part), or a
 * property an application relies on holds on one side and not the other
 * (JSON validity, schema adherence, the tool called and its arguments, the
 * guard's safe/unsafe, the final number). Each class is a "flip" with
 * compare's statistics: Wilson 95% interval of the rate, exact McNemar for
 * the classes with a direction (good -> bad against bad -> good), and the
 * gate's decision (drift_gate_decide: the exact interval against the
 * class's budget, a class with no counted pair and a budget is no
 * evidence, too many pairs left out is a block). A request error is never
 * an answer: its pair is left out of every class, and counted as left out
 * where the class applies to its request. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "traffic/traffic_internal.h"
#include "util/util.h"

static const char *const CLASS_NAMES[DRIFT_TC_COUNT] = {"exact", "json", "schema",   "tool_name", "tool_args",
                                                        "guard", "math", "semantic", "code"};
static const int DIRECTIONAL[DRIFT_TC_COUNT] = {0, 1, 1, 0, 0, 1, 0, 0, 1};

const char *drift_traffic_class_name(drift_traffic_class c) {
    return c >= 0 && c < DRIFT_TC_COUNT ? CLASS_NAMES[c] : "unknown";
}

int drift_traffic_class_parse(const char *name) {
    for (int i = 0; name && i < DRIFT_TC_COUNT; i++)
        if (!strcmp(name, CLASS_NAMES[i])) return i;
    return -1;
}

void drift_traffic_opts_default(drift_traffic_opts *o) {
    static const double def[DRIFT_TC_COUNT] = {-1, 0.01, 0.01, 0.01, 0.02, 0.01, 0.02, 0.05, 0.02};
    memset(o, 0, sizeof *o);
    memcpy(o->budget, def, sizeof def);
    o->rule = DRIFT_DECIDE_INTERVAL;
    o->max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
    o->sdr_threshold = 0.30;
}

drift_status drift_traffic_parse_budgets(drift_traffic_opts *o, const char *spec, drift_error *err) {
    static const util_budget_names names = {
        "CLASS", "class", "json=1",
        "exact, json, schema, tool_name, tool_args, guard, math, semantic, code", drift_traffic_class_parse,
        DRIFT_TC_COUNT};
    return util_budgets_parse(spec, &names, o->budget, err);
}

/* ---- one pair ---- */

static const char *content_of(const json_t *m) {
    const char *c = json_string_value(json_object_get(m, "content"));
    return c ? c : "";
}

/* Where a and b first part: code points and whitespace-separated words. */
static void first_diff(const char *a, const char *b, long *chars, long *words) {
    if (!strcmp(a, b)) {
        *chars = *words = -1;
        return;
    }
    size_t i = 0;
    long cp = 0;
    while (a[i] && a[i] == b[i]) {
        if (((unsigned char)a[i] & 0xC0) != 0x80) cp++;
        i++;
    }
    /* back to the start of the code point the bytes part in */
    while (i > 0 && ((unsigned char)a[i] & 0xC0) == 0x80) {
        i--;
    }
    cp = 0;
    for (size_t k = 0; k < i; k++)
        if (((unsigned char)a[k] & 0xC0) != 0x80) cp++;
    *chars = cp;
    long w = 0;
    const char *p = a, *q = b;
    for (;;) {
        while (isspace((unsigned char)*p)) p++;
        while (isspace((unsigned char)*q)) q++;
        if (!*p || !*q) break;
        size_t lp = 0, lq = 0;
        while (p[lp] && !isspace((unsigned char)p[lp])) lp++;
        while (q[lq] && !isspace((unsigned char)q[lq])) lq++;
        if (lp != lq || memcmp(p, q, lp)) break;
        p += lp;
        q += lq;
        w++;
    }
    *words = w;
}

/* 1 valid JSON (an object for json_object), 0 not. */
static int json_valid(const char *content, int want_object, json_t **parsed) {
    json_t *v = json_loads(content, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!v || (want_object && !json_is_object(v))) {
        json_decref(v);
        *parsed = NULL;
        return 0;
    }
    *parsed = v;
    return 1;
}

static void set_binary(drift_traffic_pair *p, int c, int good_a, int good_b) {
    if (good_a == good_b) {
        p->state[c] = DRIFT_TP_SAME;
        return;
    }
    p->state[c] = DRIFT_TP_FLIP;
    p->direction[c] = good_a ? -1 : +1;
}

/* The names of a message's tool calls, and whether it has any. */
static const json_t *tool_calls(const json_t *m) {
    const json_t *t = json_object_get(m, "tool_calls");
    return json_is_array(t) && json_array_size(t) ? t : NULL;
}

/* JSON values equal as data: numbers by value (1 and 1.0 are one number),
 * objects whatever their key order, arrays in order. */
static int value_equal(const json_t *a, const json_t *b, int depth) {
    if (depth > 64) return json_equal(a, b);
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return 0;
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)a, k, v) {
            const json_t *w = json_object_get(b, k);
            if (!w || !value_equal(v, w, depth + 1)) return 0;
        }
        return 1;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!value_equal(json_array_get(a, i), json_array_get(b, i), depth + 1)) return 0;
        return 1;
    }
    return json_equal(a, b);
}

static int explicit_rule(const char *rule) { return rule && strcmp(rule, "flexible"); }

drift_status drift_traffic_pair_judge(const char *request_json, const char *base_msg, const char *targ_msg,
                                      drift_traffic_pair *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    out->first_diff_char = out->first_diff_word = -1;
    out->sdr = NAN;
    json_t *req = json_loads(request_json ? request_json : "", 0, NULL);
    json_t *a = json_loads(base_msg ? base_msg : "", 0, NULL);
    json_t *b = json_loads(targ_msg ? targ_msg : "", 0, NULL);
    drift_status st = DRIFT_OK;
    if (!json_is_object(req)) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "request is not a JSON object");
        goto done;
    }
    if (!json_is_object(a) || !json_is_object(b)) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "%s answer is not a reply message (JSON object)",
                             json_is_object(a) ? "target" : "baseline");
        goto done;
    }
    const char *ca = content_of(a), *cb = content_of(b);
    /* exact agreement, and where the contents part */
    out->state[DRIFT_TC_EXACT] = json_equal(a, b) ? DRIFT_TP_SAME : DRIFT_TP_FLIP;
    first_diff(ca, cb, &out->first_diff_char, &out->first_diff_word);

    /* JSON validity and schema adherence */
    const json_t *schema = NULL;
    int rf = trf_response_format(req, &schema);
    if (rf) {
        json_t *va = NULL, *vb = NULL;
        int ga = json_valid(ca, rf == 1, &va), gb = json_valid(cb, rf == 1, &vb);
        set_binary(out, DRIFT_TC_JSON, ga, gb);
        if (rf == 2) {
            char path[512] = "", why[8];
            int sa = ga ? trf_schema_check(schema, schema, va, path, sizeof path, why, sizeof why, 0) : 0;
            path[0] = '\0';
            int sb = gb ? trf_schema_check(schema, schema, vb, path, sizeof path, why, sizeof why, 0) : 0;
            if (sa < 0 || sb < 0) out->state[DRIFT_TC_SCHEMA] = DRIFT_TP_ERROR;
            else set_binary(out, DRIFT_TC_SCHEMA, sa, sb);
        }
        json_decref(va);
        json_decref(vb);
    }

    /* tool calls: names in order, then arguments as JSON values */
    const json_t *ta = tool_calls(a), *tb = tool_calls(b);
    if (trf_has_tools(req) || ta || tb) {
        size_t na = json_array_size(ta), nb = json_array_size(tb);
        int same_names = na == nb;
        for (size_t i = 0; same_names && i < na; i++)
            same_names = json_equal(json_object_get(json_array_get(ta, i), "name"),
                                    json_object_get(json_array_get(tb, i), "name"));
        out->state[DRIFT_TC_TOOL_NAME] = same_names ? DRIFT_TP_SAME : DRIFT_TP_FLIP;
        if (same_names && na > 0) {
            int same_args = 1;
            for (size_t i = 0; same_args && i < na; i++)
                same_args = value_equal(json_object_get(json_array_get(ta, i), "arguments"),
                                        json_object_get(json_array_get(tb, i), "arguments"), 0);
            out->state[DRIFT_TC_TOOL_ARGS] = same_args ? DRIFT_TP_SAME : DRIFT_TP_FLIP;
        }
    }

    /* the final number of a math-like answer */
    char na_[128], nb_[128];
    const char *ra = drift_math_extract(ca, na_, sizeof na_);
    const char *rb = drift_math_extract(cb, nb_, sizeof nb_);
    if (explicit_rule(ra) || explicit_rule(rb))
        out->state[DRIFT_TC_MATH] = (ra && rb && drift_math_equal(na_, nb_)) ? DRIFT_TP_SAME : DRIFT_TP_FLIP;
done:
    json_decref(req);
    json_decref(a);
    json_decref(b);
    return st;
}

void drift_traffic_pair_set_guard(drift_traffic_pair *p, int base_label, int targ_label) {
    p->direction[DRIFT_TC_GUARD] = 0;
    if ((base_label != DRIFT_LABEL_PASS && base_label != DRIFT_LABEL_FAIL) ||
        (targ_label != DRIFT_LABEL_PASS && targ_label != DRIFT_LABEL_FAIL)) {
        p->state[DRIFT_TC_GUARD] = DRIFT_TP_ERROR;
        return;
    }
    set_binary(p, DRIFT_TC_GUARD, base_label == DRIFT_LABEL_PASS, targ_label == DRIFT_LABEL_PASS);
}

void drift_traffic_pair_set_sdr(drift_traffic_pair *p, double sdr, double threshold) {
    p->sdr = sdr;
    if (!isfinite(sdr)) p->state[DRIFT_TC_SEMANTIC] = DRIFT_TP_ERROR;
    else p->state[DRIFT_TC_SEMANTIC] = sdr > threshold ? DRIFT_TP_FLIP : DRIFT_TP_SAME;
}

/* ---- counting ---- */

/* Whether class c applies to a request (for an error pair, whose answers
 * are unknown). */
int trf_class_applies(int c, const json_t *req, int guard_on, int semantic_on) {
    switch (c) {
    case DRIFT_TC_EXACT: return 1;
    case DRIFT_TC_JSON: return trf_response_format(req, NULL) > 0;
    case DRIFT_TC_SCHEMA: return trf_response_format(req, NULL) == 2;
    case DRIFT_TC_TOOL_NAME:
    case DRIFT_TC_TOOL_ARGS: return trf_has_tools(req);
    case DRIFT_TC_GUARD: return guard_on;
    case DRIFT_TC_MATH: return 1; /* counted only where the class is present (below) */
    case DRIFT_TC_SEMANTIC: return semantic_on;
    case DRIFT_TC_CODE: return trf_code_tests(req, NULL, NULL) != 0; /* tests: the request asks for code */
    default: return 0;
    }
}

void drift_traffic_summarize(const drift_traffic_pair *pairs, const int *error, const char *const *request_json,
                             size_t n, int guard_on, int semantic_on, const drift_traffic_opts *o,
                             drift_traffic_summary *out) {
    drift_traffic_opts def;
    if (!o) {
        drift_traffic_opts_default(&def);
        o = &def;
    }
    memset(out, 0, sizeof *out);
    out->pairs = n;
    out->sdr_threshold = o->sdr_threshold;
    out->rule = o->rule;
    out->max_left_out = o->max_left_out;
    long err_left[DRIFT_TC_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        if (error && error[i]) {
            json_t *req = json_loads(request_json && request_json[i] ? request_json[i] : "", 0, NULL);
            for (int c = 0; c < DRIFT_TC_COUNT; c++)
                if (trf_class_applies(c, req, guard_on, semantic_on)) err_left[c]++;
            json_decref(req);
            continue;
        }
        out->answered++;
        const drift_traffic_pair *q = &pairs[i];
        drift_traffic_taxonomy *tx = &out->taxonomy;
        int flip_other = 0, functional = 0, worse = 0;
        for (int c = DRIFT_TC_JSON; c < DRIFT_TC_COUNT; c++) flip_other |= q->state[c] == DRIFT_TP_FLIP;
        for (int c = DRIFT_TC_JSON; c < DRIFT_TC_COUNT; c++) {
            if (c == DRIFT_TC_GUARD || c == DRIFT_TC_SEMANTIC || q->state[c] != DRIFT_TP_FLIP) continue;
            functional = 1;
            worse |= q->direction[c] < 0;
        }
        tx->functional += functional;
        tx->functional_worse += worse;
        if (q->state[DRIFT_TC_GUARD] == DRIFT_TP_FLIP) {
            tx->safety++;
            tx->safe_to_unsafe += q->direction[DRIFT_TC_GUARD] < 0;
            tx->unsafe_to_safe += q->direction[DRIFT_TC_GUARD] > 0;
        }
        tx->semantic += q->state[DRIFT_TC_SEMANTIC] == DRIFT_TP_FLIP;
        tx->textual_only += q->state[DRIFT_TC_EXACT] == DRIFT_TP_FLIP && !flip_other;
        for (int c = 0; c < DRIFT_TC_COUNT; c++) {
            drift_traffic_class_result *r = &out->cls[c];
            switch (pairs[i].state[c]) {
            case DRIFT_TP_SAME: r->n++; break;
            case DRIFT_TP_FLIP:
                r->n++;
                r->flips++;
                if (pairs[i].direction[c] < 0) r->worse++;
                if (pairs[i].direction[c] > 0) r->better++;
                break;
            case DRIFT_TP_ERROR: r->left_out++; break;
            default: break;
            }
        }
    }
    out->decision = DRIFT_DECISION_NOT_GATED;
    for (int c = 0; c < DRIFT_TC_COUNT; c++) {
        drift_traffic_class_result *r = &out->cls[c];
        /* math applies to an answer, not a request: an error pair counts
         * against it only where some answered pair was math-like */
        if (c != DRIFT_TC_MATH || r->n + r->left_out > 0) r->left_out += err_left[c];
        r->present = r->n + r->left_out > 0;
        r->budget = o->budget[c];
        r->rate = r->n ? (double)r->flips / (double)r->n : 0.0;
        drift_wilson(r->flips, r->n, 1.959964, &r->ci95[0], &r->ci95[1]);
        r->mcnemar_p = DIRECTIONAL[c] ? drift_mcnemar_exact(r->worse, r->better) : NAN;
        r->decision = DRIFT_DECISION_NOT_GATED;
        r->reason = DRIFT_REASON_NONE;
        r->decide_ci[0] = 0;
        r->decide_ci[1] = 1;
        r->left_out_share = r->n + r->left_out ? (double)r->left_out / (double)(r->n + r->left_out) : 0.0;
        if (!r->present || r->budget < 0) continue;
        r->decision = drift_gate_decide(r->flips, r->n, r->left_out, r->budget, o->rule, o->max_left_out,
                                        &r->decide_ci[0], &r->decide_ci[1], &r->more_pairs, &r->reason);
        if (r->decision == DRIFT_DECISION_NO_EVIDENCE) r->reason = DRIFT_REASON_ERRORS;
        out->decision = drift_decision_worst(out->decision, r->decision);
    }
}

/* The text a guard or an embedder reads of a message: its content, or the
 * whole message when it has none (tool calls only). malloc'd. */
char *trf_readable(const char *msg) {
    json_t *m = json_loads(msg ? msg : "", 0, NULL);
    const char *c = json_string_value(json_object_get(m, "content"));
    char *r = util_strdup(c && *c ? c : (msg ? msg : ""));
    json_decref(m);
    return r;
}

int trf_class_directional(int c) { return c >= 0 && c < DRIFT_TC_COUNT && DIRECTIONAL[c]; }
