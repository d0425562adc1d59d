/* sandbox.c - run an untrusted Python program in isolation.
 *
 * Process tree of one run:
 *
 *   caller thread ── fork ──> supervisor (our uid, own process group,
 *        │                     child subreaper, wall timer)
 *        │ pipes: stdout,          └─ fork ──> program (own process group,
 *        │ stderr, fd 3, status                rlimits, per-slot uid, seccomp,
 *        │                                     exec bwrap -> python, or python)
 *
 * - The supervisor is a subreaper: every orphan of the program is
 *   re-parented to it and reaped, so nothing is left behind as a zombie
 *   (the container's init here does not reap). It arms ITIMER_REAL with the
 *   wall timeout; on expiry (or SIGTERM, its parent-death signal) it kills
 *   the program's process group, and in uid mode every process of the
 *   sandbox uid, then reaps until no child is left (bounded: 2 s, then it
 *   reports "stray"). It writes a status record and exits.
 * - Isolation, probed once per interpreter (sbx_probe):
 *   bubblewrap (pid, net, ipc, uts, user, mount namespaces; only /usr and the
 *   /lib, /bin links read-only; /proc, /dev; a size-capped tmpfs as /tmp and
 *   as the working dir /sandbox, with the program files bound read-only);
 *   seccomp (a deny list: sockets other than AF_UNIX, namespace creation,
 *   ptrace, mount, bpf, io_uring, kernel modules, setsid/setpgid, kill(-1),
 *   ...), built once with libseccomp and exported as BPF before any fork;
 *   the child only calls prctl (or hands the BPF to bwrap on fd 4).
 * - Fork bombs: RLIMIT_NPROC is ignored for uid 0, so when we are root the
 *   program runs under a private uid (0x60000000 + 64 * (pid % 2^22) + slot;
 *   one slot per concurrent run), where RLIMIT_NPROC holds; bwrap's pid
 *   namespace and the supervisor's kill of the group/uid end the rest.
 *   Not root: RLIMIT_NPROC is set to the user's current count + nproc.
 * - cgroups (when our own cgroup is writable, v1 memory/pids controllers or
 *   v2 with them enabled): one child cgroup per run caps the memory of the
 *   whole tree (RLIMIT_AS is per process: 64 processes x 1 GB would not be
 *   contained) and the number of tasks; the program joins it before exec.
 * - Without bubblewrap (seccomp + private uid): network and namespaces are
 *   blocked by seccomp and other users' processes by the uid, but files are
 *   protected only by permissions: world-readable files can be read and
 *   world-writable dirs (/tmp, /dev/shm) written (each file <= RLIMIT_FSIZE,
 *   for at most the wall timeout); the working dir is a host temp dir.
 * - Output: stdout and stderr are drained continuously; the first
 *   out_cap_bytes and the last 4 KiB are kept, so a program printing 1 GB
 *   neither blocks nor fills memory.
 * Between fork and exec only async-signal-safe calls (raw syscalls, dup2,
 * prctl, setrlimit, sigaction, execve) are made; everything else (argv,
 * environment, BPF, paths) is prepared before the fork. */
#include "eval/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define SBX_BWRAP "/usr/bin/bwrap"
#define SBX_UID_FIRST 0x60000000u

void sbx_limits_default(sbx_limits *l) {
    l->timeout_s = 10;
    l->cpu_s = 10;
    l->mem_mb = 1024;
    l->nproc = 64;
    l->nofile = 64;
    l->fsize_mb = 64;
    l->out_cap_bytes = 64 * 1024;
}

/* ---- seccomp filter, built once ---- */

static pthread_once_t g_bpf_once = PTHREAD_ONCE_INIT;
static unsigned char *g_bpf;      /* struct sock_filter[] */
static size_t g_bpf_len;
static char g_bpf_err[256];

static int bpf_deny(scmp_filter_ctx ctx, const char *name, int errno_val) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return 0; /* not on this arch */
    return seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned)errno_val), nr, 0);
}

