/* cmd_lab.c - `driftbench lab`: the paper's study on the embedded engine, on
 * a machine without servers or GPUs. The study itself is the library's lab
 * stage, one call (drift_lab_run, include/driftbench/lab.h,
 * src/pipeline/lab.c: models, design, cost model, the matrix and its
 * long-context subset, the stochastic leg on its own thread, the analyses);
 * this file parses the flags, prints what each phase of the stage reports
 * (its progress callback, lab_event), writes the files and owns the exit
 * code:
 *
 * 1. models, whether safety can be judged, the matrix written to
 *    DIR/matrix.json and --quick's long-context subset to
 *    DIR/matrix_long.json (so `driftbench matrix` can re-run or shard
 *    them), the size and the time estimate (--full on fewer than 8 cores
 *    adds a WARNING on stderr; it still runs). --dry-run stops here.
 * 2. the matrix legs printed as `matrix` prints them (cli_matrix_printer,
 *    a progress bar weighted by the cost model), then the stochastic leg's
 *    scoring and comparison -> DIR/stochastic.txt, the answers cut by the
 *    token limit -> DIR/cuts.txt, the verdict cache's reuse.
 * 3. from the result: the summary (DIR/summary.txt), the flip table
 *    (DIR/flip_rates.csv), the ANOVA (DIR/anova.txt), the PRI held-out
 *    evaluation (DIR/pri.txt when there are enough rows) and the HTML
 *    report (DIR/report.html) with its note; then the times.
 * Every text block comes from a renderer of src/report/ (report.h, lab.h's
 * drift_lab_result_summary_render and drift_lab_note_render).
 *
 * The files: this one the flags and the run (drift_lab_run) with its exit
 * code; lab_progress.c what each phase prints while the stage runs (its
 * progress callback, cli_lab_event); lab_findings.c what the study found,
 * printed and written once it has run, and the closing lines; lab_cli.h
 * what they share.
 *
 * Exit codes: 0 done, 2 an error. A file that cannot be written is exit 2
 * naming the path: before the matrix runs (DIR/matrix.json,
 * DIR/matrix_long.json) it stops the lab at once; after, the other files
 * are still written. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "lab_cli.h"
#include "cmd_matrix.h"
#include "driftbench/lab.h"
#include "pipeline.h"

static const char lab_usage[] =
    "usage: driftbench lab [--quick|--full] [--out DIR] [--models DIR] [options]\n"
    "\n"
    "Runs the embedded matrix (models x hardware x precision x framework levels x workloads;\n"
    "baseline = each model's reduced-precision serving profile, precision=w16a16 (bf16 weights,\n"
    "activations, KV cache) framework=vllm hardware=avx2, with logprobs), then writes DIR/lab.db,\n"
    "DIR/matrix.json, DIR/flip_rates.csv, DIR/anova.txt, DIR/pri.txt, DIR/summary.txt and\n"
    "DIR/report.html and prints the findings, the flip table, the ANOVA and the PRI held-out\n"
    "evaluation. Controls beside the axes: the A/A run (the baseline at another thread count;\n"
    "any flip fails the lab, exit 1) and the ref oracle (how far the baseline is from exact).\n"
    "Re-running resumes what is stored.\n"
    "\n"
    "  --quick            at most 3 models (\"-fragile-\" ones first); framework x precision\n"
    "                     crossed on every model, hardware x precision on the first (3 levels\n"
    "                     each); math 60, code 40, safety 60, chat 30 prompts; long context 16\n"
    "                     prompts on the first model's baseline and 4 levels; 192 new tokens; the\n"
    "                     stochastic leg on the main leg's math prompts x 5 replicates x 4 runs\n"
    "                     (default)\n"
    "  --full             3 hardware x 4 precision x 3 framework crossed on every model, every\n"
    "                     prompt of each suite, long context on every configuration\n"
    "  --out DIR          output directory (default lab)\n"
    "  --models DIR       GGUF models (default: models/ under $DRIFT_DATA_DIR, ./ or the installed\n"
    "                     datadir, else the test fixtures; the lab prints which it took)\n"
    "  --limit N          prompts per suite (overrides the mode's)\n"
    "  --long N           --quick's long-context prompts (default 16), each on the baseline and 4\n"
    "                     levels: N x 5 prefills of ~2,000 tokens; with no flip the report counts\n"
    "                     each prompt once, so telling 0 from the paper's 1.55% takes N >= 250\n"
    "  --max-tokens N     new tokens per answer (overrides the mode's)\n"
    "  --guard SPEC       safety guard (LlamaGuard-3 over HTTP, or builtin[:PATH]); default: the\n"
    "                     built-in guard model; safety is skipped (and said so) if none opens\n"
    "  --embedder SPEC    chat embedder (default: the first model not named -fragile-, cpu-f32/avx2)\n"
    "  --threads N        engine threads per configuration (default 1: best on shared machines)\n"
    "  --jobs N           configurations side by side (default: cores / threads); results are\n"
    "                     the same as one at a time\n"
    "  --dry-run          print the design, its size and the time estimate, write DIR/matrix.json,\n"
    "                     run nothing\n"
    "\n"
    "Before it starts, lab prints the design (levels, crossings, controls), its size\n"
    "(configurations x prompts, the pairs per workload and the rate each can resolve) and an\n"
    "estimate of the generation time from tokens/s measured on this machine; --full on fewer\n"
    "than 8 cores also prints a WARNING (on stderr) with the estimate and how to cut or shard\n"
    "the run. Model paths in DIR/matrix.json are relative to the working directory when the\n"
    "models are under it (re-run it from there with driftbench matrix).\n";

/* Seconds on the monotonic clock (the lab's wall time). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int lab_cancel(void *user) {
    const lab_cli *c = user;
    return c->stop || cli_cancel_requested(NULL);
}

/* A failure of the stage that no phase printed. */
static int lab_failed(const drift_lab_result *r, const drift_error *err) {
    if (r->phase == DRIFT_LAB_PHASE_NONE) return cli_error("lab", "%s", err->msg); /* no models: the user's words */
    if (err->code == DRIFT_ERR_NOMEM) return cli_error("lab", "out of memory");
    if (err->code == DRIFT_ERR_CANCELLED) return cli_error("lab", "interrupted; run the same command again to resume");
    return cli_error_lib("lab", err);
}

