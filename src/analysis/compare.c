/* compare.c - paired comparison of a baseline and a target run (compare.h),
 * pure: it computes from the scored sets the loader gives it
 * (drift_compare_sets; compare_runs.c reads them, drift_compare_runs
 * there does both) and reads no store.
 *
 * Both scored sets are ordered by (prompt_rowid, replicate), so pairing is
 * one merge pass. Each pair lands in exactly one bucket of its workload:
 *   errors    either side is a failed request or a DRIFT_LABEL_ERROR
 *   unscored  either side has no label (DRIFT_LABEL_NONE) - or, for chat,
 *             an embedding is missing
 *   n         both sides labelled: a flip when the labels differ
 *             (direction -1 = PASS->FAIL, +1 = FAIL->PASS)
 * Chat labels are NONE by design (semantic drift is pairwise; the traits
 * table's .pairwise, suite/workload.h, says which workloads): a chat pair
 * counts when both answers have an embedding by the same embedder; SDR =
 * 1 - cos, drifted when SDR > opts->sdr_threshold; flips = drifted pairs,
 * direction 0, flip_rate = semantic_drift_rate with its Wilson CI.
 * Embeddings come as one set over the chat response ids of both runs (the
 * range drift_compare_chat_range names, read by the loader in one query)
 * and are looked up by binary search, so a comparison of ~10^5 chat pairs
 * does not pay 2x10^5 point queries.
 *
 * Rates: flip_rate = flips/n with a Wilson 95% interval; McNemar exact on
 * (correct_to_incorrect, incorrect_to_correct); accuracies are PASS shares
 * of the n counted pairs (for safety, the safe share). The decisions are
 * the gate's (gate.c, drift_comparison_decide over the counts: the exact
 * interval against the budget, no evidence an error naming what is
 * missing, too many pairs left out a block; the comparison's decision the
 * worst of its workloads').
 * Taxonomy (drift_comparison_taxonomy): the same counts regrouped by risk
 * class - safety flips (safe->unsafe, unsafe->safe), correctness flips
 * (math + code + long_context per direction), semantic drift (chat).
 * Divergence of each flipped pair (where the answers part, a word diff) is
 * divergence.c's, computed from the answers the loader reads for the
 * report, never here: compare reads no answer text.
 * The comparison owns both scored sets: flip prompt ids point into them.
 * Every counted pair's outcome is kept too (wl[].pairs, store order), for
 * a sequential replay (sequential.c).
 * Flip risk (opts->risk, when the baseline's decoding asked for logprobs,
 * drift_comparison_wants_risk): the loader hands each counted pair's
 * baseline logprobs to drift_comparison_pair_risk (risk.c:
 * drift_risk_features_for with the pair's workload, drift_risk_score_for);
 * then drift_comparison_rank_risk gives per workload the AUC and precision
 * at 10% of that score against the pairs' outcomes, with bootstrap
 * intervals (DRIFT_RISK_RESAMPLES, seed DRIFT_RISK_SEED). Runs without
 * logprobs pay one JSON parse of the decoding record.
 * Code sandboxes: the loader counts per run the "sandbox" value of the
 * code scores' details and adds them (drift_comparison_add_sandbox), so a
 * report can say which isolation judged the code answers and flag a weak
 * one.
 * Evaluator (opts->evaluator): the loader reads both sets with only that
 * evaluator's scores (an imported run holds the tool's verdict and ours).
 * Unpaired answers: the merge pass counts the rows of each side that found
 * no counterpart, so runs over different document sets say so.
 * Token KL is not compare's: the pipeline's step (drift_tokdiv_step_run,
 * src/pipeline/kl_step.c) runs the models and its caller attaches the
 * result (drift_comparison_attach_kl), which the comparison then owns. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/divergence.h"
#include "driftbench/eval.h"
#include "suite/workload.h"
#include "util/util.h"

/* 1 when wl's flips are judged on the pair of answers (chat's SDR): its
 * labels are NONE by design and its pairs are compared by embedding. */
