/* cmd_runs.c - `driftbench runs list | show | rename | delete`: the runs of
 * a store, to browse and to manage.
 *
 * The work is the store's (store.h, "managing runs": overviews, rename,
 * delete); this file has the flags, the table and the text printed, and
 * the exit codes: 0 done, 2 an error (no such run, a locked run, a taken
 * label, bad input), and for delete without --yes: what would go is
 * printed and, with no terminal to ask on, exit 2 saying to add --yes.
 *
 * runs_print.c prints list and show (the table, the run's lines, their
 * JSON); this file has the flags, rename and delete (runs_print.h between).
 *
 * list and show open the store read-only (an older store is read as it
 * is, never migrated); rename and delete open it for writing. Everything
 * from the store (labels, targets, models, hosts) passes cli_safe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "runs_print.h"
#include "driftbench/store.h"

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
    "  --json       list, show: a JSON document instead: \"schema_version\" first,\n"
    "               then \"runs\" (list) or the run's keys (show)\n"
    "  --yes        delete: do not ask\n"
    "\n"
    "exit: 0 done, 2 error (no such run, a locked run, a taken label, bad input,\n"
    "delete without --yes and no terminal)\n";

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
    if (want == 1) rc = cli_runs_list(st, as_json);
    else if (!strcmp(sub, "show")) rc = cli_runs_show(st, pos[1], as_json);
    else {
        rc = drift_store_run_rename(st, pos[1], pos[2], &err) ? cli_error_lib("runs", &err) : 0;
        if (!rc) printf("renamed run %s to %s\n", cli_safe(pos[1]), cli_safe(pos[2]));
    }
    drift_store_close(st);
    return rc;
}
CLI_COMMAND(runs, "runs", "list, show, rename or delete the runs of a store", cmd_runs)
