/* server_proc.c - a server process started, watched and stopped by
 * DriftBench (server_proc.h says what and why).
 *
 * The child: fork, then only async-signal-safe calls (the parent may have
 * threads): its own process group, signals back to their defaults,
 * PR_SET_PDEATHSIG SIGKILL (the shell dies with us even on a hard kill),
 * stdin /dev/null, stdout + stderr appended to the log file, every other
 * descriptor closed, exec /bin/sh -c COMMAND. The parent sets the group too
 * (whichever runs first wins the race) and records the group in a fixed
 * table that drift_server_proc_kill_all walks without locks.
 *
 * Health: a fresh libcurl easy handle per probe (1 s budget), every 100 ms,
 * until HTTP 200. 503 while a model loads (llama-server) is "not yet".
 *
 * Stop: SIGTERM to the group; wait until the shell is reaped and the group
 * is empty (kill(-pgid, 0) fails) or the grace period ends; then SIGKILL to
 * whatever of the group is left. */
#include "driftbench/server_proc.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#define PROBE_EVERY_MS 100.0
#define PROBE_BUDGET_MS 1000L
#define TAIL_READ_BYTES 16384
#define CMD_SHOWN_MAX 300      /* bytes of the command quoted in a message */
#define MAX_LIVE 64            /* servers alive at once that kill_all can reach */

struct drift_server_proc {
    pid_t pid;                 /* the shell; also the process group id */
    int port;
    char *command;             /* after {port} */
    char *log_path;
    int reaped;                /* waitpid has returned the shell's status */
    int status;                /* its wait status (when reaped) */
    int died;                  /* it exited on its own (not stopped by us): keep the log */
    double stop_grace_s;
};

/* ---- the table of live process groups (for kill_all and atexit) ---- */

static volatile pid_t live_groups[MAX_LIVE];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

void drift_server_proc_kill_all(void) {
    for (int i = 0; i < MAX_LIVE; i++) {
        pid_t g = live_groups[i];
        if (g > 0) kill(-g, SIGKILL);
    }
}

static void at_exit_kill(void) { drift_server_proc_kill_all(); }
static void live_init(void) { atexit(at_exit_kill); }

static int live_add(pid_t g) {
    pthread_once(&live_once, live_init);
    pthread_mutex_lock(&live_mu);
    int ok = 0;
    for (int i = 0; i < MAX_LIVE && !ok; i++)
        if (live_groups[i] == 0) {
            live_groups[i] = g;
            ok = 1;
        }
    pthread_mutex_unlock(&live_mu);
    return ok ? 0 : -1;
}

static void live_remove(pid_t g) {
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < MAX_LIVE; i++)
        if (live_groups[i] == g) live_groups[i] = 0;
    pthread_mutex_unlock(&live_mu);
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

/* A port nobody listens on now (the kernel's pick for an ephemeral bind);
 * 0 on failure. Another process could take it before the server binds it:
 * the server then fails to start, which is reported as any failed start. */
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

int drift_server_proc_alive(drift_server_proc *p) {
    if (!p || p->reaped) return 0;
    int st = 0;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid || (r < 0 && errno == ECHILD)) {
        p->reaped = 1;
        p->status = r == p->pid ? st : 0;
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

/* The child side of fork: async-signal-safe calls only. Never returns. */
static void child_exec(const char *cmd, int logfd, int nullfd, pid_t parent) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127); /* the parent is gone already */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP) sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) _exit(127);
    if (close_range(3, ~0U, 0) != 0) /* a kernel without it: the usual range */
        for (int fd = 3; fd < 4096; fd++) close(fd);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    static const char msg[] = "driftbench: cannot exec /bin/sh\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
}

