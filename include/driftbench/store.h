/* store.h - the store: prompts, runs, responses, scores, embeddings, in an
 * SQLite file (one file, WAL; the default) or a PostgreSQL database (a
 * "postgresql://" or "postgres://" URL, or a libpq key=value string such as
 * "host=/run/pg dbname=drift": one store shared by many runners; the same
 * tables and the same guarantees). Every stage reads and writes
 * it, so each stage can be re-run alone and an interrupted run resumes.
 * Every function below works on both.
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
 *   run_endpoints(id, run_id, target, first_at, last_at, begins)  (v3: the
 *        endpoints a run was begun through, one row per stretch of begins
 *        through one target; see drift_store_run_begin)
 * plus covering indexes responses_scan(run_id, prompt_rowid, replicate, failed)
 * and scores_latest(response_id, id, label, value, evaluator) for load_scored.
 * PRAGMA application_id = 0x44524654 ("DRFT") marks a DriftBench store.
 * A handle must be used by one thread at a time (open one per thread).
 *
 * The stages and analyses reach the data only through these functions (no
 * SQL outside src/store/), so another backend can stand behind them.
 */
#ifndef DRIFTBENCH_STORE_H
#define DRIFTBENCH_STORE_H

#include "driftbench/suite.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_store drift_store;

#define DRIFT_STORE_SCHEMA_VERSION 3

/* Opens (creating and migrating if needed) the store at path. A file that is
 * not a DriftBench store, or has a newer schema, is refused; so is an SQLite
 * store whose schema is not exactly the one DriftBench creates for its
 * version (a view, a trigger, another table or index, other SQL):
 * DRIFT_ERR_STORE naming the object, the file untouched. */
DRIFT_API drift_status drift_store_open(const char *path, drift_store **out, drift_error *err);

/* Opens an existing store for reading only (compare, table, report, monitor).
 *  - path must name an existing file: otherwise DRIFT_ERR_NOT_FOUND naming it;
 *    nothing is ever created. An empty file is DRIFT_ERR_NOT_FOUND too (no
 *    store was written there yet); foreign files and newer schemas are
 *    refused as by drift_store_open; older schemas are read as they are
 *    (never migrated).
 *  - SQLite: every statement is bounded by the store's size (VM steps per
 *    byte, store_sqlite.c); one that passes the bound fails with an error
 *    that says so instead of running on.
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

/* The path the handle was opened with (valid until it is closed): another
 * thread opens its own handle on the same file with it. */
DRIFT_API const char *drift_store_path(const drift_store *st);

/* The store's name for messages: drift_redact of the path (a URL's or a
 * key=value string's passwords replaced by "***"); valid until the handle
 * is closed. Print this, never drift_store_path. */
DRIFT_API const char *drift_store_display(const drift_store *st);

/* Closes the handle; releases the run locks it still holds (see run_begin). */
DRIFT_API void drift_store_close(drift_store *st);

/* Holds one read snapshot (a transaction) over the read calls that follow,
 * until the matching drift_store_read_end: they see the same data and take
 * the file's lock once. Pairs nest (the outermost one counts); when the
 * handle already has a transaction open, nothing is begun. Best effort: when
 * no snapshot can be taken, each read takes its own. No write may come
 * between begin and end. */
DRIFT_API void drift_store_read_begin(drift_store *st);
DRIFT_API void drift_store_read_end(drift_store *st);

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
    char *target;          /* target spec, as recorded: without secrets or credential
                            * parameters (see drift_store_run_begin) */
    char *config_json;     /* {"model":..,"hardware":..,"precision":..,"framework":..,...} */
    char *decoding_json;   /* {"temperature":0,"seed":42,"top_p":1,"max_tokens":512,"replicates":1,...} */
    char *templates_json;  /* {"math":"math/completions/v1",...} */
    char *suites_json;     /* ["path-or-spec",...] */
    char *tool_version;
    char *started_at;
    char *finished_at;     /* NULL until finished */
} drift_run_info;

