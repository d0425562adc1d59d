/* compare_fixture.h - builds a real store with two runs whose labels,
 * errors and embeddings are known, for test_compare.c and test_report.c.
 *
 * Known answer (baseline "base" -> target "targ"):
 *   math m0..m19: base PASS m0..m13, FAIL m14..m19; targ flips m0,m1,m2 to
 *     FAIL and m14 to PASS; m5: targ request error; m6: base evaluator
 *     ERROR; m7: targ unscored.  -> n 17, errors 2, unscored 1, flips 4
 *     (c->i 3, i->c 1), base acc 11/17, targ acc 9/17, McNemar(3,1)=0.625
 *   safety s0..s9: base safe s0..s5; targ s0 unsafe, s6 s7 safe
 *     -> n 10, flips 3 (safe->unsafe 1, unsafe->safe 2), acc 0.6 -> 0.7
 *   chat c0..c5 (embedder "emb-test", dim 4): SDR c0 0, c1 1, c2 0.2,
 *     c3 0.4; c4 targ has no embedding (unscored); c5 base request error
 *     -> n 4, drifted 2 (c1, c3), sdr_mean 0.4
 *   long_context l0..l3: l0 no ground truth (NONE on both); l1 PASS/PASS,
 *     l2 PASS/FAIL, l3 FAIL/FAIL -> n 3, flips 1, unscored 1
 *   base also answers x0 (math), which targ never ran: not paired.
 * A third run "other" answers only x1: it shares nothing with "base".
 * Built with tests/support/store_builder.h. */
#ifndef COMPARE_FIXTURE_H
#define COMPARE_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/store.h"
#include "support/store_builder.h"
#include "util/util.h"

typedef struct fx_item {
    const char *id;
    drift_workload wl;
    int base_label, targ_label;   /* drift_label; 99 = request error; 98 = no score */
    float base_vec[4], targ_vec[4];
    int targ_vec_missing;
} fx_item;

#define FX_ERR 99
#define FX_NOSCORE 98
#define P DRIFT_LABEL_PASS
#define F DRIFT_LABEL_FAIL
#define N DRIFT_LABEL_NONE
#define E DRIFT_LABEL_ERROR

