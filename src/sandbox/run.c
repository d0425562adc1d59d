/* run.c - sbx_run, the caller's side of a run: the work dir, the bwrap
 * command line, pipes, the fork, draining output and feeding stdin, the
 * status record. See sandbox.h for the design. */
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
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "util/util.h"

void sbx_limits_default(sbx_limits *l) {
    l->timeout_s = 10;
    l->cpu_s = 10;
    l->mem_mb = 1024;
    l->nproc = 64;
    l->nofile = 64;
    l->fsize_mb = 64;
    l->out_cap_bytes = 64 * 1024;
}


/* ---- uid slots ---- */

static pthread_mutex_t g_slot_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_slot_cv = PTHREAD_COND_INITIALIZER;
static uint64_t g_slot_used;

uid_t sbx_uid_base_of(pid_t pid) {
    return (uid_t)(SBX_UID_FIRST + (uint32_t)(pid % 4194304) * SBX_SLOTS);
}

uid_t sbx_uid_base(void) { return sbx_uid_base_of(getpid()); }

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


/* ---- the caller side ---- */

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
    char *c = util_strdup(s);
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
    double t0 = util_now_ms();

    if ((mech & SBX_MECH_SECCOMP) && sbx_bpf_get(&bpf, &bpf_len) != 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: seccomp filter: %s", sbx_bpf_error());
        goto done;
    }
    slot = slot_acquire();
    if (mech & SBX_MECH_UID) uid = sbx_uid_base() + (uid_t)slot;
    if ((mech & SBX_MECH_CGROUP) && sbx_cg_create(&cg, &s->lim, slot) == 0) {
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

    if ((mech & SBX_MECH_LANDLOCK) && (ll_fd = sbx_ll_ruleset(dir, s->python)) < 0) {
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
        sbx_write_all(fds[11], bpf, bpf_len);
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

    t0 = util_now_ms();
    sup = fork();
    if (sup < 0) {
        rc = drift_error_set(err, DRIFT_ERR_SANDBOX, "sandbox: fork: %s", strerror(errno));
        goto done;
    }
    if (sup == 0) sbx_sup_main(&plan);
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
    int open_n = 4, status_eof = 0, cancelled = 0;
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
        double now = util_now_ms();
        if (now > guard_ms) {
            kill(sup, SIGTERM);
            break;
        }
        /* the caller gave up: the supervisor kills the tree and reports */
        if (s->cancel && !cancelled && s->cancel(s->cancel_user)) {
            cancelled = 1;
            kill(sup, SIGTERM);
        }
        /* Once the supervisor has reported, nothing is left to wait for:
         * drain what is buffered and stop (a stray may hold a pipe open). */
        int wait_ms = status_eof ? 0 : guard_ms - now > 1000 ? 1000 : (int)(guard_ms - now) + 1;
        if (s->cancel && wait_ms > 100) wait_ms = 100;
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
    r->wall_ms = util_now_ms() - t0;
    if (cancelled) {
        rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "sandbox: cancelled");
        goto done;
    }
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
    if (!r->wall_ms) r->wall_ms = util_now_ms() - t0;
    for (int i = 0; i < 12; i++) close_fd(&fds[i]);
    av_free(&av);
    if (dir[0]) sbx_rm_tree(dir, uid);
    if (ll_fd >= 0) close(ll_fd);
    /* Without a mount namespace (and without Landlock, which denies the
     * shared writable dirs) the program may have left files there: remove
     * what its private uid owns. */
    if ((mech & SBX_MECH_UID) && !(mech & (SBX_MECH_BWRAP | SBX_MECH_LANDLOCK)) && sup > 0)
        r->leftovers = sbx_clean_owned(uid);
    if (have_cg) {
        r->oom_kills = sbx_cg_oom_kills(&cg);
        sbx_cg_remove(&cg);
    }
    if (slot >= 0) slot_release(slot);
    return rc;
}