/* Creates the run `info->label`, or, if it exists, checks that its
 * identity agrees (else DRIFT_ERR_MISMATCH naming the field) and resumes
 * it: *resumed = 1. Sets *run_id. A run's identity is what decides its
 * answers: the target's identity (drift_store_target_identity: the model
 * and the request parameters, not the endpoint), decoding, config, and the
 * templates of every workload both the run and the request name. A resume
 * through another endpoint (a fixed typo, another port, localhost for
 * 127.0.0.1) is the same run: the run's target becomes the new one and
 * run_endpoints records it (drift_store_run_overview lists them); a resume
 * with more suites adds them (and their templates) to the record. The
 * target is recorded without
 * its secrets: drift_redact's copy (a URL's password, password=, api_key=,
 * token=, ... "***") without the parameters api_key_env and
 * allow_insecure_key; targets are compared in that form, so a changed
 * password or key variable resumes the run.
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
/* drift_store_run_begin of a run nobody named: info->label is a base, and
 * the run is the one labelled base, base-2, base-3, ...: the first that
 * does not exist or has this identity (then it resumes). The label used is
 * written to label[0..cap). So a second call with the same identity
 * resumes the same run, and one with another identity never meets a
 * mismatch (measure without --*-label). */
DRIFT_API drift_status drift_store_run_begin_free(drift_store *st, const drift_run_info *info, char *label,
                                                  size_t cap, int64_t *run_id, int *resumed, drift_error *err);
/* Marks the run finished and releases its writer lock (if this handle holds it). */
DRIFT_API drift_status drift_store_run_finish(drift_store *st, int64_t run_id, drift_error *err);
/* Releases this handle's writer lock on `label`; nothing if it holds none. */
DRIFT_API drift_status drift_store_run_unlock(drift_store *st, const char *label, drift_error *err);
/* Looks a run up by label (DRIFT_ERR_NOT_FOUND names the label and lists the
 * labels that exist). Empty *out with drift_run_info_clear. */
DRIFT_API drift_status drift_store_run_get(drift_store *st, const char *label, drift_run_info *out,
                                           drift_error *err);
/* All runs, oldest first. */
DRIFT_API drift_status drift_store_run_list(drift_store *st, drift_run_info **out, size_t *n,
                                            drift_error *err);
/* Frees what info holds and empties it (info itself stays the caller's). */
DRIFT_API void drift_run_info_clear(drift_run_info *info);
/* Empties infos[0..n) and frees the array itself (as run_list gave it). */
DRIFT_API void drift_run_info_array_free(drift_run_info *infos, size_t n);

/* ---- responses: drift_answer records (types.h) ---- */

/* Stores a batch in one transaction. A (run, prompt, replicate) that already
 * has an answer is left as it is; one that has only an error is replaced. */
DRIFT_API drift_status drift_store_put_responses(drift_store *st, int64_t run_id,
                                                 const drift_answer *r, size_t n, drift_error *err);

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
/* drift_store_load_scored keeping only the scores by `evaluator` (its
 * latest one per response; other evaluators' scores are ignored, so a
 * response it did not score has no label). NULL evaluator: the same as
 * drift_store_load_scored. When the evaluator scored no response of the
 * run: DRIFT_ERR_NOT_FOUND whose message names the evaluators that did
 * ("none" when nothing is scored); *out is then empty. */
DRIFT_API drift_status drift_store_load_scored_evaluator(drift_store *st, int64_t run_id, const char *evaluator,
                                                         drift_scored_set *out, drift_error *err);
/* Frees what s holds and empties it. */
DRIFT_API void drift_scored_set_clear(drift_scored_set *s);

/* One response with text, and its prompt (prompt_out NULL: not wanted).
 * Empty them with drift_answer_clear and drift_prompt_clear (suite.h). */
DRIFT_API drift_status drift_store_response_get(drift_store *st, int64_t response_id, drift_answer *out,
                                                drift_prompt *prompt_out, drift_error *err);

/* The answer text of response `response_id`, malloc'd into *text ("" when
 * the row is a failed request), and whether the row has stored logprobs
 * (*has_logprobs). A point read with no join and no decoding, through a
 * statement prepared once per handle: the read to make for many ids, inside
 * drift_store_read_begin / _end. DRIFT_ERR_NOT_FOUND when there is no such
 * response. */
DRIFT_API drift_status drift_store_answer_text(drift_store *st, int64_t response_id, char **text,
                                               int *has_logprobs, drift_error *err);

/* Responses of run_id that have an answer but no score by `evaluator`
 * (NULL = no score at all), with their prompts, up to `limit` (0 = all). */
