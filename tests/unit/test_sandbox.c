/* test_sandbox.c - programs that try to escape or exhaust the sandbox.
 *
 * Each runs with short limits (2 s wall) and checks the reported reason,
 * that the test process survives, that no process of the sandbox uid is
 * left and that the temp dirs are gone. The mechanism is probed first;
 * expectations that depend on it (file reads with or without bubblewrap)
 * say so. The removal of stale dirs (group "cleanup", any mechanism) never
 * follows a symlink and removes only real directories of ours: a planted
 * symlink's target and someone else's dir survive it, a dir of ours goes
 * whole, however deep and oddly named. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "sandbox/sbx_internal.h"

static unsigned g_mech;
static char g_mech_name[64];
/* the programs' file name: ours alone (prog-PID.py), so that counting the
 * fork bomb's processes by command line sees no other test's */
static char g_prog[32] = "prog.py";

static int count_sbx_dirs(void) {
    const char *tmp = getenv("TMPDIR");
    DIR *d = opendir(tmp && tmp[0] ? tmp : "/tmp");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "driftbench-sbx-", 15) == 0) n++;
    closedir(d);
    return n;
}

/* Runs `code` as prog.py with the given wall timeout; checks cleanup. */
static void run_py_mem(const char *code, double timeout_s, double cpu_s, long mem_mb, sbx_result *r) {
    const char *const args[] = {"-I", g_prog, NULL};
    sbx_file f = {g_prog, code, strlen(code)};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = "/usr/bin/python3";
    s.args = args;
    s.files = &f;
    s.n_files = 1;
    sbx_limits_default(&s.lim);
    s.lim.timeout_s = timeout_s;
    s.lim.cpu_s = cpu_s;
    if (mem_mb > 0) s.lim.mem_mb = mem_mb;
    s.mech = g_mech;
    int dirs_before = count_sbx_dirs();
    drift_error err = {0};
    drift_status rc = sbx_run(&s, r, &err);
    if (rc != DRIFT_OK) fprintf(stderr, "sbx_run: %s\n", err.msg);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(r->stray, 0);
    assert_true(count_sbx_dirs() <= dirs_before);
    if (g_mech & SBX_MECH_UID) assert_int_equal(sbx_count_uid_procs(r->uid), 0);
}

static void run_py(const char *code, double timeout_s, double cpu_s, sbx_result *r) {
    run_py_mem(code, timeout_s, cpu_s, 0, r);
}

static void print_result(const char *what, const sbx_result *r) {
    char tail[200];
    sbx_stream_tail(&r->err, tail, sizeof tail);
    fprintf(stderr, "[%s] exited=%d code=%d sig=%d timeout=%d wall=%.0f ms out=%zu B: %.300s| err tail: %s\n",
            what, r->exited, r->exit_code, r->term_signal, r->timed_out, r->wall_ms, (size_t)r->out.total,
            r->out.total < 1000 ? r->out.head : "", tail);
}

static int setup(void **state) {
    (void)state;
    drift_error err = {0};
    drift_status rc = sbx_probe("/usr/bin/python3", 0, &g_mech, g_mech_name, sizeof g_mech_name, &err);
    if (rc != DRIFT_OK) {
        fprintf(stderr, "no sandbox here: %s\n", err.msg);
        return -1;
    }
    fprintf(stderr, "sandbox mechanism: %s\n", g_mech_name);
    return 0;
}

static void test_probe_and_trivial(void **state) {
    (void)state;
    assert_true(g_mech != 0);
    /* the probe is cached and stable */
    unsigned m2;
    char n2[64];
    assert_int_equal(sbx_probe("/usr/bin/python3", 0, &m2, n2, sizeof n2, NULL), DRIFT_OK);
    assert_int_equal(m2, g_mech);
    assert_string_equal(n2, g_mech_name);
    sbx_result r;
    run_py("print('hello', 6 * 7)\n", 5, 5, &r);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0);
    assert_string_equal(r.out.head, "hello 42\n");
    assert_false(r.timed_out);
    sbx_result_free(&r);
}

static void test_bad_interpreter(void **state) {
    (void)state;
    unsigned m;
    char n[64];
    drift_error err = {0};
    assert_int_equal(sbx_probe("/nonexistent/python9", 0, &m, n, sizeof n, &err), DRIFT_ERR_SANDBOX);
    assert_non_null(strstr(err.msg, "/nonexistent/python9"));
    assert_int_equal(sbx_probe("python3", 0, &m, n, sizeof n, &err), DRIFT_ERR_INVALID);
    /* exec failure inside a run is a sandbox error, not a program result */
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = "/nonexistent/python9";
    sbx_limits_default(&s.lim);
    s.mech = g_mech & ~(unsigned)SBX_MECH_BWRAP; /* bwrap would report it on stderr instead */
    sbx_result r;
    assert_int_equal(sbx_run(&s, &r, &err), DRIFT_ERR_SANDBOX);
    assert_non_null(strstr(err.msg, "cannot start"));
    sbx_result_free(&r);
}

