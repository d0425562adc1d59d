/* sbx_internal.h - internal to src/sandbox/: what its files share. */
#ifndef DRIFT_SBX_INTERNAL_H
#define DRIFT_SBX_INTERNAL_H

#include <limits.h>
#include <linux/filter.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

#define SBX_BWRAP "/usr/bin/bwrap"
#define SBX_UID_FIRST 0x60000000u

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* seccomp.c: the filter as BPF, built once; NULL/-1 with sbx_bpf_error(). */
int sbx_bpf_get(const unsigned char **p, size_t *n);
const char *sbx_bpf_error(void);

/* cgroup.c */
/* One run's cgroups: created with limits, removed after. */
typedef struct sbx_cg {
    char mem[PATH_MAX], pids[PATH_MAX];   /* "" when not used */
    char mem_procs[PATH_MAX + 16], pids_procs[PATH_MAX + 16];
} sbx_cg;

int sbx_cg_create(sbx_cg *cg, const sbx_limits *l, int slot);
void sbx_cg_remove(sbx_cg *cg);
int sbx_cg_oom_kills(const sbx_cg *cg);
int sbx_cg_clean_stale(void);

/* landlock.c: the kernel's ABI (0: none) and one run's ruleset fd (-1: none). */
int sbx_ll_abi(void);
int sbx_ll_ruleset(const char *workdir, const char *python);

/* child.c: the forked side */
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

__attribute__((noreturn)) void sbx_sup_main(const sbx_plan *p);
void sbx_write_all(int fd, const void *p, size_t n);
void sbx_sleep_ms(long ms);

/* run.c: the first private uid of process pid's range (SBX_SLOTS uids). */
uid_t sbx_uid_base_of(pid_t pid);

/* cleanup.c (all removal through directory descriptors, never following a
 * symlink). sbx_rm_tree: a run's own dir, if a real directory owned by us
 * or by the run's uid (a symlink in its place is removed as a link). */
void sbx_rm_tree(const char *dir, uid_t run_uid);
int sbx_clean_owned(uid_t uid);
pid_t sbx_stale_owner(const char *name);

#endif
