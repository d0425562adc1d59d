/* cmd_pri.c - `driftbench pri fit|eval|predict`: the Portability Risk Index.
 *
 *   pri eval    honest accuracy of the PRI on a flip table: random 80/20
 *               split, 5-fold CV, held-out level of every dimension (the
 *               paper's four beside its figures), ablations, importance.
 *   pri fit     fits on the whole table and saves the model (JSON).
 *   pri predict predicted flip rate of one configuration, an interval from
 *               out-of-fold residuals, a risk level and the advice.
 * Risk levels on the predicted flip rate: low < 1%, medium 1-5%, high >= 5%.
 * The results are rendered by pri_render.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "driftbench/analysis.h"
#include "driftbench/report.h"

static const char *const CMD = "pri";

static void usage(FILE *f) {
    fprintf(f,
            "usage: driftbench pri eval    --table FILE [--format text|json] [-o FILE] [model options]\n"
            "       driftbench pri fit     --table FILE -o pri.json [model options] [--baseline-hardware H]\n"
            "                              [--baseline-precision P] [--baseline-framework F]\n"
            "                              (stored for advice; default h100/fp16/vllm when present, else\n"
            "                              the most common hardware, the widest format, framework ref)\n"
            "       driftbench pri predict --pri pri.json --model M --hardware H --precision P\n"
            "                              --framework F --workload W [--descriptor NAME=V ...]\n"
            "                              [--baseline-model M]\n"
            "                              [--baseline-hardware H] [--baseline-precision P]\n"
            "                              [--baseline-framework F] [--format text|json]\n"
            "model options:\n"
            "  --descriptors      add descriptor features (format bits, hw generation, model size, MoE)\n"
            "  --no-interactions  one-hot features only (the paper's 20)\n"
            "  --no-tune          fixed hyper-parameters (depth 4, eta 0.1, 200 trees) instead of inner CV\n"
            "                     (tuned: depth 3 or 5, eta 0.3, trees by early stopping on 3 x 3 inner folds)\n"
            "  --grouped-cv       (eval) tune held-out-level models with folds that hold out whole levels\n"
            "  --folds K          inner CV folds (3)   --cv-repeats R  repeats of them (3)   --seed N (42)\n"
            "  --descriptor-table FILE  (eval, fit) numeric descriptors per configuration (CSV:\n"
            "                     experiment_id,NAME,...): what each level is (bits, block size, accumulator\n"
            "                     ...), so that an unseen level is predicted from what it is; features d:NAME.\n"
            "                     predict then takes the configuration's values (--descriptor NAME=V, each\n"
            "                     name the model uses) and accepts levels the model never saw\n"
            "  --described-only D1,D2   no one-hot for these dimensions: known by their descriptors alone\n"
            "eval options:\n"
            "  --min-levels N     hold out levels only of dimensions with at least N levels (3)\n"
            "  --bootstrap B      configuration-bootstrap replicates of each held-out R^2 interval (2000)\n"
            "  --ablation-repeats R  repeats of the 5-fold CV that scores the ablations (3)\n"
            "  --threads N        evaluations run side by side, one thread each (default: the cores);\n"
            "                     the results do not depend on it\n"
            "Risk: low < 1%%, medium 1-5%%, high >= 5%% predicted flip rate. Advice: a change of hardware\n"
            "and/or precision only is systematic (predict, then confirm on ~100 prompts); a change of\n"
            "framework or model, alone (idiosyncratic) or with others (combined), must be measured.\n"
            "Exit: 0 ok, 2 bad input (unknown level: the message lists the known ones).\n");
}

#define MAX_QDESC 64

typedef struct popts {
    const char *table, *pri, *out, *format, *desc_path;
    size_t n_qdesc;                  /* predict --descriptor NAME=VALUE */
    char qdesc_name[MAX_QDESC][64];
    const char *qdesc_names[MAX_QDESC];
    double qdesc_value[MAX_QDESC];
    const char *q[5], *bq[5];
    drift_pri_options o;
} popts;

static const char *const qflags[5] = {"--model", "--hardware", "--precision", "--framework", "--workload"};
static const char *const bflags[5] = {"--baseline-model", "--baseline-hardware", "--baseline-precision",
                                      "--baseline-framework", "--baseline-workload"};

/* "precision,hardware" -> bits of those dimensions */
static int parse_dims(const char *v, unsigned *bits) {
    *bits = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int d = 0;
        while (d < DRIFT_DIM_CONFIG_COUNT && strcmp(tok, drift_dim_names[d])) d++;
        if (d == DRIFT_DIM_CONFIG_COUNT)
            return cli_error(CMD, "--described-only '%s': use model, hardware, precision, framework", tok), -1;
        *bits |= 1u << d;
    }
    return 0;
}

