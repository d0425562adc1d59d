/* shard_env.c - drift_matrix_shard_from_env (matrix.h): the shard of a job
 * array's task, read from the scheduler's environment when `matrix` is
 * given no --shard:
 *   Slurm       SLURM_ARRAY_TASK_ID, with SLURM_ARRAY_TASK_COUNT or
 *               SLURM_ARRAY_TASK_MIN/MAX (and _STEP): shard
 *               (ID - MIN) / STEP + 1 of COUNT (or of the MIN..MAX span);
 *               an array with gaps (--array=1,3,7) does not map to shards.
 *   Kubernetes  JOB_COMPLETION_INDEX (an Indexed Job), with the count from
 *               the caller (matrix's --shard-count N) or DRIFT_SHARD_COUNT
 *               (the Job's completions).
 * Values that are not numbers, out of range or inconsistent are
 * DRIFT_ERR_INVALID naming the variable. */
#include <stdio.h>
#include <stdlib.h>

#include "driftbench/matrix.h"

/* env(name) as a number in [0, DRIFT_MATRIX_SHARD_MAX]: 1 set (in *v), 0
 * unset, -1 bad (in err). */
static int env_num(drift_env_fn env, const char *name, long *v, drift_error *err) {
    const char *s = env(name);
    if (!s) return 0;
    char *end;
    long x = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
    if (x < 0 || *end || x > DRIFT_MATRIX_SHARD_MAX) {
        drift_error_set(err, DRIFT_ERR_INVALID, "%s='%s' is not an integer in [0, %d]", name, s, DRIFT_MATRIX_SHARD_MAX);
        return -1;
    }
    *v = x;
    return 1;
}

#define BAD(...) (drift_error_set(err, DRIFT_ERR_INVALID, __VA_ARGS__), -1)

/* Slurm's array task: 0 ok (*index0, *count), -1 bad (in err). count_flag
 * is the caller's count (0: none), which must agree. */
static int shard_slurm(drift_env_fn env, long id, long count_flag, long *index0, long *count, char *said, size_t cap,
                       drift_error *err) {
    long mn = 0, mx = 0, step = 1, n = 0;
    int has_min, has_max, has_step, has_count;
    if ((has_min = env_num(env, "SLURM_ARRAY_TASK_MIN", &mn, err)) < 0 ||
        (has_max = env_num(env, "SLURM_ARRAY_TASK_MAX", &mx, err)) < 0 ||
        (has_step = env_num(env, "SLURM_ARRAY_TASK_STEP", &step, err)) < 0 ||
        (has_count = env_num(env, "SLURM_ARRAY_TASK_COUNT", &n, err)) < 0)
        return -1;
    if (has_step && step < 1) return BAD("SLURM_ARRAY_TASK_STEP=%ld must be at least 1", step);
    if (id < mn) return BAD("SLURM_ARRAY_TASK_ID=%ld is below SLURM_ARRAY_TASK_MIN=%ld", id, mn);
    if ((id - mn) % step)
        return BAD("SLURM_ARRAY_TASK_ID=%ld is not SLURM_ARRAY_TASK_MIN=%ld plus a multiple of "
                   "SLURM_ARRAY_TASK_STEP=%ld", id, mn, step);
    long span = 0;
    if (has_max) {
        if (mx < id) return BAD("SLURM_ARRAY_TASK_ID=%ld is above SLURM_ARRAY_TASK_MAX=%ld", id, mx);
        if ((mx - mn) % step)
            return BAD("SLURM_ARRAY_TASK_MAX=%ld is not SLURM_ARRAY_TASK_MIN=%ld plus a multiple of "
                       "SLURM_ARRAY_TASK_STEP=%ld", mx, mn, step);
        span = (mx - mn) / step + 1;
    }
    if (has_count && n < 1) return BAD("SLURM_ARRAY_TASK_COUNT=%ld must be at least 1", n);
    if (has_count && has_max && n != span)
        return BAD("SLURM_ARRAY_TASK_COUNT=%ld but SLURM_ARRAY_TASK_MIN..MAX (%ld..%ld, step %ld) "
                   "holds %ld task ids: an array with gaps (--array=1,3,7) does not map to shards; "
                   "use --shard I/N", n, mn, mx, step, span);
    if (!has_count) n = has_max ? span : count_flag;
    if (!n)
        return BAD("SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor "
                   "SLURM_ARRAY_TASK_MAX is: give --shard-count N or --shard I/N");
    if (count_flag && count_flag != n) return BAD("--shard-count %ld but the Slurm array has %ld tasks", count_flag, n);
    *index0 = (id - mn) / step;
    if (*index0 >= n)
        return BAD("SLURM_ARRAY_TASK_ID=%ld is task %ld of an array of %ld (SLURM_ARRAY_TASK_COUNT)", id, *index0 + 1, n);
    *count = n;
    int k = snprintf(said, cap, "Slurm (SLURM_ARRAY_TASK_ID=%ld", id);
    if (has_count && k > 0 && (size_t)k < cap) k += snprintf(said + k, cap - (size_t)k, ", SLURM_ARRAY_TASK_COUNT=%ld", n);
    if (has_max && k > 0 && (size_t)k < cap)
        k += snprintf(said + k, cap - (size_t)k, ", SLURM_ARRAY_TASK_MIN..MAX=%ld..%ld", mn, mx);
    if (step > 1 && k > 0 && (size_t)k < cap) k += snprintf(said + k, cap - (size_t)k, ", STEP=%ld", step);
    if (!has_count && !has_max && k > 0 && (size_t)k < cap) k += snprintf(said + k, cap - (size_t)k, ", --shard-count %ld", n);
    if (k > 0 && (size_t)k < cap) snprintf(said + k, cap - (size_t)k, ")");
    return 0;
}

