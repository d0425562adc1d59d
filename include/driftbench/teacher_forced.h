/* teacher_forced.h - token divergence's steps that run models (the
 * pipeline: src/pipeline/teacher_forced.c, kl_step.c), over the data and
 * math of divergence.h. Two sources of sequences:
 *   runs  two stored runs of embedded stacks (drift_tokdiv_runs,
 *         drift_tokdiv_runs_many);
 *   text  a raw text split as llama-perplexity splits it (drift_tokdiv_text);
 * and token KL as a step of its own, whose result the caller attaches:
 * compare --kl (drift_tokdiv_step_run, then drift_comparison_attach_kl:
 * drift_tokdiv_step_attach does both)
 * and report --kl N (drift_tokdiv_configs_run, then drift_html_opts.kl).
 * Nothing here prints. */
#ifndef DRIFTBENCH_TEACHER_FORCED_H
#define DRIFTBENCH_TEACHER_FORCED_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/compare.h"
#include "driftbench/divergence.h"
#include "driftbench/status.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_tokdiv_opts {
    unsigned workloads;         /* the workloads to score: bit (1u << w) per drift_workload; 0 (default) = all */
    size_t limit;               /* prompts per workload, a seeded random sample; 0 = all */
    uint64_t seed;              /* default 1 */
    const char *models_dir;     /* NULL, or where to look (by file name) for a run's model file
                                 * whose recorded path no longer exists */
    drift_progress_fn progress; /* NULL, or called after each prompt / chunk */
    void *progress_user;
    int (*cancel)(void *cancel_user); /* NULL, or nonzero to stop: DRIFT_ERR_CANCELLED */
    void *cancel_user;
    int http_method;            /* an HTTP stack's way to its prompt logprobs: a drift_plp_method
                                 * (prompt_logprobs.h); 0 = auto (vLLM's prompt_logprobs, then echo) */
} drift_tokdiv_opts;

DRIFT_API void drift_tokdiv_opts_default(drift_tokdiv_opts *o);

typedef struct drift_store drift_store;

/* Teacher-forces the target run's stack over the baseline run's answers
 * (replicate 0, answered, of every workload or those of o->workloads; o->limit per
 * workload) and fills *out (runs mode). Both runs' targets are read from
 * the store's runs table and opened. A run against an HTTP server is
 * forced through the server's prompt logprobs (api=completions: the text;
 * api=chat: the messages with the answer as an open assistant turn;
 * top-K: see teacher_forced.c and divergence.h's drift_tokdiv_compare_top;
 * the report's method says which). The baseline's recorded request
 * control (system prompt, template) is re-created for every stack.
 * Errors: DRIFT_ERR_NOT_FOUND (a label, a model file: the message says
 * --models DIR helps), DRIFT_ERR_UNSUPPORTED (an HTTP server that returns
 * no prompt logprobs, echo asked of an api=chat run, an import),
 * DRIFT_ERR_MISMATCH (the runs' apis differ, the two
 * vocabularies differ, or a workload's template is not the one the run
 * recorded), DRIFT_ERR_INVALID (no answers to score). A prompt that cannot
 * be scored (longer than the context, empty answer, bad stored token ids)
 * gets its error and no figures. */
DRIFT_API drift_status drift_tokdiv_runs(drift_store *st, const char *baseline_label, const char *target_label,
                                        const drift_tokdiv_opts *o, drift_tokdiv_report *out, drift_error *err);

/* drift_tokdiv_runs for n_targets target runs against one baseline run at
 * once: each prompt's baseline logits are computed once and compared with
 * every target's, so a matrix of N configurations costs one baseline pass
 * per prompt. *out = n_targets reports (the i-th for target_labels[i]),
 * freed with drift_tokdiv_reports_free. The same errors; any one of them
 * fails the whole call. The per-configuration mean KL a matrix report shows
 * is (*out)[i].overall.kl_mean, per workload (*out)[i].wl[w].kl_mean. */
DRIFT_API drift_status drift_tokdiv_runs_many(drift_store *st, const char *baseline_label,
                                             const char *const *target_labels, size_t n_targets,
                                             const drift_tokdiv_opts *o, drift_tokdiv_report **out,
                                             drift_error *err);
/* Text mode: baseline and target are embedded specs; text (len bytes) is
 * tokenized by the baseline; ctx >= 4. DRIFT_ERR_INVALID when the text has
 * fewer than 2 * ctx tokens or ctx exceeds a model's context; otherwise as
 * drift_tokdiv_runs. */
DRIFT_API drift_status drift_tokdiv_text(const char *baseline_spec, const char *target_spec, const char *text,
                                        size_t len, int ctx, const drift_tokdiv_opts *o, drift_tokdiv_report *out,
                                        drift_error *err);

/* ---- token KL as a step of its own (src/pipeline/kl_step.c) ----
 * The caller runs it beside what it reports and attaches the result
 * (compare: drift_comparison_attach_kl; the HTML report: drift_html_opts.kl),
 * so that neither the analyses nor the renderers run models. */

/* compare --kl's step: drift_tokdiv_runs of the two runs under o. When a
 * run's stack cannot be forced (DRIFT_ERR_UNSUPPORTED: an HTTP server
 * without prompt logprobs, echo asked of an api=chat run, an import) or its
 * server cannot be reached (DRIFT_ERR_HTTP) it succeeds with
 * unsupported = 1, note the library's reason and report empty; any other
 * failure is returned, its message prefixed "token KL: ". Clear
 * out->report with drift_tokdiv_report_clear (or hand it over). */
typedef struct drift_tokdiv_step {
    int unsupported;            /* 1: a run's stack cannot be forced now (note says why) */
    char note[512];
    drift_tokdiv_report report; /* when !unsupported */
} drift_tokdiv_step;
DRIFT_API drift_status drift_tokdiv_step_run(drift_store *st, const char *baseline_label, const char *target_label,
                                            const drift_tokdiv_opts *o, drift_tokdiv_step *out, drift_error *err);
/* compare --kl whole: drift_tokdiv_step_run over c's two runs with
 * compare's options (co's kl_limit, kl_seed, kl_models_dir, and
 * only_workload: that workload alone), its result attached to c
 * (drift_comparison_attach_kl; a stack that cannot be forced attaches the
 * note alone). The step's errors as drift_tokdiv_step_run's. */
DRIFT_API drift_status drift_tokdiv_step_attach(drift_store *st, drift_comparison *c, const char *baseline_label,
                                                const char *target_label, const drift_compare_opts *co,
                                                drift_error *err);

/* Token KL of n configurations (run labels[i]) each against its baseline
 * run baselines[i] (drift_tokdiv_runs_many, one call per baseline, in the
 * order baselines first appear): limit prompts per workload (>= 1), a
 * sample drawn from seed; models_dir as drift_tokdiv_opts. Configurations
 * with an HTTP side are forced one by one as drift_tokdiv_step_run does;
 * those that cannot be forced (its note) are listed in out->not_embedded
 * as "label (why)", not an error. progress (may be NULL) is called after
 * each prompt. Errors of drift_tokdiv_runs_many (a model file gone,
 * vocabularies that differ) fail the call, the message naming the
 * baseline. Free with drift_tokdiv_configs_clear. */
DRIFT_API drift_status drift_tokdiv_configs_run(drift_store *st, const char *const *labels,
                                               const char *const *baselines, size_t n, size_t limit, uint64_t seed,
                                               const char *models_dir, drift_progress_fn progress,
                                               void *progress_user, drift_tokdiv_configs *out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
