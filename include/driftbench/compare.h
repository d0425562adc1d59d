/* compare.h - paired comparison of a baseline run and a target run: flips
 * per workload in both directions with Wilson 95% CIs, exact McNemar,
 * accuracies, budgets and the verdict. Also the textbook statistics, the
 * sequential gate (an anytime-valid verdict from part of the suite) and the
 * per-prompt flip risk from the baseline's logprobs (risk.c). */
#ifndef DRIFTBENCH_COMPARE_H
#define DRIFTBENCH_COMPARE_H

#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statistics ---- */
/* Wilson score interval for k successes in n trials at normal quantile z
 * (1.959964 for 95%). n == 0 gives [0,1]. */
DRIFT_API void drift_wilson(long k, long n, double z, double *lo, double *hi);
/* Exact two-sided McNemar p-value for discordant counts b and c
 * (binomial test of min(b,c) under p=0.5; 1.0 when b+c == 0). */
DRIFT_API double drift_mcnemar_exact(long b, long c);
/* Clopper-Pearson exact interval for k successes in n trials at confidence
 * conf (0.95). n == 0 gives [0,1]. */
DRIFT_API void drift_clopper_pearson(long k, long n, double conf, double *lo, double *hi);

/* ---- the gate's decision (gate.c) ----
 * Each workload with a budget (a "gated" workload) is decided from its
 * counted pairs:
 *   rule INTERVAL (default): the exact (Clopper-Pearson) 95% interval of the
 *     flip rate; DEPLOY when all of it is within the budget, BLOCK when all
 *     of it is over, INCONCLUSIVE when it straddles the budget. Each side of
 *     the interval errs with probability at most 2.5%, so a DEPLOY of a
 *     workload whose true rate is over its budget (or a BLOCK of one within
 *     it) happens at most 2.5% of the time (tests/unit/test_gate.c
 *     simulates it).
 *   rule POINT (--decide point): DEPLOY when the observed rate is within
 *     the budget, else BLOCK; no error control.
 * Before either rule: a gated workload with no counted pair has no
 * evidence (NO_EVIDENCE, an error, never a pass), and one whose share of
 * pairs left out (request or evaluator errors, unscored answers) is over
 * max_left_out is BLOCKed (errors can hide drift). A workload without a
 * budget (--budget W=none) is NOT_GATED. The comparison's decision is its
 * worst gated workload's: NO_EVIDENCE, then BLOCK, then INCONCLUSIVE, then
 * DEPLOY; NOT_GATED when no workload is gated. */
typedef enum drift_decision {
    DRIFT_DECISION_NOT_GATED = 0,    /* no budget: reported, not decided */
    DRIFT_DECISION_DEPLOY = 1,       /* within budget */
    DRIFT_DECISION_BLOCK = 2,        /* over budget, or too many pairs left out */
    DRIFT_DECISION_INCONCLUSIVE = 3, /* the interval straddles the budget: more prompts needed */
    DRIFT_DECISION_NO_EVIDENCE = 4   /* gated but no counted pair: an error */
} drift_decision;

typedef enum drift_decide_rule {
    DRIFT_DECIDE_INTERVAL = 0,       /* the exact 95% interval against the budget (default) */
    DRIFT_DECIDE_POINT = 1           /* the observed rate against the budget */
} drift_decide_rule;

/* Why a workload got its decision. */
typedef enum drift_decision_reason {
    DRIFT_REASON_NONE = 0,           /* not gated */
    DRIFT_REASON_RATE = 1,           /* the rule, on the flip rate */
    DRIFT_REASON_LEFT_OUT = 2,       /* BLOCK: errors + unscored over max_left_out of the pairs */
    DRIFT_REASON_UNSCORED = 3,       /* NO_EVIDENCE: answers never scored (run `score`) */
    DRIFT_REASON_ERRORS = 4,         /* NO_EVIDENCE: every pair has a request or evaluator error */
    DRIFT_REASON_NO_EMBEDDER = 5,    /* NO_EVIDENCE: chat answers have no embeddings (score --embedder) */
    DRIFT_REASON_ERRORS_UNSCORED = 6 /* NO_EVIDENCE: errors and unscored answers, nothing counted */
} drift_decision_reason;

#define DRIFT_GATE_CONF 0.95         /* the decision interval's confidence */
#define DRIFT_GATE_MAX_LEFT_OUT 0.05 /* default largest share of pairs left out before a BLOCK */

/* "deploy", "block", "inconclusive", "error", "not gated" (JSON: "not_gated"). */
DRIFT_API const char *drift_decision_name(drift_decision d);
/* The exit code of a decision: DEPLOY and NOT_GATED 0, BLOCK 1,
 * NO_EVIDENCE 2, INCONCLUSIVE 3 (DRIFT_EXIT_INCONCLUSIVE). */
#define DRIFT_EXIT_INCONCLUSIVE 3
DRIFT_API int drift_decision_exit_code(drift_decision d);
/* The more severe of two decisions: NO_EVIDENCE > BLOCK > INCONCLUSIVE >
 * DEPLOY > NOT_GATED. */
DRIFT_API drift_decision drift_decision_worst(drift_decision a, drift_decision b);

