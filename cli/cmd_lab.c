/* cmd_lab.c - `driftbench lab`: the main job on the embedded engine (the
 * paper's study on a machine without servers or GPUs). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int cmd_lab(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: driftbench lab [--quick|--full] [--out DIR]\n"
                   "Runs the embedded matrix (shipped models x numeric profiles x five workloads)\n"
                   "and writes the flip table, ANOVA, PRI and an HTML report to DIR.\n");
            return 0;
        }
    fprintf(stderr,
            "driftbench lab: no embedded engine yet: the lab needs the embedded engine (issue 3) and the\n"
            "shipped models (issue 4). Until they land, measure two live endpoints with\n"
            "`driftbench measure --baseline URL1 --target URL2 --suite FILE` (see README.md).\n");
    return CLI_EXIT_ERROR;
}
CLI_COMMAND(lab, "lab", "the embedded study: matrix, flip table, ANOVA, PRI, report", cmd_lab)
