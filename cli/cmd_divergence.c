/* cmd_divergence.c - `driftbench divergence`: token-level divergence of two
 * stacks, teacher-forced (divergence.h): embedded stacks by their logits,
 * HTTP runs by their server's prompt logprobs (top-K, prompt_logprobs.h).
 *
 * Two forms: over two stored runs (--db, --baseline LABEL, --target LABEL:
 * the baseline's answers forced through both stacks), or over a raw text
 * (--text FILE --ctx N, --baseline/--target are embedded specs), split as
 * llama-perplexity --kl-divergence splits it. Exit 0 after printing, 2 on
 * errors (unknown label, an HTTP server without prompt logprobs, a missing
 * file, a text too short). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/prompt_logprobs.h"
#include "driftbench/teacher_forced.h"
#include "driftbench/report.h"
#include "driftbench/store.h"
#include "driftbench/text.h"

static const char *DIV_CMD = "divergence";
static volatile sig_atomic_t div_stop;

static void div_on_signal(int sig) {
    (void)sig;
    div_stop = 1;
}

static int div_cancelled(void *user) {
    (void)user;
    return div_stop != 0;
}

static void divergence_usage(FILE *f) {
    fprintf(f,
            "usage: driftbench divergence --db STORE --baseline LABEL --target LABEL [--workload W[,W..]] [--limit N]\n"
            "                             [--seed S] [--models DIR] [--http-logprobs auto|prompt_logprobs|echo]\n"
            "                             [--top N] [--format text|json|markdown] [--out F]\n"
            "       driftbench divergence --baseline SPEC --target SPEC --text FILE --ctx N [--format ...] [--out F]\n"
            "Teacher-forced token divergence: both stacks read the same tokens and their next-token\n"
            "distributions are compared at every scored position: mean KL(baseline||target) with its\n"
            "standard error and percentiles (p50, p90, p99, max), the share of positions whose top-1\n"
            "tokens agree, percentiles of dp = p_target - p_baseline of the actual next token, and per\n"
            "prompt where the top-1 tokens first disagree.\n"
            "Runs: the tokens are the baseline run's prompt (formatted as the run formatted it: its api,\n"
            "its templates) followed by its stored answer; the positions are the answer's tokens. Per\n"
            "prompt, per workload and overall. --limit N takes a random sample of N prompts per workload\n"
            "(--seed, default 1). --models DIR finds a run's model file by name when the path the run\n"
            "recorded is gone (a store made on another machine).\n"
            "Text: --text FILE is tokenized (with the model's BOS) and cut into chunks of --ctx N tokens\n"
            "as llama-perplexity --kl-divergence does (the second half of each chunk is scored); the\n"
            "output has llama-perplexity's statistics blocks.\n"
            "Two embedded:PATH.gguf?... stacks need one vocabulary; they are compared over the full\n"
            "vocabulary. A run against an HTTP server is forced through the server: it is sent the\n"
            "prompt followed by the baseline's answer and returns the top-20 logprobs of each token\n"
            "(api=completions: vLLM's prompt_logprobs, else OpenAI-style echo with logprobs, as\n"
            "--http-logprobs says; default auto: the first that works; api=chat: the messages with the\n"
            "answer as an open assistant turn, vLLM's continue_final_message with prompt_logprobs).\n"
            "The baseline's recorded system prompt and template are re-created. The answer's tokens of\n"
            "the two sides are paired by their place in the answer; such a pair's KL is over the tokens\n"
            "both top lists give plus the rest of the mass: a lower bound of the full KL (the output\n"
            "names the method; docs/divergence-http.md). A server that returns none: not computed\n"
            "(exit 2).\n"
            "The text form needs embedded stacks.\n");
}

static int cmd_divergence(int argc, char **argv) {
    const char *db = NULL, *base = NULL, *targ = NULL, *wl = NULL, *format = "text", *text_path = NULL, *models = NULL,
               *out_path = NULL, *hl = NULL;
    long limit = 0, seed = 1, ctx = 0, top = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            divergence_usage(stdout);
            return CLI_EXIT_PASS;
        }
        if (i + 1 >= argc) {
            divergence_usage(stderr);
            return cli_error(DIV_CMD, "%s needs a value", a);
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--db")) db = v;
        else if (!strcmp(a, "--baseline")) base = v;
        else if (!strcmp(a, "--target")) targ = v;
        else if (!strcmp(a, "--workload")) wl = v;
        else if (!strcmp(a, "--format")) format = v;
        else if (!strcmp(a, "--text")) text_path = v;
        else if (!strcmp(a, "--models")) models = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--http-logprobs")) hl = v;
        else if (!strcmp(a, "--limit")) {
            if (cli_parse_int(DIV_CMD, "--limit", v, 0, 100000000L, &limit)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(DIV_CMD, "--seed", v, 0, 2147483647L, &seed)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--ctx")) {
            if (cli_parse_int(DIV_CMD, "--ctx", v, 4, 1048576L, &ctx)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--top")) {
            if (cli_parse_int(DIV_CMD, "--top", v, 0, 1000000L, &top)) return CLI_EXIT_ERROR;
        } else {
            divergence_usage(stderr);
            return cli_error(DIV_CMD, "unknown option %s", a);
        }
    }
    if (!base || !targ) {
        divergence_usage(stderr);
        return cli_error(DIV_CMD, "--baseline and --target are required");
    }
    if (!text_path && !db) {
        divergence_usage(stderr);
        return cli_error(DIV_CMD, "give --db (two stored runs) or --text FILE --ctx N (a raw text)");
    }
    if (text_path && db) return cli_error(DIV_CMD, "--db and --text are two different forms: give one");
    if (text_path && !ctx) return cli_error(DIV_CMD, "--text needs --ctx N (tokens per chunk, as llama-perplexity -c)");
    if (!text_path && ctx) return cli_error(DIV_CMD, "--ctx goes with --text");
    if (text_path && (wl || limit)) return cli_error(DIV_CMD, "--workload and --limit go with --db");
    drift_error err = {0};
    drift_format fmt;
    if (drift_format_parse(format, &fmt, &err) != DRIFT_OK) return cli_error_lib(DIV_CMD, &err);
    if (fmt == DRIFT_FORMAT_JUNIT) return cli_error(DIV_CMD, "--format must be text, json or markdown, not '%s'", format);
    drift_tokdiv_opts o;
    drift_tokdiv_opts_default(&o);
    o.limit = (size_t)limit;
    o.seed = (uint64_t)seed;
    o.models_dir = models;
    o.progress = cli_quiet ? NULL : cli_progress;
    o.cancel = div_cancelled;
    if (hl) {
        if (!strcmp(hl, "auto")) o.http_method = DRIFT_PLP_AUTO;
        else if (!strcmp(hl, "prompt_logprobs")) o.http_method = DRIFT_PLP_VLLM;
        else if (!strcmp(hl, "echo")) o.http_method = DRIFT_PLP_ECHO;
        else return cli_error(DIV_CMD, "--http-logprobs '%s': one of auto, prompt_logprobs, echo", hl);
        if (text_path) return cli_error(DIV_CMD, "--http-logprobs goes with --db");
    }
    if (wl) { /* a comma-separated list */
        char *copy = strdup(wl), *save = NULL;
        for (char *w = copy ? strtok_r(copy, ",", &save) : NULL; w; w = strtok_r(NULL, ",", &save)) {
            drift_workload x = drift_workload_parse(w);
            if (x == DRIFT_WL_UNKNOWN) {
                int ec = cli_error(DIV_CMD, "--workload '%s': one of math, code, safety, chat, long_context (or a list)", w);
                free(copy);
                return ec;
            }
            o.workloads |= 1u << x;
        }
        free(copy);
        if (!o.workloads) return cli_error(DIV_CMD, "--workload '%s': no workload named", wl);
    }
    signal(SIGINT, div_on_signal);
    signal(SIGTERM, div_on_signal);
    drift_tokdiv_report rep;
    drift_status rc;
    if (text_path) {
        char *text = NULL;
        size_t len = 0;
        if (drift_file_read(text_path, &text, &len, &err) != DRIFT_OK) return cli_error_lib(DIV_CMD, &err);
        rc = drift_tokdiv_text(base, targ, text, len, (int)ctx, &o, &rep, &err);
        free(text);
    } else {
        drift_store *st = NULL;
        if (drift_store_open_readonly(db, &st, &err) != DRIFT_OK) return cli_error_lib(DIV_CMD, &err);
        rc = drift_tokdiv_runs(st, base, targ, &o, &rep, &err);
        drift_store_close(st);
    }
    if (o.progress) cli_progress_done();
    if (rc != DRIFT_OK) return cli_error_lib(DIV_CMD, &err);
    char *s = NULL;
    int ec = CLI_EXIT_PASS;
    if (drift_tokdiv_render(&rep, (int)fmt, (size_t)top, &s, &err) != DRIFT_OK) ec = cli_error_lib(DIV_CMD, &err);
    else if (cli_write_output(DIV_CMD, out_path, s) != 0) ec = CLI_EXIT_ERROR;
    free(s);
    drift_tokdiv_report_clear(&rep);
    return ec;
}
CLI_COMMAND(divergence, "divergence", "token-level KL divergence of two stacks, teacher-forced",
            cmd_divergence)
