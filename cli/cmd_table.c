/* cmd_table.c - `driftbench table --db F --baseline L`: the configuration x
 * workload flip table of a store, with the paper's columns (CSV, through the
 * analysis module's writer, so `anova` and `pri` read it back) or as text
 * grouped by workload (table_render.c). The CSV written to a file (-o F)
 * is the table's data as it is (formula cells quoted); printed (no -o, or
 * -o -) it goes through the sanitiser as lines first, since a label may
 * hold controls or a runner command and CSV has no escape for them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/analysis.h"
#include "driftbench/matrix.h"
#include "driftbench/report.h"

/* The flip table grouped by workload, as text (table_render.c), to f. */
static void print_flip_table(FILE *f, const drift_table *t) {
    char *text = NULL;
    drift_error err = {0};
    if (drift_table_render_text(t, &text, &err)) cli_error_lib("table", &err);
    else fputs(text, f);
    free(text);
}

static int cmd_table(int argc, char **argv) {
    const char *db = NULL, *baseline = NULL, *out = NULL, *format = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: driftbench table --db STORE --baseline LABEL [-o flip_rates.csv] [--format csv|text]\n"
                   "Compares every run with its baseline and prints the configuration x workload flip\n"
                   "table (experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,\n"
                   "num_comparisons,ci_low,ci_high + extra dimensions; rates in percent). LABEL may hold\n"
                   "{model} (or any dimension): 'ref@{model}' compares each model with its own ref run.\n"
                   "Default format: csv with -o, text otherwise.\n");
            return 0;
        }
        const char **dst = !strcmp(a, "--db") ? &db : !strcmp(a, "--baseline") ? &baseline
                         : (!strcmp(a, "-o") || !strcmp(a, "--output")) ? &out : !strcmp(a, "--format") ? &format : NULL;
        if (!dst) return cli_error("table", "unknown option '%s' (see --help)", a);
        if (++i >= argc) return cli_error("table", "%s needs a value", a);
        *dst = argv[i];
    }
    if (!db || !baseline) return cli_error("table", "--db and --baseline are required (see --help)");
    if (!format) format = out ? "csv" : "text";
    if (strcmp(format, "csv") && strcmp(format, "text")) return cli_error("table", "--format: csv or text, not '%s'", format);
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("table", &err);
    drift_table *t = NULL;
    drift_status rc = drift_matrix_flip_table(st, baseline, &t, &err);
    drift_store_close(st);
    if (rc) return cli_error_lib("table", &err);
    int ret = 0;
    if (!strcmp(format, "text")) {
        if (out && strcmp(out, "-")) {
            FILE *f = fopen(out, "w");
            if (!f) ret = cli_error("table", "cannot write %s", out);
            else {
                print_flip_table(f, t);
                fclose(f);
            }
        } else {
            print_flip_table(stdout, t);
        }
    } else {
        char *csv = NULL;
        if (drift_table_format_csv(t, &csv, &err)) ret = cli_error_lib("table", &err);
        else if (cli_write_output("table", out, out && strcmp(out, "-") ? csv : cli_safe_lines(csv))) ret = CLI_EXIT_ERROR;
        free(csv);
    }
    if (!ret && !cli_quiet && out) fprintf(stderr, "table: %zu rows written to %s\n", t->n_rows, out);
    drift_table_free(t);
    return ret;
}
CLI_COMMAND(table, "table", "configuration x workload flip table of a store (paper's columns)", cmd_table)