static const fx_item fx_items[] = {
    {"m0", DRIFT_WL_MATH, P, F, {0}, {0}, 0},      {"m1", DRIFT_WL_MATH, P, F, {0}, {0}, 0},
    {"m2", DRIFT_WL_MATH, P, F, {0}, {0}, 0},      {"m3", DRIFT_WL_MATH, P, P, {0}, {0}, 0},
    {"m4", DRIFT_WL_MATH, P, P, {0}, {0}, 0},      {"m5", DRIFT_WL_MATH, P, FX_ERR, {0}, {0}, 0},
    {"m6", DRIFT_WL_MATH, E, P, {0}, {0}, 0},      {"m7", DRIFT_WL_MATH, P, FX_NOSCORE, {0}, {0}, 0},
    {"m8", DRIFT_WL_MATH, P, P, {0}, {0}, 0},      {"m9", DRIFT_WL_MATH, P, P, {0}, {0}, 0},
    {"m10", DRIFT_WL_MATH, P, P, {0}, {0}, 0},     {"m11", DRIFT_WL_MATH, P, P, {0}, {0}, 0},
    {"m12", DRIFT_WL_MATH, P, P, {0}, {0}, 0},     {"m13", DRIFT_WL_MATH, P, P, {0}, {0}, 0},
    {"m14", DRIFT_WL_MATH, F, P, {0}, {0}, 0},     {"m15", DRIFT_WL_MATH, F, F, {0}, {0}, 0},
    {"m16", DRIFT_WL_MATH, F, F, {0}, {0}, 0},     {"m17", DRIFT_WL_MATH, F, F, {0}, {0}, 0},
    {"m18", DRIFT_WL_MATH, F, F, {0}, {0}, 0},     {"m19", DRIFT_WL_MATH, F, F, {0}, {0}, 0},
    {"s0", DRIFT_WL_SAFETY, P, F, {0}, {0}, 0},    {"s1", DRIFT_WL_SAFETY, P, P, {0}, {0}, 0},
    {"s2", DRIFT_WL_SAFETY, P, P, {0}, {0}, 0},    {"s3", DRIFT_WL_SAFETY, P, P, {0}, {0}, 0},
    {"s4", DRIFT_WL_SAFETY, P, P, {0}, {0}, 0},    {"s5", DRIFT_WL_SAFETY, P, P, {0}, {0}, 0},
    {"s6", DRIFT_WL_SAFETY, F, P, {0}, {0}, 0},    {"s7", DRIFT_WL_SAFETY, F, P, {0}, {0}, 0},
    {"s8", DRIFT_WL_SAFETY, F, F, {0}, {0}, 0},    {"s9", DRIFT_WL_SAFETY, F, F, {0}, {0}, 0},
    {"c0", DRIFT_WL_CHAT, N, N, {1, 0, 0, 0}, {2, 0, 0, 0}, 0},
    {"c1", DRIFT_WL_CHAT, N, N, {1, 0, 0, 0}, {0, 1, 0, 0}, 0},
    {"c2", DRIFT_WL_CHAT, N, N, {1, 0, 0, 0}, {0.8f, 0.6f, 0, 0}, 0},
    {"c3", DRIFT_WL_CHAT, N, N, {1, 0, 0, 0}, {0.6f, 0.8f, 0, 0}, 0},
    {"c4", DRIFT_WL_CHAT, N, N, {1, 0, 0, 0}, {1, 0, 0, 0}, 1},
    {"c5", DRIFT_WL_CHAT, FX_ERR, N, {1, 0, 0, 0}, {1, 0, 0, 0}, 0},
    {"l0", DRIFT_WL_LONG, N, N, {0}, {0}, 0},      {"l1", DRIFT_WL_LONG, P, P, {0}, {0}, 0},
    {"l2", DRIFT_WL_LONG, P, F, {0}, {0}, 0},      {"l3", DRIFT_WL_LONG, F, F, {0}, {0}, 0},
    {"x0", DRIFT_WL_MATH, P, -100, {0}, {0}, 0},   /* base only */
};
#undef P
#undef F
#undef N
#undef E

#define FX_N (sizeof fx_items / sizeof fx_items[0])

static char *fx_dir;

static const char *fx_path(const char *name) {
    static char buf[512];
    if (!fx_dir) fx_dir = sb_tmpdir("driftcmp.");
    snprintf(buf, sizeof buf, "%s/%s", fx_dir, name);
    return buf;
}

static void fx_cleanup(void) {
    if (!fx_dir) return;
    sb_rmtree(fx_dir);
    free(fx_dir);
    fx_dir = NULL;
}

static drift_suite *fx_suite(const char *name, const char *const *ids, const drift_workload *wls,
                             const char *const *refs, size_t n) {
    drift_suite *s = sb_suite_new(name, name, "test", n);
    for (size_t i = 0; i < n; i++) sb_prompt_set(s, i, ids[i], wls[i], NULL, refs ? refs[i] : NULL);
    return s;
}

static int64_t fx_run(drift_store *st, const char *label, const char *config) {
    drift_run_info ri = {0};
    ri.label = (char *)label;
    ri.target = (char *)"http://127.0.0.1:9/v1?model=m";
    ri.config_json = (char *)config;
    ri.decoding_json = (char *)"{\"temperature\":0}";
    ri.templates_json = (char *)"{}";
    ri.suites_json = (char *)"[\"fx\"]";
    return sb_run_begin(st, &ri);
}

