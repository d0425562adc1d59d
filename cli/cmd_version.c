/* cmd_version.c - `driftbench version`: tool version and what was built in. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "driftbench/profile.h"

static int cmd_version(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: driftbench version\n");
        return 0;
    }
    printf("driftbench %s\n", drift_version());
#ifdef DRIFT_HAVE_CUDA
    int n = drift_cuda_device_count();
    printf("cuda: built in, %d GPU%s visible\n", n, n == 1 ? "" : "s");
#else
    printf("cuda: not built (nvcc was not found at configure time, or DRIFT_CUDA=OFF)\n");
#endif
    return 0;
}
CLI_COMMAND(version, "version", "print the version and the optional parts built in", cmd_version)
