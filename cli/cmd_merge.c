/* cmd_merge.c - `driftbench merge --db OUT IN1.db IN2.db ...`: joins shard
 * stores (runs, prompts, responses, scores, embeddings) into one, each input
 * by drift_store_merge (store.h says how), in one transaction per input: a
 * failure leaves the output with what earlier inputs added. Stores are
 * named as drift_redact shows them: a URL's password is never printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/store.h"

static int cmd_merge(int argc, char **argv) {
    const char *out = NULL;
    const char *in[1024];
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: driftbench merge --db OUT IN1.db [IN2.db ...]\n"
                   "Copies every run of the input stores into OUT (an SQLite file, created if missing, or\n"
                   "a postgresql:// URL or libpq key=value string: shard files merged into a shared\n"
                   "PostgreSQL store; passwords are shown as ***). Prompts are shared by suite + prompt\n"
                   "id; a label present twice with different content is an error; a run already there\n"
                   "with the same content is skipped. Each input is one transaction.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--db") || !strcmp(argv[i], "-o")) {
            if (++i >= argc) return cli_error("merge", "--db needs a store (a file or a postgresql:// URL)");
            out = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error("merge", "unknown option '%s' (see --help)", argv[i]);
        } else {
            if (n == sizeof in / sizeof in[0]) return cli_error("merge", "too many inputs");
            in[n++] = argv[i];
        }
    }
    if (!out || !n) return cli_error("merge", "--db OUT and at least one input store are required");
    for (size_t i = 0; i < n; i++)
        if (!strcmp(in[i], out)) {
            char *shown = drift_redact(in[i]); /* a store's URL is never printed with its password */
            int rc = cli_error("merge", "input '%s' is the output", shown ? shown : "(name withheld)");
            free(shown);
            return rc;
        }
    drift_error err = {0};
    drift_store *st = NULL;
    if (drift_store_open(out, &st, &err)) return cli_error_lib("merge", &err);
    drift_store_merged s = {0};
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = drift_store_merge(st, in[i], &s, &err); /* one transaction each */
    if (rc) {
        drift_store_close(st);
        return cli_error_lib("merge", &err);
    }
    if (!cli_quiet)
        fprintf(stderr, "merge: %zu runs copied (%zu already present), %zu new prompts, %zu responses, %zu scores, "
                        "%zu embeddings into %s\n",
                s.runs, s.runs_skipped, s.prompts, s.responses, s.scores, s.embeddings, drift_store_display(st));
    drift_store_close(st);
    return 0;
}
CLI_COMMAND(merge, "merge", "join shard stores into one", cmd_merge)
