/* landlock.c - the fallback mode's file system, TCP and scope limits. */
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

/* ---- Landlock (the fallback mode's file system) ----
 *
 * Without bubblewrap the program sees the host's file system, protected only
 * by its private uid: world-readable files (the store, other users' data),
 * world-writable dirs (/tmp, /dev/shm) and /proc (every command line) are
 * open to it. Where the kernel has Landlock (5.13+), the run gets a ruleset:
 * read and execute under /usr, /bin, /lib*, /sbin and the interpreter's
 * prefix, /etc/ld.so.cache, the null/zero/random devices, and everything in
 * its own working dir; nothing else. From ABI 4 TCP bind/connect are denied
 * too, from ABI 6 signals and abstract unix sockets are scoped to the run.
 * The ruleset is built here (before the fork); the program only calls
 * landlock_restrict_self. The UAPI values below are the kernel's
 * (include/uapi/linux/landlock.h), spelled out because bookworm's headers
 * stop at ABI 2. */
#define LL_CREATE_VERSION 1u
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ull << 0)
#define LL_FS_WRITE_FILE (1ull << 1)
#define LL_FS_READ_FILE (1ull << 2)
#define LL_FS_READ_DIR (1ull << 3)
#define LL_FS_TRUNCATE (1ull << 14)
#define LL_FS_IOCTL_DEV (1ull << 15)
#define LL_NET_BIND_TCP (1ull << 0)
#define LL_NET_CONNECT_TCP (1ull << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ull << 0)
#define LL_SCOPE_SIGNAL (1ull << 1)

struct ll_ruleset_attr {
    uint64_t handled_access_fs, handled_access_net, scoped;
};
struct ll_path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* The kernel's Landlock ABI version, 0 when absent or disabled. */
static pthread_once_t g_ll_once = PTHREAD_ONCE_INIT;
static int g_ll_abi;

static void ll_probe(void) {
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_VERSION);
    g_ll_abi = v > 0 ? (int)v : 0;
}

int sbx_ll_abi(void) {
    pthread_once(&g_ll_once, ll_probe);
    return g_ll_abi;
}

static uint64_t ll_fs_all(int abi) {
    int bits = abi >= 5 ? 16 : abi >= 3 ? 15 : abi >= 2 ? 14 : 13;
    return (1ull << bits) - 1;
}

static int ll_allow(int rs, const char *path, uint64_t access, uint64_t handled) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && !S_ISDIR(sb.st_mode))
        access &= LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    struct ll_path_beneath pb = {.allowed_access = access & handled, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0);
    close(fd);
    return rc == 0 ? 0 : -1;
}

/* The ruleset of one run (an fd for landlock_restrict_self), or -1. */
int sbx_ll_ruleset(const char *workdir, const char *python) {
    int abi = sbx_ll_abi();
    if (abi < 1) return -1;
    struct ll_ruleset_attr ra = {.handled_access_fs = ll_fs_all(abi)};
    size_t sz = sizeof ra.handled_access_fs;
    if (abi >= 4) {
        ra.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
        sz += sizeof ra.handled_access_net;
    }
    if (abi >= 6) {
        ra.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
        sz += sizeof ra.scoped;
    }
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sz, 0);
    if (rs < 0) return -1;
    uint64_t h = ra.handled_access_fs;
    const uint64_t ro = LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR;
    const uint64_t dev_rw = LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE;
    static const char *const ro_paths[] = {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
                                           "/etc/ld.so.cache", "/dev/urandom", "/dev/random"};
    static const char *const rw_devs[] = {"/dev/null", "/dev/zero", "/dev/full"};
    int bad = 0;
    for (size_t i = 0; i < sizeof ro_paths / sizeof ro_paths[0]; i++) bad |= ll_allow(rs, ro_paths[i], ro, h);
    for (size_t i = 0; i < sizeof rw_devs / sizeof rw_devs[0]; i++) bad |= ll_allow(rs, rw_devs[i], dev_rw, h);
    /* an interpreter outside /usr: its prefix (two levels above the binary) */
    char real[PATH_MAX];
    if (python && realpath(python, real) && strncmp(real, "/usr/", 5) != 0) {
        for (int up = 0; up < 2; up++) {
            char *sl = strrchr(real, '/');
            if (sl && sl != real) *sl = '\0';
        }
        bad |= ll_allow(rs, real, ro, h);
    }
    bad |= ll_allow(rs, workdir, h, h);
    if (bad) {
        close(rs);
        return -1;
    }
    return rs;
}