static int parse(int argc, char **argv, popts *p) {
    memset(p, 0, sizeof *p);
    drift_pri_options_init(&p->o);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    p->o.nthread = cores > 1 ? (int)(cores < 64 ? cores : 64) : 1;
    p->format = "text";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--descriptors")) { p->o.descriptors = 1; continue; }
        if (!strcmp(a, "--no-interactions")) { p->o.interactions = 0; continue; }
        if (!strcmp(a, "--no-tune")) { p->o.tune = 0; continue; }
        if (!strcmp(a, "--grouped-cv")) { p->o.grouped_cv = 1; continue; }
        if (i + 1 >= argc) return cli_error(CMD, "%s needs a value (or is unknown; see --help)", a), -1;
        const char *v = argv[++i];
        long n;
        if (!strcmp(a, "--table")) p->table = v;
        else if (!strcmp(a, "--pri")) p->pri = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) p->out = v;
        else if (!strcmp(a, "--format")) p->format = v;
        else if (!strcmp(a, "--folds")) {
            if (cli_parse_int(CMD, a, v, 2, 20, &n)) return -1;
            p->o.cv_folds = (int)n;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(CMD, a, v, 0, 2147483647L, &n)) return -1;
            p->o.seed = (unsigned)n;
        } else if (!strcmp(a, "--cv-repeats")) {
            if (cli_parse_int(CMD, a, v, 1, 10, &n)) return -1;
            p->o.cv_repeats = (int)n;
        } else if (!strcmp(a, "--min-levels")) {
            if (cli_parse_int(CMD, a, v, 2, 1000, &n)) return -1;
            p->o.min_levels = (int)n;
        } else if (!strcmp(a, "--bootstrap")) {
            if (cli_parse_int(CMD, a, v, 0, 1000000, &n)) return -1;
            p->o.bootstrap = (int)n;
        } else if (!strcmp(a, "--ablation-repeats")) {
            if (cli_parse_int(CMD, a, v, 1, 20, &n)) return -1;
            p->o.ablation_repeats = (int)n;
        } else if (!strcmp(a, "--descriptor")) {
            const char *eq = strchr(v, '=');
            char *end = NULL;
            double x = eq ? strtod(eq + 1, &end) : 0;
            if (!eq || eq == v || (size_t)(eq - v) >= sizeof p->qdesc_name[0] || !end || end == eq + 1 || *end ||
                isinf(x))
                return cli_error(CMD, "--descriptor '%s': use NAME=NUMBER (nan for unknown)", v), -1;
            if (p->n_qdesc == MAX_QDESC) return cli_error(CMD, "--descriptor: at most %d", MAX_QDESC), -1;
            snprintf(p->qdesc_name[p->n_qdesc], sizeof p->qdesc_name[0], "%.*s", (int)(eq - v), v);
            p->qdesc_names[p->n_qdesc] = p->qdesc_name[p->n_qdesc];
            p->qdesc_value[p->n_qdesc++] = x;
        } else if (!strcmp(a, "--descriptor-table")) {
            p->desc_path = v;
        } else if (!strcmp(a, "--described-only")) {
            if (parse_dims(v, &p->o.onehot_off)) return -1;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_int(CMD, a, v, 1, 256, &n)) return -1;
            p->o.nthread = (int)n;
        } else {
            int hit = 0;
            for (int d = 0; d < 5 && !hit; d++) {
                if (!strcmp(a, qflags[d])) { p->q[d] = v; hit = 1; }
                else if (!strcmp(a, bflags[d])) { p->bq[d] = v; hit = 1; }
            }
            if (!hit) return cli_error(CMD, "unknown argument '%s' (see --help)", a), -1;
        }
    }
    if (strcmp(p->format, "text") && strcmp(p->format, "json"))
        return cli_error(CMD, "--format '%s': use text or json", p->format), -1;
    return 0;
}

/* eval's and fit's inputs: the table (--table) and the descriptor table
 * (--descriptor-table, which --described-only needs), the latter set in
 * p->o.desc. 0, or CLI_EXIT_ERROR after printing (nothing held). */
static int read_inputs(popts *p, const char *verb, drift_table **t, drift_pri_descriptors **desc) {
    drift_error err = {0};
    if (drift_table_read_csv(p->table, t, &err)) return cli_error_lib(CMD, &err);
    if (p->desc_path && drift_pri_descriptors_read_csv(p->desc_path, desc, &err)) {
        drift_table_free(*t);
        return cli_error_lib(CMD, &err);
    }
    if (p->o.onehot_off && !*desc) {
        drift_table_free(*t);
        return cli_error(CMD, "%s: --described-only needs --descriptor-table", verb);
    }
    p->o.desc = *desc;
    return 0;
}

