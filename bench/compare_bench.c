/* compare_bench.c - times score (math) and compare on a store of the
 * paper's size: two runs x 236,985 responses (2,257 prompts of the five
 * workloads, 164 code / 500 math / 520 safety / 973 chat / 100 long, x 105
 * replicates), with labels for code/safety/long, chat embeddings (dim 64)
 * and math answers to score. Flip probabilities follow the paper's mean
 * rates (math 16.7%, safety 8%, long 1.6%, code 0.1%).
 *
 *   bench_compare_bench [DB_PATH] [--keep]
 * Prints: build time, score time (math), load_scored time for both runs,
 * compare time (total, and without the two loads), report (json) time. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/compare.h"
#include "driftbench/eval.h"
#include "driftbench/pipeline.h"
#include "driftbench/report.h"
#include "driftbench/store.h"
#include "store/store_internal.h" /* store_sqlite: one transaction around the fixture's writes */
#include "support/store_builder.h"
#include "util/util.h"

#define REPL 105
#define DIM 64

static const struct {
    drift_workload wl;
    int n;
    double flip;
} mix[] = {{DRIFT_WL_CODE, 164, 0.0009}, {DRIFT_WL_MATH, 500, 0.1674}, {DRIFT_WL_SAFETY, 520, 0.0797},
           {DRIFT_WL_CHAT, 973, 0.0}, {DRIFT_WL_LONG, 100, 0.0155}};

/* CPU time of this process (all threads), ms: the machine may be shared. */
static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void check(drift_status rc, const drift_error *err, const char *what) {
    if (rc != DRIFT_OK) {
        fprintf(stderr, "%s: %s\n", what, err->msg);
        exit(2);
    }
}