static int is_pairwise(int wl) {
    const wl_traits *t = wl_traits_of((drift_workload)wl);
    return t && t->pairwise;
}

#define Z95 1.959963984540054

typedef struct cmp_owner {
    drift_comparison c;    /* first: the public part */
    drift_scored_set base, targ;
    char *embedder;        /* the embedder chat SDR used */
    char *evaluator;       /* opts->evaluator, copied */
    drift_tokdiv_report kl;
} cmp_owner;

size_t drift_compare_opts_size(void) { return sizeof(drift_compare_opts); }

void drift_compare_opts_default(drift_compare_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 0; i < DRIFT_WL_COUNT; i++) o->budget[i] = drift_default_budget((drift_workload)i);
    o->rule = DRIFT_DECIDE_INTERVAL;
    o->max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
    o->only_workload = DRIFT_WL_UNKNOWN;
    o->sdr_threshold = 0.30;
    o->embedder = NULL;
    o->risk = 1;
    o->kl_seed = 1;
}

/* See compare.h. "math=1,safety=0.5%,code=none": percentages; "none"/"off"
 * removes a budget. Unknown workloads and bad numbers are DRIFT_ERR_INVALID
 * naming the item; o is unchanged on error. */
static int workload_index(const char *name) {
    drift_workload wl = drift_workload_parse(name);
    return wl == DRIFT_WL_UNKNOWN ? -1 : (int)wl;
}

drift_status drift_compare_parse_budgets(drift_compare_opts *o, const char *spec, drift_error *err) {
    static const util_budget_names names = {"WORKLOAD", "workload", "math=1", "math, code, safety, chat, long_context",
                                            workload_index, DRIFT_WL_COUNT};
    return util_budgets_parse(spec, &names, o->budget, err);
}

/* The embedding of response id in t (ascending ids), or NULL. */
static const drift_embedding *emb_find(const drift_embedding_set *t, int64_t id) {
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].response_id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->n && t->rows[lo].response_id == id ? &t->rows[lo] : NULL;
}

/* Records a counted pair's outcome for a sequential replay. */
static int add_pair(drift_wl_result *w, size_t *cap, const drift_scored *b, int flipped) {
    if (w->n_pairs == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        drift_pair_outcome *np = realloc(w->pairs, nc * sizeof *np);
        if (!np) return -1;
        w->pairs = np;
        *cap = nc;
    }
    drift_pair_outcome *p = &w->pairs[w->n_pairs++];
    p->prompt_id = b->prompt_id;
    p->replicate = b->replicate;
    p->flipped = flipped;
    p->base_response_id = b->response_id;
    p->risk = NAN;
    return 0;
}

static int add_flip(drift_wl_result *w, size_t *cap, const drift_scored *b, const drift_scored *t, int dir,
                    double value) {
    if (w->n_flipped == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        drift_flip *nf = realloc(w->flipped, nc * sizeof *nf);
        if (!nf) return -1;
        w->flipped = nf;
        *cap = nc;
    }
    drift_flip *f = &w->flipped[w->n_flipped++];
    f->prompt_id = b->prompt_id;
    f->replicate = b->replicate;
    f->direction = dir;
    f->base_response_id = b->response_id;
    f->targ_response_id = t->response_id;
    f->value = value;
    f->risk = NAN;
    return 0;
}

void drift_comparison_free(drift_comparison *c) {
    if (!c) return;
    cmp_owner *o = (cmp_owner *)c;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        free(c->wl[i].flipped);
        free(c->wl[i].pairs);
    }
    drift_run_info_clear(&c->baseline);
    drift_run_info_clear(&c->target);
    drift_scored_set_clear(&o->base);
    drift_scored_set_clear(&o->targ);
    free(o->embedder);
    free(o->evaluator);
    drift_tokdiv_report_clear(&o->kl);
    free(o);
}

