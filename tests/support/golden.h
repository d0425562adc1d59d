/* golden.h - golden files for deterministic renderings: one compare and
 * one update switch for every test (tests/data/golden/NAME).
 *
 *   ctest -R test_report                            compares
 *   DRIFT_UPDATE_GOLDEN=1 ctest -R test_report      rewrites the files
 *                                                   (read the diff, commit)
 *
 * The source tree is $DRIFT_SOURCE (ctest sets it), else the configure
 * time DRIFT_SOURCE_DIR. A golden file says what a rendering is, byte for
 * byte; what it must never hold (a raw control byte, an unescaped '<') is
 * a semantic check the test keeps beside it (tests/unit/hostile.h). */
#ifndef GOLDEN_H
#define GOLDEN_H

#include <stddef.h>

/* Compares got (len bytes) with tests/data/golden/NAME; with
 * DRIFT_UPDATE_GOLDEN=1 writes got there instead. Returns 0 when they
 * match or the file was written; else -1 with why (a message naming the
 * file, the first differing byte and both sides there, and the switch). */
int golden_match(const char *name, const char *got, size_t len, char *why, size_t cap);

#endif
