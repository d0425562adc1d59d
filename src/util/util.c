/* util.c - string buffer, file reading, base64, hashing, clocks, RNG (see util.h). */
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int buf_reserve(util_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_append(util_buf *b, const void *p, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_puts(util_buf *b, const char *s) { return buf_append(b, s, strlen(s)); }

int buf_vprintf(util_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || buf_reserve(b, (size_t)n)) return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int buf_printf(util_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *buf_steal(util_buf *b) {
    char *p = b->data;
    if (!p) p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void buf_free(util_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *util_strdup(const char *s) { return s ? strdup(s) : NULL; }

char *util_strndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *util_asprintf(const char *fmt, ...) {
    util_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (rc) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

drift_status util_read_file(const char *path, char **out, size_t *len, drift_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return drift_error_set(err, errno == ENOENT ? DRIFT_ERR_NOT_FOUND : DRIFT_ERR_IO,
                                   "%s: cannot open: %s", path, strerror(errno));
    util_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (buf_append(&b, chunk, n)) {
            fclose(f);
            buf_free(&b);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory reading file", path);
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        buf_free(&b);
        return drift_error_set(err, DRIFT_ERR_IO, "%s: read error", path);
    }
    if (len) *len = b.len;
    *out = buf_steal(&b);
    return DRIFT_OK;
}

/* Base64, RFC 4648 section 4. */
static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *util_b64_encode(const void *p, size_t n) {
    const unsigned char *s = p;
    if (n / 3 >= (SIZE_MAX - 1) / 4 - 1) return NULL;
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        o[k++] = b64_alphabet[v >> 18 & 63];
        o[k++] = b64_alphabet[v >> 12 & 63];
        o[k++] = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
    }
    o[k] = 0;
    return o;
}

/* the 6-bit value of a base64 character, -1 for any other */
static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

unsigned char *util_b64_decode(const char *s, size_t *n) {
    size_t len = strlen(s);
    if (len % 4) return NULL;
    unsigned char *o = malloc(len / 4 * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + j];
            int x = b64_value(c);
            /* '=' only as the last one or two characters of the text */
            if (c == '=' && i + 4 == len && j >= 2) { pad++; v <<= 6; continue; }
            if (x < 0 || pad) { free(o); return NULL; }
            v = v << 6 | (unsigned)x;
        }
        o[k++] = (unsigned char)(v >> 16);
        if (pad < 2) o[k++] = (unsigned char)(v >> 8);
        if (pad < 1) o[k++] = (unsigned char)v;
    }
    o[k] = 0;
    *n = k;
    return o;
}

/* UTF-8 validation (RFC 3629: no overlongs, no surrogates, <= U+10FFFF); see util.h. */
size_t util_utf8_decode(const char *str, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)str;
    if (!n) return 0;
    unsigned c = s[0];
    size_t need;
    uint32_t min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) need = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, min = 0x10000;
    else return 0;
    if (n < need) return 0;
    uint32_t v = c & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return need;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid or NUL. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    uint32_t cp;
    return s[0] ? util_utf8_decode((const char *)s, n, &cp) : 0;
}

char *util_utf8_clean(const char *s, size_t len) {
    char *o = malloc(len * 3 + 1);
    if (!o) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t j = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(u + i, len - i);
        if (k) {
            memcpy(o + j, u + i, k);
            j += k;
            i += k;
        } else {
            o[j++] = (char)0xEF;
            o[j++] = (char)0xBF;
            o[j++] = (char)0xBD;
            i++;
        }
    }
    o[j] = 0;
    return o;
}

uint64_t util_fnv1a64(const void *p, size_t n, uint64_t seed) {
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void util_hash_hex(const void *p, size_t n, char out[17]) {
    snprintf(out, 17, "%016llx", (unsigned long long)util_fnv1a64(p, n, 0));
}

double util_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void util_abstime_in_ms(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void util_utc_iso(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void util_rng_seed(util_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t util_rng_next(util_rng *r) { /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double util_rng_uniform(util_rng *r) { return (double)(util_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t util_rng_below(util_rng *r, uint64_t n) {
    if (n == 0) return 0;
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = util_rng_next(r); while (x >= lim);
    return x % n;
}
