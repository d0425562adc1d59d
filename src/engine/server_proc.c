/* server_proc.c - a server process started, watched and stopped by
 * DriftBench (server_proc.h says what and why).
 *
 * Two processes of ours stand between DriftBench and the server:
 *
 *   driftbench ──fork──> supervisor ──fork──> /bin/sh -c COMMAND ──> server(s)
 *   (p->pid is the       own process group,   new process group G
 *    supervisor)         child subreaper,     (the shell's pid),
 *                        parent-death signal  parent-death signal SIGKILL
 *                        SIGUSR1
 *
 * The supervisor is a fork of DriftBench that never execs: async-signal-
 * safe calls only (the parent may have threads; it blocks every signal
 * around the fork so none of its handlers runs in the child), /proc read
 * with raw syscalls into stack buffers. It waits in sigtimedwait:
 *   SIGTERM (our stop)        -> SIGTERM to group G and to every descendant
 *                                outside it (each once)
 *   SIGUSR1 (kill_all, or the -> SIGKILL to G and to every descendant, again
 *   parent-death signal: our     and again until none is left (orphans come
 *   thread or process died,      back to it: it is their subreaper), then it
 *   kill -9 included)            exits
 *   the shell exits           -> the leftovers get SIGTERM, SIGKILL after
 *                                the grace period
 * and exits once it has no child left, as the shell did: the same exit
 * status, or killed by the same signal, so "exited with status 127" and
 * "was killed by signal 9" read as before. Descendants are found by
 * walking /proc/<pid>/stat's parent links from the supervisor down; a
 * subreaper keeps daemons (double fork, setsid) in that tree.
 *
 * The port is ours: the port is chosen (the kernel's pick for an ephemeral
 * bind, or the caller's), then /proc/net/tcp{,6} must show no LISTEN socket
 * that a connection to 127.0.0.1:PORT reaches (127.0.0.1, 0.0.0.0, ::,
 * ::ffff:127.0.0.1; a chosen port that is taken is chosen again); after
 * /health answers 200, every such socket must be one of the descriptors of
 * the supervisor's tree (its inode among /proc/<pid>/fd's "socket:[N]"),
 * else the start is refused, naming the process that holds the port (the
 * one whose descriptors hold the inode, where we may read them). Once our
 * server holds the port, no one else can bind it (short of SO_REUSEPORT by
 * the same user), so the answers of the run come from it.
 *
 * Health: a fresh libcurl easy handle per probe (1 s budget), every 100 ms,
 * until HTTP 200. 503 while a model loads (llama-server) is "not yet".
 *
 * Stop: SIGTERM to the supervisor; wait for it to be reaped until the grace
 * period ends; then SIGUSR1 (it SIGKILLs the tree and exits); SIGKILL to it
 * only if that did not end it either.
 *
 * Limits: a server that runs as another user (sudo -u, a setuid binary) or
 * outside our process tree (docker's port forwarding) cannot be shown to
 * hold its port and is refused; a SIGKILL of the supervisor itself (the OOM
 * killer) takes the shell with it but may leave the shell's children; the
 * supervisor shares, copy-on-write, the memory DriftBench had when the
 * server started until the server stops; the parent-death signal follows
 * the thread that started the server (matrix.c stops its servers before its
 * workers end). */
#include "driftbench/server_proc.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define PROBE_EVERY_MS 100.0
#define PROBE_BUDGET_MS 1000L
#define TAIL_READ_BYTES 16384
#define CMD_SHOWN_MAX 300      /* bytes of the command quoted in a message */
#define OWNER_SHOWN_MAX 200    /* bytes of another process's command line in a message */
#define MAX_LIVE 64            /* servers alive at once that kill_all can reach */
#define TREE_MAX 1024          /* descendants of one supervisor it can see at once */
#define LISTEN_MAX 16          /* listening sockets on one port looked at */
#define PORT_TRIES 8           /* kernel-chosen ports tried when one is taken */
#define SUP_POLL_MS 200        /* the supervisor's look at its parent when no signal comes */
#define SUP_KILL_WAIT_MS 5000  /* after SIGKILL: how long the supervisor waits for its children */
#define SIG_STOP_TREE SIGUSR1  /* to the supervisor: SIGKILL everything, exit */

struct drift_server_proc {
    pid_t pid;                 /* the supervisor (see the top of the file) */
    int port;
    char *command;             /* after {port} */
    char *log_path;
    int reaped;                /* waitpid has returned the supervisor's status */
    int status;                /* its wait status (when reaped): the shell's */
    int died;                  /* it exited on its own (not stopped by us): keep the log */
    double stop_grace_s;
};

