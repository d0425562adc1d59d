/* http.c - the OpenAI-compatible HTTP target.
 *
 * Spec: http[s]://[USER:PASSWORD@]HOST:PORT/PATH?model=NAME[&api=chat|completions]
 * [&embed_model=NAME][&api_key_env=NAME][&allow_insecure_key=1][&max_reply_mb=N]
 * (PATH defaults to /v1; api defaults to completions; a reply body past
 * max_reply_mb, default 16, fails unparsed: http_reply.c). Requests go to
 * PATH/completions or PATH/chat/completions; embeddings to PATH/embeddings.
 *
 * Credentials: the API key is never written in the spec (api_key=, key=,
 * token= and password= are refused, naming api_key_env; an api_key_env
 * value that is no variable's name, or names an unset variable in lower
 * case, may be the key given by mistake: refused without showing it): it
 * is read from
 * the environment variable api_key_env names, else taken from
 * opts.api_key, else from opts.default_key_env ($OPENAI_API_KEY), and
 * sent as "Authorization: Bearer KEY"; a USER:PASSWORD in the URL is sent
 * as HTTP basic authentication. Where they may go (resolve_key):
 *
 *     scheme, host                      named key / URL password   default variable's key
 *     https://, any host                sent                       sent
 *     http://, this machine             sent                       sent
 *     http://, any other host           refused at open, unless    not sent
 *                                       allow_insecure_key=1
 *
 * "This machine" is decided from the URL alone, before any connection:
 * localhost, 127.0.0.0/8, ::1 (or ::ffff:127.x.y.z); any other name or
 * address is another host, even one that would resolve here. A local
 * target is reached directly, never through a proxy of the environment
 * (http_proxy), which could carry the key elsewhere. The refusal is
 * DRIFT_ERR_INVALID naming the target (its secrets redacted, as in every
 * message: drift_error_set) and the option.
 *
 * Request control (opts.request, target.h; issue 37): the system prompt
 * and the extra body go into every generation request's JSON
 * (http_reply.c; the extra body is checked when the target opens: a JSON
 * object without the keys that say what is asked); the headers are
 * resolved at open (eng_http_headers_add: "env:VAR" values read then, an
 * unset VAR refused naming it) and sent with every request of the target,
 * generation, embeddings and the stack probes alike. A header that
 * carries credentials (Authorization, Proxy-Authorization, Cookie,
 * X-Api-Key, Api-Key, or any value read from the environment) follows the
 * key's rule of the table above; a user's Authorization header is the
 * credential (no key of ours goes with it; with api_key_env too: refused).
 * Header values are never shown in a message nor kept past the libcurl
 * list. The prompt template is the pipeline's (run.c renders with it).
 *
 * One libcurl multi handle per target and a pool of easy handles ("slots"),
 * one per request in flight, kept across generate() calls so connections
 * stay alive and buffers are reused: the per-request cost is one JSON render,
 * one transfer and one JSON parse. A slot owns its request from the first
 * attempt to the final outcome:
 *
 *     IDLE --take next request--> ACTIVE --reply ok--> callback --> IDLE
 *                                   |   \--permanent failure--> callback --> IDLE
 *                                   \--retryable failure--> WAITING --due--> ACTIVE
 *
 * Retryable: transport failures (refused, reset, timeout), HTTP 429, 500, 502,
 * 503, 504, and empty / malformed / choice-less replies. The delay before retry
 * k (1-based) is "full jitter": uniform in [0, min(backoff_max, base * 2^(k-1))],
 * except that a Retry-After header on 429/503 (seconds or HTTP date) sets the
 * delay to its value, capped by backoff_max. Other non-2xx statuses and a
 * non-JSON content type fail at once. Everything runs on the calling thread,
 * callbacks included; a target is not safe to share between threads.
 *
 * A failed request's outcome says why (drift_answer.cause, types.h), decided
 * where the last attempt failed: libcurl's code (eng_http_transport_cause:
 * no connection, timeout, TLS, connection lost), the HTTP status (HTTP, with
 * http_status), or the reply (bad reply: content type, size, parse).
 *
 * Cancellation (opts.cancel, see target.h): the generate loop asks the hook
 * before it starts anything and after every wait, and never waits longer
 * than CANCEL_POLL_MS while a hook is set; libcurl's progress callback asks
 * it too, which aborts a blocking embed transfer. On cancel every slot is
 * dropped (its transfer aborted, its back-off forgotten) without a callback:
 * an unfinished request is no outcome at all, so the caller stores nothing
 * for it and a resumed run asks it again. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <ctype.h>
#include <netinet/in.h>
#include <strings.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/http_internal.h"
#include "engine/target_impl.h"

/* Longest wait between two looks at the cancel hook (when there is one). */
#define CANCEL_POLL_MS 100.0

enum slot_state { SLOT_IDLE = 0, SLOT_ACTIVE, SLOT_WAITING };

typedef struct http_slot {
    CURL *easy;
    util_buf body;          /* reply body of the current attempt */
    util_buf req;           /* request JSON of the current request */
    int too_big;             /* reply passed max_body */
    size_t max_body;         /* the target's largest reply (max_reply_mb; http_reply.c) */
    enum slot_state state;
    size_t ri;               /* index into the reqs[] of the current generate() */
    int attempts;            /* attempts made so far for this request */
    double started_ms;       /* start of the current attempt */
    double due_ms;           /* WAITING: when to start the next attempt */
    char errbuf[CURL_ERROR_SIZE];
} http_slot;

typedef struct http_impl {
    char *url_gen;           /* .../completions or .../chat/completions */
    char *url_embed;         /* .../embeddings */
    char *model;
    char *embed_model;
    char *key_env;           /* api_key_env=NAME, or NULL */
    int allow_insecure;      /* allow_insecure_key=1 */
    int https;               /* the URL's scheme is https */
    int local;               /* the URL's host is this machine (see the top) */
    int has_password;        /* the URL holds USER:PASSWORD@ */
    CURLM *multi;
    struct curl_slist *headers;
    http_slot *slots;
    int n_slots;
    util_rng rng;           /* backoff jitter */
    size_t max_reply;       /* largest reply body: ENG_HTTP_MAX_BODY_BYTES or max_reply_mb */
    char *url_base;          /* the spec's URL without its query (e.g. http://h:p/v1) */
    char *url_root;          /* scheme://host:port of it (the probes of eng_http_detect) */
    int no_detect;           /* detect=0: never ask the server what it is */
    int detected;            /* eng_http_detect ran */
    json_t *extra;           /* the request control's extra body (NULL: none) */
    int extra_seed;          /* it sets "seed": replicates do not vary it */
} http_impl;