/* Stops p's group (see the top of the file); p->reaped afterwards. */
static void stop_group(drift_server_proc *p) {
    if (!p->reaped) {
        kill(-p->pid, SIGTERM);
        double deadline = util_now_ms() + p->stop_grace_s * 1000.0;
        while (util_now_ms() < deadline) {
            if (!p->reaped) {
                int st = 0;
                pid_t r = waitpid(p->pid, &st, WNOHANG);
                if (r == p->pid || (r < 0 && errno == ECHILD)) {
                    p->reaped = 1;
                    p->status = st;
                }
            }
            if (p->reaped && kill(-p->pid, 0) < 0 && errno == ESRCH) break;
            sleep_ms(10);
        }
    }
    kill(-p->pid, SIGKILL); /* what is left of the group, if anything */
    if (!p->reaped) {
        int st = 0;
        while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
        }
        p->reaped = 1;
        p->status = st;
    }
}

static void proc_release(drift_server_proc *p, int keep_log) {
    if (!p) return;
    live_remove(p->pid);
    if (p->log_path && !keep_log) unlink(p->log_path);
    free(p->command);
    free(p->log_path);
    free(p);
}

void drift_server_proc_free(drift_server_proc *p) {
    if (!p) return;
    drift_server_proc_alive(p); /* did it die on its own? */
    stop_group(p);
    proc_release(p, p->died);
}

/* Fails the start with code and "server `COMMAND` HOW; ..." (the tail
 * follows); p is stopped and freed, its log kept (removed on a cancel). */
static drift_status fail_start(drift_server_proc *p, drift_status code, const char *how, drift_error *err) {
    stop_group(p);
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

drift_status drift_server_proc_start(const drift_server_proc_opts *o, drift_server_proc **out, drift_error *err) {
    if (out) *out = NULL;
    if (!o || !out || !o->command || !*o->command)
        return drift_error_set(err, DRIFT_ERR_INVALID, "server: no start command");
    const char *health = o->health_path && *o->health_path ? o->health_path : "/health";
    if (health[0] != '/') return drift_error_set(err, DRIFT_ERR_INVALID, "server: health path '%s' must start with '/'", health);
    pthread_once(&curl_once, curl_init_once);
    if (curl_rc != CURLE_OK)
        return drift_error_set(err, DRIFT_ERR_HTTP, "server: libcurl init failed: %s", curl_easy_strerror(curl_rc));
    int port = o->port > 0 ? o->port : free_port();
    if (port <= 0) return drift_error_set(err, DRIFT_ERR_IO, "server: no free TCP port on 127.0.0.1: %s", strerror(errno));

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
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) child_exec(p->command, logfd, nullfd, parent);
    int fork_errno = errno;
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_IO, "server: fork failed: %s", strerror(fork_errno));
    }
    setpgid(pid, pid); /* also done by the child: whichever comes first */
    p->pid = pid;
    if (live_add(pid)) {
        stop_group(p);
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "server: more than %d servers at once", MAX_LIVE);
    }

    char *url = util_asprintf("http://127.0.0.1:%d%s", port, health);
    if (!url) {
        stop_group(p);
        proc_release(p, 0);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    double t0 = util_now_ms(), deadline = t0 + (o->ready_timeout_s > 0 ? o->ready_timeout_s : 120) * 1000.0;
    char why[CURL_ERROR_SIZE + 32] = "no probe yet";
    drift_status rc = DRIFT_OK;
    for (;;) {
        if (!drift_server_proc_alive(p)) {
            char how[160];
            describe_status(p->status, how, 96);
            size_t hl = strlen(how);
            snprintf(how + hl, sizeof how - hl, " before it was healthy (%.1f s after start)",
                     (util_now_ms() - t0) / 1000.0);
            rc = fail_start(p, DRIFT_ERR_IO, how, err);
            break;
        }
        if (probe(url, why, sizeof why) == 200) break;
        if (o->cancel && o->cancel(o->cancel_user)) {
            rc = fail_start(p, DRIFT_ERR_CANCELLED, "", err);
            break;
        }
        if (util_now_ms() >= deadline) {
            char what[CURL_ERROR_SIZE + 160];
            snprintf(what, sizeof what, "was not healthy within %.1f s (last GET %s: %s)",
                     o->ready_timeout_s > 0 ? o->ready_timeout_s : 120, url, why);
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
