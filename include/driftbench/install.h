/* install.h - what this build is and where its data are: the data roots
 * the library reads its run-time files from (the shipped models, the
 * built-in guard), and the build's description (`driftbench version`).
 * util/datadir.c, util/build_info.c. */
#ifndef DRIFT_INSTALL_H
#define DRIFT_INSTALL_H

#include <stddef.h>

#include "driftbench/status.h"

/* The data files read at run time (rel: "models", "models/guard/...") are
 * looked for under these roots, first found wins: $DRIFT_DATA_DIR, the
 * working directory, the installed datadir (PREFIX/share/driftbench: found
 * beside the executable or libdriftbench.so first, then the configured
 * path), the source tree ($DRIFT_SOURCE, then the configure-time one unless
 * built with DRIFT_SOURCE_LOOKUP=OFF).
 * A command's own flag comes before all of them (the callers'). Returns the
 * path (malloc'd, resolved) with *from (may be NULL) the root's name:
 * "DRIFT_DATA_DIR", "working directory", "installed" or "source tree";
 * NULL when none has it. */
DRIFT_API char *drift_data_find(const char *rel, const char **from);

/* The roots one by one: root i into out (cap bytes; "" where it cannot
 * exist here: an unset variable) and *from its name; 0, or 1 past the last.
 * For a search that is not one file (lab: a folder holding *.gguf). */
DRIFT_API int drift_data_root(int i, char *out, size_t cap, const char **from);

/* The configured installed datadir (CMAKE_INSTALL_FULL_DATADIR/driftbench). */
DRIFT_API const char *drift_data_dir_installed(void);

/* The source tree compiled in as the last root (the configure-time source
 * directory), or NULL when it was left out (DRIFT_SOURCE_LOOKUP=OFF, as
 * the packages build: docs/packaging.md). */
DRIFT_API const char *drift_data_dir_source(void);

/* What this build is, as a JSON object (malloc'd text; NULL on nomem):
 * version, git commit (configure time; "unknown" outside a checkout), build
 * options (CUDA, PostgreSQL, sanitizers, build type, compiler), the
 * installed datadir, and the versions of the libraries it runs with (asked
 * at run time, as each exposes it). */
DRIFT_API char *drift_build_info_json(void);

#endif
