/* pipeline.c - run, score and compare as the CLI drives them.
 *
 * run: suite(s) -> prompts in the store -> pending (prompt, replicate) pairs
 * -> target generate, results buffered and written in batches (one
 * transaction each, at least every 256 results or every second) so a killed
 * run loses at most what was in flight, and a run started again with the
 * same label resumes with what is missing.
 *
 * Interruption: the first SIGINT/SIGTERM sets cli_interrupted, which the
 * target's cancel hook reads: requests in flight are aborted and retry
 * back-offs end at once, nothing is stored for them (they stay missing, so
 * the next run asks them again), what was received is flushed, the run lock
 * released, and the command exits 2. A second signal exits at once: every
 * committed batch is safe in the store (WAL), the lock is taken over by the
 * next run because its owner is gone. */
#include "pipeline.h"

#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util/util.h"

volatile sig_atomic_t cli_interrupted;

static void on_signal(int sig) {
    (void)sig;
    if (cli_interrupted) { /* the second one: go now (async-signal-safe calls only) */
        static const char msg[] = "\ndriftbench: interrupted again: exiting now; what was stored is kept\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(CLI_EXIT_ERROR);
    }
    cli_interrupted = 1;
}

int cli_cancel_requested(void *user) {
    (void)user;
    return cli_interrupted != 0;
}

void cli_install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli_run_args_default(cli_run_args *a) {
    memset(a, 0, sizeof *a);
    drift_target_opts_default(&a->topts);
    drift_gen_params_default(&a->params);
    a->replicates = 1;
}

/* ---- configuration and decoding records ---- */

/* Merges the target's detected dimensions with --config k=v,... (which win).
 * Returns a JSON object or NULL after printing the problem. */
static json_t *build_config(const char *cmd, const drift_target *t, const char *config) {
    json_error_t jerr;
    const char *detected = drift_target_config_json(t);
    json_t *obj = detected ? json_loads(detected, 0, &jerr) : NULL;
    if (!json_is_object(obj)) {
        json_decref(obj);
        obj = json_object();
    }
    if (config && *config) {
        char *copy = drift_strdup(config), *save = NULL;
        for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq || eq == kv || !eq[1]) {
                cli_error(cmd, "--config: '%s' is not key=value (expected e.g. model=llama-3.1-8b,hardware=h100)", kv);
                free(copy);
                json_decref(obj);
                return NULL;
            }
            *eq = '\0';
            for (const char *c = kv; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-')) {
                    cli_error(cmd, "--config: key '%s' may only use a-z, 0-9, '_' and '-'", kv);
                    free(copy);
                    json_decref(obj);
                    return NULL;
                }
            json_object_set_new(obj, kv, json_string(eq + 1));
        }
        free(copy);
    }
    static const char *const dims[] = {"model", "hardware", "precision", "framework"};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (!json_object_get(obj, dims[i])) json_object_set_new(obj, dims[i], json_string("unknown"));
    return obj;
}

static json_t *build_decoding(const cli_run_args *a, drift_api api) {
    json_t *d = json_object();
    json_object_set_new(d, "temperature", json_real(a->params.temperature));
    json_object_set_new(d, "top_p", json_real(a->params.top_p));
    json_object_set_new(d, "top_k", json_integer(a->params.top_k));
    json_object_set_new(d, "seed", json_integer(a->params.seed));
    json_object_set_new(d, "max_tokens", json_integer(a->params.max_tokens));
    json_object_set_new(d, "logprobs", json_integer(a->params.logprobs));
    json_object_set_new(d, "replicates", json_integer(a->replicates));
    json_object_set_new(d, "api", json_string(api == DRIFT_API_CHAT ? "chat" : "completions"));
    return d;
}

static char *dump_sorted(json_t *j) { return json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17)); }

/* ---- the run loop ---- */

typedef struct run_sink {
    drift_store *st;
    int64_t run_id;
    drift_response *buf;
    size_t n, cap;
    double last_flush_ms;
    size_t done, total, answers, errors;
    int64_t *req_prompt;       /* request index -> prompt rowid */
    int *req_rep;
    drift_status failed;
    drift_error err;
    char *first_error;         /* copy of the first request error, for the summary */
} run_sink;