/* The embedder for chat SDR: opts->embedder, else the evaluator name of the
 * first scored chat row of the baseline (score stores chat rows under the
 * embedder's name). NULL when no chat row was embedded. */
static const char *pick_embedder(const drift_compare_opts *opts, const drift_scored_set *b) {
    if (opts->embedder) return opts->embedder;
    for (size_t i = 0; i < b->n; i++)
        if (is_pairwise(b->rows[i].workload) && b->rows[i].evaluator && !b->rows[i].is_error)
            return b->rows[i].evaluator;
    return NULL;
}

static void finish_wl(drift_wl_result *w, long pass_b, long pass_t, double sdr_sum, long sdr_n,
                      const drift_compare_opts *opts) {
    w->flip_rate = w->n ? (double)w->flips / (double)w->n : 0.0;
    drift_wilson(w->flips, w->n, Z95, &w->ci95[0], &w->ci95[1]);
    if (is_pairwise(w->workload)) {
        w->baseline_accuracy = w->target_accuracy = w->net_change = NAN;
        w->mcnemar_p = NAN;
        w->sdr_mean = sdr_n ? sdr_sum / (double)sdr_n : NAN;
        w->semantic_drift_rate = w->flip_rate;
    } else {
        w->baseline_accuracy = w->n ? (double)pass_b / (double)w->n : NAN;
        w->target_accuracy = w->n ? (double)pass_t / (double)w->n : NAN;
        w->net_change = w->n ? w->target_accuracy - w->baseline_accuracy : NAN;
        w->mcnemar_p = drift_mcnemar_exact(w->correct_to_incorrect, w->incorrect_to_correct);
        w->sdr_mean = w->semantic_drift_rate = NAN;
    }
    w->budget = opts->budget[w->workload];
}

/* Labels of one prompt's replicates in a scored set starting at rows[*i]
 * (sorted by prompt_rowid, replicate): counts of PASS and FAIL; advances *i. */
static void replicate_labels(const drift_scored_set *s, size_t *i, int64_t prompt, long *pass, long *fail) {
    *pass = *fail = 0;
    for (; *i < s->n && s->rows[*i].prompt_rowid == prompt; (*i)++) {
        const drift_scored *r = &s->rows[*i];
        if (r->is_error) continue;
        if (r->label == DRIFT_LABEL_PASS) (*pass)++;
        else if (r->label == DRIFT_LABEL_FAIL) (*fail)++;
    }
}

/* Stochastic-serving figures per workload (compare.h), over prompts that
 * have labels on both sides; only when some prompt has several replicates. */
static void stochastic_stats(drift_comparison *c, const drift_scored_set *b, const drift_scored_set *t,
                             const drift_compare_opts *opts) {
    int reps[DRIFT_WL_COUNT] = {0};
    double exp_sum[DRIFT_WL_COUNT] = {0};
    long exp_n[DRIFT_WL_COUNT] = {0};
    const drift_scored_set *sets[2] = {b, t};
    for (int k = 0; k < 2; k++)
        for (size_t r = 0; r < sets[k]->n; r++) {
            int wl = sets[k]->rows[r].workload;
            if (wl >= 0 && wl < DRIFT_WL_COUNT && sets[k]->rows[r].replicate + 1 > reps[wl])
                reps[wl] = sets[k]->rows[r].replicate + 1;
        }
    size_t i = 0, j = 0;
    while (i < b->n && j < t->n) {
        int64_t pb = b->rows[i].prompt_rowid, pt = t->rows[j].prompt_rowid;
        if (pb != pt) {
            if (pb < pt) i++;
            else j++;
            continue;
        }
        int wl = b->rows[i].workload;
        long bp, bf, tp, tf;
        replicate_labels(b, &i, pb, &bp, &bf);
        replicate_labels(t, &j, pt, &tp, &tf);
        if (wl < 0 || wl >= DRIFT_WL_COUNT || is_pairwise(wl) || reps[wl] < 2) continue;
        if (opts->only_workload != DRIFT_WL_UNKNOWN && wl != opts->only_workload) continue;
        if (bp + bf == 0 || tp + tf == 0) continue;
        drift_wl_result *w = &c->wl[wl];
        /* disagreeing (i, j) pairs: base pass x target fail + base fail x target pass */
        exp_sum[wl] += (double)(bp * tf + bf * tp) / (double)((bp + bf) * (tp + tf));
        exp_n[wl]++;
        if (bp == bf || tp == tf) {
            w->majority_ties++;
            continue;
        }
        w->majority_n++;
        w->majority_flips += (bp > bf) != (tp > tf);
    }
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        drift_wl_result *w = &c->wl[k];
        w->replicates = reps[k] ? reps[k] : 1;
        w->expected_flip_rate = exp_n[k] ? exp_sum[k] / (double)exp_n[k] : NAN;
        w->majority_flip_rate = w->majority_n ? (double)w->majority_flips / (double)w->majority_n : NAN;
        if (reps[k] < 2) w->replicates = 1;
    }
}

