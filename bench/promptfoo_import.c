/* promptfoo_import.c - the promptfoo import at scale, with and without
 * testIdx (issue 34: a file without testIdx took 28 s at 30k results
 * against 1.5 s with it, because each result looked its vars up among all
 * the test cases seen before).
 *
 *   bench_promptfoo_import [--results 30000] [--providers 2] [--reps 3]
 *
 * Builds one promptfoo results.json in memory: `providers` providers x
 * results/providers test cases, each test with its own vars (a question and
 * an "answer" var, so DriftBench's math evaluator judges it too), written
 * once with testIdx and once without. Times, for each file, the parse
 * (drift_import_parse) and the whole import into a fresh store
 * (drift_import_store: checks, private store, scoring, merge), best of
 * `reps`, CPU and wall, and prints the ratio without/with testIdx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/import.h"
#include "driftbench/pipeline.h"
#include "driftbench/store.h"
#include "util/util.h"

static double now_ms(int cpu) {
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what, const drift_error *err) {
    fprintf(stderr, "promptfoo_import: %s: %s\n", what, err ? err->msg : "out of memory");
    exit(2);
}

/* A results.json of n results over `providers` providers. */
static char *make_file(size_t n, int providers, int with_idx, size_t *len) {
    util_buf b = {0};
    size_t tests = n / (size_t)providers;
    buf_puts(&b, "{\"evalId\":\"bench\",\"results\":{\"version\":3,\"results\":[");
    for (int p = 0; p < providers; p++)
        for (size_t t = 0; t < tests; t++) {
            long a = (long)(t * 7 % 1000);
            int right = (t + (size_t)p) % 5 != 0;
            if (p || t) buf_puts(&b, ",");
            buf_printf(&b, "{\"provider\":{\"id\":\"openai:chat:m%d\",\"label\":\"stack-%d\"},", p, p);
            buf_printf(&b, "\"prompt\":{\"raw\":\"Question %zu: what is %ld + 0?\",\"label\":\"q\"},", t, a);
            buf_puts(&b, "\"promptId\":\"0123456789abcdef\",");
            if (with_idx) buf_printf(&b, "\"testIdx\":%zu,", t);
            buf_printf(&b, "\"vars\":{\"question\":\"what is %ld + 0? (test %zu)\",\"answer\":\"%ld\"},", a, t, a);
            buf_printf(&b, "\"response\":{\"output\":\"The answer is %ld.\",\"tokenUsage\":{\"prompt\":12,"
                           "\"completion\":6}},",
                       right ? a : a + 1);
            buf_printf(&b, "\"success\":%s,\"score\":%d,\"failureReason\":%d,\"latencyMs\":12}",
                       right ? "true" : "false", right, right ? 0 : 1);
        }
    buf_puts(&b, "],\"stats\":{}},\"config\":{\"description\":\"bench\"}}");
    if (!b.data) die("building the file", NULL);
    *len = b.len;
    return buf_steal(&b);
}

typedef struct {
    double parse_cpu, parse_wall, import_cpu, import_wall;
} timing;

static void best(double *slot, double v) {
    if (*slot == 0 || v < *slot) *slot = v;
}

static void run_once(const char *data, size_t len, timing *t) {
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.workload = DRIFT_WL_MATH;
    drift_error err = {0};
    drift_import_set *set = NULL;
    double c0 = now_ms(1), w0 = now_ms(0);
    if (drift_import_parse("results.json", data, len, &o, &set, &err)) die("parse", &err);
    best(&t->parse_cpu, now_ms(1) - c0);
    best(&t->parse_wall, now_ms(0) - w0);

    char db[256];
    snprintf(db, sizeof db, "/tmp/promptfoo_import.%d.db", (int)getpid());
    unlink(db);
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) die("open store", &err);
    drift_import_store_opts so;
    drift_import_store_opts_default(&so);
    so.score = drift_import_score; /* our evaluators score too, as `driftbench import` does */
    c0 = now_ms(1);
    w0 = now_ms(0);
    if (drift_import_store(st, &set, 1, NULL, 0, &so, NULL, NULL, &err)) die("import", &err);
    best(&t->import_cpu, now_ms(1) - c0 + t->parse_cpu);
    best(&t->import_wall, now_ms(0) - w0 + t->parse_wall);
    drift_store_close(st);
    drift_import_set_free(set);
    static const char *const sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s%s", db, sfx[i]);
        unlink(p);
    }
}

int main(int argc, char **argv) {
    size_t n = 30000;
    int providers = 2, reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--results")) n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--providers")) providers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (providers < 1 || n < (size_t)providers || reps < 1) {
        fprintf(stderr, "usage: bench_promptfoo_import [--results N] [--providers P] [--reps R]\n");
        return 2;
    }
    timing t[2];
    memset(t, 0, sizeof t);
    size_t lens[2];
    for (int with = 1; with >= 0; with--) {
        char *data = make_file(n, providers, with, &lens[with]);
        for (int r = 0; r < reps; r++) run_once(data, lens[with], &t[with]);
        free(data);
    }
    printf("promptfoo import, %zu results (%d providers x %zu tests), best of %d\n", n, providers,
           n / (size_t)providers, reps);
    for (int with = 1; with >= 0; with--)
        printf("  %-15s %5.1f MB: parse %8.1f ms CPU (%8.1f wall); import %8.1f ms CPU (%8.1f wall)\n",
               with ? "with testIdx" : "without testIdx", (double)lens[with] / 1e6, t[with].parse_cpu,
               t[with].parse_wall, t[with].import_cpu, t[with].import_wall);
    printf("  ratio without/with testIdx: parse %.2f, import %.2f (CPU)\n", t[0].parse_cpu / t[1].parse_cpu,
           t[0].import_cpu / t[1].import_cpu);
    return 0;
}
