/* cmd_anova.c - `driftbench anova`: analysis of variance of a flip table.
 *
 * Default: Type II sums of squares (the marginal contribution of each term,
 * the usual choice when interactions are weak; the paper's own table is
 * Type III, use --type 3 or --type all). When the table sits beside the
 * artifact's anova_flip_rate_corrected.csv (the paper's data directory), the
 * artifact's table is printed beside our Type III one: it was computed on
 * slightly different data, so the figures differ a little and are not a
 * target. The tables are computed here and rendered by anova_render.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/analysis.h"
#include "driftbench/report.h"

static const char *const CMD = "anova";

static void usage(FILE *f) {
    fprintf(f,
            "usage: driftbench anova --table FILE [--formula S] [--type 1|2|3|all] [--strata DIM]\n"
            "                        [--format text|json] [-o FILE]\n"
            "  --table FILE    flip table CSV (the paper's columns; `driftbench table` writes one)\n"
            "  --formula S     default: %s\n"
            "                  terms: C(x), x, C(x):C(y) joined by '+'; treatment coding, levels sorted\n"
            "  --type T        sums of squares: 1 (sequential), 2 (default), 3 (Wald, as the paper), all\n"
            "  --strata DIM    also run the ANOVA within each level of DIM (e.g. workload), with the\n"
            "                  terms that mention DIM dropped\n"
            "  --format F      text (default) or json\n"
            "eta^2 = SS / total SS about the mean (the paper's definition); part.eta = SS / (SS + residual SS);\n"
            "SS share = SS / sum of the SS column (the artifact's eta_squared); p_BH = Benjamini-Hochberg.\n"
            "Rank-deficient designs: df is the rank a term adds (statsmodels prints the column count).\n"
            "Exit: 0 ok, 2 bad input.\n",
            drift_anova_default_formula());
}

/* Appends a to the tables shown (taking it over). */
static int keep_table(drift_anova_table ***all, size_t *n, drift_anova_table *a) {
    drift_anova_table **p = realloc(*all, (*n + 1) * sizeof *p);
    if (!p) {
        drift_anova_free(a);
        return cli_error(CMD, "out of memory");
    }
    *all = p;
    p[(*n)++] = a;
    return CLI_EXIT_PASS;
}

static int cmd_anova(int argc, char **argv) {
    const char *table = NULL, *formula = NULL, *strata = NULL, *format = "text", *outp = NULL, *type_s = "2";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        const char **dst = !strcmp(a, "--table") ? &table : !strcmp(a, "--formula") ? &formula
                         : !strcmp(a, "--strata") ? &strata : !strcmp(a, "--format") ? &format
                         : !strcmp(a, "--type") ? &type_s : (!strcmp(a, "-o") || !strcmp(a, "--out")) ? &outp : NULL;
        if (!dst) { usage(stderr); return cli_error(CMD, "unknown argument '%s'", a); }
        if (i + 1 >= argc) return cli_error(CMD, "%s needs a value", a);
        *dst = argv[++i];
    }
    if (!table) { usage(stderr); return cli_error(CMD, "--table is required"); }
    int types[3], ntypes = 0;
    if (!strcmp(type_s, "all")) { types[0] = 1; types[1] = 2; types[2] = 3; ntypes = 3; }
    else if (!strcmp(type_s, "1") || !strcmp(type_s, "2") || !strcmp(type_s, "3")) types[ntypes++] = atoi(type_s);
    else return cli_error(CMD, "--type '%s': use 1, 2, 3 or all", type_s);
    int json = 0;
    if (!strcmp(format, "json")) json = 1;
    else if (strcmp(format, "text")) return cli_error(CMD, "--format '%s': use text or json", format);

    drift_error err = {0};
    drift_table *t = NULL;
    if (drift_table_read_csv(table, &t, &err)) return cli_error_lib(CMD, &err);
    const char *fml = formula ? formula : drift_anova_default_formula();
    /* the artifact's table, when the input is the paper's file */
    drift_anova_artifact_row art[16];
    size_t nart = strcmp(fml, drift_anova_default_formula()) ? 0 : drift_anova_artifact_read(table, art, 16);
    int rc = CLI_EXIT_PASS;
    drift_anova_table **all = NULL, *type3 = NULL;
    size_t n_all = 0;
    for (int k = 0; k < ntypes && rc == CLI_EXIT_PASS; k++) {
        drift_anova_table *a = NULL, **st = NULL;
        size_t ns = 0;
        if (drift_anova_run(t, formula, types[k], &a, &err)) { rc = cli_error_lib(CMD, &err); break; }
        if ((rc = keep_table(&all, &n_all, a))) break;
        if (types[k] == 3) type3 = a;
        if (!strata) continue;
        if (drift_anova_stratified(t, formula, types[k], strata, &st, &ns, &err)) { rc = cli_error_lib(CMD, &err); break; }
        for (size_t s = 0; s < ns; s++) {
            if (rc == CLI_EXIT_PASS) rc = keep_table(&all, &n_all, st[s]);
            else drift_anova_free(st[s]);
        }
        free(st);
    }
    drift_anova_table *own3 = NULL;
    if (rc == CLI_EXIT_PASS && nart && !type3 && drift_anova_run(t, formula, 3, &own3, &err)) rc = cli_error_lib(CMD, &err);
    if (rc == CLI_EXIT_PASS) {
        drift_anova_doc doc = {.table = table, .formula = fml, .tables = (const drift_anova_table *const *)all,
                               .n_tables = n_all, .type3 = type3 ? type3 : own3, .artifact = art, .n_artifact = nart};
        char *text = NULL;
        if (drift_anova_render(&doc, json ? DRIFT_FORMAT_JSON : DRIFT_FORMAT_TEXT, &text, &err)) rc = cli_error_lib(CMD, &err);
        else if (cli_write_output(CMD, outp, text)) rc = CLI_EXIT_ERROR;
        free(text);
    }
    for (size_t i = 0; i < n_all; i++) drift_anova_free(all[i]);
    free(all);
    drift_anova_free(own3);
    drift_table_free(t);
    return rc;
}
CLI_COMMAND(anova, "anova", "ANOVA of a flip table (types I/II/III, eta^2, BH, strata)", cmd_anova)
