/* pipeline.h - the stages of a study as library functions: run (a suite
 * against one target into the store), matrix (every configuration of a spec:
 * run + score), the scorer (drift_scorer: evaluators opened once, given
 * labels scored; drift_score_run below is its one-call form) and measure
 * (measure.h: two runs + scoring + compare over one session).
 *
 * Every stage has the same shape: it takes the open store, an options struct
 * (filled with its _default function first), reports progress through one
 * callback type (drift_progress_cb below, shared by all stages), stops when
 * the options' cancel hook says so, and returns a drift_status with the
 * message in drift_error plus a summary struct the caller owns. A stage never
 * prints and never exits; the caller decides what to show.
 *
 * Progress events of one stage, in order:
 *
 *   BEGIN (total known) -> (STEP | ITEM | SKIP)* -> END
 *
 * A stage that runs another stage (matrix runs run) passes the inner stage's
 * events through unchanged: p->stage says whose event it is. */
#ifndef DRIFTBENCH_PIPELINE_H
#define DRIFTBENCH_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/eval.h"
#include "driftbench/import.h"
#include "driftbench/matrix.h"
#include "driftbench/status.h"
#include "driftbench/store.h"
#include "driftbench/target.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- progress, shared by every stage ---- */

typedef enum drift_progress_event {
    DRIFT_PROGRESS_BEGIN = 0, /* the stage starts its work: total is known */
    DRIFT_PROGRESS_STEP = 1,  /* done advanced by one or more units */
    DRIFT_PROGRESS_ITEM = 2,  /* one item (label) of the stage finished */
    DRIFT_PROGRESS_SKIP = 3,  /* one item (label) was found complete already and not redone */
    DRIFT_PROGRESS_END = 4    /* the stage stops (done, failed or cancelled): always after BEGIN */
} drift_progress_event;

/* One request of a run, as its outcome is stored: given with the run
 * stage's STEP event that counts it (drift_progress.request), for a caller
 * that logs each request (the CLI's -v). Scalars copied from the outcome;
 * the strings are valid during the progress call. */
typedef struct drift_request_outcome {
    const char *prompt_id;        /* the suite's id of the prompt ("" if none) */
    int replicate;                /* 0..replicates-1 */
    int ok;                       /* 1 an answer, 0 a failed request */
    drift_fail_cause cause;       /* failed: why (types.h); DRIFT_FAIL_NONE for an answer */
    int http_status;              /* the status answered; 0 if none */
    const char *error;            /* failed: its message (maybe cut); NULL for an answer */
    const char *finish_reason;    /* an answer's "stop", "length", ...; NULL if none */
    int attempts;                 /* requests sent for it (retries included); 0 unknown */
    double latency_ms;            /* of the successful attempt (or the last one) */
    int prompt_tokens;            /* -1 unknown */
    int completion_tokens;        /* -1 unknown */
} drift_request_outcome;

typedef struct drift_progress {
    const char *stage;            /* "run", "score", "matrix", "lab", ... */
    drift_progress_event event;
    const char *label;            /* the run label / item concerned; NULL if none */
    size_t done, total;           /* units of the stage (requests, configurations); total 0 = unknown */
    size_t errors;                /* units that ended in an error so far */
    double elapsed_ms;            /* since the stage began */
    double eta_ms;                /* estimated time left; < 0 when unknown */
    /* The stage's summary as it stands, for a caller that shows more than the
     * counts: a drift_run_summary for "run", a drift_matrix_summary for
     * "matrix" (each stage's header says which type). Valid during the call. */
    const void *summary;
    /* Stage "run", event STEP: the request whose outcome this step stored
     * (one STEP per outcome); NULL for every other event. Valid during the
     * call. A stage that passes run's events through passes it too. */
    const drift_request_outcome *request;
} drift_progress;

/* Called on the thread that called the stage. */
typedef void (*drift_progress_cb)(void *user, const drift_progress *p);

/* ---- run: a suite against one target, stored under a label ---- */

/* The order a run asks its pending prompts in. Answers are stored by
 * prompt, so the order changes what is stored only when the run is cut
 * short (the first prompts asked are the ones kept). */
