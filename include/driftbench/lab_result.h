/* lab_result.h - what the lab's report reads of a study, and the report
 * layer's renderers of it (src/report/lab_render.c, lab_summary.c). The lab
 * stage (lab.h, the pipeline) computes these and includes this header; the
 * report layer renders them without knowing the stage:
 *
 *   drift_lab_cuts         answers cut by the token limit, per workload
 *   drift_lab_beyond       the stochastic drift beyond the sampling null
 *   drift_lab_stochastic   the stochastic leg's design and comparison
 *   drift_lab_report       the view of a whole study the report's note and
 *                          summary read (lab.h's drift_lab_result_report
 *                          fills it from a drift_lab_result)
 *
 * The renderers are pure: each reads its argument and returns malloc'd
 * text; nothing here reads a store, prints or exits. */
#ifndef DRIFTBENCH_LAB_RESULT_H
#define DRIFTBENCH_LAB_RESULT_H

#include <stddef.h>

#include "driftbench/analysis.h"
#include "driftbench/status.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* room for a target spec (a model path plus its profile keys) */
#define DRIFT_LAB_SPEC_MAX 4400
#define DRIFT_LAB_LABEL_MAX 300

/* ---- answers cut by the token limit ---- */
typedef struct drift_lab_cuts {
    int max_tokens;                        /* the limit (spec->max_tokens) */
    size_t answers[DRIFT_WL_COUNT];        /* answers of the spec's runs */
    size_t cut[DRIFT_WL_COUNT];            /* of those, cut by the limit (finish_reason "length") */
    size_t errors[DRIFT_WL_COUNT];         /* failed requests (no answer) */
} drift_lab_cuts;

/* One line per workload with answers: "math: 3 of 450 answers cut at 128
 * new tokens (0.67%)", flagged when above DRIFT_LAB_CUT_GOAL
 * (src/report/lab_render.c). *out malloc'd. */
#define DRIFT_LAB_CUT_GOAL 0.02
DRIFT_API drift_status drift_lab_cuts_render(const drift_lab_cuts *c, char **out, drift_error *err);

/* ---- drift beyond the sampling null ----
 * Per prompt i of n (the unit of sampling): cross[i], the share of
 * (replicate of stack A, replicate of stack B) pairs whose labels disagree;
 * null_d[i], the same between stack A and stack A again with other seeds
 * (what sampling alone gives); det[i], 1 when the deterministic answers of
 * A and B flip. beyond = mean(cross - null_d), the drift the stacks add
 * beyond sampling noise (the expected values of cross and null_d differ
 * exactly by it: replicates are independent draws); ratio = beyond /
 * mean(det), the paper's stochastic-to-deterministic ratio with the null
 * taken out. 95% intervals: a paired percentile bootstrap over prompts
 * (the three figures of a prompt are resampled together, so their
 * correlation and the replicates' clustering within a prompt are kept;
 * the ratio's skew when the denominator is small is kept too, where a
 * delta-method interval would be symmetric). Computed by
 * drift_lab_beyond_null (lab.h). */
typedef struct drift_lab_beyond {
    size_t n;                  /* prompts */
    double cross, null_rate, det; /* means */
    double beyond, beyond_lo, beyond_hi;
    /* NAN when mean(det) is 0; ratio_hi = INFINITY when more than 2.5% of
     * the resamples have no deterministic flip (the sample is too small to
     * bound it) */
    double ratio, ratio_lo, ratio_hi;
    double det_zero_share;     /* resamples without a deterministic flip */
    int resamples;
} drift_lab_beyond;

/* ---- the stochastic leg ----
 * The first model's f32 and int4 configurations again at temperature 0.7
 * with 5 replicates on math, and f32 a second time with other seeds (the
 * null: what sampling alone disagrees); the expected flip rate over
 * replicate pairs, the null's, the drift beyond the null with its
 * interval, beside the deterministic flip rate of the same pair from the
 * matrix (the paper reports their ratio, ~0.23x). These runs are no rows
 * of the flip table: their decoding differs from the baseline's. Designed,
 * run and compared by lab.h's drift_lab_stochastic_*. */
