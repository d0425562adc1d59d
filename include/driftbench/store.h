/* store.h - the SQLite store (one file, WAL): prompts, runs, responses,
 * scores, embeddings. Every stage reads and writes it, so each stage can be
 * re-run alone and an interrupted run resumes.
 *
 * Schema (version in PRAGMA user_version, migrated forward on open):
 *   prompts(id, suite, prompt_id, workload, input, reference, hash)  unique(suite,prompt_id)
 *   runs(id, label unique, target, config json, decoding json, templates json,
 *        suites json, tool_version, started_at, finished_at)
 *   responses(id, run_id, prompt_rowid, replicate, failed (1 = error row),
 *        http_status, attempts, prompt_tokens, completion_tokens, latency_ms,
 *        finish_reason, created_at, error, text, logprobs (zstd json))
 *        unique(run_id,prompt_rowid,replicate)
 *   scores(id, response_id, evaluator, label, value, detail json) unique(response_id,evaluator)
 *   embeddings(response_id, embedder, dim, vec blob float32) unique(response_id,embedder)
 *   run_locks(label primary key, pid, host, proc_start, token, started_at)  (v2: who
 *        writes a run now; see drift_store_run_begin)
 * plus covering indexes responses_scan(run_id, prompt_rowid, replicate, failed)
 * and scores_latest(response_id, id, label, value, evaluator) for load_scored.
 * PRAGMA application_id = 0x44524654 ("DRFT") marks a DriftBench store.
 * A handle must be used by one thread at a time (open one per thread).
 */
#ifndef DRIFTBENCH_STORE_H
#define DRIFTBENCH_STORE_H

#include "driftbench/suite.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_store drift_store;

#define DRIFT_STORE_SCHEMA_VERSION 2

/* Opens (creating and migrating if needed) the store at path. A file that is
 * not a DriftBench store, or has a newer schema, is refused. */
DRIFT_API drift_status drift_store_open(const char *path, drift_store **out, drift_error *err);

/* Opens an existing store for reading only (compare, table, report, monitor).
 *  - path must name an existing file: otherwise DRIFT_ERR_NOT_FOUND naming it;
 *    nothing is ever created. An empty file is DRIFT_ERR_NOT_FOUND too (no
 *    store was written there yet); foreign files and newer schemas are
 *    refused as by drift_store_open; older schemas are read as they are
 *    (never migrated).
 *  - Nothing is written: SQLite opens the file with SQLITE_OPEN_READONLY
 *    (query_only on), no journal mode is set, no lock is taken, and the
 *    file's bytes, size and mtime stay as they were. So a store on a
 *    read-only mount, or a 0444 file of another user in a directory we
 *    cannot write, can be read.
 *  - How: when PATH-wal exists (a writer is running, or one crashed before
 *    its last checkpoint) the file is read through SQLite's WAL protocol
 *    ("mode=ro"), which needs PATH-shm to exist or be creatable; when there
 *    is no PATH-wal, every committed row is in the main file and it is read
 *    with "immutable=1": no locks, no -wal or -shm created. A writer that
 *    starts during such a read writes to its own -wal first, so the read is
 *    consistent unless that writer also checkpoints into the main file
 *    (after ~4 MB of writes) before the read ends; rerun the read then.
 *  - Every write function fails on such a handle (DRIFT_ERR_STORE). */
DRIFT_API drift_status drift_store_open_readonly(const char *path, drift_store **out, drift_error *err);

/* Closes the handle; releases the run locks it still holds (see run_begin). */
DRIFT_API void drift_store_close(drift_store *st);

/* ---- prompts ---- */
/* Inserts the suite's prompts (or finds them: same suite+prompt_id and same
 * hash). rowids[i] receives the row id of suite->prompts[i] (caller allocates
 * suite->n entries). A stored prompt with the same id but another hash is a
 * DRIFT_ERR_MISMATCH naming the prompt. */
DRIFT_API drift_status drift_store_put_prompts(drift_store *st, const drift_suite *suite,
                                               int64_t *rowids, drift_error *err);

/* ---- runs ---- */
typedef struct drift_run_info {
    int64_t id;
    char *label;
    char *target;          /* target spec as given */
    char *config_json;     /* {"model":..,"hardware":..,"precision":..,"framework":..,...} */
    char *decoding_json;   /* {"temperature":0,"seed":42,"top_p":1,"max_tokens":512,"replicates":1,...} */
    char *templates_json;  /* {"math":"math/completions/v1",...} */
    char *suites_json;     /* ["path-or-spec",...] */
    char *tool_version;
    char *started_at;
    char *finished_at;     /* NULL until finished */
} drift_run_info;

/* Creates the run `info->label`, or, if it exists, checks that target,
 * decoding and config agree (else DRIFT_ERR_MISMATCH naming the field) and
 * resumes it: *resumed = 1. Sets *run_id.
 * It also takes the label's writer lock for this handle, in the same
 * transaction: a row of run_locks with the owner's pid, host name, process
 * start time and a token of the handle. While a live handle holds it,
 * run_begin of that label through any other handle (this process or
 * another) fails with DRIFT_ERR_STORE, a message naming the label and the
 * owner (pid, host, since when), and changes nothing; so two processes never
 * both ask every prompt of one run. A lock of a process that is gone (same
 * host, pid dead, a zombie, or the pid now another process) is taken over;
 * a lock from another host is never taken over (the message says how to
 * remove it). run_begin again through the holding handle is fine. The lock
 * ends with drift_store_run_unlock, drift_store_run_finish or
 * drift_store_close (a killed process leaves it, to be taken over). */