typedef enum drift_run_order {
    DRIFT_ORDER_SUITE = 0,           /* suite order (default) */
    DRIFT_ORDER_RANDOM = 1,          /* seeded random order: drift_seq_order(prompt id, replicate, order_seed) */
    DRIFT_ORDER_RISK = 2             /* descending flip risk of a stored run's answers (risk_from) */
} drift_run_order;

/* "suite", "random", "risk" -> *out; anything else DRIFT_ERR_INVALID naming them. */
DRIFT_API drift_status drift_run_order_parse(const char *name, drift_run_order *out, drift_error *err);

typedef struct drift_run_opts {
    const char *label;               /* run label in the store (required) */
    const char *target;              /* target spec: http://... or embedded:... (required) */
    /* The address opened when it differs from target (NULL = target): a
     * server started on a port chosen at start, where target keeps
     * "{port}" so that a resumed run on another port is the same run. The
     * store records target only. */
    const char *target_url;
    const char *const *suites;       /* (n_suites,) suite specs: files or builtin:NAME */
    size_t n_suites;
    const char *config;              /* "k=v,..." dimensions, over the detected ones; NULL = none */
    drift_target_opts target_opts;   /* its cancel hook is replaced by the stage's */
    drift_gen_params params;         /* decoding */
    int replicates;                  /* samples per prompt; default 1 */
    long limit;                      /* only the first `limit` prompts of each suite; 0 = all */
    /* Cancellation (NULL: never): polled between steps and given to the
     * target (drift_target_opts.cancel), so requests in flight end at once. */
    int (*cancel)(void *cancel_user);
    void *cancel_user;
    /* NULL: none; events of stage "run", summary a drift_run_summary; one
     * STEP per outcome stored, with its request (drift_progress.request) */
    drift_progress_cb progress;
    void *progress_user;
    drift_run_order order;           /* default DRIFT_ORDER_SUITE */
    uint64_t order_seed;             /* RANDOM: the order's seed; RISK: breaks ties of equal risk */
    /* RISK: the label of a stored run (in the same store, with logprobs:
     * run --logprobs K) whose answers rank the prompts, riskiest first
     * (drift_risk_score_for of its replicate-0 answer); prompts it has no
     * risk for come last, in the seeded order. NULL: the run itself (a
     * resumed run whose stored answers have logprobs). */
    const char *risk_from;
    /* Sequential asking (measure --sequential); NULL: every pending pair is
     * asked. Needs order RANDOM. Called once per pending pair, in the run's
     * order, before any request is sent: wl is the prompt's workload, rank
     * the pair's 0-based rank in the seeded order (drift_seq_order with
     * order_seed) among all n_wl pairs (prompts x replicates) of that
     * workload in the suites, whether stored or not. Returns 1 to ask the
     * pair now, 0 to leave it missing (the run then stays unfinished, and a
     * later call asks it if select says so). With select set the decoding
     * record gets "sequential": {"alpha": seq_alpha, "order_seed": S,
     * "pairs": {"math": n_wl, ...}, "budget": {"math": 0.02, ...}} so that
     * a replay of the stored runs (drift_compare_sequential) and the report
     * know the suite's size and the budgets the stops were decided at. */
    int (*select)(void *select_user, drift_workload wl, size_t rank, size_t n_wl);
    void *select_user;
    double seq_alpha;                /* recorded with select (the gate's error rate) */
    const double *seq_budget;        /* (DRIFT_WL_COUNT,) recorded with select: fractions, < 0 none; NULL none */
    /* 1: label is a base nobody chose: the run is stored under label,
     * label-2, label-3, ...: the first free one or the one with this run's
     * identity (drift_store_run_begin_free), so the same request resumes
     * the same run and another one never collides. drift_run_label says
     * which label it took. */
    int label_free;
} drift_run_opts;

/* How far a run stage got. A failure leaves step at the one that failed. */
typedef enum drift_run_step {
    DRIFT_RUN_STEP_TARGET = 0,   /* opening the target */
    DRIFT_RUN_STEP_CONFIG = 1,   /* merging the detected dimensions with opts.config */
    DRIFT_RUN_STEP_SUITES = 2,   /* loading the suites, storing their prompts, rendering them */
    DRIFT_RUN_STEP_BEGIN = 3,    /* beginning or resuming the run (label lock), finding what is missing */
    DRIFT_RUN_STEP_GENERATE = 4, /* asking the target, storing outcomes in batches */
    DRIFT_RUN_STEP_FINISH = 5,   /* marking the run finished */
    DRIFT_RUN_STEP_CHECK = 6,    /* finished in the store; checking that some request was answered */
    DRIFT_RUN_STEP_DONE = 7      /* success */
} drift_run_step;