/* ---- the table of live supervisors (for kill_all and atexit) ---- */

static volatile pid_t live_sups[MAX_LIVE];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

void drift_server_proc_kill_all(void) {
    for (int i = 0; i < MAX_LIVE; i++) {
        pid_t s = live_sups[i];
        if (s > 0) kill(s, SIG_STOP_TREE);
    }
}

static void at_exit_kill(void) { drift_server_proc_kill_all(); }
static void live_init(void) { atexit(at_exit_kill); }

static int live_add(pid_t s) {
    pthread_once(&live_once, live_init);
    pthread_mutex_lock(&live_mu);
    int ok = 0;
    for (int i = 0; i < MAX_LIVE && !ok; i++)
        if (live_sups[i] == 0) {
            live_sups[i] = s;
            ok = 1;
        }
    pthread_mutex_unlock(&live_mu);
    return ok ? 0 : -1;
}

static void live_remove(pid_t s) {
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < MAX_LIVE; i++)
        if (live_sups[i] == s) live_sups[i] = 0;
    pthread_mutex_unlock(&live_mu);
}

/* ---- /proc with raw syscalls and the caller's buffers (async-signal-safe:
 * the supervisor uses them too) ---- */

/* "/proc/PID/LEAF" into out (64 bytes are enough for any leaf used here). */
static void proc_path(char *out, size_t cap, pid_t pid, const char *leaf) {
    char digits[24];
    int nd = 0;
    unsigned long v = (unsigned long)pid;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && nd < (int)sizeof digits);
    size_t n = 0;
    for (const char *c = "/proc/"; *c && n + 1 < cap; c++) out[n++] = *c;
    while (nd && n + 1 < cap) out[n++] = digits[--nd];
    if (n + 1 < cap) out[n++] = '/';
    for (const char *c = leaf; *c && n + 1 < cap; c++) out[n++] = *c;
    out[n] = '\0';
}

/* A /proc entry's name as a pid; 0 when it is not one. */
static pid_t name_pid(const char *name) {
    long v = 0;
    if (*name < '1' || *name > '9') return 0;
    for (; *name; name++) {
        if (*name < '0' || *name > '9' || v > 100000000L) return 0;
        v = v * 10 + (*name - '0');
    }
    return (pid_t)v;
}

/* pid's parent and state letter, from /proc/PID/stat; -1 when gone. */
static int stat_read(pid_t pid, pid_t *ppid, char *state) {
    char path[64], buf[512];
    proc_path(path, sizeof path, pid, "stat");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) return -1;
    buf[got] = '\0';
    const char *q = buf + got;
    while (q > buf && *q != ')') q--; /* comm may hold spaces and parentheses */
    if (*q != ')' || q[1] != ' ' || !q[2] || q[3] != ' ') return -1;
    *state = q[2];
    long v = 0;
    for (q += 4; *q >= '0' && *q <= '9'; q++) v = v * 10 + (*q - '0');
    *ppid = (pid_t)v;
    return 0;
}

static int pid_in(const pid_t *set, size_t n, pid_t pid) {
    for (size_t i = 0; i < n; i++)
        if (set[i] == pid) return 1;
    return 0;
}

/* root's live descendants (zombies left out; not root itself) into
 * out[0..cap): passes over /proc, each adding the processes whose parent is
 * root or already in, until a pass adds none. Returns how many. */
static size_t tree_list(pid_t root, pid_t *out, size_t cap) {
    union {
        char bytes[4096];
        long long align;
    } dents;
    size_t n = 0;
    for (int pass = 0; pass < 64; pass++) {
        size_t before = n;
        int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) return n;
        long k;
        while ((k = syscall(SYS_getdents64, dfd, dents.bytes, sizeof dents.bytes)) > 0) {
            for (long off = 0; off < k;) {
                struct {
                    unsigned long long ino;
                    long long off;
                    unsigned short reclen;
                    unsigned char type;
                    char name[];
                } *de = (void *)(dents.bytes + off);
                off += de->reclen;
                pid_t pid = name_pid(de->name), ppid = 0;
                char state = 0;
                if (pid <= 0 || pid == root || pid_in(out, n, pid) || n >= cap) continue;
                if (stat_read(pid, &ppid, &state) || state == 'Z' || state == 'X') continue;
                if (ppid == root || pid_in(out, n, ppid)) out[n++] = pid;
            }
        }
        close(dfd);
        if (n == before) break;
    }
    return n;
}