DRIFT_API drift_status drift_store_run_begin(drift_store *st, const drift_run_info *info,
                                             int64_t *run_id, int *resumed, drift_error *err);
/* Marks the run finished and releases its writer lock (if this handle holds it). */
DRIFT_API drift_status drift_store_run_finish(drift_store *st, int64_t run_id, drift_error *err);
/* Releases this handle's writer lock on `label`; nothing if it holds none. */
DRIFT_API drift_status drift_store_run_unlock(drift_store *st, const char *label, drift_error *err);
/* Looks a run up by label (DRIFT_ERR_NOT_FOUND names the label and lists the
 * labels that exist). Free with drift_run_info_free. */
DRIFT_API drift_status drift_store_run_get(drift_store *st, const char *label, drift_run_info *out,
                                           drift_error *err);
/* All runs, oldest first. */
DRIFT_API drift_status drift_store_run_list(drift_store *st, drift_run_info **out, size_t *n,
                                            drift_error *err);
DRIFT_API void drift_run_info_free(drift_run_info *info);
DRIFT_API void drift_run_info_array_free(drift_run_info *infos, size_t n);

/* ---- responses ---- */
typedef struct drift_response {
    int64_t id;                /* set by the store on read */
    int64_t prompt_rowid;
    int replicate;             /* 0..replicates-1 */
    char *text;                /* NULL when error != NULL */
    int prompt_tokens;         /* -1 unknown */
    int completion_tokens;     /* -1 unknown */
    char *finish_reason;       /* "stop", "length", ... or NULL */
    double latency_ms;
    char *logprobs_json;       /* NULL or JSON (stored zstd-compressed) */
    char *error;               /* NULL = an answer; else the cause, never an answer */
    int http_status;           /* 0 if none */
    int attempts;
} drift_response;

/* Stores a batch in one transaction. A (run, prompt, replicate) that already
 * has an answer is left as it is; one that has only an error is replaced. */
DRIFT_API drift_status drift_store_put_responses(drift_store *st, int64_t run_id,
                                                 const drift_response *r, size_t n, drift_error *err);

/* The (prompt_rowid, replicate) pairs among prompt_rowids x [0,replicates)
 * that have no answer yet in run_id (missing or errored). Caller frees the
 * two arrays. */
DRIFT_API drift_status drift_store_pending(drift_store *st, int64_t run_id, const int64_t *prompt_rowids,
                                           size_t n_prompts, int replicates, int64_t **out_prompts,
                                           int **out_replicates, size_t *n_out, drift_error *err);

/* ---- reading responses with their prompts, for scoring and comparing ---- */
typedef struct drift_scored {
    int64_t response_id;
    int64_t prompt_rowid;
    const char *prompt_id;     /* points into the row arena (valid until freed) */
    const char *suite;
    drift_workload workload;
    int replicate;
    int is_error;              /* the request failed: never an answer */
    int label;                 /* drift_label; DRIFT_LABEL_NONE if not scored */
    double value;              /* evaluator's number (F1, SDR part, ...) or NAN */
    const char *evaluator;     /* NULL if not scored */
} drift_scored;

typedef struct drift_scored_set {
    drift_scored *rows;
    size_t n;
    void *arena;               /* owns strings */
} drift_scored_set;

/* Every response of run_id with its (best) score, ordered by prompt_rowid,
 * replicate. Text is not loaded (see drift_store_response_get). "Best" =
 * the score written last (highest scores.id) when several evaluators scored
 * one response; rewriting a score makes it the latest. */
DRIFT_API drift_status drift_store_load_scored(drift_store *st, int64_t run_id, drift_scored_set *out,
                                               drift_error *err);
DRIFT_API void drift_scored_set_free(drift_scored_set *s);

/* One response with text, and its prompt. Free with the _free functions. */
DRIFT_API drift_status drift_store_response_get(drift_store *st, int64_t response_id, drift_response *out,
                                                drift_prompt *prompt_out, drift_error *err);
DRIFT_API void drift_response_free(drift_response *r);
DRIFT_API void drift_prompt_free(drift_prompt *p);

/* Responses of run_id that have an answer but no score by `evaluator`
 * (NULL = no score at all), with their prompts, up to `limit` (0 = all). */
DRIFT_API drift_status drift_store_unscored(drift_store *st, int64_t run_id, const char *evaluator,
                                            size_t limit, drift_response **resp, drift_prompt **prompts,
                                            size_t *n, drift_error *err);

/* ---- scores and embeddings ---- */
typedef struct drift_score {
    int64_t response_id;
    const char *evaluator;     /* "math", "longctx-f1", "code-pass@1", "guard:...", ... */
    int label;                 /* drift_label */
    double value;
    const char *detail_json;   /* what was extracted and why; may be NULL */
} drift_score;

/* Upserts a batch of scores in one transaction. */
DRIFT_API drift_status drift_store_put_scores(drift_store *st, const drift_score *s, size_t n,
                                              drift_error *err);

DRIFT_API drift_status drift_store_put_embedding(drift_store *st, int64_t response_id, const char *embedder,
                                                 const float *vec, int dim, drift_error *err);
/* *vec is malloc'd; DRIFT_ERR_NOT_FOUND if absent. */
DRIFT_API drift_status drift_store_get_embedding(drift_store *st, int64_t response_id, const char *embedder,
                                                 float **vec, int *dim, drift_error *err);

/* Raw handle for modules that need their own queries (analysis, matrix). */
struct sqlite3;
DRIFT_API struct sqlite3 *drift_store_db(drift_store *st);

#ifdef __cplusplus
}
#endif
#endif
