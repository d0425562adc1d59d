/* serve_bench.c - throughput of `driftbench serve` and its overhead over the
 * same generation in process.
 *
 *   bench_serve_bench [--model tests/data/models/tiny-qwen2-f16.gguf]
 *                     [--tokens 16,64] [--requests 64] [--threads 1]
 *
 * For each max_tokens value: (1) in process: drift_model_generate of one
 * prompt, the call the server makes (tokenize + generate), mean over the
 * requests; (2) concurrency 1: the same request over loopback HTTP, one
 * after another (curl easy, keep-alive) -> overhead = (http - in process) /
 * in process; (3) concurrency 1, 8, 32 with curl multi (one connection per
 * client, greedy, distinct prompts) -> requests/s, completion tokens/s,
 * mean sequences per decode batch. The server runs in this process with
 * --max-batch 8 and batch invariance on. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/model.h"
#include "driftbench/server.h"
#include "util/util.h"

typedef struct cli {
    CURL *h;
    util_buf resp;
    char body[256];
} cli;

static size_t on_data(char *p, size_t sz, size_t n, void *u) {
    util_buf *b = u;
    return buf_append(b, p, sz * n) ? 0 : sz * n;
}

static void setup(cli *c, const char *url, struct curl_slist *hd) {
    c->resp.len = 0;
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->resp);
}

static long completion_tokens(cli *c) {
    json_t *o = json_loadb(c->resp.data ? c->resp.data : "", c->resp.len, 0, NULL);
    long n = (long)json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens"));
    json_decref(o);
    return n;
}

/* nreq requests with nc concurrent clients; returns seconds, *tokens summed. */
static double run_multi(const char *url, int nc, int nreq, int max_tokens, long *tokens, int *failed) {
    CURLM *mh = curl_multi_init();
    cli *cs = calloc((size_t)nc, sizeof *cs);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    int next = 0, done = 0;
    *tokens = 0;
    *failed = 0;
    double t0 = util_now_ms();
    for (int i = 0; i < nc; i++) {
        cs[i].h = curl_easy_init();
        if (next < nreq) {
            snprintf(cs[i].body, sizeof cs[i].body, "{\"prompt\":\"request %d says\",\"max_tokens\":%d,\"temperature\":0}", next++,
                     max_tokens);
            setup(&cs[i], url, hd);
            curl_multi_add_handle(mh, cs[i].h);
        }
    }
    while (done < nreq) {
        int running;
        curl_multi_perform(mh, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(mh, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            cli *c = NULL;
            for (int i = 0; i < nc; i++)
                if (cs[i].h == m->easy_handle) c = &cs[i];
            long st = 0;
            curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &st);
            if (m->data.result != CURLE_OK || st != 200) (*failed)++;
            else *tokens += completion_tokens(c);
            curl_multi_remove_handle(mh, c->h);
            done++;
            if (next < nreq) {
                snprintf(c->body, sizeof c->body, "{\"prompt\":\"request %d says\",\"max_tokens\":%d,\"temperature\":0}", next++,
                         max_tokens);
                setup(c, url, hd);
                curl_multi_add_handle(mh, c->h);
            }
        }
        if (done < nreq) curl_multi_poll(mh, NULL, 0, 50, NULL);
    }
    double secs = (util_now_ms() - t0) / 1000;
    for (int i = 0; i < nc; i++) {
        curl_easy_cleanup(cs[i].h);
        buf_free(&cs[i].resp);
    }
    free(cs);
    curl_slist_free_all(hd);
    curl_multi_cleanup(mh);
    return secs;
}

