/* child.c - the forked side of a run: the supervisor (timer, subreaper,
 * cleanup of the tree, CPU accounting) and the program's setup between fork
 * and exec (descriptors, rlimits, cgroup, uid, Landlock, seccomp). Only
 * async-signal-safe calls here. */
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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include "util/util.h"

/* ---- the forked side ---- */

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

void sbx_write_all(int fd, const void *p, size_t n) {
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
    sbx_write_all(5, &e, sizeof e);
    _exit(127);
}

void sbx_sleep_ms(long ms) {
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

__attribute__((noreturn)) void sbx_sup_main(const sbx_plan *p) {
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
        sbx_write_all(p->fd_status, &st, sizeof st);
        _exit(0);
    }
    setitimer(ITIMER_REAL, &it, NULL);
    pid_t self = getpid();
    pid_t g = fork();
    if (g == 0) prog_main(p, ee[1], self);
    if (g < 0) {
        st.exec_errno = errno;
        sbx_write_all(p->fd_status, &st, sizeof st);
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
        sbx_sleep_ms(1);
    }
    /* Every process of the tree was reaped by its parent, the namespace's
     * init or this subreaper, so the children's usage is the tree's. */
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
        double ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
        if (ms > st.cpu_ms) st.cpu_ms = ms;
    }
    sbx_write_all(p->fd_status, &st, sizeof st);
    _exit(0);
}
