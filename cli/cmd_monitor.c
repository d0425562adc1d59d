/* cmd_monitor.c - `driftbench monitor`: what a distribution monitor would
 * say about a migration, next to what actually flipped.
 *
 * Loads the stored embeddings of both runs' answers (all workloads), runs the
 * four Evidently embedding-drift detectors (monitor.h) with Evidently's
 * defaults, and prints them beside the per-workload flip rates of
 * drift_compare_runs, so a user sees the flips that no distribution alarm
 * catches (the paper's "Evidently: zero alerts"); monitor_render.c renders
 * them. Exit 0 after printing, 2 on errors (no embeddings stored: run
 * `driftbench score --embedder` first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/compare.h"
#include "driftbench/monitor.h"
#include "driftbench/report.h"
#include "driftbench/store.h"

static const char *MON_CMD = "monitor";

static void monitor_usage(FILE *f) {
    fprintf(f, "usage: driftbench monitor --db STORE --baseline L --target L [--embedder NAME]\n"
               "                          [--format text|json] [--seed N]\n"
               "Runs the distribution-drift detectors a monitoring stack (Evidently) would run on the\n"
               "embeddings of both runs' answers -- domain classifier ROC AUC, mean-embedding distance,\n"
               "share of drifted components (Wasserstein), MMD^2, with Evidently's defaults -- and\n"
               "prints them next to the flip rates, so the flips no distribution alarm catches show.\n"
               "Embeddings come from `driftbench score --embedder SPEC`; --embedder picks the stored\n"
               "embedder name (\"embed:SPEC\") when several exist.\n");
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
    char *text = NULL;
    if (drift_monitor_render(&d, &rep, cmp, base, targ, !strcmp(format, "json") ? DRIFT_FORMAT_JSON : DRIFT_FORMAT_TEXT,
                             &text, &err) != DRIFT_OK) {
        rc = cli_error_lib(MON_CMD, &err);
    } else {
        fputs(text, stdout);
        rc = CLI_EXIT_PASS;
    }
    free(text);
    drift_comparison_free(cmp);
out_data:
    drift_monitor_data_clear(&d);
out_store:
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(monitor, "monitor", "Evidently-style distribution-drift detectors next to the flip rates", cmd_monitor)
