/* golden.c - golden files (see golden.h): read the file whole, compare
 * bytes, report the first difference with some context either side. */
#include "golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void golden_path(char *out, size_t cap, const char *name) {
    const char *src = getenv("DRIFT_SOURCE");
#ifdef DRIFT_SOURCE_DIR
    if (!src || !*src) src = DRIFT_SOURCE_DIR;
#endif
    snprintf(out, cap, "%s/tests/data/golden/%s", src ? src : ".", name);
}

int golden_match(const char *name, const char *got, size_t len, char *why, size_t cap) {
    char path[1024];
    golden_path(path, sizeof path, name);
    const char *upd = getenv("DRIFT_UPDATE_GOLDEN");
    if (upd && !strcmp(upd, "1")) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(got, 1, len, f) != len) {
            snprintf(why, cap, "cannot write %s", path);
            if (f) fclose(f);
            return -1;
        }
        if (fclose(f) != 0) {
            snprintf(why, cap, "cannot write %s", path);
            return -1;
        }
        return 0;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "golden file %s missing (DRIFT_UPDATE_GOLDEN=1 writes it)", path);
        return -1;
    }
    char *want = NULL;
    size_t n = 0, capw = 0;
    for (;;) {
        if (n == capw) {
            capw = capw ? 2 * capw : 4096;
            char *w = realloc(want, capw);
            if (!w) abort();
            want = w;
        }
        size_t r = fread(want + n, 1, capw - n, f);
        if (!r) break;
        n += r;
    }
    fclose(f);
    size_t i = 0;
    while (i < n && i < len && want[i] == got[i]) i++;
    int same = i == n && i == len;
    if (!same) {
        size_t from = i > 40 ? i - 40 : 0;
        int wn = (int)((n - from) < 160 ? n - from : 160), gn = (int)((len - from) < 160 ? len - from : 160);
        snprintf(why, cap,
                 "%s differs at byte %zu (want %zu bytes, got %zu):\n want: %.*s\n got:  %.*s\n"
                 "(DRIFT_UPDATE_GOLDEN=1 rewrites it)",
                 path, i, n, len, wn, want + from, gn, got + from);
    }
    free(want);
    return same ? 0 : -1;
}