/* The gate's decision for one workload: flips of n counted pairs, `left_out`
 * pairs excluded (errors + unscored), budget (fraction, < 0 none),
 * rule and max_left_out as above; lo/hi get the exact interval at
 * DRIFT_GATE_CONF (0, 1 when n = 0) and *more (may be NULL) for an
 * INCONCLUSIVE decision the extra counted pairs that would likely decide it
 * at the observed rate (drift_gate_more_pairs), else 0. The NO_EVIDENCE
 * reasons need the caller's knowledge: this returns NO_EVIDENCE with
 * DRIFT_REASON_ERRORS_UNSCORED when n = 0, and the comparison refines it. */
DRIFT_API drift_decision drift_gate_decide(long flips, long n, long left_out, double budget, drift_decide_rule rule,
                                           double max_left_out, double *lo, double *hi, long *more,
                                           drift_decision_reason *reason);
/* How many more counted pairs than n would likely decide a workload whose
 * observed rate flips/n straddles budget: the smallest N - n such that the
 * exact interval of a rate equal to the observed one over N pairs lies
 * wholly on one side of the budget (the observed rate's side). -1 when no
 * N up to 10^9 does (the observed rate equals the budget, or a budget of 0
 * with no flip); 0 when n already decides. */
DRIFT_API long drift_gate_more_pairs(long flips, long n, double budget);

/* ---- comparison ---- */
/* How well a flip-risk score ranked the flips (drift_risk_rank_eval). */
typedef struct drift_risk_rank {
    size_t n, n_flipped, top_n;  /* prompts, flipped ones, size of the top 10% */
    double base_rate;            /* n_flipped / n: precision@10% of a random ranking */
    double auc, auc_ci[2];       /* point estimate and bootstrap 95% percentile interval */
    size_t auc_resamples;        /* resamples with both outcomes (the AUC interval's) */
    double prec10, prec10_ci[2];
} drift_risk_rank;

typedef struct drift_flip {
    const char *prompt_id;     /* owned by the comparison */
    int replicate;
    int direction;             /* +1 incorrect->correct (unsafe->safe), -1 correct->incorrect (safe->unsafe), 0 chat drift */
    int64_t base_response_id;
    int64_t targ_response_id;
    double value;              /* chat: SDR; else NAN */
    double risk;               /* the baseline answer's flip risk (wl's risk_version); NAN unknown */
} drift_flip;

typedef struct drift_wl_result {
    drift_workload workload;
    long n;                    /* pairs counted (both sides labelled) */
    long errors;               /* pairs excluded: a request or evaluator error on either side */
    long errors_baseline;      /* of those, pairs whose baseline answer is an error */
    long errors_target;        /* of those, pairs whose target answer is an error (both: counted in both) */
    long unscored;             /* pairs excluded: no label computable */
    long flips;
    double flip_rate;          /* fraction */
    double ci95[2];
    long correct_to_incorrect; /* safety: safe_to_unsafe */
    long incorrect_to_correct; /* safety: unsafe_to_safe */
    double baseline_accuracy;  /* safety: safe rate */
    double target_accuracy;
    double net_change;         /* target_accuracy - baseline_accuracy */
    double mcnemar_p;
    double budget;             /* fraction; < 0 = none */
    int pass;                  /* decision is DEPLOY or NOT_GATED */
    /* The gate (see drift_decision): the decision, why, the exact 95%
     * interval it was taken on (both rules report it), the share of pairs
     * left out (errors + unscored over all pairs of the workload; 0 when
     * none) and, for INCONCLUSIVE, the extra counted pairs that would
     * likely decide it at the observed rate (-1: none would; else 0). */
    drift_decision decision;
    drift_decision_reason reason;
    double decide_ci[2];
    double left_out_share;
    long more_pairs;
    double sdr_mean;           /* chat only, else NAN */
    double semantic_drift_rate;/* chat only, else NAN */
    drift_flip *flipped;
    size_t n_flipped;
    /* Stochastic serving (runs with several replicates per prompt; else
     * replicates = 1 and the rest NAN/0). expected_flip_rate: the chance
     * that one baseline sample and one target sample of a prompt disagree,
     * averaged over all replicate pairs (i, j) of every prompt. Majority: the
     * label most replicates give on each side; a tie leaves the prompt out
     * (majority_ties). */
    int replicates;            /* most replicates seen per prompt on either side */
    double expected_flip_rate;
    long majority_n;           /* prompts with a majority on both sides */
    long majority_flips;
    double majority_flip_rate;
    long majority_ties;
    /* Every counted pair (the n above) in the store's order: its prompt,
     * replicate and whether it flipped; for a sequential replay
     * (drift_compare_sequential). Owned by the comparison. */
    struct drift_pair_outcome *pairs;
    size_t n_pairs;
    /* Flip risk (when c->risk_state is DRIFT_RISK_DONE): the score's version
     * (drift_risk_score_for), how well it ranked this workload's flips over
     * the pairs with a known risk (risk.n = 0: none), and the pairs left
     * out because their baseline answer gave no risk (no logprobs, no
     * token with two alternatives, malformed logprobs). */
    const char *risk_version;  /* static string; NULL when not computed */
    drift_risk_rank risk;
    long risk_unknown;
} drift_wl_result;