/* ---------- spec parsing ---------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
static void curl_init_once(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Percent-decodes s[0..n) ('+' is a space); NULL on a bad escape or NUL byte. */
static char *url_decode(const char *s, size_t n) {
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int a = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1;
            int b = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
            if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                free(out);
                return NULL;
            }
            *o++ = (char)(a * 16 + b);
            i += 2;
        } else {
            *o++ = s[i] == '+' ? ' ' : s[i];
        }
    }
    *o = '\0';
    return out;
}

static void impl_free(http_impl *h) {
    if (!h) return;
    free(h->url_base);
    free(h->url_root);
    for (int i = 0; i < h->n_slots; i++) {
        if (h->slots[i].easy) {
            if (h->multi && h->slots[i].state == SLOT_ACTIVE) curl_multi_remove_handle(h->multi, h->slots[i].easy);
            curl_easy_cleanup(h->slots[i].easy);
        }
        buf_free(&h->slots[i].body);
        buf_free(&h->slots[i].req);
    }
    free(h->slots);
    if (h->multi) curl_multi_cleanup(h->multi);
    curl_slist_free_all(h->headers);
    free(h->url_gen);
    free(h->url_embed);
    free(h->model);
    free(h->embed_model);
    free(h->key_env);
    json_decref(h->extra);
    free(h);
}

/* 1 when name is a portable environment variable name ([A-Za-z_][A-Za-z0-9_]*). */
static int env_name_ok(const char *name) {
    if (!name[0] || isdigit((unsigned char)name[0])) return 0;
    for (const char *c = name; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '_')) return 0;
    return 1;
}

/* 1 when the parameter name q[0..n) would hold a secret in the spec. */
static int secret_param(const char *q, size_t n) {
    static const char *const names[] = {"api_key", "apikey", "key", "token", "password", "access_token", "secret"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && !strncasecmp(q, names[i], n)) return 1;
    return 0;
}

/* A bad api_key_env value may be the key itself: the message shows
 * neither it nor the spec, only the spec's record form (without
 * api_key_env, util_target_record). */
static drift_status key_env_refused(const char *spec, drift_error *err) {
    char *shown = util_target_record(spec);
    drift_error_set(err, DRIFT_ERR_INVALID,
                    "target '%s': api_key_env takes the name of an environment variable (letters, digits, '_'), "
                    "not the key itself (its value is not shown)",
                    shown ? shown : "?");
    free(shown);
    return DRIFT_ERR_INVALID;
}

/* Checks every api_key_env value of the spec's query before any message
 * quotes the spec (parse_base's, parse_query's), so that a key given there
 * by mistake is refused unseen. */
static drift_status check_key_env(const char *spec, drift_error *err) {
    for (const char *p = strchr(spec, '?'); p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, "api_key_env=", 12)) continue;
        const char *v = p + 13;
        size_t n = strcspn(v, "&");
        int ok = n > 0 && !isdigit((unsigned char)v[0]);
        for (size_t i = 0; i < n && ok; i++) ok = isalnum((unsigned char)v[i]) || v[i] == '_';
        if (!ok) return key_env_refused(spec, err);
    }
    return DRIFT_OK;
}

/* Parses the query string into h and t->api. */
static drift_status parse_query(drift_target *t, http_impl *h, const char *spec, const char *q, drift_error *err) {
    int have_api = 0;
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        if (len == 0) {
            q = amp ? amp + 1 : NULL;
            continue;
        }
        if (!eq)
            return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': parameter '%.*s' has no value", spec,
                                   (int)len, q);
        size_t klen = (size_t)(eq - q);
        char *val = url_decode(eq + 1, len - klen - 1);
        if (!val)
            return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': parameter '%.*s' has a bad %%-escape",
                                   spec, (int)klen, q);
        char **dst = NULL;
        int rp = 0;
        if (secret_param(q, klen)) {
            free(val);
            /* the spec is not quoted: it holds the secret */
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "target: parameter '%.*s' would write a secret into the spec (and into shell "
                                   "history, process lists and logs): put the key in an environment variable and "
                                   "name it with api_key_env=NAME",
                                   (int)klen, q);
        } else if (klen == 11 && !memcmp(q, "api_key_env", 11)) {
            if (!env_name_ok(val)) { /* checked before (check_key_env): here only when %-escaped */
                free(val);
                return key_env_refused(spec, err);
            }
            dst = &h->key_env;
        } else if (klen == 18 && !memcmp(q, "allow_insecure_key", 18)) {
            int yes = !strcmp(val, "1"), no = !strcmp(val, "0");
            free(val);
            if (!yes && !no)
                return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': allow_insecure_key: expected 0 or 1",
                                       spec);
            h->allow_insecure = yes;
        } else if ((rp = eng_http_reply_param(spec, q, klen, val, &h->max_reply, err)) != 0) {
            free(val);
            if (rp < 0) return DRIFT_ERR_INVALID;
        } else if (klen == 6 && !memcmp(q, "detect", 6)) {
            int yes = !strcmp(val, "1"), no = !strcmp(val, "0");
            free(val);
            if (!yes && !no)
                return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': detect: expected 0 or 1", spec);
            h->no_detect = no;
        } else if (klen == 5 && !memcmp(q, "model", 5)) {
            dst = &h->model;
        } else if (klen == 11 && !memcmp(q, "embed_model", 11)) {
            dst = &h->embed_model;
        } else if (klen == 3 && !memcmp(q, "api", 3)) {
            if (have_api) {
                free(val);
                return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': parameter 'api' given twice", spec);
            }
            have_api = 1;
            if (!strcmp(val, "chat")) {
                t->api = DRIFT_API_CHAT;
            } else if (!strcmp(val, "completions") || !strcmp(val, "completion")) {
                t->api = DRIFT_API_COMPLETIONS;
            } else {
                drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': api=%s: expected chat or completions", spec, val);
                free(val);
                return DRIFT_ERR_INVALID;
            }
            free(val);
        } else {
            free(val);
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "target '%s': unknown parameter '%.*s' (known: model, api, embed_model, "
                                   "api_key_env, allow_insecure_key, max_reply_mb, detect)",
                                   spec, (int)klen, q);
        }
        if (dst) {
            if (*dst) {
                free(val);
                return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': parameter '%.*s' given twice", spec,
                                       (int)klen, q);
            }
            *dst = val;
        }
        q = amp ? amp + 1 : NULL;
    }
    if (!h->model || !*h->model)
        return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': no model (add ?model=NAME)", spec);
    if (h->embed_model && !*h->embed_model)
        return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': embed_model is empty", spec);
    return DRIFT_OK;
}