int main(int argc, char **argv) {
    const char *path = "/tmp/driftbench_compare_bench.db";
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keep")) keep = 1;
        else path = argv[i];
    }
    drift_error err = {0};
    drift_store *st = sb_open_new(path);
    double t0 = util_now_ms();

    /* prompts */
    size_t np = 0;
    for (size_t k = 0; k < sizeof mix / sizeof mix[0]; k++) np += (size_t)mix[k].n;
    drift_suite su = {.name = "bench", .source = "bench", .format = "bench"};
    su.prompts = calloc(np, sizeof *su.prompts);
    su.n = np;
    double *flip_p = calloc(np, sizeof *flip_p);
    size_t idx = 0;
    for (size_t k = 0; k < sizeof mix / sizeof mix[0]; k++)
        for (int i = 0; i < mix[k].n; i++, idx++) {
            char id[64], input[64], ref[64];
            snprintf(id, sizeof id, "%s_%03d", drift_workload_name(mix[k].wl), i);
            snprintf(input, sizeof input, "question %zu", idx);
            snprintf(ref, sizeof ref, "{\"answer\":\"%zu\"}", idx * 7);
            sb_prompt_fill(&su.prompts[idx], id, mix[k].wl, input, mix[k].wl == DRIFT_WL_MATH ? ref : "{}");
            flip_p[idx] = mix[k].flip;
        }
    int64_t *rowids = calloc(np, sizeof *rowids);
    sb_put_prompts(st, &su, rowids);

    const char *labels[2] = {"h100-fp16-vllm", "b200-fp8-sglang"};
    int64_t run[2];
    for (int r = 0; r < 2; r++) {
        drift_run_info ri = {.label = (char *)labels[r], .target = (char *)"http://127.0.0.1:1/v1?model=m",
                             .config_json = (char *)"{\"model\":\"llama-3.1-8b\"}",
                             .decoding_json = (char *)"{\"temperature\":0}", .templates_json = (char *)"{}",
                             .suites_json = (char *)"[\"bench\"]"};
        run[r] = sb_run_begin(st, &ri);
    }

    /* base label per (prompt, replicate) and whether the target flips */
    util_rng rng;
    util_rng_seed(&rng, 42);
    size_t total = np * REPL;
    unsigned char *base_ok = malloc(total), *flips = malloc(total);
    for (size_t i = 0; i < total; i++) {
        base_ok[i] = util_rng_uniform(&rng) < 0.7;
        flips[i] = util_rng_uniform(&rng) < flip_p[i / REPL];
    }
    drift_answer *rs = calloc(total, sizeof *rs);
    for (int r = 0; r < 2; r++) {
        for (size_t i = 0; i < total; i++) {
            size_t p = i / REPL;
            int ok = base_ok[i] ^ (r == 1 && flips[i]);
            rs[i].prompt_rowid = rowids[p];
            rs[i].replicate = (int)(i % REPL);
            rs[i].prompt_tokens = rs[i].completion_tokens = -1;
            rs[i].http_status = 200;
            rs[i].attempts = 1;
            if (su.prompts[p].workload == DRIFT_WL_MATH)
                rs[i].text = util_asprintf("Step by step: %zu + 1 = %zu.\n#### %zu", p, p + 1, ok ? p * 7 : p * 7 + 1);
            else
                rs[i].text = util_asprintf("answer %zu of run %d", i, r);
        }
        sb_put_answers(st, run[r], rs, total);
        for (size_t i = 0; i < total; i++) free(rs[i].text);
    }
    free(rs);

    /* labels for code/safety/long and chat embeddings + NONE rows */
    sqlite3 *db = store_sqlite(st);
    float vec[DIM];
    for (int r = 0; r < 2; r++) {
        drift_scored_set set;
        check(drift_store_load_scored(st, run[r], &set, &err), &err, "load_scored");
        drift_score *sc = calloc(set.n, sizeof *sc);
        size_t ns = 0;
        sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        for (size_t k = 0; k < set.n; k++) {
            const drift_scored *row = &set.rows[k];
            size_t lo = 0, hi = np; /* rowids ascend in insertion order */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (rowids[mid] < row->prompt_rowid) lo = mid + 1;
                else hi = mid;
            }
            size_t p = lo;
            size_t i = p * REPL + (size_t)row->replicate;
            int ok = base_ok[i] ^ (r == 1 && flips[i]);
            switch (row->workload) {
            case DRIFT_WL_CODE: sc[ns++] = (drift_score){row->response_id, "code-pass@1", ok, ok, NULL}; break;
            case DRIFT_WL_SAFETY: sc[ns++] = (drift_score){row->response_id, "guard:bench", ok, NAN, NULL}; break;
            case DRIFT_WL_LONG: sc[ns++] = (drift_score){row->response_id, "longctx-f1", ok, ok ? 0.8 : 0.2, NULL}; break;
            case DRIFT_WL_CHAT: {
                util_rng vr;
                util_rng_seed(&vr, i); /* the same base vector in both runs */
                for (int d = 0; d < DIM; d++) vec[d] = (float)(util_rng_uniform(&vr) - 0.5);
                if (r == 1) {
                    util_rng nr;
                    util_rng_seed(&nr, i + 1000000007ULL);
                    double scale = util_rng_uniform(&nr) < 0.124 ? 1.5 : 0.2; /* ~12% drift */
                    for (int d = 0; d < DIM; d++) vec[d] += (float)(scale * (util_rng_uniform(&nr) - 0.5));
                }
                check(drift_store_put_embedding(st, row->response_id, "bench-emb", vec, DIM, &err), &err,
                      "put_embedding");
                sc[ns++] = (drift_score){row->response_id, "bench-emb", DRIFT_LABEL_NONE, NAN, NULL};
                break;
            }
            default: break;
            }
        }
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sb_put_scores(st, sc, ns);
        free(sc);
        drift_scored_set_clear(&set);
    }
    double t_build = util_now_ms() - t0;

    /* score: only math is pending */
    drift_score_opts so;
    drift_score_opts_default(&so);
    drift_score_summary sum;
    double ts = util_now_ms(), cs = cpu_ms();
    check(drift_score_run(st, NULL, &so, &sum, &err), &err, "score");
    double t_score = util_now_ms() - ts, c_score = cpu_ms() - cs;

    /* the store's own load time */
    double tl = util_now_ms(), cl = cpu_ms();
    for (int r = 0; r < 2; r++) {
        drift_scored_set set;
        check(drift_store_load_scored(st, run[r], &set, &err), &err, "load_scored");
        drift_scored_set_clear(&set);
    }
    double t_load = util_now_ms() - tl, c_load = cpu_ms() - cl;

    drift_compare_opts co;
    drift_compare_opts_default(&co);
    drift_comparison *c = NULL;
    double tc = util_now_ms(), cc = cpu_ms();
    check(drift_compare_runs(st, labels[0], labels[1], &co, &c, &err), &err, "compare");
    double t_cmp = util_now_ms() - tc, c_cmp = cpu_ms() - cc;
    char *json = NULL;
    double tr = util_now_ms();
    check(drift_report_comparison(c, st, DRIFT_FORMAT_JSON, &json, &err), &err, "report");
    double t_rep = util_now_ms() - tr;

    printf("store: %s, %zu prompts x %d replicates = %zu responses per run, 2 runs\n", path, np, REPL, total);
    printf("build (synthesize + write): %.0f ms\n", t_build);
    printf("score (math, %zu answers over 2 runs): wall %.0f ms, cpu %.0f ms (%.1f us cpu/answer)\n",
           sum.scored[DRIFT_WL_MATH], t_score, c_score,
           1000.0 * c_score / (double)(sum.scored[DRIFT_WL_MATH] ? sum.scored[DRIFT_WL_MATH] : 1));
    printf("load_scored x2 (the store's part): wall %.0f ms, cpu %.0f ms\n", t_load, c_load);
    printf("compare (incl. the two loads and %ld chat pairs' embeddings): wall %.0f ms, cpu %.0f ms; "
           "without the loads: wall ~%.0f ms, cpu ~%.0f ms\n",
           c->wl[DRIFT_WL_CHAT].n + c->wl[DRIFT_WL_CHAT].unscored, t_cmp, c_cmp, t_cmp - t_load, c_cmp - c_load);
    printf("report json (%zu bytes): %.0f ms\n", strlen(json), t_rep);
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        printf("  %-13s n=%-6ld flips=%-6ld flip_rate=%.4f ci95=[%.4f,%.4f] mcnemar_p=%.3g\n",
               drift_workload_name((drift_workload)k), c->wl[k].n, c->wl[k].flips, c->wl[k].flip_rate,
               c->wl[k].ci95[0], c->wl[k].ci95[1], c->wl[k].mcnemar_p);
    printf("target: compare < 2000 ms -> wall %s, cpu %s\n", t_cmp < 2000 ? "met" : "MISSED",
           c_cmp < 2000 ? "met" : "MISSED");
    free(json);
    drift_comparison_free(c);
    drift_store_close(st);
    for (size_t i = 0; i < np; i++) {
        free(su.prompts[i].prompt_id);
        free(su.prompts[i].input);
        free(su.prompts[i].reference_json);
        free(su.prompts[i].hash);
    }
    free(su.prompts);
    free(rowids);
    free(flip_p);
    free(base_ok);
    free(flips);
    if (!keep) {
        char side[600];
        unlink(path);
        snprintf(side, sizeof side, "%s-wal", path);
        unlink(side);
        snprintf(side, sizeof side, "%s-shm", path);
        unlink(side);
    }
    return 0;
}
