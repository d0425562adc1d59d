/* view_internal.h - the results browser's pieces: the built-in page
 * (view_assets.c, generated at build time from src/view/page/ by
 * src/view/embed.cmake), the JSON API over the store (view_api.c, no HTTP
 * in it) and the libmicrohttpd glue (view_httpd.c). */
#ifndef DRIFT_VIEW_INTERNAL_H
#define DRIFT_VIEW_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/view.h"

/* One file of the page, served at path (e.g. "/view.js"; "/" is index.html). */
typedef struct view_asset {
    const char *path;
    const char *ctype;
    const unsigned char *data;
    size_t len;
} view_asset;

extern const view_asset view_assets[];
extern const size_t view_n_assets;

/* The asset served at path, or NULL. */
const view_asset *view_asset_find(const char *path);

/* A query argument, decoded. */
typedef struct view_arg {
    const char *name, *value;
} view_arg;

/* A reply: status, content type and a malloc'd body (len bytes). */
typedef struct view_reply {
    int status;
    const char *ctype;
    char *body;
    size_t len;
} view_reply;

typedef struct view_api view_api;

/* The API over the store at path (read-only; opened per request). NULL on
 * out of memory. */
view_api *view_api_new(const char *store_path);
void view_api_free(view_api *a);

/* Answers GET `path` (an "/api/..." path) with args[0..n): 200 with JSON,
 * 400 for a bad or unknown argument, 404 for an unknown path, label or
 * pair, 500 when the store cannot be read; errors are {"error": "..."}.
 * One thread at a time (the caller serialises). */
void view_api_handle(view_api *a, const char *path, const view_arg *args, size_t n, view_reply *r);

/* Whether a Host header value (host[:port]) may be answered: "localhost",
 * an IPv4 or bracketed IPv6 literal, or one of allow[0..n) (any case). */
int view_host_allowed(const char *host, const char *const *allow, size_t n);

#endif
