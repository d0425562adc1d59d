/* traffic_privacy.c - what of the traffic is stored (traffic_privacy.h):
 * redaction rules (POSIX extended regexes, built-in kinds among them)
 * applied to every string of a JSON text, then the text itself or its
 * SHA-256. */
#include <jansson.h>
#include <regex.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "driftbench/store.h"
#include "driftbench/traffic_privacy.h"
#include "util/sha256.h"
#include "util/util.h"

#define MAX_RULES 64

typedef struct rule {
    regex_t re;
    char name[16];
} rule;

struct drift_traffic_privacy {
    int hashes;
    rule rules[MAX_RULES];
    size_t n;
    char *desc_rules; /* "emails, re1" */
};

typedef struct kind {
    const char *name;
    const char *re;
} kind;

static const kind KINDS[] = {
    {"emails", "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.[A-Za-z]{2,}"},
    {"keys", "(sk|pk|rk)-[A-Za-z0-9_-]{12,}|gh[po]_[A-Za-z0-9_]{12,}|xox[abp]-[A-Za-z0-9-]{12,}|AKIA[A-Z0-9]{12,}|"
             "[Bb]earer [A-Za-z0-9._~+/=-]{12,}"},
    {"phones", "\\+?[0-9][0-9 ().-]{7,}[0-9]"},
    {"digits", "[0-9]{6,}"},
};
#define N_KINDS (sizeof KINDS / sizeof KINDS[0])

void drift_traffic_privacy_free(drift_traffic_privacy *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) regfree(&p->rules[i].re);
    free(p->desc_rules);
    free(p);
}

