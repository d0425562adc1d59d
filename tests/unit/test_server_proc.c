/* test_server_proc.c - the server process module against real processes:
 * tests/server/fakeserver (built as $DRIFT_BUILD/fakeserver) and /bin/sh.
 * A start that exits (status, output tail), a bad binary (127), a server
 * that never gets healthy (bounded by the ready timeout), one that loads a
 * while first, one that dies after serving (status 3 and its last words),
 * stop: SIGTERM ignored -> SIGKILL after the grace, a compound command's
 * whole process group, kill_all, cancel while starting, the tail's bounds
 * and {port}; and the matrix stage with servers side by side (jobs 2):
 * shared and own servers, a death mid-run and its resume. The server is
 * ours: a squatter that takes the port before the server and answers
 * /health is refused by name, so is a given port already taken; and it dies
 * with us: kill -9 of the process that started a server whose command is
 * not an exec (the server a grandchild) or that left its process group
 * (setsid), and a stop of the latter, leave nothing running. Every test
 * bounds its own time; fakeserver ends by itself after 60 s whatever
 * happens. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <sqlite3.h>

#include "driftbench/matrix.h"
#include "driftbench/pipeline.h"
#include "driftbench/server_proc.h"
#include "store/store_internal.h" /* store_sqlite: to look at what the matrix stored */
#include "util/util.h"

static char fake_exe[1024];
static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    const char *build = getenv("DRIFT_BUILD");
    snprintf(fake_exe, sizeof fake_exe, "%s/fakeserver", build ? build : ".");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_server_proc.XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    /* the matrix stage's servers log under $TMPDIR: kept logs go with the rest */
    return setenv("TMPDIR", tmpdir, 1);
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void need_fake(void) {
    if (access(fake_exe, X_OK) != 0) skip();
}

static drift_server_proc_opts opts_for(const char *cmd, double ready_s) {
    drift_server_proc_opts o;
    drift_server_proc_opts_default(&o);
    o.command = cmd;
    o.ready_timeout_s = ready_s;
    o.stop_grace_s = 2;
    o.log_dir = tmpdir;
    return o;
}

/* The log path named in a message "(log PATH)"; copied to out. */
static void log_from_msg(const char *msg, char *out, size_t cap) {
    const char *p = strstr(msg, "(log ");
    assert_non_null(p);
    p += 5;
    const char *e = strstr(p, ")");
    assert_non_null(e);
    snprintf(out, cap, "%.*s", (int)(e - p), p);
}

/* pid read from a file a command wrote with `echo $$ > F`; 0 if none. */
static long read_pid(const char *path) {
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1) pid = 0;
        fclose(f);
    }
    return pid;
}

static int gone(long pid) { return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH; }

/* Waits up to ms for pid to be gone (a grandchild is reaped by init). */
static int gone_within(long pid, double ms) {
    double t0 = util_now_ms();
    while (util_now_ms() - t0 < ms) {
        if (gone(pid)) return 1;
        usleep(10000);
    }
    return gone(pid);
}

static void test_fill_port(void **state) {
    (void)state;
    char *s = drift_server_proc_fill_port("srv --port {port} --x {portx} {port}", 8123);
    assert_string_equal(s, "srv --port 8123 --x {portx} 8123");
    free(s);
}

static void test_exits_before_healthy(void **state) {
    (void)state;
    drift_server_proc_opts o = opts_for("echo starting up; echo 'bad flag --frob' >&2; exit 7", 10);
    drift_server_proc *p = (drift_server_proc *)0x1;
    drift_error err = {0};
    double t0 = util_now_ms();
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_IO);
    assert_true(util_now_ms() - t0 < 5000); /* not the ready timeout */
    assert_null(p);
    assert_non_null(strstr(err.msg, "exited with status 7 before it was healthy"));
    assert_non_null(strstr(err.msg, "exit 7`"));
    assert_non_null(strstr(err.msg, "\n  starting up\n  bad flag --frob"));
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    assert_int_equal(access(log, R_OK), 0); /* kept for reading */
    unlink(log);
}

static void test_bad_binary(void **state) {
    (void)state;
    drift_server_proc_opts o = opts_for("/nonexistent/llama-server --port {port}", 10);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_IO);
    assert_non_null(strstr(err.msg, "exited with status 127"));
    assert_non_null(strstr(err.msg, "not found"));
    /* the port was substituted into the command shown */
    assert_null(strstr(err.msg, "{port}"));
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    unlink(log);
}