static void bpf_build(void) {
    static const char *const denied[] = {
        "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root",
        "chroot", "unshare", "setns", "kexec_load", "kexec_file_load", "init_module",
        "finit_module", "delete_module", "reboot", "swapon", "swapoff", "bpf",
        "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "acct",
        "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog",
        "io_uring_setup", "io_uring_enter", "io_uring_register", "setsid", "setpgid",
        "open_by_handle_at", "name_to_handle_at", "fanotify_init", "quotactl", "vhangup",
        "sethostname", "setdomainname", "iopl", "ioperm", "mknod", "mknodat",
        "fsopen", "fsmount", "fsconfig", "move_mount", "open_tree", "mount_setattr",
        "lookup_dcookie", "nfsservctl", "personality", "pidfd_getfd", "kcmp"};
    static const uint64_t ns_flags[] = {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
                                        CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP};
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int rc = 0, fd = -1;
    if (!ctx) {
        snprintf(g_bpf_err, sizeof g_bpf_err, "seccomp_init failed");
        return;
    }
    for (size_t i = 0; i < sizeof denied / sizeof denied[0] && rc == 0; i++) rc = bpf_deny(ctx, denied[i], EPERM);
    /* No sockets at all: socket() is how a program reaches the network and
     * the abstract unix sockets of host processes (which a private uid does
     * not protect). socketpair() stays: multiprocessing uses it. */
    if (rc == 0) rc = bpf_deny(ctx, "socket", EACCES);
    /* No SysV IPC objects: they outlive the run and no namespace holds them
     * in the fallback mode (POSIX shm lives in /dev/shm, which does). */
    static const char *const sysv[] = {"shmget", "semget", "msgget", "ipc"};
    for (size_t i = 0; i < sizeof sysv / sizeof sysv[0] && rc == 0; i++) rc = bpf_deny(ctx, sysv[i], EPERM);
    /* No new namespaces through clone; clone3 hides its flags in memory, so
     * it answers ENOSYS and glibc falls back to clone. */
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0] && rc == 0; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
    if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* kill(-1, sig): every process we may signal. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(kill), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0xffffffffu));
    /* Typing into the terminal of someone else. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    if (rc != 0) {
        snprintf(g_bpf_err, sizeof g_bpf_err, "seccomp_rule_add failed: %s", strerror(-rc));
        seccomp_release(ctx);
        return;
    }
    fd = memfd_create("drift-sbx-bpf", MFD_CLOEXEC);
    if (fd < 0 || (rc = seccomp_export_bpf(ctx, fd)) != 0) {
        snprintf(g_bpf_err, sizeof g_bpf_err, "seccomp_export_bpf failed: %s",
                 fd < 0 ? strerror(errno) : strerror(-rc));
    } else {
        off_t n = lseek(fd, 0, SEEK_END);
        if (n > 0 && n % (off_t)sizeof(struct sock_filter) == 0 && n < 60000 && (g_bpf = malloc((size_t)n))) {
            if (pread(fd, g_bpf, (size_t)n, 0) == n) {
                g_bpf_len = (size_t)n;
            } else {
                free(g_bpf);
                g_bpf = NULL;
                snprintf(g_bpf_err, sizeof g_bpf_err, "reading the exported BPF failed");
            }
        } else {
            snprintf(g_bpf_err, sizeof g_bpf_err, "exported BPF has an unexpected size (%lld)", (long long)n);
        }
    }
    if (fd >= 0) close(fd);
    seccomp_release(ctx);
}

static int bpf_get(const unsigned char **p, size_t *n) {
    pthread_once(&g_bpf_once, bpf_build);
    *p = g_bpf;
    *n = g_bpf_len;
    return g_bpf ? 0 : -1;
}

/* ---- uid slots ---- */

static pthread_mutex_t g_slot_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_slot_cv = PTHREAD_COND_INITIALIZER;
static uint64_t g_slot_used;

uid_t sbx_uid_base(void) {
    return (uid_t)(SBX_UID_FIRST + (uint32_t)(getpid() % 4194304) * SBX_SLOTS);
}

static int slot_acquire(void) {
    pthread_mutex_lock(&g_slot_mu);
    while (g_slot_used == UINT64_MAX) pthread_cond_wait(&g_slot_cv, &g_slot_mu);
    int s = 0;
    while (g_slot_used & (1ull << s)) s++;
    g_slot_used |= 1ull << s;
    pthread_mutex_unlock(&g_slot_mu);
    return s;
}

static void slot_release(int s) {
    pthread_mutex_lock(&g_slot_mu);
    g_slot_used &= ~(1ull << s);
    pthread_cond_signal(&g_slot_cv);
    pthread_mutex_unlock(&g_slot_mu);
}

/* ---- process counting ---- */

/* Sums, over the live processes of uid, 1 (tasks == 0) or their thread count. */
static int count_uid(uid_t uid, int tasks) {
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    char path[64], buf[1536];
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0) continue;
        buf[k] = '\0';
        const char *u = strstr(buf, "\nUid:");
        if (!u || strtoul(u + 5, NULL, 10) != (unsigned long)uid) continue;
        const char *t = tasks ? strstr(buf, "\nThreads:") : NULL;
        long nt = t ? strtol(t + 9, NULL, 10) : 1;
        n += nt > 0 ? (int)nt : 1;
    }
    closedir(d);
    return n;
}

int sbx_count_uid_procs(uid_t uid) { return count_uid(uid, 0); }
int sbx_count_uid_tasks(uid_t uid) { return count_uid(uid, 1); }

/* ---- output capture ---- */

void sbx_stream_add(sbx_stream *st, const char *p, size_t n, size_t cap) {
    if (st->head_len < cap) {
        size_t k = n < cap - st->head_len ? n : cap - st->head_len;
        memcpy(st->head + st->head_len, p, k);
        st->head_len += k;
        st->head[st->head_len] = '\0';
    }
    const size_t R = sizeof st->tail;
    const char *q = n > R ? p + (n - R) : p;
    size_t m = n > R ? R : n;
    size_t pos = (size_t)((st->total + (n - m)) % R);
    size_t first = m < R - pos ? m : R - pos;
    memcpy(st->tail + pos, q, first);
    memcpy(st->tail, q + first, m - first);
    st->total += n;
}

size_t sbx_stream_tail(const sbx_stream *st, char *dst, size_t n) {
    if (!n) return 0;
    size_t want = n - 1;
    if (st->total <= st->head_len) { /* everything is in head */
        size_t k = st->head_len < want ? st->head_len : want;
        memcpy(dst, st->head + st->head_len - k, k);
        dst[k] = '\0';
        return k;
    }
    const size_t R = sizeof st->tail;
    size_t avail = st->total < R ? (size_t)st->total : R;
    size_t k = avail < want ? avail : want;
    for (size_t i = 0; i < k; i++) dst[i] = st->tail[(st->total - k + i) % R];
    dst[k] = '\0';
    return k;
}

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