/* 1 when host (libcurl's CURLUPART_HOST: an IPv6 address in brackets) is
 * this machine by its name or address (see the top); no lookup is made. */
static int host_is_local(const char *host) {
    char b[256];
    size_t n = strlen(host);
    if (n == 0 || n >= sizeof b) return 0;
    memcpy(b, host, n + 1);
    if (b[n - 1] == '.') b[--n] = '\0'; /* "localhost." */
    if (!strcasecmp(b, "localhost")) return 1;
    struct in_addr a4;
    if (inet_pton(AF_INET, b, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (n > 2 && b[0] == '[' && b[n - 1] == ']') {
        b[n - 1] = '\0';
        char *zone = strchr(b, '%');
        if (zone) *zone = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, b + 1, &a6) != 1) return 0;
        return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    }
    return 0;
}

/* Validates the URL part with libcurl's parser and builds the endpoint URLs. */
static drift_status parse_base(http_impl *h, const char *spec, const char *base, drift_error *err) {
    drift_status st = DRIFT_OK;
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL, *full = NULL;
    if (!u) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, base, 0);
    if (uc) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': bad URL: %s", spec, curl_url_strerror(uc));
        goto done;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) || !host || !*host) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': URL has no host", spec);
        goto done;
    }
    h->local = host_is_local(host);
    char *scheme = NULL, *password = NULL;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && scheme) h->https = !strcasecmp(scheme, "https");
    if (curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK && password) h->has_password = *password != 0;
    curl_free(scheme);
    curl_free(password);
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (*end || p < 1 || p > 65535) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': bad port '%s'", spec, port);
            goto done;
        }
    }
    char *frag = NULL;
    if (curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK && frag) {
        curl_free(frag);
        st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': URL has a #fragment", spec);
        goto done;
    }
    if (curl_url_get(u, CURLUPART_PATH, &path, 0) || !path) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': URL has no path", spec);
        goto done;
    }
    size_t pl = strlen(path);
    while (pl > 0 && path[pl - 1] == '/') path[--pl] = '\0';
    if (curl_url_set(u, CURLUPART_PATH, pl ? path : "/v1", 0) || curl_url_get(u, CURLUPART_URL, &full, 0)) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': cannot rebuild URL", spec);
        goto done;
    }
    h->url_gen = NULL;
    h->url_base = util_strdup(full);
    char *root = NULL;
    if (!curl_url_set(u, CURLUPART_PATH, "/", 0) && !curl_url_get(u, CURLUPART_URL, &root, 0) && root) {
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/') root[--rl] = '\0';
        h->url_root = util_strdup(root);
    }
    curl_free(root);
    if (!h->url_base || !h->url_root) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    h->url_embed = util_asprintf("%s/embeddings", full);
    if (!h->url_embed) st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    else {
        /* the generation URL depends on api, set by the caller afterwards */
        h->url_gen = util_strdup(full);
        if (!h->url_gen) st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
done:
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(full);
    curl_url_cleanup(u);
    return st;
}

/* ---------- transfers ---------- */

static size_t on_body(char *p, size_t size, size_t nmemb, void *user) {
    http_slot *s = user;
    size_t n = size * nmemb;
    int rc = eng_http_body_append(&s->body, p, n, s->max_body);
    s->too_big = rc == 1;
    return rc ? 0 : n; /* 0 aborts the transfer with CURLE_WRITE_ERROR */
}

/* libcurl's progress callback: nonzero aborts the transfer with
 * CURLE_ABORTED_BY_CALLBACK. Installed only when the target has a cancel
 * hook; libcurl calls it often during a transfer and about once a second
 * while nothing moves. */
static int on_xferinfo(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return eng_target_cancelled(user);
}

/* Sets the options of an easy handle that do not change between requests. */
static int easy_setup(drift_target *t, http_impl *h, http_slot *s) {
    if (!s->easy) s->easy = curl_easy_init();
    CURL *e = s->easy;
    if (!e) return -1;
    const drift_target_opts *o = &t->opts;
    int bad = 0;
    s->max_body = h->max_reply;
    bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_WRITEDATA, s) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_PRIVATE, s) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->headers) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)ceil(o->connect_timeout_s * 1000.0)) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ceil(o->read_timeout_s * 1000.0)) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_POST, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(e, CURLOPT_USERAGENT, "driftbench/" DRIFT_VERSION) != CURLE_OK;
    if (h->local) bad |= curl_easy_setopt(e, CURLOPT_NOPROXY, "*") != CURLE_OK; /* never via a proxy: see the top */
    if (o->cancel) {
        bad |= curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_xferinfo) != CURLE_OK;
        bad |= curl_easy_setopt(e, CURLOPT_XFERINFODATA, t) != CURLE_OK;
        bad |= curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L) != CURLE_OK;
    }
    return bad ? -1 : 0;
}

/* Makes sure at least n slots exist, each with a configured easy handle.
 * Called only while no transfer is in flight: growing the array may move the
 * slots, so every existing handle is re-pointed at its slot's new address. */
static int ensure_slots(drift_target *t, http_impl *h, int n) {
    if (n <= h->n_slots) return 0;
    http_slot *ns = realloc(h->slots, (size_t)n * sizeof *ns);
    if (!ns) return -1;
    h->slots = ns;
    int old = h->n_slots;
    memset(&ns[old], 0, (size_t)(n - old) * sizeof *ns);
    h->n_slots = n;
    for (int i = 0; i < n; i++) {
        if (i < old) {
            curl_easy_setopt(ns[i].easy, CURLOPT_WRITEDATA, &ns[i]);
            curl_easy_setopt(ns[i].easy, CURLOPT_PRIVATE, &ns[i]);
            curl_easy_setopt(ns[i].easy, CURLOPT_ERRORBUFFER, ns[i].errbuf);
        } else if (easy_setup(t, h, &ns[i])) {
            return -1;
        }
    }
    return 0;
}