static void test_never_healthy(void **state) {
    (void)state;
    need_fake();
    char cmd[2048], pidf[512];
    snprintf(pidf, sizeof pidf, "%s/never.pid", tmpdir);
    snprintf(cmd, sizeof cmd, "echo $$ > %s; exec %s --port {port} --never-healthy --lifetime 60", pidf, fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 1.0);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    double t0 = util_now_ms();
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_TIMEOUT);
    double ms = util_now_ms() - t0;
    assert_true(ms >= 1000 && ms < 6000);
    assert_non_null(strstr(err.msg, "was not healthy within 1.0 s"));
    assert_non_null(strstr(err.msg, "HTTP 503"));
    assert_true(gone_within(read_pid(pidf), 2000)); /* stopped */
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    unlink(log);
}

static size_t sink(char *p, size_t s, size_t n, void *u) {
    (void)p;
    (void)u;
    return s * n;
}

/* One completion request to the server at port; the HTTP status. */
static long ask(int port) {
    CURL *c = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"model\":\"m\",\"prompt\":\"ANSWER=4\",\"max_tokens\":8}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
    long st = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    curl_easy_cleanup(c);
    return st;
}

static void test_loads_then_serves_then_stops(void **state) {
    (void)state;
    need_fake();
    char cmd[2048], pidf[512];
    snprintf(pidf, sizeof pidf, "%s/ok.pid", tmpdir);
    snprintf(cmd, sizeof cmd, "echo $$ > %s; exec %s --port {port} --health-after 0.4 --lifetime 60", pidf, fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 20);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    double t0 = util_now_ms();
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_OK);
    assert_true(util_now_ms() - t0 >= 400); /* waited for the 503s to end */
    assert_non_null(p);
    int port = drift_server_proc_port(p);
    assert_true(port > 0 && port < 65536);
    char want[64];
    snprintf(want, sizeof want, "--port %d ", port);
    assert_non_null(strstr(drift_server_proc_command(p), want));
    assert_int_equal(drift_server_proc_alive(p), 1);
    assert_int_equal(drift_server_proc_check(p, "ctx", &err), DRIFT_OK);
    assert_int_equal(ask(port), 200);
    long pid = read_pid(pidf);
    assert_true(pid > 0 && !gone(pid));
    drift_server_proc_free(p);
    assert_true(gone(pid)); /* reaped: it was our child */
    /* a clean stop removes the log */
    char pat[600];
    snprintf(pat, sizeof pat, "ls %s/driftbench-server-%d-*.log >/dev/null 2>&1", tmpdir, port);
    assert_int_not_equal(system(pat), 0);
}

static void test_dies_mid_run(void **state) {
    (void)state;
    need_fake();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --port {port} --die-after 2 --lifetime 60", fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 20);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_OK);
    int port = drift_server_proc_port(p);
    assert_int_equal(ask(port), 200);
    assert_int_equal(drift_server_proc_alive(p), 1);
    assert_int_equal(ask(port), 200); /* the second reply is sent, then it dies */
    double t0 = util_now_ms();
    while (drift_server_proc_alive(p) && util_now_ms() - t0 < 5000) usleep(10000);
    assert_int_equal(drift_server_proc_alive(p), 0);
    assert_int_equal(drift_server_proc_check(p, "configuration 'x'", &err), DRIFT_ERR_IO);
    assert_non_null(strstr(err.msg, "configuration 'x': server `"));
    assert_non_null(strstr(err.msg, "exited with status 3"));
    assert_non_null(strstr(err.msg, "dying after 2 generation replies"));
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    drift_server_proc_free(p);
    assert_int_equal(access(log, R_OK), 0); /* it died on its own: kept */
    unlink(log);
}

static void test_sigterm_ignored(void **state) {
    (void)state;
    need_fake();
    char cmd[2048], pidf[512];
    snprintf(pidf, sizeof pidf, "%s/stubborn.pid", tmpdir);
    snprintf(cmd, sizeof cmd, "trap '' TERM; echo $$ > %s; exec %s --port {port} --lifetime 60", pidf, fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 20);
    o.stop_grace_s = 0.5;
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_OK);
    long pid = read_pid(pidf);
    double t0 = util_now_ms();
    drift_server_proc_free(p);
    double ms = util_now_ms() - t0;
    assert_true(ms >= 450 && ms < 3000); /* the grace, then SIGKILL */
    assert_true(gone(pid));
}

