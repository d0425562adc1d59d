/* runs_print.c - what `driftbench runs list` and `runs show` print
 * (cmd_runs.c parses the flags and opens the store read-only): the table
 * of every run, one run's lines, or either as a JSON document (an object
 * whose first key is "schema_version", drift_json_schema_version(),
 * docs/json-schema.md; hardened by drift_json_harden). Everything from the
 * store (labels, targets, models, hosts) passes cli_safe in the text forms. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runs_print.h"
#include "driftbench/report.h"
#include "driftbench/store.h"
#include "driftbench/text.h"

/* "embedded" or "http" (or the scheme) of a target record. */
static const char *target_kind(const char *t) {
    if (!t) return "?";
    if (!strncmp(t, "embedded:", 9)) return "embedded";
    if (!strncmp(t, "http://", 7) || !strncmp(t, "https://", 8)) return "http";
    return "other";
}

/* The "model" of a config JSON (malloc'd; "-" when absent). */
static char *config_model(const char *config) {
    json_t *j = config ? json_loads(config, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(j, "model"));
    char *out = strdup(m && *m ? m : "-");
    json_decref(j);
    return out;
}

/* ---- list ---- */

enum { COL_LABEL, COL_KIND, COL_MODEL, COL_RESP, COL_FAILED, COL_SCORED, COL_CREATED, COL_RESUMED, COL_ENDP,
       COL_LOCK, N_COLS };
static const char *const COL_NAME[N_COLS] = {"LABEL", "TARGET", "MODEL", "RESPONSES", "FAILED", "SCORED",
                                             "CREATED", "LAST RESUMED", "ENDPOINTS", "LOCK"};
static const int COL_RIGHT[N_COLS] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 0};

static void print_row(char *const cell[N_COLS], const int width[N_COLS]) {
    for (int c = 0; c < N_COLS; c++) {
        const char *sep = c ? "  " : "";
        if (c == N_COLS - 1) printf("%s%s", sep, cell[c]); /* no trailing blanks */
        else if (COL_RIGHT[c]) printf("%s%*s", sep, width[c], cell[c]);
        else printf("%s%-*s", sep, width[c], cell[c]);
    }
    putchar('\n');
}

static json_t *overview_json(const drift_run_overview *o) {
    char *model = config_model(o->info.config_json);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:I, s:I, s:I, s:I, s:I, s:s, s:s?, s:s?, s:I, s:I, s:b}", "label",
                          o->info.label, "target_kind", target_kind(o->info.target), "target", o->info.target,
                          "model", model, "responses", (json_int_t)o->responses, "answers",
                          (json_int_t)(o->responses - o->failed), "failed", (json_int_t)o->failed, "scored",
                          (json_int_t)o->scored, "embeddings", (json_int_t)o->embeddings, "created",
                          o->info.started_at, "finished", o->info.finished_at, "last_resumed", o->last_begun,
                          "resumes", (json_int_t)o->resumes, "endpoints", (json_int_t)o->n_endpoints, "locked",
                          o->locked);
    free(model);
    return j;
}

/* Prints body as a document: "schema_version" first, then body's keys in
 * their order, hardened (drift_json_harden), with a newline. Takes body. */
static int print_json(json_t *body) {
    json_t *doc = json_pack("{s:i}", "schema_version", drift_json_schema_version());
    char *d = doc && body && !json_object_update(doc, body) ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER)
                                                            : NULL;
    char *h = d ? drift_json_harden(d) : NULL;
    free(d);
    json_decref(doc);
    json_decref(body);
    if (!h) return cli_error("runs", "out of memory");
    puts(h);
    free(h);
    return 0;
}

/* See runs_print.h. */
int cli_runs_list(drift_store *st, int as_json) {
    drift_run_overview *ov = NULL;
    size_t n = 0;
    drift_error err = {0};
    if (drift_store_run_overviews(st, &ov, &n, &err)) return cli_error_lib("runs", &err);
    int rc = 0;
    if (as_json) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(a, overview_json(&ov[i]));
        rc = print_json(json_pack("{s:o}", "runs", a));
    } else if (n == 0) {
        printf("no runs in %s\n", cli_safe(drift_store_display(st)));
    } else {
        char *(*cells)[N_COLS] = calloc(n, sizeof *cells);
        int width[N_COLS];
        for (int c = 0; c < N_COLS; c++) width[c] = (int)strlen(COL_NAME[c]);
        for (size_t i = 0; cells && i < n; i++) {
            const drift_run_overview *o = &ov[i];
            char *model = config_model(o->info.config_json);
            cells[i][COL_LABEL] = strdup(cli_safe(o->info.label));
            cells[i][COL_KIND] = strdup(target_kind(o->info.target));
            cells[i][COL_MODEL] = strdup(cli_safe(model));
            free(model);
            cells[i][COL_CREATED] = strdup(cli_safe(o->info.started_at));
            cells[i][COL_RESUMED] = strdup(o->last_begun ? cli_safe(o->last_begun) : "-");
            cells[i][COL_LOCK] = strdup(o->locked ? "locked" : "-");
            size_t nums[4] = {o->responses, o->failed, o->scored, o->n_endpoints};
            const int at[4] = {COL_RESP, COL_FAILED, COL_SCORED, COL_ENDP};
            for (int k = 0; k < 4; k++) {
                char b[32];
                snprintf(b, sizeof b, "%zu", nums[k]);
                cells[i][at[k]] = strdup(b);
            }
            for (int c = 0; c < N_COLS; c++) {
                if (!cells[i][c]) cells[i][c] = strdup("?");
                if (cells[i][c] && (int)strlen(cells[i][c]) > width[c]) width[c] = (int)strlen(cells[i][c]);
            }
        }
        if (!cells) rc = cli_error("runs", "out of memory");
        else {
            char *head[N_COLS];
            for (int c = 0; c < N_COLS; c++) head[c] = (char *)COL_NAME[c];
            print_row(head, width);
            for (size_t i = 0; i < n; i++) print_row(cells[i], width);
            for (size_t i = 0; i < n; i++)
                for (int c = 0; c < N_COLS; c++) free(cells[i][c]);
            free(cells);
        }
    }
    drift_run_overview_array_free(ov, n);
    return rc;
}

