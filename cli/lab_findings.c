/* lab_findings.c - what `driftbench lab` found, printed and written once
 * its stage has run (cmd_lab.c calls these): the summary (DIR/summary.txt),
 * the flip table (DIR/flip_rates.csv), the ANOVA (DIR/anova.txt), the PRI
 * held-out evaluation (DIR/pri.txt when there are enough rows), the HTML
 * report (DIR/report.html) with its note; the closing lines (sizes, times,
 * tokens, CPU) and the A/A check. Every text block comes from a renderer
 * of src/report/; a file that cannot be written is named on stderr and the
 * others are still written (exit 2 at the end). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lab_cli.h"
#include "driftbench/analysis.h"
#include "driftbench/lab.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"

/* See lab_cli.h. */
int cli_lab_write_file(lab_cli *c, const char *name, const char *text) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", c->out, name);
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0, e = errno;
    if (f && fclose(f) && ok) ok = 0, e = errno;
    if (ok) return 0;
    cli_error("lab", "cannot write %s: %s", path, strerror(e));
    c->write_failed = 1;
    return -1;
}

/* See lab_cli.h. */
int cli_lab_report(lab_cli *c, const drift_lab_result *r) {
    int rc = CLI_EXIT_PASS;
    drift_error err = {0};
    char *sum_text = NULL, *sum_html = NULL;
    if (drift_lab_result_summary_render(r, &sum_text, &sum_html, &err)) rc = cli_error_lib("lab", &err);
    else {
        printf("\n%s", sum_text);
        cli_lab_write_file(c, "summary.txt", sum_text);
    }
    free(sum_text);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/flip_rates.csv", c->out);
    if (drift_table_write_csv(r->table, path, &err)) rc = cli_error_lib("lab", &err);
    printf("\n== flip rate by workload (percent, 95%% Wilson CI; baseline = ref profile of the same model) ==");
    char *text = NULL;
    if (drift_table_render_text(r->table, &text, &err)) cli_error_lib("lab", &err);
    else fputs(text, stdout);
    free(text);
    char *why = NULL;
    if (r->outcomes_ok && drift_store_outcomes_render(&r->outcomes, &why, &err) == DRIFT_OK && why[0])
        printf("%s\n", why);
    free(why);
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (r->main.score.not_computable[w])
            printf("%s: %zu answers not computable: %s\n", drift_workload_name((drift_workload)w),
                   r->main.score.not_computable[w], cli_safe(r->main.score.reason[w]));
    printf("(written to %s)\n\n== ANOVA ==\n", path);
    fflush(stdout);
    char *at = NULL;
    if (drift_anova_summary_render(&r->analyses, &at, &err)) rc = cli_error_lib("lab", &err);
    else {
        fputs(at, stdout);
        cli_lab_write_file(c, "anova.txt", at);
    }
    free(at);
    printf("== PRI held-out evaluation ==\n");
    fflush(stdout);
    char *pt = NULL;
    if (drift_pri_summary_render(&r->analyses, &pt, &err)) rc = cli_error_lib("lab", &err);
    else {
        fputs(pt, stdout);
        if (r->analyses.pri_fits) cli_lab_write_file(c, "pri.txt", pt);
    }
    free(pt);

    drift_html_opts ho;
    drift_html_opts_default(&ho);
    ho.title = c->full ? "DriftBench lab (full matrix)" : "DriftBench lab (quick matrix)";
    ho.baseline = "ref@{model}";
    char *note = NULL, *page = NULL;
    drift_error herr = {0};
    if (drift_lab_note_render(r, &note, &herr) == DRIFT_OK) {
        ho.note = note;
        ho.pri = r->analyses.pri;
        ho.summary_html = sum_html;
        if (drift_report_html(r->store, &ho, &page, &herr) == DRIFT_OK) cli_lab_write_file(c, "report.html", page);
    }
    if (herr.code) rc = cli_error_lib("lab", &herr);
    free(page);
    free(note);
    free(sum_html);
    return rc;
}

/* See lab_cli.h. */
int cli_lab_aa_check(const drift_lab_result *r) {
    const drift_lab_findings *f = &r->findings;
    if (!f->computed) return CLI_EXIT_PASS;
    if (!f->aa_runs) {
        printf("A/A check: no A/A row in the flip table (no aa@MODEL run was compared)\n");
        return CLI_EXIT_PASS;
    }
    if (!f->aa_flips && !(f->aa_sdr_max > DRIFT_LAB_AA_SDR_TOL)) {
        printf("A/A check: passed: %zu A/A run(s), 0 flips, chat SDR at most %.2g against their baselines\n", f->aa_runs, f->aa_sdr_max);
        return CLI_EXIT_PASS;
    }
    fflush(stdout);
    fprintf(stderr, "driftbench lab: A/A CHECK FAILED: the baseline against itself at another thread count gave %zu "
                    "flip(s), largest chat SDR %.4f, over %zu A/A run(s); the engine is meant to be thread- and "
                    "batch-invariant, so every figure of this lab is suspect\n",
            f->aa_flips, f->aa_sdr_max, f->aa_runs);
    return CLI_EXIT_FAIL;
}

/* See lab_cli.h. */
void cli_lab_print_times(const drift_lab_result *r, double wall_s, const char *out) {
    double run_s = r->main_wall_s + r->side_wall_s;
    int64_t tokens = r->tokens_after - r->tokens_before;
    size_t answers = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) answers += r->cuts.answers[w];
    char est[64] = "";
    if (r->gen_s > 0) snprintf(est, sizeof est, ", estimated %.0f s", (r->est_main_s + r->est_long_s) / (double)r->jobs);
    printf("\nlab: %zu configurations, %d side by side, %zu table rows; wall %.1f s (generation %.1f s%s: matrix "
           "%.1f s, then long_context %.1f s with the stochastic leg beside it %.1f s, together %.1f s; in the "
           "configurations' own time generating %.1f s, scoring %.1f s); %zu answers in the matrix's runs",
           r->main.configs, r->jobs, r->table->n_rows, wall_s, run_s, est, r->main_wall_s, r->long_wall_s,
           r->stoch_wall_s, r->side_wall_s, (r->main.run_ms + r->lng.run_ms) / 1000.0,
           (r->main.score_ms + r->lng.score_ms) / 1000.0, answers);
    if (r->tokens_before == 0 && run_s > 0) printf(", %.1f answers/s", (double)answers / run_s);
    printf("; %lld tokens generated now (the stochastic leg's too), %.0f tokens/s\n", (long long)tokens,
           run_s > 0 ? (double)tokens / run_s : 0.0);
    double cpu = drift_lab_cpu_s();
    printf("lab CPU (user + system, with the code sandbox's programs): %.1f s in all; before the matrix %.1f s, "
           "matrix %.1f s, long_context with the stochastic leg %.1f s, tables and report %.1f s\n",
           cpu, r->cpu_before_s, r->cpu_matrix_s - r->cpu_before_s, r->cpu_side_s - r->cpu_matrix_s,
           cpu - r->cpu_side_s);
    printf("report: %s/report.html\n", out);
}
