/* budget.c - drift budgets given as "NAME=PERCENT,..." (util.h,
 * util_budgets_parse): the one reader of compare's --budget (names are
 * workloads, analysis/compare.c) and of the traffic gate's (names are drift
 * classes, traffic/traffic_drift.c), so that both take the same spellings
 * and say the same things about a bad one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* s without its leading and trailing spaces (s is written to). */
static char *trim(char *s) {
    while (*s == ' ') s++;
    size_t n = strlen(s);
    while (n && s[n - 1] == ' ') s[--n] = '\0';
    return s;
}

drift_status util_budgets_parse(const char *spec, const util_budget_names *names, double *budget,
                                drift_error *err) {
    if (!spec) return DRIFT_OK;
    double *b = malloc(names->n * sizeof *b);
    char *copy = b ? util_strdup(spec) : NULL;
    if (!copy) {
        free(b);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    memcpy(b, budget, names->n * sizeof *b);
    drift_status rc = DRIFT_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
        item = trim(item);
        if (!*item) continue;
        char *eq = strchr(item, '=');
        if (!eq) {
            rc = drift_error_set(err, DRIFT_ERR_INVALID, "budget \"%s\": expected %s=PERCENT (e.g. %s)", item,
                                 names->upper, names->example);
            break;
        }
        *eq = '\0';
        char *name = trim(item), *val = trim(eq + 1);
        int k = names->index(name);
        if (k < 0 || (size_t)k >= names->n) {
            rc = drift_error_set(err, DRIFT_ERR_INVALID, "budget: unknown %s \"%s\" (known: %s)", names->lower, name,
                                 names->known);
            break;
        }
        if (!strcmp(val, "none") || !strcmp(val, "off")) {
            b[k] = -1.0;
            continue;
        }
        char *end = NULL;
        double pct = strtod(val, &end);
        if (end && *end == '%') end++;
        if (end == val || !end || *end || !isfinite(pct) || pct < 0 || pct > 100) {
            rc = drift_error_set(err, DRIFT_ERR_INVALID, "budget for %s: \"%s\" is not a percentage between 0 and 100",
                                 name, val);
            break;
        }
        b[k] = pct / 100.0;
    }
    free(copy);
    if (!rc) memcpy(budget, b, names->n * sizeof *b);
    free(b);
    return rc;
}
