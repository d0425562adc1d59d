/* import.h - runs that other tools already made, read from their per-sample
 * output files and stored as DriftBench runs, so that two of them can be
 * compared (paired flips, intervals, the gate) without asking any server.
 *
 * Formats:
 *   - lm-evaluation-harness `--log_samples` files (samples_<task>_<date>.jsonl):
 *     one JSON object per line and per (document, filter). One file is one
 *     run; its documents are the prompts (suite "lm-eval:<task>", prompt id
 *     = doc_id); the answer is the model's raw generation (resps), or for
 *     loglikelihood tasks the choice with the highest filtered loglikelihood.
 *   - promptfoo's JSON output (`promptfoo eval -o results.json`): each
 *     provider is a run, each (prompt, test case) a prompt (suite
 *     "promptfoo[:<description>]", prompt id = the test's index, prefixed by
 *     the prompt's index when there are several prompts).
 *
 * Verdicts: the tool's own per-sample pass/fail is kept as one evaluator
 * ("lm_eval:<metric>[,<filter>]", "promptfoo"); where the workload is known
 * and the document carries a reference (GSM8K's "#### N" answer, HumanEval's
 * prompt/test/entry_point, a promptfoo test's `answer` / `test` +
 * `entry_point` vars) DriftBench's own evaluator (math, code-pass@1) scores
 * the same answer too, through the scoring the caller hands in
 * (drift_import_store_opts.score: the pipeline's drift_import_score). The store's "latest score" rule decides which label
 * `compare` counts: ours by default, the tool's with
 * DRIFT_IMPORT_VERDICT_TOOL (import a file twice under two labels to set
 * both side by side). Answers the tool recorded as errors are stored as
 * failed requests (never an answer, never a flip).
 *
 * Documents are matched across runs by doc_id (the store's prompt id) and
 * checked by content: a prompt's hash covers its workload, input and
 * reference, so the same doc_id with another document (another doc_hash)
 * is a mismatch; so is a document that only one of two runs of a task has.
 * Both are errors naming the two files and the document.
 *
 * Outside data is hostile: every field is checked; an error names the file,
 * the line (lm-eval) or the result's index (promptfoo) and the field. What
 * becomes an identifier (prompt ids, labels, suites, the file's path in the
 * run's target) must be valid UTF-8 (a PostgreSQL store takes nothing
 * else): an id that is not is refused naming the file and the line.
 *
 * Import is exact: the run records the file's size and content hash. The
 * same file imported again under the same label changes nothing; a file
 * whose content changed since is refused (DRIFT_ERR_MISMATCH naming the
 * file and the run) unless the caller asks to replace the stored run
 * (drift_import_store_opts.replace), which happens in the transaction that
 * stores the new one. */
#ifndef DRIFTBENCH_IMPORT_H
#define DRIFTBENCH_IMPORT_H

#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum drift_import_format {
    DRIFT_IMPORT_AUTO = 0,      /* detected from the content */
    DRIFT_IMPORT_LMEVAL = 1,    /* lm-evaluation-harness --log_samples jsonl */
    DRIFT_IMPORT_PROMPTFOO = 2  /* promptfoo eval -o results.json */
} drift_import_format;

/* Which stored label compare counts when both exist. */
typedef enum drift_import_verdict {
    DRIFT_IMPORT_VERDICT_OURS = 0, /* ours where computable, else the tool's */
    DRIFT_IMPORT_VERDICT_TOOL = 1  /* always the tool's */
} drift_import_verdict;

typedef struct drift_import_opts {
    drift_import_format format;    /* default AUTO */
    drift_workload workload;       /* DRIFT_WL_UNKNOWN: from the task (gsm8k: math, humaneval: code)
                                      or the promptfoo test's metadata/vars "workload" */
    const char *metric;            /* lm-eval: the pass/fail metric; NULL: exact_match, acc, pass@1, ...
                                      (the first present), else the first of the row's "metrics" */
    const char *filter;            /* lm-eval: which filter's rows; NULL: the first in the file */
    const char *task;              /* lm-eval: task name; NULL: from the file name */
    const char *model;             /* model name recorded in the config; NULL: from the file */
} drift_import_opts;