static void test_compound_group(void **state) {
    (void)state;
    need_fake();
    char cmd[2048], pidf[512];
    snprintf(pidf, sizeof pidf, "%s/child.pid", tmpdir);
    /* the shell stays the parent: the server is its child in the group */
    snprintf(cmd, sizeof cmd, "%s --port {port} --lifetime 60 & echo $! > %s; wait", fake_exe, pidf);
    drift_server_proc_opts o = opts_for(cmd, 20);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_OK);
    long sub = read_pid(pidf);
    assert_true(sub > 0);
    assert_false(gone(sub));
    drift_server_proc_free(p);
    /* the server, the shell's child, is gone too: no orphan */
    assert_true(gone_within(sub, 3000));
}

static void test_kill_all(void **state) {
    (void)state;
    need_fake();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --port {port} --lifetime 60", fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 20);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_OK);
    drift_server_proc_kill_all();
    double t0 = util_now_ms();
    while (drift_server_proc_alive(p) && util_now_ms() - t0 < 3000) usleep(5000);
    assert_int_equal(drift_server_proc_check(p, NULL, &err), DRIFT_ERR_IO);
    assert_non_null(strstr(err.msg, "was killed by signal 9"));
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    drift_server_proc_free(p);
    unlink(log);
}

static int cancel_after(void *user) {
    int *n = user;
    return ++*n >= 3;
}

static void test_cancel_while_starting(void **state) {
    (void)state;
    need_fake();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --port {port} --never-healthy --lifetime 60", fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 30);
    int calls = 0;
    o.cancel = cancel_after;
    o.cancel_user = &calls;
    drift_server_proc *p = NULL;
    drift_error err = {0};
    double t0 = util_now_ms();
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_CANCELLED);
    assert_true(util_now_ms() - t0 < 5000);
    assert_non_null(strstr(err.msg, "cancelled while server"));
}

static void test_tail_bounds(void **state) {
    (void)state;
    /* 50 numbered lines then exit 1: the tail is lines 31..50 */
    drift_server_proc_opts o = opts_for("i=1; while [ $i -le 50 ]; do echo \"line $i\"; i=$((i+1)); done; exit 1", 10);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_IO);
    assert_non_null(strstr(err.msg, "\n  line 31\n"));
    assert_non_null(strstr(err.msg, "\n  line 50"));
    assert_null(strstr(err.msg, "line 30\n"));
    assert_true(strlen(err.msg) < DRIFT_ERROR_MSG_MAX);
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    unlink(log);
    /* a flood of long lines still fits the message, ending with the last */
    /* built without a subprocess per line, and a generous ready timeout: on a
     * loaded machine 200 forks of seq outran the 10 s and the start timed out */
    o.command = "x=xxxxxxxxxx; x=$x$x$x$x$x$x$x$x$x$x$x$x$x$x$x; i=1; while [ $i -le 200 ]; do echo \"$x end $i\"; "
                "i=$((i+1)); done; exit 2";
    o.ready_timeout_s = 60;
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_IO);
    assert_true(strlen(err.msg) < DRIFT_ERROR_MSG_MAX);
    assert_non_null(strstr(err.msg, " end 200"));
    assert_non_null(strstr(err.msg, "exited with status 2"));
    log_from_msg(err.msg, log, sizeof log);
    unlink(log);
}

/* ---- the server is ours, and dies with us ---- */

/* The pid of a process (not zombie) whose command line holds the argument
 * arg; 0 when none. */
static long pid_with_arg(const char *arg) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    long found = 0;
    while (d && !found && (e = readdir(d))) {
        long pid = atol(e->d_name);
        if (pid <= 0) continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        for (ssize_t i = 0; i < n && !found; i += (ssize_t)strlen(buf + i) + 1) {
            buf[n] = '\0';
            if (!strcmp(buf + i, arg)) found = pid;
        }
    }
    if (d) closedir(d);
    return found;
}

/* Waits up to ms for a process whose command line holds arg; its pid or 0. */
static long wait_pid_with_arg(const char *arg, double ms) {
    double t0 = util_now_ms();
    long pid = 0;
    while (!(pid = pid_with_arg(arg)) && util_now_ms() - t0 < ms) usleep(20000);
    return pid;
}