/* ---- the supervisor (the forked child: async-signal-safe calls only) ---- */

static void write_str(int fd, const char *s) {
    ssize_t w = write(fd, s, strlen(s));
    (void)w;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* The shell: its own process group, dies with the supervisor, signals
 * unblocked, exec /bin/sh -c cmd. Never returns. */
static __attribute__((noreturn)) void shell_exec(const char *cmd, pid_t sup) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != sup) _exit(127); /* the supervisor is gone already */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    write_str(2, "driftbench: cannot exec /bin/sh\n");
    _exit(127);
}

/* Reaps every child that has ended (the shell's status into *status, *done
 * set). 1 while children are left, 0 when none is. */
static int sup_reap(pid_t shell, int *done, int *status) {
    for (;;) {
        int st = 0;
        pid_t r = waitpid(-1, &st, WNOHANG);
        if (r > 0) {
            if (r == shell) {
                *done = 1;
                *status = st;
            }
            continue;
        }
        if (r == 0) return 1;
        if (errno == EINTR) continue;
        return 0; /* ECHILD */
    }
}

/* Ends the supervisor as the shell ended: the same exit status, or killed
 * by the same signal (no core file); killed by SIGKILL when the shell was
 * never reaped. */
static __attribute__((noreturn)) void sup_exit_as(int done, int status) {
    if (done && WIFEXITED(status)) _exit(WEXITSTATUS(status));
    int sig = done && WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    kill(getpid(), sig);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL); /* delivered here */
    _exit(128 + sig);
}

/* SIGTERM to the shell's group (while the shell is unreaped: its pid, the
 * group's id, cannot be reused until then) and to every descendant
 * outside it. */
static void sup_term_tree(pid_t self, pid_t group, int shell_done) {
    pid_t pids[TREE_MAX];
    if (!shell_done) kill(-group, SIGTERM);
    size_t n = tree_list(self, pids, TREE_MAX);
    for (size_t i = 0; i < n; i++)
        if (shell_done || getpgid(pids[i]) != group) kill(pids[i], SIGTERM);
}

/* SIGKILL to the group and every descendant until no child is left (or
 * SUP_KILL_WAIT_MS passed: a process stuck in the kernel), then exit. */
static __attribute__((noreturn)) void sup_kill_tree(pid_t self, pid_t shell, int *done, int *status) {
    pid_t pids[TREE_MAX];
    double t0 = util_now_ms();
    for (;;) {
        if (!*done) kill(-shell, SIGKILL); /* the shell's group (see sup_term_tree) */
        size_t n = tree_list(self, pids, TREE_MAX);
        for (size_t i = 0; i < n; i++) kill(pids[i], SIGKILL);
        if (!sup_reap(shell, done, status) || util_now_ms() - t0 > SUP_KILL_WAIT_MS) break;
        nap_ms(5);
    }
    sup_exit_as(*done, *status);
}

/* The supervisor (see the top of the file). Every signal is blocked on
 * entry (the parent blocked them around fork). Never returns. */
static __attribute__((noreturn)) void sup_main(const char *cmd, int logfd, int nullfd, pid_t parent, double grace_s) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL; /* the parent's handlers and ignores are not the server's */
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, NULL);
    setpgid(0, 0);
    prctl(PR_SET_NAME, "drift-server-sv"); /* what ps and top show for it */
    prctl(PR_SET_PDEATHSIG, SIG_STOP_TREE);
    if (getppid() != parent) _exit(127); /* the parent is gone already */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) _exit(127);
    if (close_range(3, ~0U, 0) != 0) /* a kernel without it: the usual range */
        for (int fd = 3; fd < 4096; fd++) close(fd);
    pid_t self = getpid();
    pid_t shell = fork();
    if (shell == 0) shell_exec(cmd, self);
    if (shell < 0) {
        write_str(2, "driftbench: cannot fork the server's shell\n");
        _exit(127);
    }
    setpgid(shell, shell); /* also done by the shell: whichever comes first */
    sigset_t wanted;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGCHLD);
    sigaddset(&wanted, SIGTERM);
    sigaddset(&wanted, SIG_STOP_TREE);
    int done = 0, status = 0, termed = 0;
    double leftovers_until = 0; /* the shell has ended: its leftovers' grace */
    for (;;) {
        struct timespec ts = {SUP_POLL_MS / 1000, (SUP_POLL_MS % 1000) * 1000000L};
        siginfo_t si;
        int sig = sigtimedwait(&wanted, &si, &ts);
        int children = sup_reap(shell, &done, &status);
        if (sig == SIG_STOP_TREE || getppid() != parent) sup_kill_tree(self, shell, &done, &status);
        if (done && !children) sup_exit_as(done, status);
        if (sig == SIGTERM && !termed) {
            sup_term_tree(self, shell, done);
            termed = 1;
        }
        if (done && !leftovers_until) {
            if (!termed) sup_term_tree(self, shell, done);
            termed = 1;
            leftovers_until = util_now_ms() + grace_s * 1000.0;
        }
        if (leftovers_until && util_now_ms() >= leftovers_until) sup_kill_tree(self, shell, &done, &status);
    }
}

