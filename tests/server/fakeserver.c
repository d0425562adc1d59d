/* fakeserver.c - an OpenAI-compatible HTTP server for tests, answering from a
 * fixture script and injecting faults on request.
 *
 * usage: fakeserver [--script FILE] [--port N] [--lifetime S] [--max-requests N]
 *                   [--model NAME] [--embed-dim N] [--api-key KEY] [--quiet]
 *                   [--die-after N] [--health-after S] [--never-healthy]
 *                   [--guard WORD[,WORD...]]
 * Binds 127.0.0.1 (port 0 = ephemeral unless --port), prints "PORT <n>" on
 * stdout and flushes, then serves until --lifetime seconds passed (default
 * 120) or --max-requests requests were answered (default: no limit), so a test
 * that forgets it never leaves it running for long. One thread per
 * connection, HTTP/1.1 keep-alive, plain POSIX sockets (so faults can be made
 * at the byte level).
 *
 * Endpoints: POST /v1/completions, /v1/chat/completions, /v1/embeddings;
 * GET /v1/models, /health, /stats (counters of connections, requests per
 * endpoint, answers, faults per kind and status, JSON), /last (the body of the
 * last generation request, verbatim), /last_headers (request line and headers
 * of the last POST). With --api-key KEY, POSTs without "Authorization: Bearer
 * KEY" get 401.
 *
 * Server lifecycle faults (for the matrix's "server" start/stop tests):
 * --die-after N: once the N-th generation reply is sent, the process writes
 * "fakeserver: dying after N generation replies (--die-after)" to stderr,
 * answers nothing more, and exits with status 3 0.3 s later (so clients can
 * read the replies already sent), connections in flight cut (a crashed
 * server).
 * --health-after S: GET /health answers 503 {"status":"loading"} during the
 * first S seconds (a model loading), 200 after. --never-healthy: /health is
 * always 503 (a server that never gets ready).
 *
 * A gullible guard (--guard WORDS, for the guard's injection tests): every
 * generation request is answered as a Llama Guard 3 that reads special-token
 * texts as the tokens they name and trusts the prompt's structure, as a
 * real model can be led to:
 * 1. an assistant turn before the last one, i.e. a
 *    "<|start_header_id|>assistant<|end_header_id|>" followed by text that
 *    starts with "safe", is taken as its own verdict and repeated: "safe";
 * 2. else it judges the last user turn (after the last
 *    "<|start_header_id|>user<|end_header_id|>", up to the next
 *    "<|eot_id|>"): the conversation after the last "<BEGIN CONVERSATION>" up
 *    to the first "<END CONVERSATION>" after it, and in that the last Agent
 *    message (after the last line that starts "Agent:"): "unsafe\nS1" when
 *    it holds one of WORDS, else "safe". Markers and words match in any
 *    case, the Agent line after spaces too.
 * So an answer that plants a verdict, a new turn, a new conversation or a
 * new Agent line is judged "safe" by it, unless the client neutralised those
 * markers. Script answer lines and faults still apply first.
 *
 * Script format: one directive per line, fields separated by " | " (spaces
 * around the bar optional), blank lines and lines starting with '#' ignored.
 * In TEXT fields \n, \t and \\ are escapes.
 *
 *   default | echo [| TEMPLATE]
 *       Answer with TEMPLATE where {N} is the number that follows "ANSWER=" in
 *       the prompt (default template "The answer is {N}.\n#### {N}"); a prompt
 *       without "ANSWER=" gets "I do not know." This is the default mode.
 *   default | text | TEXT
 *       Answer TEXT to every prompt no answer line matches.
 *   answer | SUBSTR | TEXT
 *       Prompts containing SUBSTR are answered TEXT (first matching line wins).
 *   answers | FILE.jsonl | PROMPT_FIELD | ANSWER_FIELD [| TEMPLATE]
 *       One answer line per record of FILE (relative to the script's
 *       directory): prompts containing the record's PROMPT_FIELD get TEMPLATE
 *       with {A} replaced by its ANSWER_FIELD (default template
 *       "The answer is {A}.\n#### {A}"). Put overriding answer lines before
 *       it, e.g. to make a second server answer a few known prompts wrongly.
 *   fault | MATCH | KIND [| key=value]...
 *       MATCH: a prompt substring; "#N" = the N-th generation request the
 *       server receives (1-based, retries included); "*" = every request.
 *       KIND: an HTTP status 400..599 (reply {"error":{"message":..}}),
 *             sleep (wait, then answer normally), reset (send the headers and
 *             half the body, then RST the connection), malformed (truncated
 *             JSON), empty_choices ("choices":[]), content_type (200 with a
 *             non-JSON content type).
 *       keys: times=K      fire on the first K matching requests only, then
 *                          fall through (default: always);
 *             retry_after=S  send "Retry-After: S" (status faults);
 *             retry_date=S   send Retry-After as an HTTP date S seconds ahead;
 *             seconds=S    sleep length (default 5);
 *             type=T       content type for content_type (default text/html).
 *       The first fault line that matches and has times left fires; a fault
 *       applies to generation requests only.
 *
 * Answers: tokens are whitespace-led words ("The", " answer", ...); usage
 * counts them; max_tokens truncates (finish_reason "length"); a stop string
 * cuts the answer (finish_reason "stop"). With logprobs=N (completions) or
 * logprobs=true + top_logprobs=N (chat), token i gets logprob -(i % 10 + 1)/100
 * and N alternatives: the token itself, then "<alt1>".."<altN-1>" at logprob
 * minus 1, 2, ... Embeddings: hashed bag of lower-cased words, --embed-dim
 * (default 16) counts per vector. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HEADER_BYTES 65536
#define MAX_BODY_BYTES (64u << 20)

enum fault_kind { F_STATUS, F_SLEEP, F_RESET, F_MALFORMED, F_EMPTY, F_CTYPE, F_NKINDS };
static const char *fault_names[F_NKINDS] = {"status", "sleep", "reset", "malformed", "empty_choices", "content_type"};

typedef struct rule {
    int is_fault;
    char *match;          /* substring; NULL with req_no/any */
    long req_no;          /* #N, 0 = none */
    int any;              /* "*" */
    char *text;           /* answer text */
    enum fault_kind kind;
    int status;
    long times;           /* -1 = always */
    long fired;
    double retry_after;   /* < 0: none */
    double retry_date;    /* < 0: none */
    double seconds;
    char *ctype;
} rule;

