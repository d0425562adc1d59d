/* cmd_generate.c - `driftbench generate`: run the embedded engine on one
 * prompt and print the completion (and, with --logprobs K, a table of each
 * generated token's logprob and its top-K alternatives). Statistics
 * (tokens, time, tokens/s) go to stderr unless --quiet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/model.h"
#include "driftbench/profile.h"

static void usage(void) {
    printf("usage: driftbench generate --model F.gguf [--profile P] --prompt TEXT [--chat]\n"
           "                           [--max-tokens N] [--temperature T] [--top-p P] [--top-k K]\n"
           "                           [--seed S] [--stop STR]... [--logprobs K] [--system TEXT]\n"
           "  --profile  a named profile (`driftbench profiles`) or a spec such as\n"
           "             'profile=cpu-bf16&kv=fp8-e4m3' (default cpu-f32)\n"
           "  --chat     wrap the prompt in the model's chat template (one user message)\n"
           "  --system   a system prompt: with --chat the template's system turn, else the\n"
           "             text and a blank line before the prompt (as run --system does)\n"
           "  --stop     a stop string; repeatable (at most 16)\n"
           "  --logprobs print each generated token's logprob and its top K alternatives\n");
}

/* Prints s with control characters escaped, for the logprobs table. */
static void put_escaped(const char *s) {
    fputs(cli_safe(s ? s : ""), stdout); /* a token may be a part of a character, or a control */
}

static int cmd_generate(int argc, char **argv) {
    const char *cmd = "generate", *model = NULL, *profile = "cpu-f32", *prompt = NULL, *system = NULL;
    const char *stops[16];
    int n_stop = 0, chat = 0;
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.max_tokens = 128;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long lv;
        double dv;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return CLI_EXIT_PASS;
        } else if (!strcmp(a, "--chat")) {
            chat = 1;
            continue;
        }
        if (!v) return cli_error(cmd, "%s needs a value (see --help)", a);
        i++;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--profile")) profile = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--system")) system = *v ? v : NULL;
        else if (!strcmp(a, "--max-tokens")) {
            if (cli_parse_int(cmd, a, v, 1, 1 << 20, &lv)) return CLI_EXIT_ERROR;
            gp.max_tokens = (int)lv;
        } else if (!strcmp(a, "--temperature")) {
            if (cli_parse_double(cmd, a, v, 0, 100, &dv)) return CLI_EXIT_ERROR;
            gp.temperature = dv;
        } else if (!strcmp(a, "--top-p")) {
            if (cli_parse_double(cmd, a, v, 0, 1, &dv)) return CLI_EXIT_ERROR;
            gp.top_p = dv;
        } else if (!strcmp(a, "--top-k")) {
            if (cli_parse_int(cmd, a, v, 0, 1 << 24, &lv)) return CLI_EXIT_ERROR;
            gp.top_k = (int)lv;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(cmd, a, v, 0, 0x7fffffffL, &lv)) return CLI_EXIT_ERROR;
            gp.seed = lv;
        } else if (!strcmp(a, "--logprobs")) {
            if (cli_parse_int(cmd, a, v, 0, 20, &lv)) return CLI_EXIT_ERROR;
            gp.logprobs = (int)lv;
        } else if (!strcmp(a, "--stop")) {
            if (n_stop == 16) return cli_error(cmd, "at most 16 --stop strings");
            stops[n_stop++] = v;
        } else {
            return cli_error(cmd, "unknown flag '%s' (see --help)", a);
        }
    }
    if (!model) return cli_error(cmd, "--model F.gguf is required");
    if (!prompt) return cli_error(cmd, "--prompt TEXT is required");
    gp.stop = stops;
    gp.n_stop = n_stop;
    drift_numeric_profile p;
    drift_error err;
    drift_status st = strchr(profile, '=') ? drift_profile_parse(profile, &p, &err) : drift_profile_get(profile, &p, &err);
    if (st) return cli_error_lib(cmd, &err);
    double t0 = cli_now_ms();
    drift_model *m;
    if ((st = drift_model_load(model, &p, &m, &err))) return cli_error_lib(cmd, &err);
    double t_load = cli_now_ms() - t0;
    int32_t *ids;
    size_t n;
    char *text = !chat && system ? malloc(strlen(system) + strlen(prompt) + 3) : NULL;
    if (!chat && system && !text) {
        drift_model_free(m);
        return cli_error(cmd, "out of memory");
    }
    if (text) sprintf(text, "%s\n\n%s", system, prompt); /* completions: as the embedded target does */
    const char *plain = text ? text : prompt;
    st = chat ? drift_model_chat_system_tokens(m, system, prompt, &ids, &n, &err)
              : drift_model_tokenize(m, plain, strlen(plain), -1, 0, &ids, &n, &err);
    free(text);
    if (st) {
        drift_model_free(m);
        return cli_error_lib(cmd, &err);
    }
    drift_generation g;
    t0 = cli_now_ms();
    st = drift_model_generate(m, (const int32_t *const *)&ids, &n, 1, &gp, NULL, 1, &g, &err);
    double t_gen = cli_now_ms() - t0;
    free(ids);
    if (st || g.error) {
        int rc = st ? cli_error_lib(cmd, &err) : cli_error(cmd, "%s", g.error);
        drift_generation_clear(&g);
        drift_model_free(m);
        return rc;
    }
    if (gp.logprobs > 0) {
        printf("%4s  %-16s %10s   top alternatives\n", "pos", "token", "logprob");
        for (int t = 0; t < g.n_tokens; t++) {
            const drift_token_logprob *lp = &g.lp[t];
            char *tt = drift_model_token_text(m, lp->id);
            printf("%4d  \"", t);
            put_escaped(tt);
            printf("\"%*s %10.5f  ", (int)(tt && strlen(tt) < 14 ? 14 - strlen(tt) : 0), "", lp->logprob);
            free(tt);
            for (int k = 0; k < lp->n_top; k++) {
                char *at = drift_model_token_text(m, lp->top_id[k]);
                printf(" \"");
                put_escaped(at);
                printf("\" %.4f", lp->top_logprob[k]);
                free(at);
            }
            printf("\n");
        }
        printf("\n");
    }
    fputs(cli_safe_lines(g.text), stdout); /* the model's answer: no control reaches the terminal */
    printf("\n");
    if (!cli_quiet) {
        const drift_model_info *in = drift_model_get_info(m);
        fprintf(stderr, "[%s, %s, profile %s] prompt %d tokens, completion %d tokens (%s), load %.0f ms, generate %.0f ms (%.1f tokens/s)\n",
                cli_safe(in->name), cli_safe(in->arch), p.name, g.prompt_tokens, g.n_tokens, g.finish_reason, t_load, t_gen,
                t_gen > 0 ? (g.prompt_tokens + g.n_tokens) / (t_gen / 1000.0) : 0.0);
    }
    drift_generation_clear(&g);
    drift_model_free(m);
    return CLI_EXIT_PASS;
}
CLI_COMMAND(generate, "generate", "run the embedded engine on one prompt (text, logprobs)", cmd_generate)
