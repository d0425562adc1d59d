/* cmd_compare.c - `driftbench compare`: paired flips between two stored runs
 * and the deploy/block verdict (compare's flags that `measure` shares, and
 * the gate's exit code, are compare_flags.c's). `compare --sequential` replays
 * the stored pairs in a seeded random order through the sequential gate
 * (drift_compare_sequential) and reports where each workload would have
 * stopped; its flags (--sequential, --alpha, --seed) are compare's own.
 * So are --evaluator NAME (one evaluator's scores of imported runs) and
 * --kl [--kl-limit N] (teacher-forced token KL of two stacks, embedded or HTTP: the
 * pipeline's step, drift_tokdiv_step_attach, run after the comparison and
 * attached to it before rendering, do_compare). */
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/teacher_forced.h"
#include "pipeline.h"

static const char compare_usage[] =
    "usage: driftbench compare --db STORE --baseline L --target L [options]\n"
    "\n"
    "Pairs the two runs prompt by prompt and reports first the gate's decision,\n"
    "per workload and in all (DEPLOY, BLOCK, INCONCLUSIVE or ERROR: see --decide),\n"
    "then per workload the flip rate with its Wilson 95% CI, both directions,\n"
    "accuracies, net change and the exact McNemar p.\n"
    "\n"
    "  --workload W         only this workload (math, code, safety, chat, long_context)\n";
static const char compare_usage2[] =
    "  --sdr-threshold X    chat answers drift when SDR > X (default 0.30)\n"
    "  --format F           text (default), json, markdown, junit, github, html\n"
    "                       github: ::error/::warning annotations per workload, then\n"
    "                       the Markdown summary; when $GITHUB_STEP_SUMMARY is set,\n"
    "                       the summary is appended to that file as well;\n"
    "                       html: one self-contained page, the decision first\n"
    "  -o FILE              write the report to FILE instead of stdout\n"
    "\n"
    "Flip risk: when the baseline run has logprobs (run --logprobs K), each\n"
    "prompt's flip risk from the baseline's own answer is shown beside its\n"
    "outcome (flip listing: risk and rank; json: risk_by_prompt), and per\n"
    "workload how well it ranked the flips: ROC AUC and precision at the top\n"
    "10% with bootstrap 95% intervals (text, json, markdown).\n"
    "  --no-risk            skip it (compare then reads no answer)\n"
    "\n"
    "  --evaluator NAME     use only this evaluator's scores (default: each answer's\n"
    "                       latest). Imported runs carry two: the tool's own verdict\n"
    "                       (\"lm_eval:exact_match,strict-match\", \"promptfoo\") and\n"
    "                       DriftBench's (\"math\", \"code-pass@1\"); a name a run\n"
    "                       lacks is an error listing the ones it has\n"
    "  --kl                 token-level divergence of the two stacks, teacher-forced:\n"
    "                       the target reads the baseline's answers; per workload the\n"
    "                       mean KL(baseline||target), the share of positions with the\n"
    "                       same top-1 token and where the top-1 tokens first part\n"
    "                       (text, json, markdown). Embedded runs by their logits; an\n"
    "                       HTTP run (api=completions) through its server's top-20\n"
    "                       prompt logprobs (vLLM's prompt_logprobs or echo): a lower\n"
    "                       bound of the KL, the method named; a server that returns\n"
    "                       neither gets one line saying it is not computed\n"
    "  --kl-limit N         with --kl: a seeded sample of N prompts per workload\n"
    "                       (default: all answered prompts)\n"
    "  --models DIR         with --kl: find a run's model file by name in DIR when the\n"
    "                       path it recorded is gone (a store made on another machine)\n"
    "\n"
    "Sequential gate (a replay of the stored pairs):\n"
    "  --sequential         ask the pairs in a seeded random order and stop each\n"
    "                       workload as soon as an anytime-valid interval for its\n"
    "                       flip rate is under its budget (deploy) or over it\n"
    "                       (block); at the suite's end, the fixed-size verdict.\n"
    "                       Reports prompts used, the interval at the stop and the\n"
    "                       verdict (text, json, markdown); workloads without a\n"
    "                       budget are not gated\n"
    "  --alpha A            error rate of each verdict (default 0.05)\n"
    "  --seed S             seed of the order (default 42)\n"
    "\n"
    ;

/* --sequential: the gate's replay of the comparison, rendered. */
static int do_sequential(drift_store *st, const char *base, const char *targ, const cli_compare_args *a,
                         double alpha, uint64_t seed) {
    drift_error err = {0};
    drift_comparison *c = NULL;
    drift_seq_result r;
    char *text = NULL;
    if (a->fmt == DRIFT_FORMAT_JUNIT || a->fmt == DRIFT_FORMAT_GITHUB || a->fmt == DRIFT_FORMAT_HTML)
        return cli_error("compare", "--sequential renders text, json or markdown (not junit, github or html)");
    if (drift_compare_runs(st, base, targ, &a->opts, &c, &err)) return cli_error_lib("compare", &err);
    if (drift_compare_sequential(c, alpha, seed, &r, &err) || drift_seq_render(c, &r, a->fmt, &text, &err)) {
        drift_comparison_free(c);
        return cli_error_lib("compare", &err);
    }
    int rc = cli_write_output("compare", a->out, text) ? CLI_EXIT_ERROR : cli_gate_exit("compare", st, c, r.decision);
    free(text);
    drift_comparison_free(c);
    return rc;
}

/* --format github's summary, appended to $GITHUB_STEP_SUMMARY when it is
 * set. 0, or CLI_EXIT_ERROR after printing. */
