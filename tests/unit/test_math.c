/* test_math.c - the math evaluator: a table of tricky answer formats with
 * the extraction we expect (value and rule), then numeric comparison and
 * drift_eval_math's labels and detail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "util/util.h"

typedef struct {
    const char *answer;
    const char *expect; /* "[invalid]" when nothing */
    const char *rule;   /* NULL when nothing */
} case_t;

static const case_t cases[] = {
    /* strict "#### N" */
    {"#### 540", "540", "strict"},
    {"He runs 9*60=540 meters\n#### 540", "540", "strict"},
    {"#### 1,234", "1234", "strict"},
    {"#### -5", "-5", "strict"},
    {"#### 3.50", "3.5", "strict"},
    {"#### 42.", "42", "strict"},
    {"#### 7.0", "7", "strict"},
    {"#### 7.00", "7", "strict"},
    {"#### 1,000,000", "1000000", "strict"},
    {"#### 12\n#### 13", "12", "strict"},            /* twice: first wins, as lm-eval */
    {"#### 5 apples, later 6", "5", "strict"},        /* text after the number */
    {"first 99 then #### 100 then 101", "100", "strict"},
    {"####  5", "5", "flexible"},                      /* two blanks: strict needs one */
    {"####5", "5", "flexible"},                        /* no blank: strict fails */
    {"#### $5", "5", "flexible"},                      /* "$" is outside strict's class */
    {"#### -0", "0", "strict"},
    {"#### 0.5", "0.5", "strict"},
    {"#### .5", "0.5", "strict"},
    {"#### 007", "7", "strict"},
    {"#### 1.2.3", "1.2.3", "strict"},                /* kept: not a number, never equal */
    {"#### ... #### 8", "8", "strict"},               /* a digit-less strict match is skipped */
    {"The result is 3. #### 4", "4", "strict"},        /* strict beats boxed / flexible */
    {"\\boxed{9} #### 4", "4", "strict"},
    {"#### 12345678901234567890", "12345678901234567890", "strict"},
    {"#### 2,5", "25", "strict"},                       /* comma stripped like lm-eval */
    /* \boxed{} */
    {"So the total is \\boxed{18}.", "18", "boxed"},
    {"$\\boxed{1{,}000}$", "1000", "boxed"},
    {"\\boxed{\\$1,200.50}", "1200.5", "boxed"},
    {"\\boxed{-7}", "-7", "boxed"},
    {"\\boxed{\\frac{1}{2}}", "1/2", "boxed"},
    {"\\boxed{\\dfrac{3}{4}}", "3/4", "boxed"},
    {"\\boxed{-\\frac{5}{8}}", "-5/8", "boxed"},
    {"\\boxed{\\frac34}", "3/4", "boxed"},
    {"\\boxed{25\\%}", "25", "boxed"},
    {"\\boxed{18 \\text{ dollars}}", "18", "boxed"},
    {"\\boxed{x = 5}", "5", "boxed"},
    {"first \\boxed{3} then \\boxed{4}", "4", "boxed"},  /* the last box */
    {"\\boxed{\\boxed{6}}", "6", "boxed"},
    {"\\boxed 12", "12", "boxed"},
    {"\\fbox{77}", "77", "boxed"},
    {"\\boxed{}; the answer is 3", "3", "answer-is"},     /* empty box falls through */
    {"\\boxed{x} and 10 more", "10", "flexible"},
    {"\\boxed{3.0}", "3", "boxed"},
    {"\\boxed{1,000.00}", "1000", "boxed"},
    {"\\boxed{\\text{The answer is } 42}", "42", "boxed"},
    {"The answer: $\\boxed{2.5}$ hours, not 3", "2.5", "boxed"},
    {"\\boxed{10}\n\nCheck: 10 + 2 = 12", "10", "boxed"},
    {"\\boxed{12", "12", "flexible"},                     /* unbalanced: not a box */
    {"\\boxed{-\\$40}", "-40", "boxed"},
    {"\\boxed{\\mathbf{64}}", "64", "boxed"},
    /* "the answer is" */
    {"The answer is 42.", "42", "answer-is"},
    {"the answer is 42", "42", "answer-is"},
    {"THE ANSWER IS 42", "42", "answer-is"},
    {"The final answer is 17", "17", "answer-is"},
    {"The answer is: 8", "8", "answer-is"},
    {"The answer is **15**.", "15", "answer-is"},
    {"The answer is $1,250.", "1250", "answer-is"},
    {"The answer is -$5.", "-5", "answer-is"},
    {"The answer is $-5$.", "-5", "answer-is"},
    {"The answer is 3/4 of the cake", "3/4", "answer-is"},
    {"The answer is 12 dollars and 3 cents", "12", "answer-is"},
    {"The answer is 5. Then 6 more.", "5", "answer-is"},
    {"The answer is 5. Actually, the answer is 6.", "6", "answer-is"},  /* last one */
    {"The answer is 2.50 dollars", "2.5", "answer-is"},
    {"The answer is 100%", "100", "answer-is"},
    {"The answer is\n  27", "27", "answer-is"},
    {"The answer is \\(9\\)", "9", "answer-is"},
    {"The answer is seven; 7 apples.", "7", "flexible"},
    {"Theanswer is 5 or 6", "6", "flexible"},           /* not the phrase */
    {"The answer is 0.", "0", "answer-is"},
    /* flexible: last number */
    {"There are 3 apples and 5 pears, so 8 fruits.", "8", "flexible"},
    {"She pays $1,200.50 in total.", "1200.5", "flexible"},
    {"It costs $15", "15", "flexible"},
    {"Temperature dropped to -12 degrees", "-12", "flexible"},
    {"The price is 3.75", "3.75", "flexible"},
    {"So 50% of them", "50", "flexible"},
    {"Total: 1,000,000 people", "1000000", "flexible"},
    {"He is 9 years old.", "9", "flexible"},
    {"Answer 42...", "42", "flexible"},
    {"42", "42", "flexible"},
    {"7", "7", "flexible"},
    {"-3", "-3", "flexible"},
    {"1/2 of 10 is 5", "5", "flexible"},
    {"half: 1/2", "2", "flexible"},                     /* lm-eval semantics: last match */
    {"10 - 4 = 6", "6", "flexible"},
    {"x=-4", "-4", "flexible"},
    {"5-3", "-3", "flexible"},                          /* lm-eval's regex reads "-3" */
    {"It took 2.5 hours.", "2.5", "flexible"},
    {"It took 2.50 hours.", "2.5", "flexible"},
    {"Result 10.0", "10", "flexible"},
    {"Result 10.", "10", "flexible"},
    {"from 1990 to 2000, 10 years", "10", "flexible"},
    {"Value: 0.001", "0.001", "flexible"},
    {"pi is 3.14159", "3.14159", "flexible"},
    {"the number 1e5", "5", "flexible"},
    {"Total = $ 40", "40", "flexible"},
    {"It is 8 o'clock...", "8", "flexible"},
    {"Costs 12.5$", "12.5", "flexible"},
    {"5 cats\n\n", "5", "flexible"},
    {"Answer:\n**36**", "36", "flexible"},
    {"2,500 and then ...", "2500", "flexible"},         /* digit-less "..." skipped */
    {"€30 for 2 people", "2", "flexible"},
    {"１２３ (full-width) and 4", "4", "flexible"},
    {"1,2,3", "123", "flexible"},                        /* lm-eval strips commas */
    {"(18)", "18", "flexible"},
    {"$18.00.", "18", "flexible"},
    {"-$18", "-18", "flexible"},
    {"a 40-hour week", "40", "flexible"},               /* a hyphen after a number is no minus */
    /* invalid */
    {"", "[invalid]", NULL},
    {"no numbers here", "[invalid]", NULL},
    {"...", "[invalid]", NULL},
    {"$,", "[invalid]", NULL},
    {"####", "[invalid]", NULL},
    {"#### x", "[invalid]", NULL},
    {"The answer is unknown.", "[invalid]", NULL},
    {"\\boxed{}", "[invalid]", NULL},
};

