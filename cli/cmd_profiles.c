/* cmd_profiles.c - `driftbench profiles [--gpu] [NAME|SPEC]`: the named
 * numeric profiles of the embedded engine, each with its canonical spec;
 * with a name or a spec, every setting it fixes and what that means.
 *
 * backend=cuda profiles need a CUDA build and a GPU. A build without the
 * CUDA backend marks them unavailable (that costs nothing). A CUDA build
 * checks for a GPU only with --gpu: asking CUDA starts its runtime, which
 * takes time and memory that listing profiles should not cost (issue 23). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/profile.h"

/* Why the cuda profiles cannot run here, or NULL when they can or nobody
 * asked (gpu = 0 in a CUDA build). */
static const char *cuda_unavailable_reason(int gpu) {
#ifdef DRIFT_HAVE_CUDA
    if (!gpu) return NULL;
    return drift_cuda_device_count() == 0 ? "no CUDA GPU visible" : NULL;
#else
    (void)gpu;
    return "this build has no CUDA backend";
#endif
}

static int cmd_profiles(int argc, char **argv) {
    const char *cmd = "profiles";
    const char *arg = NULL;
    int gpu = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: driftbench profiles [--gpu] [NAME | 'profile=NAME&key=value&...']\n"
                   "Without an argument lists the named profiles; with one, describes it.\n"
                   "  --gpu  also check whether the backend=cuda profiles can run here (starts CUDA)\n"
                   "Use a profile in a target: embedded:MODEL.gguf?profile=NAME&key=value\n");
            return CLI_EXIT_PASS;
        }
        if (!strcmp(argv[i], "--gpu")) gpu = 1;
        else if (arg) return cli_error(cmd, "one profile at a time (see --help)");
        else arg = argv[i];
    }
    drift_error err;
    if (arg) {
        drift_numeric_profile p;
        drift_status st = strchr(arg, '=') ? drift_profile_parse(arg, &p, &err) : drift_profile_get(arg, &p, &err);
        if (st) return cli_error_lib(cmd, &err);
        char *spec = drift_profile_to_spec(&p), *desc = drift_profile_describe(&p);
        char prec[64], fw[256];
        drift_profile_precision(&p, prec, sizeof prec);
        drift_profile_framework(&p, fw, sizeof fw);
        char hw[128];
        drift_profile_hardware(&p, hw, sizeof hw);
        printf("%s\n  spec: %s\n  precision: %s\n  framework: %s\n  hardware: %s\n", p.name, spec ? spec : "?", prec, fw, hw);
        if (p.backend == DRIFT_BACKEND_CUDA) {
            const char *why = cuda_unavailable_reason(gpu);
            if (why) printf("  unavailable here: %s\n", why);
            else if (!gpu) printf("  needs a CUDA GPU (`driftbench profiles --gpu NAME` checks this machine)\n");
        }
        printf("\n%s", desc ? desc : "");
        if (desc && desc[0] && desc[strlen(desc) - 1] != '\n') printf("\n");
        free(spec);
        free(desc);
        return CLI_EXIT_PASS;
    }
    const char *why_not = cuda_unavailable_reason(gpu);
    printf("%-12s %-10s %s\n", "profile", "precision", "spec");
    for (size_t i = 0; i < drift_profile_count(); i++) {
        const char *name = drift_profile_name_at(i);
        drift_numeric_profile p;
        if (drift_profile_get(name, &p, &err)) return cli_error_lib(cmd, &err);
        char *spec = drift_profile_to_spec(&p);
        char prec[64];
        drift_profile_precision(&p, prec, sizeof prec);
        int unavailable = p.backend == DRIFT_BACKEND_CUDA && why_not;
        printf("%-12s %-10s %s%s\n", name, prec, spec ? spec : "?", unavailable ? "  [unavailable]" : "");
        free(spec);
    }
    if (why_not) printf("\n[unavailable]: backend=cuda profiles need a CUDA build and a GPU (%s).\n", why_not);
#ifdef DRIFT_HAVE_CUDA
    else if (!gpu)
        printf("\nbackend=cuda profiles need a GPU: `driftbench profiles --gpu` checks this machine.\n");
#endif
    static const char *AXES[] = {"precision", "framework", "hardware"};
    for (int a = 0; a < DRIFT_AXIS_COUNT; a++) {
        printf("\n%s presets (%s=NAME in a spec; emulations of those stacks' numerics):\n", AXES[a], AXES[a]);
        for (size_t i = 0; i < drift_profile_preset_count((drift_profile_axis)a); i++)
            printf("  %-18s %s\n  %-18s   sets: %s\n", drift_profile_preset_name((drift_profile_axis)a, i),
                   drift_profile_preset_summary((drift_profile_axis)a, i), "",
                   drift_profile_preset_spec((drift_profile_axis)a, i));
    }
    printf("\n`driftbench profiles NAME` describes one; any key can be overridden in a target spec.\n");
    return CLI_EXIT_PASS;
}
CLI_COMMAND(profiles, "profiles", "list the embedded engine's numeric profiles and what each sets", cmd_profiles)
