/* cmd_import.c - `driftbench import`: per-sample outputs of other tools
 * (lm-evaluation-harness --log_samples, promptfoo -o results.json) stored as
 * runs (import.h), so `compare` pairs them without asking a server. Every
 * file is parsed before anything is written; all runs go into the store in
 * one transaction. Prints one line per run setting the tool's verdicts
 * beside DriftBench's own. A file imported again under the same label is
 * left as it was when its content is the same, refused (exit 2, naming the
 * file) when it changed, replaced with --replace. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/import.h"
#include "driftbench/pipeline.h"

static const char import_usage[] =
    "usage: driftbench import --db STORE [options] FILE...\n"
    "\n"
    "Stores what another tool already ran as DriftBench runs:\n"
    "  lm-evaluation-harness --log_samples files (samples_<task>_<date>.jsonl): one run\n"
    "    per file, labelled <model dir>/<task>; documents matched by doc_id and checked\n"
    "    by content (doc_hash) against the other runs of the task\n"
    "  promptfoo output (promptfoo eval -o results.json): one run per provider,\n"
    "    labelled with the provider's label or id; each (prompt, test) a prompt\n"
    "The tool's per-sample pass/fail is kept as an evaluator (lm_eval:<metric>,\n"
    "promptfoo); math and code answers are scored by DriftBench's evaluators too.\n"
    "Then: driftbench compare --db STORE --baseline A --target B\n"
    "\n"
    "  --label L            label of the next run (repeat: one per run, in order)\n"
    "  --format F           auto (default), lm-eval, promptfoo\n"
    "  --workload W         the runs' workload (math, code, safety, chat, long_context);\n"
    "                       needed when the task does not say (gsm8k: math, humaneval: code)\n"
    "  --metric M           lm-eval: the pass/fail metric (default exact_match, acc, pass@1, ...)\n"
    "  --filter F           lm-eval: the filter whose rows are kept (default the file's first)\n"
    "  --task T             lm-eval: the task (default from the file name)\n"
    "  --model M            the model recorded in the config (default from the file)\n"
    "  --config k=v,...     configuration dimensions (hardware, precision, ...)\n"
    "  --verdict ours|tool  which label compare counts where both exist (default ours)\n"
    "  --partial            allow runs of a task that cover different documents\n"
    "  --replace            a label already imported from other content (a changed\n"
    "                       file) is replaced, in the same transaction; without it\n"
    "                       such a re-import is refused\n"
    "  --unsafe-code-exec   run code answers without isolation when no sandbox works\n"
    "  --python PATH        interpreter for code answers (default /usr/bin/python3)\n"
    "  --jobs N             parallel code evaluations (default: cores)\n"
    "\n"
    "The same file imported again changes nothing.\n"
    "exit: 0 stored, 2 error (nothing stored)\n";

static void print_summary(const drift_import_summary *s) {
    if (s->already) {
        printf("%s: already stored by the same import, left as it was\n", cli_safe(s->label));
        return;
    }
    /* the label and the evaluator's name come from the imported file */
    const char *label = cli_safe(s->label), *ev = cli_safe(s->evaluator), *ours = cli_safe(s->ours_evaluator);
    if (s->replaced) printf("%s: replaced the stored run (--replace)\n", label);
    printf("%s: %zu answers, %zu errors; %s pass %zu/%zu", label, s->answers, s->errors, ev, s->tool_pass,
           s->tool_pass + s->tool_fail);
    if (s->ours_evaluator[0]) {
        printf("; %s pass %zu/%zu", ours, s->ours_pass, s->ours_scored);
        if (s->ours_error) printf(" (%zu not judged)", s->ours_error);
        printf("; agree %zu, %s pass & %s fail %zu, %s fail & %s pass %zu\n", s->agree, ev, ours,
               s->tool_pass_ours_fail, ev, ours, s->tool_fail_ours_pass);
    } else {
        printf("; DriftBench's evaluator: none (%s)\n", s->ours_note[0] ? cli_safe(s->ours_note) : "not computable");
    }
}

