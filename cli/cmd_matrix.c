/* cmd_matrix.c - `driftbench matrix --spec F --db F [--shard I/N]`: runs the
 * configurations of a matrix spec (each a labelled run, its server started
 * and stopped around it when the spec gives one; a run that is complete is
 * skipped), then scores them: the library's matrix stage
 * (drift_matrix_run) with the CLI's printing (matrix_print.c), which `lab`
 * shares. A configuration that fails entirely (every request failed, or it
 * could not start: its server, its target) does not stop the others
 * (all_failed_ok): once they are done, matrix names each one and why, and
 * exits 2.
 *
 * Job arrays: without --shard, the shard comes from the scheduler's
 * environment (the library's drift_matrix_shard_from_env: Slurm's array
 * task, or a Kubernetes Indexed Job with --shard-count N or
 * DRIFT_SHARD_COUNT), and stderr says which. Values that are not numbers,
 * out of range or inconsistent are exit 2 naming the variable. A task the
 * scheduler retries runs the same shard into the same store: complete runs
 * are skipped, an interrupted one resumes. */
#include "cmd_matrix.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config_file.h"
#include "pipeline.h"

/* The configurations that failed entirely (every request failed, or it
 * could not start), each with why; returns CLI_EXIT_ERROR. Printed
 * even with --quiet: they make the exit code. */
static int print_failed_configs(const drift_matrix_spec *spec, const cli_matrix_stats *s) {
    cli_error("matrix", "%zu of %zu configurations failed entirely (%sthe same command again asks them again):",
              s->all_failed, s->in_shard, s->all_failed < s->in_shard ? "the others are done; " : "");
    char why[1024], named[300];
    for (size_t k = 0; k < s->all_failed && k < DRIFT_MATRIX_FAILURES_MAX; k++) {
        const drift_matrix_failure *f = &s->failed[k];
        const drift_matrix_config *c = &spec->configs[f->config_index];
        const char *msg = f->msg;
        if (f->unstarted || f->main.cause == DRIFT_FAIL_NONE) {
            /* the server's message names the configuration already */
            int n = snprintf(named, sizeof named, "configuration '%s': ", c->label);
            if (n > 0 && (size_t)n < sizeof named && !strncmp(msg, named, (size_t)n)) msg += n;
        } else {
            msg = cli_all_failed_why(c->target, &f->main, f->main_only, why, sizeof why);
        }
        fprintf(stderr, "  configuration '%s': %s\n", cli_safe(c->label), cli_safe(msg)); /* msg: a server's words */
    }
    if (s->all_failed > DRIFT_MATRIX_FAILURES_MAX)
        fprintf(stderr, "  and %zu more\n", s->all_failed - DRIFT_MATRIX_FAILURES_MAX);
    return CLI_EXIT_ERROR;
}

