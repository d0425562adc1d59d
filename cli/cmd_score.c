/* cmd_score.c - `driftbench score`: judge stored answers with each
 * workload's evaluator. The summary (cli_print_score_summary) names the
 * isolation that ran code answers ("score: code sandbox: ..."); one weaker
 * than bubblewrap is a warning (even with --quiet). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"

static const char score_usage[] =
    "usage: driftbench score --db STORE [--label L] [options]\n"
    "\n"
    "Scores every stored answer that has no score yet (all runs, or run L):\n"
    "math by the final number, code by running its tests in a sandbox, safety\n"
    "by a guard model, chat by embeddings (SDR is computed at compare time),\n"
    "long-context by token F1. Request errors are not scored (`run` asks them\n"
    "again); an evaluator that cannot judge records an error, never a fail, and\n"
    "the next score retries it. The code sandbox in use is named on stderr.\n"
    "\n"
    "  --guard SPEC         LlamaGuard-3 endpoint, e.g. http://h:p/v1?model=llama-guard-3\n"
    "  --embedder SPEC      /v1/embeddings endpoint for chat answers\n"
    "  --f1-threshold X     long-context answers with F1 >= X count as correct (default 0.5)\n"
    "  --python PATH        interpreter for code (default /usr/bin/python3)\n"
    "  --jobs N             parallel evaluations (default: cores)\n"
    "  --unsafe-code-exec   run code even where no sandbox isolation works\n"
    "  --rescore            recompute existing scores\n"
    "\n"
    "Progress goes to stderr: a bar on a terminal, else a line every DRIFT_PROGRESS_SECS\n"
    "seconds (default 10; 0: none) and a final one; -q none.\n";

static int cmd_score(int argc, char **argv) {
    enum { O_DB = 300, O_LABEL, O_GUARD, O_EMB, O_F1, O_PY, O_JOBS, O_UNSAFE, O_RESCORE, O_HELP };
    static const struct option longopts[] = {
        {"db", required_argument, 0, O_DB}, {"label", required_argument, 0, O_LABEL},
        {"guard", required_argument, 0, O_GUARD}, {"embedder", required_argument, 0, O_EMB},
        {"f1-threshold", required_argument, 0, O_F1}, {"python", required_argument, 0, O_PY},
        {"jobs", required_argument, 0, O_JOBS}, {"unsafe-code-exec", no_argument, 0, O_UNSAFE},
        {"rescore", no_argument, 0, O_RESCORE}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    const char *db = NULL, *label = NULL;
    drift_score_opts o;
    drift_score_opts_default(&o);
    int opt;
    long v;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_DB: db = optarg; break;
        case O_LABEL: label = optarg; break;
        case O_GUARD: o.guard_spec = optarg; break;
        case O_EMB: o.embedder_spec = optarg; break;
        case O_F1:
            if (cli_parse_double("score", "--f1-threshold", optarg, 0, 1, &o.long_f1_threshold)) return CLI_EXIT_ERROR;
            break;
        case O_PY: o.python = optarg; break;
        case O_JOBS:
            if (cli_parse_int("score", "--jobs", optarg, 0, 1024, &v)) return CLI_EXIT_ERROR;
            o.jobs = (int)v;
            break;
        case O_UNSAFE: o.unsafe_code_exec = 1; break;
        case O_RESCORE: o.rescore = 1; break;
        case 'h':
        case O_HELP: fputs(score_usage, stdout); return 0;
        default: return cli_error("score", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("score", "unexpected argument '%s'", argv[optind]);
    if (!db) return cli_error("score", "--db is required (see --help)");
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("score", &err);
    cli_install_signal_handlers(); /* Ctrl-C: stop, keep what was judged, exit 2 */
    int rc = cli_do_score("score", st, label, &o);
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(score, "score", "judge stored answers with each workload's evaluator", cmd_score)