static int cmd_import(int argc, char **argv) {
    enum { O_DB = 400, O_LABEL, O_FORMAT, O_WORKLOAD, O_METRIC, O_FILTER, O_TASK, O_MODEL, O_CONFIG, O_VERDICT,
           O_PARTIAL, O_UNSAFE, O_PYTHON, O_JOBS, O_REPLACE, O_HELP };
    static const struct option longopts[] = {
        {"db", required_argument, 0, O_DB},         {"label", required_argument, 0, O_LABEL},
        {"format", required_argument, 0, O_FORMAT}, {"workload", required_argument, 0, O_WORKLOAD},
        {"metric", required_argument, 0, O_METRIC}, {"filter", required_argument, 0, O_FILTER},
        {"task", required_argument, 0, O_TASK},     {"model", required_argument, 0, O_MODEL},
        {"config", required_argument, 0, O_CONFIG}, {"verdict", required_argument, 0, O_VERDICT},
        {"partial", no_argument, 0, O_PARTIAL},     {"unsafe-code-exec", no_argument, 0, O_UNSAFE},
        {"python", required_argument, 0, O_PYTHON}, {"jobs", required_argument, 0, O_JOBS},
        {"replace", no_argument, 0, O_REPLACE},     {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    const char *db = NULL;
    const char **labels = calloc((size_t)argc + 1, sizeof *labels);
    if (!labels) return cli_error("import", "out of memory");
    size_t n_labels = 0;
    drift_import_opts po;
    drift_import_opts_default(&po);
    drift_import_store_opts so;
    drift_import_store_opts_default(&so);
    so.score = drift_import_score; /* our evaluators: the pipeline's scoring */
    long jobs = 0;
    int opt, rc = CLI_EXIT_ERROR;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_DB: db = optarg; break;
        case O_LABEL: labels[n_labels++] = optarg; break;
        case O_FORMAT:
            if (!strcmp(optarg, "auto")) po.format = DRIFT_IMPORT_AUTO;
            else if (!strcmp(optarg, "lm-eval") || !strcmp(optarg, "lm_eval")) po.format = DRIFT_IMPORT_LMEVAL;
            else if (!strcmp(optarg, "promptfoo")) po.format = DRIFT_IMPORT_PROMPTFOO;
            else {
                cli_error("import", "--format: unknown format '%s' (auto, lm-eval, promptfoo)", optarg);
                goto out;
            }
            break;
        case O_WORKLOAD:
            if ((po.workload = drift_workload_parse(optarg)) == DRIFT_WL_UNKNOWN) {
                cli_error("import", "--workload: unknown workload '%s' (math, code, safety, chat, long_context)",
                          optarg);
                goto out;
            }
            break;
        case O_METRIC: po.metric = optarg; break;
        case O_FILTER: po.filter = optarg; break;
        case O_TASK: po.task = optarg; break;
        case O_MODEL: po.model = optarg; break;
        case O_CONFIG: so.config = optarg; break;
        case O_VERDICT:
            if (!strcmp(optarg, "ours")) so.verdict = DRIFT_IMPORT_VERDICT_OURS;
            else if (!strcmp(optarg, "tool")) so.verdict = DRIFT_IMPORT_VERDICT_TOOL;
            else {
                cli_error("import", "--verdict: '%s' is neither ours nor tool", optarg);
                goto out;
            }
            break;
        case O_PARTIAL: so.partial = 1; break;
        case O_REPLACE: so.replace = 1; break;
        case O_UNSAFE: so.unsafe_code_exec = 1; break;
        case O_PYTHON: so.python = optarg; break;
        case O_JOBS:
            if (cli_parse_int("import", "--jobs", optarg, 1, 1024, &jobs)) goto out;
            so.jobs = (int)jobs;
            break;
        case 'h':
        case O_HELP:
            fputs(import_usage, stdout);
            rc = CLI_EXIT_PASS;
            goto out;
        default: cli_error("import", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]); goto out;
        }
    }
    if (!db) {
        cli_error("import", "--db is required (see --help)");
        goto out;
    }
    if (optind >= argc) {
        cli_error("import", "no file to import (see --help)");
        goto out;
    }
    size_t n_files = (size_t)(argc - optind);
    drift_import_set **sets = calloc(n_files, sizeof *sets);
    if (!sets) {
        cli_error("import", "out of memory");
        goto out;
    }
    drift_error err = {0};
    size_t loaded = 0;
    for (; loaded < n_files; loaded++)
        if (drift_import_load(argv[optind + (int)loaded], &po, &sets[loaded], &err)) break;
    if (loaded == n_files) {
        drift_store *st = NULL;
        drift_import_summary *sums = NULL;
        size_t n_sums = 0;
        if (drift_store_open(db, &st, &err) ||
            drift_import_store(st, sets, n_files, labels, n_labels, &so, &sums, &n_sums, &err)) {
            cli_progress_done();
            cli_error_lib("import", &err);
        } else {
            cli_progress_done();
            size_t already = 0;
            for (size_t i = 0; i < n_sums; i++) already += sums[i].already != 0;
            if (!cli_quiet)
                printf("imported %zu run%s into %s%s\n", n_sums - already, n_sums - already == 1 ? "" : "s",
                       cli_safe(drift_store_display(st)),
                       already ? " (the others were there already)" : "");
            for (size_t i = 0; i < n_sums && !cli_quiet; i++) print_summary(&sums[i]);
            rc = fflush(stdout) ? CLI_EXIT_ERROR : CLI_EXIT_PASS;
        }
        free(sums);
        drift_store_close(st);
    } else {
        cli_error_lib("import", &err);
    }
    for (size_t i = 0; i < loaded; i++) drift_import_set_free(sets[i]);
    free(sets);
out:
    free(labels);
    return rc;
}
CLI_COMMAND(import, "import", "store lm-eval --log_samples or promptfoo results as runs", cmd_import)