/* One kind of failed request of a run: a cause (types.h) and, for
 * DRIFT_FAIL_HTTP, the status ("HTTP 404" and "HTTP 500" are two kinds). */
typedef struct drift_run_failure {
    drift_fail_cause cause;
    int http_status;             /* DRIFT_FAIL_HTTP: the status answered; else 0 */
    size_t count;                /* failed requests of this kind stored by this call */
    char first[256];             /* the first one's message */
} drift_run_failure;

/* Kinds of failure a run summary tells apart; more go to failures_other. */
#define DRIFT_RUN_FAILURE_KINDS 8

typedef struct drift_run_summary {
    drift_run_step step;
    int resumed;                 /* the label existed: its stored outcomes were kept */
    size_t prompts;              /* prompts of the suites (after limit) */
    int replicates;
    size_t requested;            /* (prompt, replicate) pairs missing at the start, asked now */
    size_t done;                 /* of those, outcomes stored */
    size_t answers, errors;      /* outcomes stored by this call: answers and failed requests */
    size_t deferred;             /* pending pairs opts.select left missing (the run stays unfinished) */
    char first_error[256];       /* the first failed request's message ("" if none) */
    /* The errors by kind, in the order each kind first failed: (n_failures,)
     * filled; their counts plus failures_other make errors. Fixed size: the
     * summary is copied by value (matrix) and never allocates. */
    drift_run_failure failures[DRIFT_RUN_FAILURE_KINDS];
    size_t n_failures;
    size_t failures_other;       /* failed requests of kinds past the table's room */
    double elapsed_ms;
} drift_run_summary;

/* The kind that failed most often in s (the first to fail of those tied);
 * NULL when no request failed. 1 in *only when it is the only kind. */
DRIFT_API const drift_run_failure *drift_run_failure_main(const drift_run_summary *s, int *only);

/* Fills o with the defaults: target and decoding defaults, one replicate. */
DRIFT_API void drift_run_opts_default(drift_run_opts *o);

/* Runs (or resumes) the run o->label of o->target over the suites into st.
 * Loads every suite and stores its prompts, checks and records the
 * configuration, begins the run (or resumes it: target, decoding and config
 * must agree, DRIFT_ERR_MISMATCH otherwise) holding the label's writer lock
 * for the call, asks the target the (prompt, replicate) pairs not stored yet
 * and stores every outcome (answer or failed request) in batches of one
 * transaction each (at least every 256 outcomes or every second), then marks
 * the run finished. A cancel stops it with DRIFT_ERR_CANCELLED after storing
 * what was received; what was not received stays missing, so calling again
 * resumes. When every request failed the run is still finished and stored,
 * but the call fails (step CHECK) with a message naming the first error.
 * sum (required) is filled in every case; step says where a failure was.
 * It is drift_run_begin + drift_run_ask + drift_run_end (below). */
DRIFT_API drift_status drift_run_execute(drift_store *st, const drift_run_opts *o, drift_run_summary *sum,
                                         drift_error *err);

/* The run stage in three calls, for a caller that asks one run several
 * times (measure --sequential asks both runs in chunks): begin opens the
 * target and loads, stores and renders the suites once; each ask then does
 * what drift_run_execute does from beginning the run on (label lock,
 * pending pairs, order, o->select, requests, outcomes stored, the run
 * finished when nothing was deferred, the CHECK step); end closes what
 * begin opened. o is copied; the strings, suites and hooks it points to
 * must outlive the session. o->select is consulted by every ask, so a
 * caller moves its selection (its hook's state) between asks. */
typedef struct drift_run_session drift_run_session;

/* Opens o->target (o->target_url when set) and stores and renders the
 * suites (steps TARGET, CONFIG, SUITES). On success *out is a session for
 * drift_run_ask; on failure *out is NULL, sum's step says where, and
 * nothing is left open. sum (required) gets prompts and replicates. */