/* Forks a squatter: it waits for portfile to hold a port, then runs
 * fakeserver on it (a process of the test's, not of the server's). */
static pid_t squat_when_written(const char *portfile) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < 1000; i++) {
            FILE *f = fopen(portfile, "r");
            int port = 0;
            if (f) {
                if (fscanf(f, "%d", &port) != 1) port = 0;
                fclose(f);
            }
            if (port > 0) {
                char ps[16];
                snprintf(ps, sizeof ps, "%d", port);
                execl(fake_exe, fake_exe, "--port", ps, "--lifetime", "30", "--model", "squatter", "--quiet",
                      (char *)NULL);
                _exit(127);
            }
            usleep(10000);
        }
        _exit(1);
    }
    return pid;
}

static void reap(pid_t pid) {
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

static void test_port_squatter(void **state) {
    (void)state;
    need_fake();
    char cmd[2048], portf[512], pidf[512];
    snprintf(portf, sizeof portf, "%s/squat.port", tmpdir);
    snprintf(pidf, sizeof pidf, "%s/squat.pid", tmpdir);
    /* the server writes its port, then takes a while to bind it: the
     * squatter binds it first and answers /health 200 */
    snprintf(cmd, sizeof cmd, "echo $$ > %s; echo {port} > %s; sleep 1.5; exec %s --port {port} --lifetime 60", pidf,
             portf, fake_exe);
    pid_t sq = squat_when_written(portf);
    drift_server_proc_opts o = opts_for(cmd, 20);
    drift_server_proc *p = (drift_server_proc *)0x1;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_IO);
    assert_null(p);
    char want[128];
    snprintf(want, sizeof want, "is held by pid %d (`%s --port ", (int)sq, fake_exe);
    if (!strstr(err.msg, want)) fail_msg("expected '%s' in: %s", want, err.msg);
    assert_non_null(strstr(err.msg, "did not get its port: 127.0.0.1:"));
    assert_non_null(strstr(err.msg, "not by the server started"));
    assert_true(gone_within(read_pid(pidf), 3000)); /* ours is stopped */
    assert_false(gone(sq));                        /* theirs is not ours to stop */
    reap(sq);
    char log[512];
    log_from_msg(err.msg, log, sizeof log);
    unlink(log);
}

static void test_port_taken(void **state) {
    (void)state;
    need_fake();
    /* a server of someone else's on a port of its own choosing */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t other = fork();
    assert_true(other >= 0);
    if (other == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(fake_exe, fake_exe, "--port", "0", "--lifetime", "30", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[64] = "";
    FILE *f = fdopen(fds[0], "r");
    assert_non_null(fgets(line, sizeof line, f));
    int port = 0;
    assert_int_equal(sscanf(line, "PORT %d", &port), 1);
    char cmd[1024], mark[512];
    snprintf(mark, sizeof mark, "%s/taken.ran", tmpdir);
    snprintf(cmd, sizeof cmd, "touch %s; exec %s --port {port} --lifetime 60", mark, fake_exe);
    drift_server_proc_opts o = opts_for(cmd, 5);
    o.port = port;
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_IO);
    char want[128];
    snprintf(want, sizeof want, "port %d is in use already: 127.0.0.1:%d is held by pid %d", port, port, (int)other);
    if (!strstr(err.msg, want)) fail_msg("expected '%s' in: %s", want, err.msg);
    assert_int_not_equal(access(mark, F_OK), 0); /* the command never ran */
    fclose(f);
    reap(other);
}

/* In a child process that is then killed with SIGKILL: starts cmd and
 * reports its port on the pipe. The server's processes must all be gone a
 * few seconds after. marker: an argument of the server's command line. */
static void check_dies_with_starter(const char *cmd, const char *marker) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t starter = fork();
    assert_true(starter >= 0);
    if (starter == 0) {
        close(fds[0]);
        drift_server_proc_opts o = opts_for(cmd, 20);
        drift_server_proc *p = NULL;
        drift_error err = {0};
        int port = drift_server_proc_start(&o, &p, &err) == DRIFT_OK ? drift_server_proc_port(p) : -1;
        if (port < 0) fprintf(stderr, "start failed: %s\n", err.msg);
        ssize_t w = write(fds[1], &port, sizeof port);
        (void)w;
        for (;;) pause();
    }
    close(fds[1]);
    int port = 0;
    assert_int_equal(read(fds[0], &port, sizeof port), (ssize_t)sizeof port);
    close(fds[0]);
    assert_true(port > 0);
    long server = wait_pid_with_arg(marker, 3000);
    assert_true(server > 0);
    assert_true(server != starter);
    kill(starter, SIGKILL);
    while (waitpid(starter, NULL, 0) < 0 && errno == EINTR) {
    }
    if (!gone_within(server, 5000)) {
        kill((pid_t)server, SIGKILL);
        fail_msg("the server (pid %ld, `%s`) outlived kill -9 of the process that started it", server, cmd);
    }
    assert_int_equal(ask(port), 0); /* nothing answers on its port */
}

