/* cgroup.c - one cgroup per run (memory of the whole tree, pids.max) under
 * our own cgroup where it is writable (v1 memory/pids, or v2 with those
 * controllers delegated), and the removal of dead scorers' run cgroups. */
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

/* ---- cgroups ---- */

/* Directories of our own cgroup for the memory and pids controllers ("" if
 * not writable). v1: /sys/fs/cgroup/<controllers>/<path>; v2: one dir. */
static pthread_once_t g_cg_once = PTHREAD_ONCE_INIT;
static char g_cg_mem[PATH_MAX], g_cg_pids[PATH_MAX];

static int cg_write(const char *dir, const char *file, const char *val);

/* cgroup v2 forbids processes in a cgroup that hands controllers to its
 * children ("no internal processes"), so a cgroup we may write to but sit in
 * cannot get run cgroups with memory and pids limits. When we are its only
 * process, we move into a leaf of our own (driftbench-sbx-PID-self, removed
 * as stale once we are gone), then enable +memory +pids for the children.
 * With other processes in it we leave it alone: moving them is not ours to do. */
static int cg_v2_delegate(const char *dir) {
    char p[PATH_MAX + 64], buf[4096];
    snprintf(p, sizeof p, "%s/cgroup.controllers", dir);
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
    fclose(f);
    if (!strstr(buf, "memory") || !strstr(buf, "pids")) return -1;
    snprintf(p, sizeof p, "%s/cgroup.procs", dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k < 0) return -1;
    buf[k] = '\0';
    for (char *q = buf; *q;) { /* only our own pid may be listed */
        long pid = strtol(q, &q, 10);
        if (pid > 0 && pid != (long)getpid()) return -1;
        while (*q == '\n') q++;
        if (pid <= 0) break;
    }
    char leaf[PATH_MAX + 64], self[32];
    snprintf(leaf, sizeof leaf, "%s/driftbench-sbx-%d-self", dir, (int)getpid());
    if (mkdir(leaf, 0755) != 0 && errno != EEXIST) return -1;
    snprintf(self, sizeof self, "%d", (int)getpid());
    if (cg_write(leaf, "cgroup.procs", self) != 0 || cg_write(dir, "cgroup.subtree_control", "+memory +pids") != 0) {
        rmdir(leaf); /* fails harmlessly if we did move in */
        return -1;
    }
    return 0;
}

static void cg_find(void) {
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        char dir[PATH_MAX], probe[PATH_MAX + 32];
        if (!ctrls[0]) { /* v2 */
            snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(path, "/") ? path : "");
            snprintf(probe, sizeof probe, "%s/cgroup.subtree_control", dir);
            FILE *sc = fopen(probe, "re");
            char ctl[256] = "";
            if (sc) {
                if (!fgets(ctl, sizeof ctl, sc)) ctl[0] = '\0';
                fclose(sc);
            }
            if ((!strstr(ctl, "memory") || !strstr(ctl, "pids")) && access(dir, W_OK) == 0 && cg_v2_delegate(dir) == 0)
                snprintf(ctl, sizeof ctl, "memory pids");
            if (strstr(ctl, "memory") && !g_cg_mem[0] && access(dir, W_OK) == 0) snprintf(g_cg_mem, sizeof g_cg_mem, "%s", dir);
            if (strstr(ctl, "pids") && !g_cg_pids[0] && access(dir, W_OK) == 0) snprintf(g_cg_pids, sizeof g_cg_pids, "%s", dir);
            continue;
        }
        int is_mem = 0, is_pids = 0;
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", ctrls);
        for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, "memory") == 0) is_mem = 1;
            if (strcmp(t, "pids") == 0) is_pids = 1;
        }
        if (!is_mem && !is_pids) continue;
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s%s", ctrls, strcmp(path, "/") ? path : "");
        if (access(dir, W_OK) != 0) continue;
        if (is_mem) snprintf(g_cg_mem, sizeof g_cg_mem, "%s", dir);
        if (is_pids) snprintf(g_cg_pids, sizeof g_cg_pids, "%s", dir);
    }
    fclose(f);
}

static int cg_write(const char *dir, const char *file, const char *val) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t k = write(fd, val, strlen(val));
    close(fd);
    return k == (ssize_t)strlen(val) ? 0 : -1;
}