static int do_eval(popts *p) {
    if (!p->table) return cli_error(CMD, "eval: --table is required");
    drift_error err = {0};
    drift_table *t = NULL;
    drift_pri_descriptors *desc = NULL;
    if (read_inputs(p, "eval", &t, &desc)) return CLI_EXIT_ERROR;
    drift_pri_eval *e = NULL;
    double t0 = cli_now_ms();
    drift_status st = drift_pri_evaluate(t, &p->o, &e, &err);
    double ms = cli_now_ms() - t0;
    drift_table_free(t);
    drift_pri_descriptors_free(desc);
    p->o.desc = NULL;
    if (st) return cli_error_lib(CMD, &err);
    drift_format fmt = !strcmp(p->format, "json") ? DRIFT_FORMAT_JSON : DRIFT_FORMAT_TEXT;
    char *text = NULL;
    int rc = CLI_EXIT_PASS;
    if (drift_pri_eval_render(e, p->table, p->o.tune, ms, fmt, &text, &err)) rc = cli_error_lib(CMD, &err);
    else if (cli_write_output(CMD, p->out, text)) rc = CLI_EXIT_ERROR;
    free(text);
    drift_pri_eval_free(e);
    return rc;
}

static int do_fit(popts *p) {
    if (!p->table) return cli_error(CMD, "fit: --table is required");
    if (!p->out) return cli_error(CMD, "fit: -o FILE is required");
    drift_error err = {0};
    drift_table *t = NULL;
    drift_pri_descriptors *desc = NULL;
    for (int d = 1; d <= 3; d++) p->o.baseline[d] = p->bq[d];
    if (read_inputs(p, "fit", &t, &desc)) return CLI_EXIT_ERROR;
    drift_pri *m = NULL;
    drift_status st = drift_pri_fit(t, &p->o, &m, &err);
    drift_table_free(t);
    drift_pri_descriptors_free(desc);
    p->o.desc = NULL;
    if (st) return cli_error_lib(CMD, &err);
    st = drift_pri_save(m, p->out, &err);
    drift_pri_free(m);
    if (st) return cli_error_lib(CMD, &err);
    if (!cli_quiet) fprintf(stderr, "driftbench pri: model written to %s\n", p->out);
    return CLI_EXIT_PASS;
}

static int do_predict(popts *p) {
    if (!p->pri) return cli_error(CMD, "predict: --pri FILE is required");
    for (int d = 0; d < 5; d++)
        if (!p->q[d]) return cli_error(CMD, "predict: %s is required", qflags[d]);
    drift_error err = {0};
    drift_pri *m = NULL;
    if (drift_pri_load(p->pri, &m, &err)) return cli_error_lib(CMD, &err);
    drift_pri_query q = {p->q[0], p->q[1], p->q[2], p->q[3], p->q[4]};
    drift_pri_query bq = {p->bq[0], p->bq[1], p->bq[2], p->bq[3], p->bq[4]};
    drift_pri_prediction r;
    drift_status st = drift_pri_predict_described(m, &q, p->qdesc_names, p->qdesc_value, p->n_qdesc, &bq, &r, &err);
    if (st) {
        drift_pri_free(m);
        return cli_error_lib(CMD, &err);
    }
    const char *base[5];
    for (int d = 0; d < 5; d++) base[d] = p->bq[d] ? p->bq[d] : drift_pri_baseline(m, d) ? drift_pri_baseline(m, d) : p->q[d];
    drift_pri_query shown = {base[0], base[1], base[2], base[3], base[4]};
    drift_format fmt = !strcmp(p->format, "json") ? DRIFT_FORMAT_JSON : DRIFT_FORMAT_TEXT;
    int rc = CLI_EXIT_PASS;
    char *text = NULL;
    if (drift_pri_prediction_render(&q, &shown, &r, fmt, &text, &err)) rc = cli_error_lib(CMD, &err);
    else if (cli_write_output(CMD, p->out, text)) rc = CLI_EXIT_ERROR;
    free(text);
    drift_pri_free(m);
    return rc;
}

static int cmd_pri(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_ERROR : 0;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
    popts p;
    if (strcmp(argv[1], "fit") && strcmp(argv[1], "eval") && strcmp(argv[1], "predict")) {
        usage(stderr);
        return cli_error(CMD, "unknown subcommand '%s': use fit, eval or predict", argv[1]);
    }
    if (parse(argc, argv, &p)) return CLI_EXIT_ERROR;
    if (!strcmp(argv[1], "eval")) return do_eval(&p);
    if (!strcmp(argv[1], "fit")) return do_fit(&p);
    return do_predict(&p);
}
CLI_COMMAND(pri, "pri", "Portability Risk Index: fit, eval, predict (xgboost)", cmd_pri)