/* One run's cgroups: created with limits, removed after. */
typedef struct sbx_cg {
    char mem[PATH_MAX], pids[PATH_MAX];   /* "" when not used */
    char mem_procs[PATH_MAX + 16], pids_procs[PATH_MAX + 16];
} sbx_cg;

static void cg_remove(sbx_cg *cg) {
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

static int cg_create(sbx_cg *cg, const sbx_limits *l, int slot) {
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
    cg_remove(cg);
    memset(cg, 0, sizeof *cg);
    return -1;
}

/* OOM kills recorded by the memory cgroup (v1 memory.oom_control, v2
 * memory.events). */
static int cg_oom_kills(const sbx_cg *cg) {
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
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

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

static int ll_abi(void) {
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
static int ll_ruleset(const char *workdir, const char *python) {
    int abi = ll_abi();
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

/* ---- the forked side ---- */

/* Everything the children need, prepared before fork. */
typedef struct sbx_plan {
    char *const *argv;       /* program argv (bwrap ... or python ...) */
    char *const *envp;
    const char *workdir;     /* chdir target in non-bwrap mode */
    unsigned mech;
    uid_t uid;
    long nproc;
    const sbx_limits *lim;
    struct sock_fprog fprog;
    int fd_in, fd_out, fd_err, fd_chan, fd_bpf; /* child ends; fd_bpf -1 if none */
    int fd_status;           /* supervisor -> caller */
    pid_t caller_pid;
    const char *cg_procs[2]; /* cgroup.procs files to join ("" / NULL: none) */
    int fd_landlock;         /* Landlock ruleset to enter, or -1 */
} sbx_plan;

typedef struct sbx_status {
    int got_status;          /* the program was reaped */
    int wstatus;
    int timed_out;
    int exec_errno;
    int stray;
    double cpu_ms;           /* CPU of the tree: reaped children, or sampled at the timeout */
} sbx_status;

static volatile sig_atomic_t g_sup_stop; /* only touched in the supervisor process */

static void sup_on_signal(int sig) {
    (void)sig;
    g_sup_stop = 1;
}

static void set_rlim(int res, rlim_t v) {
    struct rlimit rl = {v, v};
    setrlimit(res, &rl);
}

/* Moves fd `from` to exactly `to` (no CLOEXEC). */
static int fd_place(int from, int to) {
    if (from == to) return fcntl(from, F_SETFD, 0);
    return dup2(from, to) < 0 ? -1 : 0;
}

static void sys_write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return;
        c += k;
        n -= (size_t)k;
    }
}

static __attribute__((noreturn)) void prog_main(const sbx_plan *p, int fd_exec_err, pid_t sup_pid) {
    int e;
    /* A session of its own: its process group is the supervisor's target,
     * and without a controlling terminal /dev/tty cannot be opened. */
    if (setsid() < 0) _exit(127);
    /* Lift every needed fd above 9 first so the dup2s below cannot clobber
     * each other, then place them at 0..6 (6: the Landlock ruleset, closed
     * before exec). */
    int src[7] = {p->fd_in, p->fd_out, p->fd_err, p->fd_chan, p->fd_bpf, fd_exec_err, p->fd_landlock};
    int hi[7];
    for (int i = 0; i < 7; i++) {
        hi[i] = src[i] < 0 ? -1 : fcntl(src[i], F_DUPFD, 10);
        if (src[i] >= 0 && hi[i] < 0) goto fail;
    }
    for (int i = 0; i < 7; i++)
        if (hi[i] >= 0 && fd_place(hi[i], i) != 0) goto fail;
    if (fcntl(5, F_SETFD, FD_CLOEXEC) != 0) goto fail;
    if (hi[4] < 0) close(4);
    if (hi[6] < 0) close(6);
    if (syscall(SYS_close_range, 7u, ~0u, 0u) != 0)
        for (int fd = 7; fd < 4096; fd++) close(fd);

    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    static const int sigs[] = {SIGPIPE, SIGXCPU, SIGXFSZ, SIGALRM, SIGTERM, SIGCHLD, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &dfl, NULL);

    const sbx_limits *l = p->lim;
    rlim_t cpu = (rlim_t)(l->cpu_s < 1 ? 1 : l->cpu_s + 0.999);
    struct rlimit rl = {cpu, cpu + 1}; /* SIGXCPU at soft, SIGKILL at hard */
    setrlimit(RLIMIT_CPU, &rl);
    set_rlim(RLIMIT_AS, (rlim_t)l->mem_mb << 20);
    set_rlim(RLIMIT_NOFILE, (rlim_t)l->nofile);
    set_rlim(RLIMIT_FSIZE, (rlim_t)l->fsize_mb << 20);
    set_rlim(RLIMIT_CORE, 0);
    set_rlim(RLIMIT_MEMLOCK, 0);
    set_rlim(RLIMIT_MSGQUEUE, 0);
    if (p->nproc > 0) set_rlim(RLIMIT_NPROC, (rlim_t)p->nproc);
    for (int i = 0; i < 2; i++) { /* join the run's cgroups ("0": this process) */
        if (!p->cg_procs[i] || !p->cg_procs[i][0]) continue;
        int fd = open(p->cg_procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) goto fail;
        close(fd);
    }

    if (p->mech & SBX_MECH_UID) {
        gid_t g = (gid_t)p->uid;
        if (syscall(SYS_setgroups, 0, NULL) != 0) goto fail;
        if (syscall(SYS_setresgid, g, g, g) != 0) goto fail;
        if (syscall(SYS_setresuid, p->uid, p->uid, p->uid) != 0) goto fail;
    }
    /* Set after the uid change (which clears it). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != sup_pid) _exit(126);
    if (chdir((p->mech & SBX_MECH_BWRAP) ? "/" : p->workdir) != 0) goto fail;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) goto fail;
    if (hi[6] >= 0) {
        if (syscall(SYS_landlock_restrict_self, 6, 0u) != 0) goto fail;
        close(6);
    }
    if ((p->mech & SBX_MECH_SECCOMP) && !(p->mech & SBX_MECH_BWRAP))
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p->fprog) != 0) goto fail;
    execve(p->argv[0], p->argv, p->envp);
fail:
    e = errno ? errno : EINVAL;
    sys_write_all(5, &e, sizeof e);
    _exit(127);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* CPU time (ms) of root and all its live descendants, with what they reaped:
 * the supervisor samples it when the wall timer fires, because a tree
 * killed inside bubblewrap's pid namespace is reaped by the namespace's init
 * and its usage never reaches our getrusage. Raw syscalls and stack buffers
 * only (this runs in a child forked from a threaded process). */
typedef struct tree_ent {
    int pid, ppid;
    unsigned long long ticks;
} tree_ent;

static unsigned long long dec_field(const char **q) {
    unsigned long long v = 0;
    while (**q == ' ') (*q)++;
    while (**q >= '0' && **q <= '9') v = v * 10 + (unsigned long long)(*(*q)++ - '0');
    while (**q && **q != ' ') (*q)++;
    return v;
}

static double tree_cpu_ms(pid_t root) {
    static tree_ent ents[4096]; /* the supervisor's own copy (a forked process) */
    static char dents[8192];
    int n = 0;
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 0;
    for (;;) {
        long k = syscall(SYS_getdents64, dfd, dents, sizeof dents);
        if (k <= 0) break;
        for (long off = 0; off < k;) {
            struct { unsigned long long ino; long long off; unsigned short reclen; unsigned char type; char name[]; }
                *de = (void *)(dents + off);
            off += de->reclen;
            if (de->name[0] < '1' || de->name[0] > '9' || n >= 4096) continue;
            char path[64] = "/proc/", buf[1024];
            size_t pl = 6;
            for (const char *c = de->name; *c && pl < 40; c++) path[pl++] = *c;
            memcpy(path + pl, "/stat", 6);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t got = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (got <= 0) continue;
            buf[got] = '\0';
            const char *q = buf + got;
            while (q > buf && *q != ')') q--; /* comm may hold spaces and parentheses */
            if (*q != ')') continue;
            q++;
            unsigned long long f[15];
            dec_field(&q); /* state */
            for (int i = 1; i < 15; i++) f[i] = dec_field(&q);
            const char *pc = de->name;
            ents[n].pid = (int)dec_field(&pc);
            ents[n].ppid = (int)f[1];
            ents[n].ticks = f[11] + f[12] + f[13] + f[14];
            n++;
        }
    }
    close(dfd);
    /* the tree: root, then whoever has a parent in it, until nothing moves */
    static unsigned char in[4096];
    memset(in, 0, sizeof in);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (in[i]) continue;
            int yes = ents[i].pid == root;
            for (int j = 0; j < n && !yes; j++) yes = in[j] && ents[j].pid == ents[i].ppid;
            if (yes) in[i] = 1, changed = 1;
        }
    }
    unsigned long long t = 0;
    for (int i = 0; i < n; i++)
        if (in[i]) t += ents[i].ticks;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (double)t * 1000.0 / (double)hz : 0;
}

static __attribute__((noreturn)) void sup_main(const sbx_plan *p) {
    sbx_status st;
    memset(&st, 0, sizeof st);
    setpgid(0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sup_on_signal; /* no SA_RESTART: waitpid returns EINTR */
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != p->caller_pid) _exit(125);
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    struct itimerval it;
    memset(&it, 0, sizeof it);
    double t = p->lim->timeout_s > 0.001 ? p->lim->timeout_s : 0.001;
    it.it_value.tv_sec = (time_t)t;
    it.it_value.tv_usec = (suseconds_t)((t - (double)(time_t)t) * 1e6);
    int ee[2];
    if (pipe2(ee, O_CLOEXEC) != 0) {
        st.exec_errno = errno;
        sys_write_all(p->fd_status, &st, sizeof st);
        _exit(0);
    }
    setitimer(ITIMER_REAL, &it, NULL);
    pid_t self = getpid();
    pid_t g = fork();
    if (g == 0) prog_main(p, ee[1], self);
    if (g < 0) {
        st.exec_errno = errno;
        sys_write_all(p->fd_status, &st, sizeof st);
        _exit(0);
    }
    close(ee[1]);
    close(p->fd_in);
    close(p->fd_out);
    close(p->fd_err);
    close(p->fd_chan);
    if (p->fd_bpf >= 0) close(p->fd_bpf);
    for (;;) { /* exec result: EOF on success (CLOEXEC), errno on failure */
        int e = 0;
        ssize_t k = read(ee[0], &e, sizeof e);
        if (k < 0 && errno == EINTR && !g_sup_stop) continue;
        if (k == (ssize_t)sizeof e) st.exec_errno = e;
        break;
    }
    close(ee[0]);
    while (!g_sup_stop) {
        int ws;
        pid_t w = waitpid(-1, &ws, 0);
        if (w == g) {
            st.got_status = 1;
            st.wstatus = ws;
            break;
        }
        if (w < 0 && errno == ECHILD) break;
    }
    if (g_sup_stop && !st.got_status) {
        st.timed_out = 1;
        st.cpu_ms = tree_cpu_ms(g);
    }
    /* Clean up: the program's group, in uid mode every process of the uid,
     * then reap until no child is left. */
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
    int sweep = (p->mech & SBX_MECH_UID) && !(p->mech & SBX_MECH_BWRAP);
    for (int iter = 0;; iter++) {
        kill(-g, SIGKILL);
        if (sweep && iter % 20 == 0) {
            pid_t k = fork();
            if (k == 0) {
                if (syscall(SYS_setresuid, p->uid, p->uid, p->uid) == 0) kill(-1, SIGKILL);
                _exit(0);
            }
        }
        int ws;
        pid_t w;
        while ((w = waitpid(-1, &ws, WNOHANG)) > 0) {
            if (w == g && !st.got_status) {
                st.got_status = 1;
                st.wstatus = ws;
            }
        }
        if (w < 0 && errno == ECHILD) break;
        if (iter >= 2000) { /* ~2 s */
            st.stray = 1;
            break;
        }
        sleep_ms(1);
    }
    /* Every process of the tree was reaped by its parent, the namespace's
     * init or this subreaper, so the children's usage is the tree's. */
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
        double ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
        if (ms > st.cpu_ms) st.cpu_ms = ms;
    }
    sys_write_all(p->fd_status, &st, sizeof st);
    _exit(0);
}

