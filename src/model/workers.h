/* workers.h - the CPU kernels' thread pool (internal to src/model/).
 *
 * num_par_for runs n independent items on the calling thread and up to
 * nt - 1 pool threads, each item claimed when a thread is free to run it.
 * The caller never waits for a pool thread that has not started: if the
 * other threads are descheduled (a shared, loaded machine), the caller runs
 * every item itself and returns. Which thread runs an item never changes
 * what the item computes, so results do not depend on the thread count or
 * the schedule. */
#ifndef DRIFT_MODEL_WORKERS_H
#define DRIFT_MODEL_WORKERS_H

#include <stdint.h>

/* One item: fn(ctx, item, worker), worker in [0, nt) naming the thread that
 * runs it (0 = the caller), for per-worker scratch. */
typedef void (*num_par_fn)(void *ctx, int64_t item, int worker);

/* Runs fn for every item in [0, n) and returns when all are done. nt <= 1,
 * n <= 1, or the pool busy with another caller's items: all run on the
 * calling thread, in order, as worker 0. Pool threads are started on first
 * use (at most 63) and live until the process exits. */
void num_par_for(int nt, int64_t n, num_par_fn fn, void *ctx);

#endif
