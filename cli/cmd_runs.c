/* cmd_runs.c - `driftbench runs list | show | rename | delete`: the runs of
 * a store, to browse and to manage.
 *
 * The work is the store's (store.h, "managing runs": overviews, rename,
 * delete); this file has the flags, the table and the text printed, and
 * the exit codes: 0 done, 2 an error (no such run, a locked run, a taken
 * label, bad input), and for delete without --yes: what would go is
 * printed and, with no terminal to ask on, exit 2 saying to add --yes.
 *
 * list and show open the store read-only (an older store is read as it
 * is, never migrated); rename and delete open it for writing. Everything
 * from the store (labels, targets, models, hosts) passes cli_safe. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "driftbench/store.h"
#include "driftbench/text.h"

static const char runs_usage[] =
    "usage: driftbench runs list --db STORE [--json]\n"
    "       driftbench runs show LABEL --db STORE [--json]\n"
    "       driftbench runs rename OLD NEW --db STORE\n"
    "       driftbench runs delete LABEL --db STORE [--yes]\n"
    "\n"
    "The runs of a store. A run is a label whose identity is what decides its\n"
    "answers: the model and the target's request parameters (not its URL), the\n"
    "decoding, the configuration and the prompt templates. Running a label again\n"
    "through another endpoint (another port, host or a fixed typo) resumes it and\n"
    "records the endpoint; anything else needs a new label.\n"
    "\n"
    "  list     every run: label, target kind, model, responses, failed requests,\n"
    "           scored responses, created, last resumed, endpoints, lock\n"
    "  show     one run: its identity, endpoints, counts per workload, lock\n"
    "  rename   OLD becomes NEW with everything it holds (refused when NEW\n"
    "           exists or a driftbench is writing OLD)\n"
    "  delete   removes the run, its responses, scores, embeddings and\n"
    "           endpoints (its prompts stay: suites are shared); prints what\n"
    "           it removes; refused while a driftbench is writing it. Without\n"
    "           --yes it asks on a terminal, and elsewhere prints what would\n"
    "           go and exits 2\n"
    "\n"
    "  --db STORE   SQLite file or postgresql:// URL (required)\n"
    "  --json       list, show: JSON instead of the table\n"
    "  --yes        delete: do not ask\n"
    "\n"
    "exit: 0 done, 2 error (no such run, a locked run, a taken label, bad input,\n"
    "delete without --yes and no terminal)\n";

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

/* Prints a JSON value hardened (drift_json_harden), with a newline. */
static int print_json(json_t *j) {
    char *d = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    char *h = d ? drift_json_harden(d) : NULL;
    free(d);
    json_decref(j);
    if (!h) return cli_error("runs", "out of memory");
    puts(h);
    free(h);
    return 0;
}

