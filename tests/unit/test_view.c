/* test_view.c - the results browser's API (src/view/view_api.c) without
 * HTTP, over a store whose per-prompt labels are known (labelled_runs.h:
 * 10 math prompts, answers with markup, '&' and an invalid UTF-8 byte), so
 * every count is known in advance: baseline FAIL on prompts {0, 1}, target
 * FAIL on {1, 2, 3} -> 3 flips (prompt 0 incorrect->correct, prompts 2 and 3
 * correct->incorrect). Also the Host rule (DNS rebinding) and the built-in
 * page's files. The HTTP side is tests/e2e/view_api.sh; the page as a
 * browser runs it, tests/e2e/view_chromium.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>

#include "unit/labelled_runs.h"
#include "view/view_internal.h"

static char store_path[512];

static int setup(void **state) {
    (void)state;
    make_tmpdir();
    db_path(store_path, sizeof store_path, "view.db");
    drift_store *st = open_store("view.db");
    add_run(st, "base", "embedded:m.gguf?profile=ref", "{\"model\":\"m\",\"precision\":\"f32\"}", 0x3u);
    add_run(st, "t<1>", "embedded:m.gguf?profile=cpu-int4", "{\"model\":\"m\",\"precision\":\"int4\"}", 0xEu);
    drift_store_close(st);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    sb_rmtree(tmpdir);
    return 0;
}

/* GET path?args through the API; returns the parsed reply (NULL on a non-JSON body), *status set. */
static json_t *get(view_api *a, const char *path, int *status, ...) {
    view_arg args[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, status);
    const char *k;
    while ((k = va_arg(ap, const char *)) && n < 16) {
        args[n].name = k;
        args[n].value = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    view_reply r;
    view_api_handle(a, path, args, n, &r);
    *status = r.status;
    assert_non_null(r.body);
    assert_int_equal(strlen(r.body), r.len);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je); /* valid JSON, invalid UTF-8 of answers repaired */
    if (!j) fprintf(stderr, "not JSON: %s: %s\n", je.text, r.body);
    free(r.body);
    return j;
}

static long total_of(view_api *a, ...) {
    /* the "total" of /api/pairs?baseline=base&target=t<1> plus the given args */
    view_arg args[16] = {{"baseline", "base"}, {"target", "t<1>"}};
    size_t n = 2;
    va_list ap;
    va_start(ap, a);
    const char *k;
    while ((k = va_arg(ap, const char *)) && n < 16) {
        args[n].name = k;
        args[n].value = va_arg(ap, const char *);
        n++;
    }
    va_end(ap);
    view_reply r;
    view_api_handle(a, "/api/pairs", args, n, &r);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    free(r.body);
    assert_non_null(j);
    long t = (long)json_integer_value(json_object_get(j, "total"));
    /* all: every pair of the comparisons spanned (none when the config filter leaves out the target) */
    long all = (long)json_integer_value(json_object_get(j, "all"));
    assert_true(all == NP || (all == 0 && t == 0));
    json_decref(j);
    return t;
}

static void test_filters(void **state) {
    (void)state;
    view_api *a = view_api_new(store_path);
    assert_non_null(a);
    assert_int_equal(total_of(a, NULL), NP);
    assert_int_equal(total_of(a, "flipped", "1", NULL), 3);
    assert_int_equal(total_of(a, "flipped", "0", NULL), NP);
    assert_int_equal(total_of(a, "direction", "correct_to_incorrect", NULL), 2);
    assert_int_equal(total_of(a, "direction", "incorrect_to_correct", NULL), 1);
    assert_int_equal(total_of(a, "direction", "safe_to_unsafe", NULL), 0);
    assert_int_equal(total_of(a, "workload", "math", NULL), NP);
    assert_int_equal(total_of(a, "workload", "safety", NULL), 0);
    /* the text search reads answers: "(t<1>)" is in every target answer, "<b>1</b>" in the FAIL ones */
    assert_int_equal(total_of(a, "q", "(T<1>)", NULL), NP);
    assert_int_equal(total_of(a, "q", "<b>1</b> (t<1>)", NULL), 3);
    assert_int_equal(total_of(a, "q", "<b>1</b> (base)", NULL), 2);
    assert_int_equal(total_of(a, "q", "<b>1</b>", "flipped", "1", NULL), 3); /* each flip has one FAIL side */
    assert_int_equal(total_of(a, "config", "precision=int4", NULL), NP);
    assert_int_equal(total_of(a, "config", "precision=fp8", NULL), 0);
    /* the flips are the right prompts, in the store's order */
    int st;
    json_t *j = get(a, "/api/pairs", &st, "baseline", "base", "target", "t<1>", "flipped", "1", NULL);
    assert_int_equal(st, 200);
    json_t *p = json_object_get(j, "pairs");
    assert_int_equal(json_array_size(p), 3);
    const char *dirs[3] = {"incorrect_to_correct", "correct_to_incorrect", "correct_to_incorrect"};
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(p, i);
        assert_string_equal(json_string_value(json_object_get(x, "direction")), dirs[i]);
        assert_true(json_is_true(json_object_get(x, "flipped")));
        assert_true(json_is_null(json_object_get(x, "risk"))); /* no logprobs stored */
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "baseline_label")), "incorrect");
    assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "target_label")), "correct");
    json_decref(j);
    view_api_free(a);
}