/* ---- the caller side ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static void rm_tree(const char *dir) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes the entries of /tmp, /var/tmp and /dev/shm that uid owns (the
 * fallback mode's private uid: nothing else of the host's is its). */
static int clean_owned(uid_t uid) {
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
            if (S_ISDIR(sb.st_mode)) rm_tree(path);
            else unlink(path);
            n++;
        }
        closedir(d);
    }
    return n;
}

/* "driftbench-sbx-PID-..." -> PID when that process is gone, else 0. */
static pid_t stale_owner(const char *name) {
    static const char pre[] = "driftbench-sbx-";
    if (strncmp(name, pre, sizeof pre - 1) != 0) return 0;
    char *end;
    long pid = strtol(name + sizeof pre - 1, &end, 10);
    if (end == name + sizeof pre - 1 || *end != '-' || pid <= 0 || pid == (long)getpid()) return 0;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) return 0;
    return (pid_t)pid;
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
        sleep_ms(5);
    }
    return 0;
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
            if (!stale_owner(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
            rm_tree(path);
            n++;
        }
        closedir(d);
    }
    pthread_once(&g_cg_once, cg_find);
    const char *parents[2] = {g_cg_mem, strcmp(g_cg_mem, g_cg_pids) ? g_cg_pids : ""};
    for (int i = 0; i < 2; i++) {
        if (!parents[i][0] || !(d = opendir(parents[i]))) continue;
        struct dirent *e;
        char path[PATH_MAX + 300];
        while ((e = readdir(d))) {
            if (!stale_owner(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", parents[i], e->d_name);
            n += stale_cgroup(path);
        }
        closedir(d);
    }
    return n;
}

static pthread_once_t g_stale_once = PTHREAD_ONCE_INIT;
static void stale_once(void) { (void)sbx_clean_stale(); }

typedef struct argv_b {
    char **v;
    size_t n, cap;
    int oom;
} argv_b;

static void av_push(argv_b *a, const char *s) {
    if (a->oom) return;
    if (a->n + 2 > a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        char **nv = realloc(a->v, nc * sizeof *nv);
        if (!nv) { a->oom = 1; return; }
        a->v = nv;
        a->cap = nc;
    }
    char *c = drift_strdup(s);
    if (!c) { a->oom = 1; return; }
    a->v[a->n++] = c;
    a->v[a->n] = NULL;
}

static void av_free(argv_b *a) {
    for (size_t i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    memset(a, 0, sizeof *a);
}

/* Binds the prefix (two levels up) of an interpreter outside /usr. */
static void bwrap_bind_prefix(argv_b *a, const char *path) {
    char tmp[PATH_MAX];
    if (!path || strncmp(path, "/usr/", 5) == 0 || strlen(path) >= sizeof tmp) return;
    snprintf(tmp, sizeof tmp, "%s", path);
    for (int up = 0; up < 2; up++) {
        char *s = strrchr(tmp, '/');
        if (!s || s == tmp) return;
        *s = '\0';
    }
    av_push(a, "--ro-bind");
    av_push(a, tmp);
    av_push(a, tmp);
}

static void bwrap_args(argv_b *a, const sbx_spec *s, const char *dir, int with_bpf) {
    char num[32], path[PATH_MAX];
    av_push(a, SBX_BWRAP);
    av_push(a, "--unshare-all");
    av_push(a, "--die-with-parent");
    av_push(a, "--new-session");
    av_push(a, "--cap-drop");
    av_push(a, "ALL");
    av_push(a, "--ro-bind");
    av_push(a, "/usr");
    av_push(a, "/usr");
    static const char *const tops[] = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
        struct stat sb;
        if (lstat(tops[i], &sb) != 0) continue;
        if (S_ISLNK(sb.st_mode)) {
            ssize_t k = readlink(tops[i], path, sizeof path - 1);
            if (k <= 0) continue;
            path[k] = '\0';
            av_push(a, "--symlink");
            av_push(a, path);
            av_push(a, tops[i]);
        } else if (S_ISDIR(sb.st_mode)) {
            av_push(a, "--ro-bind");
            av_push(a, tops[i]);
            av_push(a, tops[i]);
        }
    }
    if (realpath(s->python, path)) bwrap_bind_prefix(a, path);
    bwrap_bind_prefix(a, s->python);
    av_push(a, "--proc");
    av_push(a, "/proc");
    av_push(a, "--dev");
    av_push(a, "/dev");
    /* Every writable mount is a size-capped tmpfs (/tmp, /dev/shm, the
     * working dir); the root and /dev, tmpfs that bwrap makes uncapped, are
     * remounted read-only below, so without a memory cgroup files cannot
     * fill the host's memory. */
    snprintf(num, sizeof num, "%ld", s->lim.fsize_mb << 20);
    static const char *const capped[] = {"/tmp", "/dev/shm", "/sandbox"};
    for (size_t i = 0; i < sizeof capped / sizeof capped[0]; i++) {
        av_push(a, "--size");
        av_push(a, num);
        av_push(a, "--tmpfs");
        av_push(a, capped[i]);
    }
    for (size_t i = 0; i < s->n_files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, s->files[i].name);
        av_push(a, "--ro-bind");
        av_push(a, path);
        snprintf(path, sizeof path, "/sandbox/%s", s->files[i].name);
        av_push(a, path);
    }
    av_push(a, "--remount-ro");
    av_push(a, "/dev");
    av_push(a, "--remount-ro");
    av_push(a, "/");
    av_push(a, "--chdir");
    av_push(a, "/sandbox");
    if (with_bpf) {
        av_push(a, "--seccomp");
        av_push(a, "4");
    }
    av_push(a, "--");
}

