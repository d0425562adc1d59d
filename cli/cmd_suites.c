/* cmd_suites.c - `driftbench suites`: look at and export suites (built-in
 * generators or files), e.g. to feed training:
 *   driftbench suites export builtin:math --split train --n 200000 -o f.jsonl */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/suite.h"
#include "driftbench/text.h"

static const char suites_usage[] =
    "usage: driftbench suites export SUITE [--split test|train] [--n N] [--seed S] [-o FILE]\n"
    "       driftbench suites show SUITE [--n N]\n"
    "\n"
    "SUITE is a file or builtin:math|code|safety|chat|long. In FILE?workload=W, W\n"
    "(math, code, safety, chat, long_context) is the workload of the file's records\n"
    "that name none (e.g. chat.jsonl?workload=chat); without it such a record stops\n"
    "the load, naming the file and line.\n"
    "A file's format is detected from its first record: OpenAI chat \"messages\" JSONL\n"
    "(multi-turn), OpenAI batch API input (\"custom_id\", \"body\"), plain prompt JSONL\n"
    "(\"prompt\"), DriftBench's own export (below), GSM8K, HumanEval or LongBench JSONL,\n"
    "an AdvBench CSV; docs/suites.md has each.\n"
    "export writes one JSON object per line:\n"
    "{\"prompt_id\",\"workload\",\"input\",\"reference\"}; the reference\n"
    "holds the ground truth and, for built-in suites, the answer a model should give\n"
    "(math solution, code canonical_solution, safety/chat target, long answers).\n"
    "show prints the count, the detected format and the first N prompts (default 3).\n";

/* A prompt's input for show: a multi-turn prompt one "role: content" line
 * per turn, plain text as it is (both sanitised). */
static void print_input(const char *input) {
    const char *m = drift_prompt_messages(input);
    json_t *a = m ? json_loads(m, 0, NULL) : NULL;
    if (!json_is_array(a)) {
        json_decref(a);
        printf("%s\n", cli_safe_lines(input));
        return;
    }
    size_t k;
    json_t *turn;
    json_array_foreach(a, k, turn) {
        const char *role = json_string_value(json_object_get(turn, "role"));
        const char *content = json_string_value(json_object_get(turn, "content"));
        printf("%s: ", role ? cli_safe(role) : "?");
        printf("%s\n", content ? cli_safe_lines(content) : "");
    }
    json_decref(a);
}

static int cmd_suites(int argc, char **argv) {
    enum { O_SPLIT = 300, O_N, O_SEED, O_HELP };
    static const struct option longopts[] = {{"split", required_argument, 0, O_SPLIT}, {"n", required_argument, 0, O_N},
                                             {"seed", required_argument, 0, O_SEED},   {"output", required_argument, 0, 'o'},
                                             {"help", no_argument, 0, O_HELP},          {0, 0, 0, 0}};
    const char *split = NULL, *out = NULL;
    long n = 0, seed = -1;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
        switch (opt) {
        case O_SPLIT:
            if (strcmp(optarg, "test") && strcmp(optarg, "train"))
                return cli_error("suites", "--split: '%s' (test or train)", optarg);
            split = optarg;
            break;
        case O_N:
            if (cli_parse_int("suites", "--n", optarg, 1, 10000000, &n)) return CLI_EXIT_ERROR;
            break;
        case O_SEED:
            if (cli_parse_int("suites", "--seed", optarg, 0, 0x7fffffffL, &seed)) return CLI_EXIT_ERROR;
            break;
        case 'o': out = optarg; break;
        case 'h':
        case O_HELP: fputs(suites_usage, stdout); return 0;
        default: return cli_error("suites", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (argc - optind != 2) return cli_error("suites", "expected an action and a suite (see --help)");
    const char *action = argv[optind], *spec = argv[optind + 1];
    int is_builtin = !strncmp(spec, "builtin:", 8);
    if (!is_builtin && (split || seed >= 0))
        return cli_error("suites", "--split and --seed apply to builtin: suites only");
    char full[512];
    if (is_builtin && !strchr(spec, '?')) {
        int len = snprintf(full, sizeof full, "%s?split=%s", spec, split ? split : "test");
        if (n && !strcmp(action, "export")) len += snprintf(full + len, sizeof full - (size_t)len, "&n=%ld", n);
        if (seed >= 0) snprintf(full + len, sizeof full - (size_t)len, "&seed=%ld", seed);
        spec = full;
    }
    drift_suite *s = NULL;
    drift_error err = {0};
    if (drift_suite_load(spec, &s, &err)) return cli_error_lib("suites", &err);
    int rc = CLI_EXIT_PASS;
    if (!strcmp(action, "show")) {
        printf("%s: %zu prompts, format %s\n", cli_safe(s->source), s->n, s->format ? cli_safe(s->format) : "?");
        size_t show = n ? (size_t)n : 3;
        for (size_t i = 0; i < s->n && i < show; i++) { /* a suite file's text: sanitised */
            printf("\n[%s] %s\n", cli_safe(s->prompts[i].prompt_id), drift_workload_name(s->prompts[i].workload));
            print_input(s->prompts[i].input);
            printf("reference: %s\n", s->prompts[i].reference_json ? cli_safe(s->prompts[i].reference_json) : "{}");
        }
    } else if (!strcmp(action, "export")) {
        FILE *f = out && strcmp(out, "-") ? fopen(out, "w") : stdout;
        if (!f) {
            drift_suite_free(s);
            return cli_error("suites", "%s: cannot write", out);
        }
        size_t limit = n && !is_builtin ? (size_t)n : s->n;
        for (size_t i = 0; i < s->n && i < limit; i++) {
            const drift_prompt *p = &s->prompts[i];
            json_t *ref = p->reference_json ? json_loads(p->reference_json, 0, NULL) : NULL;
            /* a suite file's text: repaired to UTF-8 (json_pack refuses invalid UTF-8), printed hardened */
            char *id = drift_utf8_clean(p->prompt_id, strlen(p->prompt_id));
            char *input = drift_utf8_clean(p->input, strlen(p->input));
            json_t *o = id && input ? json_pack("{s:s, s:s, s:s, s:o}", "prompt_id", id, "workload",
                                                drift_workload_name(p->workload), "input", input, "reference",
                                                ref ? ref : json_object())
                                    : NULL;
            if (!id || !input) json_decref(ref);
            free(id);
            free(input);
            char *dumped = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
            char *line = dumped ? drift_json_harden(dumped) : NULL;
            free(dumped);
            json_decref(o);
            if (!line || fputs(line, f) < 0 || fputc('\n', f) < 0) {
                free(line);
                rc = cli_error("suites", "%s: write failed", out ? out : "stdout");
                break;
            }
            free(line);
        }
        if (f != stdout && fclose(f)) rc = cli_error("suites", "%s: write failed", out);
        if (rc == CLI_EXIT_PASS && !cli_quiet && out)
            fprintf(stderr, "suites: wrote %zu prompts to %s\n", limit < s->n ? limit : s->n, out);
    } else {
        rc = cli_error("suites", "unknown action '%s' (export or show)", action);
    }
    drift_suite_free(s);
    return rc;
}
CLI_COMMAND(suites, "suites", "show or export a suite (e.g. built-in training data)", cmd_suites)