static void test_network_blocked(void **state) {
    (void)state;
    /* a real listener on 127.0.0.1: without isolation the connect succeeds */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(ls >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(ls, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    char code[1024];
    snprintf(code, sizeof code,
             "import socket\n"
             "for fam, addr in ((socket.AF_INET, ('127.0.0.1', %d)), (socket.AF_INET6, ('::1', %d))):\n"
             "    try:\n"
             "        s = socket.socket(fam, socket.SOCK_STREAM)\n"
             "        s.settimeout(1)\n"
             "        s.connect(addr)\n"
             "        print('CONNECTED')\n"
             "    except OSError as e:\n"
             "        print('BLOCKED', type(e).__name__)\n"
             "try:\n"
             "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))\n"
             "    print('SENT')\n"
             "except OSError as e:\n"
             "    print('BLOCKED', type(e).__name__)\n"
             "a, b = socket.socketpair()\n"
             "a.send(b'ok'); print('UNIX', b.recv(2).decode())\n",
             ntohs(a.sin_port), ntohs(a.sin_port));
    sbx_result r;
    run_py(code, 5, 5, &r);
    print_result("socket", &r);
    assert_true(r.exited);
    assert_null(strstr(r.out.head, "CONNECTED"));
    assert_null(strstr(r.out.head, "SENT"));
    assert_non_null(strstr(r.out.head, "BLOCKED PermissionError"));
    assert_non_null(strstr(r.out.head, "UNIX ok")); /* AF_UNIX still works */
    sbx_result_free(&r);
    /* nobody reached the listener */
    int fl = fcntl(ls, F_GETFL);
    fcntl(ls, F_SETFL, fl | O_NONBLOCK);
    int c = accept(ls, NULL, NULL);
    assert_true(c < 0);
    close(ls);
}

static void test_read_outside(void **state) {
    (void)state;
    /* A secret outside the sandbox dir. With bubblewrap it is not even
     * mounted, so world-readable is fine; with the uid alone only files the
     * world cannot read are protected, so it is made 0600. */
    char path[] = "/tmp/drift-secret-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "TOPSECRET", 9), 9);
    fchmod(fd, (g_mech & SBX_MECH_BWRAP) ? 0644 : 0600);
    close(fd);
    char code[1024];
    snprintf(code, sizeof code,
             "for p in (%s'%s', '/etc/shadow', '/root/.bashrc', '/proc/1/environ'):\n"
             "    try:\n"
             "        print('READ', p, open(p).read()[:20].replace('\\n', ' '))\n"
             "    except OSError as e:\n"
             "        print('DENIED', p, type(e).__name__)\n",
             "", path);
    sbx_result r;
    run_py(code, 5, 5, &r);
    print_result("read", &r);
    unlink(path);
    assert_true(r.exited);
    assert_null(strstr(r.out.head, "TOPSECRET"));
    assert_null(strstr(r.out.head, "READ /etc/shadow"));
    assert_null(strstr(r.out.head, "READ /root"));
    assert_non_null(strstr(r.out.head, "DENIED /etc/shadow"));
    sbx_result_free(&r);
}

static void test_write_outside(void **state) {
    (void)state;
    char dir[] = "/tmp/drift-wdir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    chmod(dir, 0755);
    char code[1024];
    snprintf(code, sizeof code,
             "import os\n"
             "for p in ('%s/pwned', '/usr/pwned', '/etc/pwned', '/pwned'):\n"
             "    try:\n"
             "        with open(p, 'w') as f: f.write('x')\n"
             "        print('WROTE', p)\n"
             "    except OSError as e:\n"
             "        print('DENIED', p, type(e).__name__)\n"
             "with open('scratch.txt', 'w') as f: f.write('own dir is writable')\n"
             "print('OWN', open('scratch.txt').read())\n",
             dir);
    sbx_result r;
    run_py(code, 5, 5, &r);
    print_result("write", &r);
    char p[256];
    snprintf(p, sizeof p, "%s/pwned", dir);
    struct stat sb;
    assert_int_not_equal(stat(p, &sb), 0);
    assert_int_not_equal(stat("/usr/pwned", &sb), 0);
    assert_int_not_equal(stat("/etc/pwned", &sb), 0);
    assert_int_not_equal(stat("/pwned", &sb), 0);
    rmdir(dir);
    assert_true(r.exited);
    assert_non_null(strstr(r.out.head, "OWN own dir is writable"));
    assert_null(strstr(r.out.head, "WROTE /usr"));
    sbx_result_free(&r);
}

static int count_all_procs(void) {
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9') n++;
    if (d) closedir(d);
    return n;
}

/* Live processes whose command line holds `word` as one of its arguments. */
static int count_cmdline_procs(const char *word) {
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    char path[64], buf[4096];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        for (ssize_t i = 0; i < k;) {
            if (strcmp(buf + i, word) == 0) {
                n++;
                break;
            }
            i += (ssize_t)strnlen(buf + i, (size_t)(k - i)) + 1;
        }
    }
    if (d) closedir(d);
    return n;
}

static void test_fork_bomb(void **state) {
    (void)state;
    int before = count_all_procs();
    sbx_result r;
    run_py("import os\n"
           "n = 0\n"
           "while True:\n"
           "    try:\n"
           "        os.fork(); n += 1\n"
           "    except OSError:\n"
           "        pass\n",
           2, 2, &r);
    print_result("fork bomb", &r);
    assert_true(r.timed_out || r.term_signal);
    assert_false(r.exited);
    assert_true(r.wall_ms < 6000);
    int after = count_all_procs();
    /* Other work on the machine moves the total, so the check is on the
     * bomb's own processes: none may be left (any mode, uid or not). */
    int left = count_cmdline_procs(g_prog);
    fprintf(stderr, "processes on the machine: %d before, %d after; fork bomb processes left: %d\n", before, after,
            left);
    assert_int_equal(left, 0);
    sbx_result_free(&r);
}

static void test_memory_10gb(void **state) {
    (void)state;
    sbx_result r;
    run_py("x = bytearray(10 * 1024 ** 3)\nprint('ALLOCATED')\n", 5, 5, &r);
    print_result("10 GB", &r);
    assert_null(strstr(r.out.head, "ALLOCATED"));
    /* MemoryError under RLIMIT_AS (exit 1), or killed */
    char tail[512];
    sbx_stream_tail(&r.err, tail, sizeof tail);
    assert_true((r.exited && r.exit_code == 1 && strstr(tail, "MemoryError")) || r.term_signal);
    sbx_result_free(&r);
}

/* RLIMIT_AS is per process: 4 processes x 200 MB each stay under a 256 MB
 * RLIMIT_AS. The run's memory cgroup (when there is one: 256 + 2 x 64 + 64
 * MB for the tree) does not hold all four, so the OOM killer ends some (the
 * kernel takes seconds per OOM kill here; the wall timeout may come first).
 * Without a cgroup the 800 MB fit on this machine. */
static void test_memory_many_processes(void **state) {
    (void)state;
    sbx_result r;
    run_py_mem("import os, time\n"
               "kids = []\n"
               "for i in range(4):\n"
               "    pid = os.fork()\n"
               "    if pid == 0:\n"
               "        try:\n"
               "            b = bytearray(200 * 1024 * 1024)\n"
               "            for j in range(0, len(b), 4096): b[j] = 1\n"
               "            time.sleep(0.5)\n"
               "        except MemoryError:\n"
               "            os._exit(3)\n"
               "        os._exit(0)\n"
               "    kids.append(pid)\n"
               "res = [os.waitpid(p, 0)[1] for p in kids]\n"
               "print('KILLED', sum(1 for s in res if os.WIFSIGNALED(s)), 'OK', sum(1 for s in res if s == 0))\n",
               6, 6, 256, &r);
    print_result("4 x 200 MB", &r);
    fprintf(stderr, "cgroup %d, oom kills %d\n", r.cgroup, r.oom_kills);
    if (r.cgroup) {
        assert_true(r.oom_kills > 0 || r.timed_out);
        assert_null(strstr(r.out.head, "OK 4"));
    }
    sbx_result_free(&r);
}

static void test_infinite_loop_cpu(void **state) {
    (void)state;
    sbx_result r;
    run_py("while True:\n    pass\n", 8, 1, &r); /* CPU limit (1 s) before the wall (8 s) */
    print_result("loop/cpu", &r);
    /* not timed out: the CPU limit ended it (on a loaded machine 1 s of
     * CPU may take several seconds of wall time) */
    assert_false(r.timed_out);
    assert_true(r.term_signal == SIGXCPU || r.term_signal == SIGKILL);
    sbx_result_free(&r);
    run_py("while True:\n    pass\n", 1.5, 10, &r); /* wall first */
    print_result("loop/wall", &r);
    assert_true(r.timed_out);
    assert_true(r.wall_ms >= 1400 && r.wall_ms < 3000);
    /* the CPU time of the tree is recorded (it spun; a loaded machine may
     * have given it less than the wall time, never nothing) */
    fprintf(stderr, "loop/wall cpu %.0f ms\n", r.cpu_ms);
    assert_true(r.cpu_ms > 200 && r.cpu_ms <= r.wall_ms + 100);
    sbx_result_free(&r);
}

static void test_sleep_timeout(void **state) {
    (void)state;
    sbx_result r;
    run_py("import time\ntime.sleep(30)\nprint('WOKE')\n", 2, 2, &r);
    print_result("sleep", &r);
    assert_true(r.timed_out);
    assert_int_equal(r.term_signal, SIGKILL);
    assert_null(strstr(r.out.head, "WOKE"));
    assert_true(r.wall_ms >= 1950 && r.wall_ms < 2600);
    fprintf(stderr, "sleep cpu %.0f ms\n", r.cpu_ms);
    assert_true(r.cpu_ms < 0.5 * r.wall_ms); /* what code.c tells from a spinning loop */
    sbx_result_free(&r);
}

static void test_kill_parent(void **state) {
    (void)state;
    char code[1024];
    snprintf(code, sizeof code,
             "import os, signal\n"
             "for pid in (os.getppid(), %d, -1):\n"
             "    try:\n"
             "        os.kill(pid, signal.SIGKILL); print('SENT', pid)\n"
             "    except OSError as e:\n"
             "        print('DENIED', pid, type(e).__name__)\n"
             "try:\n"
             "    os.killpg(os.getpgid(%d), signal.SIGKILL); print('SENTPG')\n"
             "except OSError as e:\n"
             "    print('DENIED pg', type(e).__name__)\n"
             "print('ALIVE')\n",
             (int)getpid(), (int)getpid());
    sbx_result r;
    run_py(code, 5, 5, &r);
    print_result("kill parent", &r);
    /* we are still here; the kills of our pid, -1 and our group failed */
    char want[64];
    snprintf(want, sizeof want, "SENT %d", (int)getpid());
    assert_null(strstr(r.out.head, want));
    assert_null(strstr(r.out.head, "SENT -1"));
    assert_null(strstr(r.out.head, "SENTPG"));
    sbx_result_free(&r);
}

static void test_print_1gb(void **state) {
    (void)state;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    sbx_result r;
    run_py("import sys\n"
           "b = b'x' * (1 << 20)\n"
           "for _ in range(1024):\n"
           "    sys.stdout.buffer.write(b)\n"
           "sys.stdout.flush()\n"
           "sys.stderr.write('DONE')\n",
           120, 60, &r); /* what is tested is the streaming, not the speed: generous limits for loaded machines */
    getrusage(RUSAGE_SELF, &ru1);
    print_result("print 1 GB", &r);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0);
    assert_true(r.out.total == (size_t)1 << 30);
    assert_int_equal(r.out.head_len, 64 * 1024);
    char tail[8];
    sbx_stream_tail(&r.out, tail, sizeof tail);
    assert_string_equal(tail, "xxxxxxx");
    sbx_stream_tail(&r.err, tail, sizeof tail);
    assert_string_equal(tail, "DONE");
    /* our memory did not grow by the output */
    assert_true(ru1.ru_maxrss - ru0.ru_maxrss < 64 * 1024); /* KiB */
    sbx_result_free(&r);
}

