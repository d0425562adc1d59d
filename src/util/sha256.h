/* sha256.h - SHA-256 (FIPS 180-4) as hex, for modules that store hashes
 * instead of texts (traffic_privacy.c; public as drift_sha256_hex). */
#ifndef DRIFT_UTIL_SHA256_H
#define DRIFT_UTIL_SHA256_H

#include <stddef.h>

/* SHA-256 of n bytes as 64 lowercase hex digits and a NUL. */
void util_sha256_hex(const void *data, size_t n, char out[65]);

#endif
