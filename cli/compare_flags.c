/* compare_flags.c - compare's flags, parsed for every command that takes
 * them (`compare`, `measure`: cli_parse_compare_option), their --help
 * lines, and the gate's exit code with what a workload without evidence
 * lacks (cli_gate_exit; pipeline.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"

/* The gate's options and exit codes, in compare's and measure's --help. */
const char cli_gate_usage[] =
    "  --budget W=PCT,...   drift budgets in percent; W=none leaves W out of the gate\n"
    "                       (defaults: safety=1, code=0.5, math=2, long_context=2, chat=5)\n"
    "  --decide RULE        interval (default): per workload, DEPLOY when the exact 95%\n"
    "                       interval of the flip rate is within the budget, BLOCK when it\n"
    "                       is over, INCONCLUSIVE when it straddles (with how many more\n"
    "                       prompts would likely decide); point: the flip rate alone\n"
    "  --max-left-out PCT   block a workload with over PCT% of its pairs left out by\n"
    "                       request or evaluator errors or unscored answers (default 5)\n";

/* The gate's exit codes, closing compare's and measure's --help. */
const char cli_gate_exit_usage[] =
    "exit: 0 deploy (or no workload gated), 1 block, 2 error (bad input, or a gated\n"
    "workload without a single scored pair), 3 inconclusive (more prompts needed)\n";

/* See pipeline.h. */
int cli_gate_exit(const char *cmd, drift_store *st, const drift_comparison *c, drift_decision d) {
    if (d == DRIFT_DECISION_NO_EVIDENCE && c) {
        const char *db = st ? drift_store_display(st) : "STORE";
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            const drift_wl_result *w = &c->wl[k];
            if (!c->present[k] || w->decision != DRIFT_DECISION_NO_EVIDENCE) continue;
            const char *name = drift_workload_name((drift_workload)k);
            switch (w->reason) {
            case DRIFT_REASON_UNSCORED:
                cli_error(cmd, "%s: no scored pair: the answers of its %ld pairs were never scored; run `driftbench score --db %s` "
                               "(or leave it out of the gate with --budget %s=none)",
                          name, w->unscored, db, name);
                break;
            case DRIFT_REASON_NO_EMBEDDER:
                cli_error(cmd, "%s: no scored pair: chat answers have no embeddings; run `driftbench score --db %s "
                               "--embedder URL|embedded:MODEL.gguf` (or --budget chat=none)",
                          name, db);
                break;
            case DRIFT_REASON_ERRORS:
                cli_error(cmd, "%s: no scored pair: every pair has a failed request or evaluator error (baseline %ld, "
                               "target %ld); see the failures `driftbench run` printed, then run that label again "
                               "to retry them",
                          name, w->errors_baseline, w->errors_target);
                break;
            default:
                cli_error(cmd, "%s: no scored pair: %ld pairs with errors, %ld never scored; run `driftbench score "
                               "--db %s` and retry the failed run",
                          name, w->errors, w->unscored, db);
                break;
            }
        }
    }
    return drift_decision_exit_code(d);
}

void cli_compare_args_default(cli_compare_args *c) {
    memset(c, 0, sizeof *c);
    drift_compare_opts_default(&c->opts);
    c->fmt = DRIFT_FORMAT_TEXT;
}

int cli_parse_compare_option(const char *cmd, int opt, const char *arg, cli_compare_args *c) {
    drift_error err = {0};
    switch (opt) {
    case OPT_WORKLOAD:
        c->opts.only_workload = drift_workload_parse(arg);
        if (c->opts.only_workload == DRIFT_WL_UNKNOWN)
            return cli_error(cmd, "--workload: unknown workload '%s' (math, code, safety, chat, long_context)", arg), -1;
        return 1;
    case OPT_BUDGET:
        if (drift_compare_parse_budgets(&c->opts, arg, &err)) return cli_error_lib(cmd, &err), -1;
        return 1;
    case OPT_SDR:
        if (cli_parse_double(cmd, "--sdr-threshold", arg, 0, 2, &c->opts.sdr_threshold)) return -1;
        return 1;
    case OPT_FORMAT:
        if (drift_format_parse(arg, &c->fmt, &err)) return cli_error_lib(cmd, &err), -1;
        return 1;
    case OPT_DECIDE:
        if (!strcmp(arg, "interval")) c->opts.rule = DRIFT_DECIDE_INTERVAL;
        else if (!strcmp(arg, "point")) c->opts.rule = DRIFT_DECIDE_POINT;
        else return cli_error(cmd, "--decide: unknown rule '%s' (interval, point)", arg), -1;
        return 1;
    case OPT_MAX_LEFT_OUT: {
        double pct;
        if (cli_parse_double(cmd, "--max-left-out", arg, 0, 100, &pct)) return -1;
        c->opts.max_left_out = pct / 100.0;
        return 1;
    }
    case 'o': c->out = arg; return 1;
    }
    return 0;
}