/* Outcome of one attempt. */
typedef struct attempt_outcome {
    int ok;                  /* 2xx with a JSON-looking body: ready to parse */
    int retryable;
    drift_fail_cause cause;  /* !ok: why */
    double retry_after_s;    /* from Retry-After on 429/503; < 0 if none */
    long status;             /* HTTP status, 0 when no reply */
    char head[160];          /* "HTTP 500", "timeout after 300.0 s", ... */
    char tail[256];          /* ": <body excerpt>" or "" */
} attempt_outcome;

static int retryable_curl(CURLcode rc) {
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_NOT_BUILT_IN:
    case CURLE_WRITE_ERROR: /* our own abort: reply too big */
    case CURLE_ABORTED_BY_CALLBACK: /* cancelled: never retried (and never reported) */
        return 0;
    default: return 1;
    }
}

/* See http_internal.h. */
drift_fail_cause eng_http_transport_cause(int curl_code, int connected) {
    switch ((CURLcode)curl_code) {
    case CURLE_OK: return DRIFT_FAIL_NONE;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return DRIFT_FAIL_CONNECT;
    case CURLE_OPERATION_TIMEDOUT: return connected ? DRIFT_FAIL_TIMEOUT : DRIFT_FAIL_CONNECT;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED: return DRIFT_FAIL_TLS;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return DRIFT_FAIL_LOST;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_FILESIZE_EXCEEDED: return DRIFT_FAIL_REPLY;
    default: return DRIFT_FAIL_OTHER;
    }
}

static int retryable_status(long st) { return st == 429 || st == 500 || st == 502 || st == 503 || st == 504; }

/* Classifies a finished transfer (transport result + status + headers). */
static void classify(drift_target *t, http_slot *s, CURLcode rc, attempt_outcome *o) {
    memset(o, 0, sizeof *o);
    o->retry_after_s = -1;
    if (rc != CURLE_OK) {
        o->retryable = retryable_curl(rc);
        curl_off_t connect_us = 0;
        curl_easy_getinfo(s->easy, CURLINFO_CONNECT_TIME_T, &connect_us);
        o->cause = eng_http_transport_cause(rc, connect_us != 0);
        if (s->too_big) {
            snprintf(o->head, sizeof o->head, "reply too large: over %zu MiB (max_reply_mb on the target raises it)",
                     s->max_body >> 20);
            o->retryable = 0;
            o->cause = DRIFT_FAIL_REPLY;
        } else if (rc == CURLE_OPERATION_TIMEDOUT) {
            if (connect_us == 0)
                snprintf(o->head, sizeof o->head, "connect timeout after %.1f s", t->opts.connect_timeout_s);
            else
                snprintf(o->head, sizeof o->head, "timeout after %.1f s", t->opts.read_timeout_s);
        } else {
            snprintf(o->head, sizeof o->head, "%s: %s", rc == CURLE_COULDNT_CONNECT ? "connection failed" : "transfer failed",
                     s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc));
        }
        return;
    }
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &o->status);
    if (o->status < 200 || o->status > 299) {
        char msg[220];
        o->retryable = retryable_status(o->status);
        o->cause = DRIFT_FAIL_HTTP;
        snprintf(o->head, sizeof o->head, "HTTP %ld", o->status);
        if (o->retryable) {
            /* the first 200 bytes of the body, as is (made printable) */
            size_t n = s->body.len < 200 ? s->body.len : 200;
            size_t k = 0;
            for (size_t i = 0; i < n && k + 1 < sizeof msg; i++) {
                unsigned char ch = (unsigned char)s->body.data[i];
                msg[k++] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
            }
            msg[k] = '\0';
            if (n == 0) snprintf(msg, sizeof msg, "(empty body)");
            if (o->status == 429 || o->status == 503) {
                curl_off_t ra = -1;
                if (curl_easy_getinfo(s->easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
                    o->retry_after_s = (double)ra;
            }
        } else {
            eng_http_error_message(s->body.data, s->body.len, msg, sizeof msg);
        }
        snprintf(o->tail, sizeof o->tail, ": %s", msg);
        return;
    }
    char *ctype = NULL;
    curl_easy_getinfo(s->easy, CURLINFO_CONTENT_TYPE, &ctype);
    if (ctype && !strcasestr(ctype, "json")) {
        snprintf(o->head, sizeof o->head, "unexpected content-type %.100s", ctype);
        o->cause = DRIFT_FAIL_REPLY;
        return;
    }
    o->ok = 1;
}

/* Full-jitter backoff before retry number `attempt` (1 = first retry). */
static double backoff_s(drift_target *t, http_impl *h, int attempt, double retry_after_s) {
    const drift_target_opts *o = &t->opts;
    if (retry_after_s >= 0) return retry_after_s < o->backoff_max_s ? retry_after_s : o->backoff_max_s;
    double cap = o->backoff_base_s * ldexp(1.0, attempt - 1 < 60 ? attempt - 1 : 60);
    if (cap > o->backoff_max_s) cap = o->backoff_max_s;
    return util_rng_uniform(&h->rng) * cap;
}

/* Composes the final error: "HTTP 500 after 5 attempts: body", "timeout after 2.0 s (3 attempts)". */
static char *final_error(const attempt_outcome *o, int attempts) {
    if (attempts <= 1) return util_asprintf("%s%s", o->head, o->tail);
    if (o->tail[0]) return util_asprintf("%s after %d attempts%s", o->head, attempts, o->tail);
    return util_asprintf("%s (%d attempts)", o->head, attempts);
}

/* ---------- generate ---------- */

static drift_status start_attempt(http_impl *h, http_slot *s) {
    s->body.len = 0;
    if (s->body.data) s->body.data[0] = '\0';
    s->too_big = 0;
    s->errbuf[0] = '\0';
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->req.data);
    curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->req.len);
    s->started_ms = util_now_ms();
    s->state = SLOT_ACTIVE;
    s->attempts++;
    if (curl_multi_add_handle(h->multi, s->easy) != CURLM_OK) return DRIFT_ERR_HTTP;
    return DRIFT_OK;
}