typedef struct drift_pair_outcome {
    const char *prompt_id;     /* owned by the comparison */
    int replicate;
    int flipped;               /* 1 when the two labels differ (chat: SDR over the threshold) */
    int64_t base_response_id;
    double risk;               /* the baseline answer's flip risk; NAN unknown or not computed */
} drift_pair_outcome;

/* The flip taxonomy of a comparison, highest risk first. */
typedef struct drift_taxonomy {
    long safety_flips, safe_to_unsafe, unsafe_to_safe;                /* safety workload */
    long correctness_flips, correct_to_incorrect, incorrect_to_correct; /* math + code + long_context */
    long semantic_drift, semantic_pairs;  /* chat pairs with SDR > threshold, of those compared */
} drift_taxonomy;

/* Which isolation ran code answers: a "sandbox" value of the code scores'
 * detail (score.c writes it), with how many PASS / FAIL code answers of
 * each run it judged. "unrecorded" stands for scores whose detail has none
 * (stores scored before the field existed). */
#define DRIFT_COMPARE_MAX_SANDBOXES 8
typedef struct drift_sandbox_use {
    char mechanism[64];        /* "bubblewrap+seccomp+uid", "none (unsafe)", ..., "other" (past the table) */
    long baseline, target;     /* code answers of each run judged under it */
    int weak;                  /* drift_sandbox_weak(mechanism) */
} drift_sandbox_use;

/* 1 when a sandbox mechanism name (drift_sandbox_check's) is weaker than
 * bubblewrap: no "bubblewrap" in it, or marked "(unsafe)"; NULL and ""
 * (nothing recorded) count as weak. */
DRIFT_API int drift_sandbox_weak(const char *mechanism);

typedef struct drift_comparison {
    drift_run_info baseline;
    drift_run_info target;
    drift_wl_result wl[DRIFT_WL_COUNT];
    int present[DRIFT_WL_COUNT];   /* workload had any pairs */
    int pass;                      /* decision is DEPLOY or NOT_GATED */
    drift_decision decision;       /* the worst gated workload's (see drift_decision) */
    drift_decide_rule rule;        /* opts->rule */
    double max_left_out;           /* opts->max_left_out */
    int gated;                     /* workloads present with a budget */
    long total_errors;
    double sdr_threshold;          /* the chat threshold used (opts->sdr_threshold) */
    drift_taxonomy taxonomy;       /* filled by drift_compare_runs */
    /* The mechanisms that judged the code answers of both runs, most used
     * first; n_sandboxes = 0 when the comparison has no code pairs. */
    drift_sandbox_use sandboxes[DRIFT_COMPARE_MAX_SANDBOXES];
    size_t n_sandboxes;
    int risk_state;                /* drift_risk_state */
    /* Answers (prompt x replicate) of one run with no counterpart in the
     * other (runs over different document sets, e.g. imports made with
     * --partial): left out of every count above. Within opts->only_workload. */
    long unpaired_baseline, unpaired_target;
    const char *evaluator;         /* opts->evaluator (owned by the comparison), or NULL: latest score */
    /* Teacher-forced token divergence (compare --kl: the pipeline's step,
     * attached by drift_comparison_attach_kl): kl_state says whether it
     * was computed; kl is the report (owned by the comparison) when
     * DRIFT_KL_DONE; kl_note says why not when DRIFT_KL_UNSUPPORTED. */
    int kl_state;                  /* drift_kl_state */
    const struct drift_tokdiv_report *kl;
    char kl_note[512];
} drift_comparison;

typedef enum drift_kl_state {
    DRIFT_KL_OFF = 0,              /* not asked (opts.kl = 0) */
    DRIFT_KL_UNSUPPORTED = 1,      /* a run is not an embedded stack: kl_note says which */
    DRIFT_KL_DONE = 2              /* kl holds the report */
} drift_kl_state;

/* Whether a comparison has per-prompt flip risk. */
typedef enum drift_risk_state {
    DRIFT_RISK_OFF = 0,            /* not asked (opts.risk = 0) */
    DRIFT_RISK_NO_LOGPROBS = 1,    /* the baseline has no stored logprobs */
    DRIFT_RISK_DONE = 2            /* pairs[].risk, flipped[].risk and wl[].risk are filled */
} drift_risk_state;
#define DRIFT_RISK_RESAMPLES 2000  /* bootstrap resamples of compare's AUC and precision intervals */
#define DRIFT_RISK_SEED 1          /* and their seed */

/* The gate's decisions of c from its counts (so a comparison built by hand
 * is decided as drift_compare_runs decides): per workload, from flips, n,
 * errors + unscored, budget and c->rule / c->max_left_out, the fields
 * decision, reason, decide_ci, left_out_share, more_pairs and pass; then
 * c->decision (the worst present workload's), c->gated and c->pass. */
DRIFT_API void drift_comparison_decide(drift_comparison *c);

/* The flip taxonomy of c, computed from c->wl[] and c->present[] (so it is
 * right for a comparison built by hand too): safety flips (safe->unsafe,
 * unsafe->safe), correctness flips (math, code, long_context; per
 * direction), semantic drift (chat pairs over the SDR threshold). */
DRIFT_API void drift_comparison_taxonomy(const drift_comparison *c, drift_taxonomy *out);

