/* test_workers.c - the CPU kernels' thread pool (src/model/workers.c):
 * every item runs exactly once with a worker index below nt, for any nt and
 * item count; callers on several threads at once (the pool serves one, the
 * others run their items alone) all finish every item; a fork()ed child
 * starts its own helpers; a matmul gives the same bits through the pool as
 * on one thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "model/numerics.h"
#include "model/workers.h"

typedef struct count_job {
    atomic_int *hits;  /* (n) times each item ran */
    int nt;
    atomic_int bad_worker;
} count_job;

static void count_item(void *ctx, int64_t i, int worker) {
    count_job *j = ctx;
    atomic_fetch_add(&j->hits[i], 1);
    if (worker < 0 || worker >= j->nt) atomic_store(&j->bad_worker, 1);
}

/* Runs n items with nt threads; 0 if every item ran once with a valid worker. */
static int run_and_check(int nt, int64_t n) {
    atomic_int *hits = calloc((size_t)n, sizeof *hits);
    count_job j = {.hits = hits, .nt = nt};
    num_par_for(nt, n, count_item, &j);
    int bad = atomic_load(&j.bad_worker);
    for (int64_t i = 0; i < n; i++) bad |= atomic_load(&hits[i]) != 1;
    free(hits);
    return bad;
}

static void test_every_item_once(void **state) {
    (void)state;
    static const int NT[] = {1, 2, 3, 4};
    static const int64_t N[] = {0, 1, 2, 5, 24, 1000, 20000};
    for (size_t a = 0; a < sizeof NT / sizeof NT[0]; a++)
        for (size_t b = 0; b < sizeof N / sizeof N[0]; b++)
            for (int rep = 0; rep < 20; rep++) assert_int_equal(run_and_check(NT[a], N[b]), 0);
}

static void *caller_main(void *arg) {
    atomic_int *fails = arg;
    for (int rep = 0; rep < 200; rep++)
        if (run_and_check(2 + rep % 3, 1 + rep * 7 % 300)) atomic_fetch_add(fails, 1);
    return NULL;
}

static void test_concurrent_callers(void **state) {
    (void)state;
    atomic_int fails = 0;
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, caller_main, &fails), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&fails), 0);
}

static void test_fork_child(void **state) {
    (void)state;
    assert_int_equal(run_and_check(2, 100), 0); /* helpers started in the parent */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(run_and_check(2, 100) || run_and_check(3, 5000) ? 1 : 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_matmul_same_bits(void **state) {
    (void)state;
    enum { B = 20, N = 203, K = 272 };
    float *w = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * B * K);
    float *y1 = malloc(sizeof(float) * B * N), *y2 = malloc(sizeof(float) * B * N);
    uint32_t r = 12345;
    for (int i = 0; i < N * K; i++) w[i] = (float)((r = r * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < B * K; i++) x[i] = (float)((r = r * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_parse("profile=cpu-f16", &p, &err), DRIFT_OK);
    num_qmat W;
    assert_int_equal(num_qmat_quantize(&W, DRIFT_DTYPE_F16, w, N, K, 32, p.weight_scale, &err), DRIFT_OK);
    p.threads = 1;
    assert_int_equal(num_fast_matmul(&p, y1, x, &W, B, &err), DRIFT_OK);
    for (int t = 2; t <= 4; t++) {
        p.threads = t;
        assert_int_equal(num_fast_matmul(&p, y2, x, &W, B, &err), DRIFT_OK);
        assert_memory_equal(y1, y2, sizeof(float) * B * N);
    }
    num_qmat_free(&W);
    free(w), free(x), free(y1), free(y2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_item_once),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_fork_child),
        cmocka_unit_test(test_matmul_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
