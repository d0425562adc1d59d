/* build_info.c - what this build is (`driftbench version`): the version,
 * the git commit and options fixed at configure time, and the versions of
 * the libraries as the process runs with them (each library's own run-time
 * query, not the headers it was compiled against: a distribution update
 * of libcurl shows here without a rebuild).
 *
 * CMakeLists.txt compiles this file alone with DRIFT_GIT_COMMIT,
 * DRIFT_BUILD_TYPE and DRIFT_COMPILER, so a new commit rebuilds one file. */
#include <curl/curl.h>
#include <gsl/gsl_version.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <microhttpd.h>
#include <seccomp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <utf8proc.h>
#include <xgboost/c_api.h>
#include <yaml.h>
#include <zstd.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "driftbench/install.h"
#include "util/util.h"

#ifndef DRIFT_GIT_COMMIT
#define DRIFT_GIT_COMMIT "unknown"
#endif
#ifndef DRIFT_BUILD_TYPE
#define DRIFT_BUILD_TYPE "unknown"
#endif
#ifndef DRIFT_COMPILER
#define DRIFT_COMPILER "unknown"
#endif

/* Sets key to a string, or to null when s is NULL. 0, -1 on nomem. */
static int set_str(json_t *o, const char *key, const char *s) {
    return json_object_set_new(o, key, s ? json_string(s) : json_null());
}

static json_t *libraries(void) {
    json_t *l = json_object();
    if (!l) return NULL;
    char buf[64];
    int bad = 0;
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    bad |= set_str(l, "curl", cv ? cv->version : NULL);
    bad |= set_str(l, "sqlite", sqlite3_libversion());
    bad |= set_str(l, "jansson", jansson_version_str());
    bad |= set_str(l, "libyaml", yaml_get_version_string());
    int pq = PQlibVersion(); /* major * 10000 + minor since PostgreSQL 10 */
    snprintf(buf, sizeof buf, "%d.%d", pq / 10000, pq % 10000);
    bad |= set_str(l, "libpq", pq > 0 ? buf : NULL);
    int xa = 0, xb = 0, xc = 0;
    XGBoostVersion(&xa, &xb, &xc);
    snprintf(buf, sizeof buf, "%d.%d.%d", xa, xb, xc);
    bad |= set_str(l, "xgboost", buf);
    bad |= set_str(l, "gsl", gsl_version);
    bad |= set_str(l, "zstd", ZSTD_versionString());
    char pcre[64] = {0};
    bad |= set_str(l, "pcre2", pcre2_config(PCRE2_CONFIG_VERSION, pcre) > 0 ? pcre : NULL);
    bad |= set_str(l, "utf8proc", utf8proc_version());
    bad |= set_str(l, "libmicrohttpd", MHD_get_version());
    const struct scmp_version *sv = seccomp_version();
    if (sv) snprintf(buf, sizeof buf, "%u.%u.%u", sv->major, sv->minor, sv->micro);
    bad |= set_str(l, "libseccomp", sv ? buf : NULL);
    if (bad) {
        json_decref(l);
        return NULL;
    }
    return l;
}

char *drift_build_info_json(void) {
    json_t *o = json_object(), *b = json_object(), *l = libraries();
    if (!o || !b || !l) {
        json_decref(o);
        json_decref(b);
        json_decref(l);
        return NULL;
    }
#ifdef DRIFT_HAVE_CUDA
    json_object_set_new(b, "cuda", json_true());
#else
    json_object_set_new(b, "cuda", json_false());
#endif
    json_object_set_new(b, "postgresql", json_true()); /* libpq is a required dependency (store_pg.c) */
#ifdef DRIFT_SANITIZE
    json_object_set_new(b, "sanitizers", json_string("address,undefined"));
#else
    json_object_set_new(b, "sanitizers", json_null());
#endif
    set_str(b, "build_type", DRIFT_BUILD_TYPE);
    set_str(b, "compiler", DRIFT_COMPILER);
    set_str(o, "version", drift_version());
    set_str(o, "commit", DRIFT_GIT_COMMIT);
    json_object_set_new(o, "build", b);
    set_str(o, "datadir", drift_data_dir_installed());
    json_object_set_new(o, "libraries", l);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!text) return NULL;
    char *out = util_strdup(text); /* the caller frees with free() */
    free(text);
    return out;
}