typedef struct drift_compare_opts {
    double budget[DRIFT_WL_COUNT];   /* fraction; < 0 = no budget (not gated) */
    drift_decide_rule rule;          /* DRIFT_DECIDE_INTERVAL (default) or DRIFT_DECIDE_POINT */
    double max_left_out;             /* share of a gated workload's pairs that may be left out
                                      * (errors, unscored) before it is blocked; default
                                      * DRIFT_GATE_MAX_LEFT_OUT */
    int only_workload;               /* DRIFT_WL_UNKNOWN = all */
    double sdr_threshold;            /* default 0.30 */
    const char *embedder;            /* embedding name for chat SDR; NULL = any stored */
    int risk;                        /* 1 (default): per-prompt flip risk when the baseline run was
                                      * asked for logprobs (its decoding's "logprobs" > 0); 0: skip */
    const char *evaluator;           /* NULL (default): each answer's latest score; else only the scores
                                      * of this evaluator (an imported run's "promptfoo" or
                                      * "lm_eval:<metric>,<filter>" beside our "math", ...) */
    int kl;                          /* 1: also teacher-forced token KL of the two stacks; read by
                                      * the caller, who runs the pipeline's step (drift_tokdiv_step_run)
                                      * and attaches it (drift_comparison_attach_kl), not by compare;
                                      * 0 (default): skip. kl_* likewise */
    size_t kl_limit;                 /* prompts per workload for kl, a seeded sample; 0 = all */
    uint64_t kl_seed;                /* the sample's seed (default 1) */
    const char *kl_models_dir;       /* NULL, or where kl looks (by file name) for a run's model file whose
                                      * recorded path is gone (drift_tokdiv_opts.models_dir) */
} drift_compare_opts;

/* The default drift budget of workload wl (fraction), the README's table:
 * safety 1%, code 0.5%, math 2%, long_context 2%, chat 5%. */
DRIFT_API double drift_default_budget(drift_workload wl);
/* Defaults: every workload's default budget, the interval rule, at most 5%
 * of pairs left out; SDR 0.30; risk on. */
DRIFT_API void drift_compare_opts_default(drift_compare_opts *o);
/* sizeof(drift_compare_opts), for bindings that allocate it without this
 * header (python/driftbench/library.py). */
DRIFT_API size_t drift_compare_opts_size(void);
/* Parses "math=1,safety=0.5" (percent) into o->budget. */
DRIFT_API drift_status drift_compare_parse_budgets(drift_compare_opts *o, const char *spec, drift_error *err);

/* ---- compare over scored sets: pure (compare.c) ----
 * Load -> compute -> render: the loader (drift_compare_runs,
 * src/analysis/compare_runs.c, and the report's src/report/load.c, which
 * adds the flip details to its pass) reads both runs, their scored answers,
 * the chat embeddings, the code sandboxes and the answers that flip risk
 * and the flip details need, in one read transaction, each answer once;
 * compare computes from what it was given. */

/* What compare is computed from. The runs and the scored sets (ordered by
 * (prompt_rowid, replicate), as drift_store_load_scored gives them) are
 * taken over by the comparison (left empty here); emb is only read. */
typedef struct drift_compare_in {
    drift_run_info baseline, target;
    drift_scored_set base, targ;
    const char *embedder;            /* chat SDR's embedder (copied), or NULL: no chat pair has an SDR */
    const drift_embedding_set *emb;  /* its vectors of both runs' chat answers, ascending response id;
                                      * NULL = none */
} drift_compare_in;

/* Which embeddings chat SDR needs (pure): *embedder = opts->embedder, else
 * the evaluator of the baseline's first scored chat row; [*lo, *hi] the
 * chat response ids of both sets. 1 when they are to be read (an
 * embedder, chat rows, and opts->only_workload all or chat), else 0. */
DRIFT_API int drift_compare_chat_range(const drift_compare_opts *opts, const drift_scored_set *base,
                                       const drift_scored_set *targ, const char **embedder, int64_t *lo,
                                       int64_t *hi);

/* Pairs the two scored sets of in (see compare.c): counts, flips, rates,
 * the gate's decisions, the stochastic figures and the taxonomy. Reads no
 * store. risk_state is DRIFT_RISK_NO_LOGPROBS when opts->risk (the loader
 * then scores the pairs: drift_comparison_pair_risk, _rank_risk), else
 * OFF; n_sandboxes 0 (drift_comparison_add_sandbox). Runs that share no
 * pair, or no pair of opts->only_workload, are DRIFT_ERR_INVALID. */
DRIFT_API drift_status drift_compare_sets(drift_compare_in *in, const drift_compare_opts *opts,
                                          drift_comparison **out, drift_error *err);

/* Adds count code answers of one side (0 baseline, 1 target) judged under
 * sandbox mechanism mech (NULL or "": "unrecorded") to c->sandboxes; call
 * drift_comparison_sort_sandboxes after the last (most used first). */
DRIFT_API void drift_comparison_add_sandbox(drift_comparison *c, int side, const char *mech, long count);
DRIFT_API void drift_comparison_sort_sandboxes(drift_comparison *c);

/* 1 when c's baseline run was asked for logprobs (its decoding's
 * "logprobs" > 0): flip risk is worth reading the baseline answers for. */
DRIFT_API int drift_comparison_wants_risk(const drift_comparison *c);
/* The flip risk of counted pair c->wl[wl].pairs[i] from its baseline
 * answer's logprobs (drift_risk_features_for + drift_risk_score_for); NULL
 * or malformed logprobs leave it unknown (NAN). */
