/* util.h - internal helpers shared across modules (not public API):
 * growable string buffer (buf_*, util_buf), file reading, base64, hashing,
 * random numbers, time, the redaction's helpers (redact.c). The util_ prefix says their tier: internal,
 * cross-module; drift_ is the public API's. */
#ifndef DRIFT_UTIL_H
#define DRIFT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/text.h"
#include "driftbench/types.h"

/* Growable NUL-terminated byte buffer. Zero-initialise; free with buf_free.
 * The public drift_buf (text.h), so the CLI's buffers and the library's are
 * one type. */
typedef drift_buf util_buf;

int buf_reserve(util_buf *b, size_t extra);           /* 0 ok, -1 nomem */
int buf_append(util_buf *b, const void *p, size_t n); /* 0 ok, -1 nomem */
int buf_puts(util_buf *b, const char *s);
int buf_printf(util_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(util_buf *b, const char *fmt, va_list ap);
char *buf_steal(util_buf *b);                          /* returns data ("" if empty), resets b */
void buf_free(util_buf *b);

char *util_strdup(const char *s);                      /* NULL-safe */
char *util_strndup(const char *s, size_t n);
char *util_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reads a whole file; *out is NUL-terminated, *len excludes the NUL. */
drift_status util_read_file(const char *path, char **out, size_t *len, drift_error *err);

/* The well-formed UTF-8 code point at s (n bytes left) into *cp: its
 * length, 0 when the bytes there are not well-formed (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF). NUL is a code point. */
size_t util_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Copy of s (len bytes) as valid UTF-8: every byte that does not start a
 * valid sequence becomes U+FFFD. NULL on nomem. */
char *util_utf8_clean(const char *s, size_t len);

/* Base64 (RFC 4648 section 4: standard alphabet, '=' padding, no line
 * breaks). encode: n bytes -> malloc'd NUL-terminated text, NULL on nomem.
 * decode: text whose length is a multiple of 4, padding only at the end ->
 * malloc'd bytes (*n of them, NUL after), NULL on bad input or nomem. */
char *util_b64_encode(const void *p, size_t n);
unsigned char *util_b64_decode(const char *s, size_t *n);

/* FNV-1a 64-bit hash and its 16-char lowercase hex form. */
uint64_t util_fnv1a64(const void *p, size_t n, uint64_t seed);
void util_hash_hex(const void *p, size_t n, char out[17]);

/* Redaction (redact.c; drift_redact in status.h is the redaction itself).
 * util_url_password_span: the password of the URL authority that starts at
 * `authority` (just after "://"), by drift_redact's rule (the userinfo ends
 * at the last '@' before '?', '#', whitespace or a quoting byte; the
 * password follows its first ':'): 1 with *off and *len its span, 0 when
 * there is none (or it is empty). util_target_record: a target spec as a
 * run's record keeps it: drift_redact's copy, without the parameters that
 * only say how to authenticate (api_key_env, allow_insecure_key); NULL on
 * nomem. */
int util_url_password_span(const char *authority, size_t *off, size_t *len);
char *util_target_record(const char *spec);

double util_now_ms(void);                /* monotonic clock, milliseconds */
/* ts = the realtime clock now + ms (pthread_cond_timedwait's absolute time). */
struct timespec;
void util_abstime_in_ms(struct timespec *ts, long ms);
void util_utc_iso(char out[32]);         /* UTC now, "YYYY-MM-DDTHH:MM:SSZ" */

/* Budgets "NAME=PERCENT,..." (budget.c): each item sets budget[index(NAME)]
 * to PERCENT / 100 (0 to 100, an optional '%'), or to -1 (no budget) for
 * "none" or "off"; blank items and blanks around names and values are
 * skipped. An item without '=', an unknown name (index < 0) or a bad number
 * is DRIFT_ERR_INVALID naming it (with upper, lower, example and known in
 * the message); budget[0..n) is unchanged on error. spec NULL: DRIFT_OK. */
typedef struct util_budget_names {
    const char *upper;               /* "WORKLOAD": "expected WORKLOAD=PERCENT" */
    const char *lower;               /* "workload": "unknown workload \"x\"" */
    const char *example;             /* "math=1" */
    const char *known;               /* the names, listed in the message */
    int (*index)(const char *name);  /* the slot of name, -1 when unknown */
    size_t n;                        /* slots in budget */
} util_budget_names;
drift_status util_budgets_parse(const char *spec, const util_budget_names *names, double *budget,
                                drift_error *err);

/* splitmix64 / xoshiro-style deterministic RNG. */
typedef struct util_rng { uint64_t s[4]; } util_rng;
void util_rng_seed(util_rng *r, uint64_t seed);
uint64_t util_rng_next(util_rng *r);
double util_rng_uniform(util_rng *r);   /* [0,1) */
uint64_t util_rng_below(util_rng *r, uint64_t n); /* [0,n) */

#endif
