/* cleanup.c - what a run or a killed scorer leaves behind: the run's
 * leftovers in shared dirs (fallback mode) and stale sandbox dirs.
 *
 * Removal goes through directory descriptors, never by path below a
 * directory we hold (a scorer may run as root, and the names it removes
 * live in world-writable dirs or in a dir a sandboxed program could write):
 * - a directory is opened with openat(parent, name, O_DIRECTORY |
 *   O_NOFOLLOW), and what is checked (a real directory, its owner) is the
 *   object behind that descriptor (fstat), not a name that may be swapped
 *   for a symlink after the check;
 * - its entries are examined with fstatat(AT_SYMLINK_NOFOLLOW) and removed
 *   with unlinkat relative to it: a symlink is removed as a link, never
 *   followed; a name that turns into a symlink between fstatat and openat
 *   fails the open (ELOOP / ENOTDIR) and is unlinked as a link;
 * - one descriptor per level down to RM_DEPTH_MAX; a subtree deeper than
 *   that is moved (renameat, both ends descriptors) up into the top
 *   directory and removed in a later pass, so any depth goes with a bounded
 *   number of descriptors;
 * - the top directory itself is removed (unlinkat AT_REMOVEDIR) only while
 *   its name still names the directory we emptied (same device and inode).
 * Whose: a stale dir (TMPDIR/driftbench-sbx-PID-*, PID dead) is removed only
 * if it is a real directory owned by our effective uid or, as a fallback-mode
 * run gives its dir to its private uid, by one of that dead PID's private
 * uids (sbx_uid_base_of); a symlink, or a directory of anyone else, is left
 * alone whatever its name. sbx_clean_owned removes the entries a run's
 * private uid left in /tmp, /var/tmp and /dev/shm the same way. */
#include "sandbox/sbx_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define RM_DEPTH_MAX 32
#define RM_OPEN_DIR (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* Who may own a directory we remove: our euid (euid_ok) and/or [lo, hi]. */
typedef struct rm_owner {
    int euid_ok;
    uid_t lo, hi; /* hi < lo: no range */
} rm_owner;

static int rm_owner_ok(const rm_owner *o, uid_t uid) {
    return (o->euid_ok && uid == geteuid()) || (o->lo <= o->hi && uid >= o->lo && uid <= o->hi);
}

typedef struct rm_pass {
    int top;              /* the directory being removed */
    unsigned long done;   /* entries removed or moved up in this pass */
    unsigned long seq;    /* names for moved subtrees */
} rm_pass;

static int is_dot(const char *n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

/* Removes what it can of the entries of the directory open as dfd (depth
 * levels below the top); subtrees at RM_DEPTH_MAX are moved into the top. */
static void rm_entries(int dfd, int depth, rm_pass *p) {
    int fd = dup(dfd);
    if (fd < 0) return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    rewinddir(d); /* the dup shares dfd's offset: a later pass must not start where the last one ended */
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        if (is_dot(name)) continue;
        struct stat sb;
        if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISDIR(sb.st_mode)) {
            if (unlinkat(dfd, name, 0) == 0) p->done++;
            continue;
        }
        if (depth + 1 >= RM_DEPTH_MAX) {
            char up[64];
            snprintf(up, sizeof up, ".driftbench-rm-%d-%lu", (int)getpid(), p->seq++);
            if (renameat(dfd, name, p->top, up) == 0) p->done++;
            continue;
        }
        int sub = openat(dfd, name, RM_OPEN_DIR);
        if (sub < 0) {
            /* swapped for a symlink or a file since fstatat: remove the link itself */
            if ((errno == ELOOP || errno == ENOTDIR) && unlinkat(dfd, name, 0) == 0) p->done++;
            continue;
        }
        rm_entries(sub, depth + 1, p);
        close(sub);
        if (unlinkat(dfd, name, AT_REMOVEDIR) == 0) p->done++;
    }
    closedir(d);
}

/* Removes the directory name (relative to parent) and all in it when it is
 * a real directory whose owner o accepts. 1: removed; 0: left alone (not a
 * directory, a symlink, someone else's) or not wholly removed. */
static int rm_dir_at(int parent, const char *name, const rm_owner *o) {
    int top = openat(parent, name, RM_OPEN_DIR);
    if (top < 0) return 0;
    struct stat sb;
    if (fstat(top, &sb) != 0 || !S_ISDIR(sb.st_mode) || !rm_owner_ok(o, sb.st_uid)) {
        close(top);
        return 0;
    }
    rm_pass p = {.top = top};
    do {
        p.done = 0;
        rm_entries(top, 0, &p);
    } while (p.done > 0);
    struct stat now;
    int ok = fstatat(parent, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == sb.st_dev &&
             now.st_ino == sb.st_ino && unlinkat(parent, name, AT_REMOVEDIR) == 0;
    close(top);
    return ok;
}

void sbx_rm_tree(const char *dir, uid_t run_uid) {
    const char *slash = strrchr(dir, '/');
    if (!slash || !slash[1]) return;
    char parent[PATH_MAX];
    size_t pn = slash == dir ? 1 : (size_t)(slash - dir);
    if (pn >= sizeof parent) return;
    memcpy(parent, dir, pn);
    parent[pn] = '\0';
    int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* TMPDIR itself: the user's choice */
    if (pfd < 0) return;
    rm_owner o = {1, run_uid, run_uid};
    if (!rm_dir_at(pfd, slash + 1, &o)) {
        /* our dir's name turned into a symlink (a private uid owns the dir
         * and may rename it in a sticky /tmp): remove the link, never its target */
        struct stat sb;
        if (fstatat(pfd, slash + 1, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)) unlinkat(pfd, slash + 1, 0);
    }
    close(pfd);
}

/* Removes the entries of /tmp, /var/tmp and /dev/shm that uid owns (the
 * fallback mode's private uid: nothing else of the host's is its). */
int sbx_clean_owned(uid_t uid) {
    static const char *const dirs[] = {"/tmp", "/var/tmp", "/dev/shm"};
    rm_owner o = {0, uid, uid};
    int n = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        int dfd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) continue;
        int fd = dup(dfd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
            if (fd >= 0) close(fd);
            close(dfd);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (is_dot(e->d_name)) continue;
            struct stat sb;
            if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || sb.st_uid != uid) continue;
            if (S_ISDIR(sb.st_mode)) n += rm_dir_at(dfd, e->d_name, &o);
            else n += unlinkat(dfd, e->d_name, 0) == 0;
        }
        closedir(d);
        close(dfd);
    }
    return n;
}

/* "driftbench-sbx-PID-..." -> PID when that process is gone, else 0. */
pid_t sbx_stale_owner(const char *name) {
    static const char pre[] = "driftbench-sbx-";
    if (strncmp(name, pre, sizeof pre - 1) != 0) return 0;
    char *end;
    long pid = strtol(name + sizeof pre - 1, &end, 10);
    if (end == name + sizeof pre - 1 || *end != '-' || pid <= 0 || pid > INT_MAX || pid == (long)getpid()) return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) return 0;
    return (pid_t)pid;
}

int sbx_clean_stale(void) {
    int n = 0;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0] || strlen(tmp) > 200) tmp = "/tmp";
    int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = dfd >= 0 ? dup(dfd) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            pid_t pid = sbx_stale_owner(e->d_name);
            if (!pid) continue;
            uid_t base = sbx_uid_base_of(pid);
            rm_owner o = {1, base, base + SBX_SLOTS - 1};
            n += rm_dir_at(dfd, e->d_name, &o);
        }
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    if (dfd >= 0) close(dfd);
    return n + sbx_cg_clean_stale();
}
