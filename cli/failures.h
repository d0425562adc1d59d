/* failures.h - failed requests as the CLI prints them: the kind ("HTTP
 * 404", "timeout"), what to check, the line when every request failed, a
 * line per kind. Used by the run stage's printer (pipeline.c), the -v
 * request lines (progress.c) and matrix's cells (cmd_matrix.c). */
#ifndef DRIFT_CLI_FAILURES_H
#define DRIFT_CLI_FAILURES_H

#include <stddef.h>

#include "driftbench/pipeline.h"

/* A kind of failed request as printed: "HTTP 404", "could not connect",
 * "timeout", ... (written into buf, returned). */
const char *cli_failure_kind(const drift_run_failure *f, char *buf, size_t cap);
/* What to check when requests fail with kind f, written into buf and
 * returned: "is the server up?" for connections that could not be made,
 * "the server answered HTTP 404: check the URL and the model name", ...;
 * "" when there is nothing to say. */
const char *cli_failure_hint(const drift_run_failure *f, char *buf, size_t cap);
/* Why every request to target failed, f being the kind that failed most
 * (only: the only kind), written into buf and returned: "every request to
 * URL failed: HTTP 404 (first error: ...); the server answered HTTP 404:
 * check the URL and the model name". */
const char *cli_all_failed_why(const char *target, const drift_run_failure *f, int only, char *buf, size_t cap);
/* One stderr line per kind of failed request of s, each after indent:
 * "5 x HTTP 404; first: HTTP 404: The model `x` does not exist." */
void cli_print_failures(const drift_run_summary *s, const char *indent);

#endif