/* ---- who listens on a port (the parent's side: ordinary calls) ---- */

typedef struct listener {
    unsigned long inode;
    unsigned uid;
} listener;

/* 1 when a socket bound to the address in /proc/net/tcp{,6}'s hex form
 * (native-order 32-bit words of the address's bytes) takes connections to
 * 127.0.0.1: 127.0.0.1, 0.0.0.0, ::, ::ffff:127.0.0.1, ::ffff:0.0.0.0. */
static int reaches_loopback(const char *hex) {
    size_t len = strlen(hex);
    unsigned char b[16];
    if (len != 8 && len != 32) return 0;
    for (size_t w = 0; w < len / 8; w++) {
        char word[9];
        memcpy(word, hex + 8 * w, 8);
        word[8] = '\0';
        uint32_t v = (uint32_t)strtoul(word, NULL, 16);
        memcpy(b + 4 * w, &v, 4);
    }
    const unsigned char *v4 = b;
    if (len == 32) {
        static const unsigned char zero[16], mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(b, zero, 16)) return 1;
        if (memcmp(b, mapped, 12)) return 0;
        v4 = b + 12;
    }
    return (v4[0] == 127 && v4[1] == 0 && v4[2] == 0 && v4[3] == 1) || !(v4[0] | v4[1] | v4[2] | v4[3]);
}

/* The LISTEN sockets on port that take connections to 127.0.0.1, from
 * /proc/net/tcp and /proc/net/tcp6, into out[0..cap) (*n of them). -1 with
 * errno when neither file can be read. */
static int port_listeners(int port, listener *out, size_t cap, size_t *n) {
    static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    int read_any = 0, saved = 0;
    *n = 0;
    for (size_t f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "re");
        if (!fp) {
            saved = errno;
            continue;
        }
        read_any = 1;
        char line[512], addr[40];
        unsigned lport = 0, st = 0, uid = 0;
        unsigned long inode = 0;
        while (fgets(line, sizeof line, fp))
            if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %u %*d %lu", addr, &lport, &st, &uid,
                       &inode) == 5 &&
                st == 0x0A /* TCP_LISTEN */ && (int)lport == port && reaches_loopback(addr) && *n < cap) {
                out[*n].inode = inode;
                out[(*n)++].uid = uid;
            }
        fclose(fp);
    }
    if (!read_any) errno = saved;
    return read_any ? 0 : -1;
}

/* 1 when pid holds a descriptor of socket inode. */
static int holds_socket(pid_t pid, unsigned long inode) {
    char dir[64], want[48];
    proc_path(dir, sizeof dir, pid, "fd");
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char path[128], link[64];
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ssize_t k = readlink(path, link, sizeof link - 1);
        if (k <= 0) continue;
        link[k] = '\0';
        found = !strcmp(link, want);
    }
    closedir(d);
    return found;
}

/* "pid P (`COMMAND LINE`)" for the process that holds socket inode (its
 * command line cut and with control characters as '?'), or what is known
 * when none we may look into does. */
static void describe_holder(unsigned long inode, unsigned uid, char *out, size_t cap) {
    pid_t holder = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && !holder && (e = readdir(d))) {
        pid_t pid = name_pid(e->d_name);
        if (pid > 0 && holds_socket(pid, inode)) holder = pid;
    }
    if (d) closedir(d);
    if (!holder) {
        snprintf(out, cap, "a process of uid %u that driftbench may not look into (socket inode %lu)", uid, inode);
        return;
    }
    char path[64], cmd[OWNER_SHOWN_MAX + 1] = "";
    proc_path(path, sizeof path, holder, "cmdline");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t k = fd >= 0 ? read(fd, cmd, sizeof cmd - 1) : 0;
    if (fd >= 0) close(fd);
    if (k < 0) k = 0;
    int cut = k == (ssize_t)sizeof cmd - 1;
    while (k > 0 && cmd[k - 1] == '\0') k--;
    for (ssize_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)cmd[i];
        if (!c) cmd[i] = ' ';
        else if (c < 0x20 || c == 0x7f || c == '`') cmd[i] = '?';
    }
    cmd[k] = '\0';
    snprintf(out, cap, "pid %d (`%s%s`)", (int)holder, cmd, cut ? "..." : "");
}