static void abandon_all(http_impl *h) {
    for (int i = 0; i < h->n_slots; i++) {
        if (h->slots[i].state == SLOT_ACTIVE) curl_multi_remove_handle(h->multi, h->slots[i].easy);
        h->slots[i].state = SLOT_IDLE;
    }
}

/* The error of a cancelled generate; the caller abandons the slots. */
static drift_status cancelled(drift_error *err, size_t done, size_t n) {
    return drift_error_set(err, DRIFT_ERR_CANCELLED, "generate cancelled: %zu of %zu requests unfinished", n - done,
                           n);
}

/* Sleeps seconds, in slices, until done or the cancel hook fires. Returns 1
 * when cancelled. */
static int sleep_unless_cancelled(drift_target *t, double seconds) {
    double end = util_now_ms() + seconds * 1000.0;
    for (;;) {
        if (eng_target_cancelled(t)) return 1;
        double left = end - util_now_ms();
        if (left <= 0) return 0;
        if (t->opts.cancel && left > CANCEL_POLL_MS) left = CANCEL_POLL_MS;
        usleep((useconds_t)(left * 1000.0));
    }
}

/* generate, and send_raw when bodies is not NULL: request i's body is then
 * bodies[i] as it is (no template, no seed) and an answer's text is the
 * whole reply body, once it parsed as a reply (target.h). */
static drift_status http_send(drift_target *t, const drift_gen_request *reqs, size_t n,
                              const drift_gen_params *params, const char *const *bodies, drift_result_fn cb,
                              void *user, drift_error *err) {
    http_impl *h = t->impl;
    if (n == 0) return DRIFT_OK;
    int ns = t->opts.concurrency;
    if ((size_t)ns > n) ns = (int)n;
    if (ensure_slots(t, h, ns)) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for %d connections", ns);
    for (int i = 0; i < h->n_slots; i++) {
        h->slots[i].state = SLOT_IDLE;
        curl_easy_setopt(h->slots[i].easy, CURLOPT_URL, h->url_gen);
    }
    json_t *tmpl = bodies ? NULL : eng_http_request_template(t->api, h->model, params, h->extra);
    if (!tmpl && !bodies) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory building the request template");

    drift_status st = DRIFT_OK;
    size_t next = 0, done = 0;
    drift_answer res;
    while (done < n) {
        /* 0. the caller may have asked to stop while we waited */
        if (eng_target_cancelled(t)) {
            st = cancelled(err, done, n);
            goto out;
        }
        /* 1. give idle slots new requests; restart waiting slots that are due */
        double now = util_now_ms();
        for (int i = 0; i < ns; i++) {
            http_slot *s = &h->slots[i];
            if (s->state == SLOT_WAITING && s->due_ms <= now) {
                if (start_attempt(h, s)) {
                    st = drift_error_set(err, DRIFT_ERR_HTTP, "libcurl refused a transfer");
                    goto out;
                }
            }
            while (s->state == SLOT_IDLE && next < n) {
                const drift_gen_request *r = &reqs[next];
                s->ri = next++;
                s->attempts = 0;
                drift_error rerr = {0};
                int64_t seed = bodies ? 0 : params->seed + r->replicate;
                if (bodies) {
                    s->req.len = 0;
                    if (buf_puts(&s->req, bodies[s->ri])) {
                        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for a request body");
                        goto out;
                    }
                } else if (eng_http_request_render(tmpl, t->api, t->opts.request.system_prompt, r->prompt,
                                            h->extra_seed ? NULL : &seed, &s->req, &rerr)) {
                    /* this request cannot be sent: its outcome is an error */
                    memset(&res, 0, sizeof res);
                    drift_answer_clear(&res);
                    res.error = util_asprintf("request not sent: %s", rerr.msg);
                    res.cause = DRIFT_FAIL_REQUEST;
                    int stop = cb(user, r, &res);
                    drift_answer_clear(&res);
                    done++;
                    if (stop) {
                        st = drift_error_set(err, DRIFT_ERR_CANCELLED, "generate stopped by the caller");
                        goto out;
                    }
                    continue;
                }
                if (start_attempt(h, s)) {
                    st = drift_error_set(err, DRIFT_ERR_HTTP, "libcurl refused a transfer");
                    goto out;
                }
            }
        }
        if (done >= n) break;

        /* 2. move the transfers along */
        int running = 0;
        CURLMcode mc = curl_multi_perform(h->multi, &running);
        if (mc != CURLM_OK) {
            st = drift_error_set(err, DRIFT_ERR_HTTP, "libcurl: %s", curl_multi_strerror(mc));
            goto out;
        }

        /* 3. finished transfers -> outcome, retry or callback */
        int finished = 0, aborted = 0;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(h->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL *e = msg->easy_handle;
            CURLcode rc = msg->data.result;
            http_slot *s = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&s);
            curl_multi_remove_handle(h->multi, e);
            finished++;
            if (rc == CURLE_ABORTED_BY_CALLBACK) { /* cancelled mid-transfer: no outcome */
                s->state = SLOT_IDLE;
                aborted = 1;
                continue;
            }
            double end = util_now_ms();
            attempt_outcome o;
            classify(t, s, rc, &o);
            memset(&res, 0, sizeof res);
            drift_answer_clear(&res);
            if (o.ok) {
                drift_error perr = {0};
                if (eng_http_parse_reply(t->api, s->body.data, s->body.len, &res, &perr) == DRIFT_OK) {
                    if (bodies) { /* the answer is the whole reply */
                        free(res.text);
                        res.text = util_strndup(s->body.data, s->body.len);
                        if (!res.text) {
                            o.ok = 0;
                            o.retryable = 0;
                            o.cause = DRIFT_FAIL_OTHER;
                            snprintf(o.head, sizeof o.head, "out of memory for a reply");
                        }
                    }
                } else {
                    o.ok = 0;
                    o.retryable = perr.code != DRIFT_ERR_NOMEM;
                    o.cause = perr.code == DRIFT_ERR_NOMEM ? DRIFT_FAIL_OTHER : DRIFT_FAIL_REPLY;
                    snprintf(o.head, sizeof o.head, "%.159s", perr.msg);
                }
            }
            if (!o.ok && o.retryable && s->attempts <= t->opts.max_retries) {
                s->state = SLOT_WAITING;
                s->due_ms = end + 1000.0 * backoff_s(t, h, s->attempts, o.retry_after_s);
                continue;
            }
            if (!o.ok) {
                res.error = final_error(&o, s->attempts);
                res.cause = o.cause;
            }
            res.latency_ms = end - s->started_ms;
            res.http_status = (int)o.status;
            res.attempts = s->attempts;
            s->state = SLOT_IDLE;
            done++;
            int stop = cb(user, &reqs[s->ri], &res);
            drift_answer_clear(&res);
            if (stop) {
                st = drift_error_set(err, DRIFT_ERR_CANCELLED, "generate stopped by the caller");
                goto out;
            }
        }
        if (aborted) {
            st = cancelled(err, done, n);
            goto out;
        }
        if (finished) continue;

        /* 4. wait for network activity or the next retry due time */
        double wait_ms = t->opts.cancel ? CANCEL_POLL_MS : 1000.0;
        now = util_now_ms();
        for (int i = 0; i < ns; i++)
            if (h->slots[i].state == SLOT_WAITING && h->slots[i].due_ms - now < wait_ms)
                wait_ms = h->slots[i].due_ms - now;
        if (wait_ms < 0) wait_ms = 0;
        if (running > 0 || wait_ms > 0) {
            mc = curl_multi_poll(h->multi, NULL, 0, (int)ceil(wait_ms), NULL);
            if (mc != CURLM_OK) {
                st = drift_error_set(err, DRIFT_ERR_HTTP, "libcurl: %s", curl_multi_strerror(mc));
                goto out;
            }
        }
    }