typedef struct drift_lab_stochastic {
    /* the design */
    char model[256];
    char pair[64];             /* the stacks' precisions, "w16a16 -> w4a16" */
    char target_base[DRIFT_LAB_SPEC_MAX], target_alt[DRIFT_LAB_SPEC_MAX];
    char label_base[DRIFT_LAB_LABEL_MAX], label_alt[DRIFT_LAB_LABEL_MAX]; /* "stochastic/MODEL/f32" */
    char label_null_base[DRIFT_LAB_LABEL_MAX]; /* "stochastic/MODEL/f32-null": target_base at null_seed */
    char label_null_alt[DRIFT_LAB_LABEL_MAX]; /* "stochastic/MODEL/int4-null": target_alt at null_seed */
    long seed, null_seed;
    char det_base[DRIFT_LAB_LABEL_MAX], det_alt[DRIFT_LAB_LABEL_MAX];     /* the matrix's runs of the pair */
    char suite[64];
    int replicates;
    double temperature;
    int max_tokens;
    /* the comparison (drift_lab_stochastic_compare) */
    double expected_flip_rate; /* NAN when unknown */
    double majority_flip_rate; /* NAN when unknown */
    long majority_flips, majority_n, majority_ties;
    int det_ok;                /* the deterministic pair compared with math pairs */
    long det_n;
    double det_flip_rate;
    char det_reason[DRIFT_ERROR_MSG_MAX]; /* why not, when det_ok == 0 */
    double ratio;              /* expected / deterministic; NAN without deterministic flips */
    /* against the null (prompts with labels in all five runs) */
    int null_ok;               /* 0: not computed, null_reason says why */
    char null_reason[256];
    drift_lab_beyond beyond;
    /* the flip-rate estimand (analysis.h's drift_stoch_estimand: majority-
     * vote flips between the stacks beyond their own same-stack null, and
     * its ratio to the deterministic rate), over the same prompts */
    int estimand_ok;           /* 0: estimand_why says why */
    drift_stoch_estimand estimand;
    char estimand_why[160];
} drift_lab_stochastic;

/* The stochastic leg (x after drift_lab_stochastic_compare) as the lab
 * prints it and writes DIR/stochastic.txt: the expected flip rate over
 * replicate pairs and the majority-vote flip rate ("-" when unknown), then
 * the deterministic flip rate of the same pair and the ratio, or why the
 * deterministic rate is not available. *out is malloc'd. */
DRIFT_API drift_status drift_lab_stochastic_render(const drift_lab_stochastic *x, char **out, drift_error *err);

/* ---- what the lab computed beyond the flip table (issue 36) ----
 * Per workload, over the pairs of the configurations that are levels of
 * the axes (the controls apart): the pooled flip rate with a cluster
 * bootstrap over prompts (configurations fixed), the mean over
 * configurations with a two-way bootstrap (prompts and configurations
 * resampled: the comparison with the paper's mean over its
 * configurations), the old Wilson interval counting each prompt once; the
 * logistic model of flips with prompt-clustered errors; flip risk (the
 * baseline's logprobs) pooled over the configurations' pairs. Filled by
 * the lab stage (lab.h, drift_lab_run); read by the renderers. */
typedef struct drift_lab_wl_stats {
    int present;                  /* pairs of level configurations */
    size_t n_pairs, n_prompts, n_configs;
    long flips;
    int boot_ok;                  /* 0: boot_why says why */
    drift_flip_boot boot;         /* cluster bootstrap over prompts */
    int two_way_ok;
    drift_flip_boot two_way;      /* mean over configurations, two-way bootstrap */
    double wilson_lo, wilson_hi;  /* fractions: each prompt counted once */
    char boot_why[160];
    drift_logit_fit *logit;       /* flip ~ model + hardware + precision + framework; NULL: logit_why */
    char logit_why[160];
    /* flip risk: the baseline answer's risk score (compare's), pooled */
    size_t risk_n, risk_flips;    /* pairs with a known risk, of them flips */
    double risk_auc;              /* NAN without both outcomes */
} drift_lab_wl_stats;

