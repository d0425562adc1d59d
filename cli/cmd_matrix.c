/* cmd_matrix.c - `driftbench matrix --spec F --db F [--shard I/N]`: runs the
 * configurations of a matrix spec (each a labelled run; a run that is
 * complete is skipped by the store's resume logic), then scores them.
 * The runner (cli_matrix_run) is shared with `lab`. */
#include "cmd_matrix.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"
#include "util/util.h"

void cli_matrix_opts_default(cli_matrix_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_index = o->shard_count = 1;
    drift_score_opts_default(&o->score);
}

int cli_matrix_run(const char *cmd, drift_store *st, const drift_matrix_spec *spec, const cli_matrix_opts *o,
                   cli_matrix_stats *stats) {
    cli_matrix_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (spec->n_suites > CLI_MAX_SUITES) return cli_error(cmd, "at most %d suites", CLI_MAX_SUITES);
    size_t mine = 0;
    for (size_t i = 0; i < spec->n_configs; i++) mine += (size_t)drift_matrix_in_shard(i, o->shard_index, o->shard_count);
    if (!cli_quiet)
        fprintf(stderr, "%s: %zu of %zu configurations in shard %d/%d, %zu suite(s)%s\n", cmd, mine, spec->n_configs,
                o->shard_index, o->shard_count, spec->n_suites, spec->limit ? " (limited)" : "");
    int saved_quiet = cli_quiet;
    size_t k = 0;
    drift_score_summary total;
    memset(&total, 0, sizeof total);
    for (size_t i = 0; i < spec->n_configs; i++) {
        if (!drift_matrix_in_shard(i, o->shard_index, o->shard_count)) continue;
        const drift_matrix_config *c = &spec->configs[i];
        k++;
        cli_run_args a;
        cli_run_args_default(&a);
        a.label = c->label;
        a.target = c->target;
        for (size_t s = 0; s < spec->n_suites; s++) a.suites[a.n_suites++] = spec->suites[s];
        char *dims = drift_matrix_config_dims(c);
        a.config = dims;
        a.limit = spec->limit;
        a.replicates = spec->replicates;
        a.params.temperature = spec->temperature;
        a.params.top_p = spec->top_p;
        a.params.seed = spec->seed;
        a.params.max_tokens = spec->max_tokens;
        if (o->concurrency > 0) a.topts.concurrency = o->concurrency;
        double t0 = drift_now_ms();
        /* a finished run is complete: its failed requests (e.g. a prompt
         * longer than the model's context) would fail the same way again;
         * `driftbench run` with the same label retries them */
        drift_run_info prev;
        memset(&prev, 0, sizeof prev);
        drift_error gerr = {0};
        int finished = drift_store_run_get(st, c->label, &prev, &gerr) == DRIFT_OK && prev.finished_at;
        drift_run_info_free(&prev);
        if (o->progress_lines) cli_quiet = 1;
        int rc = finished ? CLI_EXIT_PASS : cli_do_run(cmd, st, &a);
        cli_quiet = saved_quiet;
        if (finished && !cli_quiet && !o->progress_lines) fprintf(stderr, "run '%s': complete, skipped\n", c->label);
        double t1 = drift_now_ms();
        stats->run_ms += t1 - t0;
        stats->configs++;
        free(dims);
        if (rc != CLI_EXIT_PASS) return rc;
        drift_score_summary sum;
        memset(&sum, 0, sizeof sum);
        drift_error err = {0};
        drift_score_opts so = o->score;
        if (drift_score_run(st, c->label, &so, &sum, &err)) return cli_error_lib(cmd, &err);
        stats->score_ms += drift_now_ms() - t1;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            total.scored[w] += sum.scored[w];
            total.already[w] += sum.already[w];
            total.eval_errors[w] += sum.eval_errors[w];
            total.not_computable[w] += sum.not_computable[w];
            if (!total.reason[w][0] && sum.reason[w][0]) memcpy(total.reason[w], sum.reason[w], sizeof total.reason[w]);
        }
        if (o->progress_lines && !cli_quiet)
            fprintf(stderr, "  [%zu/%zu] %-40s %6.1f s\n", k, mine, c->label, (drift_now_ms() - t0) / 1000.0);
        if (cli_interrupted) return cli_error(cmd, "interrupted; run the same command again to resume");
    }
    stats->score = total;
    if (!cli_quiet)
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            size_t any = total.scored[w] + total.already[w] + total.eval_errors[w] + total.not_computable[w];
            if (!any) continue;
            fprintf(stderr, "score %-12s %6zu scored, %6zu already, %4zu evaluator errors", drift_workload_name(w),
                    total.scored[w], total.already[w], total.eval_errors[w]);
            if (total.not_computable[w]) fprintf(stderr, ", %zu NOT COMPUTABLE: %s", total.not_computable[w], total.reason[w]);
            fputc('\n', stderr);
        }
    return CLI_EXIT_PASS;
}

