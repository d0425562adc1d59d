/* loadgen.c - load generator for `driftbench serve` tests and benchmarks:
 * C concurrent clients (libcurl multi, one connection each) send R requests
 * each to an OpenAI-compatible server; every K-th request is invalid (a
 * rotating set: malformed JSON, unknown model, negative max_tokens, wrong
 * type, huge n, unknown path, wrong method). A valid request must get 200
 * with a choice; an invalid one its 4xx with an error body. Anything else is
 * "unexpected" and makes the exit status 1.
 *
 *   loadgen URL CLIENTS REQUESTS_PER_CLIENT INVALID_EVERY [MAX_TOKENS]
 *   (URL = http://127.0.0.1:PORT; INVALID_EVERY 0 = all valid)
 *
 * Prints one line: "ok=N refused=N unexpected=N overloaded=N seconds=S
 * rps=R tokens=T tok_per_s=X". */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct client {
    CURL *h;
    char *resp;
    size_t len;
    int kind; /* -1 valid, else index into BAD */
    int sent;
    struct curl_slist *hdr;
} client;

typedef struct bad_req {
    const char *path;
    const char *method;
    const char *body;
    long status;
} bad_req;

static const bad_req BAD[] = {
    {"/v1/completions", "POST", "{\"prompt\": \"x\", ", 400},
    {"/v1/completions", "POST", "{\"model\":\"no-such-model\",\"prompt\":\"x\",\"max_tokens\":2}", 404},
    {"/v1/completions", "POST", "{\"prompt\":\"x\",\"max_tokens\":-5}", 400},
    {"/v1/completions", "POST", "{\"prompt\":\"x\",\"temperature\":\"hot\"}", 400},
    {"/v1/completions", "POST", "{\"prompt\":\"x\",\"n\":100000}", 400},
    {"/v1/nowhere", "POST", "{}", 404},
    {"/v1/completions", "GET", NULL, 405},
    {"/v1/chat/completions", "POST", "{\"messages\":\"hi\"}", 400},
};
#define NBAD (sizeof BAD / sizeof *BAD)

static size_t on_data(char *p, size_t sz, size_t n, void *u) {
    client *c = u;
    size_t k = sz * n;
    if (c->len + k > (8u << 20)) return 0;
    char *r = realloc(c->resp, c->len + k + 1);
    if (!r) return 0;
    memcpy(r + c->len, p, k);
    c->resp = r;
    c->len += k;
    c->resp[c->len] = 0;
    return k;
}

static const char *g_url;
static int g_max_tokens = 4;
static char g_valid[512];

static void start(CURLM *mh, client *c, long seq, int invalid_every) {
    c->len = 0;
    if (c->resp) c->resp[0] = 0;
    c->kind = invalid_every > 0 && seq % invalid_every == invalid_every - 1 ? (int)((seq / invalid_every) % (long)NBAD) : -1;
    char url[512];
    const char *path = c->kind < 0 ? "/v1/completions" : BAD[c->kind].path;
    snprintf(url, sizeof url, "%s%s", g_url, path);
    curl_easy_reset(c->h);
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdr);
    if (c->kind < 0 || BAD[c->kind].body) {
        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, c->kind < 0 ? g_valid : BAD[c->kind].body);
    }
    if (c->kind >= 0 && !strcmp(BAD[c->kind].method, "GET")) curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
    curl_multi_add_handle(mh, c->h);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: loadgen URL CLIENTS REQUESTS_PER_CLIENT INVALID_EVERY [MAX_TOKENS]\n");
        return 2;
    }
    g_url = argv[1];
    int nc = atoi(argv[2]), per = atoi(argv[3]), inv = atoi(argv[4]);
    if (argc > 5) g_max_tokens = atoi(argv[5]);
    if (nc < 1 || nc > 1024 || per < 1) return 2;
    curl_global_init(CURL_GLOBAL_ALL);
    CURLM *mh = curl_multi_init();
    client *cs = calloc((size_t)nc, sizeof *cs);
    long total = (long)nc * per, next = 0, finished = 0;
    long ok = 0, refused = 0, unexpected = 0, overloaded = 0, tokens = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nc; i++) {
        cs[i].h = curl_easy_init();
        cs[i].hdr = curl_slist_append(NULL, "Content-Type: application/json");
    }
    for (int i = 0; i < nc && next < total; i++) {
        snprintf(g_valid, sizeof g_valid, "{\"prompt\":\"load test %d\",\"max_tokens\":%d,\"temperature\":0}", i % 4,
                 g_max_tokens);
        start(mh, &cs[i], next++, inv);
    }
    while (finished < total) {
        int running;
        curl_multi_perform(mh, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(mh, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            client *c = NULL;
            for (int i = 0; i < nc; i++)
                if (cs[i].h == msg->easy_handle) c = &cs[i];
            long status = 0;
            curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
            CURLcode rc = msg->data.result;
            curl_multi_remove_handle(mh, c->h);
            finished++;
            json_t *o = rc == CURLE_OK && c->resp ? json_loads(c->resp, 0, NULL) : NULL;
            if (status == 503) {
                overloaded++;
            } else if (c->kind < 0) {
                json_t *ch = json_array_get(json_object_get(o, "choices"), 0);
                if (rc == CURLE_OK && status == 200 && json_is_string(json_object_get(ch, "text"))) {
                    ok++;
                    tokens += (long)json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens"));
                } else {
                    unexpected++;
                    fprintf(stderr, "valid request: curl %d status %ld body %.200s\n", (int)rc, status, c->resp ? c->resp : "");
                }
            } else {
                json_t *err = json_object_get(json_object_get(o, "error"), "message");
                if (rc == CURLE_OK && status == BAD[c->kind].status && json_is_string(err)) {
                    refused++;
                } else {
                    unexpected++;
                    fprintf(stderr, "invalid request %d: curl %d status %ld (want %ld) body %.200s\n", c->kind, (int)rc,
                            status, BAD[c->kind].status, c->resp ? c->resp : "");
                }
            }
            json_decref(o);
            if (next < total) {
                snprintf(g_valid, sizeof g_valid, "{\"prompt\":\"load test %ld\",\"max_tokens\":%d,\"temperature\":0}",
                         next % 4, g_max_tokens);
                start(mh, c, next++, inv);
            }
        }
        if (finished < total) curl_multi_poll(mh, NULL, 0, 100, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("ok=%ld refused=%ld unexpected=%ld overloaded=%ld seconds=%.3f rps=%.1f tokens=%ld tok_per_s=%.1f\n", ok,
           refused, unexpected, overloaded, secs, (double)total / secs, tokens, (double)tokens / secs);
    fflush(stdout);
    for (int i = 0; i < nc; i++) {
        curl_easy_cleanup(cs[i].h);
        curl_slist_free_all(cs[i].hdr);
        free(cs[i].resp);
    }
    free(cs);
    curl_multi_cleanup(mh);
    curl_global_cleanup();
    return unexpected ? 1 : 0;
}