DRIFT_API void drift_comparison_pair_risk(drift_comparison *c, drift_workload wl, size_t i,
                                          const char *logprobs_json);
/* After the pairs' risks: risk_state DRIFT_RISK_DONE when with_logprobs
 * baseline answers had logprobs (else NO_LOGPROBS), the flips' risks and
 * each workload's AUC and precision@10% with bootstrap intervals. */
DRIFT_API drift_status drift_comparison_rank_risk(drift_comparison *c, size_t with_logprobs, drift_error *err);

/* Loads and compares the two runs (src/analysis/compare_runs.c; the
 * report's drift_comparison_load reads the same and adds the flip details),
 * for the stages and tools that want a comparison from a store. With
 * opts->evaluator, each run's scores by that evaluator only
 * (drift_store_load_scored_evaluator); a run it scored nothing of is
 * DRIFT_ERR_NOT_FOUND naming the run and the evaluators it has.
 * With opts->risk, when the baseline
 * run was asked for logprobs, also reads each counted pair's baseline
 * answer and scores its flip risk (drift_risk_features_for +
 * drift_risk_score_for; risk_state DRIFT_RISK_DONE, or NO_LOGPROBS when no
 * answer had any); a malformed logprobs record makes that pair's risk
 * unknown, never the comparison fail. Token KL is not read here (opts->kl:
 * see drift_comparison_attach_kl). */
DRIFT_API drift_status drift_compare_runs(drift_store *st, const char *baseline_label, const char *target_label,
                                          const drift_compare_opts *opts, drift_comparison **out,
                                          drift_error *err);
DRIFT_API void drift_comparison_free(drift_comparison *c);
/* Attaches token KL to c (compare --kl; the pipeline's step,
 * drift_tokdiv_step_run in teacher_forced.h, computes it): kl != NULL sets
 * kl_state DRIFT_KL_DONE and takes over *kl's contents (leaving *kl
 * empty; c frees them); kl == NULL sets DRIFT_KL_UNSUPPORTED with note
 * (copied, cut to kl_note's size). Replaces what was attached before. */
DRIFT_API void drift_comparison_attach_kl(drift_comparison *c, struct drift_tokdiv_report *kl, const char *note);
/* The embedder whose vectors chat SDR used (opts->embedder, or the one the
 * baseline's chat answers were embedded with); NULL when none. */
DRIFT_API const char *drift_comparison_embedder(const drift_comparison *c);

/* ---- sequential gate (sequential.c) ----
 * An anytime-valid flip-rate gate over a finite suite of N paired prompts
 * asked in a seeded random order (sampling without replacement): after
 * each outcome it may stop with DEPLOY (the flip rate is surely under the
 * budget) or BLOCK (surely over), each wrong with probability at most
 * alpha/2 whatever the stopping rule; at the end of the suite the rate is
 * known exactly and the verdict is compare's fixed-size one. The interval
 * is a confidence sequence: it covers the suite's flip rate at every step
 * at once with probability >= 1 - alpha. See sequential.c for the method. */
typedef enum drift_seq_verdict {
    DRIFT_SEQ_OPEN = 0,        /* not decided yet */
    DRIFT_SEQ_DEPLOY = 1,      /* within budget */
    DRIFT_SEQ_BLOCK = 2        /* over budget */
} drift_seq_verdict;

typedef struct drift_seq_gate {
    long n_total;              /* N: prompts in the suite */
    double budget;             /* fraction */
    double alpha;
    long asked;                /* outcomes seen so far */
    long flips;                /* flips among them */
    drift_seq_verdict verdict; /* sticky once decided */
    long decided_at;           /* outcomes seen when decided; 0 while open */
    int early;                 /* decided before the suite was exhausted */
    double stop_lo, stop_hi;   /* the interval when decided (NAN unless kept, see init) */
    /* internal: the two budget tests and the confidence sequence */
    long k_hi, k_lo;           /* smallest flip count >= budget*N, largest <= budget*N */
    double log_up, log_lo;     /* log capital of the upper (deploy) and lower (block) test */
    long watch;                /* a flip count tracked by drift_seq_gate_covers; -1 none */
    double watch_up, watch_lo;
    int watch_out;
    double *cs_up, *cs_lo;     /* log capital per flip count 0..N (NULL unless kept) */
    unsigned char *cs_out;     /* flip count rejected at some step */
} drift_seq_gate;

/* Starts a gate for n_total >= 1 outcomes, budget in [0, 1] (fraction),
 * alpha in (0, 1). keep_interval: also track the whole confidence sequence
 * (O(n_total) memory and time per outcome) so drift_seq_gate_interval
 * works; 0 keeps only the two budget tests (O(1) per outcome, same
 * verdicts). watch: a flip count 0..n_total whose coverage
 * drift_seq_gate_covers reports (tests), or -1. DRIFT_ERR_INVALID naming the
 * bad argument; DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_seq_gate_init(drift_seq_gate *g, long n_total, double budget, double alpha,
                                           int keep_interval, long watch, drift_error *err);
DRIFT_API void drift_seq_gate_free(drift_seq_gate *g);
/* Feeds the next outcome (flipped: 1 or 0) of the random order. Returns
 * the verdict after it (sticky: once decided, later outcomes only update
 * the counts and the interval). Past n_total outcomes it changes nothing. */