static void response_clear(drift_response *r) {
    free(r->text);
    free(r->finish_reason);
    free(r->logprobs_json);
    free(r->error);
    memset(r, 0, sizeof *r);
}

static int sink_flush(run_sink *s) {
    if (!s->n) return 0;
    drift_status rc = drift_store_put_responses(s->st, s->run_id, s->buf, s->n, &s->err);
    for (size_t i = 0; i < s->n; i++) response_clear(&s->buf[i]);
    s->n = 0;
    s->last_flush_ms = drift_now_ms();
    if (rc) {
        s->failed = rc;
        return -1;
    }
    return 0;
}

static int on_result(void *user, const drift_gen_request *req, drift_gen_result *res) {
    run_sink *s = user;
    drift_response *r = &s->buf[s->n++];
    memset(r, 0, sizeof *r);
    r->prompt_rowid = s->req_prompt[req->index];
    r->replicate = s->req_rep[req->index];
    r->text = res->text;
    res->text = NULL;
    r->finish_reason = res->finish_reason;
    res->finish_reason = NULL;
    r->logprobs_json = res->logprobs_json;
    res->logprobs_json = NULL;
    r->error = res->error;
    res->error = NULL;
    r->prompt_tokens = res->prompt_tokens;
    r->completion_tokens = res->completion_tokens;
    r->latency_ms = res->latency_ms;
    r->http_status = res->http_status;
    r->attempts = res->attempts;
    if (r->error) {
        s->errors++;
        if (!s->first_error) s->first_error = drift_strdup(r->error);
    } else {
        s->answers++;
    }
    s->done++;
    if (s->n == s->cap || drift_now_ms() - s->last_flush_ms > 1000.0) {
        if (sink_flush(s)) return 1;
    }
    cli_progress(NULL, "run", s->done, s->total);
    return 0; /* a signal stops the target through its cancel hook (cli_do_run), which first
               * hands over every answer it already has */
}

static const int64_t *sort_rowids; /* qsort has no user pointer */
static int cmp_by_rowid(const void *a, const void *b) {
    int64_t x = sort_rowids[*(const size_t *)a], y = sort_rowids[*(const size_t *)b];
    return (x > y) - (x < y);
}