static void test_background_child(void **state) {
    (void)state;
    /* a daemon left behind must be killed and reaped, and must not hold the
     * run open until it ends */
    sbx_result r;
    run_py("import os, time\n"
           "if os.fork() == 0:\n"
           "    os.close(1); os.close(2)\n"
           "    time.sleep(60)\n"
           "print('PARENT DONE')\n",
           10, 10, &r);
    print_result("background", &r);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0);
    assert_true(r.wall_ms < 3000);
    sbx_result_free(&r);
}

static void test_namespace_escape(void **state) {
    (void)state;
    sbx_result r;
    run_py("import os, ctypes\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "print('unshare', libc.unshare(0x10000000))\n" /* CLONE_NEWUSER */
           "print('ptrace', libc.ptrace(16, 1, 0, 0))\n"  /* PTRACE_ATTACH */
           "print('setsid', libc.setsid())\n"
           "print('END')\n",
           5, 5, &r);
    print_result("namespaces", &r);
    assert_true(r.exited);
    assert_non_null(strstr(r.out.head, "unshare -1"));
    assert_non_null(strstr(r.out.head, "ptrace -1"));
    assert_non_null(strstr(r.out.head, "setsid -1"));
    sbx_result_free(&r);
}

static void *thread_run(void *arg) {
    long i = (long)arg;
    char code[128], want[64];
    snprintf(code, sizeof code, "import time\ntime.sleep(0.2)\nprint('thread %ld')\n", i);
    snprintf(want, sizeof want, "thread %ld\n", i);
    sbx_result r;
    const char *const args[] = {"-I", g_prog, NULL};
    sbx_file f = {g_prog, code, strlen(code)};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = "/usr/bin/python3";
    s.args = args;
    s.files = &f;
    s.n_files = 1;
    sbx_limits_default(&s.lim);
    s.mech = g_mech;
    if (sbx_run(&s, &r, NULL) != DRIFT_OK) return (void *)1;
    long bad = !(r.exited && r.exit_code == 0 && strcmp(r.out.head, want) == 0);
    sbx_result_free(&r);
    return (void *)bad;
}