static void test_table(void **state) {
    (void)state;
    size_t n = sizeof cases / sizeof cases[0];
    assert_true(n >= 100);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        char out[128];
        const char *rule = drift_math_extract(cases[i].answer, out, sizeof out);
        int ok = strcmp(out, cases[i].expect) == 0 &&
                 ((rule == NULL && cases[i].rule == NULL) || (rule && cases[i].rule && !strcmp(rule, cases[i].rule)));
        if (!ok) {
            fprintf(stderr, "case %zu %s: got \"%s\" (%s), want \"%s\" (%s)\n", i, cases[i].answer, out,
                    rule ? rule : "null", cases[i].expect, cases[i].rule ? cases[i].rule : "null");
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_raw_kept(void **state) {
    (void)state;
    char out[64], raw[64];
    assert_string_equal(drift_math_extract_ex("She pays $1,200.50 in total.", out, sizeof out, raw, sizeof raw),
                        "flexible");
    assert_string_equal(raw, "$1,200.50");
    assert_string_equal(out, "1200.5");
    assert_string_equal(drift_math_extract_ex("x $\\boxed{1{,}000}$", out, sizeof out, raw, sizeof raw), "boxed");
    assert_string_equal(raw, "\\boxed{1{,}000}");
    /* small buffers truncate, never overflow */
    char tiny[3];
    drift_math_extract("#### 123456", tiny, sizeof tiny);
    assert_string_equal(tiny, "12");
    assert_null(drift_math_extract(NULL, out, sizeof out));
    assert_string_equal(out, "[invalid]");
}

static void test_equal(void **state) {
    (void)state;
    assert_true(drift_math_equal("540", "540"));
    assert_false(drift_math_equal("540", "541"));
    assert_true(drift_math_equal("0.5", "1/2"));
    assert_true(drift_math_equal("3/4", "0.75"));
    assert_true(drift_math_equal("0.333333333333", "1/3"));
    assert_false(drift_math_equal("0.33", "1/3"));
    assert_true(drift_math_equal("2.5", "2.5000000000001"));
    /* integers compare exactly, whatever their size */
    assert_false(drift_math_equal("1000000001", "1000000000"));
    assert_true(drift_math_equal("12345678901234567890", "12345678901234567890"));
    assert_false(drift_math_equal("12345678901234567890", "12345678901234567891"));
    assert_false(drift_math_equal("1.2.3", "1.2"));
    assert_false(drift_math_equal("-5", "5"));
    assert_false(drift_math_equal("1/0", "1"));
}

static void check_eval(const char *answer, const char *ref, int label, const char *extracted) {
    drift_eval_result r;
    drift_error err = {0};
    assert_int_equal(drift_eval_math(answer, ref, &r, &err), DRIFT_OK);
    assert_int_equal(r.label, label);
    assert_true(r.value == (label == DRIFT_LABEL_PASS ? 1.0 : 0.0));
    json_error_t je;
    json_t *d = json_loads(r.detail_json, 0, &je);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "extracted")), extracted);
    assert_non_null(json_object_get(d, "expected"));
    assert_non_null(json_object_get(d, "rule"));
    json_decref(d);
    drift_eval_result_clear(&r);
}

