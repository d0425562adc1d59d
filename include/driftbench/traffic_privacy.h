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

/* ---- retention ----
 * "30d" (days, a decimal allowed: "0.5d"), "12h" (hours) or "N" (the
 * newest N pairs) into *max_age_s (-1 none) and *keep_newest (-1 none).
 * DRIFT_ERR_INVALID naming the spec. */
DRIFT_API drift_status drift_traffic_retention_parse(const char *spec, double *max_age_s, int64_t *keep_newest,
                                                     drift_error *err);
struct drift_store;
/* Applies the limit to the runs labelled labels[0..n) (a traffic store's
 * two sides; a label with no run is skipped): answers stored more than
 * max_age_s seconds before now_unix (<= 0: now) or beyond each run's newest
 * keep_newest are deleted, with their scores, embeddings and the request
 * texts no answer uses any more (drift_store_prune_responses). *deleted
 * gets the answers deleted. A shadow proxy calls it at start and then
 * periodically. */
DRIFT_API drift_status drift_traffic_retention_apply(struct drift_store *st, const char *const *labels, size_t n,
                                                     double max_age_s, int64_t keep_newest, int64_t now_unix,
                                                     int64_t *deleted, drift_error *err);

/* SHA-256 (FIPS 180-4) of n bytes as 64 lowercase hex digits and a NUL. */
DRIFT_API void drift_sha256_hex(const void *data, size_t n, char out[65]);

#ifdef __cplusplus
}
#endif
#endif