static const char matrix_usage[] =
    "usage: driftbench matrix --spec FILE --db STORE [--shard I/N] [options]\n"
    "       driftbench matrix -c matrix.yaml [--shard I/N] [options]\n"
    "\n"
    "Runs every configuration of the matrix spec (JSON, or YAML for a .yaml/.yml name;\n"
    "see tests/data/matrix/example.json and docs/config.md)\n"
    "as a labelled run in the store, then scores the answers. Runs already complete are\n"
    "skipped (their failed requests are not retried: use `driftbench run` with the label)\n"
    "and interrupted ones resume. --shard I/N runs configurations whose index\n"
    "(0-based, spec order) is I-1 modulo N; join shard stores with `driftbench merge`.\n"
    "Without --shard, a job array's task picks its shard from the environment, and\n"
    "says which on stderr: Slurm (SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT or\n"
    "SLURM_ARRAY_TASK_MIN/MAX/STEP: shard (ID-MIN)/STEP+1 of the array's tasks) or a\n"
    "Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with the count from --shard-count N\n"
    "or DRIFT_SHARD_COUNT). A retried task resumes its shard (give each its own --db).\n"
    "A configuration with a \"server\" has it started (its command, {port} = a free port),\n"
    "waited for (GET /health until 200) and stopped after its run; configurations in a\n"
    "row with the same command share one. A server that exits mid-run stops the matrix\n"
    "(exit 2, with the command and the end of its output); running the same command\n"
    "again restarts it and asks only what is missing.\n"
    "A configuration that fails entirely (every request failed: a server down, a wrong\n"
    "URL or model name; or it could not start: its server never started or got healthy,\n"
    "its target did not open) does not stop the others: once they are done, matrix\n"
    "exits 2 naming each failed configuration and why. The same command again asks a\n"
    "run whose every request failed again.\n"
    "\n"
    "  -c, --config FILE        a matrix file (docs/config.md): the spec's keys plus store,\n"
    "                           parallel, no_score, evaluators, requests; flags override it\n"
    "  --list                   print the configurations (label, target[, server command]) and exit\n"
    "  --shard-count N          the number of shards of a Kubernetes Indexed Job (its completions)\n"
    "  --concurrency N          batch size / in-flight requests per target\n"
    "  --parallel N             configurations run side by side (default 1), each with its\n"
    "                           own store connection and server; answers do not depend on N\n"
    "  --no-score               store the answers only; score them later (`driftbench score`),\n"
    "                           e.g. on a machine with the code sandbox\n"
    "  --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N   (as `score`)\n";