int main(int argc, char **argv) {
    const char *model = "tests/data/models/tiny-qwen2-f16.gguf", *toks = "16,64";
    int nreq = 64, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--tokens")) toks = argv[i + 1];
        else if (!strcmp(argv[i], "--requests")) nreq = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    curl_global_init(CURL_GLOBAL_ALL);
    drift_server_opts o;
    drift_server_opts_default(&o);
    o.model_path = model;
    o.profile = "cpu-f32";
    o.threads = threads;
    drift_server *s;
    drift_error err;
    if (drift_server_start(&o, &s, &err)) {
        fprintf(stderr, "server: %s\n", err.msg);
        return 2;
    }
    char spec[64];
    snprintf(spec, sizeof spec, "profile=cpu-f32&threads=%d", threads);
    drift_numeric_profile p;
    drift_model *m;
    if (drift_profile_parse(spec, &p, &err) || drift_model_load(model, &p, &m, &err)) {
        fprintf(stderr, "model: %s\n", err.msg);
        return 2;
    }
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", drift_server_port(s));
    printf("serve_bench: %s, profile %s, max batch %d, %d requests per point\n", model, spec, o.max_batch, nreq);
    char *list = util_strdup(toks), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int mt = atoi(t);
        drift_gen_params gp;
        drift_gen_params_default(&gp);
        gp.max_tokens = mt;
        gp.temperature = 0;
        const char *prompt = "request 0 says";
        cli c;
        memset(&c, 0, sizeof c);
        c.h = curl_easy_init();
        struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
        snprintf(c.body, sizeof c.body, "{\"prompt\":\"%s\",\"max_tokens\":%d,\"temperature\":0}", prompt, mt);
        setup(&c, url, hd);
        curl_easy_perform(c.h); /* warm the connection */
        /* rounds alternate in process / HTTP; the fastest round of each counts
         * (the machine is shared: the minimum is the least disturbed) */
        double in_ms = 1e30, http_ms = 1e30;
        long itok = 0, htok = 0;
        for (int round = 0; round < 5; round++) {
            /* in process: tokenize + generate, as the server's handler and scheduler do */
            itok = 0;
            double t0 = util_now_ms();
            for (int r = 0; r < nreq; r++) {
                int32_t *ids;
                size_t n;
                drift_model_tokenize(m, prompt, strlen(prompt), -1, 0, &ids, &n, &err);
                const int32_t *pp = ids;
                drift_generation g;
                drift_model_generate(m, &pp, &n, 1, &gp, NULL, 1, &g, &err);
                itok += g.n_tokens;
                drift_generation_clear(&g);
                free(ids);
            }
            double ms = (util_now_ms() - t0) / nreq;
            if (round > 0 && ms < in_ms) in_ms = ms; /* round 0 warms up */
            htok = 0;
            t0 = util_now_ms();
            for (int r = 0; r < nreq; r++) {
                c.resp.len = 0;
                curl_easy_perform(c.h);
                htok += completion_tokens(&c);
            }
            ms = (util_now_ms() - t0) / nreq;
            if (round > 0 && ms < http_ms) http_ms = ms;
        }
        curl_easy_cleanup(c.h);
        curl_slist_free_all(hd);
        buf_free(&c.resp);
        printf("max_tokens %d: in process %.3f ms/request (%ld tokens), over HTTP at concurrency 1 %.3f ms/request "
               "(%ld tokens): overhead %.3f ms = %.1f%%\n",
               mt, in_ms, itok / nreq, http_ms, htok / nreq, http_ms - in_ms, 100 * (http_ms - in_ms) / in_ms);
        static const int conc[] = {1, 8, 32};
        for (int k = 0; k < 3; k++) {
            drift_server_stats a, b;
            drift_server_get_stats(s, &a);
            long tokens;
            int failed;
            double secs = run_multi(url, conc[k], nreq, mt, &tokens, &failed);
            drift_server_get_stats(s, &b);
            double per_batch = b.batches > a.batches ? (double)(b.batched_sequences - a.batched_sequences) /
                                                           (double)(b.batches - a.batches)
                                                     : 0;
            printf("  concurrency %2d: %7.1f requests/s  %8.1f tokens/s  %.2f sequences per batch  %d failed\n", conc[k],
                   nreq / secs, tokens / secs, per_batch, failed);
        }
    }
    free(list);
    drift_model_free(m);
    drift_server_stop(s, 10);
    curl_global_cleanup();
    return 0;
}