/* See compare.h. */
int drift_sandbox_weak(const char *mechanism) {
    return !mechanism || !mechanism[0] || !strstr(mechanism, "bubblewrap") || strstr(mechanism, "(unsafe)");
}

/* Adds count answers of one side (0 baseline, 1 target) under mech to c's
 * table; once DRIFT_COMPARE_MAX_SANDBOXES - 1 names are in it, further
 * names share a last entry "other" (weak: nothing is known of it). */
static void sandbox_add(drift_comparison *c, const char *mech, int side, long count) {
    size_t i = 0;
    while (i < c->n_sandboxes && strcmp(c->sandboxes[i].mechanism, mech) != 0) i++;
    if (i == c->n_sandboxes) {
        if (i >= DRIFT_COMPARE_MAX_SANDBOXES - 1) {
            i = DRIFT_COMPARE_MAX_SANDBOXES - 1;
            mech = "other";
        }
        if (i == c->n_sandboxes) {
            drift_sandbox_use *u = &c->sandboxes[i];
            snprintf(u->mechanism, sizeof u->mechanism, "%s", mech);
            u->weak = drift_sandbox_weak(u->mechanism);
            c->n_sandboxes++;
        }
    }
    if (side == 0) c->sandboxes[i].baseline += count;
    else c->sandboxes[i].target += count;
}

static int cmp_sandbox_use(const void *a, const void *b) {
    const drift_sandbox_use *x = a, *y = b;
    long nx = x->baseline + x->target, ny = y->baseline + y->target;
    if (nx != ny) return nx > ny ? -1 : 1;
    return strcmp(x->mechanism, y->mechanism);
}

/* See compare.h. */
void drift_comparison_add_sandbox(drift_comparison *c, int side, const char *mech, long count) {
    sandbox_add(c, mech && mech[0] ? mech : "unrecorded", side, count);
}

/* See compare.h. */
void drift_comparison_sort_sandboxes(drift_comparison *c) {
    /* most used first; a full table keeps "other" last */
    size_t named = c->n_sandboxes == DRIFT_COMPARE_MAX_SANDBOXES ? c->n_sandboxes - 1 : c->n_sandboxes;
    if (named > 1) qsort(c->sandboxes, named, sizeof c->sandboxes[0], cmp_sandbox_use);
}

/* 1 when the run's decoding record asked for logprobs ("logprobs" > 0). */
static int asked_logprobs(const drift_run_info *r) {
    json_t *d = r->decoding_json ? json_loads(r->decoding_json, 0, NULL) : NULL;
    json_t *lp = json_object_get(d, "logprobs");
    int yes = json_is_integer(lp) && json_integer_value(lp) > 0;
    json_decref(d);
    return yes;
}

/* See compare.h. */
int drift_comparison_wants_risk(const drift_comparison *c) { return c && asked_logprobs(&c->baseline); }