static void test_parallel(void **state) {
    (void)state;
    pthread_t t[6];
    for (long i = 0; i < 6; i++) assert_int_equal(pthread_create(&t[i], NULL, thread_run, (void *)i), 0);
    for (int i = 0; i < 6; i++) {
        void *bad;
        pthread_join(t[i], &bad);
        assert_null(bad);
    }
}

static void test_stream_tail(void **state) {
    (void)state;
    sbx_stream st;
    memset(&st, 0, sizeof st);
    char head[9];
    st.head = head;
    /* add 10000 bytes "0123456789..." in odd chunks with an 8-byte head cap */
    char buf[10000];
    for (int i = 0; i < 10000; i++) buf[i] = (char)('0' + i % 10);
    size_t off = 0, step = 1;
    while (off < sizeof buf) {
        size_t k = step < sizeof buf - off ? step : sizeof buf - off;
        sbx_stream_add(&st, buf + off, k, 8);
        off += k;
        step = step * 3 + 1;
    }
    assert_int_equal(st.total, 10000);
    assert_string_equal(st.head, "01234567");
    char tail[6];
    sbx_stream_tail(&st, tail, sizeof tail);
    assert_string_equal(tail, "56789");
    char big[5000];
    size_t k = sbx_stream_tail(&st, big, sizeof big);
    assert_int_equal(k, 4096);
    assert_memory_equal(big, buf + 10000 - 4096, 4096);
}

/* The same attacks without bubblewrap: seccomp + private uid (root only). */

/* Without a memory cgroup the mounts are the limit: every writable one is a
 * capped tmpfs, the root and /dev are read-only. The program writes 10 MB
 * files into /dev/shm, /tmp and its own dir until refused (192 MB asked of
 * each) and tries the root and /dev. */