DRIFT_API void drift_import_opts_default(drift_import_opts *o);

/* One sample: a prompt of the run with the tool's answer and verdict. */
typedef struct drift_import_sample {
    char *prompt_id;       /* lm-eval doc_id; promptfoo test index */
    char *doc_hash;        /* lm-eval doc_hash (NULL when the file has none); promptfoo: NULL */
    long where;            /* lm-eval: line; promptfoo: index in results[] */
    drift_workload workload;
    char *input;           /* the task text (question, code prompt, rendered prompt, or the doc) */
    char *reference_json;  /* what our evaluator needs, sorted keys; {} when nothing is known */
    int ours;              /* 1: reference_json lets DriftBench's evaluator judge the answer */
    char *hash;            /* 16 hex over workload, input and reference (as suite prompts) */
    char *answer;          /* the model's text; NULL when error is set */
    char *error;           /* the tool recorded a failed request */
    int verdict;           /* drift_label of the tool: PASS / FAIL (ERROR with error) */
    double value;          /* the tool's number (metric value, promptfoo score) */
    char *detail_json;     /* the tool's evidence (filtered answer, reason) */
    double latency_ms;     /* 0 when unknown */
    int prompt_tokens, completion_tokens; /* -1 unknown */
} drift_import_sample;

/* One run read from a file. */
typedef struct drift_import_run {
    char *source;          /* the file path as given */
    char *label;           /* default label: "<model>/<task>" (lm-eval), the provider (promptfoo) */
    char *suite;           /* prompts' suite: "lm-eval:<task>", "promptfoo[:<description>]" */
    char *evaluator;       /* the tool's evaluator name */
    char *model;           /* model / provider name */
    char *framework;       /* "lm-eval", "promptfoo" */
    char *decoding_json;   /* what the file says about decoding ({"source":..,"gen_kwargs":..}) */
    drift_import_sample *samples;
    size_t n;
} drift_import_run;

typedef struct drift_import_set {
    drift_import_format format;
    drift_import_run *runs;
    size_t n;
    /* the file's content, as parsed: its size and FNV-1a 64 hash (16 hex),
     * stored with each run so that a re-import of a changed file is seen */
    size_t file_bytes;
    char file_hash[17];
} drift_import_set;

/* Parses one output file held in memory. `name` is used in messages (and as
 * the source path: the lm-eval task and model come from it). Every row is
 * validated; the first bad one fails the whole parse with DRIFT_ERR_PARSE
 * "NAME:LINE: field ...: ..." (promptfoo: "NAME: results[I]: field ...").
 * Unknown workload (and none in opts) is DRIFT_ERR_INVALID naming the task.
 * *out is freed with drift_import_set_free. */
DRIFT_API drift_status drift_import_parse(const char *name, const char *data, size_t len,
                                          const drift_import_opts *opts, drift_import_set **out, drift_error *err);
/* drift_import_parse over the file at path (DRIFT_ERR_IO naming it when it
 * cannot be read). */
DRIFT_API drift_status drift_import_load(const char *path, const drift_import_opts *opts, drift_import_set **out,
                                         drift_error *err);
DRIFT_API void drift_import_set_free(drift_import_set *s);

/* Checks that two runs of one suite cover the same documents with the same
 * content: DRIFT_ERR_MISMATCH naming both sources and the first document
 * that only one has, or whose doc_hash (when both have one, else the prompt
 * hash) differs. Runs of different suites are DRIFT_ERR_MISMATCH too (they
 * cannot be paired). */
DRIFT_API drift_status drift_import_check_pair(const drift_import_run *a, const drift_import_run *b,
                                               drift_error *err);

typedef struct drift_import_store_opts drift_import_store_opts;

/* Scores run `label` of the import's private store st with DriftBench's
 * own evaluators, rescoring (so ours is written after the tool's verdicts),
 * as o's unsafe_code_exec, python and jobs say; why (room cap) gets why an
 * evaluator could not run, "" when none. The pipeline's drift_import_score
 * (pipeline.h) is the one to give: scoring is a pipeline stage, which this
 * layer does not call itself. */
