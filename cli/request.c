/* request.c - the request control options of `run` and `measure`
 * (drift_request_ctl, target.h; issue 37): a system prompt (--system,
 * --system-file), a prompt template (--template), an extra request body
 * (--extra-body JSON or @FILE), headers (--header 'Name: value', a value
 * "env:VAR" read from the environment when the target opens) and stop
 * strings (--stop, drift_gen_params). The checks are the library's (the
 * target refuses a bad body or header when it opens, naming the key or the
 * header); here only what the flags themselves can get wrong: a file that
 * cannot be read, too many of a repeatable flag, a flag given twice. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pipeline.h"

const char cli_request_usage[] =
    "  --system TEXT        a system prompt for every request (chat: a first system\n"
    "                       message, unless a messages prompt has its own; completions:\n"
    "                       TEXT and a blank line before the prompt); part of the run's\n"
    "                       identity\n"
    "  --system-file F      the system prompt read from file F\n"
    "  --template TEXT      the prompt template for every plain prompt, in place of the\n"
    "                       workload's: {input} is the prompt (recorded as custom/HASH)\n"
    "  --extra-body JSON    a JSON object merged into every request body, or @FILE\n"
    "                       (e.g. '{\"top_k\":20}'; docs/request-control.md has vLLM's and\n"
    "                       SGLang's fields); its value wins for a decoding field;\n"
    "                       model, messages, prompt, stream, n and echo are refused;\n"
    "                       http targets only; part of the run's identity\n"
    "  --header 'N: V'      an HTTP header sent with every request; repeatable; a value\n"
    "                       env:VAR is $VAR's (read at start, never stored nor shown);\n"
    "                       credentials go only over https or to this machine, as the\n"
    "                       API key; not part of the run's identity\n"
    "  --stop S             a stop string; repeatable (at most 16)\n";

/* Reads a whole text file into a (a->owned); NULL after printing. */
static const char *read_text(const char *cmd, const char *flag, const char *path, cli_run_args *a) {
    if (a->n_owned >= (int)(sizeof a->owned / sizeof *a->owned))
        return cli_error(cmd, "%s: too many files given", flag), NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return cli_error(cmd, "%s: cannot read '%s': %s", flag, path, strerror(errno)), NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int bad = !buf;
    while (!bad) {
        if (n + 1 >= cap) {
            if (cap >= ((size_t)64 << 20)) {
                bad = 2;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                bad = 1;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) bad = 3;
            break;
        }
    }
    fclose(f);
    if (bad) {
        free(buf);
        return cli_error(cmd, "%s: cannot read '%s': %s", flag, path,
                         bad == 2 ? "larger than 64 MiB" : bad == 3 ? "read error" : "out of memory"),
               NULL;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        return cli_error(cmd, "%s: '%s' holds a NUL byte: not a text file", flag, path), NULL;
    }
    a->owned[a->n_owned++] = buf;
    return buf;
}

const char *cli_extra_body_arg(const char *cmd, const char *flag, const char *arg, cli_run_args *a) {
    return arg[0] == '@' ? read_text(cmd, flag, arg + 1, a) : arg;
}

int cli_parse_request_option(const char *cmd, int opt, const char *arg, cli_run_args *a) {
    drift_request_ctl *r = &a->topts.request;
    switch (opt) {
    case OPT_SYSTEM:
    case OPT_SYSTEM_FILE: {
        if (a->system_given) return cli_error(cmd, "give one system prompt (--system or --system-file, once)"), -1;
        a->system_given = 1;
        const char *text = opt == OPT_SYSTEM ? arg : read_text(cmd, "--system-file", arg, a);
        if (!text) return -1;
        if (!*text) return cli_error(cmd, "%s: the system prompt is empty", opt == OPT_SYSTEM ? "--system" : "--system-file"), -1;
        r->system_prompt = text;
        return 1;
    }
    case OPT_TEMPLATE:
        if (r->prompt_template) return cli_error(cmd, "--template given twice"), -1;
        if (!strstr(arg, "{input}"))
            return cli_error(cmd, "--template: '%s' has no {input} (where each prompt's text goes)", cli_safe(arg)), -1;
        r->prompt_template = arg;
        return 1;
    case OPT_EXTRA_BODY:
        if (r->extra_body_json) return cli_error(cmd, "--extra-body given twice (put all fields in one object)"), -1;
        if (!(r->extra_body_json = cli_extra_body_arg(cmd, "--extra-body", arg, a))) return -1;
        return 1;
    case OPT_HEADER:
        if (a->n_headers >= CLI_MAX_HEADERS) return cli_error(cmd, "at most %d --header", CLI_MAX_HEADERS), -1;
        a->headers[a->n_headers++] = arg;
        return 1;
    case OPT_STOP:
        if (a->n_stops >= CLI_MAX_STOPS) return cli_error(cmd, "at most %d --stop strings", CLI_MAX_STOPS), -1;
        if (!*arg) return cli_error(cmd, "--stop: the stop string is empty"), -1;
        a->stops[a->n_stops++] = arg;
        return 1;
    }
    return 0;
}

void cli_request_finish(cli_run_args *a) {
    a->topts.request.headers = a->n_headers ? a->headers : NULL;
    a->topts.request.n_headers = (size_t)a->n_headers;
    a->params.stop = a->n_stops ? a->stops : NULL;
    a->params.n_stop = a->n_stops;
}

void cli_run_args_clear(cli_run_args *a) {
    for (int i = 0; i < a->n_owned; i++) free(a->owned[i]);
    a->n_owned = 0;
}
