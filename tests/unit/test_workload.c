/* test_workload.c - the workload traits table (suite/workload.c): every
 * workload has every trait; its name and aliases go through the parser and
 * back; the default budgets are the README's ("defaults: safety 1%, ...");
 * every style names a direction with the same two words; the paper's order
 * is a permutation with the pairwise workload last; every workload has an
 * evaluator method (eval/evaluator.c) with what its way of judging needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "eval/evaluator.h"
#include "suite/workload.h"

static void test_every_trait(void **state) {
    (void)state;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const wl_traits *t = wl_traits_of((drift_workload)w);
        assert_non_null(t);
        assert_non_null(t->name);
        assert_non_null(t->aliases);
        for (int s = 0; s < WL_DIR_STYLES; s++) {
            assert_non_null(t->down.name[s]);
            assert_non_null(t->up.name[s]);
        }
        if (!t->pairwise) {
            assert_non_null(t->pass_word);
            assert_non_null(t->fail_word);
            assert_int_not_equal(t->taxonomy, WL_CLASS_SEMANTIC);
        } else {
            assert_int_equal(t->taxonomy, WL_CLASS_SEMANTIC);
        }
        assert_true(t->default_budget > 0 && t->default_budget < 1);
        assert_true(t->paper_rate_pct > 0 && t->paper_rate_pct < 100);
        assert_true(t->paper_rank >= 0 && t->paper_rank < DRIFT_WL_COUNT);
        for (int api = 0; api < 2; api++) {
            assert_non_null(t->template_id[api]);
            assert_memory_equal(t->template_id[api], t->name, strlen(t->name));
            assert_int_equal(t->template_id[api][strlen(t->name)], '/');
            assert_non_null(strstr(t->template_id[api], api ? "/chat/" : "/completions/"));
        }
    }
    assert_null(wl_traits_of(DRIFT_WL_UNKNOWN));
    assert_null(wl_traits_of(DRIFT_WL_COUNT));
}

static void test_names_round_trip(void **state) {
    (void)state;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const wl_traits *t = wl_traits_of((drift_workload)w);
        assert_string_equal(t->name, drift_workload_name((drift_workload)w));
        assert_int_equal(drift_workload_parse(t->name), w);
        for (const char *const *a = t->aliases; *a; a++) assert_int_equal(drift_workload_parse(*a), w);
    }
    assert_int_equal(drift_workload_parse("no-such-workload"), DRIFT_WL_UNKNOWN);
}

/* "defaults:\n  safety 1%, code 0.5%, ...)" in the README, read from the source tree */
static void test_budgets_are_readme_defaults(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    if (!src) skip();
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", src);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *d = strstr(text, "budget (defaults:");
    assert_non_null(d);
    d += strlen("budget (defaults:");
    int seen = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const char *name = wl_traits_of((drift_workload)w)->name;
        char key[64];
        snprintf(key, sizeof key, " %s ", name);
        const char *p = strstr(d, key);
        assert_non_null(p);
        assert_true(p - d < 200); /* within the defaults' parenthesis */
        double pct = strtod(p + strlen(key), NULL);
        assert_true(fabs(pct / 100.0 - wl_traits_of((drift_workload)w)->default_budget) < 1e-12);
        assert_true(fabs(drift_default_budget((drift_workload)w) - pct / 100.0) < 1e-12);
        seen++;
    }
    assert_int_equal(seen, DRIFT_WL_COUNT);
}

/* One pair of words per direction, whatever the style. */
static void test_direction_names_agree(void **state) {
    (void)state;
    static const char *const sep[WL_DIR_STYLES] = {"_to_", "->", "\xE2\x86\x92", "&#8594;"};
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const wl_traits *t = wl_traits_of((drift_workload)w);
        for (int s = 0; s < WL_DIR_STYLES; s++) {
            char want[128];
            if (t->pairwise) {
                snprintf(want, sizeof want, "semantic%sdrift", s == WL_DIR_KEY ? "_" : " ");
                assert_string_equal(wl_dir_name((drift_workload)w, -1, (wl_dir_style)s), want);
                assert_string_equal(wl_dir_name((drift_workload)w, 1, (wl_dir_style)s), want);
                continue;
            }
            snprintf(want, sizeof want, "%s%s%s", t->pass_word, sep[s], t->fail_word);
            assert_string_equal(wl_dir_name((drift_workload)w, -1, (wl_dir_style)s), want);
            snprintf(want, sizeof want, "%s%s%s", t->fail_word, sep[s], t->pass_word);
            assert_string_equal(wl_dir_name((drift_workload)w, 1, (wl_dir_style)s), want);
        }
        assert_string_equal(wl_dir_name((drift_workload)w, 0, WL_DIR_TEXT), "semantic drift");
    }
    assert_string_equal(wl_dir_name(DRIFT_WL_SAFETY, -1, WL_DIR_KEY), "safe_to_unsafe");
    assert_string_equal(wl_dir_name(DRIFT_WL_MATH, 1, WL_DIR_HTML), "incorrect&#8594;correct");
}

static void test_paper_order(void **state) {
    (void)state;
    int seen[DRIFT_WL_COUNT] = {0};
    for (int r = 0; r < DRIFT_WL_COUNT; r++) {
        drift_workload w = wl_by_paper_rank(r);
        assert_true(w >= 0 && w < DRIFT_WL_COUNT);
        seen[w]++;
        if (wl_traits_of(w)->pairwise) assert_int_equal(r, DRIFT_WL_COUNT - 1);
    }
    for (int w = 0; w < DRIFT_WL_COUNT; w++) assert_int_equal(seen[w], 1);
    assert_int_equal(wl_by_paper_rank(DRIFT_WL_COUNT), DRIFT_WL_UNKNOWN);
}

/* Every workload has an evaluator method with what its way of judging needs. */
static void test_evaluator_methods(void **state) {
    (void)state;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        const eval_method *m = eval_method_of((drift_workload)w);
        assert_non_null(m);
        assert_true(m->name || m->state_name); /* something names the scores */
        switch (m->how) {
        case EVAL_EACH:
        case EVAL_THREADS: assert_non_null(m->judge); break;
        case EVAL_BATCH: assert_non_null(m->judge_batch); break;
        case EVAL_EMBED: assert_non_null(m->embed); break;
        default: fail();
        }
        /* a pairwise workload's verdict is at compare time: its scorer embeds */
        assert_int_equal(m->how == EVAL_EMBED, wl_traits_of((drift_workload)w)->pairwise);
        /* a workload that runs code says in which isolation */
        assert_int_equal(m->isolation != NULL, wl_traits_of((drift_workload)w)->runs_code);
        if (m->open) {
            assert_non_null(m->unavailable);
            assert_non_null(m->no_spec);
        }
        if (m->how != EVAL_EACH) assert_non_null(m->failed);
    }
    assert_null(eval_method_of(DRIFT_WL_UNKNOWN));
    assert_string_equal(eval_method_name(eval_method_of(DRIFT_WL_MATH), NULL), "math");
    assert_string_equal(eval_method_name(eval_method_of(DRIFT_WL_LONG), NULL), "longctx-f1");
    assert_string_equal(eval_method_name(eval_method_of(DRIFT_WL_CODE), NULL), "code-pass@1");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_trait),
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_budgets_are_readme_defaults),
        cmocka_unit_test(test_direction_names_agree),
        cmocka_unit_test(test_paper_order),
        cmocka_unit_test(test_evaluator_methods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