static void test_writable_mounts(void **state) {
    (void)state;
    if (!(g_mech & SBX_MECH_BWRAP)) skip();
    sbx_result r;
    run_py("import os\n"
           "for p in ('/pwned', '/dev/pwned', '/usr/pwned'):\n"
           "    try:\n"
           "        open(p, 'w').write('x'); print('WROTE', p)\n"
           "    except OSError as e:\n"
           "        print('DENIED', p, e.errno)\n"
           "blk = b'x' * (10 << 20)\n"
           "for d in ('/dev/shm', '/tmp', '.'):\n"
           "    total = 0\n"
           "    for i in range(19):\n"
           "        try:\n"
           "            with open('%s/f%d' % (d, i), 'wb') as f: f.write(blk)\n"
           "            total += len(blk)\n"
           "        except OSError as e:\n"
           "            break\n"
           "    print('TOTAL', d, total >> 20)\n",
           20, 20, &r);
    print_result("mounts", &r);
    assert_true(r.exited);
    assert_non_null(strstr(r.out.head, "DENIED /pwned"));
    assert_non_null(strstr(r.out.head, "DENIED /dev/pwned"));
    assert_non_null(strstr(r.out.head, "DENIED /usr/pwned"));
    static const char *const dirs[] = {"/dev/shm", "/tmp", "."};
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "TOTAL %s ", dirs[i]);
        const char *t = strstr(r.out.head, key);
        assert_non_null(t);
        long mb = strtol(t + strlen(key), NULL, 10);
        fprintf(stderr, "%s took %ld MB (cap %d)\n", dirs[i], mb, 64);
        assert_true(mb <= 64);
    }
    sbx_result_free(&r);
}

/* The fallback mode (no bubblewrap) closes what a private uid alone leaves
 * open: its files in /tmp, /var/tmp, /dev/shm are removed after the run (or,
 * with Landlock, never written), SysV IPC and socket() are denied (so host
 * processes' abstract unix sockets cannot be reached), there is no
 * controlling terminal, and with Landlock world-readable files (a store) and
 * other processes' command lines cannot be read. */
static void test_fallback_leaks(void **state) {
    (void)state;
    if (g_mech & SBX_MECH_BWRAP) skip();
    /* a host process's abstract unix socket */
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(ls >= 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    char name[64];
    snprintf(name, sizeof name, "drift-test-abstract-%d", (int)getpid());
    memcpy(sa.sun_path + 1, name, strlen(name));
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sl), 0);
    assert_int_equal(listen(ls, 4), 0);
    /* a world-readable "store" */
    char store[] = "/tmp/drift-test-store-XXXXXX";
    int fd = mkstemp(store);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "STORESECRET", 11), 11);
    fchmod(fd, 0644);
    close(fd);
    char code[4096];
    snprintf(code, sizeof code,
             "import os, socket, ctypes, sys\n"
             "tag = 'drift-leak-%d'\n"
             "for p in ('/tmp/' + tag, '/var/tmp/' + tag, '/dev/shm/' + tag):\n"
             "    try:\n"
             "        open(p, 'w').write('x'); print('WROTE', p)\n"
             "    except OSError as e:\n"
             "        print('NOWRITE', p, e.errno)\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "print('SHMGET', libc.shmget(0, 4096, 0o1000 | 0o666), ctypes.get_errno())\n"
             "try:\n"
             "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
             "    s.connect('\\0%s'); print('CONNECTED')\n"
             "except OSError as e:\n"
             "    print('NOSOCK', e.errno)\n"
             "try:\n"
             "    open('/dev/tty', 'w').write('x'); print('TTY')\n"
             "except OSError as e:\n"
             "    print('NOTTY', e.errno)\n"
             "for p in ('%s', '/proc/1/cmdline', '/proc/%d/cmdline'):\n"
             "    try:\n"
             "        print('READ', p, open(p, 'rb').read()[:30])\n"
             "    except OSError as e:\n"
             "        print('NOREAD', p, e.errno)\n",
             (int)getpid(), name, store, (int)getpid());
    sbx_result r;
    run_py(code, 10, 10, &r);
    print_result("fallback leaks", &r);
    close(ls);
    unlink(store);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0);
    /* nothing of the run's uid is left in the shared dirs */
    static const char *const dirs[] = {"/tmp", "/var/tmp", "/dev/shm"};
    for (int i = 0; i < 3; i++) {
        char p[128];
        struct stat sb;
        snprintf(p, sizeof p, "%s/drift-leak-%d", dirs[i], (int)getpid());
        assert_int_not_equal(stat(p, &sb), 0);
    }
    assert_non_null(strstr(r.out.head, "SHMGET -1"));
    assert_non_null(strstr(r.out.head, "NOSOCK"));
    assert_null(strstr(r.out.head, "CONNECTED"));
    assert_non_null(strstr(r.out.head, "NOTTY"));
    if (g_mech & SBX_MECH_LANDLOCK) {
        assert_null(strstr(r.out.head, "WROTE"));
        assert_null(strstr(r.out.head, "STORESECRET"));
        assert_null(strstr(r.out.head, "\nREAD /proc"));
    }
    sbx_result_free(&r);
}

/* A scorer killed in the middle of a run leaves its sandbox dir (and run
 * cgroup) behind; the next start removes them by their dead owner's pid. */
