/* seccomp.c - the program's syscall filter: a deny list built once with
 * libseccomp and exported as BPF before any fork (the child only hands it to
 * prctl or to bwrap). */
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
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <termios.h>

#include "util/util.h"

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

int sbx_bpf_get(const unsigned char **p, size_t *n) {
    pthread_once(&g_bpf_once, bpf_build);
    *p = g_bpf;
    *n = g_bpf_len;
    return g_bpf ? 0 : -1;
}

const char *sbx_bpf_error(void) { return g_bpf_err; }