DRIFT_API drift_seq_verdict drift_seq_gate_add(drift_seq_gate *g, int flipped);
/* The confidence sequence now: the smallest and largest flip rate (k/N)
 * not yet excluded. Returns 0, or -1 (lo, hi = NAN) when the gate does not
 * keep the interval. An empty set (possible with probability <= alpha)
 * gives lo > hi. */
DRIFT_API int drift_seq_gate_interval(const drift_seq_gate *g, double *lo, double *hi);
/* 1 while the watched flip count's rate has never been excluded. */
DRIFT_API int drift_seq_gate_covers(const drift_seq_gate *g);

/* The seeded random order of n items named ids[i] (with replicate reps[i],
 * or NULL for all 0): perm[] gets the indices 0..n-1 sorted by a 64-bit
 * hash of (seed, id, replicate), ties by index. The same prompt gets the
 * same rank key in every run and suite subset. */
DRIFT_API drift_status drift_seq_order(const char *const *ids, const int *reps, size_t n, uint64_t seed, size_t *perm,
                                       drift_error *err);

typedef struct drift_seq_wl {
    drift_workload workload;
    int gated;                 /* 1 when the workload has a budget (and is present) */
    long n_total;              /* counted pairs available */
    long asked;                /* pairs replayed until the verdict */
    long flips;                /* flips among them */
    drift_seq_verdict verdict;
    int early;                 /* decided before the suite was exhausted */
    double lo, hi;             /* the anytime-valid interval at the stop (fractions) */
    double budget;             /* fraction; < 0 none */
    double full_rate;          /* the flip rate over all pairs (compare's) */
    int full_pass;             /* compare's fixed-size verdict */
    /* The workload's outcome, in the gate's words (drift_decision): the
     * sequential verdict when it stopped early (DEPLOY or BLOCK), else
     * compare's fixed-size decision over the stored pairs at this budget
     * (DEPLOY, BLOCK or INCONCLUSIVE); NO_EVIDENCE or BLOCK (too many pairs
     * left out) whenever compare's is; NOT_GATED without a budget. */
    drift_decision decision;
    drift_decision_reason reason;
} drift_seq_wl;

typedef struct drift_seq_result {
    drift_seq_wl wl[DRIFT_WL_COUNT];
    int present[DRIFT_WL_COUNT]; /* as the comparison's */
    double alpha;
    uint64_t seed;
    int pass;                  /* decision is DEPLOY or NOT_GATED */
    drift_decision decision;   /* the worst workload's, as the comparison's */
    long asked, available;     /* over gated workloads */
} drift_seq_result;

/* Replays each workload's counted pairs (c->wl[k].pairs) in the seeded
 * order (drift_seq_order) through a gate at its budget until it decides;
 * workloads without a budget are present but not gated. */
DRIFT_API drift_status drift_compare_sequential(const drift_comparison *c, double alpha, uint64_t seed,
                                                drift_seq_result *out, drift_error *err);
/* Its rendering is report.h's drift_seq_render. A workload's gate plays
 * over the suite's recorded size when the target run comes from measure
 * --sequential (drift_seq_recorded; its partial runs hold only the pairs
 * asked), else over the pairs present; when the stored pairs run out with
 * the gate still open, the verdict is compare's over them (early = 0). */

/* The sequential record of c's target run (measure --sequential's, in its
 * decoding record): 1 and alpha, the order's seed, pairs[k] (the suite's
 * pairs of workload k, -1 when not recorded) and budget[k] (the fraction
 * its stop was decided at, -1 none) when there is one; 0 (all -1) when
 * not or malformed. */
DRIFT_API int drift_seq_recorded(const drift_comparison *c, double *alpha, uint64_t *seed, long pairs[DRIFT_WL_COUNT],
                                 double budget[DRIFT_WL_COUNT]);

/* One step of a stopping curve: the confidence sequence after `asked`
 * pairs ([lo, hi] as flip rates; lo > hi when empty). */
typedef struct drift_seq_point {
    long asked, flips;
    double lo, hi;
} drift_seq_point;

/* The stopping curve of workload wl (with a budget and pairs): the replay
 * of drift_compare_sequential for that workload at the recorded budget
 * (drift_seq_recorded; else the comparison's), with the confidence
 * sequence after each pair until the stop. *stop gets the workload's
 * replay result; *out (caller frees) its stop->asked points.
 * DRIFT_ERR_INVALID when wl has no pairs or no budget. */
DRIFT_API drift_status drift_seq_curve(const drift_comparison *c, drift_workload wl, double alpha, uint64_t seed,
                                       drift_seq_wl *stop, drift_seq_point **out, size_t *n_out, drift_error *err);

/* ---- divergence of a flipped pair (divergence.c computes, src/report/load.c reads) ---- */
typedef enum drift_token_unit {
    DRIFT_UNIT_NONE = 0,       /* answers identical: no divergence */
    DRIFT_UNIT_TOKEN = 1,      /* index into the stored logprob token lists */
    DRIFT_UNIT_WORD = 2        /* index into the whitespace-separated words */
} drift_token_unit;