static int cmd_lab(int argc, char **argv) {
    lab_cli c;
    memset(&c, 0, sizeof c);
    c.out = "lab";
    long limit = -1, long_prompts = -1, max_tokens = -1, threads = 1, jobs = 0;
    drift_lab_opts lo;
    drift_lab_opts_default(&lo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(lab_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            lo.full = 0;
            continue;
        }
        if (!strcmp(a, "--full")) {
            lo.full = 1;
            continue;
        }
        if (!strcmp(a, "--dry-run")) {
            c.dry_run = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_error("lab", "unknown option or missing value '%s' (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) c.out = v;
        else if (!strcmp(a, "--models")) lo.models_dir = v;
        else if (!strcmp(a, "--guard")) lo.guard_spec = v;
        else if (!strcmp(a, "--embedder")) lo.embedder_spec = v;
        else if (!strcmp(a, "--limit")) {
            if (cli_parse_int("lab", "--limit", v, 1, 1000000, &limit)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--long")) {
            if (cli_parse_int("lab", "--long", v, 1, 100000, &long_prompts)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--max-tokens")) {
            if (cli_parse_int("lab", "--max-tokens", v, 1, 100000, &max_tokens)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_int("lab", "--threads", v, 0, 1024, &threads)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--jobs")) {
            if (cli_parse_int("lab", "--jobs", v, 0, 1024, &jobs)) return CLI_EXIT_ERROR;
        } else return cli_error("lab", "unknown option '%s' (see --help)", a);
    }
    if (lo.full && long_prompts > 0)
        return cli_error("lab", "--long sets --quick's long-context prompts; --full runs every one of them on every "
                                "configuration (use --limit to make it smaller)");
    c.full = lo.full;
    c.threads = (int)threads;
    lo.limit = limit;
    lo.long_prompts = long_prompts;
    lo.max_tokens = (int)max_tokens;
    lo.threads = (int)threads;
    lo.jobs = (int)jobs;
    lo.dry_run = c.dry_run;
    char db[PATH_MAX + 32];
    snprintf(c.matrix_path, sizeof c.matrix_path, "%s/matrix.json", c.out);
    snprintf(c.long_path, sizeof c.long_path, "%s/matrix_long.json", c.out);
    snprintf(db, sizeof db, "%s/lab.db", c.out);
    lo.db = db;
    lo.spec_name = c.matrix_path;
    lo.progress = cli_lab_event;
    lo.progress_user = &c;
    lo.cancel = lab_cancel;
    lo.cancel_user = &c;
    double t_start = now_s();

    drift_lab_result *r = calloc(1, sizeof *r); /* large: on the heap */
    if (!r) return cli_error("lab", "out of memory");
    drift_error err = {0};
    drift_status src = drift_lab_run(&lo, r, &err);
    cli_matrix_printer_free(c.printer);
    int rc = c.rc;
    if (rc == CLI_EXIT_PASS && src) rc = lab_failed(r, &err);
    if (rc == CLI_EXIT_PASS && r->dry_run) printf("dry run: nothing generated (the matrix is in %s)\n", c.matrix_path);
    else if (rc == CLI_EXIT_PASS) {
        rc = cli_lab_report(&c, r);
        cli_lab_print_times(r, now_s() - t_start, c.out);
        int aa = cli_lab_aa_check(r);
        if (rc == CLI_EXIT_PASS && !c.write_failed) rc = aa;
    }
    if ((rc == CLI_EXIT_PASS || rc == CLI_EXIT_FAIL) && c.write_failed) rc = CLI_EXIT_ERROR;
    drift_lab_result_clear(r);
    free(r);
    return rc;
}
CLI_COMMAND(lab, "lab", "the embedded study: matrix, flip table, ANOVA, PRI, report", cmd_lab)