int cli_do_run(const char *cmd, drift_store *st, const cli_run_args *a) {
    drift_error err = {0};
    drift_target *t = NULL;
    drift_suite *suites[CLI_MAX_SUITES] = {0};
    int64_t *rowids[CLI_MAX_SUITES] = {0};
    char *rendered_storage = NULL;
    char **rendered = NULL;
    int64_t *pend_p = NULL;
    int *pend_r = NULL;
    size_t n_pend = 0;
    drift_gen_request *reqs = NULL;
    json_t *config = NULL, *decoding = NULL, *templates = NULL, *suites_j = NULL;
    char *config_s = NULL, *decoding_s = NULL, *templates_s = NULL, *suites_s = NULL;
    run_sink sink = {0};
    int rc = CLI_EXIT_ERROR;
    int locked = 0; /* run_begin took the label's writer lock */
    (void)rendered_storage;

    drift_target_opts topts = a->topts;
    topts.cancel = cli_cancel_requested; /* a signal ends requests and back-offs at once */
    topts.cancel_user = NULL;
    if (drift_target_open(a->target, &topts, &t, &err)) {
        cli_error_lib(cmd, &err);
        goto out;
    }
    drift_api api = drift_target_api(t);
    config = build_config(cmd, t, a->config);
    if (!config) goto out;
    decoding = build_decoding(a, api);
    templates = json_object();
    suites_j = json_array();

    /* load all suites and their prompts into the store first */
    size_t total_prompts = 0;
    for (int i = 0; i < a->n_suites; i++) {
        if (drift_suite_load(a->suites[i], &suites[i], &err)) {
            cli_error_lib(cmd, &err);
            goto out;
        }
        if (a->limit > 0 && suites[i]->n > (size_t)a->limit) { /* keep the first `limit` prompts */
            for (size_t j = (size_t)a->limit; j < suites[i]->n; j++) drift_prompt_free(&suites[i]->prompts[j]);
            suites[i]->n = (size_t)a->limit;
        }
        rowids[i] = calloc(suites[i]->n ? suites[i]->n : 1, sizeof(int64_t));
        if (!rowids[i] || drift_store_put_prompts(st, suites[i], rowids[i], &err)) {
            if (!rowids[i]) drift_error_set(&err, DRIFT_ERR_NOMEM, "out of memory");
            cli_error_lib(cmd, &err);
            goto out;
        }
        json_array_append_new(suites_j, json_string(a->suites[i]));
        total_prompts += suites[i]->n;
    }
    config_s = dump_sorted(config);
    decoding_s = dump_sorted(decoding);

    /* map prompt rowid -> rendered text, and record templates */
    rendered = calloc(total_prompts ? total_prompts : 1, sizeof(char *));
    int64_t *all_rowids = calloc(total_prompts ? total_prompts : 1, sizeof(int64_t));
    if (!rendered || !all_rowids) {
        free(all_rowids);
        cli_error(cmd, "out of memory");
        goto out;
    }
    size_t k = 0;
    for (int i = 0; i < a->n_suites; i++)
        for (size_t j = 0; j < suites[i]->n; j++, k++) {
            const char *tid = NULL;
            rendered[k] = drift_prompt_render(&suites[i]->prompts[j], api, &tid);
            all_rowids[k] = rowids[i][j];
            if (!rendered[k]) {
                free(all_rowids);
                cli_error(cmd, "out of memory rendering prompts");
                goto out;
            }
            if (tid) json_object_set_new(templates, drift_workload_name(suites[i]->prompts[j].workload), json_string(tid));
        }
    templates_s = dump_sorted(templates);
    suites_s = dump_sorted(suites_j);

    drift_run_info info = {0};
    char version[64];
    snprintf(version, sizeof version, "driftbench %s", drift_version());
    info.label = (char *)a->label;
    info.target = (char *)a->target;
    info.config_json = config_s;
    info.decoding_json = decoding_s;
    info.templates_json = templates_s;
    info.suites_json = suites_s;
    info.tool_version = version;
    int64_t run_id = 0;
    int resumed = 0;
    if (cli_interrupted) {
        free(all_rowids);
        fprintf(stderr, "%s: interrupted before run '%s' started; nothing was asked\n", cmd, a->label);
        goto out;
    }
    if (drift_store_run_begin(st, &info, &run_id, &resumed, &err)) {
        free(all_rowids);
        cli_error_lib(cmd, &err);
        goto out;
    }
    locked = 1;
    if (drift_store_pending(st, run_id, all_rowids, total_prompts, a->replicates, &pend_p, &pend_r, &n_pend, &err)) {
        free(all_rowids);
        cli_error_lib(cmd, &err);
        goto out;
    }
    if (!cli_quiet)
        fprintf(stderr, "%s run '%s': %zu prompts x %d replicate(s), %zu to request%s\n", resumed ? "resuming" : "starting",
                a->label, total_prompts, a->replicates, n_pend, resumed ? " (the rest are stored)" : "");

    /* requests, in store order */
    reqs = calloc(n_pend ? n_pend : 1, sizeof *reqs);
    sink.req_prompt = pend_p;
    sink.req_rep = pend_r;
    if (!reqs) {
        free(all_rowids);
        cli_error(cmd, "out of memory");
        goto out;
    }
    /* rendered text of each pending prompt: binary search over rowids */
    size_t *order = calloc(total_prompts ? total_prompts : 1, sizeof *order);
    if (!order) {
        free(all_rowids);
        cli_error(cmd, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < total_prompts; i++) order[i] = i;
    sort_rowids = all_rowids;
    qsort(order, total_prompts, sizeof *order, cmp_by_rowid);
    for (size_t i = 0; i < n_pend; i++) {
        size_t lo = 0, hi = total_prompts;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (all_rowids[order[mid]] < pend_p[i]) lo = mid + 1;
            else hi = mid;
        }
        reqs[i].index = i;
        reqs[i].prompt = (lo < total_prompts && all_rowids[order[lo]] == pend_p[i]) ? rendered[order[lo]] : "";
        reqs[i].replicate = pend_r[i];
    }
    free(order);
    free(all_rowids);

    sink.st = st;
    sink.run_id = run_id;
    sink.cap = 256;
    sink.buf = calloc(sink.cap, sizeof *sink.buf);
    sink.total = n_pend;
    sink.last_flush_ms = drift_now_ms();
    if (!sink.buf) {
        cli_error(cmd, "out of memory");
        goto out;
    }
    drift_status grc = DRIFT_OK;
    if (n_pend) grc = drift_target_generate(t, reqs, n_pend, &a->params, on_result, &sink, &err);
    sink_flush(&sink);
    cli_progress_done();
    if (sink.failed) {
        cli_error_lib(cmd, &sink.err);
        goto out;
    }
    if (grc == DRIFT_ERR_CANCELLED || cli_interrupted) {
        fprintf(stderr, "%s: interrupted: %zu of %zu stored in run '%s'; run the same command again to resume\n", cmd,
                sink.done, n_pend, a->label);
        rc = CLI_EXIT_ERROR;
        goto out;
    }
    if (grc) {
        cli_error_lib(cmd, &err);
        goto out;
    }
    if (drift_store_run_finish(st, run_id, &err)) {
        cli_error_lib(cmd, &err);
        goto out;
    }
    if (!cli_quiet)
        fprintf(stderr, "run '%s': %zu answers, %zu errors stored%s\n", a->label, sink.answers, sink.errors,
                sink.errors ? " (errors are kept out of flip counts; run again to retry them)" : "");
    if (sink.answers == 0 && sink.errors > 0) {
        cli_error(cmd, "every request to %s failed (first error: %s); is the server up?", a->target,
                  sink.first_error ? sink.first_error : "?");
        goto out;
    }
    rc = CLI_EXIT_PASS;
out:
    if (locked) drift_store_run_unlock(st, a->label, NULL); /* finish released it already when it ran */
    if (rendered)
        for (size_t i = 0; i < total_prompts; i++) free(rendered[i]);
    free(rendered);
    for (int i = 0; i < a->n_suites; i++) {
        drift_suite_free(suites[i]);
        free(rowids[i]);
    }
    free(pend_p);
    free(pend_r);
    free(reqs);
    if (sink.buf) {
        for (size_t i = 0; i < sink.n; i++) response_clear(&sink.buf[i]);
        free(sink.buf);
    }
    free(sink.first_error);
    json_decref(config);
    json_decref(decoding);
    json_decref(templates);
    json_decref(suites_j);
    free(config_s);
    free(decoding_s);
    free(templates_s);
    free(suites_s);
    drift_target_close(t);
    return rc;
}

