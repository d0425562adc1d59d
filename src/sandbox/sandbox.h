/* sandbox.h - internal: run an untrusted program (Python) in isolation.
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
 *   /lib, /bin links read-only; /proc, /dev; a size-capped tmpfs as /tmp,
 *   /dev/shm and the working dir /sandbox, with the program files bound
 *   read-only; the root and /dev remounted read-only);
 *   seccomp (a deny list: socket(), SysV IPC, namespace creation,
 *   ptrace, mount, bpf, io_uring, kernel modules, setsid/setpgid, kill(-1),
 *   ...), built once with libseccomp and exported as BPF before any fork;
 *   the child only calls prctl (or hands the BPF to bwrap on fd 4).
 * - Fork bombs: RLIMIT_NPROC is ignored for uid 0, so when we are root the
 *   program runs under a private uid (0x60000000 + 64 * (pid % 2^22) + slot;
 *   one slot per concurrent run), where RLIMIT_NPROC holds; bwrap's pid
 *   namespace and the supervisor's kill of the group/uid end the rest.
 *   Not root: RLIMIT_NPROC is set to the user's current thread count + nproc
 *   (the limit counts threads).
 * - cgroups (when our own cgroup is writable, v1 memory/pids controllers or
 *   v2 with them enabled): one child cgroup per run caps the memory of the
 *   whole tree (RLIMIT_AS is per process: 64 processes x 1 GB would not be
 *   contained) and the number of tasks; the program joins it before exec.
 * - Without bubblewrap (seccomp + private uid [+ Landlock]): network, SysV
 *   IPC and namespaces are blocked by seccomp, other users' processes by the
 *   uid, the terminal by a new session; Landlock (where the kernel has it)
 *   confines files to /usr, the libraries and the run's own dir (TMPDIR), and
 *   scopes signals and abstract sockets. Without Landlock, world-readable
 *   files can be read and /tmp, /dev/shm written; what the run's uid leaves
 *   there is removed after it.
 * - A killed scorer leaves its dirs (TMPDIR/driftbench-sbx-PID-*) and run
 *   cgroups (driftbench-sbx-PID-SLOT); the next start removes those of dead
 *   PIDs (sbx_clean_stale): only real directories owned by us (or by the
 *   dead PID's private uids), through directory descriptors, never
 *   following a symlink, so a name planted in /tmp cannot steer a root
 *   scorer's removal elsewhere.
 * - Output: stdout and stderr are drained continuously; the first
 *   out_cap_bytes and the last 4 KiB are kept, so a program printing 1 GB
 *   neither blocks nor fills memory.
 * Files: seccomp.c (the filter), cgroup.c (run cgroups, v2 delegation),
 * landlock.c (the fallback's ruleset), child.c (supervisor and program, the
 * forked side), cleanup.c (leftovers and stale entries), run.c (sbx_run, the
 * caller side), probe.c (which mechanism works here).
 * Between fork and exec only async-signal-safe calls (raw syscalls, dup2,
 * prctl, setrlimit, sigaction, execve) are made; everything else (argv,
 * environment, BPF, paths) is prepared before the fork. */
#ifndef DRIFT_SANDBOX_H
#define DRIFT_SANDBOX_H

#include <stddef.h>
#include <sys/types.h>
#include "driftbench/status.h"

/* Isolation mechanisms, as bits. */
enum {
    SBX_MECH_BWRAP = 1,   /* bubblewrap: mount/pid/net/ipc/uts/user namespaces */
    SBX_MECH_SECCOMP = 2, /* seccomp-bpf syscall filter */
    SBX_MECH_UID = 4,     /* program runs under an unprivileged per-slot uid */
    SBX_MECH_CGROUP = 8,  /* a cgroup per run: memory of the whole tree, pids.max */
    SBX_MECH_LANDLOCK = 16 /* without bubblewrap: Landlock confines files, signals and
                              abstract unix sockets to the run */
};

typedef struct sbx_limits {
    double timeout_s;      /* wall clock; the whole process tree is killed after it */
    double cpu_s;          /* RLIMIT_CPU (per process): SIGXCPU, then SIGKILL 1 s later */
    long mem_mb;           /* RLIMIT_AS */
    long nproc;            /* processes + threads of the sandbox uid (RLIMIT_NPROC) */
    long nofile;           /* RLIMIT_NOFILE */
    long fsize_mb;         /* RLIMIT_FSIZE; also the size of the sandbox tmpfs (bwrap) */
    size_t out_cap_bytes;  /* bytes of stdout / stderr kept (head); the rest is drained */
} sbx_limits;