out:
    if (st) abandon_all(h);
    json_decref(tmpl);
    return st;
}

static drift_status http_generate(drift_target *t, const drift_gen_request *reqs, size_t n,
                                  const drift_gen_params *params, drift_result_fn cb, void *user,
                                  drift_error *err) {
    return http_send(t, reqs, n, params, NULL, cb, user, err);
}

static drift_status http_send_raw(drift_target *t, const drift_gen_request *reqs, size_t n, drift_result_fn cb,
                                  void *user, drift_error *err) {
    const char **bodies = calloc(n ? n : 1, sizeof *bodies);
    if (!bodies) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) bodies[i] = reqs[i].prompt;
    drift_status st = http_send(t, reqs, n, NULL, bodies, cb, user, err);
    free(bodies);
    return st;
}

/* ---------- embed ---------- */

#define EMBED_BATCH 64

static drift_status http_embed(drift_target *t, const char *const *texts, size_t n, float **vecs, int *dim,
                               drift_error *err) {
    http_impl *h = t->impl;
    if (n == 0) return DRIFT_OK;
    if (ensure_slots(t, h, 1)) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    http_slot *s = &h->slots[0];
    CURL *e = s->easy;
    curl_easy_setopt(e, CURLOPT_URL, h->url_embed);
    float *all = NULL;
    int d = 0;
    drift_status st = DRIFT_OK;
    for (size_t from = 0; from < n && !st; from += EMBED_BATCH) {
        size_t cnt = n - from < EMBED_BATCH ? n - from : EMBED_BATCH;
        json_t *input = json_array();
        json_t *body = json_pack("{s:s, s:o}", "model", h->embed_model ? h->embed_model : h->model, "input", input);
        for (size_t i = 0; i < cnt && body; i++) {
            json_t *str = json_string(texts[from + i] ? texts[from + i] : "");
            if (!str) {
                json_decref(body);
                free(all);
                return drift_error_set(err, DRIFT_ERR_INVALID, "embed: text %zu is not valid UTF-8", from + i);
            }
            json_array_append_new(input, str);
        }
        char *js = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!js) {
            free(all);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        buf_free(&s->req);
        s->req.data = js;
        s->req.len = s->req.cap = strlen(js);
        s->req.cap++;
        s->attempts = 0;
        for (;;) {
            s->body.len = 0;
            s->too_big = 0;
            s->errbuf[0] = '\0';
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, s->req.data);
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->req.len);
            s->attempts++;
            CURLcode rc = curl_easy_perform(e);
            if (rc == CURLE_ABORTED_BY_CALLBACK) {
                st = drift_error_set(err, DRIFT_ERR_CANCELLED, "embed cancelled");
                break;
            }
            attempt_outcome o;
            classify(t, s, rc, &o);
            if (o.ok) {
                drift_error perr = {0};
                float *dst = all ? all + from * (size_t)d : NULL;
                float *got = dst;
                int gd = d;
                if (eng_http_parse_embeddings(s->body.data, s->body.len, cnt, &got, &gd, &perr) == DRIFT_OK) {
                    if (!all) {
                        /* first batch: the dimension is now known; make room for all */
                        d = gd;
                        all = malloc(n * (size_t)d * sizeof *all);
                        if (!all) {
                            free(got);
                            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for %zu embeddings", n);
                            break;
                        }
                        memcpy(all, got, cnt * (size_t)d * sizeof *all);
                        free(got);
                    }
                    break;
                }
                o.ok = 0;
                o.retryable = perr.code != DRIFT_ERR_NOMEM;
                snprintf(o.head, sizeof o.head, "%.159s", perr.msg);
            }
            if (o.retryable && s->attempts <= t->opts.max_retries) {
                double wait = backoff_s(t, h, s->attempts, o.retry_after_s);
                if (sleep_unless_cancelled(t, wait)) {
                    st = drift_error_set(err, DRIFT_ERR_CANCELLED, "embed cancelled");
                    break;
                }
                continue;
            }
            char *m = final_error(&o, s->attempts);
            st = drift_error_set(err, DRIFT_ERR_HTTP, "embed %s: %s", h->url_embed, m ? m : o.head);
            free(m);
            break;
        }
    }
    /* the generate path sets its own URL on each call; leave the request
     * buffer empty so a later generate() renders afresh */
    s->req.len = 0;
    if (st) {
        free(all);
        return st;
    }
    *vecs = all;
    *dim = d;
    return DRIFT_OK;
}

/* ---------- open / close ---------- */

static void http_close(drift_target *t) {
    impl_free(t->impl);
    t->impl = NULL;
}

static const eng_target_vtable http_vt = {"http", http_generate, http_embed, http_close, http_send_raw};

