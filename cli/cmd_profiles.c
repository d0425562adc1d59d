/* cmd_profiles.c - `driftbench profiles [NAME|SPEC]`: the named numeric
 * profiles of the embedded engine, each with its canonical spec; with a name
 * or a spec, every setting it fixes and what that means. backend=cuda
 * profiles are marked unavailable when the build has no CUDA backend or no
 * GPU is visible. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/profile.h"

static int cmd_profiles(int argc, char **argv) {
    const char *cmd = "profiles";
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: driftbench profiles [NAME | 'profile=NAME&key=value&...']\n"
               "Without an argument lists the named profiles; with one, describes it.\n"
               "Use a profile in a target: embedded:MODEL.gguf?profile=NAME&key=value\n");
        return CLI_EXIT_PASS;
    }
    if (argc > 2) return cli_error(cmd, "one profile at a time (see --help)");
    drift_error err;
    if (argc == 2) {
        drift_numeric_profile p;
        drift_status st = strchr(argv[1], '=') ? drift_profile_parse(argv[1], &p, &err) : drift_profile_get(argv[1], &p, &err);
        if (st) return cli_error_lib(cmd, &err);
        char *spec = drift_profile_to_spec(&p), *desc = drift_profile_describe(&p);
        char prec[64], fw[256];
        drift_profile_precision(&p, prec, sizeof prec);
        drift_profile_framework(&p, fw, sizeof fw);
        printf("%s\n  spec: %s\n  precision: %s\n  framework: %s\n", p.name, spec ? spec : "?", prec, fw);
        if (p.backend == DRIFT_BACKEND_CUDA && drift_cuda_device_count() == 0)
#ifdef DRIFT_HAVE_CUDA
            printf("  unavailable here: no CUDA GPU visible\n");
#else
            printf("  unavailable here: this build has no CUDA backend\n");
#endif
        printf("\n%s", desc ? desc : "");
        if (desc && desc[0] && desc[strlen(desc) - 1] != '\n') printf("\n");
        free(spec);
        free(desc);
        return CLI_EXIT_PASS;
    }
    int n_gpu = drift_cuda_device_count();
#ifdef DRIFT_HAVE_CUDA
    const char *why_not = "no CUDA GPU visible";
#else
    const char *why_not = "this build has no CUDA backend";
#endif
    int any_unavailable = 0;
    printf("%-12s %-10s %s\n", "profile", "precision", "spec");
    for (size_t i = 0; i < drift_profile_count(); i++) {
        const char *name = drift_profile_name_at(i);
        drift_numeric_profile p;
        if (drift_profile_get(name, &p, &err)) return cli_error_lib(cmd, &err);
        char *spec = drift_profile_to_spec(&p);
        char prec[64];
        drift_profile_precision(&p, prec, sizeof prec);
        int unavailable = p.backend == DRIFT_BACKEND_CUDA && n_gpu == 0;
        any_unavailable |= unavailable;
        printf("%-12s %-10s %s%s\n", name, prec, spec ? spec : "?", unavailable ? "  [unavailable]" : "");
        free(spec);
    }
    if (any_unavailable) printf("\n[unavailable]: backend=cuda profiles need a CUDA build and a GPU (%s).\n", why_not);
    printf("\n`driftbench profiles NAME` describes one; any key can be overridden in a target spec.\n");
    return CLI_EXIT_PASS;
}
CLI_COMMAND(profiles, "profiles", "list the embedded engine's numeric profiles and what each sets", cmd_profiles)