/* A control row: the A/A run or the ref oracle against a model's baseline. */
typedef struct drift_lab_control {
    char label[DRIFT_LAB_LABEL_MAX];
    char model[256];
    int role;                     /* drift_lab_role (lab.h): 2 A/A, 3 ref */
    long flips[DRIFT_WL_COUNT], pairs[DRIFT_WL_COUNT];
    double sdr_mean;              /* chat's mean SDR (A/A: 0 when the texts are the same); NAN: none */
} drift_lab_control;

#define DRIFT_LAB_MAX_CONTROLS 32
/* an A/A chat pair's SDR above this fails the check (identical texts
 * embedded twice may differ in the last bits of a float) */
#define DRIFT_LAB_AA_SDR_TOL 1e-6
typedef struct drift_lab_findings {
    int computed;
    drift_lab_wl_stats wl[DRIFT_WL_COUNT];
    size_t n_controls;
    drift_lab_control controls[DRIFT_LAB_MAX_CONTROLS];
    size_t aa_runs, aa_flips;     /* A/A rows and their flips (0 by construction) */
    double aa_sdr_max;            /* the largest chat SDR of an A/A pair; 0 by construction */
    int desc_ok;                  /* PRI was given each configuration's descriptors */
    char desc_why[160];
    /* the shape of the baselines' answers ("base@MODEL" runs pooled per
     * workload: lengths, cut answers, logprob gaps; analysis.h) */
    int shape_ok;                 /* 0: shape_why says why */
    char shape_why[160];
    size_t shape_runs;            /* baseline runs of the design */
    int max_tokens;               /* their token limit */
    drift_answer_shape shape[DRIFT_WL_COUNT];
} drift_lab_findings;

/* ---- the study as its report reads it ---- */

/* A store's failed requests (store.h's drift_store_outcomes, rendered by
 * report.h's drift_store_outcomes_render). */
struct drift_store_outcomes;

/* Everything the lab's note and summary say, borrowed from the study
 * (drift_lab_result_report, lab.h). */
typedef struct drift_lab_report {
    int fixtures;                    /* 1: the models are the test fixtures (answers are noise) */
    int with_safety;                 /* 0: safety was not run, safety_reason says why */
    const char *safety_reason;
    int full;                        /* 1: --full (0: --quick, long context on a subset) */
    size_t long_n;                   /* long-context prompts (0: none) */
    double long_tokens;              /* prompt tokens of a long-context prompt, by the cost model */
    const drift_lab_cuts *cuts;      /* the answers cut over the matrix's runs (required) */
    const char *chat_reason;         /* why chat was not computable; NULL: it was */
    const struct drift_store_outcomes *outcomes; /* the store's failed requests; NULL: not counted */
    const drift_lab_stochastic *stochastic;      /* the leg, compared; NULL: not compared */
    const drift_table *table;        /* the flip table */
    const drift_table_analyses *analyses; /* its analyses */
    const drift_lab_findings *findings;   /* NULL: not computed */
} drift_lab_report;

/* The summary at the top of the lab's report (report.h's
 * drift_lab_summary_render) from r: its flip table, analyses and, when the
 * stochastic leg was compared, its figures with the reason any is missing
 * (src/report/lab_summary.c). Outputs as drift_lab_summary_render's. */
DRIFT_API drift_status drift_lab_report_summary_render(const drift_lab_report *r, char **text, char **html,
                                                       drift_error *err);

/* The note at the top of the HTML report: the fixtures' warning, why
 * safety was not run, --quick's long-context subset, the answers cut by
 * the token limit, why chat was not computable, the store's failed
 * requests and the stochastic leg against the paper's 0.23x
 * (src/report/lab_render.c). *out malloc'd ("" when there is nothing to
 * say). */
DRIFT_API drift_status drift_lab_report_note_render(const drift_lab_report *r, char **out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
