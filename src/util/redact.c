/* redact.c - secrets out of everything we show or store: drift_redact
 * (status.h), the one redaction of the library and the CLI.
 *
 * Where it runs: every message drift_error_set and drift_error_prefix write
 * (so no library error can carry a secret, whoever formats it); a store's
 * name in messages (drift_store_display); the target a run's record keeps
 * (util_target_record, below); the CLI's own lines that print a store or a
 * target.
 *
 * What it replaces with "***", wherever it appears in the text:
 *   1. the password of a URL's userinfo. After "://" the authority ends at
 *      the first '?', '#', whitespace, control byte, '"', '<', '>' or '`'
 *      (the last five never stand unescaped in a URL, and they quote URLs
 *      in messages). The userinfo is everything before the LAST '@' of
 *      that stretch, and the password what follows its first ':'. So a
 *      password holding a raw '@', '/' or '%' is taken whole, as are its
 *      escapes (%40, %2F, %25). "user@host" (no password) is kept, and so
 *      is "user:@host" (an empty one). A password holding a raw '?', '#'
 *      or whitespace is not a URL any parser agrees on: escape it.
 *   2. the value of a secret parameter, KEY=VALUE in a URL's query, a libpq
 *      key=value connection string or any text: KEY (any case, spaces
 *      allowed around '=') is one of secret_keys[] and does not continue a
 *      word (no letter, digit or '_' before it: "api_key_env" and "monkey"
 *      are not keys). In a URL's query (KEY right after '?' or '&') the
 *      value runs to whitespace, '"' or '&'; elsewhere to whitespace
 *      outside single quotes (libpq's quoting; backslash escapes), so a
 *      quoted password with spaces goes whole; a value in quotes keeps
 *      them: password='***'.
 * A bare value that is "***" (redacted already) or the placeholder "value"
 * (any case), followed only by punctuation (":,;.)]}'"), is left as it is:
 * "password=***: cannot connect" keeps its colon, and "'x' is not
 * key=value" stays (messages of the spec parsers). An empty value is left
 * as it is too; a text without secrets
 * comes back unchanged, byte for byte; redacting twice gives the same
 * text.
 *
 * Over-redaction is the side we err on: "http://host:8000/a@b" (a path
 * holding '@', a port, no query before it) loses "8000/a" to "***". */
#include "util/util.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "driftbench/status.h"

/* Parameter names whose value is a secret (compared without case). */
static const char *const secret_keys[] = {
    "password", "passwd",       "pwd",        "sslpassword", "api_key", "apikey",        "api-key",
    "key",      "access_token", "auth_token", "token",       "secret",  "client_secret",
};

/* Parameters of a target spec that say how to authenticate, not what is
 * measured: a run's record leaves them out (util_target_record). */
static const char *const credential_params[] = {"api_key_env", "allow_insecure_key"};

/* 1 for a byte that ends a URL's authority (see the top, 1.). */
static int authority_end(unsigned char c) {
    return c <= ' ' || c == 0x7f || c == '?' || c == '#' || c == '"' || c == '<' || c == '>' || c == '`';
}

int util_url_password_span(const char *authority, size_t *off, size_t *len) {
    const char *at = NULL, *e = authority;
    for (; !authority_end((unsigned char)*e); e++)
        if (*e == '@') at = e;
    if (!at) return 0;
    const char *colon = memchr(authority, ':', (size_t)(at - authority));
    if (!colon || colon + 1 == at) return 0;
    *off = (size_t)(colon + 1 - authority);
    *len = (size_t)(at - colon - 1);
    return 1;
}

/* Length of the secret key that starts at s + i and is followed by '='
 * (spaces allowed before it), 0 when none does; *eq = index of the '='. */
