/* workers.c - the CPU kernels' thread pool (workers.h).
 *
 * One pool per process: up to 63 helper threads, started on first use, and
 * one job at a time (a caller that finds the pool busy runs its items
 * alone). A job is published in one 64-bit word, claimed item by item with
 * a compare-and-swap:
 *
 *   claim = nt (8 bits) | n (28 bits) | next (28 bits)
 *
 * A thread may take item `next` when next < n and its worker index < nt.
 * Everything a thread needs to decide is in the word, and the job's
 * function and context are read only after a successful claim, when the
 * job cannot end (the claimed item is not done) and so cannot be replaced.
 * The caller claims too; once no item is left it waits only for items that
 * are running (done == n), never for a helper that has not woken up.
 *
 * Helpers wait for a new job by spinning on the generation word for a few
 * tens of microseconds (decode steps come back to back), then sleep on it
 * with a futex; the caller wakes sleepers after publishing. A fork()ed child
 * has no helpers: the pool is reset there and started again on use. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include "model/workers.h"

#define MAX_HELPERS 63
#define FIELD_BITS 28
#define FIELD_MASK ((UINT64_C(1) << FIELD_BITS) - 1)
#define SPIN_CYCLES 100000ULL /* a helper's spin before it sleeps (~30 us) */

typedef struct pool {
    pthread_mutex_t mu;        /* held by the caller whose job is published */
    pthread_mutex_t start_mu;  /* starting helpers */
    int n_helpers;
    _Atomic uint32_t gen;      /* bumped per job; the futex word */
    _Atomic uint64_t claim;    /* nt | n | next, as above */
    _Atomic int64_t done;      /* items of the job finished */
    _Atomic int sleepers;      /* helpers in futex_wait */
    num_par_fn fn;             /* the job: written before claim is published */
    void *ctx;
} pool;

static pool P = {.mu = PTHREAD_MUTEX_INITIALIZER, .start_mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void pool_after_fork_child(void) {
    pthread_mutex_init(&P.mu, NULL);
    pthread_mutex_init(&P.start_mu, NULL);
    P.n_helpers = 0;
    atomic_store(&P.claim, 0);
    atomic_store(&P.done, 0);
    atomic_store(&P.sleepers, 0);
}

static void pool_register_atfork(void) { (void)pthread_atfork(NULL, NULL, pool_after_fork_child); }

/* Claims and runs items of the published job as worker `me` until none is
 * left (or me is not one of its workers). */
static void run_items(int me) {
    uint64_t c = atomic_load_explicit(&P.claim, memory_order_acquire);
    for (;;) {
        uint64_t nt = c >> (2 * FIELD_BITS), n = (c >> FIELD_BITS) & FIELD_MASK, next = c & FIELD_MASK;
        if ((uint64_t)me >= nt || next >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&P.claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire)) continue;
        P.fn(P.ctx, (int64_t)next, me);
        atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
        c = atomic_load_explicit(&P.claim, memory_order_acquire);
    }
}

static void *helper_main(void *arg) {
    int me = (int)(intptr_t)arg;
    uint32_t seen = atomic_load(&P.gen);
    for (;;) {
        uint64_t t0 = __rdtsc();
        while (atomic_load_explicit(&P.gen, memory_order_acquire) == seen && __rdtsc() - t0 < SPIN_CYCLES) _mm_pause();
        if (atomic_load(&P.gen) == seen) {
            atomic_fetch_add(&P.sleepers, 1);
            while (atomic_load(&P.gen) == seen) syscall(SYS_futex, &P.gen, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
            atomic_fetch_sub(&P.sleepers, 1);
        }
        seen = atomic_load(&P.gen);
        run_items(me);
    }
    return NULL;
}

/* At least want helpers running (as many as could be started). */
static int pool_start(int want) {
    pthread_once(&g_atfork_once, pool_register_atfork);
    if (want > MAX_HELPERS) want = MAX_HELPERS;
    pthread_mutex_lock(&P.start_mu);
    while (P.n_helpers < want) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &at, helper_main, (void *)(intptr_t)(P.n_helpers + 1));
        pthread_attr_destroy(&at);
        if (rc) break;
        P.n_helpers++;
    }
    int have = P.n_helpers;
    pthread_mutex_unlock(&P.start_mu);
    return have;
}

static void run_serial(int64_t n, num_par_fn fn, void *ctx) {
    for (int64_t i = 0; i < n; i++) fn(ctx, i, 0);
}

void num_par_for(int nt, int64_t n, num_par_fn fn, void *ctx) {
    if (nt <= 1 || n <= 1 || (uint64_t)n > FIELD_MASK) {
        run_serial(n, fn, ctx);
        return;
    }
    int helpers = pool_start(nt - 1);
    if (helpers < 1 || pthread_mutex_trylock(&P.mu)) {
        run_serial(n, fn, ctx);
        return;
    }
    if (nt > helpers + 1) nt = helpers + 1;
    P.fn = fn;
    P.ctx = ctx;
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.claim, (uint64_t)nt << (2 * FIELD_BITS) | (uint64_t)n << FIELD_BITS, memory_order_release);
    atomic_fetch_add(&P.gen, 1);
    if (atomic_load(&P.sleepers)) syscall(SYS_futex, &P.gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    run_items(0);
    /* the items other threads are running: spin briefly, then give the CPU
     * to them in case they share it */
    for (unsigned spins = 0; atomic_load_explicit(&P.done, memory_order_acquire) < n; spins++) {
        if (spins < 2000) _mm_pause();
        else sched_yield();
    }
    pthread_mutex_unlock(&P.mu);
}
