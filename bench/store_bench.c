/* store_bench.c - store throughput: inserts N synthetic responses per run for
 * two runs (batches of 1000, one transaction each), scores them, then times
 * drift_store_load_scored for both runs, which is what `compare` does.
 *
 *   bench_store_bench [--n 236985] [--logprobs 0|1] [--db PATH] [--keep 0|1]
 *
 * N defaults to the paper's 236,985 prompt-response pairs (2,257 prompts x
 * 105 replicates here). Responses carry ~300 bytes of text and, with
 * --logprobs 1 (default), a 64-token logprob JSON stored zstd-compressed.
 * Prints one line per phase: count, seconds, rate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/store.h"
#include "support/store_builder.h"
#include "util/util.h"

#define BATCH 1000
#define N_PROMPTS 2257

/* CPU time of this process in ms: the machine may be shared, so wall time
 * alone can mislead. */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what, const drift_error *err) {
    fprintf(stderr, "store_bench: %s: %s\n", what, err->msg);
    exit(2);
}

int main(int argc, char **argv) {
    size_t n = 236985;
    int with_logprobs = 1, keep = 0;
    char path[512];
    snprintf(path, sizeof path, "/tmp/store_bench.%d.db", (int)getpid());
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--logprobs")) with_logprobs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--db")) snprintf(path, sizeof path, "%s", argv[i + 1]);
        else if (!strcmp(argv[i], "--keep")) keep = atoi(argv[i + 1]);
    }
    size_t reps = (n + N_PROMPTS - 1) / N_PROMPTS;
    drift_error err = {0};
    drift_store *st;
    st = sb_open_new(path);

    /* prompts */
    drift_suite su = {.name = "bench", .source = "bench", .format = "bench", .n = N_PROMPTS};
    su.prompts = calloc(N_PROMPTS, sizeof *su.prompts);
    for (size_t i = 0; i < N_PROMPTS; i++) {
        char id[32], input[96], ref[64];
        snprintf(id, sizeof id, "p%05zu", i);
        snprintf(input, sizeof input, "Synthetic prompt number %zu: what is %zu times 3?", i, i);
        snprintf(ref, sizeof ref, "{\"answer\":\"%zu\"}", 3 * i);
        sb_prompt_fill(&su.prompts[i], id, (drift_workload)(i % DRIFT_WL_COUNT), input, ref);
    }
    int64_t *rowids = calloc(N_PROMPTS, sizeof *rowids);
    sb_put_prompts(st, &su, rowids);

    /* synthetic text and logprobs */
    char text[400];
    for (size_t i = 0; i < sizeof text - 1; i++) text[i] = "abcdefghij klmnopqrstuvwxyz.,0123456789"[i % 39];
    text[sizeof text - 1] = '\0';
    util_buf lp = {0};
    buf_puts(&lp, "{\"tokens\":[");
    for (int t = 0; t < 64; t++) buf_printf(&lp, "%s\"tok%d\"", t ? "," : "", t);
    buf_puts(&lp, "],\"logprobs\":[");
    util_rng rng;
    util_rng_seed(&rng, 42);
    for (int t = 0; t < 64; t++) buf_printf(&lp, "%s%.6f", t ? "," : "", -util_rng_uniform(&rng) * 3);
    buf_puts(&lp, "]}");

    const char *labels[2] = {"baseline", "target"};
    int64_t runs[2];
    drift_answer *batch = calloc(BATCH, sizeof *batch);
    drift_score *sc = calloc(BATCH, sizeof *sc);
    double t_ins = 0, t_sc = 0, c_ins = 0, c_sc = 0;
    for (int r = 0; r < 2; r++) {
        drift_run_info ri = {.label = (char *)labels[r], .target = (char *)"bench://", .config_json = (char *)"{}",
                             .decoding_json = (char *)"{\"temperature\":0}"};
        runs[r] = sb_run_begin(st, &ri);
        double t0 = util_now_ms(), c0 = cpu_ms();
        size_t k = 0;
        while (k < n) {
            size_t m = 0;
            for (; m < BATCH && k < n; m++, k++) {
                drift_answer *x = &batch[m];
                memset(x, 0, sizeof *x);
                x->prompt_rowid = rowids[k % N_PROMPTS];
                x->replicate = (int)(k / N_PROMPTS);
                x->text = text + (k % 100);
                x->prompt_tokens = 40;
                x->completion_tokens = 90;
                x->finish_reason = "stop";
                x->latency_ms = 12.5;
                x->logprobs_json = with_logprobs ? lp.data : NULL;
                x->http_status = 200;
                x->attempts = 1;
                if (k % 997 == 0) { /* a few failed requests */
                    x->text = NULL;
                    x->error = "HTTP 503";
                    x->logprobs_json = NULL;
                }
            }
            if (drift_store_put_responses(st, runs[r], batch, m, &err)) die("put_responses", &err);
        }
        t_ins += util_now_ms() - t0;
        c_ins += cpu_ms() - c0;
        /* scores: read back ids in order, label by a deterministic rule */
        drift_scored_set set;
        if (drift_store_load_scored(st, runs[r], &set, &err)) die("load_scored", &err);
        t0 = util_now_ms();
        c0 = cpu_ms();
        size_t m = 0;
        for (size_t i = 0; i < set.n; i++) {
            if (set.rows[i].is_error) continue;
            uint64_t h = util_fnv1a64(&set.rows[i].prompt_rowid, sizeof(int64_t), (uint64_t)(r && i % 5 == 0)) >> 33;
            sc[m++] = (drift_score){set.rows[i].response_id, "math", (int)(h & 1), (double)(h & 1), NULL};
            if (m == BATCH) {
                if (drift_store_put_scores(st, sc, m, &err)) die("put_scores", &err);
                m = 0;
            }
        }
        if (m && drift_store_put_scores(st, sc, m, &err)) die("put_scores", &err);
        t_sc += util_now_ms() - t0;
        c_sc += cpu_ms() - c0;
        drift_scored_set_clear(&set);
    }
    printf("store_bench: %zu responses per run (%d prompts x %zu replicates), batches of %d, logprobs %s\n", n,
           N_PROMPTS, reps, BATCH, with_logprobs ? "on (64 tokens, zstd)" : "off");
    printf("insert       : %zu responses in %.3f s wall (%.0f/s), %.3f s CPU (%.0f/s)\n", 2 * n, t_ins / 1e3,
           2 * n / (t_ins / 1e3), c_ins / 1e3, 2 * n / (c_ins / 1e3));
    printf("put_scores   : %.3f s wall (%.0f/s), %.3f s CPU (%.0f/s)\n", t_sc / 1e3, 2 * n / (t_sc / 1e3),
           c_sc / 1e3, 2 * n / (c_sc / 1e3));

    /* what compare does: load both runs (cold handle) */
    drift_store_close(st);
    double t0 = util_now_ms(), c0 = cpu_ms();
    if (drift_store_open(path, &st, &err)) die("reopen", &err);
    drift_scored_set a, b;
    double ta = util_now_ms(), ca = cpu_ms();
    if (drift_store_load_scored(st, runs[0], &a, &err)) die("load_scored", &err);
    double tb = util_now_ms(), cb = cpu_ms();
    if (drift_store_load_scored(st, runs[1], &b, &err)) die("load_scored", &err);
    double t1 = util_now_ms(), c1 = cpu_ms();
    size_t flips = 0, pairs = 0;
    for (size_t i = 0; i < a.n && i < b.n; i++) {
        if (a.rows[i].is_error || b.rows[i].is_error) continue;
        pairs++;
        flips += a.rows[i].label != b.rows[i].label;
    }
    double t2 = util_now_ms(), c2 = cpu_ms();
    printf("load_scored  : run 1 %zu rows %.3f s wall %.3f s CPU; run 2 %zu rows %.3f s wall %.3f s CPU\n", a.n,
           (tb - ta) / 1e3, (cb - ca) / 1e3, b.n, (t1 - tb) / 1e3, (c1 - cb) / 1e3);
    printf("open+load x2+pairing: %.3f s wall, %.3f s CPU (%zu pairs, %zu label flips)\n", (t2 - t0) / 1e3,
           (c2 - c0) / 1e3, pairs, flips);
    drift_scored_set_clear(&a);
    drift_scored_set_clear(&b);
    drift_store_close(st);
    FILE *f = fopen(path, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        printf("store size   : %.1f MB\n", ftell(f) / 1e6);
        fclose(f);
    }
    for (size_t i = 0; i < N_PROMPTS; i++) {
        free(su.prompts[i].prompt_id);
        free(su.prompts[i].input);
        free(su.prompts[i].reference_json);
        free(su.prompts[i].hash);
    }
    free(su.prompts);
    free(rowids);
    free(batch);
    free(sc);
    buf_free(&lp);
    if (keep) return 0;
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", path);
    unlink(wal);
    unlink(path);
    return 0;
}