static void test_stale_after_kill(void **state) {
    (void)state;
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        sbx_result r;
        static const char *const args[] = {"-I", "-c", "import time; time.sleep(60)", NULL};
        sbx_spec s;
        memset(&s, 0, sizeof s);
        s.python = "/usr/bin/python3";
        s.args = args;
        sbx_limits_default(&s.lim);
        s.lim.timeout_s = 60;
        s.mech = g_mech;
        sbx_run(&s, &r, NULL);
        _exit(0);
    }
    char prefix[64];
    snprintf(prefix, sizeof prefix, "driftbench-sbx-%d-", (int)kid);
    const char *tmp = getenv("TMPDIR");
    int seen = 0;
    for (int t = 0; t < 500 && !seen; t++) {
        DIR *d = opendir(tmp && tmp[0] ? tmp : "/tmp");
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) seen = 1;
        if (d) closedir(d);
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    assert_true(seen);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    nanosleep(&ts, NULL);
    int removed = sbx_clean_stale();
    fprintf(stderr, "stale entries removed: %d\n", removed);
    assert_true(removed >= 1);
    DIR *d = opendir(tmp && tmp[0] ? tmp : "/tmp");
    struct dirent *e;
    int left = 0;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) left++;
    if (d) closedir(d);
    assert_int_equal(left, 0);
    if (g_mech & SBX_MECH_UID) {
        /* the sleeping program went with its supervisor */
        for (int t = 0; t < 200 && sbx_count_uid_procs(sbx_uid_base()) > 0; t++) nanosleep(&ts, NULL);
    }
}

/* ---- stale dirs: removed through descriptors, ours only ---- */