static void test_eval(void **state) {
    (void)state;
    check_eval("#### 540", "{\"answer\":\"540\"}", DRIFT_LABEL_PASS, "540");
    check_eval("so 541", "{\"answer\":\"540\"}", DRIFT_LABEL_FAIL, "541");
    check_eval("It is $1,200.00", "{\"answer\":\"1200\"}", DRIFT_LABEL_PASS, "1200");
    check_eval("#### 1,200", "{\"answer\":\"1,200\"}", DRIFT_LABEL_PASS, "1200");
    check_eval("\\boxed{\\frac{1}{2}}", "{\"answer\":\"0.5\"}", DRIFT_LABEL_PASS, "1/2");
    check_eval("nothing", "{\"answer\":\"3\"}", DRIFT_LABEL_FAIL, "[invalid]");
    check_eval("#### 3", "{\"answer\":3}", DRIFT_LABEL_PASS, "3");
    check_eval("#### 2.5", "{\"answer\":2.5}", DRIFT_LABEL_PASS, "2.5");
    check_eval("#### 18", "{\"solution\":\"3*6=18\\n#### 18\"}", DRIFT_LABEL_PASS, "18");
    check_eval("The answer is 7", "{\"answer\":\"#### 7\"}", DRIFT_LABEL_PASS, "7");

    drift_eval_result r;
    drift_error err = {0};
    assert_int_equal(drift_eval_math("#### 1", "not json", &r, &err), DRIFT_ERR_PARSE);
    assert_int_equal(r.label, DRIFT_LABEL_ERROR);
    assert_non_null(strstr(err.msg, "math"));
    drift_eval_result_clear(&r);
    assert_int_equal(drift_eval_math("#### 1", "{\"answer\":\"none\"}", &r, &err), DRIFT_ERR_PARSE);
    assert_int_equal(r.label, DRIFT_LABEL_ERROR);
    assert_non_null(strstr(err.msg, "none"));
    drift_eval_result_clear(&r);
    assert_int_equal(drift_eval_math("#### 1", "{}", &r, &err), DRIFT_ERR_PARSE);
    drift_eval_result_clear(&r);
}

