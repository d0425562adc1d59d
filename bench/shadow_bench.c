/* shadow_bench.c - what the shadow proxy adds to the primary's latency
 * (issue 39): C concurrent clients (libcurl multi, one connection each,
 * keep-alive) send R chat/completions requests each, first straight to the
 * primary, then through the proxy (the order alternates per round, so a
 * machine that gets busier during the run does not favour one side); every
 * request's latency (time to the whole reply, and to its first byte) is
 * kept, and the percentiles of each side over all rounds are compared.
 *
 *   bench_shadow_bench DIRECT_URL PROXY_URL [CLIENTS=64] [REQUESTS=20] [ROUNDS=3]
 *   (URLs like http://127.0.0.1:PORT; bench/shadow_bench.sh starts the servers)
 *
 * Prints one line per side, "side=direct n=.. errors=.. p50_ms=.. p99_ms=..
 * ttfb_p50_ms=.. ttfb_p99_ms=..", then "added p50_ms=.. p99_ms=.. ratio_p50=..
 * ratio_p99=..". Exit 1 when a request failed (a non-200). */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct client {
    CURL *h;
    int sent;
    char body[256];
} client;

typedef struct side {
    double *total, *ttfb;
    size_t n, cap;
    long errors;
} side;

static size_t sink(char *p, size_t s, size_t n, void *u) {
    (void)p, (void)u;
    return s * n;
}

static void start(client *c, const char *url, struct curl_slist *hdr, int id, int k, int round) {
    snprintf(c->body, sizeof c->body,
             "{\"model\":\"fake\",\"temperature\":0,\"max_tokens\":16,\"messages\":[{\"role\":\"user\","
             "\"content\":\"bench r%d c%d q%d ANSWER=%d\"}]}",
             round, id, k, k);
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 60L);
}

static int run_side(const char *base, int clients, int reqs, int round, side *sd) {
    char url[512];
    snprintf(url, sizeof url, "%s/v1/chat/completions", base);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    CURLM *m = curl_multi_init();
    client *cs = calloc((size_t)clients, sizeof *cs);
    if (!m || !cs || !hdr) return -1;
    for (int i = 0; i < clients; i++) {
        cs[i].h = curl_easy_init();
        curl_easy_setopt(cs[i].h, CURLOPT_PRIVATE, &cs[i]);
        start(&cs[i], url, hdr, i, 0, round);
        curl_multi_add_handle(m, cs[i].h);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            client *c;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
            long code = 0;
            curl_off_t tt = 0, tf = 0;
            curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
            curl_easy_getinfo(c->h, CURLINFO_TOTAL_TIME_T, &tt);
            curl_easy_getinfo(c->h, CURLINFO_STARTTRANSFER_TIME_T, &tf);
            if (msg->data.result != CURLE_OK || code != 200) sd->errors++;
            if (sd->n == sd->cap) {
                sd->cap = sd->cap ? sd->cap * 2 : 4096;
                sd->total = realloc(sd->total, sd->cap * sizeof *sd->total);
                sd->ttfb = realloc(sd->ttfb, sd->cap * sizeof *sd->ttfb);
                if (!sd->total || !sd->ttfb) return -1;
            }
            sd->total[sd->n] = (double)tt / 1000.0;
            sd->ttfb[sd->n++] = (double)tf / 1000.0;
            curl_multi_remove_handle(m, c->h);
            if (++c->sent < reqs) {
                start(c, url, hdr, (int)(c - cs), c->sent, round);
                curl_multi_add_handle(m, c->h);
                running = 1;
            }
        }
        if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < clients; i++) curl_easy_cleanup(cs[i].h);
    free(cs);
    curl_multi_cleanup(m);
    curl_slist_free_all(hdr);
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile by the nearest rank. */
static double quantile(double *v, size_t n, double q) {
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_d);
    size_t k = (size_t)(q * (double)n + 0.999999);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return v[k - 1];
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DIRECT_URL PROXY_URL [CLIENTS] [REQUESTS] [ROUNDS]\n", argv[0]);
        return 2;
    }
    int clients = argc > 3 ? atoi(argv[3]) : 64, reqs = argc > 4 ? atoi(argv[4]) : 20,
        rounds = argc > 5 ? atoi(argv[5]) : 3;
    if (clients < 1 || reqs < 1 || rounds < 1) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    side sd[2] = {{0}, {0}};
    const char *url[2] = {argv[1], argv[2]};
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) {
            int which = (r % 2) ? 1 - k : k;
            if (run_side(url[which], clients, reqs, r, &sd[which])) return 2;
        }
    const char *names[2] = {"direct", "proxy"};
    double p50[2], p99[2];
    for (int k = 0; k < 2; k++) {
        double f50 = quantile(sd[k].ttfb, sd[k].n, 0.5), f99 = quantile(sd[k].ttfb, sd[k].n, 0.99);
        p50[k] = quantile(sd[k].total, sd[k].n, 0.5);
        p99[k] = quantile(sd[k].total, sd[k].n, 0.99);
        printf("side=%s n=%zu errors=%ld p50_ms=%.3f p99_ms=%.3f ttfb_p50_ms=%.3f ttfb_p99_ms=%.3f\n", names[k],
               sd[k].n, sd[k].errors, p50[k], p99[k], f50, f99);
    }
    printf("added p50_ms=%.3f p99_ms=%.3f ratio_p50=%.3f ratio_p99=%.3f (clients=%d requests=%d rounds=%d)\n",
           p50[1] - p50[0], p99[1] - p99[0], p50[0] > 0 ? p50[1] / p50[0] : 0, p99[0] > 0 ? p99[1] / p99[0] : 0,
           clients, reqs, rounds);
    long errs = sd[0].errors + sd[1].errors;
    for (int k = 0; k < 2; k++) {
        free(sd[k].total);
        free(sd[k].ttfb);
    }
    curl_global_cleanup();
    return errs ? 1 : 0;
}
