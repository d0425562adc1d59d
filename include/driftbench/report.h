/* report.h - renderings of a comparison: text (a terminal table), JSON (the
 * contract of DESIGN.md), markdown (a PR comment), JUnit XML (CI). The
 * library returns strings; the caller decides where they go. */
#ifndef DRIFTBENCH_REPORT_H
#define DRIFTBENCH_REPORT_H

#include "driftbench/compare.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum drift_format {
    DRIFT_FORMAT_TEXT = 0,
    DRIFT_FORMAT_JSON = 1,
    DRIFT_FORMAT_MARKDOWN = 2,
    DRIFT_FORMAT_JUNIT = 3
} drift_format;

DRIFT_API drift_status drift_format_parse(const char *name, drift_format *out, drift_error *err);

/* Renders c; the store (may be NULL) is used to quote flipped answers in
 * text and markdown. Returns a malloc'd string in *out. */
DRIFT_API drift_status drift_report_comparison(const drift_comparison *c, drift_store *st, drift_format fmt,
                                               char **out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