DRIFT_API drift_status drift_run_begin(drift_store *st, const drift_run_opts *o, drift_run_session **out,
                                       drift_run_summary *sum, drift_error *err);

/* Asks the session's run what is missing and selected now (see
 * drift_run_execute, from step BEGIN on); sum (required) is refilled for
 * this ask. Failures and cancels are those of drift_run_execute; the
 * session stays usable after one (a cancelled target stays cancelled while
 * its hook says so). */
DRIFT_API drift_status drift_run_ask(drift_run_session *s, drift_run_summary *sum, drift_error *err);
/* The session's run label: o->label, or with o->label_free the label the
 * first ask took (before it: o->label). */
DRIFT_API const char *drift_run_label(const drift_run_session *s);

/* Closes the target and frees the session (NULL is a no-op). */
DRIFT_API void drift_run_end(drift_run_session *s);

/* ---- score: a stored run judged by the evaluators (eval.h), score.c ---- */

/* A verdict cache shared by scoring calls (the lab's configurations, side by
 * side on several threads): most configurations give the baseline's answer
 * text, and evaluators are deterministic given the text, so each distinct
 * (evaluator, its settings, prompt, answer text) is judged once and the
 * verdict reused. Keys hold the full bytes (the hash only finds the bucket),
 * so a reuse is never a collision. Only verdicts are kept: an evaluator
 * error (DRIFT_LABEL_ERROR, a sandbox_error), a cancel or a failed request
 * is never cached. Chat keeps the embedding of each distinct text (the
 * similarity is computed later against the baseline's own embedding).
 * Thread-safe. */
typedef struct drift_score_cache drift_score_cache;

/* A new empty cache; NULL when out of memory. */
DRIFT_API drift_score_cache *drift_score_cache_new(void);
/* Frees the cache and what it holds (NULL is fine). */
DRIFT_API void drift_score_cache_free(drift_score_cache *c);

typedef struct drift_score_cache_stats {
    size_t entries;                       /* verdicts and embeddings held */
    size_t hits[DRIFT_WL_COUNT];          /* answers whose verdict was reused */
    size_t misses[DRIFT_WL_COUNT];        /* answers judged (and, unless an error, kept) */
} drift_score_cache_stats;

/* The cache's counts so far (c may be NULL: zeros). */
DRIFT_API void drift_score_cache_stats_get(drift_score_cache *c, drift_score_cache_stats *out);

typedef struct drift_score_opts {
    double long_f1_threshold;     /* default 0.5 */
    const char *guard_spec;       /* safety guard target (NULL: built-in if available) */
    const char *embedder_spec;    /* chat embedder target (NULL: built-in if available) */
    int unsafe_code_exec;         /* run code without isolation (explicit opt-in) */
    const char *python;           /* interpreter for code; default /usr/bin/python3 */
    int jobs;                     /* parallel evaluations; 0 = number of cores */
    int rescore;                  /* recompute existing scores */
    drift_progress_fn progress;
    void *progress_user;
    int (*cancel)(void *user);    /* polled between answers and while a program runs
                                     (every 100 ms); nonzero: scoring stops, what was
                                     judged is stored, drift_score_run returns
                                     DRIFT_ERR_CANCELLED and the next call goes on */
    void *cancel_user;
    drift_score_cache *cache;     /* NULL: judge every answer; else reuse verdicts (see above) */
} drift_score_opts;

DRIFT_API void drift_score_opts_default(drift_score_opts *o);

typedef struct drift_score_summary {
    size_t scored[DRIFT_WL_COUNT];        /* labels computed now */
    size_t reused[DRIFT_WL_COUNT];        /* of those, verdicts taken from opts->cache */
    size_t already[DRIFT_WL_COUNT];       /* already scored before */
    size_t eval_errors[DRIFT_WL_COUNT];   /* evaluator could not judge */
    size_t not_computable[DRIFT_WL_COUNT];/* no evaluator available (reason below) */
    char reason[DRIFT_WL_COUNT][256];     /* why not computable, e.g. "no --guard given" */
    char code_sandbox[64];                /* isolation that ran code answers in this call
                                             (drift_sandbox_check's name, e.g.
                                             "bubblewrap+seccomp"); "" when none ran */
} drift_score_summary;

