/* status.c - status strings and the error-message helpers of status.h.
 * Every message is formatted whole, then redacted (drift_redact, redact.c),
 * then cut to DRIFT_ERROR_MSG_MAX: cutting first could leave the start of a
 * password without the '@' that tells it from a host. */
#include "driftbench/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

const char *drift_strerror(drift_status status) {
    switch (status) {
    case DRIFT_OK: return "ok";
    case DRIFT_ERR_NOMEM: return "out of memory";
    case DRIFT_ERR_IO: return "i/o error";
    case DRIFT_ERR_PARSE: return "parse error";
    case DRIFT_ERR_INVALID: return "invalid argument";
    case DRIFT_ERR_NOT_FOUND: return "not found";
    case DRIFT_ERR_STORE: return "store error";
    case DRIFT_ERR_HTTP: return "http error";
    case DRIFT_ERR_TIMEOUT: return "timeout";
    case DRIFT_ERR_UNSUPPORTED: return "unsupported";
    case DRIFT_ERR_SANDBOX: return "sandbox error";
    case DRIFT_ERR_EVAL: return "evaluator error";
    case DRIFT_ERR_MODEL: return "model error";
    case DRIFT_ERR_NUMERIC: return "numeric error";
    case DRIFT_ERR_INTERNAL: return "internal error";
    case DRIFT_ERR_CANCELLED: return "cancelled";
    case DRIFT_ERR_XGBOOST: return "xgboost error";
    case DRIFT_ERR_MISMATCH: return "mismatch with stored data";
    }
    return "unknown error";
}

/* err->msg = the redaction of b's text (b is freed); a fixed line when
 * memory runs out, never the unredacted text. */
static void set_redacted(drift_error *err, util_buf *b, int failed) {
    char *r = failed ? NULL : drift_redact(b->data ? b->data : "");
    buf_free(b);
    snprintf(err->msg, sizeof err->msg, "%s", r ? r : "(message withheld: out of memory while redacting it)");
    free(r);
}

drift_status drift_error_set(drift_error *err, drift_status code, const char *fmt, ...) {
    if (err) {
        err->code = code;
        util_buf b = {0};
        va_list ap;
        va_start(ap, fmt);
        int failed = buf_vprintf(&b, fmt, ap);
        va_end(ap);
        set_redacted(err, &b, failed);
    }
    return code;
}

drift_status drift_error_prefix(drift_error *err, const char *fmt, ...) {
    if (!err) return DRIFT_ERR_INTERNAL;
    util_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    int failed = buf_vprintf(&b, fmt, ap);
    va_end(ap);
    if (!failed) failed = buf_puts(&b, err->msg);
    set_redacted(err, &b, failed);
    return err->code;
}

void drift_error_clear(drift_error *err) {
    if (err) {
        err->code = DRIFT_OK;
        err->msg[0] = '\0';
    }
}

const char *drift_version(void) { return DRIFT_VERSION; }
