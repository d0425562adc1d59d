/* probe.c - which isolation works here, probed once per interpreter by
 * running a trivial program with each candidate mechanism. */
#include "sandbox/sbx_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

/* ---- probing ---- */

typedef struct probe_entry {
    char python[PATH_MAX];
    unsigned mech;      /* working isolation (0: none) */
    unsigned partial;   /* what works without full isolation (for unsafe) */
    char why[768];
} probe_entry;

static pthread_mutex_t g_probe_mu = PTHREAD_MUTEX_INITIALIZER;
static probe_entry g_probe[4];
static size_t g_probe_n;

static int probe_try(const char *python, unsigned mech, char *why, size_t cap) {
    static const char *const args[] = {"-I", "-c", "import sys; sys.stdout.write('sbx-ok')", NULL};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = python;
    s.args = args;
    sbx_limits_default(&s.lim);
    s.lim.timeout_s = 20;
    s.mech = mech;
    sbx_result r;
    drift_error e = {0};
    drift_status rc = sbx_run(&s, &r, &e);
    int ok = rc == DRIFT_OK && r.exited && r.exit_code == 0 && strcmp(r.out.head, "sbx-ok") == 0;
    if (!ok) {
        char tail[300];
        if (rc == DRIFT_OK) sbx_stream_tail(&r.err, tail, sizeof tail);
        snprintf(why, cap, "%s", rc != DRIFT_OK ? e.msg : tail[0] ? tail : "trivial program failed");
        for (char *c = why; *c; c++)
            if (*c == '\n') *c = ' ';
    }
    sbx_result_free(&r);
    return ok;
}

static void mech_name(unsigned m, char *out, size_t cap) {
    static const struct { unsigned bit; const char *name; } names[] = {
        {SBX_MECH_BWRAP, "bubblewrap"}, {SBX_MECH_SECCOMP, "seccomp"}, {SBX_MECH_UID, "uid"},
        {SBX_MECH_LANDLOCK, "landlock"}, {SBX_MECH_CGROUP, "cgroup"}};
    size_t len = 0;
    if (cap) out[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((m & names[i].bit) && len < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "+" : "", names[i].name);
    if (!m) snprintf(out, cap, "none");
}

static void probe_fill(probe_entry *pe) {
    char why_b[256] = "", why_s[256] = "";
    const unsigned char *bpf;
    size_t bpf_len;
    int have_sc = sbx_bpf_get(&bpf, &bpf_len) == 0;
    int root = geteuid() == 0;
    unsigned base = (have_sc ? SBX_MECH_SECCOMP : 0) | (root ? SBX_MECH_UID : 0);
    sbx_cg cg;
    sbx_limits l;
    sbx_limits_default(&l);
    if (sbx_cg_create(&cg, &l, SBX_SLOTS) == 0) {
        sbx_cg_remove(&cg);
        base |= SBX_MECH_CGROUP;
    }
    pe->mech = pe->partial = 0;
    if (access(SBX_BWRAP, X_OK) != 0)
        snprintf(why_b, sizeof why_b, "%s not found", SBX_BWRAP);
    else if (probe_try(pe->python, SBX_MECH_BWRAP | base, why_b, sizeof why_b)) {
        pe->mech = SBX_MECH_BWRAP | base;
        return;
    }
    /* Without bubblewrap, files are protected only by running under a
     * private uid, so that needs root (to change uid) and seccomp. */
    if (have_sc && root) {
        unsigned fb = base | (sbx_ll_abi() >= 1 ? SBX_MECH_LANDLOCK : 0);
        if (probe_try(pe->python, fb, why_s, sizeof why_s)) {
            pe->mech = fb;
            return;
        }
        if (fb != base && probe_try(pe->python, base, why_s, sizeof why_s)) {
            pe->mech = base;
            return;
        }
    } else {
        snprintf(why_s, sizeof why_s, "%s", !have_sc ? sbx_bpf_error() : "not root, so no private uid to run under");
    }
    snprintf(pe->why, sizeof pe->why, "bubblewrap: %s; seccomp+uid: %s", why_b, why_s);
    char dummy[8];
    if (have_sc && probe_try(pe->python, SBX_MECH_SECCOMP, dummy, sizeof dummy)) pe->partial = SBX_MECH_SECCOMP;
}

drift_status sbx_probe(const char *python, int unsafe, unsigned *mech, char *name, size_t cap,
                       drift_error *err) {
    if (cap) name[0] = '\0';
    *mech = 0;
    if (!python || python[0] != '/' || strlen(python) >= PATH_MAX)
        return drift_error_set(err, DRIFT_ERR_INVALID, "sandbox: the interpreter must be an absolute path ('%s')",
                               python ? python : "(null)");
    if (access(python, X_OK) != 0)
        return drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: interpreter %s: %s", python, strerror(errno));
    pthread_mutex_lock(&g_probe_mu);
    probe_entry *pe = NULL;
    for (size_t i = 0; i < g_probe_n; i++)
        if (strcmp(g_probe[i].python, python) == 0) pe = &g_probe[i];
    if (!pe) {
        pe = &g_probe[g_probe_n < 4 ? g_probe_n++ : 3];
        memset(pe, 0, sizeof *pe);
        snprintf(pe->python, sizeof pe->python, "%s", python);
        probe_fill(pe);
    }
    probe_entry copy = *pe;
    pthread_mutex_unlock(&g_probe_mu);
    if (copy.mech) {
        *mech = copy.mech;
        mech_name(copy.mech, name, cap);
        return DRIFT_OK;
    }
    if (!unsafe)
        return drift_error_set(err, DRIFT_ERR_SANDBOX,
                               "no isolation mechanism works on this machine (%s); refusing to run generated "
                               "code (pass --unsafe-code-exec to run it without isolation)",
                               copy.why);
    *mech = copy.partial;
    char m[64];
    mech_name(copy.partial, m, sizeof m);
    snprintf(name, cap, "%s (unsafe)", m);
    return DRIFT_OK;
}