void sbx_limits_default(sbx_limits *l);

typedef struct sbx_file {
    const char *name;      /* plain file name, no '/' */
    const char *data;
    size_t len;
} sbx_file;

typedef struct sbx_spec {
    const char *python;            /* interpreter path (absolute) */
    const char *const *args;       /* argv after the interpreter, NULL-terminated */
    const sbx_file *files;         /* written into the working directory */
    size_t n_files;
    const char *stdin_data;        /* at most SBX_STDIN_MAX bytes, then EOF */
    size_t stdin_len;
    sbx_limits lim;
    unsigned mech;                 /* mechanisms to use (from sbx_probe) */
    int (*cancel)(void *user);     /* polled every 100 ms; nonzero: the tree is killed
                                      and sbx_run returns DRIFT_ERR_CANCELLED */
    void *cancel_user;
} sbx_spec;

/* Captured output of one stream: the first out_cap_bytes and the last 4 KiB. */
typedef struct sbx_stream {
    char *head;
    size_t head_len;
    char tail[4096];               /* ring buffer of the last bytes */
    size_t total;                  /* bytes the program wrote */
} sbx_stream;

typedef struct sbx_result {
    int exited;                    /* 1: exited normally with exit_code */
    int exit_code;
    int term_signal;               /* signal that killed the program, or 0 */
    int timed_out;                 /* wall timeout hit; tree killed */
    int exec_errno;                /* exec of the interpreter / bwrap failed */
    int stray;                     /* descendants still alive after cleanup (should be 0) */
    double wall_ms;
    double cpu_ms;                 /* user + system CPU of the whole process tree */
    sbx_stream out, err;
    char chan[1024];               /* what the program wrote on fd 3 (result channel) */
    size_t chan_len;
    uid_t uid;                     /* uid the program ran as */
    int cgroup;                    /* 1: the run had its own cgroup (memory, pids) */
    int oom_kills;                 /* memory cgroup: processes the OOM killer ended */
    int leftovers;                 /* fallback mode: files of the run's uid removed from
                                      /tmp, /var/tmp, /dev/shm after it */
} sbx_result;

/* Which mechanisms work here for this interpreter. Probed once per
 * interpreter path (cached; thread-safe) by running a trivial program.
 * *mech gets the bits; name gets "bubblewrap+seccomp+uid" etc. Returns
 * DRIFT_ERR_SANDBOX when neither bubblewrap nor (seccomp + uid) works,
 * with the reasons, unless unsafe is set: then DRIFT_OK and name says
 * "none (unsafe)" or what partially works. */
drift_status sbx_probe(const char *python, int unsafe, unsigned *mech, char *name, size_t cap,
                       drift_error *err);

/* Runs one program. Returns DRIFT_OK when the program ran (whatever it did:
 * see r), DRIFT_ERR_SANDBOX when the sandbox could not be set up (temp
 * dir, pipes, fork, exec). Always cleans up the temp dir and every process.
 * Thread-safe. Free r with sbx_result_free. */
drift_status sbx_run(const sbx_spec *s, sbx_result *r, drift_error *err);
void sbx_result_free(sbx_result *r);

/* Appends n bytes to a stream keeping at most cap bytes of head (head must
 * have room for cap + 1). */
void sbx_stream_add(sbx_stream *st, const char *p, size_t n, size_t cap);

/* The last n bytes written to a stream, copied to dst (NUL-terminated);
 * returns the length copied. */
size_t sbx_stream_tail(const sbx_stream *st, char *dst, size_t n);

/* Number of live processes (zombies included) whose real uid is uid. */
int sbx_count_uid_procs(uid_t uid);

/* Number of tasks (threads) of live processes whose real uid is uid: what
 * RLIMIT_NPROC counts. */
int sbx_count_uid_tasks(uid_t uid);

/* Removes what killed scorers left behind: sandbox directories
 * (TMPDIR/driftbench-sbx-PID-*) and run cgroups (driftbench-sbx-PID-SLOT)
 * whose owner PID is no longer alive. A directory is removed only if it is
 * a real directory (not a symlink) owned by our effective uid or by one of
 * that PID's private uids; its contents go through openat/unlinkat, links
 * removed as links (cleanup.c). Runs once per process on the first
 * sbx_run; callable directly (tests). Returns the number of entries removed. */
int sbx_clean_stale(void);

/* First uid of this process's sandbox uid range (slots follow it). */
uid_t sbx_uid_base(void);
#define SBX_SLOTS 64
#define SBX_STDIN_MAX (16u << 20)

#endif
