/* workload.h - the workload traits table (internal): what every module knows
 * about a workload, one row per drift_workload, as numerics.c's format
 * traits are one row per number format.
 *
 * A renderer, the comparison, the gate, the risk features, the templates and
 * the lab's summary look a workload up here instead of switching over
 * drift_workload: a new workload is a row here, a row in the evaluator
 * method table (eval/evaluator.h) and one evaluator file.
 *
 * Directions. A flip goes from the pass word to the fail word ("down",
 * direction -1: correct->incorrect, safe->unsafe) or back ("up", +1); a
 * pairwise workload (chat) has one direction, drift (direction 0). Each
 * direction has one name per style of output (wl_dir_style), all made from
 * the same two words, so no format can name a direction differently from
 * another. */
#ifndef DRIFT_SUITE_WORKLOAD_H
#define DRIFT_SUITE_WORKLOAD_H

#include "driftbench/types.h"

/* The flip taxonomy's class of a workload (compare's drift_taxonomy). */
typedef enum wl_class {
    WL_CLASS_CORRECTNESS = 0, /* correct <-> incorrect against a ground truth */
    WL_CLASS_SAFETY,          /* safe <-> unsafe, by a guard */
    WL_CLASS_SEMANTIC,        /* semantic drift between the two answers */
} wl_class;

/* The styles a direction is named in. */
typedef enum wl_dir_style {
    WL_DIR_KEY = 0,  /* JSON value / key: "correct_to_incorrect" */
    WL_DIR_TEXT,     /* plain text, markdown tables, junit, github: "correct->incorrect" */
    WL_DIR_UTF8,     /* markdown prose: "correct\u2192incorrect" */
    WL_DIR_HTML,     /* HTML: "correct&#8594;incorrect" */
    WL_DIR_STYLES
} wl_dir_style;

/* One direction's name in every style. */
typedef struct wl_dir_names {
    const char *name[WL_DIR_STYLES];
} wl_dir_names;

/* The critical region of an answer for the per-prompt risk features
 * (analysis/risk.c). */
typedef enum wl_region {
    WL_REGION_WHOLE = 0,   /* every token */
    WL_REGION_FINAL_NUMBER, /* the tokens of the extracted final number */
    WL_REGION_CODE_BLOCK,  /* the tokens of the first fenced block (or all) */
    WL_REGION_HEAD,        /* the first DRIFT_RISK_HEAD_TOKENS tokens (refusal or not) */
} wl_region;

/* The prompt template family (suite/template.c). */
typedef enum wl_template {
    WL_TEMPLATE_QA = 0,     /* "Question: ...\nAnswer:"; chat: step by step, '#### <number>' */
    WL_TEMPLATE_CODE,       /* the function's prompt as it is; chat: asks for a ```python block */
    WL_TEMPLATE_DIALOGUE,   /* "User: ...\nAssistant:"; chat: the request as it is */
    WL_TEMPLATE_RAW,        /* the input as it is, both apis */
    WL_TEMPLATE_LONG,       /* the long-context instruction before the question */
} wl_template;

typedef struct wl_traits {
    const char *name;              /* as printed, and parsed (drift_workload_name) */
    const char *const *aliases;    /* further names drift_workload_parse accepts; NULL-ended */
    const char *pass_word;         /* what a PASS label means: "correct", "safe"; NULL when pairwise */
    const char *fail_word;         /* what a FAIL label means: "incorrect", "unsafe"; NULL when pairwise */
    wl_dir_names down;             /* pass -> fail, direction -1 (pairwise: the drift name) */
    wl_dir_names up;               /* fail -> pass, direction +1 (pairwise: the drift name) */
    int pairwise;                  /* a flip is judged on the two answers together (chat's SDR):
                                      labels are NONE by design, no accuracy, no McNemar */
    int runs_code;                 /* the evaluator runs the answer in the sandbox: the store and
                                      compare's report say which isolation judged it */
    wl_class taxonomy;             /* the flip taxonomy's class */
    double default_budget;         /* the gate's default budget, a fraction (README) */
    double paper_rate_pct;         /* the paper's mean flip rate, percent (pairwise: its SDR figure) */
    int paper_rank;                /* the order of the lab summary (the paper's; chat last) */
    wl_region risk_region;         /* the risk features' critical region */
    wl_template template_family;   /* how a prompt is rendered */
    const char *template_id[2];    /* the rendered prompt's template id: [0] completions, [1] chat */
} wl_traits;

/* The row of wl; NULL for DRIFT_WL_UNKNOWN or out of range. */
const wl_traits *wl_traits_of(drift_workload wl);

/* The name of direction dir (<0 down, >0 up, 0 drift) of wl's flips in
 * style; a pairwise workload and dir 0 give the drift name ("semantic
 * drift"); an unknown workload is named as a correctness one. */
const char *wl_dir_name(drift_workload wl, int dir, wl_dir_style style);

/* The workload at position rank (0..DRIFT_WL_COUNT-1) of the paper's order;
 * DRIFT_WL_UNKNOWN out of range. */
drift_workload wl_by_paper_rank(int rank);

#endif