static const char *env_getenv(const char *name) { return getenv(name); }

/* See matrix.h. */
drift_status drift_matrix_shard_from_env(drift_env_fn env, long count_flag, int *index, int *count, char *said,
                                         size_t cap, drift_error *err) {
    long id = 0, k8s = 0, index0 = 0, n = 0, env_count = 0;
    if (!env) env = env_getenv;
    said[0] = 0;
    int has_slurm = env_num(env, "SLURM_ARRAY_TASK_ID", &id, err);
    if (has_slurm < 0) return DRIFT_ERR_INVALID;
    int has_k8s = env_num(env, "JOB_COMPLETION_INDEX", &k8s, err);
    if (has_k8s < 0) return DRIFT_ERR_INVALID;
    if (has_slurm && has_k8s)
        return drift_error_set(err, DRIFT_ERR_INVALID, "both SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX are set: "
                                                       "which shard is ambiguous; give --shard I/N");
    if (!has_slurm && !has_k8s) {
        if (count_flag)
            return drift_error_set(err, DRIFT_ERR_INVALID, "--shard-count goes with a job array's index "
                                   "(JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID), which is not set; use --shard I/N");
        return DRIFT_OK;
    }
    if (has_slurm) {
        if (shard_slurm(env, id, count_flag, &index0, &n, said, cap, err)) return DRIFT_ERR_INVALID;
    } else {
        int has_env = env_num(env, "DRIFT_SHARD_COUNT", &env_count, err);
        if (has_env < 0) return DRIFT_ERR_INVALID;
        if (has_env && env_count < 1)
            return drift_error_set(err, DRIFT_ERR_INVALID, "DRIFT_SHARD_COUNT=%ld must be at least 1", env_count);
        if (count_flag && has_env && count_flag != env_count)
            return drift_error_set(err, DRIFT_ERR_INVALID, "--shard-count %ld but DRIFT_SHARD_COUNT=%ld", count_flag,
                                   env_count);
        n = count_flag ? count_flag : env_count;
        if (!n)
            return drift_error_set(err, DRIFT_ERR_INVALID, "JOB_COMPLETION_INDEX is set but not the shard count: give "
                                   "--shard-count N or DRIFT_SHARD_COUNT (the Job's completions)");
        if (k8s >= n)
            return drift_error_set(err, DRIFT_ERR_INVALID, "JOB_COMPLETION_INDEX=%ld is not below the shard count %ld (%s)",
                                   k8s, n, count_flag ? "--shard-count" : "DRIFT_SHARD_COUNT");
        index0 = k8s;
        snprintf(said, cap, "a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=%ld, %s%ld)", k8s,
                 count_flag ? "--shard-count " : "DRIFT_SHARD_COUNT=", n);
    }
    *index = (int)index0 + 1;
    *count = (int)n;
    return DRIFT_OK;
}