void sbx_cg_remove(sbx_cg *cg) {
    /* all tasks are gone (the supervisor reaped them); retry briefly while
     * the kernel finishes tearing them down */
    for (int i = 0; i < 2; i++) {
        const char *d = i ? cg->pids : cg->mem;
        if (!d[0]) continue;
        for (int t = 0; t < 200 && rmdir(d) != 0 && errno == EBUSY; t++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

int sbx_cg_create(sbx_cg *cg, const sbx_limits *l, int slot) {
    memset(cg, 0, sizeof *cg);
    pthread_once(&g_cg_once, cg_find);
    if (!g_cg_mem[0] || !g_cg_pids[0]) return -1;
    char v[64];
    int same = strcmp(g_cg_mem, g_cg_pids) == 0; /* v2 */
    snprintf(cg->mem, sizeof cg->mem, "%s/driftbench-sbx-%d-%d", g_cg_mem, (int)getpid(), slot);
    if (mkdir(cg->mem, 0755) != 0 && errno != EEXIST) goto fail;
    if (!same) {
        snprintf(cg->pids, sizeof cg->pids, "%s/driftbench-sbx-%d-%d", g_cg_pids, (int)getpid(), slot);
        if (mkdir(cg->pids, 0755) != 0 && errno != EEXIST) goto fail;
    }
    /* the whole tree: the program's memory plus the two tmpfs mounts */
    long long bytes = ((long long)l->mem_mb + 3LL * l->fsize_mb + 64) << 20; /* + the three tmpfs */
    snprintf(v, sizeof v, "%lld", bytes);
    if (cg_write(cg->mem, "memory.limit_in_bytes", v) == 0) {
        cg_write(cg->mem, "memory.memsw.limit_in_bytes", v); /* no swapping around it (if accounted) */
    } else if (cg_write(cg->mem, "memory.max", v) == 0) {
        cg_write(cg->mem, "memory.swap.max", "0");
    } else {
        goto fail;
    }
    snprintf(v, sizeof v, "%ld", l->nproc);
    if (cg_write(same ? cg->mem : cg->pids, "pids.max", v) != 0) goto fail;
    snprintf(cg->mem_procs, sizeof cg->mem_procs, "%s/cgroup.procs", cg->mem);
    if (!same) snprintf(cg->pids_procs, sizeof cg->pids_procs, "%s/cgroup.procs", cg->pids);
    return 0;
fail:
    sbx_cg_remove(cg);
    memset(cg, 0, sizeof *cg);
    return -1;
}

/* OOM kills recorded by the memory cgroup (v1 memory.oom_control, v2
 * memory.events). */
int sbx_cg_oom_kills(const sbx_cg *cg) {
    static const char *const files[] = {"memory.oom_control", "memory.events"};
    for (int i = 0; i < 2; i++) {
        char p[PATH_MAX + 32], buf[1024];
        snprintf(p, sizeof p, "%s/%s", cg->mem, files[i]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0) continue;
        buf[k] = '\0';
        const char *o = strstr(buf, "oom_kill ");
        if (o) return atoi(o + 9);
    }
    return 0;
}

/* A run cgroup of a dead owner: its remaining tasks killed, then removed. */
static int stale_cgroup(const char *path) {
    char procs[PATH_MAX + 16], buf[4096];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
    for (int t = 0; t < 200; t++) {
        if (rmdir(path) == 0) return 1;
        if (errno != EBUSY) return 0;
        int fd = open(procs, O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0) close(fd);
        if (k > 0) {
            buf[k] = '\0';
            for (char *q = buf; *q;) {
                long pid = strtol(q, &q, 10);
                if (pid > 0) kill((pid_t)pid, SIGKILL);
                while (*q == '\n') q++;
                if (pid <= 0) break;
            }
        }
        sbx_sleep_ms(5);
    }
    return 0;
}

int sbx_cg_clean_stale(void) {
    int n = 0;
    pthread_once(&g_cg_once, cg_find);
    const char *parents[2] = {g_cg_mem, strcmp(g_cg_mem, g_cg_pids) ? g_cg_pids : ""};
    for (int i = 0; i < 2; i++) {
        DIR *d;
        if (!parents[i][0] || !(d = opendir(parents[i]))) continue;
        struct dirent *e;
        char path[PATH_MAX + 300];
        while ((e = readdir(d))) {
            if (!sbx_stale_owner(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", parents[i], e->d_name);
            n += stale_cgroup(path);
        }
        closedir(d);
    }
    return n;
}
