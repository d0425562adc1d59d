/* risk_bench.c - how well the flip-risk scores (risk.c) rank the prompts
 * that actually flipped, on stored comparisons, held out by configuration.
 *
 *   bench_risk_bench --db FILE [--db FILE]... --baseline L [--workload W]...
 *                    [--resamples B] [--seed S] [--ridge R] [--holdout-model] [--emit]
 *
 * Each store holds one baseline run (label L, run with --logprobs K) and
 * targets (every other run). A configuration is (store, target label); the
 * target labels name the precision and are shared between stores (one
 * store per model), so "hold out a precision" leaves out that label in
 * every store. For each counted pair of compare (drift_compare_runs) the
 * baseline answer's features (drift_risk_features_for with the pair's
 * workload) give a row: inputs drift_risk_x, outcome flipped.
 *
 * Per workload and configuration it prints pairs, flips, and for
 *   v1  risk/v1 (no fitted parameter: every configuration is out of sample)
 *   v2  risk/v2-logit fit (drift_risk_logit_fit, ridge R) on the rows of
 *       the other precisions (every store), scored on this configuration's
 * the ROC AUC and precision at the top 10% with bootstrap 95% intervals
 * (drift_risk_rank_eval). A "pooled" line per workload ranks all held-out
 * predictions together. --holdout-model fits v2 instead on the same
 * precision (label) in the other stores: a model of "this precision",
 * tested on a model it was not fit on. --emit prints each workload's fit on every row as
 * a C initializer for risk.c's builtin_models. Rows whose baseline answer
 * has no margin are counted as "skip" and left out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/store.h"

#define MAX_DB 8
#define MAX_CFG 128

typedef struct feat {
    int64_t response_id;
    int ok;
    double x[DRIFT_RISK_NX];
} feat;

typedef struct row {
    int cfg;
    drift_workload wl;
    double x[DRIFT_RISK_NX];
    int y;
} row;

typedef struct cfg {
    int db;
    char label[64];
    char model[64];
} cfg;

typedef struct data {
    row *rows;
    size_t n, cap;
    cfg cfgs[MAX_CFG];
    int n_cfg;
    long skipped[MAX_CFG][DRIFT_WL_COUNT];
} data;

static int cmp_feat(const void *a, const void *b) {
    int64_t x = ((const feat *)a)->response_id, y = ((const feat *)b)->response_id;
    return (x > y) - (x < y);
}

static const feat *feat_find(const feat *f, size_t n, int64_t id) {
    feat key = {.response_id = id};
    return bsearch(&key, f, n, sizeof *f, cmp_feat);
}

static int push_row(data *d, const row *r) {
    if (d->n == d->cap) {
        size_t nc = d->cap ? 2 * d->cap : 1024;
        row *nr = realloc(d->rows, nc * sizeof *nr);
        if (!nr) return -1;
        d->rows = nr;
        d->cap = nc;
    }
    d->rows[d->n++] = *r;
    return 0;
}

/* The model name of a run (its config's "model"), or the store's file name. */
static void model_of(const drift_run_info *r, const char *db, char *out, size_t cap) {
    const char *m = r->config_json ? strstr(r->config_json, "\"model\":\"") : NULL;
    if (m) {
        m += 9;
        size_t n = strcspn(m, "\"");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), m);
    } else {
        const char *s = strrchr(db, '/');
        snprintf(out, cap, "%s", s ? s + 1 : db);
    }
}