/* *cfg: the config file (-c), *held: the spec; both freed by the caller. */
static int matrix_cmd(int argc, char **argv, drift_config **cfg, drift_matrix_spec **held) {
    enum { O_SPEC = 500, O_DB, O_SHARD, O_LIST, O_CONC, O_PAR, O_NOSCORE, O_GUARD, O_EMB, O_UNSAFE, O_JOBS, O_HELP,
           O_SHARDN, O_CFGFILE };
    static const struct option longopts[] = {
        {"spec", required_argument, 0, O_SPEC}, {"db", required_argument, 0, O_DB},
        {"shard", required_argument, 0, O_SHARD}, {"list", no_argument, 0, O_LIST},
        {"concurrency", required_argument, 0, O_CONC}, {"parallel", required_argument, 0, O_PAR},
        {"no-score", no_argument, 0, O_NOSCORE}, {"guard", required_argument, 0, O_GUARD},
        {"embedder", required_argument, 0, O_EMB}, {"unsafe-code-exec", no_argument, 0, O_UNSAFE},
        {"jobs", required_argument, 0, O_JOBS}, {"help", no_argument, 0, O_HELP},
        {"shard-count", required_argument, 0, O_SHARDN}, {"config", required_argument, 0, O_CFGFILE}, {0, 0, 0, 0}};
    const char *spec_path = NULL, *db = NULL;
    int list = 0, shard_given = 0;
    long shard_count = 0;
    char shard_said[256];
    cli_matrix_opts mo;
    cli_matrix_opts_default(&mo);
    drift_error err = {0};
    long v;
    int opt;
    drift_matrix_spec *spec = NULL;
    const char *cfg_path = cli_config_path(argc, argv, "hc:", longopts, O_CFGFILE);
    if (cfg_path && cli_matrix_config(cfg_path, cfg, held, &mo, &db)) return CLI_EXIT_ERROR; /* flags override it */
    spec = *held;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hc:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
        case O_CFGFILE: break; /* read above */
        case O_SPEC: spec_path = optarg; break;
        case O_DB: db = optarg; break;
        case O_SHARD:
            if (drift_matrix_shard_parse(optarg, &mo.shard_index, &mo.shard_count, &err)) return cli_error_lib("matrix", &err);
            shard_given = 1;
            break;
        case O_SHARDN:
            if (cli_parse_int("matrix", "--shard-count", optarg, 1, DRIFT_MATRIX_SHARD_MAX, &shard_count)) return CLI_EXIT_ERROR;
            break;
        case O_LIST: list = 1; break;
        case O_CONC:
            if (cli_parse_int("matrix", "--concurrency", optarg, 1, 4096, &v)) return CLI_EXIT_ERROR;
            mo.concurrency = (int)v;
            break;
        case O_PAR:
            if (cli_parse_int("matrix", "--parallel", optarg, 1, 256, &v)) return CLI_EXIT_ERROR;
            mo.jobs = (int)v;
            break;
        case O_NOSCORE: mo.no_score = 1; break;
        case O_GUARD: mo.score.guard_spec = optarg; break;
        case O_EMB: mo.score.embedder_spec = optarg; break;
        case O_UNSAFE: mo.score.unsafe_code_exec = 1; break;
        case O_JOBS:
            if (cli_parse_int("matrix", "--jobs", optarg, 0, 1024, &v)) return CLI_EXIT_ERROR;
            mo.score.jobs = (int)v;
            break;
        case 'h':
        case O_HELP: fputs(matrix_usage, stdout); return 0;
        default: return cli_error("matrix", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("matrix", "unexpected argument '%s'", argv[optind]);
    if (spec && spec_path) return cli_error("matrix", "--spec and -c: give one (a matrix file holds the spec)");
    if ((!spec_path && !spec) || (!db && !list)) return cli_error("matrix", "--spec and --db are required (see --help)");
    if (shard_given && shard_count) return cli_error("matrix", "--shard and --shard-count: give one");
    if (!shard_given) {
        if (drift_matrix_shard_from_env(NULL, shard_count, &mo.shard_index, &mo.shard_count, shard_said,
                                        sizeof shard_said, &err))
            return cli_error("matrix", "%s", err.msg);
        if (shard_said[0] && !cli_quiet)
            fprintf(stderr, "matrix: shard %d/%d from %s\n", mo.shard_index, mo.shard_count, shard_said);
    }
    if (!spec && drift_matrix_spec_load(spec_path, held, &err)) return cli_error_lib("matrix", &err);
    spec = *held;
    if (list) {
        for (size_t i = 0; i < spec->n_configs; i++)
            if (drift_matrix_in_shard(i, mo.shard_index, mo.shard_count)) {
                char *target = drift_redact(spec->configs[i].target); /* never a password on the screen */
                printf("%zu\t%s\t%s%s%s\n", i, cli_safe(spec->configs[i].label),
                       cli_safe(target ? target : "(target withheld)"), spec->configs[i].server.start ? "\t" : "",
                       spec->configs[i].server.start ? cli_safe(spec->configs[i].server.start) : "");
                free(target);
            }
        return 0;
    }
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("matrix", &err);
    cli_install_signal_handlers();
    mo.all_failed_ok = 1; /* a configuration that failed entirely is named at the end, after the others */
    cli_matrix_stats stats;
    int rc = cli_matrix_run("matrix", st, spec, &mo, &stats);
    if (rc == CLI_EXIT_PASS && stats.all_failed) rc = print_failed_configs(spec, &stats);
    if (rc == CLI_EXIT_PASS && !cli_quiet)
        fprintf(stderr, "matrix: store %s; next: driftbench table --db '%s' --baseline '%s'\n",
                cli_safe(drift_store_display(st)), cli_safe(drift_store_display(st)), cli_safe(spec->baseline));
    drift_store_close(st);
    return rc;
}

static int cmd_matrix(int argc, char **argv) {
    drift_config *cfg = NULL;
    drift_matrix_spec *spec = NULL;
    int rc = matrix_cmd(argc, argv, &cfg, &spec);
    drift_matrix_spec_free(spec);
    drift_config_free(cfg);
    return rc;
}
CLI_COMMAND(matrix, "matrix", "run a configuration matrix (spec JSON), resumable, in shards", cmd_matrix)