/* ---- show ---- */

static json_t *json_or_string(const char *text) {
    json_t *j = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    return j ? j : text ? json_string(text) : json_null();
}

/* See runs_print.h. */
int cli_runs_show(drift_store *st, const char *label, int as_json) {
    drift_run_overview o;
    drift_error err = {0};
    if (drift_store_run_overview(st, label, &o, &err)) return cli_error_lib("runs", &err);
    int rc = 0;
    const drift_store_run_counts *c = &o.per_workload;
    if (as_json) {
        json_t *j = overview_json(&o);
        json_object_set_new(j, "identity", json_string(o.identity));
        json_object_set_new(j, "config", json_or_string(o.info.config_json));
        json_object_set_new(j, "decoding", json_or_string(o.info.decoding_json));
        json_object_set_new(j, "templates", json_or_string(o.info.templates_json));
        json_object_set_new(j, "suites", json_or_string(o.info.suites_json));
        json_object_set_new(j, "tool_version", o.info.tool_version ? json_string(o.info.tool_version) : json_null());
        json_t *eps = json_array(), *wl = json_object();
        for (size_t i = 0; i < o.n_endpoints; i++)
            json_array_append_new(eps, json_pack("{s:s, s:s, s:s, s:I}", "target", o.endpoints[i].target, "first",
                                                 o.endpoints[i].first_at, "last", o.endpoints[i].last_at, "begins",
                                                 (json_int_t)o.endpoints[i].begins));
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!c->answers[w] && !c->errors[w]) continue;
            json_object_set_new(wl, drift_workload_name((drift_workload)w),
                                json_pack("{s:I, s:I, s:I, s:I}", "answers", (json_int_t)c->answers[w], "failed",
                                          (json_int_t)c->errors[w], "cut", (json_int_t)c->cut[w], "scored",
                                          (json_int_t)o.scored_per_workload[w]));
        }
        json_object_set_new(j, "endpoint_history", eps);
        json_object_set_new(j, "workloads", wl);
        json_object_set_new(j, "lock_holder", o.locked ? json_string(o.lock_holder) : json_null());
        rc = print_json(j);
    } else {
        char *model = config_model(o.info.config_json);
        printf("run %s\n", cli_safe(o.info.label));
        printf("  target        %s (%s)\n", cli_safe(o.info.target), target_kind(o.info.target));
        printf("  identity      %s\n", cli_safe(o.identity));
        printf("  model         %s\n", cli_safe(model));
        printf("  config        %s\n", cli_safe(o.info.config_json));
        printf("  decoding      %s\n", cli_safe(o.info.decoding_json));
        printf("  templates     %s\n", cli_safe(o.info.templates_json ? o.info.templates_json : "{}"));
        printf("  suites        %s\n", cli_safe(o.info.suites_json ? o.info.suites_json : "[]"));
        printf("  tool          %s\n", cli_safe(o.info.tool_version ? o.info.tool_version : "-"));
        printf("  created       %s\n", cli_safe(o.info.started_at));
        printf("  finished      %s\n", o.info.finished_at ? cli_safe(o.info.finished_at) : "- (not finished)");
        printf("  last resumed  %s\n", o.last_begun ? cli_safe(o.last_begun) : "- (never)");
        printf("  lock          %s\n", o.locked ? cli_safe(o.lock_holder) : "- (no writer)");
        free(model);
        printf("endpoints (%zu)\n", o.n_endpoints);
        for (size_t i = 0; i < o.n_endpoints; i++) {
            const drift_run_endpoint *e = &o.endpoints[i];
            printf("  %s .. %s  begins %-4ld %s\n", cli_safe(e->first_at), cli_safe(e->last_at), e->begins,
                   cli_safe(e->target));
        }
        printf("responses %zu (%zu answers, %zu failed), %zu scored, %zu scores, %zu embeddings\n", o.responses,
               o.responses - o.failed, o.failed, o.scored, o.scores, o.embeddings);
        printf("  %-12s %8s %8s %8s %8s\n", "WORKLOAD", "ANSWERS", "FAILED", "CUT", "SCORED");
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!c->answers[w] && !c->errors[w]) continue;
            printf("  %-12s %8zu %8zu %8zu %8zu\n", drift_workload_name((drift_workload)w), c->answers[w],
                   c->errors[w], c->cut[w], o.scored_per_workload[w]);
        }
    }
    drift_run_overview_clear(&o);
    return rc;
}
