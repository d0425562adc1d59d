/* util.h - internal helpers shared across modules (not public API):
 * growable string buffer, file reading, base64, hashing, time. */
#ifndef DRIFT_UTIL_H
#define DRIFT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/types.h"

/* Growable NUL-terminated byte buffer. Zero-initialise; free with buf_free. */
typedef struct drift_buf {
    char *data;
    size_t len;
    size_t cap;
} drift_buf;

int buf_reserve(drift_buf *b, size_t extra);           /* 0 ok, -1 nomem */
int buf_append(drift_buf *b, const void *p, size_t n); /* 0 ok, -1 nomem */
int buf_puts(drift_buf *b, const char *s);
int buf_printf(drift_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(drift_buf *b, const char *fmt, va_list ap);
char *buf_steal(drift_buf *b);                          /* returns data ("" if empty), resets b */
void buf_free(drift_buf *b);

char *drift_strdup(const char *s);                      /* NULL-safe */
char *drift_strndup(const char *s, size_t n);
char *drift_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reads a whole file; *out is NUL-terminated, *len excludes the NUL. */
drift_status drift_read_file(const char *path, char **out, size_t *len, drift_error *err);

/* Copy of s (len bytes) as valid UTF-8: every byte that does not start a
 * valid sequence becomes U+FFFD. NULL on nomem. */
char *drift_utf8_clean(const char *s, size_t len);

/* Base64 (RFC 4648 section 4: standard alphabet, '=' padding, no line
 * breaks). encode: n bytes -> malloc'd NUL-terminated text, NULL on nomem.
 * decode: text whose length is a multiple of 4, padding only at the end ->
 * malloc'd bytes (*n of them, NUL after), NULL on bad input or nomem. */
char *drift_b64_encode(const void *p, size_t n);
unsigned char *drift_b64_decode(const char *s, size_t *n);

/* FNV-1a 64-bit hash and its 16-char lowercase hex form. */
uint64_t drift_fnv1a64(const void *p, size_t n, uint64_t seed);
void drift_hash_hex(const void *p, size_t n, char out[17]);

double drift_now_ms(void);                /* monotonic clock, milliseconds */
void drift_utc_iso(char out[32]);         /* UTC now, "YYYY-MM-DDTHH:MM:SSZ" */

/* splitmix64 / xoshiro-style deterministic RNG. */
typedef struct drift_rng { uint64_t s[4]; } drift_rng;
void drift_rng_seed(drift_rng *r, uint64_t seed);
uint64_t drift_rng_next(drift_rng *r);
double drift_rng_uniform(drift_rng *r);   /* [0,1) */
uint64_t drift_rng_below(drift_rng *r, uint64_t n); /* [0,n) */

#endif