/* Who, other than the processes in tree[0..n), listens on port for
 * 127.0.0.1: 0 with who = "" when no one; 1 with who describing the first
 * other (describe_holder); -1 with who saying why we cannot tell. *total:
 * the listeners seen, ours included. */
static int port_others(int port, const pid_t *tree, size_t n, char *who, size_t cap, size_t *total) {
    listener ls[LISTEN_MAX];
    size_t nl = 0;
    who[0] = '\0';
    *total = 0;
    if (port_listeners(port, ls, LISTEN_MAX, &nl)) {
        snprintf(who, cap, "cannot read /proc/net/tcp to see who listens on port %d: %s", port, strerror(errno));
        return -1;
    }
    *total = nl;
    for (size_t i = 0; i < nl; i++) {
        int ours = 0;
        for (size_t t = 0; t < n && !ours; t++) ours = holds_socket(tree[t], ls[i].inode);
        if (!ours) {
            describe_holder(ls[i].inode, ls[i].uid, who, cap);
            return 1;
        }
    }
    return 0;
}

/* The supervisor and its live descendants into tree (TREE_MAX + 1). */
static size_t our_tree(const drift_server_proc *p, pid_t *tree) {
    tree[0] = p->pid;
    return 1 + tree_list(p->pid, tree + 1, TREE_MAX);
}

/* After /health answered 200: DRIFT_OK when every socket that takes
 * 127.0.0.1:port is held by p's tree (and there is one); else DRIFT_ERR_IO
 * with how. */
static drift_status check_owner(const drift_server_proc *p, char *how, size_t cap) {
    pid_t tree[TREE_MAX + 1];
    size_t n = our_tree(p, tree), total = 0;
    char who[OWNER_SHOWN_MAX + 160];
    int r = port_others(p->port, tree, n, who, sizeof who, &total);
    if (r < 0) {
        snprintf(how, cap, "answered /health, but %s (refused: only the answers of the server started are taken)",
                 who);
        return DRIFT_ERR_IO;
    }
    if (r > 0) {
        snprintf(how, cap,
                 "did not get its port: 127.0.0.1:%d, where /health answered, is held by %s, not by the server "
                 "started (refused: nothing was asked or stored)",
                 p->port, who);
        return DRIFT_ERR_IO;
    }
    if (!total) {
        snprintf(how, cap,
                 "answered /health on 127.0.0.1:%d, but no listening socket for it is in /proc/net/tcp: who "
                 "answered cannot be told (refused)",
                 p->port);
        return DRIFT_ERR_IO;
    }
    return DRIFT_OK;
}

/* "; 127.0.0.1:PORT is held by WHO" appended to how when a process other
 * than p's tree listens there (a start that failed may have failed for it). */
static void note_others(const drift_server_proc *p, char *how, size_t cap) {
    pid_t tree[TREE_MAX + 1];
    size_t n = p->reaped ? 0 : our_tree(p, tree);
    char who[OWNER_SHOWN_MAX + 160];
    size_t total = 0;
    if (port_others(p->port, tree, n, who, sizeof who, &total) > 0) {
        size_t l = strlen(how);
        snprintf(how + l, cap - l, "; 127.0.0.1:%d is held by %s", p->port, who);
    }
}
/* ---- small helpers ---- */

void drift_server_proc_opts_default(drift_server_proc_opts *o) {
    memset(o, 0, sizeof *o);
    o->health_path = "/health";
    o->ready_timeout_s = 120;
    o->stop_grace_s = 10;
}

char *drift_server_proc_fill_port(const char *tmpl, int port) {
    if (!tmpl) return NULL;
    util_buf b = {0};
    char num[16];
    snprintf(num, sizeof num, "%d", port);
    for (const char *p = tmpl; *p;) {
        if (!strncmp(p, "{port}", 6)) {
            buf_puts(&b, num);
            p += 6;
        } else {
            buf_append(&b, p, 1);
            p++;
        }
    }
    char *s = buf_steal(&b);
    return s ? s : util_strdup("");
}

int drift_server_proc_port(const drift_server_proc *p) { return p ? p->port : 0; }
const char *drift_server_proc_command(const drift_server_proc *p) { return p ? p->command : NULL; }