static void test_paging(void **state) {
    (void)state;
    view_api *a = view_api_new(store_path);
    int st;
    int64_t seen[NP];
    size_t ns = 0;
    for (int off = 0; off < NP; off += 3) {
        char o[16];
        snprintf(o, sizeof o, "%d", off);
        json_t *j = get(a, "/api/pairs", &st, "baseline", "base", "target", "t<1>", "limit", "3", "offset", o, NULL);
        assert_int_equal(st, 200);
        json_t *p = json_object_get(j, "pairs");
        assert_int_equal(json_array_size(p), off + 3 <= NP ? 3 : NP - off);
        for (size_t i = 0; i < json_array_size(p); i++)
            seen[ns++] = json_integer_value(json_object_get(json_array_get(p, i), "response"));
        json_decref(j);
    }
    assert_int_equal(ns, NP);
    for (size_t i = 1; i < ns; i++) assert_true(seen[i] > seen[i - 1]); /* in order, once each */
    view_api_free(a);
}

static void test_pair_and_history(void **state) {
    (void)state;
    view_api *a = view_api_new(store_path);
    int st;
    json_t *j = get(a, "/api/pairs", &st, "baseline", "base", "target", "t<1>", "flipped", "1", NULL);
    char resp[32];
    snprintf(resp, sizeof resp, "%lld",
             (long long)json_integer_value(json_object_get(json_array_get(json_object_get(j, "pairs"), 0), "response")));
    json_decref(j);
    j = get(a, "/api/pair", &st, "baseline", "base", "target", "t<1>", "response", resp, NULL);
    assert_int_equal(st, 200);
    const char *bt = json_string_value(json_object_get(json_object_get(j, "baseline_answer"), "text"));
    const char *tt = json_string_value(json_object_get(json_object_get(j, "target_answer"), "text"));
    /* the markup kept as text; the invalid byte repaired to U+FFFD */
    assert_string_equal(bt, "The answer is <b>1</b> (base) & \xef\xbf\xbd <script>x</script>");
    assert_string_equal(tt, "The answer is <b>0</b> (t<1>) & \xef\xbf\xbd <script>x</script>");
    json_t *sc = json_object_get(json_object_get(j, "baseline_answer"), "scores");
    assert_int_equal(json_array_size(sc), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(sc, 0), "evaluator")), "math");
    assert_string_equal(json_string_value(json_object_get(json_array_get(sc, 0), "label")), "fail");
    assert_non_null(json_object_get(json_object_get(j, "risk_detail"), "error")); /* no logprobs */
    json_decref(j);
    /* a response of the baseline that is not a pair of this comparison */
    j = get(a, "/api/pair", &st, "baseline", "base", "target", "t<1>", "response", "999", NULL);
    assert_int_equal(st, 404);
    json_decref(j);
    j = get(a, "/api/history", &st, "label", "t<1>", NULL);
    assert_int_equal(st, 200);
    assert_int_equal(json_array_size(json_object_get(j, "endpoint_history")), 1);
    assert_int_equal(json_array_size(json_object_get(j, "history")), 1); /* only itself: no other label of its stack */
    json_decref(j);
    j = get(a, "/api/comparisons", &st, NULL);
    assert_int_equal(st, 200);
    json_t *c = json_array_get(json_object_get(j, "comparisons"), 0);
    assert_int_equal(json_array_size(json_object_get(j, "comparisons")), 1);
    assert_int_equal(json_integer_value(json_object_get(c, "flips")), 3);
    assert_int_equal(json_integer_value(json_object_get(c, "pairs")), NP);
    json_decref(j);
    view_api_free(a);
}