static const char matrix_usage[] =
    "usage: driftbench matrix --spec FILE --db FILE [--shard I/N] [options]\n"
    "\n"
    "Runs every configuration of the matrix spec (JSON; see tests/data/matrix/example.json)\n"
    "as a labelled run in the store, then scores the answers. Runs already complete are\n"
    "skipped (their failed requests are not retried: use `driftbench run` with the label)\n"
    "and interrupted ones resume. --shard I/N runs configurations whose index\n"
    "(0-based, spec order) is I-1 modulo N; join shard stores with `driftbench merge`.\n"
    "\n"
    "  --list                   print the configurations (label, target) and exit\n"
    "  --concurrency N          batch size / in-flight requests per target\n"
    "  --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N   (as `score`)\n";

static int cmd_matrix(int argc, char **argv) {
    enum { O_SPEC = 500, O_DB, O_SHARD, O_LIST, O_CONC, O_GUARD, O_EMB, O_UNSAFE, O_JOBS, O_HELP };
    static const struct option longopts[] = {
        {"spec", required_argument, 0, O_SPEC}, {"db", required_argument, 0, O_DB},
        {"shard", required_argument, 0, O_SHARD}, {"list", no_argument, 0, O_LIST},
        {"concurrency", required_argument, 0, O_CONC}, {"guard", required_argument, 0, O_GUARD},
        {"embedder", required_argument, 0, O_EMB}, {"unsafe-code-exec", no_argument, 0, O_UNSAFE},
        {"jobs", required_argument, 0, O_JOBS}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    const char *spec_path = NULL, *db = NULL;
    int list = 0;
    cli_matrix_opts mo;
    cli_matrix_opts_default(&mo);
    drift_error err = {0};
    long v;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_SPEC: spec_path = optarg; break;
        case O_DB: db = optarg; break;
        case O_SHARD:
            if (drift_matrix_shard_parse(optarg, &mo.shard_index, &mo.shard_count, &err)) return cli_error_lib("matrix", &err);
            break;
        case O_LIST: list = 1; break;
        case O_CONC:
            if (cli_parse_int("matrix", "--concurrency", optarg, 1, 4096, &v)) return CLI_EXIT_ERROR;
            mo.concurrency = (int)v;
            break;
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
    if (!spec_path || (!db && !list)) return cli_error("matrix", "--spec and --db are required (see --help)");
    drift_matrix_spec *spec = NULL;
    if (drift_matrix_spec_load(spec_path, &spec, &err)) return cli_error_lib("matrix", &err);
    if (list) {
        for (size_t i = 0; i < spec->n_configs; i++)
            if (drift_matrix_in_shard(i, mo.shard_index, mo.shard_count))
                printf("%zu\t%s\t%s\n", i, spec->configs[i].label, spec->configs[i].target);
        drift_matrix_spec_free(spec);
        return 0;
    }
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) {
        drift_matrix_spec_free(spec);
        return cli_error_lib("matrix", &err);
    }
    cli_install_signal_handlers();
    int rc = cli_matrix_run("matrix", st, spec, &mo, NULL);
    if (rc == CLI_EXIT_PASS && !cli_quiet)
        fprintf(stderr, "matrix: store %s; next: driftbench table --db %s --baseline '%s'\n", db, db, spec->baseline);
    drift_store_close(st);
    drift_matrix_spec_free(spec);
    return rc;
}
CLI_COMMAND(matrix, "matrix", "run a configuration matrix (spec JSON), resumable, in shards", cmd_matrix)