static int runs_list(drift_store *st, int as_json) {
    drift_run_overview *ov = NULL;
    size_t n = 0;
    drift_error err = {0};
    if (drift_store_run_overviews(st, &ov, &n, &err)) return cli_error_lib("runs", &err);
    int rc = 0;
    if (as_json) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(a, overview_json(&ov[i]));
        rc = print_json(a);
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

static int runs_show(drift_store *st, const char *label, int as_json) {
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

/* ---- rename, delete ---- */

static void print_removal(const char *verb, const char *label, const drift_run_removal *r) {
    printf("%s run %s: %zu responses (%zu failed), %zu scores, %zu embeddings, %zu endpoint records\n", verb,
           cli_safe(label), r->responses, r->failed, r->scores, r->embeddings, r->endpoints);
}

/* Without --yes the store is opened read-only to say what would go (a
 * store of an older schema stays as it is), and for writing only once the
 * answer is yes. */
static int runs_delete(const char *db, const char *label, int yes) {
    drift_error err = {0};
    drift_run_removal r;
    drift_store *st = NULL;
    if (!yes) {
        if (drift_store_open_readonly(db, &st, &err)) return cli_error_lib("runs", &err);
        drift_status ds = drift_store_run_removal(st, label, &r, &err);
        drift_store_close(st);
        st = NULL;
        if (ds) return cli_error_lib("runs", &err);
        if (r.locked)
            return cli_error("runs", "run '%s' is being written by another driftbench (%s); not deleting it",
                             label, r.lock_holder);
        print_removal("would delete", label, &r);
        fflush(stdout);
        if (!isatty(STDIN_FILENO))
            return cli_error("runs", "delete: nothing deleted; add --yes to delete run '%s'", label);
        fprintf(stderr, "delete run '%s'? [y/N] ", cli_safe(label));
        char line[16];
        if (!fgets(line, sizeof line, stdin) || (line[0] != 'y' && line[0] != 'Y'))
            return cli_error("runs", "delete: nothing deleted");
    }
    if (drift_store_open(db, &st, &err)) return cli_error_lib("runs", &err);
    int rc = 0;
    if (drift_store_run_delete(st, label, &r, &err)) rc = cli_error_lib("runs", &err);
    else print_removal("deleted", label, &r);
    drift_store_close(st);
    return rc;
}

static int cmd_runs(int argc, char **argv) {
    const char *db = NULL, *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0, as_json = 0, yes = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(runs_usage, stdout);
            return 0;
        } else if (!strcmp(a, "--db") || !strncmp(a, "--db=", 5)) {
            if (a[4] == '=') db = a + 5;
            else if (i + 1 < argc) db = argv[++i];
            else return cli_error("runs", "--db needs a store");
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--yes")) {
            yes = 1;
        } else if (!strcmp(a, "--")) {
            for (i++; i < argc; i++) {
                if (n_pos == 3) return cli_error("runs", "unexpected argument '%s'", argv[i]);
                pos[n_pos++] = argv[i];
            }
        } else if (a[0] == '-' && a[1]) {
            return cli_error("runs", "unknown option '%s' (see --help)", a);
        } else {
            if (n_pos == 3) return cli_error("runs", "unexpected argument '%s'", a);
            pos[n_pos++] = a;
        }
    }
    const char *sub = pos[0];
    if (!sub) return cli_error("runs", "which: list, show, rename or delete (see --help)");
    int want = !strcmp(sub, "list") ? 1 : !strcmp(sub, "show") || !strcmp(sub, "delete") ? 2
                                     : !strcmp(sub, "rename")                            ? 3
                                                                                         : 0;
    if (!want) return cli_error("runs", "unknown subcommand '%s' (list, show, rename or delete)", sub);
    if (n_pos != want)
        return cli_error("runs", "%s takes %s", sub,
                         want == 1 ? "no argument" : want == 2 ? "one LABEL" : "two labels: OLD NEW");
    if (!db) return cli_error("runs", "--db STORE is required (see --help)");
    int writes = want != 1 && strcmp(sub, "show") != 0;
    if (as_json && writes) return cli_error("runs", "--json goes with list and show");
    if (yes && strcmp(sub, "delete") != 0) return cli_error("runs", "--yes goes with delete");
    if (!strcmp(sub, "delete")) return runs_delete(db, pos[1], yes);
    drift_store *st = NULL;
    drift_error err = {0};
    if ((writes ? drift_store_open(db, &st, &err) : drift_store_open_readonly(db, &st, &err)) != DRIFT_OK)
        return cli_error_lib("runs", &err);
    int rc;
    if (want == 1) rc = runs_list(st, as_json);
    else if (!strcmp(sub, "show")) rc = runs_show(st, pos[1], as_json);
    else {
        rc = drift_store_run_rename(st, pos[1], pos[2], &err) ? cli_error_lib("runs", &err) : 0;
        if (!rc) printf("renamed run %s to %s\n", cli_safe(pos[1]), cli_safe(pos[2]));
    }
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(runs, "runs", "list, show, rename or delete the runs of a store", cmd_runs)