/* Scores every answered response of run `label` (NULL: all runs) that has
 * no score yet or whose latest score is DRIFT_LABEL_ERROR: an evaluator
 * error is retried by the next score, while a stored PASS / FAIL / NONE is
 * kept (opts->rescore recomputes every answered one). Failed requests are
 * never scored (`run` asks them again). An unavailable evaluator is no
 * error: its pending answers are counted in summary->not_computable with
 * the reason. Errors are store failures and running out of memory. */
DRIFT_API drift_status drift_score_run(drift_store *st, const char *label, const drift_score_opts *opts,
                                       drift_score_summary *summary, drift_error *err);

/* The import's scoring (import.h's drift_import_score_fn, given by the
 * caller as drift_import_store_opts.score): drift_score_run of run `label`
 * of st with rescore and o's unsafe_code_exec, python and jobs (the rest
 * default); why (room cap) gets the reason of an evaluator that could not
 * run (of the last such workload), "" when none. */
DRIFT_API drift_status drift_import_score(drift_store *st, const char *label, const drift_import_store_opts *o,
                                          char *why, size_t cap, drift_error *err);

/* ---- score: an open-once scorer over given labels ---- */

/* Evaluators opened once (each on its first use: the guard, the embedder,
 * the code sandbox's check) and kept until drift_scorer_close, for a caller
 * that scores the same store several times (measure --sequential after
 * every chunk, matrix after each configuration, the lab's stochastic leg
 * after each run). drift_score_run (above) is open + score + close. */
typedef struct drift_scorer drift_scorer;

/* A scorer over st with opts (NULL: defaults; copied, what it points to -
 * specs, cache, hooks - must outlive the scorer). Opens no evaluator yet. */
DRIFT_API drift_status drift_scorer_open(drift_store *st, const drift_score_opts *opts, drift_scorer **out,
                                         drift_error *err);

/* Scores the runs labels[0..n) (each must exist: the store's error
 * otherwise, before anything is scored) as drift_score_run scores one run,
 * and only them; summary (NULL: not wanted) is zeroed and filled for this
 * call. An evaluator found unavailable by an earlier call stays so; its
 * reason is given again in this call's summary. */
DRIFT_API drift_status drift_scorer_score_labels(drift_scorer *s, const char *const *labels, size_t n,
                                                 drift_score_summary *summary, drift_error *err);

/* Closes the evaluators and frees s (NULL is a no-op). */
DRIFT_API void drift_scorer_close(drift_scorer *s);

/* ---- matrix: run + score every configuration of a spec ---- */

typedef struct drift_matrix_opts {
    int shard_index, shard_count;    /* run configurations i with i % count == index - 1; default 1/1 */
    int concurrency;                 /* in-flight requests / batch size per target; 0 = target default */
    /* Configurations side by side: <= 1 one at a time on the calling thread;
     * N > 1: N worker threads, each with its own store handle on the same
     * file (drift_store_path; SQLite serialises the writes), each taking the
     * next configuration in spec order. The stored answers and scores are
     * the same as one at a time (each configuration is its own run); a
     * store opened in memory runs one at a time. */
    int jobs;
    /* 1: a run finished before is run again for what it lacks (a spec that
     * adds suites to runs already stored); 0: it is skipped (SKIP). */
    int recheck;
    /* 1: a configuration that failed entirely - every request failed (the
     * run stage's step CHECK: stored and finished, e.g. prompts longer than
     * the model's context, or a server that is down) or it could not start
     * (its server did not start or get healthy, or its target could not be
     * opened: step TARGET) - is counted in all_failed, listed in failed[],
     * and the matrix goes on with the others; 0: it stops the matrix as any
     * failure. */
    int all_failed_ok;
    drift_score_opts score;          /* how each configuration is scored */
    /* 1: answers are stored, not scored (score them later, elsewhere:
     * drift_score_run, `driftbench score`), e.g. on a GPU machine that lacks
     * the code sandbox; 0: each configuration is scored after its run. */
    int no_score;
    int (*cancel)(void *cancel_user); /* NULL: never; polled between configurations and inside runs */
    void *cancel_user;
    /* Events of stage "matrix" (total = configurations of the shard; SKIP
     * when a configuration's run was finished before, ITEM when it is run and
     * scored; summary a drift_matrix_summary) and, in between, those of each
     * configuration's "run" stage (jobs <= 1), or (jobs > 1) a STEP of stage
     * "matrix" about once a second while configurations run, whose summary's
     * progress says how far each one is. Always on the calling thread. */
    drift_progress_cb progress;
    void *progress_user;
} drift_matrix_opts;

