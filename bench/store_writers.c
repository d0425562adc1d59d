/* store_writers.c - how the store's write rate grows with the number of
 * writers: K processes write at once, each its own run of N responses of
 * one shared suite, in batches of B (one transaction each), as the matrix's
 * shards do.
 *
 *   bench_store_writers --db STORE [--writers 1,2,4,8] [--n 20000] [--batch 64]
 *                       [--logprobs 0|1] [--files 0|1]
 *
 * STORE is a postgresql:// URL (one database, best a fresh one) or an
 * SQLite path (removed first). The runs of every writer count stay in the
 * store (labels w<K>-<i>), so later counts write into a fuller store, on
 * both backends alike. With --files 1 (SQLite only) each writer writes its own file
 * STORE.K.I, the shards of `matrix --shard`, and the bench then times
 * `merge` of them into STORE: the other way to get one store.
 *
 * Prints one line per writer count: rows in all, wall seconds, rows/s in
 * all and per writer, and the merge's seconds where there is one. Wall time
 * is what counts here (processes wait on each other's locks); the machine's
 * cores bound it too, so the report names them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driftbench/store.h"
#include "support/store_builder.h"
#include "util/util.h"

#define N_PROMPTS 500

static void die(const char *what, const drift_error *err) {
    fprintf(stderr, "store_writers: %s: %s\n", what, err->msg);
    exit(2);
}

static drift_suite make_suite(void) {
    drift_suite su = {.name = "writers", .source = "bench", .format = "bench", .n = N_PROMPTS};
    su.prompts = calloc(N_PROMPTS, sizeof *su.prompts);
    for (size_t i = 0; i < N_PROMPTS; i++) {
        char id[32], input[96], ref[64];
        snprintf(id, sizeof id, "p%05zu", i);
        snprintf(input, sizeof input, "Synthetic prompt number %zu: what is %zu times 3?", i, i);
        snprintf(ref, sizeof ref, "{\"answer\":\"%zu\"}", 3 * i);
        sb_prompt_fill(&su.prompts[i], id, (drift_workload)(i % DRIFT_WL_COUNT), input, ref);
    }
    return su;
}

/* One writer: its own handle, prompts, run `w<K>-<i>`, n responses. */
static void writer(const char *path, int k, int i, size_t n, size_t batch, int logprobs) {
    drift_error err = {0};
    drift_store *st;
    if (drift_store_open(path, &st, &err)) die("open", &err);
    drift_suite su = make_suite();
    int64_t rowids[N_PROMPTS];
    sb_put_prompts(st, &su, rowids);
    char label[64];
    snprintf(label, sizeof label, "w%d-%d", k, i);
    drift_run_info ri = {.label = label, .target = (char *)"bench://", .config_json = (char *)"{}",
                         .decoding_json = (char *)"{\"temperature\":0}"};
    int64_t run = sb_run_begin(st, &ri);
    char text[400];
    for (size_t c = 0; c < sizeof text - 1; c++) text[c] = "abcdefghij klmnopqrstuvwxyz.,0123456789"[c % 39];
    text[sizeof text - 1] = '\0';
    util_buf lp = {0};
    buf_puts(&lp, "{\"tokens\":[");
    for (int t = 0; t < 64; t++) buf_printf(&lp, "%s\"tok%d\"", t ? "," : "", t);
    buf_puts(&lp, "],\"logprobs\":[");
    for (int t = 0; t < 64; t++) buf_printf(&lp, "%s-%d.%06d", t ? "," : "", t % 3, (t * 7919) % 1000000);
    buf_puts(&lp, "]}");
    drift_answer *b = calloc(batch, sizeof *b);
    for (size_t k0 = 0; k0 < n;) {
        size_t m = 0;
        for (; m < batch && k0 < n; m++, k0++) {
            b[m] = (drift_answer){.prompt_rowid = rowids[k0 % N_PROMPTS],
                                  .replicate = (int)(k0 / N_PROMPTS),
                                  .text = text + (k0 % 100),
                                  .prompt_tokens = 40,
                                  .completion_tokens = 90,
                                  .finish_reason = (char *)"stop",
                                  .latency_ms = 12.5,
                                  .logprobs_json = logprobs ? lp.data : NULL,
                                  .http_status = 200,
                                  .attempts = 1};
        }
        if (drift_store_put_responses(st, run, b, m, &err)) die("put_responses", &err);
    }
    if (drift_store_run_finish(st, run, &err)) die("run_finish", &err);
    drift_store_close(st);
    free(b);
    buf_free(&lp);
    for (size_t c = 0; c < N_PROMPTS; c++) {
        free(su.prompts[c].prompt_id);
        free(su.prompts[c].input);
        free(su.prompts[c].reference_json);
        free(su.prompts[c].hash);
    }
    free(su.prompts);
}