static size_t secret_key_at(const char *s, size_t i, size_t *eq) {
    if (i > 0 && (isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_')) return 0;
    for (size_t k = 0; k < sizeof secret_keys / sizeof secret_keys[0]; k++) {
        size_t n = strlen(secret_keys[k]);
        if (strncasecmp(s + i, secret_keys[k], n) != 0) continue;
        size_t j = i + n;
        while (s[j] == ' ' || s[j] == '\t') j++;
        if (s[j] != '=') continue;
        *eq = j;
        return n;
    }
    return 0;
}

/* End (exclusive) of the value that starts at s + v. In a URL's query
 * (in_query) it runs to whitespace, '"' or '&'. Elsewhere it is a word as
 * libpq's key=value strings write one, and more: it runs to whitespace
 * outside single quotes, a backslash escaping the next byte, so a quoted
 * part and what sticks to it ("''x", "'a'b") go together. */
static size_t value_end(const char *s, size_t v, int in_query) {
    size_t j = v;
    if (in_query) {
        while (s[j] && !((unsigned char)s[j] <= ' ' || s[j] == 0x7f || s[j] == '"' || s[j] == '&')) j++;
        return j;
    }
    int quoted = 0;
    while (s[j] && (quoted || !((unsigned char)s[j] <= ' ' || s[j] == 0x7f))) {
        if (s[j] == '\\' && s[j + 1]) {
            j += 2;
            continue;
        }
        if (s[j] == '\'') quoted = !quoted;
        j++;
    }
    return j;
}

/* Length of the placeholder word that is the whole bare value v[0..n)
 * but for trailing punctuation of the text, 0 when it is none. */
static size_t placeholder_len(const char *v, size_t n) {
    static const char *const words[] = {"***", "value"};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t w = strlen(words[k]);
        if (n >= w && !strncasecmp(v, words[k], w) && strspn(v + w, ":,;.)]}'") >= n - w) return w;
    }
    return 0;
}

/* Pass 1: URL userinfo passwords. */
static int redact_userinfo(const char *s, util_buf *o) {
    const char *p = s, *sep;
    while ((sep = strstr(p, "://"))) {
        const char *a = sep + 3;
        size_t off, len;
        if (util_url_password_span(a, &off, &len)) {
            if (buf_append(o, p, (size_t)(a - p) + off) || buf_puts(o, "***")) return -1;
            p = a + off + len; /* at the '@' */
        } else {
            if (buf_append(o, p, (size_t)(a - p))) return -1;
            p = a;
        }
    }
    return buf_puts(o, p);
}

/* Pass 2: values of secret parameters. */
static int redact_params(const char *s, util_buf *o) {
    size_t i = 0, from = 0;
    while (s[i]) {
        size_t eq, klen = isalpha((unsigned char)s[i]) ? secret_key_at(s, i, &eq) : 0;
        if (!klen) {
            i++;
            continue;
        }
        size_t v = eq + 1;
        while (s[v] == ' ' || s[v] == '\t') v++;
        int in_query = i > 0 && (s[i - 1] == '?' || s[i - 1] == '&');
        size_t end = value_end(s, v, in_query), w = placeholder_len(s + v, end - v);
        if (w) { /* "password=***: cannot connect", "'x' is not key=value" */
            i = v + w;
            continue;
        }
        /* 'in quotes' keeps its quotes: password='***' */
        int quoted = s[v] == '\'' && end > v + 1 && s[end - 1] == '\'';
        size_t inner_from = v + (size_t)quoted, inner_to = quoted ? end - 1 : end;
        if (inner_to > inner_from) {
            if (buf_append(o, s + from, inner_from - from) || buf_puts(o, "***")) return -1;
            from = inner_to;
        }
        i = end > i + klen ? end : i + klen;
    }
    return buf_puts(o, s + from);
}

char *drift_redact(const char *text) {
    if (!text) return NULL;
    util_buf a = {0}, b = {0};
    if (redact_userinfo(text, &a) || !a.data || redact_params(a.data, &b)) {
        buf_free(&a);
        buf_free(&b);
        return NULL;
    }
    buf_free(&a);
    return buf_steal(&b);
}

/* 1 when the parameter q[0..n) (NAME or NAME=VALUE) is a credential one. */
static int is_credential_param(const char *q, size_t n) {
    const char *eq = memchr(q, '=', n);
    size_t klen = eq ? (size_t)(eq - q) : n;
    for (size_t k = 0; k < sizeof credential_params / sizeof credential_params[0]; k++)
        if (strlen(credential_params[k]) == klen && !memcmp(q, credential_params[k], klen)) return 1;
    return 0;
}

char *util_target_record(const char *spec) {
    char *r = drift_redact(spec);
    char *q = r ? strchr(r, '?') : NULL;
    if (!q) return r;
    util_buf b = {0};
    if (buf_append(&b, r, (size_t)(q - r))) goto nomem;
    const char *p = q + 1;
    int kept = 0;
    for (;;) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        if (!is_credential_param(p, n)) {
            if (buf_puts(&b, kept ? "&" : "?") || buf_append(&b, p, n)) goto nomem;
            kept = 1;
        }
        if (!amp) break;
        p = amp + 1;
    }
    free(r);
    return buf_steal(&b);
nomem:
    buf_free(&b);
    free(r);
    return NULL;
}