typedef drift_status (*drift_import_score_fn)(drift_store *st, const char *label, const drift_import_store_opts *o,
                                              char *why, size_t cap, drift_error *err);

struct drift_import_store_opts {
    drift_import_verdict verdict;  /* default OURS */
    const char *config;            /* "k=v,..." dimensions over the detected ones (model, framework) */
    int partial;                   /* 1: allow runs of a task with different document sets */
    int unsafe_code_exec;          /* run code answers without isolation (explicit opt-in) */
    const char *python;            /* interpreter for code answers; NULL default */
    int jobs;                      /* parallel code evaluations; 0 = cores */
    int replace;                   /* 1: a label already in st from an import of other content (or of a
                                      file whose content was not recorded) is replaced, in the same
                                      transaction, instead of refused */
    drift_import_score_fn score;   /* how answers with a reference ours can use are scored by ours
                                      (drift_import_score, pipeline.h); NULL (default): they are not,
                                      and each run's ours_note says so */
};

DRIFT_API void drift_import_store_opts_default(drift_import_store_opts *o);

/* What one stored run holds: its tool's verdicts beside ours. */
typedef struct drift_import_summary {
    char label[256];
    char evaluator[128];           /* the tool's evaluator */
    size_t answers, errors;        /* answers, failed requests */
    size_t tool_pass, tool_fail;
    size_t ours_scored;            /* answers our evaluator judged (PASS/FAIL) */
    size_t ours_pass, ours_error;  /* of those PASS; answers ours could not judge */
    size_t agree, tool_pass_ours_fail, tool_fail_ours_pass;
    char ours_evaluator[64];       /* "math", "code-pass@1", "" when none ran */
    char ours_note[256];           /* why ours did not run (no reference, no sandbox), "" */
    int already;                   /* the store held this run already (same import): left as it was */
    int replaced;                  /* the store held this label from other content: replaced (opts.replace) */
} drift_import_summary;

/* Stores the runs of every set in sets[0..n_sets) into st, in one
 * transaction: nothing is stored unless all of them are (the runs are
 * built and scored in a private temporary store, then copied into st by
 * drift_store_merge). labels[i] (NULL entries, or labels NULL: each run's
 * default label) names the i-th run over all sets in order. Before
 * anything is written:
 *  - two runs with one label is DRIFT_ERR_INVALID;
 *  - runs of one suite (this call's, and the ones st already holds) are
 *    checked pairwise (drift_import_check_pair, or the stored prompts'
 *    documents) unless opts->partial: DRIFT_ERR_MISMATCH naming both files
 *    and the document;
 *  - a label already in st must hold the same import: the same file path,
 *    content (size and hash), config and decoding, then it is skipped;
 *    else DRIFT_ERR_MISMATCH naming the file and the run (a changed file,
 *    one stored without a recorded content, one from another file, another
 *    --config), unless
 *    opts->replace and the stored run was imported: then its responses,
 *    scores, embeddings and the prompts only it used are deleted in the
 *    transaction that stores the new run (drift_store_merge_replace). A
 *    label held by a run that was not imported is never replaced;
 *  - an id, label or path that is not valid UTF-8 is DRIFT_ERR_INVALID.
 * The private store lives in $TMPDIR/driftbench-import-PID-XXXXXX (flock'd
 * while in use) and is removed when the call returns; private stores that a
 * killed import left (their process gone, their lock free, owned by this
 * user; never followed through a symlink) are removed by the next call. 
 * The run's config: model, framework ("lm-eval", "promptfoo"), hardware and
 * precision "unknown", overridden by opts->config. summaries (NULL: not
 * wanted) gets one entry per run; *n_summaries their count (free with
 * free()). */
DRIFT_API drift_status drift_import_store(drift_store *st, drift_import_set *const *sets, size_t n_sets,
                                          const char *const *labels, size_t n_labels,
                                          const drift_import_store_opts *opts, drift_import_summary **summaries,
                                          size_t *n_summaries, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
