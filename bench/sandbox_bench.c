/* sandbox_bench.c - what the code sandbox costs per sample.
 *
 * 1. A trivial program (`pass`) run N times (default 50) each way:
 *    bare      fork + exec of python3 -I -S -c pass, wait
 *    sandbox   sbx_run with the probed mechanism (bubblewrap+seccomp+uid here)
 *    seccomp+uid (root only) sbx_run without bubblewrap
 *    Start to exit, wall clock: median and p90 in ms.
 * 2. drift_eval_code over the 164 canonical HumanEval solutions of
 *    $DRIFT_SHARED/driftbench-ae/datasets/humaneval_prompts.jsonl with 1 and
 *    2 parallel jobs (threads): total seconds and samples per second.
 * Usage: bench_sandbox_bench [runs] [max_jobs] */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "sandbox/sandbox.h"
#include "util/util.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += ms[i];
    int p90 = (int)(0.9 * (n - 1) + 0.5);
    printf("%-28s n=%-3d median %7.1f ms   p90 %7.1f ms   mean %7.1f ms\n", name, n, ms[n / 2], ms[p90], sum / n);
}

static double bare_once(const char *python) {
    double t0 = util_now_ms();
    pid_t p = fork();
    if (p == 0) {
        int fd = open("/dev/null", O_RDWR);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(python, python, "-I", "-S", "-c", "pass", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(p, &st, 0);
    return util_now_ms() - t0;
}

static double sbx_once(const char *python, unsigned mech) {
    static const char *const args[] = {"-I", "-S", "-c", "pass", NULL};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = python;
    s.args = args;
    sbx_limits_default(&s.lim);
    s.mech = mech;
    sbx_result r;
    drift_error err = {0};
    double t0 = util_now_ms();
    if (sbx_run(&s, &r, &err) != DRIFT_OK || !r.exited || r.exit_code != 0) {
        fprintf(stderr, "sandbox run failed: %s\n", err.msg);
        exit(2);
    }
    double ms = util_now_ms() - t0;
    sbx_result_free(&r);
    return ms;
}

typedef struct job {
    char **refs, **answers;
    size_t n;
    atomic_size_t next;
    atomic_int passed;
} job;

static void *worker(void *arg) {
    job *j = arg;
    size_t i;
    while ((i = atomic_fetch_add(&j->next, 1)) < j->n) {
        drift_eval_result r;
        if (drift_eval_code(j->answers[i], j->refs[i], NULL, &r, NULL) == DRIFT_OK && r.label == DRIFT_LABEL_PASS)
            atomic_fetch_add(&j->passed, 1);
        free(r.detail_json);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 50;
    int max_jobs = argc > 2 ? atoi(argv[2]) : 2;
    if (runs < 1) runs = 1;
    if (max_jobs < 1) max_jobs = 1;
    const char *python = "/usr/bin/python3";
    unsigned mech;
    char name[64];
    drift_error err = {0};
    if (sbx_probe(python, 0, &mech, name, sizeof name, &err) != DRIFT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char when[32];
    util_utc_iso(when);
    double load[3] = {0};
    getloadavg(load, 3);
    printf("sandbox_bench %s on %s, %ld cores, load %.1f; mechanism %s; %s\n", when, host, sysconf(_SC_NPROCESSORS_ONLN),
           load[0], name, python);

    double *ms = calloc((size_t)runs, sizeof *ms);
    bare_once(python); /* warm the page cache */
    sbx_once(python, mech);
    for (int i = 0; i < runs; i++) ms[i] = bare_once(python);
    report("bare fork+exec", ms, runs);
    for (int i = 0; i < runs; i++) ms[i] = sbx_once(python, mech);
    char label[96];
    snprintf(label, sizeof label, "sandbox (%s)", name);
    report(label, ms, runs);
    if (geteuid() == 0 && (mech & SBX_MECH_SECCOMP)) {
        for (int i = 0; i < runs; i++) ms[i] = sbx_once(python, SBX_MECH_SECCOMP | SBX_MECH_UID);
        report("sandbox (seccomp+uid)", ms, runs);
    }
    free(ms);

    const char *shared = getenv("DRIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/datasets/humaneval_prompts.jsonl", shared ? shared : "/work/shared");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("%s not found: no HumanEval timing\n", path);
        return 0;
    }
    job j;
    memset(&j, 0, sizeof j);
    j.refs = calloc(200, sizeof *j.refs);
    j.answers = calloc(200, sizeof *j.answers);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0 && j.n < 200) {
        json_t *o = json_loads(line, 0, NULL);
        if (!o) continue;
        json_t *ref = json_pack("{s:O,s:O,s:O}", "prompt", json_object_get(o, "prompt"), "test_cases",
                                json_object_get(o, "test_cases"), "entry_point", json_object_get(o, "entry_point"));
        j.refs[j.n] = json_dumps(ref, JSON_COMPACT);
        j.answers[j.n] = util_strdup(json_string_value(json_object_get(o, "canonical_solution")));
        json_decref(ref);
        json_decref(o);
        j.n++;
    }
    free(line);
    fclose(f);
    for (int jobs = 1; jobs <= max_jobs; jobs *= 2) {
        atomic_store(&j.next, 0);
        atomic_store(&j.passed, 0);
        pthread_t *t = calloc((size_t)jobs, sizeof *t);
        double t0 = util_now_ms();
        for (int i = 0; i < jobs; i++) pthread_create(&t[i], NULL, worker, &j);
        for (int i = 0; i < jobs; i++) pthread_join(t[i], NULL);
        double s = (util_now_ms() - t0) / 1000;
        printf("humaneval canonical, %d job%s: %zu samples in %.1f s (%.1f samples/s), %d passed\n", jobs,
               jobs > 1 ? "s" : "", j.n, s, (double)j.n / s, atomic_load(&j.passed));
        free(t);
    }
    for (size_t i = 0; i < j.n; i++) {
        free(j.refs[i]);
        free(j.answers[i]);
    }
    free(j.refs);
    free(j.answers);
    return 0;
}