/* Reads one store: the baseline's features, then every target's pairs. */
static int load_db(data *d, int dbi, const char *path, const char *base) {
    drift_store *st = NULL;
    drift_error err = {0};
    if (drift_store_open_readonly(path, &st, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 2;
    }
    drift_run_info bi = {0};
    drift_scored_set set = {0};
    drift_run_info *ri = NULL;
    size_t nri = 0;
    feat *fs = NULL;
    int rc = 0;
    if (drift_store_run_get(st, base, &bi, &err) || drift_store_load_scored(st, bi.id, &set, &err) ||
        drift_store_run_list(st, &ri, &nri, &err)) {
        fprintf(stderr, "%s: baseline %s: %s\n", path, base, err.msg);
        rc = 2;
        goto out;
    }
    fs = calloc(set.n + 1, sizeof *fs);
    if (!fs) {
        rc = 2;
        goto out;
    }
    size_t nf = 0, with_lp = 0;
    drift_store_read_begin(st);
    for (size_t i = 0; i < set.n; i++) {
        const drift_scored *s = &set.rows[i];
        if (s->is_error) continue;
        feat *f = &fs[nf++];
        f->response_id = s->response_id;
        drift_answer ans = {0};
        drift_risk_features rf;
        if (drift_store_response_get(st, s->response_id, &ans, NULL, &err) == DRIFT_OK && ans.logprobs_json) {
            with_lp++;
            if (drift_risk_features_for(ans.logprobs_json, s->workload, &rf, &err) == DRIFT_OK)
                f->ok = drift_risk_x(&rf, f->x) == 0;
            else fprintf(stderr, "%s: prompt %s: %s\n", path, s->prompt_id, err.msg);
        }
        drift_answer_clear(&ans);
    }
    drift_store_read_end(st);
    qsort(fs, nf, sizeof *fs, cmp_feat);
    printf("# %s: baseline %s, %zu answers, %zu with logprobs\n", path, base, nf, with_lp);
    for (size_t r = 0; r < nri && !rc; r++) {
        if (!strcmp(ri[r].label, base)) continue;
        if (d->n_cfg == MAX_CFG) break;
        cfg *c = &d->cfgs[d->n_cfg];
        c->db = dbi;
        snprintf(c->label, sizeof c->label, "%s", ri[r].label);
        model_of(&bi, path, c->model, sizeof c->model);
        drift_compare_opts o;
        drift_compare_opts_default(&o);
        o.risk = 0;
        drift_comparison *cmp = NULL;
        if (drift_compare_runs(st, base, ri[r].label, &o, &cmp, &err)) {
            fprintf(stderr, "%s: compare %s %s: %s\n", path, base, ri[r].label, err.msg);
            continue;
        }
        for (int k = 0; k < DRIFT_WL_COUNT && !rc; k++) {
            const drift_wl_result *w = &cmp->wl[k];
            for (size_t i = 0; i < w->n_pairs && !rc; i++) {
                const feat *f = feat_find(fs, nf, w->pairs[i].base_response_id);
                if (!f || !f->ok) {
                    d->skipped[d->n_cfg][k]++;
                    continue;
                }
                row x = {.cfg = d->n_cfg, .wl = (drift_workload)k, .y = w->pairs[i].flipped};
                memcpy(x.x, f->x, sizeof x.x);
                if (push_row(d, &x)) rc = 2;
            }
        }
        drift_comparison_free(cmp);
        d->n_cfg++;
    }
out:
    free(fs);
    drift_run_info_array_free(ri, nri);
    drift_scored_set_clear(&set);
    drift_run_info_clear(&bi);
    drift_store_close(st);
    return rc;
}

/* "0.912 [0.850, 0.960]" or "-". */
static void ci_cell(char *out, size_t cap, double v, const double ci[2]) {
    if (isnan(v)) snprintf(out, cap, "%-20s", "-");
    else snprintf(out, cap, "%.3f [%.3f, %.3f]", v, ci[0], ci[1]);
}

static void print_line(const char *wl, const char *name, size_t n, long skip, const drift_risk_rank *v1,
                       const drift_risk_rank *v2) {
    char a1[40], p1[40], a2[40], p2[40];
    ci_cell(a1, sizeof a1, v1->auc, v1->auc_ci);
    ci_cell(p1, sizeof p1, v1->prec10, v1->prec10_ci);
    ci_cell(a2, sizeof a2, v2 ? v2->auc : NAN, v2 ? v2->auc_ci : v1->auc_ci);
    ci_cell(p2, sizeof p2, v2 ? v2->prec10 : NAN, v2 ? v2->prec10_ci : v1->prec10_ci);
    printf("%-8s %-28s %5zu %5zu %4ld  %s  %s  %s  %s\n", wl, name, n, v1->n_flipped, skip, a1, p1, a2, p2);
}

/* Fits wl's model on every row (leave < 0), or held out from configuration
 * `leave`: by precision, the rows of the other target labels (every store);
 * by model, the rows of the same label in the other stores. */
static int by_model = 0;
static int fit(const data *d, drift_workload wl, int leave, double ridge, drift_risk_model *m, drift_error *err) {
    double *x = malloc((d->n + 1) * DRIFT_RISK_NX * sizeof *x);
    int *y = malloc((d->n + 1) * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++) {
        const row *r = &d->rows[i];
        if (r->wl != wl) continue;
        if (leave >= 0) {
            int same_label = !strcmp(d->cfgs[r->cfg].label, d->cfgs[leave].label);
            int same_db = d->cfgs[r->cfg].db == d->cfgs[leave].db;
            if (by_model ? (!same_label || same_db) : same_label) continue;
        }
        memcpy(&x[n * DRIFT_RISK_NX], r->x, sizeof r->x);
        y[n++] = r->y;
    }
    int rc = drift_risk_logit_fit(x, y, n, ridge, wl, m, err) ? -1 : 0;
    free(x);
    free(y);
    return rc;
}

static void evaluate(const data *d, drift_workload wl, int resamples, uint64_t seed, double ridge) {
    const char *wn = drift_workload_name(wl);
    size_t cap = d->n + 1, pn = 0;
    double *s1 = malloc(cap * sizeof *s1), *s2 = malloc(cap * sizeof *s2), *ps1 = malloc(cap * sizeof *ps1),
           *ps2 = malloc(cap * sizeof *ps2);
    int *y = malloc(cap * sizeof *y), *py = malloc(cap * sizeof *py);
    int pooled2 = 1;
    drift_error err = {0};
    if (!s1 || !s2 || !ps1 || !ps2 || !y || !py) goto out;
    for (int c = 0; c < d->n_cfg; c++) {
        drift_risk_model m;
        int have_m = fit(d, wl, c, ridge, &m, &err) == 0;
        size_t n = 0;
        for (size_t i = 0; i < d->n; i++) {
            const row *r = &d->rows[i];
            if (r->cfg != c || r->wl != wl) continue;
            s1[n] = r->x[0];
            s2[n] = have_m ? drift_risk_logit_prob(&m, r->x) : NAN;
            y[n++] = r->y;
        }
        if (n == 0) continue;
        char name[160];
        snprintf(name, sizeof name, "%s/%s", d->cfgs[c].model, d->cfgs[c].label);
        drift_risk_rank v1, v2;
        if (drift_risk_rank_eval(s1, y, n, resamples, seed, &v1, &err)) {
            fprintf(stderr, "%s %s: %s\n", wn, name, err.msg);
            continue;
        }
        int ok2 = have_m && drift_risk_rank_eval(s2, y, n, resamples, seed, &v2, &err) == DRIFT_OK;
        print_line(wn, name, n, d->skipped[c][wl], &v1, ok2 ? &v2 : NULL);
        if (!ok2) pooled2 = 0;
        memcpy(ps1 + pn, s1, n * sizeof *s1);
        memcpy(ps2 + pn, s2, n * sizeof *s2);
        memcpy(py + pn, y, n * sizeof *y);
        pn += n;
    }
    if (pn) {
        drift_risk_rank v1, v2;
        long skip = 0;
        for (int c = 0; c < d->n_cfg; c++) skip += d->skipped[c][wl];
        if (!drift_risk_rank_eval(ps1, py, pn, resamples, seed, &v1, &err)) {
            int ok2 = pooled2 && drift_risk_rank_eval(ps2, py, pn, resamples, seed, &v2, &err) == DRIFT_OK;
            print_line(wn, "pooled (held out)", pn, skip, &v1, ok2 ? &v2 : NULL);
        }
    }
out:
    free(s1);
    free(s2);
    free(ps1);
    free(ps2);
    free(y);
    free(py);
}

static void emit(const data *d, drift_workload wl, double ridge) {
    drift_risk_model m;
    drift_error err = {0};
    if (fit(d, wl, -1, ridge, &m, &err)) {
        printf("/* %s: no fit: %s */\n", drift_workload_name(wl), err.msg);
        return;
    }
    printf("    {.version = DRIFT_RISK_V2, .workload = DRIFT_WL_%s,\n     .mean = {", wl == DRIFT_WL_LONG ? "LONG"
                                                                                   : wl == DRIFT_WL_MATH ? "MATH"
                                                                                   : wl == DRIFT_WL_CODE ? "CODE"
                                                                                   : wl == DRIFT_WL_SAFETY ? "SAFETY"
                                                                                                            : "CHAT");
    for (int j = 0; j < DRIFT_RISK_NX; j++) printf("%s%.9g", j ? ", " : "", m.mean[j]);
    printf("},\n     .sd = {");
    for (int j = 0; j < DRIFT_RISK_NX; j++) printf("%s%.9g", j ? ", " : "", m.sd[j]);
    printf("},\n     .beta = {");
    for (int j = 0; j <= DRIFT_RISK_NX; j++) printf("%s%.9g", j ? ", " : "", m.beta[j]);
    printf("},\n     .ridge = %g, .n_fit = %zu, .n_fit_flips = %zu, .iterations = %d},\n", m.ridge, m.n_fit,
           m.n_fit_flips, m.iterations);
}

int main(int argc, char **argv) {
    const char *dbs[MAX_DB], *base = NULL;
    int ndb = 0, emit_model = 0, nwl = 0;
    drift_workload wls[DRIFT_WL_COUNT];
    int resamples = 2000;
    uint64_t seed = 1;
    double ridge = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--emit")) {
            emit_model = 1;
            continue;
        }
        if (!strcmp(a, "--holdout-model")) {
            by_model = 1;
            continue;
        }
        if (!v) goto usage;
        if (!strcmp(a, "--db") && ndb < MAX_DB) dbs[ndb++] = v;
        else if (!strcmp(a, "--baseline")) base = v;
        else if (!strcmp(a, "--workload") && nwl < DRIFT_WL_COUNT) {
            wls[nwl] = drift_workload_parse(v);
            if (wls[nwl++] == DRIFT_WL_UNKNOWN) goto usage;
        } else if (!strcmp(a, "--resamples")) resamples = atoi(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--ridge")) ridge = strtod(v, NULL);
        else goto usage;
        i++;
    }
    if (!ndb || !base) goto usage;
    if (!nwl)
        for (int k = 0; k < DRIFT_WL_COUNT; k++)
            if (k != DRIFT_WL_UNKNOWN) wls[nwl++] = (drift_workload)k;
    data *d = calloc(1, sizeof *d);
    if (!d) return 2;
    for (int i = 0; i < ndb; i++)
        if (load_db(d, i, dbs[i], base)) {
            free(d->rows);
            free(d);
            return 2;
        }
    printf("# %s (no fitted parameter) beside %s (ridge %g) fit on %s; %d resamples, seed %llu\n", DRIFT_RISK_VERSION,
           DRIFT_RISK_V2, ridge,
           by_model ? "the same precision of the other models (stores)" : "the other precisions of every model",
           resamples, (unsigned long long)seed);
    printf("%-8s %-28s %5s %5s %4s  %-20s  %-20s  %-20s  %-20s\n", "workload", "model/held-out precision", "n",
           "flips", "skip", "v1 AUC [95%]", "v1 prec@10% [95%]", "v2 AUC [95%]", "v2 prec@10% [95%]");
    for (int i = 0; i < nwl; i++) evaluate(d, wls[i], resamples, seed, ridge);
    if (emit_model) {
        printf("\n/* builtin_models: %s fit on every row, ridge %g */\n", DRIFT_RISK_V2, ridge);
        for (int i = 0; i < nwl; i++) emit(d, wls[i], ridge);
    }
    free(d->rows);
    free(d);
    return 0;
usage:
    fprintf(stderr,
            "usage: %s --db FILE [--db FILE]... --baseline L [--workload W]... [--resamples B] [--seed S] [--ridge R] "
            "[--holdout-model] [--emit]\n",
            argv[0]);
    return 2;
}
