/* status.h - error codes and error messages of the DriftBench library.
 *
 * Every fallible library function returns a drift_status and, when given a
 * non-NULL drift_error, writes a message that names the problem (file, line,
 * field) into it. The enum only grows: values are never renumbered.
 * Messages never carry a secret: drift_error_set and drift_error_prefix
 * pass what they write through drift_redact. */
#ifndef DRIFTBENCH_STATUS_H
#define DRIFTBENCH_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DRIFT_API __attribute__((visibility("default")))

typedef enum drift_status {
    DRIFT_OK = 0,
    DRIFT_ERR_NOMEM = 1,       /* allocation failed */
    DRIFT_ERR_IO = 2,          /* file or socket error */
    DRIFT_ERR_PARSE = 3,       /* malformed outside data (suite, JSON, GGUF, reply) */
    DRIFT_ERR_INVALID = 4,     /* bad argument, spec, flag value */
    DRIFT_ERR_NOT_FOUND = 5,   /* label, prompt, file, tensor not found */
    DRIFT_ERR_STORE = 6,       /* SQLite failure */
    DRIFT_ERR_HTTP = 7,        /* transport or HTTP status failure */
    DRIFT_ERR_TIMEOUT = 8,     /* a deadline passed */
    DRIFT_ERR_UNSUPPORTED = 9, /* feature not built in / not available */
    DRIFT_ERR_SANDBOX = 10,    /* the code sandbox could not run a program */
    DRIFT_ERR_EVAL = 11,       /* an evaluator could not judge */
    DRIFT_ERR_MODEL = 12,      /* model / engine failure */
    DRIFT_ERR_NUMERIC = 13,    /* NaN/Inf or numerical breakdown */
    DRIFT_ERR_INTERNAL = 14,   /* a bug: an invariant did not hold */
    DRIFT_ERR_CANCELLED = 15,  /* stopped by the caller (signal, callback) */
    DRIFT_ERR_XGBOOST = 16,    /* libxgboost reported an error */
    DRIFT_ERR_MISMATCH = 17    /* stored data disagrees with the request (resume) */
} drift_status;

#define DRIFT_ERROR_MSG_MAX 1024

typedef struct drift_error {
    drift_status code;
    char msg[DRIFT_ERROR_MSG_MAX];
} drift_error;

/* Short fixed description of a status ("parse error"). Never NULL. */
DRIFT_API const char *drift_strerror(drift_status status);

/* Sets err (may be NULL) to code + printf-style message; returns code so a
 * caller can write `return drift_error_set(err, DRIFT_ERR_PARSE, ...)`. */
DRIFT_API drift_status drift_error_set(drift_error *err, drift_status code,
                                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends context ("suite.jsonl:12: ") to an existing message; returns the
 * stored code. */
DRIFT_API drift_status drift_error_prefix(drift_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

DRIFT_API void drift_error_clear(drift_error *err);

/* A copy of text (malloc'd; NULL when text is NULL or out of memory) with
 * every secret replaced by "***": the password of a URL's userinfo
 * (scheme://user:PASSWORD@host, the userinfo ending at the last '@' before
 * the query, so a password may hold '@', '/' and '%'), and the value of a
 * parameter named password, passwd, pwd, sslpassword, api_key, apikey,
 * api-key, key, token, access_token, auth_token, secret or client_secret
 * (URL queries, libpq key=value strings, any text). A text without secrets
 * comes back unchanged. The one redaction of the library and the CLI: use
 * it for every URL or connection string that is printed or stored. */
DRIFT_API char *drift_redact(const char *text);

/* The library's version string ("0.1.0"). */
DRIFT_API const char *drift_version(void);

#ifdef __cplusplus
}
#endif
#endif