static void test_bad_requests(void **state) {
    (void)state;
    view_api *a = view_api_new(store_path);
    int st;
    struct {
        const char *path, *k1, *v1, *k2, *v2;
        int status;
    } cases[] = {
        {"/api/pairs", NULL, NULL, NULL, NULL, 400},
        {"/api/pairs", "baseline", "nope", NULL, NULL, 404},
        {"/api/pairs", "baseline", "base", "limit", "0", 400},
        {"/api/pairs", "baseline", "base", "limit", "501", 400},
        {"/api/pairs", "baseline", "base", "offset", "-1", 400},
        {"/api/pairs", "baseline", "base", "offset", " 1", 400},
        {"/api/pairs", "baseline", "base", "workload", "poems", 400},
        {"/api/pairs", "baseline", "base", "direction", "sideways", 400},
        {"/api/pairs", "baseline", "base", "config", "=x", 400},
        {"/api/pairs", "baseline", "base", "flipped", "yes", 400},
        {"/api/pairs", "baseline", "base", "target", "base", 400},
        {"/api/pairs", "baseline", "base", "baseline", "base", 400},
        {"/api/pairs", "baseline", "base", "sort", "risk", 400},
        {"/api/pair", "baseline", "base", "target", "t<1>", 400},
        {"/api/history", NULL, NULL, NULL, NULL, 400},
        {"/api/history", "label", "nope", NULL, NULL, 404},
        {"/api/runs", "x", "1", NULL, NULL, 400},
        {"/api/else", NULL, NULL, NULL, NULL, 404},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = cases[i].k2 ? get(a, cases[i].path, &st, cases[i].k1, cases[i].v1, cases[i].k2, cases[i].v2, NULL)
                  : cases[i].k1 ? get(a, cases[i].path, &st, cases[i].k1, cases[i].v1, NULL)
                                : get(a, cases[i].path, &st, NULL);
        if (st != cases[i].status)
            fprintf(stderr, "case %zu %s %s=%s %s=%s: %d\n", i, cases[i].path, cases[i].k1, cases[i].v1, cases[i].k2,
                    cases[i].v2, st);
        assert_int_equal(st, cases[i].status);
        assert_true(json_is_string(json_object_get(j, "error")));
        json_decref(j);
    }
    view_api_free(a);
    /* a store that is not there: 404 naming it, nothing created */
    char missing[600];
    db_path(missing, sizeof missing, "missing.db");
    a = view_api_new(missing);
    json_t *j = get(a, "/api/runs", &st, NULL);
    assert_int_equal(st, 404);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "missing.db"));
    assert_int_equal(access(missing, F_OK), -1);
    json_decref(j);
    view_api_free(a);
}

static void test_host_rule(void **state) {
    (void)state;
    const char *allow[] = {"viewer.lan"};
    struct {
        const char *host;
        int ok;
    } cases[] = {
        {"localhost", 1}, {"localhost:8377", 1}, {"LOCALHOST:1", 1}, {"127.0.0.1:8377", 1}, {"10.1.2.3", 1},
        {"[::1]:8377", 1}, {"[::1]", 1}, {"viewer.lan:80", 1}, {"VIEWER.LAN", 1},
        {"evil.example", 0}, {"evil.example:8377", 0}, {"localhost.evil.example", 0}, {"127.0.0.1.evil.example", 0},
        {"1.2.3", 0}, {"1.2.3.4.5", 0}, {"1234.1.1.1", 0}, {"[::1", 0}, {"[evil]:1", 0}, {"localhost:x", 0},
        {"", 0}, {NULL, 0}, {"viewer.lan.evil", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = view_host_allowed(cases[i].host, allow, 1);
        if (got != cases[i].ok) fprintf(stderr, "Host %s: %d\n", cases[i].host ? cases[i].host : "(null)", got);
        assert_int_equal(got, cases[i].ok);
    }
}

static void test_assets(void **state) {
    (void)state;
    const view_asset *h = view_asset_find("/"), *js = view_asset_find("/view.js"), *css = view_asset_find("/view.css");
    assert_non_null(h);
    assert_non_null(js);
    assert_non_null(css);
    assert_ptr_equal(view_asset_find("/index.html"), h);
    assert_null(view_asset_find("/etc/passwd"));
    assert_string_equal(h->ctype, "text/html; charset=utf-8");
    assert_string_equal(js->ctype, "text/javascript; charset=utf-8");
    /* the page loads only its own files and has no inline script (the CSP allows none) */
    char *page = strndup((const char *)h->data, h->len);
    assert_non_null(strstr(page, "<script src=\"/view.js\""));
    assert_null(strstr(page, "http://"));
    assert_null(strstr(page, "https://"));
    assert_null(strstr(page, "<script>"));
    assert_null(strstr(page, "style=\""));
    free(page);
    assert_int_equal(js->data[js->len], 0); /* NUL after the bytes */
    assert_null(strstr((const char *)js->data, ".innerHTML ="));
    assert_null(strstr((const char *)js->data, "insertAdjacentHTML"));
    assert_null(strstr((const char *)js->data, "eval("));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters),   cmocka_unit_test(test_paging),  cmocka_unit_test(test_pair_and_history),
        cmocka_unit_test(test_bad_requests), cmocka_unit_test(test_host_rule), cmocka_unit_test(test_assets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
