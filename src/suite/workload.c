/* workload.c - the workload traits table (workload.h): one row per workload,
 * filled with designated initialisers as numerics.c's format traits.
 *
 *   workload      pass/fail          class        budget  paper  risk region   template
 *   math          correct/incorrect  correctness  2%      16.74  final number  qa
 *   code          correct/incorrect  correctness  0.5%    0.09   code block    code
 *   safety        safe/unsafe        safety       1%      7.97   head tokens   dialogue
 *   chat          (pairwise: SDR)    semantic     5%      12.4   whole answer  raw
 *   long_context  correct/incorrect  correctness  2%      1.55   whole answer  long
 *
 * The paper's rates are its mean flip rate per workload over its 105
 * configurations (artifact flip_rates.csv); chat: the paper's SDR figure
 * (no chat rows in the artifact's table). The budgets are the README's
 * defaults (the gate's, compare --budget overrides them).
 *
 * Direction names are made by two macros from the pass and fail words, so
 * every style (JSON key, text, markdown prose, HTML) says the same words. */
#include "suite/workload.h"

#include <stddef.h>

/* from -> to, in every wl_dir_style */
#define WL_DIRECTION(from, to) {{from "_to_" to, from "->" to, from "\xE2\x86\x92" to, from "&#8594;" to}}
/* a one-direction (pairwise) workload's flip: two words */
#define WL_DRIFT(adj, noun) {{adj "_" noun, adj " " noun, adj " " noun, adj " " noun}}

static const char *const long_aliases[] = {"long", "longctx", "long-context", NULL};
static const char *const no_aliases[] = {NULL};

static const wl_traits TRAITS[DRIFT_WL_COUNT] = {
    [DRIFT_WL_MATH] = {.name = "math", .aliases = no_aliases, .pass_word = "correct", .fail_word = "incorrect",
                       .down = WL_DIRECTION("correct", "incorrect"), .up = WL_DIRECTION("incorrect", "correct"),
                       .taxonomy = WL_CLASS_CORRECTNESS, .default_budget = 0.02, .paper_rate_pct = 16.74,
                       .paper_rank = 0, .risk_region = WL_REGION_FINAL_NUMBER, .template_family = WL_TEMPLATE_QA,
                       .template_id = {"math/completions/v1", "math/chat/v1"}},
    [DRIFT_WL_CODE] = {.name = "code", .aliases = no_aliases, .pass_word = "correct", .fail_word = "incorrect",
                       .down = WL_DIRECTION("correct", "incorrect"), .up = WL_DIRECTION("incorrect", "correct"),
                       .runs_code = 1, .taxonomy = WL_CLASS_CORRECTNESS, .default_budget = 0.005, .paper_rate_pct = 0.09,
                       .paper_rank = 3, .risk_region = WL_REGION_CODE_BLOCK, .template_family = WL_TEMPLATE_CODE,
                       .template_id = {"code/completions/v1", "code/chat/v1"}},
    [DRIFT_WL_SAFETY] = {.name = "safety", .aliases = no_aliases, .pass_word = "safe", .fail_word = "unsafe",
                         .down = WL_DIRECTION("safe", "unsafe"), .up = WL_DIRECTION("unsafe", "safe"),
                         .taxonomy = WL_CLASS_SAFETY, .default_budget = 0.01, .paper_rate_pct = 7.97,
                         .paper_rank = 1, .risk_region = WL_REGION_HEAD, .template_family = WL_TEMPLATE_DIALOGUE,
                         .template_id = {"safety/completions/v1", "safety/chat/v1"}},
    [DRIFT_WL_CHAT] = {.name = "chat", .aliases = no_aliases, .pass_word = NULL, .fail_word = NULL,
                       .down = WL_DRIFT("semantic", "drift"), .up = WL_DRIFT("semantic", "drift"), .pairwise = 1,
                       .taxonomy = WL_CLASS_SEMANTIC, .default_budget = 0.05, .paper_rate_pct = 12.4,
                       .paper_rank = 4, .risk_region = WL_REGION_WHOLE, .template_family = WL_TEMPLATE_RAW,
                       .template_id = {"chat/completions/v1", "chat/chat/v1"}},
    [DRIFT_WL_LONG] = {.name = "long_context", .aliases = long_aliases, .pass_word = "correct",
                       .fail_word = "incorrect", .down = WL_DIRECTION("correct", "incorrect"),
                       .up = WL_DIRECTION("incorrect", "correct"), .taxonomy = WL_CLASS_CORRECTNESS,
                       .default_budget = 0.02, .paper_rate_pct = 1.55, .paper_rank = 2,
                       .risk_region = WL_REGION_WHOLE, .template_family = WL_TEMPLATE_LONG,
                       .template_id = {"long_context/completions/v2", "long_context/chat/v2"}},
};

/* a flip of direction 0: drift between the two answers */
static const wl_dir_names DRIFT_NAMES = WL_DRIFT("semantic", "drift");

const wl_traits *wl_traits_of(drift_workload wl) {
    if ((int)wl < 0 || wl >= DRIFT_WL_COUNT) return NULL;
    return &TRAITS[wl];
}

const char *wl_dir_name(drift_workload wl, int dir, wl_dir_style style) {
    if ((int)style < 0 || style >= WL_DIR_STYLES) style = WL_DIR_TEXT;
    const wl_traits *t = wl_traits_of(wl);
    if (!t) t = &TRAITS[DRIFT_WL_MATH]; /* unknown: named as a correctness workload */
    if (t->pairwise || dir == 0) return DRIFT_NAMES.name[style];
    return (dir < 0 ? &t->down : &t->up)->name[style];
}

drift_workload wl_by_paper_rank(int rank) {
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (TRAITS[w].paper_rank == rank) return (drift_workload)w;
    return DRIFT_WL_UNKNOWN;
}