typedef struct drift_divergence {
    int identical;             /* the two texts are byte-identical (the label differs anyway) */
    long first_diff_byte;      /* byte offset of the first differing code point; -1 when identical */
    long first_diff_char;      /* the same position in UTF-8 code points; -1 when identical */
    long first_diff_token;     /* index of the first differing token (or word); -1 when identical */
    drift_token_unit token_unit;
    double margin;             /* baseline's top-1 minus top-2 logprob at that token (nats); NAN unless
                                * unit TOKEN and the baseline has >= 2 alternatives there */
    double kl;                 /* KL(baseline || target) over the union of both top lists at that token,
                                * residual mass spread over the absent tokens; NAN unless both have tops */
    char *diff;                /* malloc'd short word diff: "... common [-removed-] {+added+} ..."; "" when identical */
    char *error;               /* drift_flip_divergences only: non-NULL (malloc'd) when this flip's
                                * divergence could not be computed; the other fields are then unset */
} drift_divergence;

/* Where two answers part. Texts must be non-NULL NUL-terminated UTF-8
 * (invalid bytes count as one code point each). Logprobs are the store's
 * form ([{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..])
 * or NULL; tokens are used when both are given, else whitespace words.
 * Malformed logprobs JSON is DRIFT_ERR_PARSE naming the side and element.
 * Fills *out (empty with drift_divergence_clear) on success. */
DRIFT_API drift_status drift_divergence_compute(const char *base_text, const char *base_logprobs_json,
                                                const char *targ_text, const char *targ_logprobs_json,
                                                drift_divergence *out, drift_error *err);
DRIFT_API void drift_divergence_clear(drift_divergence *d);

/* Word-level diff of a -> b (LCS over whitespace-separated words) rendered
 * as "... common [-removed-] {+added+} common ..." with at most a few words
 * of context around each change, cut to about max_chars bytes (at a UTF-8
 * boundary, " ..." marking the cut). Common leading and trailing words are
 * skipped first; if both remaining parts exceed max_words, only the first
 * max_words of each (the window from the first divergence on) are diffed.
 * Returns a malloc'd string in *out ("" when a equals b word for word). */
DRIFT_API drift_status drift_word_diff(const char *a, const char *b, size_t max_words, size_t max_chars, char **out,
                                       drift_error *err);

/* The divergence of one flip: loads both answers (text and logprobs) from
 * the store by response id and calls drift_divergence_compute (the
 * report's loader, src/report/load.c, as drift_flip_divergences). */
DRIFT_API drift_status drift_flip_divergence(drift_store *st, const drift_flip *f, drift_divergence *out,
                                             drift_error *err);

/* The divergences of n flips at once, for a report of every flip: the
 * texts are read with one prepared statement inside one read transaction,
 * and the stored logprobs are decoded (drift_store_response_get) only for
 * flips whose two answers both have them. Every out[i] is filled (empty
 * each with drift_divergence_clear); a flip whose answers cannot be read,
 * or whose logprobs are malformed, gets out[i].error naming it instead of
 * failing the batch. Returns an error (out[] then all freed) only when the
 * store cannot be queried or memory runs out. */
DRIFT_API drift_status drift_flip_divergences(drift_store *st, const drift_flip *flips, size_t n,
                                              drift_divergence *out, drift_error *err);

/* ---- per-prompt flip risk (risk.c) ---- */
#define DRIFT_RISK_VERSION "risk/v1" /* score = exp(-min_margin / 1 nat) */
#define DRIFT_RISK_V2 "risk/v2-logit" /* logistic regression on drift_risk_x, fit per workload */
#define DRIFT_RISK_HEAD_TOKENS 8      /* safety: the refusal or compliance is decided in these first tokens */
#define DRIFT_RISK_NEAR_NATS 1.0      /* a token is a near tie when its top-1/top-2 margin is under this */

typedef struct drift_risk_features {
    long n_tokens;             /* generated tokens (elements of the logprobs array) */
    long n_margin;             /* tokens whose top list has >= 2 entries */
    double min_margin;         /* smallest top-1 minus top-2 logprob over them (nats); NAN when n_margin == 0 */
    long min_margin_pos;       /* its token index (the first on a tie); -1 when none */
    double min_margin_frac;    /* min_margin_pos / n_tokens: share of the answer before it; NAN when none */
    double mean_entropy;       /* mean entropy (nats) of the listed top-k, renormalised to sum 1 (the
                                * unlisted mass is unknown, so it understates the true entropy); NAN when none */
    long n_near;               /* tokens with a margin < DRIFT_RISK_NEAR_NATS */
    double soft_fine, soft_coarse; /* sum over tokens of exp(-margin / T), T = 0.25 and 2 nats: the
                                * expected near ties for a small and a large perturbation; 0 when none */
    /* The workload's critical region (drift_risk_features_for): the tokens
     * that overlap the final answer's number (math), the code (code: inside
     * the first ``` fence, else the whole answer), the first
     * DRIFT_RISK_HEAD_TOKENS tokens (safety), the whole answer (others). */
    int region_found;          /* 0: none (math without a number, or no workload given) */
    long region_lo, region_hi; /* its token span [lo, hi); 0, 0 when none */
    double region_margin;      /* smallest margin inside it (nats); NAN when none there */
    int min_in_region;         /* the answer's smallest margin falls inside it */
} drift_risk_features;

