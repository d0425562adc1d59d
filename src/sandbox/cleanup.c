/* cleanup.c - what a run or a killed scorer leaves behind: the run's
 * leftovers in shared dirs (fallback mode) and stale sandbox dirs. */
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
#include <ftw.h>

#include "util/util.h"

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

void sbx_rm_tree(const char *dir) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes the entries of /tmp, /var/tmp and /dev/shm that uid owns (the
 * fallback mode's private uid: nothing else of the host's is its). */
int sbx_clean_owned(uid_t uid) {
    static const char *const dirs[] = {"/tmp", "/var/tmp", "/dev/shm"};
    int n = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d) continue;
        struct dirent *e;
        char path[PATH_MAX];
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            struct stat sb;
            if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || sb.st_uid != uid) continue;
            snprintf(path, sizeof path, "%s/%s", dirs[i], e->d_name);
            if (S_ISDIR(sb.st_mode)) sbx_rm_tree(path);
            else unlink(path);
            n++;
        }
        closedir(d);
    }
    return n;
}

/* "driftbench-sbx-PID-..." -> PID when that process is gone, else 0. */
pid_t sbx_stale_owner(const char *name) {
    static const char pre[] = "driftbench-sbx-";
    if (strncmp(name, pre, sizeof pre - 1) != 0) return 0;
    char *end;
    long pid = strtol(name + sizeof pre - 1, &end, 10);
    if (end == name + sizeof pre - 1 || *end != '-' || pid <= 0 || pid == (long)getpid()) return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) return 0;
    return (pid_t)pid;
}

int sbx_clean_stale(void) {
    int n = 0;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0] || strlen(tmp) > 200) tmp = "/tmp";
    DIR *d = opendir(tmp);
    if (d) {
        struct dirent *e;
        char path[PATH_MAX];
        while ((e = readdir(d))) {
            if (!sbx_stale_owner(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
            sbx_rm_tree(path);
            n++;
        }
        closedir(d);
    }
    return n + sbx_cg_clean_stale();
}
