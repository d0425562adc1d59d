/* cmd_monitor.c - `driftbench monitor`: what a distribution monitor would
 * say about a migration, next to what actually flipped.
 *
 * Loads the stored embeddings of both runs' answers (all workloads), runs the
 * four Evidently embedding-drift detectors (monitor.h) with Evidently's
 * defaults, and prints them beside the per-workload flip rates of
 * drift_compare_runs, so a user sees the flips that no distribution alarm
 * catches (the paper's "Evidently: zero alerts"). Exit 0 after printing,
 * 2 on errors (no embeddings stored: run `driftbench score --embedder` first). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/compare.h"
#include "driftbench/monitor.h"
#include "driftbench/store.h"

static const char *MON_CMD = "monitor";

static void monitor_usage(FILE *f) {
    fprintf(f, "usage: driftbench monitor --db F --baseline L --target L [--embedder NAME]\n"
               "                          [--format text|json] [--seed N]\n"
               "Runs the distribution-drift detectors a monitoring stack (Evidently) would run on the\n"
               "embeddings of both runs' answers -- domain classifier ROC AUC, mean-embedding distance,\n"
               "share of drifted components (Wasserstein), MMD^2, with Evidently's defaults -- and\n"
               "prints them next to the flip rates, so the flips no distribution alarm catches show.\n"
               "Embeddings come from `driftbench score --embedder SPEC`; --embedder picks the stored\n"
               "embedder name (\"embed:SPEC\") when several exist.\n");
}

static void monitor_print_text(const drift_monitor_data *d, const drift_monitor_report *rep,
                               const drift_comparison *cmp, const char *base, const char *targ) {
    printf("monitor: baseline '%s' vs target '%s'\n", base, targ);
    printf("embeddings: %s, dim %d: %zu of %zu baseline answers, %zu of %zu target answers\n\n", d->embedder,
           d->dim, d->n_ref, d->answered_ref, d->n_cur, d->answered_cur);
    printf("distribution-drift detectors (Evidently defaults)\n");
    printf("  %-9s %10s  %-5s  %s\n", "method", "score", "alarm", "rule");
    for (int m = 0; m < DRIFT_MON_COUNT; m++) {
        const drift_monitor_result *r = &rep->r[m];
        printf("  %-9s %10.4f  %-5s  %s\n", drift_monitor_method_name((drift_monitor_method)m), r->score,
               r->drift ? "YES" : "no", r->rule);
    }
    printf("  (model: random-classifier AUC q95 %.4f; ratio: %zu of %d components drifted; mmd: sigma^2 %.4g)\n",
           rep->model_random_auc_q, rep->ratio_drifted, rep->dim, rep->mmd_sigma2);
    printf("alarms: %d of %d\n\n", rep->alarms, DRIFT_MON_COUNT);

    printf("functional flips (driftbench compare)\n");
    printf("  %-13s %6s %6s %10s  %s\n", "workload", "n", "flips", "flip rate", "95% CI");
    long total = 0;
    int shown = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (!cmp->present[w]) continue;
        const drift_wl_result *r = &cmp->wl[w];
        printf("  %-13s %6ld %6ld %9.2f%%  [%.2f%%, %.2f%%]", drift_workload_name((drift_workload)w), r->n,
               r->flips, 100.0 * r->flip_rate, 100.0 * r->ci95[0], 100.0 * r->ci95[1]);
        if (w == DRIFT_WL_CHAT && !isnan(r->sdr_mean)) printf("  (mean SDR %.4f)", r->sdr_mean);
        if (w == DRIFT_WL_SAFETY) printf("  (safe->unsafe %ld, unsafe->safe %ld)", r->correct_to_incorrect,
                                         r->incorrect_to_correct);
        printf("\n");
        total += r->flips;
        shown++;
    }
    if (!shown) printf("  (no scored pairs: run `driftbench score` on both runs)\n");
    printf("\n");
    if (total > 0 && rep->alarms == 0)
        printf("verdict: %ld flipped answers, 0 distribution alarms: no distribution monitor above would have "
               "caught them\n",
               total);
    else
        printf("verdict: %ld flipped answers, %d of %d distribution alarms\n", total, rep->alarms, DRIFT_MON_COUNT);
}

static int monitor_print_json(const drift_monitor_data *d, const drift_monitor_report *rep,
                              const drift_comparison *cmp, const char *base, const char *targ) {
    json_t *o = json_object(), *dets = json_array(), *flips = json_array();
    if (!o || !dets || !flips) {
        json_decref(o);
        json_decref(dets);
        json_decref(flips);
        return cli_error(MON_CMD, "out of memory");
    }
    json_object_set_new(o, "baseline", json_string(base));
    json_object_set_new(o, "target", json_string(targ));
    json_object_set_new(o, "embedder", json_string(d->embedder));
    json_object_set_new(o, "dim", json_integer(d->dim));
    json_object_set_new(o, "n_baseline", json_integer((json_int_t)d->n_ref));
    json_object_set_new(o, "n_target", json_integer((json_int_t)d->n_cur));
    for (int m = 0; m < DRIFT_MON_COUNT; m++) {
        const drift_monitor_result *r = &rep->r[m];
        json_t *x = json_object();
        json_object_set_new(x, "method", json_string(drift_monitor_method_name((drift_monitor_method)m)));
        json_object_set_new(x, "score", json_real(r->score));
        json_object_set_new(x, "threshold", json_real(r->threshold));
        json_object_set_new(x, "drift", json_boolean(r->drift));
        json_object_set_new(x, "rule", json_string(r->rule));
        json_array_append_new(dets, x);
    }
    json_object_set_new(o, "detectors", dets);
    json_object_set_new(o, "alarms", json_integer(rep->alarms));
    json_object_set_new(o, "model_random_auc_q95", json_real(rep->model_random_auc_q));
    json_object_set_new(o, "ratio_drifted_components", json_integer((json_int_t)rep->ratio_drifted));
    json_object_set_new(o, "mmd_sigma2", json_real(rep->mmd_sigma2));
    long total = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (!cmp->present[w]) continue;
        const drift_wl_result *r = &cmp->wl[w];
        json_t *x = json_object();
        json_object_set_new(x, "workload", json_string(drift_workload_name((drift_workload)w)));
        json_object_set_new(x, "n", json_integer(r->n));
        json_object_set_new(x, "flips", json_integer(r->flips));
        json_object_set_new(x, "flip_rate", json_real(r->flip_rate));
        json_object_set_new(x, "ci95", json_pack("[ff]", r->ci95[0], r->ci95[1]));
        json_array_append_new(flips, x);
        total += r->flips;
    }
    json_object_set_new(o, "workloads", flips);
    json_object_set_new(o, "total_flips", json_integer(total));
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!s) return cli_error(MON_CMD, "out of memory");
    printf("%s\n", s);
    free(s);
    return CLI_EXIT_PASS;
}

static int cmd_monitor(int argc, char **argv) {
    const char *db = NULL, *base = NULL, *targ = NULL, *embedder = NULL, *format = "text";
    long seed = 42;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            monitor_usage(stdout);
            return CLI_EXIT_PASS;
        }
        if (i + 1 >= argc) {
            monitor_usage(stderr);
            return cli_error(MON_CMD, "%s needs a value", a);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--baseline")) base = v;
        else if (!strcmp(a, "--target")) targ = v;
        else if (!strcmp(a, "--embedder")) embedder = v;
        else if (!strcmp(a, "--format")) format = v;
        else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(MON_CMD, "--seed", v, 0, 2147483647L, &seed) != 0) return CLI_EXIT_ERROR;
        } else {
            monitor_usage(stderr);
            return cli_error(MON_CMD, "unknown option %s", a);
        }
    }
    if (!db || !base || !targ) {
        monitor_usage(stderr);
        return cli_error(MON_CMD, "--db, --baseline and --target are required");
    }
    if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)
        return cli_error(MON_CMD, "--format must be text or json, not '%s'", format);

    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err) != DRIFT_OK) return cli_error_lib(MON_CMD, &err);
    int rc = CLI_EXIT_ERROR;
    drift_monitor_data d;
    drift_comparison *cmp = NULL;
    if (drift_monitor_load(st, base, targ, embedder, &d, &err) != DRIFT_OK) {
        rc = cli_error_lib(MON_CMD, &err);
        goto out_store;
    }
    drift_monitor_opts o;
    drift_monitor_opts_default(&o);
    o.seed = (uint64_t)seed;
    drift_monitor_report rep;
    if (drift_monitor_run(d.ref, d.n_ref, d.cur, d.n_cur, d.dim, &o, &rep, &err) != DRIFT_OK) {
        rc = cli_error_lib(MON_CMD, &err);
        goto out_data;
    }
    drift_compare_opts co;
    drift_compare_opts_default(&co);
    co.embedder = d.embedder;
    if (drift_compare_runs(st, base, targ, &co, &cmp, &err) != DRIFT_OK) {
        rc = cli_error_lib(MON_CMD, &err);
        goto out_data;
    }
    if (!strcmp(format, "json")) {
        rc = monitor_print_json(&d, &rep, cmp, base, targ);
    } else {
        monitor_print_text(&d, &rep, cmp, base, targ);
        rc = CLI_EXIT_PASS;
    }
    drift_comparison_free(cmp);
out_data:
    drift_monitor_data_clear(&d);
out_store:
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(monitor, "monitor", "Evidently-style distribution-drift detectors next to the flip rates", cmd_monitor)