static void *thread_main(void *arg) {
    long bad = 0;
    for (int k = 0; k < 200; k++) {
        char out[64];
        const char *rule = drift_math_extract("a 3 b #### 1,234 c", out, sizeof out);
        if (!rule || strcmp(out, "1234") != 0) bad++;
    }
    *(long *)arg = bad;
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    pthread_t t[4];
    long bad[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_main, &bad[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bad[i], 0);
    }
}

/* The paper's 500 GSM8K prompts: each full solution ("... #### N") must be
 * judged correct against its own answer, and a wrong number must not. */
static void test_paper_suite(void **state) {
    (void)state;
    const char *shared = getenv("DRIFT_SHARED");
    if (!shared) skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/datasets/gsm8k_prompts.jsonl", shared);
    FILE *f = fopen(path, "r");
    if (!f) skip();
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        assert_non_null(o);
        const char *sol = json_string_value(json_object_get(o, "full_solution"));
        json_t *ref = json_pack("{s:O}", "answer", json_object_get(o, "answer"));
        char *rj = json_dumps(ref, 0);
        drift_eval_result r;
        assert_int_equal(drift_eval_math(sol, rj, &r, NULL), DRIFT_OK);
        if (r.label != DRIFT_LABEL_PASS) fail_msg("%s: %s", json_string_value(json_object_get(o, "prompt_id")), r.detail_json);
        assert_non_null(strstr(r.detail_json, "\"rule\":\"strict\""));
        drift_eval_result_clear(&r);
        char *wrong = util_asprintf("%s\nActually the answer is 123456789.", sol);
        /* strict still wins: the lm-eval rule looks at "####" first */
        assert_int_equal(drift_eval_math(wrong, rj, &r, NULL), DRIFT_OK);
        assert_int_equal(r.label, DRIFT_LABEL_PASS);
        drift_eval_result_clear(&r);
        free(wrong);
        wrong = util_asprintf("The answer is %s1.", json_string_value(json_object_get(o, "answer")));
        assert_int_equal(drift_eval_math(wrong, rj, &r, NULL), DRIFT_OK);
        assert_int_equal(r.label, DRIFT_LABEL_FAIL);
        drift_eval_result_clear(&r);
        free(wrong);
        free(rj);
        json_decref(ref);
        json_decref(o);
        n++;
    }
    free(line);
    fclose(f);
    assert_int_equal(n, 500);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table), cmocka_unit_test(test_raw_kept), cmocka_unit_test(test_equal),
        cmocka_unit_test(test_eval), cmocka_unit_test(test_threads), cmocka_unit_test(test_paper_suite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