static void sleep_ms(double ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* A port the kernel picks for an ephemeral bind; 0 on failure. Another
 * process may take it before the server binds it: start checks who holds
 * it once /health answers (check_owner). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* "exited with status 3" / "was killed by signal 9 (Killed)" */
static void describe_status(int status, char *out, size_t cap) {
    if (WIFEXITED(status)) snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(out, cap, "ended with wait status %d", status);
}

/* The command, cut to CMD_SHOWN_MAX bytes for a message. */
static void shown_command(const char *cmd, char *out, size_t cap) {
    size_t n = strlen(cmd);
    if (n <= CMD_SHOWN_MAX) snprintf(out, cap, "%s", cmd);
    else snprintf(out, cap, "%.*s...", CMD_SHOWN_MAX, cmd);
}

/* waitpid(WNOHANG) of the supervisor: 1 once it is reaped (status kept,
 * and out of kill_all's table before its pid can be reused). */
static int reap_nohang(drift_server_proc *p) {
    if (p->reaped) return 1;
    int st = 0;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid || (r < 0 && errno == ECHILD)) {
        p->reaped = 1;
        p->status = r == p->pid ? st : 0;
        live_remove(p->pid);
    }
    return p->reaped;
}

int drift_server_proc_alive(drift_server_proc *p) {
    if (!p || p->reaped) return 0;
    if (reap_nohang(p)) {
        p->died = 1;
        return 0;
    }
    return 1;
}

char *drift_server_proc_tail(const drift_server_proc *p, int lines, size_t max_bytes) {
    if (!p || !p->log_path || lines <= 0 || !max_bytes) return util_strdup("");
    FILE *f = fopen(p->log_path, "rb");
    if (!f) return util_strdup("");
    char *raw = malloc(TAIL_READ_BYTES + 1);
    if (!raw) {
        fclose(f);
        return NULL;
    }
    size_t n = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        long from = size > TAIL_READ_BYTES ? size - TAIL_READ_BYTES : 0;
        if (size >= 0 && fseek(f, from, SEEK_SET) == 0) n = fread(raw, 1, TAIL_READ_BYTES, f);
    }
    fclose(f);
    /* control characters (escapes, \r) would garble a terminal */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) raw[i] = '?';
    }
    while (n && raw[n - 1] == '\n') n--;
    raw[n] = 0;
    /* walk back over the last `lines` lines while they fit */
    size_t start = n;
    int taken = 0;
    while (start > 0 && taken < lines) {
        size_t s = start;
        while (s > 0 && raw[s - 1] != '\n') s--;
        if (n - s > max_bytes) break;
        start = s ? s - 1 : 0;
        taken++;
        if (!s) break;
    }
    if (!taken) {
        /* the last line alone is longer than max_bytes: its end */
        size_t from = n > max_bytes ? n - max_bytes : 0;
        char *out = util_strdup(raw + from);
        free(raw);
        return out;
    }
    char *out = util_strdup(raw + start + (raw[start] == '\n'));
    free(raw);
    return out;
}

/* err = code + "[context: ]server `COMMAND` HOW; last lines of its output
 * (log PATH):\n  line\n  line", the tail's first lines giving way to fit. */
static drift_status compose(const drift_server_proc *p, drift_status code, const char *context, const char *how,
                            drift_error *err) {
    char cmd[CMD_SHOWN_MAX + 4];
    shown_command(p->command, cmd, sizeof cmd);
    char head[DRIFT_ERROR_MSG_MAX];
    int hn = snprintf(head, sizeof head, "%s%sserver `%s` %s; last lines of its output (log %s):",
                      context && *context ? context : "", context && *context ? ": " : "", cmd, how,
                      p->log_path ? p->log_path : "none");
    if (hn < 0 || (size_t)hn + 48 >= sizeof head) return drift_error_set(err, code, "%s", head);
    /* every line gets two spaces of indentation: budget for 20 of them */
    size_t room = sizeof head - (size_t)hn - 48;
    char *tail = drift_server_proc_tail(p, 20, room);
    util_buf b = {0};
    buf_puts(&b, head);
    if (tail && *tail) {
        buf_puts(&b, "\n  ");
        for (const char *c = tail; *c; c++) {
            buf_append(&b, c, 1);
            if (*c == '\n') buf_puts(&b, "  ");
        }
    } else {
        buf_puts(&b, " (none)");
    }
    free(tail);
    char *msg = buf_steal(&b);
    if (!msg) return drift_error_set(err, code, "%s", head);
    size_t len = strlen(msg);
    if (len < DRIFT_ERROR_MSG_MAX) {
        drift_error_set(err, code, "%s", msg);
    } else {
        /* the indentation overflowed: keep the head and the last bytes */
        size_t keep = DRIFT_ERROR_MSG_MAX - (size_t)hn - 8;
        drift_error_set(err, code, "%s\n  ...%s", head, msg + len - keep);
    }
    free(msg);
    return code;
}