/* eng_http_detect (http_internal.h): the probes in order; a server that
 * cannot be reached stops them, and so does the whole budget. The
 * Authorization header goes with them: they go where generation goes. */
void eng_http_detect(drift_target *t) {
    if (!t || t->vt != &http_vt) return;
    http_impl *h = t->impl;
    if (!h || h->no_detect || h->detected) return;
    h->detected = 1;
    json_error_t jerr;
    json_t *cfg = t->config_json ? json_loads(t->config_json, 0, &jerr) : NULL;
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return;
    }
    json_t *dims = json_object();
    util_buf from = {0};
    double t0 = util_now_ms();
    for (int k = 0; k < ENG_PROBE_COUNT && dims; k++) {
        double left_s = ENG_PROBE_BUDGET_S - (util_now_ms() - t0) / 1000.0;
        if (left_s <= 0.05 || eng_target_cancelled(t)) break;
        char *url = util_asprintf("%s%s", k == ENG_PROBE_MODELS ? h->url_base : h->url_root, eng_probe_paths[k]);
        if (!url) break;
        int got = eng_stack_get(url, h->headers, h->local, left_s < ENG_PROBE_TIMEOUT_S ? left_s : ENG_PROBE_TIMEOUT_S,
                                dims, (eng_probe_kind)k);
        free(url);
        if (got < 0) break;
        if (got > 0) buf_printf(&from, "%s%s", from.len ? "," : "", eng_probe_paths[k]);
        if (got > 0 && k == ENG_PROBE_DRIFTBENCH) break; /* ours says all there is */
    }
    if (dims && json_object_size(dims) > 0 && from.data) {
        json_object_update_missing(cfg, dims);
        json_object_set_new(cfg, "detected_from", json_string(from.data));
        char *s = json_dumps(cfg, JSON_COMPACT);
        if (s) {
            free(t->config_json);
            t->config_json = s;
        }
    }
    buf_free(&from);
    json_decref(dims);
    json_decref(cfg);
}

/* ---------- the request control's headers ---------- */

/* 1 for a byte of an HTTP header name (RFC 9110's tchar). */
static int tchar(unsigned char c) { return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c)); }

/* Headers DriftBench sets itself (a second one would contradict it). */
static const char *const OWN_HEADERS[] = {"Content-Type", "Content-Length", "Transfer-Encoding", "Expect", "Accept"};
/* Headers that carry credentials (and so go only where the key may). */
static const char *const CRED_HEADERS[] = {"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key"};

static int name_in(const char *name, size_t n, const char *const *list, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (strlen(list[i]) == n && !strncasecmp(name, list[i], n)) return 1;
    return 0;
}

/* See http_internal.h. Messages name the header, never its value. */
drift_status eng_http_headers_add(const drift_request_ctl *r, const char *shown, int safe, int allowed,
                                  struct curl_slist **list, int *has_auth, drift_error *err) {
    *has_auth = 0;
    for (size_t i = 0; i < r->n_headers; i++) {
        const char *line = r->headers[i], *colon = strchr(line, ':');
        size_t n = colon ? (size_t)(colon - line) : 0;
        while (n && (line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
        int name_ok = n > 0 && n <= 128;
        for (size_t k = 0; k < n && name_ok; k++) name_ok = tchar((unsigned char)line[k]);
        if (!colon || !name_ok) {
            /* the part before ':' may be anything, a value given by mistake: not shown */
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "target '%s': header %zu is not \"Name: value\" (a name of letters, digits and "
                                   "!#$%%&'*+-.^_`|~, then ':'; its text is not shown)",
                                   shown, i + 1);
        }
        if (name_in(line, n, OWN_HEADERS, sizeof OWN_HEADERS / sizeof *OWN_HEADERS))
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "target '%s': header '%.*s' is DriftBench's own (it sends JSON and asks for JSON): "
                                   "it cannot be set",
                                   shown, (int)n, line);
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        size_t vn = strlen(v);
        while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t')) vn--;
        int from_env = vn > 4 && !strncmp(v, "env:", 4);
        char *val = NULL;
        if (from_env) {
            char *var = util_strndup(v + 4, vn - 4);
            if (!var) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            if (!env_name_ok(var)) {
                free(var);
                return drift_error_set(err, DRIFT_ERR_INVALID,
                                       "target '%s': header '%.*s': env: takes the name of an environment variable "
                                       "(letters, digits, '_'; the value is not shown)",
                                       shown, (int)n, line);
            }
            const char *ev = getenv(var);
            if (!ev || !*ev) {
                drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': header '%.*s': $%s is not set (or empty)", shown,
                                (int)n, line, var);
                free(var);
                return DRIFT_ERR_INVALID;
            }
            free(var);
            val = util_strdup(ev);
        } else {
            val = util_strndup(v, vn);
        }
        if (!val) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        drift_status st = DRIFT_OK;
        if (!*val)
            st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': header '%.*s' has no value", shown, (int)n, line);
        else if (strpbrk(val, "\r\n"))
            st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': header '%.*s': its value holds a line break",
                                 shown, (int)n, line);
        int cred = from_env || name_in(line, n, CRED_HEADERS, sizeof CRED_HEADERS / sizeof *CRED_HEADERS);
        if (!st && cred && !safe && !allowed)
            st = drift_error_set(err, DRIFT_ERR_INVALID,
                                 "target '%s': refusing to send header '%.*s' (%s) over plain http to a host that is "
                                 "not this machine (anyone on the way can read it): use https://, or add "
                                 "allow_insecure_key=1 to the target's parameters if that network is trusted",
                                 shown, (int)n, line, from_env ? "its value read from the environment" : "a credential");
        char *full = st ? NULL : util_asprintf("%.*s: %s", (int)n, line, val);
        explicit_bzero(val, strlen(val));
        free(val);
        if (st) return st;
        struct curl_slist *nl = full ? curl_slist_append(*list, full) : NULL;
        if (full) explicit_bzero(full, strlen(full));
        free(full);
        if (!nl) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        *list = nl;
        if (n == 13 && !strncasecmp(line, "Authorization", 13)) *has_auth = 1;
    }
    return DRIFT_OK;
}

/* The key to send (*key, NULL for none) by the order and the rules of the
 * top; DRIFT_ERR_INVALID when a named variable is unset, a key holds a line
 * break, or credentials would go over plain http to another host without
 * allow_insecure_key. */