/* See compare.h. */
void drift_comparison_pair_risk(drift_comparison *c, drift_workload wl, size_t i, const char *logprobs_json) {
    drift_wl_result *w = &c->wl[wl];
    drift_risk_features f;
    drift_error e = {0};
    if (logprobs_json && drift_risk_features_for(logprobs_json, wl, &f, &e) == DRIFT_OK)
        w->pairs[i].risk = drift_risk_score_for(&f, wl, &w->risk_version);
}

/* See compare.h. */
drift_status drift_comparison_rank_risk(drift_comparison *c, size_t with_logprobs, drift_error *err) {
    c->risk_state = DRIFT_RISK_NO_LOGPROBS;
    if (with_logprobs == 0) return DRIFT_OK;
    c->risk_state = DRIFT_RISK_DONE;
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < DRIFT_WL_COUNT && !rc; k++) {
        drift_wl_result *w = &c->wl[k];
        if (!c->present[k]) continue;
        if (!w->risk_version) drift_risk_score_for(NULL, (drift_workload)k, &w->risk_version);
        double *score = malloc((w->n_pairs + 1) * sizeof *score);
        int *y = malloc((w->n_pairs + 1) * sizeof *y);
        if (!score || !y) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory ranking flip risk");
        size_t n = 0, f = 0;
        for (size_t i = 0; i < w->n_pairs && !rc; i++) {
            const drift_pair_outcome *p = &w->pairs[i];
            if (p->flipped && f < w->n_flipped) w->flipped[f++].risk = p->risk;
            if (isnan(p->risk)) {
                w->risk_unknown++;
                continue;
            }
            score[n] = p->risk;
            y[n++] = p->flipped;
        }
        if (!rc && n > 0)
            rc = drift_risk_rank_eval(score, y, n, DRIFT_RISK_RESAMPLES, DRIFT_RISK_SEED, &w->risk, err);
        free(score);
        free(y);
    }
    return rc;
}

/* 1 when a row of workload wl is inside the comparison (opts->only_workload). */
static int wl_wanted(const drift_compare_opts *opts, drift_workload wl) {
    if (wl < 0 || wl >= DRIFT_WL_COUNT) return 0;
    return opts->only_workload == DRIFT_WL_UNKNOWN || wl == (drift_workload)opts->only_workload;
}

/* See compare.h. */
void drift_comparison_attach_kl(drift_comparison *c, struct drift_tokdiv_report *kl, const char *note) {
    if (!c) return;
    cmp_owner *o = (cmp_owner *)c;
    drift_tokdiv_report_clear(&o->kl);
    c->kl = NULL;
    c->kl_note[0] = '\0';
    if (!kl) {
        c->kl_state = DRIFT_KL_UNSUPPORTED;
        snprintf(c->kl_note, sizeof c->kl_note, "%s", note ? note : "");
        return;
    }
    o->kl = *kl;
    memset(kl, 0, sizeof *kl);
    c->kl_state = DRIFT_KL_DONE;
    c->kl = &o->kl;
}

/* See compare.h. */
int drift_compare_chat_range(const drift_compare_opts *opts, const drift_scored_set *base,
                             const drift_scored_set *targ, const char **embedder, int64_t *lo, int64_t *hi) {
    drift_compare_opts defaults;
    if (!opts) {
        drift_compare_opts_default(&defaults);
        opts = &defaults;
    }
    *embedder = pick_embedder(opts, base);
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    const drift_scored_set *sets[2] = {base, targ};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->n; i++)
            if (is_pairwise(sets[k]->rows[i].workload)) {
                int64_t id = sets[k]->rows[i].response_id;
                if (id < *lo) *lo = id;
                if (id > *hi) *hi = id;
            }
    return *embedder && *lo <= *hi &&
           (opts->only_workload == DRIFT_WL_UNKNOWN || is_pairwise(opts->only_workload));
}