static void put_file(const char *dir, const char *name, const char *text) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) fail_msg("create %s: %s", p, strerror(errno));
    assert_true(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static int exists_nofollow(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* A PID that is surely dead: a child we reaped. */
static pid_t dead_pid(void) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

/* Path of a stale-looking entry TMPDIR/driftbench-sbx-PID-TAG. */
static void stale_path(char *out, size_t cap, pid_t pid, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/driftbench-sbx-%d-%s", tmp && tmp[0] ? tmp : "/tmp", (int)pid, tag);
}

/* A tree of depth levels under dir, with odd names at every level. */
static void make_deep_tree(const char *dir, int depth, const char *target) {
    static const char *const odd[] = {"a\nb", " lead", "-rf", "...", "*", "\xff\xfe", "tab\tname", "x\\y"};
    char cur[8192];
    snprintf(cur, sizeof cur, "%s", dir);
    for (int d = 0; d < depth; d++) {
        for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) put_file(cur, odd[i], "x");
        char link[8400];
        snprintf(link, sizeof link, "%s/link-to-target", cur);
        assert_int_equal(symlink(target, link), 0); /* removed as a link, never followed */
        size_t n = strlen(cur);
        if (n + 8 >= sizeof cur) break;
        snprintf(cur + n, sizeof cur - n, "/d%d", d % 10);
        assert_int_equal(mkdir(cur, 0755), 0);
    }
    char fifo[8400];
    snprintf(fifo, sizeof fifo, "%s/fifo", cur);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    char longname[300];
    memset(longname, 'n', 255);
    longname[255] = '\0';
    put_file(cur, longname, "x");
}

static void test_stale_dirs_hygiene(void **state) {
    (void)state;
    /* a directory outside TMPDIR that a planted symlink points at */
    char target[] = "/tmp/drift-test-target-XXXXXX";
    assert_non_null(mkdtemp(target));
    put_file(target, "keep", "precious");
    char keep[64];
    snprintf(keep, sizeof keep, "%s/keep", target);

    pid_t dead = dead_pid();
    char link[512], ours[512], other[512], sandbox_uid[512], other_range[512], live[512];
    /* 1. a stale-looking name that is a symlink to the target dir */
    stale_path(link, sizeof link, dead, "link");
    assert_int_equal(symlink(target, link), 0);
    /* 2. a real stale dir of ours: deep (more levels than the remover holds descriptors for), odd names,
     *    symlinks to the target inside */
    stale_path(ours, sizeof ours, dead, "ours");
    assert_int_equal(mkdir(ours, 0700), 0);
    make_deep_tree(ours, 45, target);
    /* 3. a stale dir of ours whose pid is alive (our own): not stale */
    stale_path(live, sizeof live, getpid(), "live");
    assert_int_equal(mkdir(live, 0700), 0);
    int root = geteuid() == 0;
    if (root) {
        /* 4. someone else's dir with the stale name: left alone */
        stale_path(other, sizeof other, dead, "other");
        assert_int_equal(mkdir(other, 0755), 0);
        put_file(other, "theirs", "x");
        assert_int_equal(chown(other, 12345, 12345), 0);
        /* 5. a dir the dead scorer gave its run's private uid (fallback mode): removed */
        stale_path(sandbox_uid, sizeof sandbox_uid, dead, "uid");
        assert_int_equal(mkdir(sandbox_uid, 0700), 0);
        put_file(sandbox_uid, "prog.py", "x");
        assert_int_equal(chown(sandbox_uid, sbx_uid_base_of(dead) + 5, sbx_uid_base_of(dead) + 5), 0);
        /* 6. one owned by another PID's private uid: left alone */
        stale_path(other_range, sizeof other_range, dead, "range");
        assert_int_equal(mkdir(other_range, 0700), 0);
        assert_int_equal(chown(other_range, sbx_uid_base_of(dead + 1) + 5, 0), 0);
    } else {
        print_message("not root: the other-uid cases are skipped\n");
    }

    int removed = sbx_clean_stale();
    fprintf(stderr, "stale entries removed: %d\n", removed);
    assert_true(removed >= (root ? 2 : 1));
    /* the symlink was not followed: the target and its file survive, and so does the link */
    assert_true(exists_nofollow(keep));
    assert_true(exists_nofollow(link));
    /* ours went whole */
    assert_false(exists_nofollow(ours));
    assert_true(exists_nofollow(live));
    if (root) {
        char theirs[600];
        snprintf(theirs, sizeof theirs, "%s/theirs", other);
        assert_true(exists_nofollow(theirs));
        assert_false(exists_nofollow(sandbox_uid));
        assert_true(exists_nofollow(other_range));
        rmdir(other_range);
        unlink(theirs);
        rmdir(other);
    }
    /* a run's own dir whose name became a symlink: the link goes, never its target */
    char own[512];
    stale_path(own, sizeof own, getpid(), "own");
    assert_int_equal(symlink(target, own), 0);
    sbx_rm_tree(own, getuid());
    assert_false(exists_nofollow(own));
    assert_true(exists_nofollow(keep));
    /* and a real one goes whole */
    assert_int_equal(mkdir(own, 0700), 0);
    make_deep_tree(own, 3, target);
    sbx_rm_tree(own, getuid());
    assert_false(exists_nofollow(own));
    assert_true(exists_nofollow(keep));

    unlink(link);
    rmdir(live);
    unlink(keep);
    rmdir(target);
}

/* A caller that gives up (Ctrl-C in the CLI) gets the run killed at once. */
static double g_cancel_at;
static int cancel_after(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 >= g_cancel_at;
}

static void test_cancel(void **state) {
    (void)state;
    static const char *const args[] = {"-I", "-c", "import time; time.sleep(30)", NULL};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = "/usr/bin/python3";
    s.args = args;
    sbx_limits_default(&s.lim);
    s.lim.timeout_s = 30;
    s.mech = g_mech;
    s.cancel = cancel_after;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double t0 = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    g_cancel_at = t0 + 300;
    sbx_result r;
    drift_error err = {0};
    int dirs_before = count_sbx_dirs();
    assert_int_equal(sbx_run(&s, &r, &err), DRIFT_ERR_CANCELLED);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double took = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 - t0;
    fprintf(stderr, "cancelled after %.0f ms\n", took);
    assert_true(took < 2000);
    assert_true(count_sbx_dirs() <= dirs_before);
    if (g_mech & SBX_MECH_UID) assert_int_equal(sbx_count_uid_procs(r.uid), 0);
    sbx_result_free(&r);
}

/* RLIMIT_NPROC counts threads: the count the limit is sized from must too. */
static void *idle_thread(void *arg) {
    pthread_barrier_t *b = arg;
    pthread_barrier_wait(b);
    pthread_barrier_wait(b);
    return NULL;
}

/* 20 idle threads plus the thread that made them, under the calling uid. */
static int spawn_threads_and_wait(int ready_fd, int go_fd) {
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 21);
    pthread_t t[20];
    for (int i = 0; i < 20; i++)
        if (pthread_create(&t[i], NULL, idle_thread, &b) != 0) return -1;
    pthread_barrier_wait(&b);
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1) return -1;
    if (read(go_fd, &c, 1) < 0) return -1;
    pthread_barrier_wait(&b);
    for (int i = 0; i < 20; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&b);
    return 0;
}

static void test_count_tasks(void **state) {
    (void)state;
    int procs0 = sbx_count_uid_procs(getuid()), tasks0 = sbx_count_uid_tasks(getuid());
    assert_true(tasks0 >= procs0 && procs0 >= 1);
    if (geteuid() == 0) {
        /* A uid below the sandbox ranges that no other process uses: the
         * counts are exact, whatever else the machine (ctest -j) is running.
         * Counting root's tasks raced with other tests' threads exiting. */
        uid_t uid = (uid_t)(0x5f000000u + (uint32_t)getpid() % 65536u);
        assert_int_equal(sbx_count_uid_procs(uid), 0);
        int ready[2], go[2];
        assert_int_equal(pipe(ready), 0);
        assert_int_equal(pipe(go), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(3);
            _exit(spawn_threads_and_wait(ready[1], go[0]) == 0 ? 0 : 4);
        }
        close(ready[1]);
        close(go[0]);
        char c;
        ssize_t got = read(ready[0], &c, 1);
        int procs1 = sbx_count_uid_procs(uid), tasks1 = sbx_count_uid_tasks(uid);
        close(go[1]);
        close(ready[0]);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        fprintf(stderr, "uid %u: processes %d, tasks %d\n", (unsigned)uid, procs1, tasks1);
        assert_int_equal(got, 1);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(procs1, 1);
        assert_int_equal(tasks1, 21);
        return;
    }
    /* Not root: our own uid, where other processes may come and go; a few
     * tries, each of which must see our 20 threads unless something else
     * of the uid exited in the same instant. */
    int best = -1000;
    for (int attempt = 0; attempt < 5 && best < 20 - 2; attempt++) {
        int ready[2], go[2];
        assert_int_equal(pipe(ready), 0);
        assert_int_equal(pipe(go), 0);
        int before = sbx_count_uid_tasks(getuid());
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            _exit(spawn_threads_and_wait(ready[1], go[0]) == 0 ? 0 : 4);
        }
        close(ready[1]);
        close(go[0]);
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        int after = sbx_count_uid_tasks(getuid());
        close(go[1]);
        close(ready[0]);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (after - before - 1 > best) best = after - before - 1; /* the child's main thread */
        fprintf(stderr, "tasks %d -> %d\n", before, after);
    }
    assert_true(best >= 20 - 2);
}