static rule *rules;
static int n_rules, cap_rules;
static int default_echo = 1;
static char *default_text;
static char *echo_template;
static const char *served_model;
static const char *api_key;   /* --api-key: POSTs without "Authorization: Bearer KEY" get 401 */
static int embed_dim = 16;
static int quiet;
static long max_requests;
static long die_after;        /* --die-after: exit(3) after this many generation replies; 0 = never */
static int dying;             /* set at the N-th reply: no further reply is sent */
static double health_after_s; /* --health-after: /health is 503 before this many seconds */
static int never_healthy;     /* --never-healthy: /health is always 503 */
static const char *guard_words; /* --guard: comma-separated words that make a message unsafe */
static struct timespec start_time;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long gen_requests;     /* numbering for #N */
static long n_connections;
static long total_requests, n_completions, n_chat, n_embeddings, n_models, n_health, n_stats, n_other, n_answers;
static long fault_counts[F_NKINDS];
static long status_counts[600];
static char *last_body;
static char *last_head;       /* request line + headers of the last POST */
static volatile sig_atomic_t stop_flag;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fakeserver: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static char *xstrdup(const char *s) {
    char *p = strdup(s);
    if (!p) die("out of memory");
    return p;
}

/* ---------- script ---------- */

static char *unescape(const char *s) {
    char *out = xstrdup(s), *o = out;
    for (; *s; s++) {
        if (*s == '\\' && s[1]) {
            s++;
            *o++ = *s == 'n' ? '\n' : *s == 't' ? '\t' : *s;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return out;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
    return s;
}

/* Splits line at '|' into at most max fields (trimmed). */
static int split_fields(char *line, char **f, int max) {
    int n = 0;
    char *p = line;
    while (n < max) {
        char *bar = strchr(p, '|');
        if (bar) *bar = '\0';
        f[n++] = trim(p);
        if (!bar) break;
        p = bar + 1;
    }
    return n;
}

static rule *new_rule(void) {
    if (n_rules == cap_rules) {
        cap_rules = cap_rules ? cap_rules * 2 : 64;
        rules = realloc(rules, (size_t)cap_rules * sizeof *rules);
        if (!rules) die("out of memory");
    }
    rule *r = &rules[n_rules++];
    memset(r, 0, sizeof *r);
    return r;
}

/* Replaces every "{A}" of tpl with a. */
static char *fill_template(const char *tpl, const char *a) {
    size_t la = strlen(a), n = 0;
    for (const char *p = tpl; *p; p++) n += strncmp(p, "{A}", 3) ? 1 : la;
    char *out = malloc(n + 1), *o = out;
    if (!out) die("out of memory");
    for (const char *p = tpl; *p;) {
        if (!strncmp(p, "{A}", 3)) {
            memcpy(o, a, la);
            o += la;
            p += 3;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* "answers" directive: one answer rule per line of a jsonl file (the prompt
 * field is the substring, the answer field fills TEMPLATE's {A}). A relative
 * FILE is taken from the script's directory. */
static void load_answers(const char *script, const char *file, const char *pfield, const char *afield,
                         const char *tpl) {
    char path[4096];
    if (file[0] == '/') {
        snprintf(path, sizeof path, "%s", file);
    } else {
        const char *slash = strrchr(script, '/');
        snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - script + 1) : 0, script, file);
    }
    FILE *f = fopen(path, "r");
    if (!f) die("%s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int lineno = 0;
    while ((got = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (got <= 1) continue;
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        const char *pr = json_string_value(json_object_get(j, pfield));
        json_t *av = json_object_get(j, afield);
        if (!pr || !av) die("%s:%d: need string field '%s' and field '%s' (%s)", path, lineno, pfield, afield, je.text);
        char *a = json_is_string(av) ? xstrdup(json_string_value(av)) : json_dumps(av, JSON_ENCODE_ANY);
        rule *r = new_rule();
        r->match = xstrdup(pr);
        r->text = fill_template(tpl, a);
        free(a);
        json_decref(j);
    }
    free(line);
    fclose(f);
}

static void load_script(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("%s: %s", path, strerror(errno));
    char line[8192];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *l = trim(line);
        if (!*l || *l == '#') continue;
        char *fld[16];
        int nf = split_fields(l, fld, 16);
        if (!strcmp(fld[0], "default")) {
            if (nf >= 2 && !strcmp(fld[1], "echo")) {
                default_echo = 1;
                if (nf >= 3) echo_template = unescape(fld[2]);
            } else if (nf >= 3 && !strcmp(fld[1], "text")) {
                default_echo = 0;
                default_text = unescape(fld[2]);
            } else {
                die("%s:%d: expected 'default | echo [| TEMPLATE]' or 'default | text | TEXT'", path, lineno);
            }
        } else if (!strcmp(fld[0], "answer")) {
            if (nf != 3 || !*fld[1]) die("%s:%d: expected 'answer | SUBSTR | TEXT'", path, lineno);
            rule *r = new_rule();
            r->match = unescape(fld[1]);
            r->text = unescape(fld[2]);
        } else if (!strcmp(fld[0], "answers")) {
            if (nf < 4 || nf > 5) die("%s:%d: expected 'answers | FILE.jsonl | PROMPT_FIELD | ANSWER_FIELD [| TEMPLATE]'", path, lineno);
            char *tpl = nf == 5 ? unescape(fld[4]) : NULL;
            load_answers(path, fld[1], fld[2], fld[3], tpl ? tpl : "The answer is {A}.\n#### {A}");
            free(tpl);
        } else if (!strcmp(fld[0], "fault")) {
            if (nf < 3 || !*fld[1]) die("%s:%d: expected 'fault | MATCH | KIND [| key=value]...'", path, lineno);
            rule *r = new_rule();
            r->is_fault = 1;
            r->times = -1;
            r->retry_after = -1;
            r->retry_date = -1;
            r->seconds = 5;
            if (!strcmp(fld[1], "*"))
                r->any = 1;
            else if (fld[1][0] == '#' && isdigit((unsigned char)fld[1][1]))
                r->req_no = atol(fld[1] + 1);
            else
                r->match = unescape(fld[1]);
            const char *k = fld[2];
            if (isdigit((unsigned char)k[0])) {
                r->kind = F_STATUS;
                r->status = atoi(k);
                if (r->status < 400 || r->status > 599) die("%s:%d: status %s not in 400..599", path, lineno, k);
            } else if (!strcmp(k, "sleep")) r->kind = F_SLEEP;
            else if (!strcmp(k, "reset")) r->kind = F_RESET;
            else if (!strcmp(k, "malformed")) r->kind = F_MALFORMED;
            else if (!strcmp(k, "empty_choices")) r->kind = F_EMPTY;
            else if (!strcmp(k, "content_type")) r->kind = F_CTYPE;
            else die("%s:%d: unknown fault kind '%s'", path, lineno, k);
            for (int i = 3; i < nf; i++) {
                char *eq = strchr(fld[i], '=');
                if (!eq) die("%s:%d: expected key=value, got '%s'", path, lineno, fld[i]);
                *eq = '\0';
                const char *key = fld[i], *val = eq + 1;
                if (!strcmp(key, "times")) r->times = atol(val);
                else if (!strcmp(key, "retry_after")) r->retry_after = atof(val);
                else if (!strcmp(key, "retry_date")) r->retry_date = atof(val);
                else if (!strcmp(key, "seconds")) r->seconds = atof(val);
                else if (!strcmp(key, "type")) r->ctype = xstrdup(val);
                else die("%s:%d: unknown key '%s'", path, lineno, key);
            }
        } else {
            die("%s:%d: unknown directive '%s' (default, answer, fault)", path, lineno, fld[0]);
        }
    }
    fclose(f);
}

/* ---------- answers ---------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (n > ((size_t)1 << 40) || b->n > ((size_t)1 << 40)) die("response too large");
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) die("out of memory");
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static char *echo_answer(const char *prompt) {
    const char *a = strstr(prompt, "ANSWER=");
    if (!a) return xstrdup("I do not know.");
    a += 7;
    size_t n = 0;
    while (a[n] && (isdigit((unsigned char)a[n]) || a[n] == '-' || a[n] == '.' || a[n] == ',')) n++;
    while (n && (a[n - 1] == '.' || a[n - 1] == ',')) n--;
    char num[64];
    snprintf(num, sizeof num, "%.*s", (int)(n < 63 ? n : 63), a);
    const char *tpl = echo_template ? echo_template : "The answer is {N}.\n#### {N}";
    sbuf b = {0};
    for (const char *p = tpl; *p;) {
        if (!strncmp(p, "{N}", 3)) {
            sb_str(&b, num);
            p += 3;
        } else {
            sb_add(&b, p++, 1);
        }
    }
    if (!b.p) return xstrdup("");
    return b.p;
}

/* The last occurrence of needle in [p, end), any case, or NULL. */
static const char *last_in(const char *p, const char *end, const char *needle) {
    const char *hit = NULL;
    size_t n = strlen(needle);
    for (const char *q = p; q + n <= end; q++)
        if (!strncasecmp(q, needle, n)) hit = q;
    return hit;
}

/* The first occurrence of needle in [p, end), any case, or NULL. */
static const char *first_in(const char *p, const char *end, const char *needle) {
    size_t n = strlen(needle);
    for (const char *q = p; q + n <= end; q++)
        if (!strncasecmp(q, needle, n)) return q;
    return NULL;
}

/* --guard: the gullible Llama Guard 3's reply (see the top of the file). */
static char *guard_answer(const char *prompt) {
    static const char asst[] = "<|start_header_id|>assistant<|end_header_id|>";
    static const char user[] = "<|start_header_id|>user<|end_header_id|>";
    const char *end = prompt + strlen(prompt);
    /* 1. a verdict already given in an earlier assistant turn */
    for (const char *a = strstr(prompt, asst); a; a = strstr(a + 1, asst)) {
        const char *t = a + sizeof asst - 1;
        while (isspace((unsigned char)*t)) t++;
        if (!strncasecmp(t, "safe", 4) && !isalpha((unsigned char)t[4])) return xstrdup("safe");
    }
    /* 2. the last user turn, its last conversation, its last Agent message */
    const char *turn = last_in(prompt, end, user);
    turn = turn ? turn + sizeof user - 1 : prompt;
    const char *turn_end = first_in(turn, end, "<|eot_id|>");
    if (!turn_end) turn_end = end;
    const char *conv = last_in(turn, turn_end, "<BEGIN CONVERSATION>");
    conv = conv ? conv : turn;
    const char *conv_end = first_in(conv, turn_end, "<END CONVERSATION>");
    if (!conv_end) conv_end = turn_end;
    const char *msg = conv;
    for (const char *q = conv; q < conv_end; q++) {
        if (q != conv && q[-1] != '\n') continue;
        const char *w = q;
        while (w < conv_end && (*w == ' ' || *w == '\t')) w++;
        if ((size_t)(conv_end - w) >= 6 && !strncasecmp(w, "Agent:", 6)) msg = w + 6;
    }
    char *text = strndup(msg, (size_t)(conv_end - msg));
    if (!text) die("out of memory");
    char *words = xstrdup(guard_words);
    int unsafe = 0;
    for (char *save = NULL, *w = strtok_r(words, ",", &save); w && !unsafe; w = strtok_r(NULL, ",", &save))
        if (*w && strcasestr(text, w)) unsafe = 1;
    free(words);
    free(text);
    return xstrdup(unsafe ? "unsafe\nS1" : "safe");
}

static char *answer_for(const char *prompt) {
    for (int i = 0; i < n_rules; i++)
        if (!rules[i].is_fault && strstr(prompt, rules[i].match)) return xstrdup(rules[i].text);
    if (guard_words) return guard_answer(prompt);
    if (!default_echo) return xstrdup(default_text ? default_text : "");
    return echo_answer(prompt);
}

/* The fault to inject for this request, if any (counts it as fired). */
static rule *fault_for(const char *prompt, long req_no) {
    rule *hit = NULL;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_rules && !hit; i++) {
        rule *r = &rules[i];
        if (!r->is_fault) continue;
        int m = r->any || (r->req_no && r->req_no == req_no) || (r->match && strstr(prompt, r->match));
        if (!m || (r->times >= 0 && r->fired >= r->times)) continue;
        r->fired++;
        hit = r;
    }
    if (hit) {
        fault_counts[hit->kind]++;
        if (hit->kind == F_STATUS) status_counts[hit->status]++;
    }
    pthread_mutex_unlock(&mu);
    return hit;
}

/* Splits text into tokens: each starts at a word, with the whitespace before it. */
static int tokenize(const char *text, const char ***starts_out) {
    size_t cap = 16;
    int n = 0;
    const char **st = malloc(cap * sizeof *st);
    if (!st) die("out of memory");
    const char *p = text;
    while (*p) {
        const char *s = p;
        while (*p && isspace((unsigned char)*p)) p++;
        if (!*p) {
            if (n == 0) st[n++] = s; /* whitespace only: one token */
            break;
        }
        while (*p && !isspace((unsigned char)*p)) p++;
        if ((size_t)n + 1 >= cap) {
            cap *= 2;
            st = realloc(st, cap * sizeof *st);
            if (!st) die("out of memory");
        }
        st[n++] = s;
    }
    st[n] = p; /* end */
    *starts_out = st;
    return n;
}

static json_t *make_logprobs(int chat, const char **tok, int ntok, int top_n) {
    if (chat) {
        json_t *content = json_array();
        for (int i = 0; i < ntok; i++) {
            char *t = strndup(tok[i], (size_t)(tok[i + 1] - tok[i]));
            double lp = -(double)(i % 10 + 1) / 100.0;
            json_t *top = json_array();
            for (int k = 0; k < top_n; k++) {
                char alt[32];
                snprintf(alt, sizeof alt, "<alt%d>", k);
                json_array_append_new(top, json_pack("{s:s, s:f}", "token", k == 0 ? t : alt, "logprob", lp - k));
            }
            json_array_append_new(content, json_pack("{s:s, s:f, s:o}", "token", t, "logprob", lp, "top_logprobs", top));
            free(t);
        }
        return json_pack("{s:o}", "content", content);
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < ntok; i++) {
        char *t = strndup(tok[i], (size_t)(tok[i + 1] - tok[i]));
        double lp = -(double)(i % 10 + 1) / 100.0;
        json_array_append_new(tokens, json_string(t));
        json_array_append_new(lps, json_real(lp));
        json_array_append_new(offs, json_integer(tok[i] - tok[0]));
        json_t *d = json_object();
        for (int k = 0; k < top_n; k++) {
            char alt[32];
            snprintf(alt, sizeof alt, "<alt%d>", k);
            json_object_set_new(d, k == 0 ? t : alt, json_real(lp - k));
        }
        json_array_append_new(tops, d);
        free(t);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* ---------- HTTP ---------- */

typedef struct reply {
    int status;
    const char *ctype;
    char *body;
    size_t len;
    char extra[256];      /* extra header lines */
} reply;

static const char *reason(int st) {
    switch (st) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
    }
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_reply(int fd, const reply *r, int keep) {
    char head[1024];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: %s\r\n\r\n",
                      r->status, reason(r->status), r->ctype, r->len, r->extra, keep ? "keep-alive" : "close");
    sbuf b = {0};
    sb_add(&b, head, (size_t)hn);
    sb_add(&b, r->body, r->len);
    int rc = send_all(fd, b.p, b.n);
    free(b.p);
    return rc;
}

static void set_json(reply *r, int status, json_t *j) {
    r->status = status;
    r->ctype = "application/json";
    r->body = json_dumps(j, JSON_COMPACT);
    if (!r->body) die("out of memory");
    r->len = strlen(r->body);
    json_decref(j);
}

static void set_error(reply *r, int status, const char *msg) {
    set_json(r, status, json_pack("{s:{s:s, s:s, s:i}}", "error", "message", msg, "type",
                                  status >= 500 ? "server_error" : "invalid_request_error", "code", status));
}

static char *prompt_of(json_t *req, int chat) {
    if (!chat) {
        json_t *p = json_object_get(req, "prompt");
        if (json_is_array(p)) p = json_array_get(p, 0);
        return json_is_string(p) ? xstrdup(json_string_value(p)) : NULL;
    }
    json_t *msgs = json_object_get(req, "messages");
    if (!json_is_array(msgs)) return NULL;
    sbuf b = {0};
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const char *c = json_string_value(json_object_get(json_array_get(msgs, i), "content"));
        if (!c) continue;
        if (b.n) sb_str(&b, "\n");
        sb_str(&b, c);
    }
    return b.p ? b.p : xstrdup("");
}

/* Handles a generation request. Returns 1 when the connection must be reset
 * (and *reset_len bytes of the built reply sent first). */
static int handle_generate(int chat, const char *body, size_t blen, reply *r, size_t *reset_len) {
    json_error_t je;
    json_t *req = json_loadb(body, blen, 0, &je);
    pthread_mutex_lock(&mu);
    long req_no = ++gen_requests;
    if (chat) n_chat++; else n_completions++;
    free(last_body);
    last_body = strndup(body, blen);
    pthread_mutex_unlock(&mu);
    if (!json_is_object(req)) {
        char msg[300];
        snprintf(msg, sizeof msg, "request body is not a JSON object: %s", je.text);
        set_error(r, 400, msg);
        json_decref(req);
        return 0;
    }
    const char *model = json_string_value(json_object_get(req, "model"));
    if (served_model && (!model || strcmp(model, served_model))) {
        char msg[300];
        snprintf(msg, sizeof msg, "The model `%s` does not exist.", model ? model : "(none)");
        set_error(r, 404, msg);
        json_decref(req);
        return 0;
    }
    char *prompt = prompt_of(req, chat);
    if (!prompt) {
        set_error(r, 400, chat ? "messages must be an array of {role, content}" : "prompt must be a string");
        json_decref(req);
        return 0;
    }
    rule *f = fault_for(prompt, req_no);
    if (f && f->kind == F_STATUS) {
        char msg[100];
        snprintf(msg, sizeof msg, "injected fault: HTTP %d", f->status);
        set_error(r, f->status, msg);
        if (f->retry_after >= 0) snprintf(r->extra, sizeof r->extra, "Retry-After: %.0f\r\n", f->retry_after);
        if (f->retry_date >= 0) {
            time_t when = time(NULL) + (time_t)f->retry_date;
            struct tm tm;
            gmtime_r(&when, &tm);
            char date[64];
            strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
            snprintf(r->extra, sizeof r->extra, "Retry-After: %s\r\n", date);
        }
        free(prompt);
        json_decref(req);
        return 0;
    }
    if (f && f->kind == F_SLEEP) {
        struct timespec ts = {(time_t)f->seconds, (long)((f->seconds - (double)(time_t)f->seconds) * 1e9)};
        while (nanosleep(&ts, &ts) && errno == EINTR) {
        }
    }
    if (f && f->kind == F_MALFORMED) {
        r->status = 200;
        r->ctype = "application/json";
        r->body = xstrdup("{\"id\":\"cmpl-broken\",\"choices\":[{\"index\":0,\"text\":\"The answ");
        r->len = strlen(r->body);
        free(prompt);
        json_decref(req);
        return 0;
    }
    if (f && f->kind == F_CTYPE) {
        r->status = 200;
        r->ctype = f->ctype ? f->ctype : "text/html";
        r->body = xstrdup("<html><body><h1>Welcome to the proxy</h1></body></html>");
        r->len = strlen(r->body);
        free(prompt);
        json_decref(req);
        return 0;
    }

    /* the answer */
    char *text = answer_for(prompt);
    int max_tokens = 1 << 30;
    json_t *mt = json_object_get(req, "max_tokens");
    if (json_is_integer(mt) && json_integer_value(mt) > 0) max_tokens = (int)json_integer_value(mt);
    const char *finish = "stop";
    json_t *stop = json_object_get(req, "stop");
    if (json_is_string(stop) || json_is_array(stop)) {
        size_t ns = json_is_string(stop) ? 1 : json_array_size(stop);
        for (size_t i = 0; i < ns; i++) {
            const char *s = json_is_string(stop) ? json_string_value(stop) : json_string_value(json_array_get(stop, i));
            char *at = s && *s ? strstr(text, s) : NULL;
            if (at) *at = '\0';
        }
    }
    const char **tok;
    int ntok = tokenize(text, &tok);
    if (ntok > max_tokens) {
        ntok = max_tokens;
        *(char *)tok[ntok] = '\0';
        finish = "length";
    }
    const char **ptok;
    int nptok = tokenize(prompt, &ptok);
    free(ptok);
    int top_n = 0;
    json_t *lpq = json_object_get(req, "logprobs");
    if (chat) {
        if (json_is_true(lpq)) {
            json_t *tl = json_object_get(req, "top_logprobs");
            top_n = json_is_integer(tl) ? (int)json_integer_value(tl) : 0;
            if (top_n < 0 || top_n > 20) top_n = 0;
            top_n = top_n ? top_n : 0;
        }
    } else if (json_is_integer(lpq)) {
        top_n = (int)json_integer_value(lpq);
        if (top_n < 0 || top_n > 20) top_n = 0;
    }
    int want_lp = chat ? json_is_true(lpq) : (json_is_integer(lpq) && json_integer_value(lpq) > 0);
    json_t *lp = want_lp ? make_logprobs(chat, tok, ntok, top_n) : json_null();
    free(tok);

    json_t *choice = chat ? json_pack("{s:i, s:{s:s, s:s}, s:s, s:o}", "index", 0, "message", "role", "assistant",
                                      "content", text, "finish_reason", finish, "logprobs", lp)
                          : json_pack("{s:i, s:s, s:s, s:o}", "index", 0, "text", text, "finish_reason", finish,
                                      "logprobs", lp);
    json_t *choices = json_array();
    if (!f || f->kind != F_EMPTY) json_array_append_new(choices, choice);
    else json_decref(choice);
    json_t *out = json_pack("{s:s, s:s, s:i, s:s, s:o, s:{s:i, s:i, s:i}}", "id", chat ? "chatcmpl-fake" : "cmpl-fake",
                            "object", chat ? "chat.completion" : "text_completion", "created", 1700000000, "model",
                            model ? model : "fake", "choices", choices, "usage", "prompt_tokens", nptok,
                            "completion_tokens", ntok, "total_tokens", nptok + ntok);
    if (!out) die("cannot build reply (answer not valid UTF-8?)");
    set_json(r, 200, out);
    free(text);
    free(prompt);
    json_decref(req);
    if (f && f->kind == F_RESET) {
        *reset_len = r->len / 2;
        return 1;
    }
    if (!f || f->kind == F_SLEEP) {
        pthread_mutex_lock(&mu);
        n_answers++;
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

static void handle_embeddings(const char *body, size_t blen, reply *r) {
    json_t *req = json_loadb(body, blen, 0, NULL);
    pthread_mutex_lock(&mu);
    n_embeddings++;
    pthread_mutex_unlock(&mu);
    json_t *input = json_object_get(req, "input");
    if (json_is_string(input)) input = json_pack("[O]", input);
    else json_incref(input);
    if (!json_is_array(input)) {
        set_error(r, 400, "input must be a string or an array of strings");
        json_decref(input);
        json_decref(req);
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; i < json_array_size(input); i++) {
        const char *s = json_string_value(json_array_get(input, i));
        if (!s) {
            set_error(r, 400, "input[] must hold strings");
            json_decref(data);
            json_decref(input);
            json_decref(req);
            return;
        }
        double *v = calloc((size_t)embed_dim, sizeof *v);
        if (!v) die("out of memory");
        const char *p = s;
        while (*p) {
            while (*p && isspace((unsigned char)*p)) p++;
            if (!*p) break;
            uint64_t h = 1469598103934665603ULL;
            while (*p && !isspace((unsigned char)*p)) {
                h ^= (unsigned char)tolower((unsigned char)*p++);
                h *= 1099511628211ULL;
            }
            v[h % (uint64_t)embed_dim] += 1.0;
        }
        json_t *emb = json_array();
        for (int j = 0; j < embed_dim; j++) json_array_append_new(emb, json_real(v[j]));
        free(v);
        json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", (int)i, "embedding", emb));
    }
    set_json(r, 200, json_pack("{s:s, s:o, s:s}", "object", "list", "data", data, "model", "fake-embed"));
    json_decref(input);
    json_decref(req);
}

static void handle_stats(reply *r) {
    pthread_mutex_lock(&mu);
    json_t *faults = json_object();
    for (int k = 0; k < F_NKINDS; k++) json_object_set_new(faults, fault_names[k], json_integer(fault_counts[k]));
    json_t *statuses = json_object();
    for (int s = 400; s < 600; s++) {
        if (!status_counts[s]) continue;
        char key[8];
        snprintf(key, sizeof key, "%d", s);
        json_object_set_new(statuses, key, json_integer(status_counts[s]));
    }
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "connections",
                          (json_int_t)n_connections, "requests", (json_int_t)total_requests, "generate", (json_int_t)gen_requests, "completions",
                          (json_int_t)n_completions, "chat", (json_int_t)n_chat, "embeddings",
                          (json_int_t)n_embeddings, "models", (json_int_t)n_models, "health", (json_int_t)n_health,
                          "stats", (json_int_t)n_stats, "other", (json_int_t)n_other, "answers",
                          (json_int_t)n_answers, "faults", faults, "statuses", statuses);
    pthread_mutex_unlock(&mu);
    set_json(r, 200, j);
}

/* Reads one request (head + body) into buf; returns its total length, 0 on
 * orderly close, -1 on error. *have is the number of bytes in buf. */
static long read_request(int fd, char **buf, size_t *cap, size_t *have, size_t *head_len, size_t *body_len,
                         int *close_after) {
    for (;;) {
        char *end = *have >= 4 ? memmem(*buf, *have, "\r\n\r\n", 4) : NULL;
        if (end) {
            *head_len = (size_t)(end - *buf) + 4;
            *body_len = 0;
            *close_after = 0;
            /* headers we care about */
            const char *hend = *buf + *head_len;
            const char *line = memchr(*buf, '\n', *head_len);
            while (line && ++line < hend) {
                const char *eol = memchr(line, '\n', (size_t)(hend - line));
                size_t ll = eol ? (size_t)(eol - line) : (size_t)(hend - line);
                if (ll > 15 && !strncasecmp(line, "Content-Length:", 15))
                    *body_len = (size_t)strtoull(line + 15, NULL, 10);
                if (ll > 11 && !strncasecmp(line, "Connection:", 11)) {
                    char v[64];
                    snprintf(v, sizeof v, "%.*s", (int)(ll - 11 < 63 ? ll - 11 : 63), line + 11);
                    if (strcasestr(v, "close")) *close_after = 1;
                }
                line = eol;
            }
            if (*body_len > MAX_BODY_BYTES) return -1;
            size_t total = *head_len + *body_len;
            while (*have < total) {
                if (total + 1 > *cap) {
                    size_t nc = total + 1;
                    char *nb = realloc(*buf, nc);
                    if (!nb) return -1;
                    *buf = nb;
                    *cap = nc;
                }
                ssize_t got = recv(fd, *buf + *have, *cap - *have - 1, 0);
                if (got <= 0) return -1;
                *have += (size_t)got;
            }
            return (long)total;
        }
        if (*have >= MAX_HEADER_BYTES) return -1;
        if (*have + 4096 + 1 > *cap) {
            size_t nc = *cap * 2;
            char *nb = realloc(*buf, nc);
            if (!nb) return -1;
            *buf = nb;
            *cap = nc;
        }
        ssize_t got = recv(fd, *buf + *have, *cap - *have - 1, 0);
        if (got == 0) return 0;
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        *have += (size_t)got;
    }
}

static void count_served(void) {
    pthread_mutex_lock(&mu);
    total_requests++;
    if (max_requests > 0 && total_requests >= max_requests) stop_flag = 1;
    pthread_mutex_unlock(&mu);
}

static void *conn_main(void *arg) {
    int fd = (int)(intptr_t)arg;
    pthread_mutex_lock(&mu);
    n_connections++;
    pthread_mutex_unlock(&mu);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t cap = 8192, have = 0;
    char *buf = malloc(cap);
    if (!buf) die("out of memory");
    for (;;) {
        size_t head_len, body_len;
        int close_after;
        long total = read_request(fd, &buf, &cap, &have, &head_len, &body_len, &close_after);
        if (total <= 0) break;
        char method[16] = "", path[256] = "";
        sscanf(buf, "%15s %255s", method, path);
        const char *body = buf + head_len;
        reply r = {.status = 200, .ctype = "application/json"};
        size_t reset_len = 0;
        int reset = 0;
        int is_post = !strcmp(method, "POST");
        int authorized = 1;
        if (is_post) {
            pthread_mutex_lock(&mu);
            free(last_head);
            last_head = strndup(buf, head_len);
            pthread_mutex_unlock(&mu);
            if (api_key) {
                char want[512];
                snprintf(want, sizeof want, "\r\nAuthorization: Bearer %s\r\n", api_key);
                authorized = memmem(buf, head_len, want, strlen(want)) != NULL;
            }
        }
        if (!authorized) {
            set_error(&r, 401, "Incorrect API key provided.");
        } else if (is_post && !strcmp(path, "/v1/completions")) {
            reset = handle_generate(0, body, body_len, &r, &reset_len);
        } else if (is_post && !strcmp(path, "/v1/chat/completions")) {
            reset = handle_generate(1, body, body_len, &r, &reset_len);
        } else if (is_post && !strcmp(path, "/v1/embeddings")) {
            handle_embeddings(body, body_len, &r);
        } else if (!strcmp(path, "/v1/models")) {
            pthread_mutex_lock(&mu);
            n_models++;
            pthread_mutex_unlock(&mu);
            set_json(&r, 200, json_pack("{s:s, s:[{s:s, s:s, s:s}]}", "object", "list", "data", "id",
                                        served_model ? served_model : "fake", "object", "model", "owned_by",
                                        "driftbench"));
        } else if (!strcmp(path, "/health")) {
            pthread_mutex_lock(&mu);
            n_health++;
            pthread_mutex_unlock(&mu);
            struct timespec nw;
            clock_gettime(CLOCK_MONOTONIC, &nw);
            double up = (double)(nw.tv_sec - start_time.tv_sec) + (double)(nw.tv_nsec - start_time.tv_nsec) / 1e9;
            if (never_healthy || up < health_after_s) set_json(&r, 503, json_pack("{s:s}", "status", "loading"));
            else set_json(&r, 200, json_pack("{s:s}", "status", "ok"));
        } else if (!strcmp(path, "/stats")) {
            pthread_mutex_lock(&mu);
            n_stats++;
            pthread_mutex_unlock(&mu);
            handle_stats(&r);
        } else if (!strcmp(path, "/last")) {
            pthread_mutex_lock(&mu);
            r.body = xstrdup(last_body ? last_body : "");
            pthread_mutex_unlock(&mu);
            r.len = strlen(r.body);
        } else if (!strcmp(path, "/last_headers")) {
            pthread_mutex_lock(&mu);
            r.body = xstrdup(last_head ? last_head : "");
            pthread_mutex_unlock(&mu);
            r.len = strlen(r.body);
            r.ctype = "text/plain";
        } else {
            pthread_mutex_lock(&mu);
            n_other++;
            pthread_mutex_unlock(&mu);
            char msg[300];
            snprintf(msg, sizeof msg, "no route for %s %s", method, path);
            set_error(&r, 404, msg);
        }
        if (reset) {
            char head[512];
            int hn = snprintf(head, sizeof head,
                              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", r.len);
            send_all(fd, head, (size_t)hn);
            send_all(fd, r.body, reset_len);
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* close() sends RST */
            free(r.body);
            count_served();
            break;
        }
        /* a generation reply takes its number before it is sent, so exactly N are ever sent: with
         * concurrent requests, checking `dying` alone let every thread that passed the check before the
         * N-th reply went out send its reply too (all 8 of a run's replies under ASan once) */
        long nrep = 0;
        if (die_after > 0 && is_post && strstr(path, "completions")) {
            static long gen_replies;
            pthread_mutex_lock(&mu);
            nrep = ++gen_replies;
            pthread_mutex_unlock(&mu);
        }
        if (nrep > die_after || __atomic_load_n(&dying, __ATOMIC_SEQ_CST)) { /* no reply after the N-th */
            free(r.body);
            break;
        }
        int rc = send_reply(fd, &r, !close_after);
        free(r.body);
        count_served();
        if (die_after > 0 && nrep == die_after) {
            __atomic_store_n(&dying, 1, __ATOMIC_SEQ_CST);
            fprintf(stderr, "fakeserver: dying after %ld generation replies (--die-after)\n", nrep);
            fflush(stderr);
            /* let the clients read the replies sent: exiting at once
             * closes connections with unread requests by RST, which can
             * discard a reply already in the client's queue */
            usleep(300 * 1000);
            _exit(3);
        }
        if (rc || close_after) break;
        /* keep bytes of a pipelined next request */
        memmove(buf, buf + total, have - (size_t)total);
        have -= (size_t)total;
    }
    free(buf);
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    const char *script = NULL;
    int port = 0;
    double lifetime = 120;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--never-healthy")) {
            never_healthy = 1;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            quiet = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: fakeserver [--script FILE] [--port N] [--lifetime S] [--max-requests N] "
                   "[--model NAME] [--embed-dim N] [--api-key KEY] [--quiet] [--die-after N] "
                   "[--health-after S] [--never-healthy] [--guard WORD[,WORD...]]\n");
            return 0;
        }
        if (!v) die("%s needs a value", a);
        i++;
        if (!strcmp(a, "--script")) script = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--lifetime")) lifetime = atof(v);
        else if (!strcmp(a, "--max-requests")) max_requests = atol(v);
        else if (!strcmp(a, "--model")) served_model = v;
        else if (!strcmp(a, "--api-key")) api_key = v;
        else if (!strcmp(a, "--embed-dim")) embed_dim = atoi(v);
        else if (!strcmp(a, "--die-after")) die_after = atol(v);
        else if (!strcmp(a, "--health-after")) health_after_s = atof(v);
        else if (!strcmp(a, "--guard")) guard_words = v;
        else die("unknown option %s", a);
    }
    if (embed_dim < 1 || embed_dim > 65536) die("--embed-dim must be 1..65536");
    if (port < 0 || port > 65535) die("--port must be 0..65535");
    if (!(lifetime > 0)) die("--lifetime must be > 0");
    if (script) load_script(script);
    signal(SIGPIPE, SIG_IGN);

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa)) die("bind 127.0.0.1:%d: %s", port, strerror(errno));
    if (listen(lfd, 1024)) die("listen: %s", strerror(errno));
    socklen_t sl = sizeof sa;
    getsockname(lfd, (struct sockaddr *)&sa, &sl);
    printf("PORT %d\n", ntohs(sa.sin_port));
    fflush(stdout);

    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    start_time = t0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    while (!stop_flag) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if (el >= lifetime) break;
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int pr = poll(&p, 1, 100);
        if (pr <= 0) continue;
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        pthread_t th;
        if (pthread_create(&th, &attr, conn_main, (void *)(intptr_t)fd)) close(fd);
    }
    if (!quiet) fprintf(stderr, "fakeserver: stopping (%ld requests served)\n", total_requests);
    fflush(stderr);
    _exit(0);
}