static drift_status write_file(const char *dir, const sbx_file *f, uid_t uid, int chown_it, drift_error *err) {
    char path[PATH_MAX];
    if (!f->name[0] || strchr(f->name, '/') || strlen(dir) + strlen(f->name) + 2 > sizeof path)
        return drift_error_set(err, DRIFT_ERR_INVALID, "sandbox: bad file name '%s'", f->name);
    snprintf(path, sizeof path, "%s/%s", dir, f->name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: cannot create %s: %s", path, strerror(errno));
    size_t off = 0;
    while (off < f->len) {
        ssize_t k = write(fd, f->data + off, f->len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            return drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: cannot write %s: %s", path, strerror(e));
        }
        off += (size_t)k;
    }
    if (chown_it && fchown(fd, uid, (gid_t)uid) != 0) {
        int e = errno;
        close(fd);
        return drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: chown %s: %s", path, strerror(e));
    }
    close(fd);
    return DRIFT_OK;
}

void sbx_result_free(sbx_result *r) {
    if (!r) return;
    free(r->out.head);
    free(r->err.head);
    r->out.head = r->err.head = NULL;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

drift_status sbx_run(const sbx_spec *s, sbx_result *r, drift_error *err) {
    memset(r, 0, sizeof *r);
    if (!s || !s->python || s->stdin_len > SBX_STDIN_MAX)
        return drift_error_set(err, DRIFT_ERR_INVALID, "sandbox: bad spec");
    size_t cap = s->lim.out_cap_bytes;
    r->out.head = malloc(cap + 1);
    r->err.head = malloc(cap + 1);
    if (!r->out.head || !r->err.head) {
        sbx_result_free(r);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "sandbox: out of memory");
    }
    r->out.head[0] = r->err.head[0] = '\0';

    drift_status rc = DRIFT_OK;
    unsigned mech = s->mech;
    int slot = -1, have_cg = 0, ll_fd = -1;
    sbx_cg cg;
    uid_t uid = getuid();
    char dir[PATH_MAX] = "";
    argv_b av = {0};
    int fds[12];
    for (int i = 0; i < 12; i++) fds[i] = -1;
    /* fds: 0/1 stdin socketpair (parent, child), 2/3 out, 4/5 err, 6/7 chan,
     * 8/9 status, 10/11 bpf pipe (read end to the child) */
    pid_t sup = -1;
    const unsigned char *bpf = NULL;
    size_t bpf_len = 0;
    double t0 = drift_now_ms();

    if ((mech & SBX_MECH_SECCOMP) && bpf_get(&bpf, &bpf_len) != 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: seccomp filter: %s", g_bpf_err);
        goto done;
    }
    slot = slot_acquire();
    if (mech & SBX_MECH_UID) uid = sbx_uid_base() + (uid_t)slot;
    if ((mech & SBX_MECH_CGROUP) && cg_create(&cg, &s->lim, slot) == 0) {
        have_cg = 1;
        r->cgroup = 1;
    }
    r->uid = uid;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0] || strlen(tmp) > 200) tmp = "/tmp";
    pthread_once(&g_stale_once, stale_once);
    /* the owner's pid in the name: a killed scorer's dirs are found by it */
    snprintf(dir, sizeof dir, "%s/driftbench-sbx-%d-XXXXXX", tmp, (int)getpid());
    if (!mkdtemp(dir)) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: mkdtemp in %s: %s", tmp, strerror(errno));
        dir[0] = '\0';
        goto done;
    }
    if ((mech & SBX_MECH_UID) && chown(dir, uid, (gid_t)uid) != 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: chown %s: %s", dir, strerror(errno));
        goto done;
    }
    for (size_t i = 0; i < s->n_files; i++)
        if ((rc = write_file(dir, &s->files[i], uid, (mech & SBX_MECH_UID) != 0, err)) != DRIFT_OK) goto done;

    if ((mech & SBX_MECH_LANDLOCK) && (ll_fd = ll_ruleset(dir, s->python)) < 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: cannot build the Landlock ruleset: %s", strerror(errno));
        goto done;
    }
    int use_bpf_fd = (mech & SBX_MECH_BWRAP) && (mech & SBX_MECH_SECCOMP);
    if (mech & SBX_MECH_BWRAP) bwrap_args(&av, s, dir, use_bpf_fd);
    av_push(&av, s->python);
    for (const char *const *a = s->args; a && *a; a++) av_push(&av, *a);
    if (av.oom) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "sandbox: out of memory");
        goto done;
    }
    char env_home[PATH_MAX + 8], env_tmp[PATH_MAX + 8];
    snprintf(env_home, sizeof env_home, "HOME=%s", (mech & SBX_MECH_BWRAP) ? "/sandbox" : dir);
    /* without bubblewrap, temporary files go to the run's own dir */
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", (mech & SBX_MECH_BWRAP) ? "/tmp" : dir);
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", env_home, env_tmp, "LANG=C.UTF-8",
                    "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1", NULL};

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(fds + 2, O_CLOEXEC) != 0 ||
        pipe2(fds + 4, O_CLOEXEC) != 0 || pipe2(fds + 6, O_CLOEXEC) != 0 || pipe2(fds + 8, O_CLOEXEC) != 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: pipes: %s", strerror(errno));
        goto done;
    }
    fds[0] = sv[0];
    fds[1] = sv[1];
    if (use_bpf_fd) {
        if (pipe2(fds + 10, O_CLOEXEC) != 0) {
            rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: pipes: %s", strerror(errno));
            goto done;
        }
        /* fits the pipe buffer (checked at build: < 60000 bytes) */
        sys_write_all(fds[11], bpf, bpf_len);
        close_fd(&fds[11]);
    }

    long nproc = s->lim.nproc;
    if (!(mech & SBX_MECH_UID) && getuid() != 0) {
        /* RLIMIT_NPROC counts threads: a browser or a JVM of this user
         * must not leave the program without room to start */
        int have = sbx_count_uid_tasks(getuid());
        nproc += have > 0 ? have : 0;
        struct rlimit cur;
        if (getrlimit(RLIMIT_NPROC, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && (rlim_t)nproc > cur.rlim_max)
            nproc = (long)cur.rlim_max;
    }
    sbx_plan plan = {
        .argv = av.v, .envp = envp, .workdir = dir, .mech = mech, .uid = uid, .nproc = nproc,
        .lim = &s->lim, .fd_in = fds[1], .fd_out = fds[3], .fd_err = fds[5], .fd_chan = fds[7],
        .fd_bpf = use_bpf_fd ? fds[10] : -1, .fd_status = fds[9], .caller_pid = getpid(),
        .cg_procs = {have_cg ? cg.mem_procs : NULL, have_cg ? cg.pids_procs : NULL}, .fd_landlock = ll_fd};
    if (bpf) {
        plan.fprog.len = (unsigned short)(bpf_len / sizeof(struct sock_filter));
        plan.fprog.filter = (struct sock_filter *)(void *)bpf;
    }

    t0 = drift_now_ms();
    sup = fork();
    if (sup < 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: fork: %s", strerror(errno));
        goto done;
    }
    if (sup == 0) sup_main(&plan);
    close_fd(&fds[1]);
    close_fd(&fds[3]);
    close_fd(&fds[5]);
    close_fd(&fds[7]);
    close_fd(&fds[9]);
    close_fd(&fds[10]);
    /* stdin is written from the loop below as the program reads it */
    size_t in_off = 0;
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    if (!s->stdin_len) shutdown(fds[0], SHUT_WR);
    for (int i = 2; i <= 8; i += 2) fcntl(fds[i], F_SETFL, O_NONBLOCK);

    sbx_status st;
    memset(&st, 0, sizeof st);
    size_t st_len = 0;
    double guard_ms = t0 + s->lim.timeout_s * 1000.0 + 10000.0; /* supervisor itself stuck */
    char *chunk = malloc(65536);
    if (!chunk) {
        kill(sup, SIGTERM);
        waitpid(sup, NULL, 0);
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "sandbox: out of memory");
        goto done;
    }
    int open_n = 4, status_eof = 0;
    while (open_n > 0) {
        struct pollfd pf[5];
        int idx[5], n = 0;
        for (int i = 2; i <= 8; i += 2)
            if (fds[i] >= 0) {
                pf[n].fd = fds[i];
                pf[n].events = POLLIN;
                pf[n].revents = 0;
                idx[n++] = i;
            }
        if (in_off < s->stdin_len) {
            pf[n].fd = fds[0];
            pf[n].events = POLLOUT;
            pf[n].revents = 0;
            idx[n++] = 0;
        }
        double now = drift_now_ms();
        if (now > guard_ms) {
            kill(sup, SIGTERM);
            break;
        }
        /* Once the supervisor has reported, nothing is left to wait for:
         * drain what is buffered and stop (a stray may hold a pipe open). */
        int wait_ms = status_eof ? 0 : guard_ms - now > 1000 ? 1000 : (int)(guard_ms - now) + 1;
        int pr = poll(pf, (nfds_t)n, wait_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            if (status_eof) break;
            continue;
        }
        for (int j = 0; j < n; j++) {
            if (!pf[j].revents) continue;
            int i = idx[j];
            if (i == 0) { /* stdin: write what fits; on error or once done, EOF */
                ssize_t w = send(fds[0], s->stdin_data + in_off, s->stdin_len - in_off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) in_off += (size_t)w;
                if ((w < 0 && errno != EAGAIN && errno != EINTR) || (pf[j].revents & (POLLERR | POLLHUP)))
                    in_off = s->stdin_len;
                if (in_off >= s->stdin_len) shutdown(fds[0], SHUT_WR);
                continue;
            }
            ssize_t k = read(fds[i], chunk, 65536);
            if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (k <= 0) {
                close_fd(&fds[i]);
                open_n--;
                if (i == 8) status_eof = 1;
                continue;
            }
            if (i == 2) sbx_stream_add(&r->out, chunk, (size_t)k, cap);
            else if (i == 4) sbx_stream_add(&r->err, chunk, (size_t)k, cap);
            else if (i == 6) {
                size_t room = sizeof r->chan - 1 - r->chan_len;
                size_t m = (size_t)k < room ? (size_t)k : room;
                memcpy(r->chan + r->chan_len, chunk, m);
                r->chan_len += m;
                r->chan[r->chan_len] = '\0';
            } else {
                size_t m = (size_t)k < sizeof st - st_len ? (size_t)k : sizeof st - st_len;
                memcpy((char *)&st + st_len, chunk, m);
                st_len += m;
            }
        }
    }
    free(chunk);
    int sws = 0;
    while (waitpid(sup, &sws, 0) < 0 && errno == EINTR) {}
    r->wall_ms = drift_now_ms() - t0;
    if (st_len != sizeof st) {
        kill(-sup, SIGKILL);
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: supervisor ended without a status (%s)",
                             WIFSIGNALED(sws) ? strsignal(WTERMSIG(sws)) : "exited");
        goto done;
    }
    r->timed_out = st.timed_out;
    r->exec_errno = st.exec_errno;
    r->cpu_ms = st.cpu_ms;
    r->stray = st.stray;
    if (st.exec_errno) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: cannot start %s: %s", av.v[0],
                             strerror(st.exec_errno));
        goto done;
    }
    if (st.got_status) {
        if (WIFEXITED(st.wstatus)) {
            r->exited = 1;
            r->exit_code = WEXITSTATUS(st.wstatus);
            /* bwrap reports a program killed by signal N as exit 128+N */
            if ((mech & SBX_MECH_BWRAP) && r->exit_code > 128 && r->exit_code < 128 + 65) {
                r->exited = 0;
                r->term_signal = r->exit_code - 128;
            }
        } else if (WIFSIGNALED(st.wstatus)) {
            r->term_signal = WTERMSIG(st.wstatus);
        }
    }
    if (r->timed_out) {
        r->exited = 0;
        r->term_signal = SIGKILL;
    }