static int append_step_summary(const char *summary) {
    const char *path = getenv("GITHUB_STEP_SUMMARY");
    if (!summary || !path || !*path) return 0;
    FILE *f = fopen(path, "a");
    int bad = !f || fputs(summary, f) < 0;
    if (f && fclose(f)) bad = 1;
    if (bad) return cli_error("compare", "$GITHUB_STEP_SUMMARY %s: cannot append the summary", path);
    return 0;
}

/* Load (the comparison and its flips' details, one read transaction),
 * token KL when asked, render (github: the annotations and the summary
 * around it, the summary appended to $GITHUB_STEP_SUMMARY too), write; the
 * gate's exit code. */
static int do_compare(drift_store *st, const char *base, const char *targ, const cli_compare_args *a) {
    drift_error err = {0};
    drift_comparison *c = NULL;
    drift_comparison_details d = {0};
    char *text = NULL, *summary = NULL;
    int rc = CLI_EXIT_ERROR;
    if (drift_comparison_load(st, base, targ, &a->opts, a->fmt, &c, &d, &err) ||
        (a->opts.kl && drift_tokdiv_step_attach(st, c, base, targ, &a->opts, &err)) ||
        (a->fmt == DRIFT_FORMAT_GITHUB ? drift_github_render(c, &d, &text, &summary, &err)
                                       : drift_comparison_render(c, &d, a->fmt, &text, &err)))
        cli_error_lib("compare", &err);
    else if (!cli_write_output("compare", a->out, text) && !append_step_summary(summary))
        rc = cli_gate_exit("compare", st, c, c->decision);
    free(text);
    free(summary);
    drift_comparison_details_clear(&d);
    drift_comparison_free(c);
    return rc;
}

static int cmd_compare(int argc, char **argv) {
    enum { O_BASE = 300, O_SEQ, O_ALPHA, O_SEQSEED, O_NORISK = 320, O_EVAL, O_KL, O_KLLIMIT, O_MODELS };
    static const struct option longopts[] = {
        {"db", required_argument, 0, OPT_DB}, {"baseline", required_argument, 0, O_BASE},
        {"target", required_argument, 0, OPT_TARGET}, COMPARE_LONG_OPTIONS,
        {"sequential", no_argument, 0, O_SEQ}, {"alpha", required_argument, 0, O_ALPHA},
        {"seed", required_argument, 0, O_SEQSEED}, {"no-risk", no_argument, 0, O_NORISK},
        {"evaluator", required_argument, 0, O_EVAL}, {"kl", no_argument, 0, O_KL},
        {"kl-limit", required_argument, 0, O_KLLIMIT}, {"models", required_argument, 0, O_MODELS},
        {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    const char *db = NULL, *base = NULL, *targ = NULL;
    cli_compare_args c;
    cli_compare_args_default(&c);
    drift_error err = {0};
    int opt, sequential = 0, seq_flags = 0, kl_limit = 0;
    double alpha = 0.05;
    long seed = 42;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        int r = cli_parse_compare_option("compare", opt, optarg, &c);
        if (r < 0) return CLI_EXIT_ERROR;
        if (r > 0) continue;
        switch (opt) {
        case OPT_DB: db = optarg; break;
        case O_BASE: base = optarg; break;
        case OPT_TARGET: targ = optarg; break;
        case O_SEQ: sequential = 1; break;
        case O_NORISK: c.opts.risk = 0; break;
        case O_EVAL:
            if (!*optarg) return cli_error("compare", "--evaluator needs a name (see --help)");
            c.opts.evaluator = optarg;
            break;
        case O_KL: c.opts.kl = 1; break;
        case O_MODELS:
            c.opts.kl_models_dir = optarg;
            kl_limit = 1;
            break;
        case O_KLLIMIT: {
            long v;
            if (cli_parse_int("compare", "--kl-limit", optarg, 1, 100000000L, &v)) return CLI_EXIT_ERROR;
            c.opts.kl_limit = (size_t)v;
            kl_limit = 1;
            break;
        }
        case O_ALPHA:
            if (cli_parse_double("compare", "--alpha", optarg, 1e-9, 0.5, &alpha)) return CLI_EXIT_ERROR;
            seq_flags = 1;
            break;
        case O_SEQSEED:
            if (cli_parse_int("compare", "--seed", optarg, 0, LONG_MAX, &seed)) return CLI_EXIT_ERROR;
            seq_flags = 1;
            break;
        case 'h':
        case OPT_HELP: 
            fputs(compare_usage, stdout);
            fputs(cli_gate_usage, stdout);
            fputs(compare_usage2, stdout);
            fputs(cli_gate_exit_usage, stdout);
            return 0;
        default: return cli_error("compare", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("compare", "unexpected argument '%s'", argv[optind]);
    if (!db || !base || !targ) return cli_error("compare", "--db, --baseline and --target are required (see --help)");
    if (seq_flags && !sequential) return cli_error("compare", "--alpha and --seed go with --sequential");
    if (kl_limit && !c.opts.kl) return cli_error("compare", "--kl-limit and --models go with --kl");
    if (c.opts.kl && (sequential || c.fmt == DRIFT_FORMAT_GITHUB || c.fmt == DRIFT_FORMAT_JUNIT ||
                      c.fmt == DRIFT_FORMAT_HTML))
        return cli_error("compare", "--kl shows in text, json and markdown (not with --sequential, junit, github or html)");
    drift_store *st = NULL;
    if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("compare", &err);
    int rc = sequential ? do_sequential(st, base, targ, &c, alpha, (uint64_t)seed) : do_compare(st, base, targ, &c);
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(compare, "compare", "paired flips between two runs, with CIs and a verdict", cmd_compare)
