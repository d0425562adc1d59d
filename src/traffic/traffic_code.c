/* traffic_code.c - the code drift class of a pair of answers (traffic.h,
 * drift_traffic_pair_set_code): code that compiles, or passes the tests the
 * request carries, on one side only.
 *
 * The answers are hostile input: neither side's code decides a verdict.
 * Both checks go through the code evaluator (drift_eval_code, src/eval/
 * code.c) and its sandbox, whose runner holds the tests and the verdict
 * channel in a process the answer's code cannot reach:
 *   - with tests (metadata.driftbench_tests, driftbench_entry_point): the
 *     answer's block is the solution, the tests run in the runner against
 *     a proxy of the entry point (top-level asserts, or def check(candidate)
 *     which is then called; an empty check is defined first so that plain
 *     asserts need none);
 *   - without: the solution is a function of ours that compiles the
 *     answer's code, handed over as hex (no quoting the code could break
 *     out of), and the runner's test asserts that it returned; the code is
 *     parsed by compile(), never executed.
 * PASS is the good side, FAIL (a failed test, a syntax error, a timeout or
 * a crash of the code) the bad one; DRIFT_LABEL_ERROR (the sandbox could not
 * run it) or a cancel makes the pair's class ERROR, never a flip. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "traffic/traffic_internal.h"
#include "util/util.h"

static int ident(const char *s) {
    if (!s || !*s || (*s >= '0' && *s <= '9')) return 0;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

int trf_code_tests(const json_t *req, const char **tests, const char **entry) {
    const json_t *md = json_object_get(req, "metadata");
    const char *t = json_string_value(json_object_get(md, "driftbench_tests"));
    const char *e = json_string_value(json_object_get(md, "driftbench_entry_point"));
    if (tests) *tests = t;
    if (entry) *entry = e;
    if (!t || !*t) return 0;
    return ident(e) ? 1 : -1;
}

/* The answer's code (drift_code_extract, eval.h): its Python-tagged
 * fenced block that defines entry (when given), else its first; an
 * untagged fence is not code here. NULL when it has none. malloc'd. */
static char *pick_code(const char *content, const char *entry) {
    const char *code;
    size_t len;
    return drift_code_extract(content, entry, 0, &code, &len) ? util_strndup(code, len) : NULL;
}

/* 1 good (PASS), 0 bad (FAIL), -1 not judged (sandbox error, cancel). */
static int run_side(const char *code, const char *tests, const char *entry, const drift_code_opts *o) {
    util_buf prog = {0}, tb = {0};
    const char *answer, *test, *ent;
    if (tests) {
        answer = code;
        buf_puts(&tb, "def check(candidate):\n    pass\n");
        buf_puts(&tb, tests);
        buf_puts(&tb, "\n");
        test = tb.data;
        ent = entry;
    } else {
        static const char hex[] = "0123456789abcdef";
        buf_puts(&prog, "def __driftbench_compiles():\n    compile(bytes.fromhex('");
        for (const unsigned char *c = (const unsigned char *)code; *c; c++) {
            char h[2] = {hex[*c >> 4], hex[*c & 15]};
            buf_append(&prog, h, 2);
        }
        buf_puts(&prog, "'), 'answer.py', 'exec')\n    return 1\n");
        answer = prog.data;
        test = "def check(candidate):\n    assert candidate() == 1\n";
        ent = "__driftbench_compiles";
    }
    int verdict = -1;
    if (answer && test) {
        json_t *ref = json_pack("{s:s,s:s,s:s}", "prompt", "", "test", test, "entry_point", ent);
        char *ref_s = ref ? json_dumps(ref, JSON_COMPACT) : NULL;
        json_decref(ref);
        drift_eval_result r;
        memset(&r, 0, sizeof r);
        drift_error e = {0};
        if (ref_s && drift_eval_code(answer, ref_s, o, &r, &e) == DRIFT_OK)
            verdict = r.label == DRIFT_LABEL_PASS ? 1 : r.label == DRIFT_LABEL_FAIL ? 0 : -1;
        free(r.detail_json);
        free(ref_s);
    }
    free(prog.data);
    free(tb.data);
    return verdict;
}

void drift_traffic_pair_set_code(drift_traffic_pair *p, const char *request_json, const char *base_msg,
                                 const char *targ_msg, const struct drift_code_opts *o) {
    p->state[DRIFT_TC_CODE] = DRIFT_TP_NA;
    p->direction[DRIFT_TC_CODE] = 0;
    json_t *req = json_loads(request_json ? request_json : "", 0, NULL);
    json_t *a = json_loads(base_msg ? base_msg : "", 0, NULL);
    json_t *b = json_loads(targ_msg ? targ_msg : "", 0, NULL);
    const char *tests = NULL, *entry = NULL;
    int t = trf_code_tests(req, &tests, &entry);
    const char *ca = json_string_value(json_object_get(a, "content"));
    const char *cb = json_string_value(json_object_get(b, "content"));
    char *xa = ca ? pick_code(ca, t > 0 ? entry : NULL) : NULL;
    char *xb = cb ? pick_code(cb, t > 0 ? entry : NULL) : NULL;
    if (!xa && !xb) goto done; /* no code on either side: NA */
    if (t < 0) {
        p->state[DRIFT_TC_CODE] = DRIFT_TP_ERROR; /* tests that cannot be run: no verdict */
        goto done;
    }
    if (xa && xb && !strcmp(xa, xb)) {
        p->state[DRIFT_TC_CODE] = DRIFT_TP_SAME; /* the same code: no drift to find by running it */
        goto done;
    }
    int ga = xa ? run_side(xa, t > 0 ? tests : NULL, entry, o) : 0;
    int gb = ga >= 0 && xb ? run_side(xb, t > 0 ? tests : NULL, entry, o) : 0;
    if (ga < 0 || gb < 0) p->state[DRIFT_TC_CODE] = DRIFT_TP_ERROR;
    else if (ga == gb) p->state[DRIFT_TC_CODE] = DRIFT_TP_SAME;
    else {
        p->state[DRIFT_TC_CODE] = DRIFT_TP_FLIP;
        p->direction[DRIFT_TC_CODE] = ga ? -1 : +1;
    }
done:
    free(xa);
    free(xb);
    json_decref(req);
    json_decref(a);
    json_decref(b);
}