static void test_dies_with_us(void **state) {
    (void)state;
    need_fake();
    char cmd[2048], marker[64];
    /* not an exec: the server is the grandchild of the shell */
    snprintf(marker, sizeof marker, "kill9-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "sh -c '%s --port {port} --lifetime 60 --model %s; echo'", fake_exe, marker);
    check_dies_with_starter(cmd, marker);
    /* a daemon that left the process group and the session */
    if (access("/usr/bin/setsid", X_OK) != 0) return;
    snprintf(marker, sizeof marker, "setsid-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "setsid -f %s --port {port} --lifetime 60 --model %s; sleep 60", fake_exe, marker);
    check_dies_with_starter(cmd, marker);
    /* and a plain stop of one reaches it too */
    snprintf(marker, sizeof marker, "setsid-stop-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "setsid -f %s --port {port} --lifetime 60 --model %s; sleep 60", fake_exe, marker);
    drift_server_proc_opts o = opts_for(cmd, 20);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_OK);
    long server = wait_pid_with_arg(marker, 3000);
    assert_true(server > 0);
    drift_server_proc_free(p);
    assert_true(gone_within(server, 3000));
}

/* ---- the matrix stage with servers, side by side (jobs 2) ---- */

/* Two configurations d0 and d1 of one target (%s), each with its server
 * command (%s): d0's first, then d1's. */
static const char TWO_SERVERS[] =
    "{\"suites\":[\"builtin:math\"],\"limit\":6,\"decoding\":{\"max_tokens\":8},\"baseline\":\"d0\","
    "\"configs\":["
    "{\"label\":\"d0\",\"target\":\"%s\",\"dims\":{\"model\":\"m\"},\"server\":{\"start\":\"%s\"}},"
    "{\"label\":\"d1\",\"target\":\"%s\",\"dims\":{\"model\":\"m\"},\"server\":{\"start\":\"%s\"}}]}";

static long count_sql(drift_store *st, const char *sql) {
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st), sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    long v = (long)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Every pid in the file is gone (within 3 s). */
static int pids_gone(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long pid;
    int all = 1;
    while (fscanf(f, "%ld", &pid) == 1) all &= gone_within(pid, 3000);
    fclose(f);
    return all;
}

static void test_matrix_jobs(void **state) {
    (void)state;
    need_fake();
    char pidf[512], spec[8192], db[512];
    snprintf(pidf, sizeof pidf, "%s/matrix.pids", tmpdir);
    snprintf(db, sizeof db, "%s/matrix.db", tmpdir);
    /* c0 and c1 share a command, c2 has its own, c3 (embedded-free: a
     * server that dies after 2 replies) fails: jobs 2 runs them side by
     * side and stops every server in the end */
#define SRV_CMD "echo $$ >> %s; exec %s --port {port} --lifetime 60 --model {model}%s"
    char c_shared[1024], c_own[1024], c_die[1024];
    snprintf(c_shared, sizeof c_shared, SRV_CMD, pidf, fake_exe, "");
    snprintf(c_own, sizeof c_own, SRV_CMD, pidf, fake_exe, " --embed-dim 8");
    snprintf(c_die, sizeof c_die, SRV_CMD, pidf, fake_exe, " --die-after 2");
#undef SRV_CMD
    const char *tg = "http://127.0.0.1:{port}/v1?model=m&api=completions";
    snprintf(spec, sizeof spec,
             "{\"suites\":[\"builtin:math\"],\"limit\":5,\"decoding\":{\"max_tokens\":8},\"baseline\":\"c0\","
             "\"configs\":["
             "{\"label\":\"c0\",\"target\":\"%s\",\"dims\":{\"model\":\"m\"},\"server\":{\"start\":\"%s\"}},"
             "{\"label\":\"c1\",\"target\":\"%s\",\"dims\":{\"model\":\"m\"},\"server\":{\"start\":\"%s\"}},"
             "{\"label\":\"c2\",\"target\":\"%s\",\"dims\":{\"model\":\"m\"},\"server\":{\"start\":\"%s\"}}"
             "%s]}",
             tg, c_shared, tg, c_shared, tg, c_own, "");
    drift_matrix_spec *sp = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(spec, strlen(spec), "t.json", &sp, &err), DRIFT_OK);
    assert_true(drift_matrix_server_same(&sp->configs[0].server, &sp->configs[1].server));
    assert_false(drift_matrix_server_same(&sp->configs[0].server, &sp->configs[2].server));
    drift_store *st = NULL;
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    drift_matrix_opts o;
    drift_matrix_opts_default(&o);
    o.jobs = 2;
    drift_matrix_summary sum;
    assert_int_equal(drift_matrix_run(st, sp, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.jobs, 2);
    assert_int_equal(count_sql(st, "SELECT count(*) FROM responses WHERE error IS NULL"), 15);
    assert_int_equal(count_sql(st, "SELECT count(*) FROM runs WHERE finished_at IS NOT NULL"), 3);
    assert_true(pids_gone(pidf));
    drift_matrix_spec_free(sp);

    /* a server dying mid-run, side by side with a healthy one: the
     * matrix fails naming it, no server is left, and a call with a
     * healthy command resumes it */
    snprintf(spec, sizeof spec, TWO_SERVERS, tg, c_own, tg, c_die);
    assert_int_equal(drift_matrix_spec_parse(spec, strlen(spec), "t.json", &sp, &err), DRIFT_OK);
    o.concurrency = 1;
    assert_int_equal(drift_matrix_run(st, sp, &o, &sum, &err), DRIFT_ERR_IO);
    assert_non_null(strstr(err.msg, "configuration 'd1': run stopped"));
    assert_non_null(strstr(err.msg, "exited with status 3"));
    assert_int_equal(sum.failed_in_run, 0);
    assert_true(pids_gone(pidf));
    long stored = count_sql(st, "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label = 'd1'");
    assert_true(stored >= 1 && stored < 6);
    drift_matrix_spec_free(sp);
    snprintf(spec, sizeof spec, TWO_SERVERS, tg, c_own, tg, c_shared);
    assert_int_equal(drift_matrix_spec_parse(spec, strlen(spec), "t.json", &sp, &err), DRIFT_OK);
    assert_int_equal(drift_matrix_run(st, sp, &o, &sum, &err), DRIFT_OK);
    assert_int_equal(count_sql(st, "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id "
                                   "WHERE u.label = 'd1' AND r.error IS NULL"), 6);
    assert_int_equal(count_sql(st, "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label = 'd1'"),
                     6);
    assert_true(pids_gone(pidf));
    drift_matrix_spec_free(sp);
    drift_store_close(st);
}

static void test_bad_opts(void **state) {
    (void)state;
    drift_server_proc_opts o = opts_for("", 1);
    drift_server_proc *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_INVALID);
    o.command = "true";
    o.health_path = "health";
    assert_int_equal(drift_server_proc_start(&o, &p, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "must start with '/'"));
    drift_server_proc_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_port),
        cmocka_unit_test(test_exits_before_healthy),
        cmocka_unit_test(test_bad_binary),
        cmocka_unit_test(test_never_healthy),
        cmocka_unit_test(test_loads_then_serves_then_stops),
        cmocka_unit_test(test_dies_mid_run),
        cmocka_unit_test(test_sigterm_ignored),
        cmocka_unit_test(test_compound_group),
        cmocka_unit_test(test_kill_all),
        cmocka_unit_test(test_cancel_while_starting),
        cmocka_unit_test(test_tail_bounds),
        cmocka_unit_test(test_port_squatter),
        cmocka_unit_test(test_port_taken),
        cmocka_unit_test(test_dies_with_us),
        cmocka_unit_test(test_matrix_jobs),
        cmocka_unit_test(test_bad_opts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