int cli_do_score(const char *cmd, drift_store *st, const char *label, const drift_score_opts *o) {
    drift_error err = {0};
    drift_score_summary sum;
    memset(&sum, 0, sizeof sum);
    drift_score_opts opts = *o;
    opts.progress = cli_progress;
    drift_status rc = drift_score_run(st, label, &opts, &sum, &err);
    cli_progress_done();
    if (rc) return cli_error_lib(cmd, &err);
    if (!cli_quiet) {
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            size_t any = sum.scored[w] + sum.already[w] + sum.eval_errors[w] + sum.not_computable[w];
            if (!any) continue;
            fprintf(stderr, "score %-12s %6zu scored, %6zu already, %4zu evaluator errors", drift_workload_name(w),
                    sum.scored[w], sum.already[w], sum.eval_errors[w]);
            if (sum.not_computable[w])
                fprintf(stderr, ", %zu not computable: %s", sum.not_computable[w], sum.reason[w]);
            fputc('\n', stderr);
        }
    }
    return CLI_EXIT_PASS;
}

int cli_do_compare(const char *cmd, drift_store *st, const char *base, const char *targ,
                   const drift_compare_opts *o, drift_format fmt, const char *out_path) {
    drift_error err = {0};
    drift_comparison *c = NULL;
    char *text = NULL;
    if (drift_compare_runs(st, base, targ, o, &c, &err)) return cli_error_lib(cmd, &err);
    if (drift_report_comparison(c, st, fmt, &text, &err)) {
        drift_comparison_free(c);
        return cli_error_lib(cmd, &err);
    }
    int rc = cli_write_output(cmd, out_path, text) ? CLI_EXIT_ERROR : (c->pass ? CLI_EXIT_PASS : CLI_EXIT_FAIL);
    free(text);
    drift_comparison_free(c);
    return rc;
}