static drift_status add_rule(drift_traffic_privacy *p, const char *name, const char *re, drift_error *err) {
    if (p->n == MAX_RULES) return drift_error_set(err, DRIFT_ERR_INVALID, "redact: more than %d rules", MAX_RULES);
    rule *r = &p->rules[p->n];
    int rc = regcomp(&r->re, re, REG_EXTENDED);
    if (rc) {
        char msg[128];
        regerror(rc, &r->re, msg, sizeof msg);
        return drift_error_set(err, DRIFT_ERR_INVALID, "redact: rule %s: the regex does not compile: %s", name, msg);
    }
    regmatch_t m;
    if (regexec(&r->re, "", 1, &m, 0) == 0) {
        regfree(&r->re);
        return drift_error_set(err, DRIFT_ERR_INVALID, "redact: rule %s matches the empty string", name);
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    p->n++;
    return DRIFT_OK;
}

drift_status drift_traffic_privacy_new(const char *store_texts, const char *const *rules, size_t n_rules,
                                       drift_traffic_privacy **out, drift_error *err) {
    *out = NULL;
    drift_traffic_privacy *p = calloc(1, sizeof *p);
    if (!p) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status rc = DRIFT_OK;
    if (!store_texts || !strcmp(store_texts, "full")) p->hashes = 0;
    else if (!strcmp(store_texts, "hashes")) p->hashes = 1;
    else rc = drift_error_set(err, DRIFT_ERR_INVALID, "store-texts: '%s' is not full or hashes", store_texts);
    drift_buf d = {0};
    int n_re = 0;
    for (size_t i = 0; i < n_rules && !rc; i++) {
        const char *r = rules[i] ? rules[i] : "";
        size_t before = p->n;
        if (!strncmp(r, "re:", 3)) {
            char name[16];
            snprintf(name, sizeof name, "re%d", ++n_re);
            rc = add_rule(p, name, r + 3, err);
        } else if (!strcmp(r, "all")) {
            for (size_t k = 0; k < N_KINDS && !rc; k++) rc = add_rule(p, KINDS[k].name, KINDS[k].re, err);
        } else {
            size_t k = 0;
            while (k < N_KINDS && strcmp(r, KINDS[k].name)) k++;
            if (k == N_KINDS)
                rc = drift_error_set(err, DRIFT_ERR_INVALID,
                                     "redact: unknown rule '%.60s' (known: emails, phones, digits, keys, all, "
                                     "re:REGEX)",
                                     r);
            else rc = add_rule(p, KINDS[k].name, KINDS[k].re, err);
        }
        for (size_t k = before; k < p->n && !rc; k++) buf_printf(&d, "%s%s", d.len ? ", " : "", p->rules[k].name);
    }
    if (!rc && n_rules) {
        p->desc_rules = buf_steal(&d);
        if (!p->desc_rules) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_buf_free(&d);
    if (rc) {
        drift_traffic_privacy_free(p);
        return rc;
    }
    *out = p;
    return DRIFT_OK;
}

int drift_traffic_privacy_hashes(const drift_traffic_privacy *p) { return p && p->hashes; }
int drift_traffic_privacy_is_full(const drift_traffic_privacy *p) { return !p || (!p->hashes && !p->n); }

/* s with every rule's matches replaced, malloc'd; *n counts them. */
static char *redact_str(const drift_traffic_privacy *p, const char *s, size_t *n) {
    char *cur = util_strdup(s);
    for (size_t r = 0; cur && r < p->n; r++) {
        drift_buf b = {0};
        const char *at = cur;
        regmatch_t m;
        int flags = 0, bad = 0;
        while (*at && regexec(&p->rules[r].re, at, 1, &m, flags) == 0) {
            if (m.rm_eo <= m.rm_so) { /* cannot happen (no empty matches at new); step on */
                bad |= buf_append(&b, at, 1);
                at++;
            } else {
                bad |= buf_append(&b, at, (size_t)m.rm_so);
                bad |= buf_printf(&b, "[REDACTED:%s]", p->rules[r].name) < 0;
                at += m.rm_eo;
                (*n)++;
            }
            flags = REG_NOTBOL;
        }
        bad |= buf_puts(&b, at);
        free(cur);
        cur = bad ? NULL : buf_steal(&b);
        drift_buf_free(&b);
    }
    return cur;
}

/* Every string value of v redacted in place; -1 on nomem. */
static int redact_json(const drift_traffic_privacy *p, json_t *v, size_t *n, int depth) {
    if (depth > 256) return 0;
    if (json_is_string(v)) {
        char *r = redact_str(p, json_string_value(v), n);
        if (!r) return -1;
        int rc = json_string_set(v, r);
        free(r);
        return rc;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) if (redact_json(p, x, n, depth + 1)) return -1;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (redact_json(p, x, n, depth + 1)) return -1;
    }
    return 0;
}

drift_status drift_traffic_privacy_apply(const drift_traffic_privacy *p, const char *text, char **out,
                                         size_t *n_redacted, drift_error *err) {
    size_t n = 0;
    char *r = NULL;
    if (!text) text = "";
    if (!p || !p->n) {
        r = util_strdup(text);
    } else {
        json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
        if (j && (json_is_object(j) || json_is_array(j))) {
            if (!redact_json(p, j, &n, 0))
                r = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
        } else {
            r = redact_str(p, text, &n);
        }
        json_decref(j);
    }
    if (r && p && p->hashes) {
        char hex[65];
        util_sha256_hex(r, strlen(r), hex);
        free(r);
        r = util_asprintf("sha256:%s", hex);
    }
    if (n_redacted) *n_redacted = n;
    *out = r;
    return r ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
}

int drift_traffic_privacy_is_hash(const char *s) {
    if (!s || strncmp(s, "sha256:", 7)) return 0;
    for (int i = 0; i < 64; i++)
        if (!strchr("0123456789abcdef", s[7 + i]) || !s[7 + i]) return 0;
    return s[71] == '\0';
}

char *drift_traffic_privacy_describe(const drift_traffic_privacy *p) {
    if (drift_traffic_privacy_is_full(p))
        return util_strdup("storing prompts and answers in full (no redaction); --store-texts hashes keeps only "
                           "their SHA-256 and the measures, --redact removes what matches a rule");
    if (p->hashes)
        return util_asprintf("storing prompts and answers only as SHA-256 hashes%s%s%s (judged in memory; the texts "
                             "are not kept)",
                             p->n ? " of the text redacted by " : "", p->n ? p->desc_rules : "", "");
    return util_asprintf("storing prompts and answers redacted by %s (each match replaced by [REDACTED:KIND])",
                         p->desc_rules);
}

drift_status drift_traffic_retention_parse(const char *spec, double *max_age_s, int64_t *keep_newest,
                                           drift_error *err) {
    *max_age_s = -1;
    *keep_newest = -1;
    char *end = NULL;
    double v = spec ? strtod(spec, &end) : NAN;
    if (!spec || end == spec || !isfinite(v) || v < 0) goto bad;
    if (!strcmp(end, "d") || !strcmp(end, "h")) {
        *max_age_s = v * (*end == 'd' ? 86400.0 : 3600.0);
        return DRIFT_OK;
    }
    if (!*end && v == floor(v) && v >= 1 && v <= 9e15 && !strpbrk(spec, ".eE")) {
        *keep_newest = (int64_t)v;
        return DRIFT_OK;
    }
bad:
    return drift_error_set(err, DRIFT_ERR_INVALID,
                           "retention: '%.40s' is not DAYSd, HOURSh or a number of pairs (e.g. 30d, 12h, 100000)",
                           spec ? spec : "");
}

drift_status drift_traffic_retention_apply(drift_store *st, const char *const *labels, size_t n, double max_age_s,
                                           int64_t keep_newest, int64_t now_unix, int64_t *deleted,
                                           drift_error *err) {
    *deleted = 0;
    char before[32], *bp = NULL;
    if (max_age_s >= 0) {
        time_t t = (time_t)((now_unix > 0 ? (double)now_unix : (double)time(NULL)) - max_age_s);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || !strftime(before, sizeof before, "%Y-%m-%dT%H:%M:%SZ", &tm))
            return drift_error_set(err, DRIFT_ERR_INVALID, "retention: the age limit is out of range");
        bp = before;
    }
    for (size_t i = 0; i < n; i++) {
        drift_run_info ri;
        memset(&ri, 0, sizeof ri);
        drift_status rc = drift_store_run_get(st, labels[i], &ri, err);
        if (rc == DRIFT_ERR_NOT_FOUND) continue;
        if (rc) return rc;
        int64_t d = 0, id = ri.id;
        drift_run_info_clear(&ri);
        if ((rc = drift_store_prune_responses(st, id, bp, keep_newest, &d, err))) return rc;
        *deleted += d;
    }
    return DRIFT_OK;
}

void drift_sha256_hex(const void *data, size_t n, char out[65]) { util_sha256_hex(data, n, out); }