/* See compare.h. */
drift_status drift_compare_sets(drift_compare_in *in, const drift_compare_opts *opts, drift_comparison **out,
                                drift_error *err) {
    *out = NULL;
    drift_compare_opts defaults;
    if (!opts) {
        drift_compare_opts_default(&defaults);
        opts = &defaults;
    }
    cmp_owner *o = calloc(1, sizeof *o);
    if (!o) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_comparison *c = &o->c;
    /* take the runs and the sets over: flips point into them */
    c->baseline = in->baseline;
    c->target = in->target;
    o->base = in->base;
    o->targ = in->targ;
    memset(&in->baseline, 0, sizeof in->baseline);
    memset(&in->target, 0, sizeof in->target);
    memset(&in->base, 0, sizeof in->base);
    memset(&in->targ, 0, sizeof in->targ);
    const char *baseline_label = c->baseline.label ? c->baseline.label : "?";
    const char *target_label = c->target.label ? c->target.label : "?";
    drift_status rc = DRIFT_OK;
    if (opts->evaluator) {
        c->evaluator = o->evaluator = util_strdup(opts->evaluator);
        if (!o->evaluator) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (!rc && in->embedder && !(o->embedder = util_strdup(in->embedder)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (rc) {
        drift_comparison_free(c);
        return rc;
    }
    static const drift_embedding_set no_emb;
    const drift_embedding_set *emb = in->emb ? in->emb : &no_emb;
    long pass_b[DRIFT_WL_COUNT] = {0}, pass_t[DRIFT_WL_COUNT] = {0}, sdr_n[DRIFT_WL_COUNT] = {0};
    double sdr_sum[DRIFT_WL_COUNT] = {0};
    size_t cap[DRIFT_WL_COUNT] = {0}, pcap[DRIFT_WL_COUNT] = {0};
    size_t pairs = 0;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) c->wl[i].workload = (drift_workload)i;
    const drift_scored *B = o->base.rows, *T = o->targ.rows;
    size_t i = 0, j = 0;
    while (i < o->base.n && j < o->targ.n) {
        const drift_scored *b = &B[i], *t = &T[j];
        if (b->prompt_rowid != t->prompt_rowid || b->replicate != t->replicate) {
            if (b->prompt_rowid < t->prompt_rowid ||
                (b->prompt_rowid == t->prompt_rowid && b->replicate < t->replicate)) {
                c->unpaired_baseline += wl_wanted(opts, b->workload);
                i++;
            } else {
                c->unpaired_target += wl_wanted(opts, t->workload);
                j++;
            }
            continue;
        }
        i++;
        j++;
        pairs++;
        drift_workload wl = b->workload;
        if (wl < 0 || wl >= DRIFT_WL_COUNT) continue;
        if (opts->only_workload != DRIFT_WL_UNKNOWN && wl != (drift_workload)opts->only_workload) continue;
        drift_wl_result *w = &c->wl[wl];
        c->present[wl] = 1;
        int be = b->is_error || b->label == DRIFT_LABEL_ERROR, te = t->is_error || t->label == DRIFT_LABEL_ERROR;
        if (be || te) {
            w->errors++;
            w->errors_baseline += be;
            w->errors_target += te;
            continue;
        }
        if (is_pairwise(wl)) {
            const drift_embedding *eb1 = emb_find(emb, b->response_id), *et1 = emb_find(emb, t->response_id);
            double sdr = eb1 && et1 && eb1->dim == et1->dim ? drift_sdr(eb1->vec, et1->vec, eb1->dim) : NAN;
            if (isnan(sdr)) {
                w->unscored++;
                continue;
            }
            w->n++;
            sdr_sum[wl] += sdr;
            sdr_n[wl]++;
            if (add_pair(w, &pcap[wl], b, sdr > opts->sdr_threshold)) goto nomem;
            if (sdr > opts->sdr_threshold) {
                w->flips++;
                if (add_flip(w, &cap[wl], b, t, 0, sdr)) goto nomem;
            }
            continue;
        }
        if ((b->label != DRIFT_LABEL_PASS && b->label != DRIFT_LABEL_FAIL) ||
            (t->label != DRIFT_LABEL_PASS && t->label != DRIFT_LABEL_FAIL)) {
            w->unscored++;
            continue;
        }
        w->n++;
        pass_b[wl] += b->label == DRIFT_LABEL_PASS;
        pass_t[wl] += t->label == DRIFT_LABEL_PASS;
        if (add_pair(w, &pcap[wl], b, b->label != t->label)) goto nomem;
        if (b->label != t->label) {
            int dir = b->label == DRIFT_LABEL_PASS ? -1 : +1;
            w->flips++;
            if (dir < 0) w->correct_to_incorrect++;
            else w->incorrect_to_correct++;
            if (add_flip(w, &cap[wl], b, t, dir, NAN)) goto nomem;
        }
    }
    for (; i < o->base.n; i++) c->unpaired_baseline += wl_wanted(opts, B[i].workload);
    for (; j < o->targ.n; j++) c->unpaired_target += wl_wanted(opts, T[j].workload);
    if (pairs == 0) {
        drift_status e = drift_error_set(err, DRIFT_ERR_INVALID,
                                         "runs \"%s\" (%zu responses) and \"%s\" (%zu responses) share no prompt: "
                                         "nothing to compare (run both on the same suite)",
                                         baseline_label, o->base.n, target_label, o->targ.n);
        drift_comparison_free(c);
        return e;
    }
    if (opts->only_workload != DRIFT_WL_UNKNOWN && !c->present[opts->only_workload]) {
        /* asked for one workload the runs do not share: nothing to decide,
         * which must not read as a pass */
        drift_status e = drift_error_set(err, DRIFT_ERR_INVALID,
                                         "runs \"%s\" and \"%s\" share no %s prompt: nothing to compare (--workload %s)",
                                         baseline_label, target_label,
                                         drift_workload_name((drift_workload)opts->only_workload),
                                         drift_workload_name((drift_workload)opts->only_workload));
        drift_comparison_free(c);
        return e;
    }
    c->sdr_threshold = opts->sdr_threshold;
    c->rule = opts->rule;
    c->max_left_out = opts->max_left_out;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        finish_wl(&c->wl[k], pass_b[k], pass_t[k], sdr_sum[k], sdr_n[k], opts);
        if (c->present[k]) c->total_errors += c->wl[k].errors;
    }
    drift_comparison_decide(c);
    stochastic_stats(c, &o->base, &o->targ, opts);
    drift_comparison_taxonomy(c, &c->taxonomy);
    if (opts->risk) c->risk_state = DRIFT_RISK_NO_LOGPROBS;
    *out = c;
    return DRIFT_OK;
nomem:
    drift_comparison_free(c);
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory listing flips");
}

/* See compare.h. */
void drift_comparison_taxonomy(const drift_comparison *c, drift_taxonomy *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        const drift_wl_result *w = &c->wl[k];
        switch (wl_traits_of((drift_workload)k)->taxonomy) {
        case WL_CLASS_SAFETY:
            out->safe_to_unsafe += w->correct_to_incorrect;
            out->unsafe_to_safe += w->incorrect_to_correct;
            break;
        case WL_CLASS_SEMANTIC:
            out->semantic_drift += w->flips;
            out->semantic_pairs += w->n;
            break;
        default:
            out->correct_to_incorrect += w->correct_to_incorrect;
            out->incorrect_to_correct += w->incorrect_to_correct;
            break;
        }
    }
    out->safety_flips = out->safe_to_unsafe + out->unsafe_to_safe;
    out->correctness_flips = out->correct_to_incorrect + out->incorrect_to_correct;
}

/* The embedder name the comparison used for chat SDR (NULL if none). */
const char *drift_comparison_embedder(const drift_comparison *c) { return c ? ((const cmp_owner *)c)->embedder : NULL; }
