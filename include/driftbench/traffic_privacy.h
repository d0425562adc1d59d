/* traffic_privacy.h - what of a service's traffic is stored (issue 39):
 * production prompts and answers may be sensitive, so a replay (and a
 * shadow proxy) can store each text as it is (full, the default), with
 * redaction rules applied first, or only as its SHA-256 (hashes), the
 * judging having happened in memory before. docs/monitoring.md says what
 * each choice keeps and loses.
 *
 *   drift_traffic_privacy *pv;
 *   const char *rules[] = {"emails", "re:order-[0-9]+"};
 *   drift_traffic_privacy_new("hashes", rules, 2, &pv, &err);
 *   drift_traffic_privacy_apply(pv, text, &stored, &n_redacted, &err);  // what goes to the store
 */
#ifndef DRIFTBENCH_TRAFFIC_PRIVACY_H
#define DRIFTBENCH_TRAFFIC_PRIVACY_H

#include <stddef.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_traffic_privacy drift_traffic_privacy;

/* store_texts: "full" (or NULL) or "hashes". rules: n redaction rules,
 * each a built-in kind or "re:REGEX" (POSIX extended, case-sensitive):
 *   emails   name@domain.tld
 *   phones   a run of 9 or more digits with + ( ) . - or spaces between
 *   digits   6 or more digits in a row (card, account, id numbers)
 *   keys     API-key-like tokens: sk-, pk-, rk-, ghp_, gho_, xoxb-/xoxp-/xoxa-, AKIA
 *            followed by 12 or more of [A-Za-z0-9_-], and "Bearer TOKEN"
 *   all      emails, phones, digits and keys
 * A match becomes "[REDACTED:KIND]" ("[REDACTED:re1]", "re2", ... for
 * regexes in the order given). DRIFT_ERR_INVALID naming a bad rule (an
 * unknown kind, a regex that does not compile, one that matches the empty
 * string). */
DRIFT_API drift_status drift_traffic_privacy_new(const char *store_texts, const char *const *rules, size_t n_rules,
                                                 drift_traffic_privacy **out, drift_error *err);
DRIFT_API void drift_traffic_privacy_free(drift_traffic_privacy *p);

/* 1 when texts are stored as hashes. */
DRIFT_API int drift_traffic_privacy_hashes(const drift_traffic_privacy *p);
/* 1 when the text would be stored as it is (full, no rule): the caller may
 * skip apply. NULL p: 1. */
DRIFT_API int drift_traffic_privacy_is_full(const drift_traffic_privacy *p);

/* The form of text to store, malloc'd in *out: every rule applied (to each
 * string value when text is JSON, which keeps it JSON; to the whole text
 * otherwise), then, with hashes, "sha256:" and the 64 hex digits of the
 * SHA-256 of that. *n_redacted (may be NULL) gets the matches replaced.
 * NULL p: a copy. DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_traffic_privacy_apply(const drift_traffic_privacy *p, const char *text, char **out,
                                                   size_t *n_redacted, drift_error *err);
/* 1 when a stored text is a hash (starts "sha256:" + 64 hex digits). */
DRIFT_API int drift_traffic_privacy_is_hash(const char *stored);

/* One sentence saying plainly what is stored, for the log (no newline),
 * e.g. "storing prompts and answers in full (no redaction); see
 * --store-texts hashes and --redact". malloc'd; NULL on nomem. */
DRIFT_API char *drift_traffic_privacy_describe(const drift_traffic_privacy *p);

/* SHA-256 (FIPS 180-4) of n bytes as 64 lowercase hex digits and a NUL. */
DRIFT_API void drift_sha256_hex(const void *data, size_t n, char out[65]);

#ifdef __cplusplus
}
#endif
#endif