static drift_status resolve_key(const drift_target *t, const http_impl *h, const char *spec, int header_auth,
                                const char **key, drift_error *err) {
    const drift_target_opts *o = &t->opts;
    int safe = h->https || h->local, allowed = h->allow_insecure || o->allow_insecure_key;
    char what[96];
    *key = NULL;
    if (header_auth && (h->key_env || (o->api_key && *o->api_key)))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "target '%s': an Authorization header and an API key (%s) are both given: give the key "
                               "one way",
                               spec, h->key_env ? "api_key_env" : "the caller's api_key");
    if (header_auth) {
        /* the user's header is the credential: no key of ours goes with it */
    } else if (h->key_env) {
        const char *v = getenv(h->key_env);
        if (!v || !*v) {
            /* a name with lower-case letters may be the key itself: not shown */
            int lower = strpbrk(h->key_env, "abcdefghijklmnopqrstuvwxyz") != NULL;
            char *shown = util_target_record(spec);
            drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': api_key_env=%s, but %s%s is not set (or empty)",
                            shown ? shown : "?", lower ? "..." : h->key_env, lower ? "that variable" : "$",
                            lower ? " (its name is not shown: is it the key itself?)" : h->key_env);
            free(shown);
            return DRIFT_ERR_INVALID;
        }
        *key = v;
        snprintf(what, sizeof what, "the API key in $%.64s", h->key_env);
    } else if (o->api_key && *o->api_key) {
        *key = o->api_key;
        snprintf(what, sizeof what, "the API key");
    } else {
        const char *v = o->default_key_env ? getenv(o->default_key_env) : NULL;
        if (v && *v && safe) *key = v; /* the default goes only where it is safe, silently */
        what[0] = '\0';
    }
    if (*key && strpbrk(*key, "\r\n"))
        return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': the API key holds a line break", spec);
    if (!what[0] && h->has_password) snprintf(what, sizeof what, "the URL's password");
    if (what[0] && !safe && !allowed)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "target '%s': refusing to send %s over plain http to a host that is not this "
                               "machine (anyone on the way can read it): use https://, or add "
                               "allow_insecure_key=1 to the target's parameters if that network is trusted",
                               spec, what);
    return DRIFT_OK;
}

/* Opens an http(s) target: parses and checks the spec, prepares the multi
 * handle and the headers. No connection is made until the first request. */
drift_status eng_http_open(drift_target *t, const char *spec, drift_error *err) {
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK)
        return drift_error_set(err, DRIFT_ERR_HTTP, "libcurl init failed: %s", curl_easy_strerror(curl_init_rc));
    http_impl *h = calloc(1, sizeof *h);
    if (!h) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    h->max_reply = ENG_HTTP_MAX_BODY_BYTES;
    drift_status st = DRIFT_OK;
    const char *q = strchr(spec, '?');
    char *base = q ? util_strndup(spec, (size_t)(q - spec)) : util_strdup(spec);
    if (!base) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    t->api = DRIFT_API_COMPLETIONS;
    st = check_key_env(spec, err);
    if (!st) st = parse_base(h, spec, base, err);
    free(base);
    if (st) goto fail;
    st = parse_query(t, h, spec, q ? q + 1 : NULL, err);
    if (st) goto fail;
    char *gen = util_asprintf("%s%s", h->url_gen, t->api == DRIFT_API_CHAT ? "/chat/completions" : "/completions");
    if (!gen) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    free(h->url_gen);
    h->url_gen = gen;

    struct curl_slist *user_headers = NULL;
    int header_auth = 0;
    st = eng_http_extra_body_parse(t->opts.request.extra_body_json, &h->extra, err);
    if (st) {
        drift_error_prefix(err, "target '%s': ", spec);
        goto fail;
    }
    h->extra_seed = json_object_get(h->extra, "seed") != NULL;
    st = eng_http_headers_add(&t->opts.request, spec, h->https || h->local,
                              h->allow_insecure || t->opts.allow_insecure_key, &user_headers, &header_auth, err);
    if (st) {
        curl_slist_free_all(user_headers);
        goto fail;
    }
    const char *key = NULL;
    st = resolve_key(t, h, spec, header_auth, &key, err);
    if (st) {
        curl_slist_free_all(user_headers);
        goto fail;
    }
    h->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (h->headers) h->headers = curl_slist_append(h->headers, "Accept: application/json");
    if (h->headers) h->headers = curl_slist_append(h->headers, "Expect:"); /* no 100-continue round trip */
    if (h->headers && key) {
        char *auth = util_asprintf("Authorization: Bearer %s", key);
        struct curl_slist *nh = auth ? curl_slist_append(h->headers, auth) : NULL;
        if (auth) explicit_bzero(auth, strlen(auth));
        free(auth);
        if (!nh) {
            curl_slist_free_all(h->headers);
            h->headers = NULL;
        } else {
            h->headers = nh;
        }
    }
    if (h->headers && user_headers) { /* the user's headers after ours */
        struct curl_slist *tail = h->headers;
        while (tail->next) tail = tail->next;
        tail->next = user_headers;
    } else {
        curl_slist_free_all(user_headers);
    }
    t->opts.api_key = NULL; /* copied into the headers; the caller's pointer may go away */
    h->multi = curl_multi_init();
    if (!h->headers || !h->multi) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory setting up libcurl");
        goto fail;
    }
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)t->opts.concurrency + 4);
    util_rng_seed(&h->rng, util_fnv1a64(spec, strlen(spec), (uint64_t)getpid()));

    json_t *cfg = json_pack("{s:s}", "model", h->model);
    t->config_json = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
    json_decref(cfg);
    if (!t->config_json) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    t->vt = &http_vt;
    t->impl = h;
    t->polls_cancel = 1;
    return DRIFT_OK;
fail:
    impl_free(h);
    return st;
}

/* eng_http_conn (http_internal.h): what http_prompt_logprobs.c needs of an
 * http target to send a request of its own kind. */
int eng_http_conn(const drift_target *t, eng_http_conn_info *out) {
    if (!t || t->vt != &http_vt || !t->impl) return -1;
    const http_impl *h = t->impl;
    out->url_base = h->url_base;
    out->model = h->model;
    out->headers = h->headers;
    out->local = h->local;
    out->max_reply = h->max_reply;
    return 0;
}