/* A configuration that failed entirely (drift_matrix_opts.all_failed_ok). */
typedef struct drift_matrix_failure {
    size_t config_index;         /* spec->configs[config_index] */
    int unstarted;               /* 1: it could not start (its server or its target), nothing was asked;
                                    0: every request failed */
    drift_run_failure main;      /* every request failed: the kind that failed most (drift_run_failure_main);
                                    cause DRIFT_FAIL_NONE when unstarted */
    int main_only;               /* main is the only kind that failed */
    char msg[DRIFT_ERROR_MSG_MAX]; /* why: the run's or the server's error message */
} drift_matrix_failure;

/* Configurations that failed entirely a summary lists; more are counted only. */
#define DRIFT_MATRIX_FAILURES_MAX 16

typedef struct drift_matrix_summary {
    size_t in_shard;             /* configurations of the spec in this shard */
    size_t configs;              /* of those, done (run + scored) so far */
    size_t skipped;              /* of those, complete before: not run again */
    double run_ms, score_ms;     /* wall time in generation and in scoring */
    drift_score_summary score;   /* summed over configurations */
    size_t config_index;         /* configuration being worked on: spec->configs[config_index] */
    const char *label;           /* its label (points into the spec) */
    double config_ms;            /* wall time of the last configuration done */
    int failed_in_run;           /* on failure: 1 the run stage failed (see run), 0 scoring or a cancel between */
    drift_run_summary run;       /* the last configuration's run stage */
    /* (spec->n_configs,) how far each configuration is, 0..1: requests
     * stored of those asked, 1 when run and scored (or skipped); valid
     * during a progress call */
    const double *progress;
    int jobs;                    /* configurations that ran side by side (1: one at a time) */
    size_t all_failed;           /* with all_failed_ok: configurations that failed entirely */
    char all_failed_msg[DRIFT_ERROR_MSG_MAX]; /* the first one's message */
    /* with all_failed_ok: the first min(all_failed, DRIFT_MATRIX_FAILURES_MAX)
     * of them, in the order they ended */
    drift_matrix_failure failed[DRIFT_MATRIX_FAILURES_MAX];
} drift_matrix_summary;

/* Fills o with the defaults: shard 1/1, score defaults. */
DRIFT_API void drift_matrix_opts_default(drift_matrix_opts *o);

/* Runs every configuration of spec in the shard, in spec order (jobs > 1:
 * started in spec order, side by side): its run (drift_run_execute with the
 * spec's suites, limit and decoding, the configuration's dimensions as
 * config) unless the run is already finished in the store with at least
 * one answer and o->recheck is 0 (a finished run's failed requests would
 * fail again; SKIP; a finished run whose every request failed is run
 * again, so a matrix never passes over one), then
 * scores it (its label alone, as drift_score_run with o->score would:
 * one drift_scorer per thread, opened once for all its configurations;
 * share a drift_score_cache there to judge each distinct answer once). A cancel between
 * configurations or inside a run stops with DRIFT_ERR_CANCELLED; calling
 * again resumes. The first failure stops the others (they store what they
 * have) and is returned, with sum's label, config_index, failed_in_run and
 * run saying which configuration and where; with o->all_failed_ok, a
 * configuration that failed entirely is no such failure but is listed in
 * sum->failed (the call returns DRIFT_OK: the caller decides what a failed
 * configuration means). sum (required) is filled in
 * every case. A configuration with a server (drift_matrix_server) has it
 * started before its run ("{port}" filled in the command and the target,
 * ready when its health path answers 200), shared with the next
 * configurations of the same worker that have the same command, and
 * stopped after, on every failure and on a cancel; a server that exits
 * during the run stops it unfinished (DRIFT_ERR_IO naming the command, its
 * status and the end of its output), so calling again restarts the server
 * and asks only what is missing. src/pipeline/matrix.c says more. */
DRIFT_API drift_status drift_matrix_run(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_opts *o,
                                        drift_matrix_summary *sum, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