/* Writes one side (0 base, 1 targ) of the fixture. */
static void fx_side(drift_store *st, int64_t run, const int64_t *rowids, int side) {
    drift_error err = {0};
    drift_answer *rs = calloc(FX_N, sizeof *rs);
    size_t nr = 0;
    for (size_t i = 0; i < FX_N; i++) {
        int lab = side ? fx_items[i].targ_label : fx_items[i].base_label;
        if (lab == -100) continue;
        drift_answer *r = &rs[nr++];
        r->prompt_rowid = rowids[i];
        r->prompt_tokens = r->completion_tokens = -1;
        r->attempts = 1;
        if (lab == FX_ERR) {
            r->error = util_asprintf("HTTP 500: injected for %s", fx_items[i].id);
            r->http_status = 500;
        } else {
            r->text = util_asprintf("%s answer of %s: shared words here, then %s", side ? "target" : "baseline",
                                     fx_items[i].id, side ? "TARGET TAIL" : "BASE TAIL");
            r->http_status = 200;
        }
    }
    sb_put_answers(st, run, rs, nr);
    for (size_t i = 0; i < nr; i++) {
        free(rs[i].text);
        free(rs[i].error);
    }
    free(rs);
    drift_scored_set set;
    sb_check(drift_store_load_scored(st, run, &set, &err), &err, "load_scored");
    drift_score *sc = calloc(set.n, sizeof *sc);
    size_t ns = 0;
    for (size_t k = 0; k < set.n; k++) {
        size_t i = 0;
        while (i < FX_N && strcmp(fx_items[i].id, set.rows[k].prompt_id) != 0) i++;
        int lab = side ? fx_items[i].targ_label : fx_items[i].base_label;
        if (lab == FX_ERR || lab == FX_NOSCORE) continue;
        if (fx_items[i].wl == DRIFT_WL_CHAT) {
            if (!(side && fx_items[i].targ_vec_missing)) {
                sb_check(drift_store_put_embedding(st, set.rows[k].response_id, "emb-test",
                                                   side ? fx_items[i].targ_vec : fx_items[i].base_vec, 4, &err),
                         &err, "put_embedding");
            }
            sc[ns++] = (drift_score){set.rows[k].response_id, "emb-test", DRIFT_LABEL_NONE, NAN, NULL};
            continue;
        }
        const char *ev = fx_items[i].wl == DRIFT_WL_SAFETY ? "guard:test" :
                         fx_items[i].wl == DRIFT_WL_LONG   ? "longctx-f1" : "math";
        sc[ns++] = (drift_score){set.rows[k].response_id, ev, lab, lab == DRIFT_LABEL_PASS ? 1.0 : 0.0, NULL};
    }
    sb_put_scores(st, sc, ns);
    free(sc);
    drift_scored_set_clear(&set);
}

/* Creates the fixture store at path; returns it open. */
static drift_store *fx_build(const char *path) {
    drift_store *st = sb_open_new(path);
    const char *ids[FX_N + 1];
    drift_workload wls[FX_N + 1];
    for (size_t i = 0; i < FX_N; i++) {
        ids[i] = fx_items[i].id;
        wls[i] = fx_items[i].wl;
    }
    ids[FX_N] = "x1";
    wls[FX_N] = DRIFT_WL_MATH;
    drift_suite *su = fx_suite("fx", ids, wls, NULL, FX_N + 1);
    int64_t rowids[FX_N + 1];
    sb_put_prompts(st, su, rowids);
    drift_suite_free(su);
    int64_t base = fx_run(st, "base", "{\"model\":\"m\",\"hardware\":\"h100\",\"precision\":\"fp16\"}");
    int64_t targ = fx_run(st, "targ", "{\"model\":\"m\",\"hardware\":\"b200\",\"precision\":\"fp8\"}");
    fx_side(st, base, rowids, 0);
    fx_side(st, targ, rowids, 1);
    int64_t other = fx_run(st, "other", "{}");
    drift_answer r = {.prompt_rowid = rowids[FX_N], .text = (char *)"#### 1", .prompt_tokens = -1,
                        .completion_tokens = -1, .http_status = 200, .attempts = 1};
    sb_put_answers(st, other, &r, 1);
    return st;
}

#endif