static void rm_sqlite(const char *p) {
    char q[600];
    unlink(p);
    snprintf(q, sizeof q, "%s-wal", p);
    unlink(q);
    snprintf(q, sizeof q, "%s-shm", p);
    unlink(q);
}

int main(int argc, char **argv) {
    const char *path = NULL, *list = "1,2,4,8";
    size_t n = 20000, batch = 64;
    int logprobs = 1, files = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--db")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--writers")) list = argv[i + 1];
        else if (!strcmp(argv[i], "--n")) n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--logprobs")) logprobs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--files")) files = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "store_writers: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!path || !batch) {
        fprintf(stderr, "usage: bench_store_writers --db STORE [--writers 1,2,4,8] [--n N] [--batch B] "
                        "[--logprobs 0|1] [--files 0|1]\n");
        return 2;
    }
    int pg = !strncmp(path, "postgres", 8);
    if (pg && files) {
        fprintf(stderr, "store_writers: --files 1 is for SQLite shard files\n");
        return 2;
    }
    printf("store_writers: %s%s, %zu responses per writer in batches of %zu, logprobs %s, %ld cores\n",
           pg ? "PostgreSQL " : "SQLite ", files ? "shard files + merge" : pg ? "(one database)" : "(one file)", n,
           batch, logprobs ? "on" : "off", sysconf(_SC_NPROCESSORS_ONLN));
    if (!pg) rm_sqlite(path);
    printf("%8s %10s %9s %12s %12s %9s\n", "writers", "rows", "wall s", "rows/s", "per writer", "merge s");
    for (const char *c = list; *c;) {
        int k = atoi(c);
        c = strchr(c, ',') ? strchr(c, ',') + 1 : c + strlen(c);
        if (k < 1) continue;
        char (*shard)[600] = calloc((size_t)k, sizeof *shard);
        if (!shard) return 2;
        for (int i = 0; i < k; i++) {
            snprintf(shard[i], sizeof shard[i], "%s.%d.%d", path, k, i);
            if (files) rm_sqlite(shard[i]);
        }
        drift_error err = {0};
        drift_store *st;
        if (drift_store_open(path, &st, &err)) die("open", &err);
        drift_store_close(st);
        double t0 = util_now_ms();
        for (int i = 0; i < k; i++) {
            pid_t p = fork();
            if (p == 0) {
                writer(files ? shard[i] : path, k, i, n, batch, logprobs);
                _exit(0);
            }
            if (p < 0) {
                perror("fork");
                return 2;
            }
        }
        int bad = 0, status;
        while (wait(&status) > 0)
            if (!WIFEXITED(status) || WEXITSTATUS(status)) bad = 1;
        double t1 = util_now_ms(), tm = 0;
        if (bad) {
            fprintf(stderr, "store_writers: a writer failed\n");
            return 1;
        }
        if (files) {
            if (drift_store_open(path, &st, &err)) die("open", &err);
            double m0 = util_now_ms();
            for (int i = 0; i < k; i++)
                if (drift_store_merge(st, shard[i], NULL, &err)) die("merge", &err);
            tm = util_now_ms() - m0;
            drift_store_close(st);
            for (int i = 0; i < k; i++) rm_sqlite(shard[i]);
        }
        free(shard);
        double wall = (t1 - t0 + tm) / 1e3;
        size_t rows = (size_t)k * n;
        char ms[32] = "-";
        if (files) snprintf(ms, sizeof ms, "%.2f", tm / 1e3);
        printf("%8d %10zu %9.2f %12.0f %12.0f %9s\n", k, rows, wall, rows / wall, rows / wall / k, ms);
        fflush(stdout);
        /* count check: every row landed once */
        if (drift_store_open_readonly(path, &st, &err)) die("open", &err);
        drift_run_info *runs;
        size_t nr;
        if (drift_store_run_list(st, &runs, &nr, &err)) die("run_list", &err);
        size_t got = 0;
        for (size_t r = 0; r < nr; r++) {
            char want[16];
            snprintf(want, sizeof want, "w%d-", k);
            if (strncmp(runs[r].label, want, strlen(want))) continue;
            drift_store_run_counts rc;
            if (drift_store_count_run(st, runs[r].label, &rc, &err)) die("count", &err);
            for (int w = 0; w < DRIFT_WL_COUNT; w++) got += rc.answers[w];
        }
        drift_run_info_array_free(runs, nr);
        drift_store_close(st);
        if (got != rows) {
            fprintf(stderr, "store_writers: %zu rows stored, %zu written\n", got, rows);
            return 1;
        }
    }
    if (!pg) rm_sqlite(path);
    return 0;
}
