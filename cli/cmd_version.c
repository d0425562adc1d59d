/* cmd_version.c - `driftbench version [--gpu] [--format text|json]`: the
 * version, the git commit and build options fixed at configure time, where
 * the data files are found, and the versions of the libraries this process
 * runs with (drift_build_info_json, install.h). Counting GPUs starts the
 * CUDA runtime (a driver load that takes time and memory), so a CUDA build
 * counts them only when asked (--gpu): no CLI command starts CUDA unless a
 * cuda profile is opened or the user asks about the GPU (issue 23). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "driftbench/install.h"
#include "driftbench/profile.h"
#include "driftbench/report.h"

static void version_usage(FILE *f) {
    fprintf(f, "usage: driftbench version [--gpu] [--format text|json]\n"
               "\n"
               "The version, the git commit it was built from (\"unknown\" outside a git checkout),\n"
               "the build options (CUDA, PostgreSQL, sanitizers, build type, compiler), where the\n"
               "shipped models are found (--models or $DRIFT_DATA_DIR, ./models, the installed\n"
               "datadir, the source tree: the first that has them; \"lookup\" says which roots\n"
               "this build searches: a package leaves the source tree out) and the versions of\n"
               "the libraries this process runs with (curl, SQLite, jansson, libyaml, libpq,\n"
               "xgboost, GSL, zstd, PCRE2, utf8proc, libmicrohttpd, libseccomp).\n"
               "\n"
               "  --gpu            also count the CUDA GPUs this process can use (starts the CUDA runtime)\n"
               "  --format FORMAT  text (default) or json (one document: schema_version, version,\n"
               "                   commit, build, datadir, libraries, data[, gpus])\n"
               "\n"
               "exit: 0, 2 bad arguments\n");
}

/* "--" for a JSON null, else the string. */
static const char *str_or(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "--";
}

static int cmd_version(int argc, char **argv) {
    int gpu = 0;
    const char *format = "text";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            version_usage(stdout);
            return CLI_EXIT_PASS;
        }
        if (!strcmp(argv[i], "--gpu")) gpu = 1;
        else if (!strcmp(argv[i], "--format")) {
            if (i + 1 >= argc) return cli_error("version", "--format needs a value (text or json)");
            format = argv[++i];
            if (strcmp(format, "text") && strcmp(format, "json"))
                return cli_error("version", "--format: '%s' is not text or json", format);
        } else return cli_error("version", "unknown argument '%s' (see --help)", argv[i]);
    }
    char *info_text = drift_build_info_json();
    json_t *info = info_text ? json_loads(info_text, 0, NULL) : NULL;
    free(info_text);
    if (!info) return cli_error("version", "out of memory");
    const char *from = NULL;
    char *models = drift_data_find("models", &from);
    char *guard = drift_data_find("models/guard/guard-llama-1m.gguf", NULL);
    int n_gpu = -1;
#ifdef DRIFT_HAVE_CUDA
    if (gpu) n_gpu = drift_cuda_device_count();
#else
    (void)gpu;
#endif
    int rc = CLI_EXIT_PASS;
    const char *source = drift_data_dir_source(); /* NULL: DRIFT_SOURCE_LOOKUP=OFF */
    if (!strcmp(format, "json")) {
        json_t *d = json_object();
        json_object_set_new(d, "models", models ? json_string(models) : json_null());
        json_object_set_new(d, "from", from ? json_string(from) : json_null());
        json_object_set_new(d, "guard", guard ? json_string(guard) : json_null());
        json_object_set_new(d, "lookup", json_pack("[s, s, s, s, s?]", "DRIFT_DATA_DIR", "working directory",
                                                   "installed", "DRIFT_SOURCE", source ? "source tree" : NULL));
        json_object_set_new(d, "source_tree", source ? json_string(source) : json_null());
        json_object_set_new(info, "data", d);
        if (n_gpu >= 0) json_object_set_new(info, "gpus", json_integer(n_gpu));
        /* a document: "schema_version" first (docs/json-schema.md) */
        json_t *doc = json_pack("{s:i}", "schema_version", drift_json_schema_version());
        char *out = doc && !json_object_update(doc, info) ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER)
                                                          : NULL;
        json_decref(doc);
        if (!out || printf("%s\n", out) < 0) rc = cli_error("version", "cannot write the JSON");
        free(out);
    } else {
        json_t *b = json_object_get(info, "build");
        printf("driftbench %s\n", drift_version());
        printf("commit: %s\n", str_or(info, "commit"));
        printf("build: %s, %s; postgresql: %s; sanitizers: %s\n", str_or(b, "build_type"), str_or(b, "compiler"),
               json_is_true(json_object_get(b, "postgresql")) ? "built in" : "not built",
               json_is_string(json_object_get(b, "sanitizers")) ? str_or(b, "sanitizers") : "none");
#ifdef DRIFT_HAVE_CUDA
        if (gpu) printf("cuda: built in, %d GPU%s visible\n", n_gpu, n_gpu == 1 ? "" : "s");
        else printf("cuda: built in (`driftbench version --gpu` counts the GPUs)\n");
#else
        printf("cuda: not built (no nvcc or no GPU at configure time, or DRIFT_CUDA=OFF)\n");
#endif
        if (models) printf("models: %s (%s)\n", cli_safe(models), from);
        else printf("models: none found (installed datadir: %s; set DRIFT_DATA_DIR)\n", drift_data_dir_installed());
        printf("guard: %s\n", guard ? cli_safe(guard) : "none found");
        printf("lookup: $DRIFT_DATA_DIR, ./, installed (beside the executable or the library, then %s), "
               "$DRIFT_SOURCE, ",
               cli_safe(drift_data_dir_installed()));
        if (source) printf("the source tree %s (compiled in)\n", cli_safe(source));
        else printf("no source tree (built with DRIFT_SOURCE_LOOKUP=OFF)\n");
        printf("libraries:");
        const char *k;
        json_t *v;
        int first = 1;
        json_object_foreach(json_object_get(info, "libraries"), k, v) {
            printf("%s %s %s", first ? "" : ",", k, json_string_value(v) ? json_string_value(v) : "--");
            first = 0;
        }
        printf("\n");
    }
    free(models);
    free(guard);
    json_decref(info);
    return rc;
}
CLI_COMMAND(version, "version", "print the version, commit, build options, data and library versions", cmd_version)