DRIFT_API drift_status drift_store_unscored(drift_store *st, int64_t run_id, const char *evaluator,
                                            size_t limit, drift_answer **resp, drift_prompt **prompts,
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

/* Every score of response `response_id` (each evaluator's row), the
 * latest first (highest scores.id: the one drift_store_load_scored keeps),
 * with its detail JSON as stored (detail_json NULL when none). *out is
 * malloc'd, one block with the strings (free(*out)); *n = 0 and *out NULL
 * when the response has no score (no such response included). */
DRIFT_API drift_status drift_store_response_scores(drift_store *st, int64_t response_id, drift_score **out,
                                                   size_t *n, drift_error *err);

DRIFT_API drift_status drift_store_put_embedding(drift_store *st, int64_t response_id, const char *embedder,
                                                 const float *vec, int dim, drift_error *err);
/* *vec is malloc'd; DRIFT_ERR_NOT_FOUND if absent. */
DRIFT_API drift_status drift_store_get_embedding(drift_store *st, int64_t response_id, const char *embedder,
                                                 float **vec, int *dim, drift_error *err);

/* Every embedding by `embedder` of a response id in [lo, hi], in ascending
 * response id order: one range scan of the embeddings' primary key, no
 * join. Rows of other runs whose ids fall in the range come too (the caller
 * looks up the ids it wants, e.g. by binary search). A row whose size does
 * not match its dim is DRIFT_ERR_STORE naming the response. Empty *out with
 * drift_embedding_set_clear. */
typedef struct drift_embedding {
    int64_t response_id;
    int dim;
    const float *vec;          /* (dim,) inside the set's pool */
} drift_embedding;

typedef struct drift_embedding_set {
    drift_embedding *rows;     /* (n,) ascending response_id */
    size_t n;
    float *pool;               /* (sum of dims,) every vector, back to back */
} drift_embedding_set;

DRIFT_API drift_status drift_store_embeddings_range(drift_store *st, const char *embedder, int64_t lo, int64_t hi,
                                                    drift_embedding_set *out, drift_error *err);
DRIFT_API void drift_embedding_set_clear(drift_embedding_set *s);

/* The embedder with the most embeddings over the responses of runs run_a
 * and run_b (ties: the first name in SQLite's order), written to out; ""
 * when neither run has any. */
DRIFT_API drift_status drift_store_top_embedder(drift_store *st, int64_t run_a, int64_t run_b, char *out,
                                                size_t cap, drift_error *err);

/* Counts the values of `field`, a top-level string of the score detail
 * JSON, over the answered responses of run_id to prompts of workload wl
 * whose latest score is PASS or FAIL: fn(user, value, count) once per
 * distinct value, most frequent first, ties by value; value is NULL for
 * details without the field (or not JSON). compare counts "sandbox" of the
 * code scores with it. */
typedef void (*drift_detail_count_fn)(void *user, const char *value, long count);
DRIFT_API drift_status drift_store_detail_counts(drift_store *st, int64_t run_id, drift_workload wl,
                                                 const char *field, drift_detail_count_fn fn, void *user,
                                                 drift_error *err);

/* ---- the score stage's scan ---- */

/* Where a chunked scan stands; zero it to start from the first row. */
typedef struct drift_scan_cursor {
    int64_t prompt_rowid;      /* key of the last row read */
    int replicate;
    int started;               /* 0: no row read yet */
} drift_scan_cursor;

/* Reads the next chunk of answers of run_id that wait for a score, in
 * (prompt_rowid, replicate) order after *cursor: at most cap rows into
 * resp[0..*n) and prompts[0..*n) (arrays of the caller; every entry filled
 * is overwritten, and the caller empties it with drift_answer_clear and
 * drift_prompt_clear). Waiting = answered (never a failed request: `run`
 * asks those again) and, unless `all`, with no score yet or a latest score
 * (highest scores.id) of DRIFT_LABEL_ERROR: an evaluator error is retried,
 * a stored PASS / FAIL / NONE is not. Every row has resp id, prompt_rowid,
 * replicate and the prompt's workload (DRIFT_WL_UNKNOWN if not one of the
 * five); the texts (answer text; prompt id, input, reference) are read only
 * when want_text(user, workload) returns nonzero (want_text NULL: always),
 * so rows nobody can judge cost no text; everything else is zero / NULL.
 * *cursor moves past the last row read; *n < cap means the scan is over.
 * The read ends before the call returns, so the caller may store scores
 * between chunks; each chunk seeks to the cursor (keyset pagination), so a
 * whole scan is linear in the run's size. */
DRIFT_API drift_status drift_store_scan_pending(drift_store *st, int64_t run_id, int all, drift_scan_cursor *cursor,
                                                size_t cap, int (*want_text)(void *user, drift_workload wl),
                                                void *user, drift_answer *resp, drift_prompt *prompts, size_t *n,
                                                drift_error *err);

/* ---- whole-store counts ---- */

typedef struct drift_store_outcomes {
    size_t answers[DRIFT_WL_COUNT];          /* responses holding an answer */
    size_t errors[DRIFT_WL_COUNT];           /* failed requests */
    char common_error[DRIFT_WL_COUNT][200];  /* the most frequent error text (its first 190 bytes); "" if none */
} drift_store_outcomes;

/* Answers and failed requests per workload over every run in the store, and
 * the most frequent error text of each workload (digits are not normalised:
 * "prompt of N tokens" errors count apart, but the first bytes say what kind
 * of failure it is). Prompts of other workloads are left out. */
DRIFT_API drift_status drift_store_count_outcomes(drift_store *st, drift_store_outcomes *out, drift_error *err);

/* What one run holds, per workload. */
typedef struct drift_store_run_counts {
    size_t answers[DRIFT_WL_COUNT];          /* responses holding an answer */
    size_t errors[DRIFT_WL_COUNT];           /* failed requests */
    size_t cut[DRIFT_WL_COUNT];              /* of the answers, those the token limit cut
                                                (finish_reason "length") */
} drift_store_run_counts;

/* Answers, failed requests and answers cut by the token limit of run
 * `label`, per workload (all zero when there is no such run). */
DRIFT_API drift_status drift_store_count_run(drift_store *st, const char *label, drift_store_run_counts *out,
                                             drift_error *err);

/* When each response of run_id (replicate 0) was stored: (prompt_rowid,
 * unix seconds of created_at; -1 when unreadable), ordered by
 * prompt_rowid, malloc'd in *out (n rows; NULL when none). A traffic
 * store's pairs by time (drift over time, docs/monitoring.md). */
typedef struct drift_response_time {
    int64_t prompt_rowid;
    int64_t unix_s;
} drift_response_time;
DRIFT_API drift_status drift_store_response_times(drift_store *st, int64_t run_id, drift_response_time **out,
                                                  size_t *n, drift_error *err);

/* Retention (a traffic store, docs/monitoring.md): deletes the responses
 * of run_id stored before `before_iso` ("YYYY-MM-DDTHH:MM:SSZ"; NULL: no
 * age limit) and those beyond the newest `keep_newest` (< 0: no count
 * limit), with their scores and embeddings, then the prompts of their
 * suites that no response uses any more (a request's text goes with its
 * last answer), in one transaction. *deleted gets the responses deleted. */
DRIFT_API drift_status drift_store_prune_responses(drift_store *st, int64_t run_id, const char *before_iso,
                                                   int64_t keep_newest, int64_t *deleted, drift_error *err);

/* Sum of the completion tokens of every answer in the store (unknown counts
 * are left out). */
DRIFT_API drift_status drift_store_completion_tokens(drift_store *st, int64_t *tokens, drift_error *err);

/* ---- merging stores ---- */

/* What drift_store_merge copied. */
typedef struct drift_store_merged {
    size_t runs, runs_skipped;     /* skipped: an identical run was already in the output */
    size_t prompts, responses, scores, embeddings;
} drift_store_merged;

/* Copies every run of the store at in_path, with its prompts, responses,
 * scores and embeddings, into st, in one transaction (rolled back on any
 * failure: st keeps what it had). in_path is opened once with
 * drift_store_open first (checked to be a DriftBench store, migrated).
 *  - prompts are deduplicated by (suite, prompt_id); the same key with
 *    another hash is DRIFT_ERR_MISMATCH naming the prompt;
 *  - a run whose label is new is copied under a new id; a label already in
 *    st must have the same target, config, decoding and number of answers
 *    (then it is skipped, counted in runs_skipped), else DRIFT_ERR_MISMATCH
 *    naming the label: two different runs under one label would make every
 *    later comparison ambiguous;
 *  - responses, scores and embeddings are re-keyed to st's ids, scores in
 *    the input's order so the latest score stays the latest.
 * Messages begin "merge IN_PATH: ". The counts are added to *stats (NULL:
 * not counted). */
DRIFT_API drift_status drift_store_merge(drift_store *st, const char *in_path, drift_store_merged *stats,
                                         drift_error *err);
/* drift_store_merge, but first, in the same transaction, the runs of st
 * labelled replace[0..n_replace) (those that exist) are deleted with their
 * responses, scores and embeddings, and so are the prompts of their suites
 * that no response uses any more: the input's runs of those labels then
 * take their place (what `import --replace` does). A failure leaves st as
 * it was, the replaced runs included. */
DRIFT_API drift_status drift_store_merge_replace(drift_store *st, const char *in_path, const char *const *replace,
                                                 size_t n_replace, drift_store_merged *stats, drift_error *err);

/* ---- managing runs (store_manage.c) ---- */

/* A target's identity, what of it decides a run's answers (malloc'd; NULL
 * on nomem): its record's form (no secrets, no credential parameters)
 * without the endpoint. http(s): "http" and the sorted parameters but
 * max_reply_mb ("http?api=chat&model=m"), whatever the scheme, host, port
 * and path; embedded: the model path and every parameter, sorted. */
DRIFT_API char *drift_store_target_identity(const char *target);

/* One endpoint of a run: a stretch of begins through one target. */
typedef struct drift_run_endpoint {
    char *target;          /* record's form */
    char *first_at, *last_at;
    long begins;           /* run_begin calls through it in this stretch */
} drift_run_endpoint;

/* What a run holds, for `runs list` and `runs show`. */
typedef struct drift_run_overview {
    drift_run_info info;
    char *identity;        /* drift_store_target_identity of info.target */
    size_t responses;      /* rows: answers and failed requests */
    size_t failed;         /* failed requests */
    size_t scored;         /* responses with at least one score */
    size_t scores;         /* score rows (one per evaluator and response) */
    size_t embeddings;
    size_t n_endpoints;    /* endpoint stretches (1 for a run never resumed) */
    size_t resumes;        /* begins after the first (0: never resumed, or unknown before schema v3) */
    char *last_begun;      /* the last resume, NULL when never resumed */
    int locked;            /* a live writer holds the run's lock */
    char lock_holder[400]; /* who, when locked: "pid N on host H since T" */
    /* drift_store_run_overview only (else NULL / zero): */
    drift_run_endpoint *endpoints; /* (n_endpoints,) oldest first */
    drift_store_run_counts per_workload;
    size_t scored_per_workload[DRIFT_WL_COUNT];
} drift_run_overview;

/* Every run, oldest first, with its counts (one read snapshot). Free the
 * array with drift_run_overview_array_free. Works on read-only handles and
 * on older schemas (a store before v3 gives one endpoint per run, its
 * target). */
DRIFT_API drift_status drift_store_run_overviews(drift_store *st, drift_run_overview **out, size_t *n,
                                                 drift_error *err);
/* One run with its endpoint history and counts per workload;
 * DRIFT_ERR_NOT_FOUND as drift_store_run_get. Empty with
 * drift_run_overview_clear. */
DRIFT_API drift_status drift_store_run_overview(drift_store *st, const char *label, drift_run_overview *out,
                                                drift_error *err);
DRIFT_API void drift_run_overview_clear(drift_run_overview *ov);
DRIFT_API void drift_run_overview_array_free(drift_run_overview *ov, size_t n);

/* Renames run old_label to new_label in one transaction. Every row keys
 * the run by its id (responses, endpoints; scores and embeddings by
 * response), so they all follow; stale lock rows of either label go.
 * Refused: old_label missing (DRIFT_ERR_NOT_FOUND listing the labels),
 * new_label taken (DRIFT_ERR_MISMATCH), a live writer on old_label or
 * new_label (DRIFT_ERR_STORE naming it), a read-only handle. */
DRIFT_API drift_status drift_store_run_rename(drift_store *st, const char *old_label, const char *new_label,
                                              drift_error *err);

/* What deleting a run removes (or removed). */
typedef struct drift_run_removal {
    size_t responses;      /* answers and failed requests */
    size_t failed;         /* of those, failed requests */
    size_t scores, embeddings, endpoints;
    int locked;            /* drift_store_run_removal: a live writer holds it (delete would refuse) */
    char lock_holder[400];
} drift_run_removal;

/* What drift_store_run_delete of label would remove, changing nothing. */
DRIFT_API drift_status drift_store_run_removal(drift_store *st, const char *label, drift_run_removal *out,
                                               drift_error *err);
/* Deletes run label with its responses, scores, embeddings, endpoints and
 * lock row, in one transaction; *out says how many of each went. Prompts
 * stay (suites are shared by runs; merge --replace is what prunes them).
 * Refused, nothing changed: no such run (DRIFT_ERR_NOT_FOUND), a live
 * writer holds it (DRIFT_ERR_STORE naming it), a read-only handle. */
DRIFT_API drift_status drift_store_run_delete(drift_store *st, const char *label, drift_run_removal *out,
                                              drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