drift_status drift_server_proc_check(drift_server_proc *p, const char *context, drift_error *err) {
    if (!p) return drift_error_set(err, DRIFT_ERR_INVALID, "server: no process");
    if (drift_server_proc_alive(p)) return DRIFT_OK;
    char how[96];
    describe_status(p->status, how, sizeof how);
    return compose(p, DRIFT_ERR_IO, context, how, err);
}

/* ---- start ---- */

static size_t discard(char *ptr, size_t size, size_t nmemb, void *user) {
    (void)ptr;
    (void)user;
    return size * nmemb;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_rc;
static void curl_init_once(void) { curl_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* One GET of url: the HTTP status (0 when no reply; what happened in why). */
static long probe(const char *url, char *why, size_t cap) {
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, cap, "curl_easy_init failed");
        return 0;
    }
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, PROBE_BUDGET_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, PROBE_BUDGET_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        snprintf(why, cap, "HTTP %ld", status);
    } else {
        snprintf(why, cap, "%s", ebuf[0] ? ebuf : curl_easy_strerror(rc));
    }
    curl_easy_cleanup(c);
    return status;
}

/* Waits up to ms for the supervisor to be reaped; 1 when it is. */
static int reap_within(drift_server_proc *p, double ms) {
    double deadline = util_now_ms() + ms;
    while (!reap_nohang(p)) {
        if (util_now_ms() >= deadline) return 0;
        sleep_ms(10);
    }
    return 1;
}

/* Stops p's tree (see the top of the file); p->reaped afterwards. */
static void stop_tree(drift_server_proc *p) {
    if (p->reaped) return;
    kill(p->pid, SIGTERM);
    if (reap_within(p, p->stop_grace_s * 1000.0)) return;
    kill(p->pid, SIG_STOP_TREE);
    if (reap_within(p, SUP_KILL_WAIT_MS + 2000.0)) return;
    kill(p->pid, SIGKILL); /* the supervisor itself does not end: a bug */
    int st = 0;
    while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
    }
    p->reaped = 1;
    p->status = st;
    live_remove(p->pid);
}

static void proc_release(drift_server_proc *p, int keep_log) {
    if (!p) return;
    if (p->pid > 0) live_remove(p->pid);
    if (p->log_path && !keep_log) unlink(p->log_path);
    free(p->command);
    free(p->log_path);
    free(p);
}

void drift_server_proc_free(drift_server_proc *p) {
    if (!p) return;
    drift_server_proc_alive(p); /* did it die on its own? */
    stop_tree(p);
    proc_release(p, p->died);
}

/* Fails the start with code and "server `COMMAND` HOW; ..." (the tail
 * follows); p is stopped and freed, its log kept (removed on a cancel). */
static drift_status fail_start(drift_server_proc *p, drift_status code, const char *how, drift_error *err) {
    stop_tree(p);
    p->died = 1;
    if (code == DRIFT_ERR_CANCELLED) {
        char cmd[CMD_SHOWN_MAX + 4];
        shown_command(p->command, cmd, sizeof cmd);
        drift_error_set(err, code, "cancelled while server `%s` was starting", cmd);
    } else {
        compose(p, code, NULL, how, err);
    }
    proc_release(p, code != DRIFT_ERR_CANCELLED);
    return code;
}

/* A port for the server: o->port, or one the kernel picks; either way one
 * on which nothing takes 127.0.0.1 connections now (a picked one that is
 * taken is picked again). 0 with err set when there is none. */
static int choose_port(const drift_server_proc_opts *o, drift_error *err) {
    char who[OWNER_SHOWN_MAX + 160];
    size_t total = 0;
    for (int i = 0; i < PORT_TRIES; i++) {
        int port = o->port > 0 ? o->port : free_port();
        if (port <= 0) {
            drift_error_set(err, DRIFT_ERR_IO, "server: no free TCP port on 127.0.0.1: %s", strerror(errno));
            return 0;
        }
        int r = port_others(port, NULL, 0, who, sizeof who, &total);
        if (r == 0) return port;
        if (r < 0 || o->port > 0) {
            if (r < 0)
                drift_error_set(err, DRIFT_ERR_IO, "server: %s", who);
            else
                drift_error_set(err, DRIFT_ERR_IO, "server: port %d is in use already: 127.0.0.1:%d is held by %s",
                                port, port, who);
            return 0;
        }
    }
    drift_error_set(err, DRIFT_ERR_IO,
                    "server: %d ports picked by the kernel were each taken before they could be used (last: %s)",
                    PORT_TRIES, who);
    return 0;
}

