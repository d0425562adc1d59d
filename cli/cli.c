/* cli.c - the shared pieces of cli.h that every command uses: the global
 * flags' values (set by main.c), error printing, the sanitiser for outside
 * text in printed lines, flag-value parsing, the clock and output files.
 * It calls no other file of the CLI, so main.c, progress.c, pipeline.c and
 * the commands all sit above it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "driftbench/status.h"
#include "driftbench/text.h"

int cli_quiet;
int cli_verbose;

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    drift_buf msg = {0};
    va_start(ap, fmt);
    int bad = drift_buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    drift_buf safe = {0};
    if (!bad && msg.data) bad = drift_sanitize_append(&safe, msg.data, msg.len, DRIFT_SAN_LINE);
    fprintf(stderr, "driftbench %s: %s\n", cli_safe(cmd), !bad && safe.data ? safe.data : "(out of memory)");
    drift_buf_free(&msg);
    drift_buf_free(&safe);
    return CLI_EXIT_ERROR;
}

#define CLI_SAFE_RING 8
#define CLI_SAFE_MAX_BYTES 4096

/* The ring of cli_safe's results, per thread. */
static _Thread_local char *safe_ring[CLI_SAFE_RING];
static _Thread_local unsigned safe_next;

static const char *safe_keep(char *s) {
    if (!s) return "(out of memory)";
    unsigned k = safe_next++ % CLI_SAFE_RING;
    free(safe_ring[k]);
    safe_ring[k] = s;
    return s;
}

const char *cli_safe(const char *s) {
    if (!s) return "(null)";
    size_t n = strnlen(s, CLI_SAFE_MAX_BYTES + 1);
    int cut = n > CLI_SAFE_MAX_BYTES;
    if (cut) { /* at a UTF-8 lead byte */
        n = CLI_SAFE_MAX_BYTES;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    }
    drift_buf b = {0};
    if (drift_sanitize_append(&b, s, n, DRIFT_SAN_LINE) || (cut && drift_buf_puts(&b, "..."))) {
        drift_buf_free(&b);
        return "(out of memory)";
    }
    return safe_keep(drift_buf_steal(&b));
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *cli_safe_lines(const char *s) { return s ? safe_keep(drift_sanitize(s, DRIFT_SAN_LINES)) : "(null)"; }

int cli_error_lib(const char *cmd, const drift_error *err) {
    return cli_error(cmd, "%s (%s)", err->msg[0] ? err->msg : "failed", drift_strerror(err->code));
}

int cli_parse_int(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    if (!s || !*s) return cli_error(cmd, "%s needs a number", flag), -1;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) {
        cli_error(cmd, "%s: '%s' is not an integer in [%ld, %ld]", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    if (!s || !*s) return cli_error(cmd, "%s needs a number", flag), -1;
    double v = strtod(s, &end);
    if (*end || !(v >= lo && v <= hi)) {
        cli_error(cmd, "%s: '%s' is not a number in [%g, %g]", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_write_output(const char *cmd, const char *path, const char *text) {
    if (!path || strcmp(path, "-") == 0) {
        fputs(text, stdout);
        return fflush(stdout) ? -1 : 0;
    }
    FILE *f = fopen(path, "w");
    if (!f) return cli_error(cmd, "%s: cannot write", path), -1;
    fputs(text, f);
    if (fclose(f)) return cli_error(cmd, "%s: write failed", path), -1;
    return 0;
}
