/* cmd_version.c - `driftbench version [--gpu]`: tool version and what was
 * built in. Counting GPUs starts the CUDA runtime (a driver load that takes
 * time and memory), so a CUDA build counts them only when asked (--gpu):
 * no CLI command starts CUDA unless a cuda profile is opened or the user
 * asks about the GPU (issue 23). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "driftbench/profile.h"

static int cmd_version(int argc, char **argv) {
    int gpu = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: driftbench version [--gpu]\n"
                   "  --gpu  also count the CUDA GPUs this process can use (starts the CUDA runtime)\n");
            return CLI_EXIT_PASS;
        }
        if (!strcmp(argv[i], "--gpu")) gpu = 1;
        else return cli_error("version", "unknown argument '%s' (see --help)", argv[i]);
    }
    printf("driftbench %s\n", drift_version());
#ifdef DRIFT_HAVE_CUDA
    if (gpu) {
        int n = drift_cuda_device_count();
        printf("cuda: built in, %d GPU%s visible\n", n, n == 1 ? "" : "s");
    } else {
        printf("cuda: built in (`driftbench version --gpu` counts the GPUs)\n");
    }
#else
    (void)gpu;
    printf("cuda: not built (no nvcc or no GPU at configure time, or DRIFT_CUDA=OFF)\n");
#endif
    return CLI_EXIT_PASS;
}
CLI_COMMAND(version, "version", "print the version and the optional parts built in", cmd_version)