static int setup_nobwrap(void **state) {
    (void)state;
    if (setup(state) != 0) return -1;
    if (geteuid() != 0) {
        fprintf(stderr, "not root: no seccomp+uid group\n");
        return -1;
    }
    g_mech = (g_mech & SBX_MECH_CGROUP) | SBX_MECH_SECCOMP | SBX_MECH_UID;
    fprintf(stderr, "sandbox mechanism forced to seccomp+uid\n");
    return 0;
}

/* The fallback as the probe picks it where the kernel has Landlock. */
static int setup_landlock(void **state) {
    if (setup_nobwrap(state) != 0) return -1;
    long abi = syscall(444, NULL, 0, 1u);
    if (abi < 1) {
        fprintf(stderr, "no Landlock here: group skipped\n");
        return -1;
    }
    g_mech |= SBX_MECH_LANDLOCK;
    fprintf(stderr, "sandbox mechanism forced to seccomp+uid+landlock (ABI %ld)\n", abi);
    return 0;
}

/* bubblewrap without a cgroup: what a non-root user or a container has. */
static int setup_nocgroup(void **state) {
    if (setup(state) != 0) return -1;
    if (!(g_mech & SBX_MECH_BWRAP)) return -1;
    g_mech &= ~(unsigned)SBX_MECH_CGROUP;
    fprintf(stderr, "sandbox mechanism forced to bubblewrap without a cgroup\n");
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_tail),
        cmocka_unit_test(test_probe_and_trivial),
        cmocka_unit_test(test_bad_interpreter),
        cmocka_unit_test(test_network_blocked),
        cmocka_unit_test(test_read_outside),
        cmocka_unit_test(test_write_outside),
        cmocka_unit_test(test_fork_bomb),
        cmocka_unit_test(test_memory_10gb),
        cmocka_unit_test(test_memory_many_processes),
        cmocka_unit_test(test_infinite_loop_cpu),
        cmocka_unit_test(test_sleep_timeout),
        cmocka_unit_test(test_kill_parent),
        cmocka_unit_test(test_print_1gb),
        cmocka_unit_test(test_background_child),
        cmocka_unit_test(test_namespace_escape),
        cmocka_unit_test(test_parallel),
        cmocka_unit_test(test_writable_mounts),
        cmocka_unit_test(test_stale_after_kill),
        cmocka_unit_test(test_count_tasks),
        cmocka_unit_test(test_cancel),
    };
    const struct CMUnitTest nocgroup[] = {
        cmocka_unit_test(test_writable_mounts),
        cmocka_unit_test(test_fork_bomb),
        cmocka_unit_test(test_memory_10gb),
        cmocka_unit_test(test_print_1gb),
    };
    const struct CMUnitTest nobwrap[] = {
        cmocka_unit_test(test_network_blocked),
        cmocka_unit_test(test_read_outside),
        cmocka_unit_test(test_write_outside),
        cmocka_unit_test(test_fork_bomb),
        cmocka_unit_test(test_memory_10gb),
        cmocka_unit_test(test_kill_parent),
        cmocka_unit_test(test_background_child),
        cmocka_unit_test(test_namespace_escape),
        cmocka_unit_test(test_fallback_leaks),
        cmocka_unit_test(test_stale_after_kill),
    };
    /* a private TMPDIR, so that the count of sandbox dirs left behind is
     * ours alone (other tests running beside this one make their own) */
    char tmp_template[] = "/tmp/drift-test-sandbox-XXXXXX";
    char *tmp = mkdtemp(tmp_template);
    if (!tmp || chmod(tmp, 0755) || setenv("TMPDIR", tmp, 1)) {
        fprintf(stderr, "test_sandbox: cannot make a private TMPDIR\n");
        return 1;
    }
    snprintf(g_prog, sizeof g_prog, "prog-%d.py", (int)getpid());
    const struct CMUnitTest cleanup[] = {
        cmocka_unit_test(test_stale_dirs_hygiene),
    };
    int rc = cmocka_run_group_tests_name("cleanup", cleanup, NULL, NULL);
    rc |= cmocka_run_group_tests_name("bubblewrap", tests, setup, NULL);
    rc |= cmocka_run_group_tests_name("bubblewrap, no cgroup", nocgroup, setup_nocgroup, NULL);
    if (geteuid() == 0) {
        rc |= cmocka_run_group_tests_name("seccomp+uid", nobwrap, setup_nobwrap, NULL);
        rc |= cmocka_run_group_tests_name("seccomp+uid+landlock", nobwrap, setup_landlock, NULL);
    }
    rmdir(tmp);
    return rc;
}
