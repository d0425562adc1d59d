/* code_internal.h - internal: the code evaluator's parsers of model output,
 * exposed for its tests and fuzzers (tests/fuzz/fuzz_code.c). Not public API. */
#ifndef DRIFT_CODE_INTERNAL_H
#define DRIFT_CODE_INTERNAL_H

#include <stddef.h>

/* The program the host runs for an answer (code_extract.c): the prompt,
 * then the code picked from the answer (drift_code_extract with
 * DRIFT_CODE_BARE_FENCE, else the whole answer). *rule gets "fenced" or "raw", *mode
 * "standalone" (the code defines entry) or "continuation". Returns malloc'd
 * text, NULL when out of memory. The tests are never part of it. */
char *code_build_program(const char *answer, const char *prompt, const char *entry, const char **rule,
                         const char **mode);

/* 1 when the first line of the channel is the runner's "ready NONCE". */
int code_chan_ready(const char *chan, size_t len, const char *nonce);

/* Finds the runner's verdict line "KIND NONCE message" (KIND one of passed,
 * failed_test, syntax_error, killed) in len bytes of chan (not necessarily
 * NUL-terminated). Returns 1 and fills kind / msg (truncated to their caps)
 * when found, else 0 with both empty. */
int code_parse_verdict(const char *chan, size_t len, const char *nonce, char *kind, size_t kind_cap, char *msg,
                       size_t msg_cap);

#endif