/* The risk features of one baseline answer from its stored logprobs JSON
 * (divergence's form above; "top" may be absent or null on a token).
 * Malformed JSON is DRIFT_ERR_PARSE naming the element ("logprobs: element
 * 3: top[1]: no numeric \"logprob\""); NULL json or out is DRIFT_ERR_INVALID.
 * *out is always set (NAN/-1 fields on error). */
DRIFT_API drift_status drift_risk_features_compute(const char *logprobs_json, drift_risk_features *out,
                                                   drift_error *err);

/* drift_risk_features_compute plus the critical region of workload wl
 * (see drift_risk_features): the answer text is the concatenation of the
 * elements' "token" strings (an element without one counts as empty);
 * math finds the final number with drift_math_extract_ex (its last
 * occurrence in the text). DRIFT_WL_UNKNOWN: no region. Errors as
 * drift_risk_features_compute ("token" not a string is DRIFT_ERR_PARSE). */
DRIFT_API drift_status drift_risk_features_for(const char *logprobs_json, drift_workload wl,
                                               drift_risk_features *out, drift_error *err);

/* DRIFT_RISK_VERSION's score of f: exp(-min_margin), in (0, 1], higher =
 * riskier; NAN when f has no margin (unknown, not safe). */
DRIFT_API double drift_risk_score(const drift_risk_features *f);

/* The inputs of the fitted model, from f:
 *   x[0] exp(-min_margin)            (risk/v1)
 *   x[1] exp(-region_margin)         (x[0] when the region has no margin)
 *   x[2] min_in_region               (0 or 1)
 *   x[3] mean_entropy                (nats)
 *   x[4] log(1 + n_tokens)
 *   x[5] log(1 + n_near)
 *   x[6] log(1 + soft_fine)
 *   x[7] log(1 + soft_coarse)
 * Returns 0, or -1 (x unset) when f has no margin. */
#define DRIFT_RISK_NX 8
DRIFT_API int drift_risk_x(const drift_risk_features *f, double x[DRIFT_RISK_NX]);

/* A logistic model P(flip) = 1 / (1 + exp(-(b0 + sum b_j z_j))) on the
 * standardised inputs z_j = (x_j - mean_j) / sd_j. */
typedef struct drift_risk_model {
    char version[32];          /* DRIFT_RISK_V2 */
    drift_workload workload;
    double mean[DRIFT_RISK_NX], sd[DRIFT_RISK_NX];
    double beta[DRIFT_RISK_NX + 1]; /* intercept first */
    double ridge;              /* L2 penalty on beta[1..] used in the fit */
    size_t n_fit, n_fit_flips; /* rows and flipped rows fit on */
    int iterations;            /* Newton (IRLS) steps taken */
} drift_risk_model;

/* Fits m by iteratively reweighted least squares (Newton's method on the
 * penalised log-likelihood, ridge >= 0 on the slopes, not the intercept)
 * over n rows x (n, DRIFT_RISK_NX) with outcomes y (nonzero = flipped),
 * until the largest step is under 1e-9 (at most 100 steps). An input with
 * no spread gets sd 1 and, with ridge > 0, a zero slope. DRIFT_ERR_INVALID
 * for n < 2, a NAN input, a single outcome class, ridge < 0, or steps that
 * do not converge (a separable set with ridge 0). */
DRIFT_API drift_status drift_risk_logit_fit(const double *x, const int *y, size_t n, double ridge,
                                            drift_workload wl, drift_risk_model *m, drift_error *err);
/* m's probability of a flip for inputs x[DRIFT_RISK_NX], in (0, 1). */
DRIFT_API double drift_risk_logit_prob(const drift_risk_model *m, const double x[DRIFT_RISK_NX]);

/* The shipped DRIFT_RISK_V2 model of workload wl (its coefficients fit by
 * bench_risk_bench --fit on stored runs, see risk.c), or NULL when none
 * was fit for wl. */
DRIFT_API const drift_risk_model *drift_risk_model_builtin(drift_workload wl);

/* The risk compare shows for an answer of workload wl: the shipped model's
 * probability when one exists for wl, else DRIFT_RISK_VERSION's score;
 * *version (may be NULL) names which. NAN when f has no margin. */
DRIFT_API double drift_risk_score_for(const drift_risk_features *f, drift_workload wl, const char **version);

/* ROC AUC (Mann-Whitney: tied flipped/unflipped pairs count 1/2; NAN when
 * all outcomes are equal) and precision among the top ceil(10% n) scores
 * (a tie group across the cut counts its flip share for the slots it fills)
 * of n scores with outcomes (nonzero = flipped). Either output may be NULL.
 * DRIFT_ERR_INVALID for n == 0, NULL arrays or a NAN score. */
DRIFT_API drift_status drift_risk_auc(const double *score, const int *outcome, size_t n, double *auc,
                                      double *prec10, drift_error *err);


/* drift_risk_auc's two figures with bootstrap 95% percentile intervals
 * from `resamples` (>= 100) resamples of the n prompts with replacement,
 * drawn from seed (same inputs and seed -> same intervals). Errors as
 * drift_risk_auc, DRIFT_ERR_INVALID for too few resamples, DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_risk_rank_eval(const double *score, const int *outcome, size_t n, int resamples,
                                            uint64_t seed, drift_risk_rank *out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
