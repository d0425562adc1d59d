/* datadir.c - where the data files the library reads at run time are: the
 * shipped models (models/ *.gguf) and the built-in guard
 * (models/guard/guard-llama-1m.gguf). A data root is a directory holding
 * models/; the roots, in the order they are tried:
 *   1. $DRIFT_DATA_DIR                      (the user's word; "DRIFT_DATA_DIR")
 *   2. the working directory                (a checkout: ./models; "working directory")
 *   3. the installed datadir, PREFIX/share/driftbench ("installed"): first
 *      found relative to the executable or to libdriftbench.so (bin/../share,
 *      lib/../share: an install tree that was moved or installed with
 *      DESTDIR still finds its own data), then the configured path
 *      (CMAKE_INSTALL_FULL_DATADIR/driftbench, compiled in)
 *   4. the source tree                      ($DRIFT_SOURCE, then the
 *      configure-time source directory; "source tree"). The configure-time
 *      path is left out (not compiled in) when CMake's DRIFT_SOURCE_LOOKUP
 *      is OFF (DRIFT_NO_SOURCE_LOOKUP here): a packaged binary must not
 *      carry nor search the path it was built in (docs/packaging.md);
 *      $DRIFT_SOURCE stays, the user's word like $DRIFT_DATA_DIR.
 * A command's own flag (lab --models, --guard builtin:PATH) comes before
 * all of them; the callers say which root was used.
 *
 * CMakeLists.txt compiles this file alone with DRIFT_DATADIR (absolute),
 * DRIFT_DATADIR_FROM_BIN and DRIFT_DATADIR_FROM_LIB (the datadir relative to
 * the install's bin/ and lib/), so a new install prefix rebuilds one file;
 * DRIFT_NO_SOURCE_LOOKUP comes with every file's flags (the option). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/install.h"
#include "util/util.h"

#ifndef DRIFT_DATADIR
#define DRIFT_DATADIR "/usr/local/share/driftbench"
#endif
#ifndef DRIFT_DATADIR_FROM_BIN
#define DRIFT_DATADIR_FROM_BIN "../share/driftbench"
#endif
#ifndef DRIFT_DATADIR_FROM_LIB
#define DRIFT_DATADIR_FROM_LIB "../share/driftbench"
#endif
#if defined(DRIFT_SOURCE_DIR) && !defined(DRIFT_NO_SOURCE_LOOKUP)
#define DATA_SOURCE_DIR DRIFT_SOURCE_DIR
#endif

/* dir of an object file's path into out ("" when there is none). */
static void dir_of(const char *file, char *out, size_t cap) {
    out[0] = 0;
    if (!file || file[0] != '/') return;
    const char *slash = strrchr(file, '/');
    size_t n = (size_t)(slash - file);
    if (n == 0 || n >= cap) return;
    memcpy(out, file, n);
    out[n] = 0;
}

/* Root i: 0 with out = the root and *from its name, 1 when i is past the
 * last root. A root that cannot exist here (an unset variable, an object
 * file with no path) is out = "". */
int drift_data_root(int i, char *out, size_t cap, const char **from) {
    out[0] = 0;
    switch (i) {
    case 0: {
        const char *e = getenv("DRIFT_DATA_DIR");
        *from = "DRIFT_DATA_DIR";
        if (e && *e) snprintf(out, cap, "%s", e);
        return 0;
    }
    case 1:
        *from = "working directory";
        snprintf(out, cap, ".");
        return 0;
    case 2: { /* beside the executable: PREFIX/bin/driftbench -> PREFIX/share/driftbench */
        char exe[PATH_MAX], dir[PATH_MAX];
        *from = "installed";
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return 0;
        exe[n] = 0;
        dir_of(exe, dir, sizeof dir);
        if (dir[0] && snprintf(out, cap, "%s/%s", dir, DRIFT_DATADIR_FROM_BIN) >= (int)cap) out[0] = 0;
        return 0;
    }
    case 3: { /* beside the shared library (a program that is not ours loaded it) */
        Dl_info info;
        char dir[PATH_MAX];
        *from = "installed";
        if (!dladdr((void *)drift_data_root, &info) || !info.dli_fname) return 0;
        dir_of(info.dli_fname, dir, sizeof dir);
        if (dir[0] && snprintf(out, cap, "%s/%s", dir, DRIFT_DATADIR_FROM_LIB) >= (int)cap) out[0] = 0;
        return 0;
    }
    case 4:
        *from = "installed";
        snprintf(out, cap, "%s", DRIFT_DATADIR);
        return 0;
    case 5: {
        const char *e = getenv("DRIFT_SOURCE");
        *from = "source tree";
        if (e && *e) snprintf(out, cap, "%s", e);
        return 0;
    }
    case 6:
#ifdef DATA_SOURCE_DIR
        *from = "source tree";
        snprintf(out, cap, "%s", DATA_SOURCE_DIR);
        return 0;
#endif
    default:
        return 1;
    }
}

char *drift_data_find(const char *rel, const char **from) {
    char root[PATH_MAX];
    const char *f = NULL;
    if (from) *from = NULL;
    if (!rel || !*rel) return NULL;
    for (int i = 0; !drift_data_root(i, root, sizeof root, &f); i++) {
        if (!root[0]) continue;
        char *p = util_asprintf("%s/%s", root, rel);
        if (!p) return NULL;
        if (access(p, R_OK) == 0) {
            char *real = realpath(p, NULL); /* the path said to the user: no "bin/../" */
            if (real) {
                free(p);
                p = real;
            }
            if (from) *from = f;
            return p;
        }
        free(p);
    }
    return NULL;
}

const char *drift_data_dir_installed(void) { return DRIFT_DATADIR; }

const char *drift_data_dir_source(void) {
#ifdef DATA_SOURCE_DIR
    return DATA_SOURCE_DIR;
#else
    return NULL;
#endif
}