drift_status drift_server_proc_start(const drift_server_proc_opts *o, drift_server_proc **out, drift_error *err) {
    if (out) *out = NULL;
    if (!o || !out || !o->command || !*o->command)
        return drift_error_set(err, DRIFT_ERR_INVALID, "server: no start command");
    const char *health = o->health_path && *o->health_path ? o->health_path : "/health";
    if (health[0] != '/') return drift_error_set(err, DRIFT_ERR_INVALID, "server: health path '%s' must start with '/'", health);
    pthread_once(&curl_once, curl_init_once);
    if (curl_rc != CURLE_OK)
        return drift_error_set(err, DRIFT_ERR_HTTP, "server: libcurl init failed: %s", curl_easy_strerror(curl_rc));
    int port = choose_port(o, err);
    if (port <= 0) return err ? err->code : DRIFT_ERR_IO;

    drift_server_proc *p = calloc(1, sizeof *p);
    if (!p) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    p->port = port;
    p->stop_grace_s = o->stop_grace_s > 0 ? o->stop_grace_s : 10;
    p->command = drift_server_proc_fill_port(o->command, port);
    const char *dir = o->log_dir ? o->log_dir : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    p->log_path = util_asprintf("%s/driftbench-server-%d-XXXXXX.log", dir, port);
    if (!p->command || !p->log_path) {
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    int logfd = mkostemps(p->log_path, 4, O_CLOEXEC | O_APPEND);
    if (logfd < 0) {
        drift_error_set(err, DRIFT_ERR_IO, "server: cannot create its log %s: %s", p->log_path, strerror(errno));
        free(p->log_path);
        p->log_path = NULL;
        proc_release(p, 0);
        return err ? err->code : DRIFT_ERR_IO;
    }
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        close(logfd);
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_IO, "server: cannot open /dev/null: %s", strerror(errno));
    }
    /* every signal blocked across fork: none of our handlers may run in the
     * supervisor before it has reset them */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) sup_main(p->command, logfd, nullfd, parent, p->stop_grace_s);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_IO, "server: fork failed: %s", strerror(fork_errno));
    }
    p->pid = pid;
    if (live_add(pid)) {
        stop_tree(p);
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "server: more than %d servers at once", MAX_LIVE);
    }

    char *url = util_asprintf("http://127.0.0.1:%d%s", port, health);
    if (!url) {
        stop_tree(p);
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    double t0 = util_now_ms(), deadline = t0 + (o->ready_timeout_s > 0 ? o->ready_timeout_s : 120) * 1000.0;
    char why[CURL_ERROR_SIZE + 32] = "no probe yet";
    drift_status rc = DRIFT_OK;
    for (;;) {
        if (!drift_server_proc_alive(p)) {
            char how[OWNER_SHOWN_MAX + 512];
            describe_status(p->status, how, 96);
            size_t hl = strlen(how);
            snprintf(how + hl, sizeof how - hl, " before it was healthy (%.1f s after start)",
                     (util_now_ms() - t0) / 1000.0);
            note_others(p, how, sizeof how);
            rc = fail_start(p, DRIFT_ERR_IO, how, err);
            break;
        }
        if (probe(url, why, sizeof why) == 200) {
            char how[OWNER_SHOWN_MAX + 512];
            if (check_owner(p, how, sizeof how) != DRIFT_OK) rc = fail_start(p, DRIFT_ERR_IO, how, err);
            break;
        }
        if (o->cancel && o->cancel(o->cancel_user)) {
            rc = fail_start(p, DRIFT_ERR_CANCELLED, "", err);
            break;
        }
        if (util_now_ms() >= deadline) {
            char what[CURL_ERROR_SIZE + OWNER_SHOWN_MAX + 512];
            snprintf(what, sizeof what, "was not healthy within %.1f s (last GET %s: %s)",
                     o->ready_timeout_s > 0 ? o->ready_timeout_s : 120, url, why);
            note_others(p, what, sizeof what);
            rc = fail_start(p, DRIFT_ERR_TIMEOUT, what, err);
            break;
        }
        sleep_ms(PROBE_EVERY_MS);
    }
    free(url);
    if (rc) return rc;
    *out = p;
    return DRIFT_OK;
}