done:
    if (!r->wall_ms) r->wall_ms = drift_now_ms() - t0;
    for (int i = 0; i < 12; i++) close_fd(&fds[i]);
    av_free(&av);
    if (dir[0]) rm_tree(dir);
    if (ll_fd >= 0) close(ll_fd);
    /* Without a mount namespace the program may have left files in the
     * shared writable dirs (if Landlock did not stop it): remove what its
     * private uid owns. */
    if ((mech & SBX_MECH_UID) && !(mech & SBX_MECH_BWRAP) && sup > 0) r->leftovers = clean_owned(uid);
    if (have_cg) {
        r->oom_kills = cg_oom_kills(&cg);
        cg_remove(&cg);
    }
    if (slot >= 0) slot_release(slot);
    return rc;
}

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
    int have_sc = bpf_get(&bpf, &bpf_len) == 0;
    int root = geteuid() == 0;
    unsigned base = (have_sc ? SBX_MECH_SECCOMP : 0) | (root ? SBX_MECH_UID : 0);
    sbx_cg cg;
    sbx_limits l;
    sbx_limits_default(&l);
    if (cg_create(&cg, &l, SBX_SLOTS) == 0) {
        cg_remove(&cg);
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
        unsigned fb = base | (ll_abi() >= 1 ? SBX_MECH_LANDLOCK : 0);
        if (probe_try(pe->python, fb, why_s, sizeof why_s)) {
            pe->mech = fb;
            return;
        }
        if (fb != base && probe_try(pe->python, base, why_s, sizeof why_s)) {
            pe->mech = base;
            return;
        }
    } else {
        snprintf(why_s, sizeof why_s, "%s", !have_sc ? g_bpf_err : "not root, so no private uid to run under");
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
