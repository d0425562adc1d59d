/* test_code.c - the code evaluator: extraction rules, verdict reasons, and
 * the paper's HumanEval set (humaneval_prompts.jsonl): every canonical
 * solution passes; mutated solutions fail (body deleted -> failed_test,
 * `return` -> `return None and` -> failed_test, an unclosed parenthesis ->
 * syntax_error; on every 8th problem). Runs on 2 threads. Under sanitizers (DRIFT_SANITIZE build
 * or DRIFT_SANITIZED in the environment) every 4th problem only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "util/util.h"

/* ---- helpers ---- */

static const char *REF_ADD =
    "{\"prompt\":\"import math\\n\\ndef add(a: int, b: int) -> int:\\n    \\\"\\\"\\\"Add two numbers.\\\"\\\"\\\"\\n\","
    "\"test\":\"def check(candidate):\\n    assert candidate(2, 3) == 5\\n    assert candidate(-1, 1) == 0\\n\","
    "\"entry_point\":\"add\"}";

/* Evaluates and returns the reason (static buffer); label in *label. */
static const char *eval_reason(const char *answer, const char *ref, double timeout_s, int *label, json_t **detail) {
    static __thread char reason[64];
    drift_code_opts o;
    drift_code_opts_default(&o);
    if (timeout_s > 0) o.timeout_s = timeout_s;
    drift_eval_result r;
    drift_error err = {0};
    drift_status st = drift_eval_code(answer, ref, &o, &r, &err);
    if (st != DRIFT_OK) {
        fprintf(stderr, "drift_eval_code: %s\n", err.msg);
        snprintf(reason, sizeof reason, "status %d", (int)st);
        *label = r.label;
        drift_eval_result_clear(&r);
        return reason;
    }
    json_t *d = json_loads(r.detail_json, 0, NULL);
    snprintf(reason, sizeof reason, "%s", d ? json_string_value(json_object_get(d, "reason")) : "bad detail");
    *label = r.label;
    if (detail) *detail = d;
    else json_decref(d);
    free(r.detail_json);
    return reason;
}

static void expect(const char *answer, const char *ref, const char *want_reason, int want_label) {
    int label;
    json_t *d = NULL;
    const char *reason = eval_reason(answer, ref, 5, &label, &d);
    if (strcmp(reason, want_reason) != 0 || label != want_label) {
        char *s = d ? json_dumps(d, JSON_INDENT(1)) : NULL;
        fprintf(stderr, "answer:\n%s\n-> %s (label %d), want %s; detail %s\n", answer, reason, label, want_reason,
                s ? s : "-");
        free(s);
    }
    json_decref(d);
    assert_string_equal(reason, want_reason);
    assert_int_equal(label, want_label);
}

/* Hostile answers (tests/unit/test_code.c): each tries to be scored as passed
 * for a wrong (or no) sum, by one route. */
static const struct { const char *name, *answer; } HOSTILE[] = {
    {"main_module",
     "import __main__, sys\n"
     "def add(a, b):\n"
     "    for name in ('_report', '_finish'):\n"
     "        f = getattr(__main__, name, None) or getattr(sys.modules.get('__main__'), name, None)\n"
     "        if f:\n"
     "            try:\n"
     "                f('passed')\n"
     "            except BaseException:\n"
     "                pass\n"
     "    return a - b\n"},
    {"stack_walk",
     "import sys, os\n"
     "def add(a, b):\n"
     "    f = sys._getframe()\n"
     "    while f is not None:\n"
     "        g = f.f_globals\n"
     "        for name in ('_report', '_finish'):\n"
     "            if name in g:\n"
     "                try:\n"
     "                    g[name]('passed')\n"
     "                except TypeError:\n"
     "                    g[name](0, 'passed')\n"
     "                os._exit(0)\n"
     "        f = f.f_back\n"
     "    return a - b\n"},
    {"heap_nonce_fds",
     "import gc, os, re\n"
     "def add(a, b):\n"
     "    cands = set()\n"
     "    for o in gc.get_objects():\n"
     "        for s in (o if isinstance(o, (list, tuple)) else [o]):\n"
     "            if isinstance(s, str):\n"
     "                cands.update(re.findall(r'\\b[0-9a-f]{32}\\b', s))\n"
     "    for v in list(globals().values()):\n"
     "        if isinstance(v, str):\n"
     "            cands.update(re.findall(r'\\b[0-9a-f]{32}\\b', v))\n"
     "    for n in cands:\n"
     "        for fd in range(0, 64):\n"
     "            try:\n"
     "                os.write(fd, ('ready %s \\npassed %s \\n' % (n, n)).encode())\n"
     "            except OSError:\n"
     "                pass\n"
     "    os._exit(0)\n"},
    {"all_fds",
     "import os\n"
     "for fd in range(0, 256):\n"
     "    try:\n"
     "        os.write(fd, b'passed 00000000000000000000000000000000 \\n')\n"
     "    except OSError:\n"
     "        pass\n"
     "def add(a, b):\n"
     "    return a - b\n"},
    {"proc_of_runner",
     "import os, re\n"
     "def add(a, b):\n"
     "    p = os.getppid()\n"
     "    found = []\n"
     "    for what in ('environ', 'cmdline', 'fd/0', 'fd/3'):\n"
     "        try:\n"
     "            with open('/proc/%d/%s' % (p, what), 'rb') as f:\n"
     "                found.append(f.read(100000))\n"
     "        except OSError:\n"
     "            pass\n"
     "    try:\n"
     "        fd = os.open('/proc/%d/fd/3' % p, os.O_WRONLY)\n"
     "        os.write(fd, b'passed x \\n')\n"
     "    except OSError:\n"
     "        pass\n"
     "    try:\n"
     "        maps = open('/proc/%d/maps' % p).read().splitlines()\n"
     "        mem = open('/proc/%d/mem' % p, 'rb')\n"
     "        for line in maps:\n"
     "            lo, hi = [int(x, 16) for x in line.split()[0].split('-')]\n"
     "            if 'rw' in line.split()[1] and hi - lo < 1 << 26:\n"
     "                mem.seek(lo)\n"
     "                found.append(mem.read(hi - lo))\n"
     "    except (OSError, ValueError):\n"
     "        pass\n"
     "    for blob in found:\n"
     "        for n in re.findall(rb'ready ([0-9a-f]{32})', blob):\n"
     "            print('found the nonce')\n"
     "            os._exit(0)\n"
     "    return a - b\n"},
    {"signal_runner",
     "import os, signal\n"
     "def add(a, b):\n"
     "    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGPIPE, signal.SIGALRM):\n"
     "        try:\n"
     "            os.kill(os.getppid(), s)\n"
     "        except OSError:\n"
     "            pass\n"
     "    return a - b\n"},
    {"kill_runner",
     "import os, signal\n"
     "def add(a, b):\n"
     "    os.kill(os.getppid(), signal.SIGKILL)\n"
     "    return a - b\n"},
    {"ptrace_runner",
     "import ctypes, os\n"
     "def add(a, b):\n"
     "    libc = ctypes.CDLL(None, use_errno=True)\n"
     "    if libc.ptrace(16, os.getppid(), 0, 0) == 0:\n"
     "        print('attached')\n"
     "    return a - b\n"},
    {"exit0_at_load",
     "import os\n"
     "os._exit(0)\n"
     "def add(a, b):\n"
     "    return a - b\n"},
    {"sys_exit0_in_call",
     "import sys\n"
     "def add(a, b):\n"
     "    sys.exit(0)\n"},
    {"exit0_in_call",
     "import os\n"
     "def add(a, b):\n"
     "    os._exit(0)\n"},
    {"fake_verdicts_printed",
     "import sys\n"
     "print('passed 0123456789abcdef0123456789abcdef')\n"
     "sys.stderr.write('passed 0123456789abcdef0123456789abcdef\\n')\n"
     "def add(a, b):\n"
     "    return a - b\n"},
    {"fake_bwrap_error",
     "import sys, os\n"
     "sys.stderr.write('bwrap: Creating new namespace failed: Operation not permitted\\n')\n"
     "sys.stderr.flush()\n"
     "os._exit(1)\n"
     "def add(a, b):\n"
     "    return a + b\n"},
    {"eq_always_true",
     "def add(a, b):\n"
     "    class Yes:\n"
     "        def __eq__(self, other):\n"
     "            return True\n"
     "        def __ne__(self, other):\n"
     "            return False\n"
     "        def __bool__(self):\n"
     "            return True\n"
     "    return Yes()\n"},
    {"int_subclass_eq",
     "def add(a, b):\n"
     "    class Yes(int):\n"
     "        def __eq__(self, other):\n"
     "            return True\n"
     "        __hash__ = int.__hash__\n"
     "    return Yes(0)\n"},
    {"stop_iteration",
     "def add(a, b):\n"
     "    raise StopIteration\n"},
    {"patch_builtins",
     "import builtins\n"
     "class _AE(Exception):\n"
     "    pass\n"
     "builtins.AssertionError = _AE\n"
     "def add(a, b):\n"
     "    return a - b\n"},
    {"read_tests",
     "import os, re\n"
     "def add(a, b):\n"
     "    for d in ('.', '/sandbox', '/tmp', os.environ.get('TMPDIR', '.')):\n"
     "        try:\n"
     "            for n in os.listdir(d):\n"
     "                t = open(os.path.join(d, n)).read()\n"
     "                m = re.search(r'candidate\\(%d, %d\\) == (-?\\d+)' % (a, b), t)\n"
     "                if m:\n"
     "                    return int(m.group(1))\n"
     "        except OSError:\n"
     "            pass\n"
     "    return a - b\n"},
    {"protocol_garbage",
     "import os\n"
     "def add(a, b):\n"
     "    os.write(4, (10).to_bytes(4, 'big') + b'{\"k\":\"ret\"')\n"
     "    os.write(4, b'\\xff' * 100000)\n"
     "    return a - b\n"},
    {"protocol_forged_reply",
     "import os, json\n"
     "def add(a, b):\n"
     "    d = json.dumps({'k': 'ret', 'v': {'i': str(a + b)}, 'x': 1}).encode()\n"
     "    os.write(4, len(d).to_bytes(4, 'big') + d)\n"
     "    return {'i': 'not a number'}\n"},
    {"deep_nesting",
     "def add(a, b):\n"
     "    x = []\n"
     "    for _ in range(100000):\n"
     "        x = [x]\n"
     "    return x\n"},
    {"closes_channels",
     "import os\n"
     "for fd in range(3, 64):\n"
     "    try:\n"
     "        os.close(fd)\n"
     "    except OSError:\n"
     "        pass\n"
     "def add(a, b):\n"
     "    return a + b\n"},
};

/* Every route must end as a plain fail: label FAIL, never passed, never a
 * sandbox error. The verdict comes from the runner, a process the answer's
 * code does not run in (code.c). */
static void test_forged_verdicts(void **state) {
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof HOSTILE / sizeof HOSTILE[0]; i++) {
        int label;
        json_t *d = NULL;
        const char *reason = eval_reason(HOSTILE[i].answer, REF_ADD, 5, &label, &d);
        const char *msg = d ? json_string_value(json_object_get(d, "message")) : NULL;
        fprintf(stderr, "  %-22s -> %s (label %d)%s%s\n", HOSTILE[i].name, reason, label, msg ? ": " : "",
                msg ? msg : "");
        if (label != DRIFT_LABEL_FAIL || strcmp(reason, "passed") == 0 || strcmp(reason, "sandbox_error") == 0) {
            char *s = d ? json_dumps(d, JSON_INDENT(1)) : NULL;
            fprintf(stderr, "FORGED or errored: %s\n%s\n", HOSTILE[i].name, s ? s : "-");
            free(s);
            bad++;
        }
        json_decref(d);
    }
    assert_int_equal(bad, 0);
    /* the same routes with a right answer still pass when they do no harm */
    expect("import __main__\ndef add(a, b):\n    return a + b\n", REF_ADD, "passed", DRIFT_LABEL_PASS);
}

/* ---- extraction and reasons ---- */

static void test_sandbox_check(void **state) {
    (void)state;
    drift_code_opts o;
    drift_code_opts_default(&o);
    assert_string_equal(o.python, "/usr/bin/python3");
    char mech[64];
    drift_error err = {0};
    assert_int_equal(drift_sandbox_check(&o, mech, sizeof mech, &err), DRIFT_OK);
    assert_true(strlen(mech) > 0);
    fprintf(stderr, "sandbox: %s\n", mech);
    o.python = "/no/such/python";
    assert_int_equal(drift_sandbox_check(&o, mech, sizeof mech, &err), DRIFT_ERR_SANDBOX);
    /* an "interpreter" that fails everywhere: no mechanism is found to work,
     * so code is refused unless unsafe execution is asked for */
    o.python = "/bin/false";
    assert_int_equal(drift_sandbox_check(&o, mech, sizeof mech, &err), DRIFT_ERR_SANDBOX);
    assert_non_null(strstr(err.msg, "--unsafe-code-exec"));
    assert_non_null(strstr(err.msg, "bubblewrap:"));
    o.unsafe_exec = 1;
    assert_int_equal(drift_sandbox_check(&o, mech, sizeof mech, &err), DRIFT_OK);
    assert_non_null(strstr(mech, "(unsafe)"));
}

static void test_continuation(void **state) {
    (void)state;
    expect("    return a + b\n", REF_ADD, "passed", DRIFT_LABEL_PASS);
    expect("    return a - b\n", REF_ADD, "failed_test", DRIFT_LABEL_FAIL);
    /* the prompt's import is available to a continuation */
    expect("    return int(math.fsum([a, b]))\n", REF_ADD, "passed", DRIFT_LABEL_PASS);
}

static void test_standalone_and_fences(void **state) {
    (void)state;
    /* a full definition, fenced, after prose */
    expect("Here is the solution:\n```python\ndef add(a, b):\n    return b + a\n```\nIt adds.", REF_ADD, "passed",
           DRIFT_LABEL_PASS);
    /* the block that defines the entry point wins over an earlier example */
    expect("Usage:\n```python\nprint(add(1, 2))\n```\nCode:\n```python\ndef add(a, b):\n    return a + b\n```\n",
           REF_ADD, "passed", DRIFT_LABEL_PASS);
    /* a fenced body is a continuation */
    expect("```\n    return a + b\n```", REF_ADD, "passed", DRIFT_LABEL_PASS);
    /* other languages are not Python */
    expect("```bash\nrm -rf /\n```\n```py\ndef add(a, b):\n    return a + b\n```", REF_ADD, "passed",
           DRIFT_LABEL_PASS);
    /* an unclosed fence takes the rest */
    expect("```python\ndef add(a, b):\n    return a + b\n", REF_ADD, "passed", DRIFT_LABEL_PASS);
    /* standalone keeps the prompt's imports */
    expect("def add(a, b):\n    return math.floor(a) + b\n", REF_ADD, "passed", DRIFT_LABEL_PASS);
    /* detail carries the extraction rule and a program hash */
    int label;
    json_t *d = NULL;
    eval_reason("```python\ndef add(a, b):\n    return a + b\n```", REF_ADD, 5, &label, &d);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "extraction")), "fenced");
    assert_string_equal(json_string_value(json_object_get(d, "mode")), "standalone");
    assert_int_equal(strlen(json_string_value(json_object_get(d, "program_hash"))), 16);
    json_decref(d);
}

/* drift_code_extract, the reading the evaluator and the traffic code class
 * share: tags in any case; an untagged fence only with DRIFT_CODE_BARE_FENCE. */
static void test_extract(void **state) {
    (void)state;
    const char *c = NULL;
    size_t n = 0;
    const char *bare = "text\n```\nx = 1\n```\n";
    assert_int_equal(drift_code_extract(bare, NULL, 0, &c, &n), 0);
    assert_null(c);
    assert_int_equal(n, 0);
    assert_int_equal(drift_code_extract(bare, NULL, DRIFT_CODE_BARE_FENCE, &c, &n), 1);
    assert_int_equal(n, 6);
    assert_memory_equal(c, "x = 1\n", 6);
    static const char *const tags[] = {"PYTHON", "Py", " pYthon3 \r", "python"};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        char *t = util_asprintf("```%s\ny = 2\n```", tags[i]);
        assert_int_equal(drift_code_extract(t, NULL, 0, &c, &n), 1);
        assert_int_equal(n, 6);
        assert_memory_equal(c, "y = 2\n", 6);
        free(t);
    }
    assert_int_equal(drift_code_extract("```pythonic\ny = 2\n```", NULL, DRIFT_CODE_BARE_FENCE, &c, &n), 0);
    assert_int_equal(drift_code_extract("no fence at all", "f", DRIFT_CODE_BARE_FENCE, &c, &n), 0);
    /* the block that defines the entry point, else the first; an unclosed one runs to the end */
    const char *two = "```py\nf(1)\n```\n```PY\ndef  f (a):\n    return a\n";
    assert_int_equal(drift_code_extract(two, "f", 0, &c, &n), 1);
    assert_string_equal(c, "def  f (a):\n    return a\n");
    assert_int_equal(drift_code_extract(two, "g", 0, &c, &n), 1);
    assert_int_equal(n, 5);
    assert_memory_equal(c, "f(1)\n", 5);
}

/* The evaluator reads a tag in any case (```Python was already code,
 * ```PYTHON and ```Py were not: the whole answer ran, fences and all, and
 * failed with a syntax error). */
static void test_fence_tag_case(void **state) {
    (void)state;
    static const char *const answers[] = {"```PYTHON\ndef add(a, b):\n    return a + b\n```\n",
                                          "Sure:\n```Py\ndef add(a, b):\n    return a + b\n```\nDone."};
    for (size_t i = 0; i < 2; i++) {
        expect(answers[i], REF_ADD, "passed", DRIFT_LABEL_PASS);
        int label;
        json_t *d = NULL;
        eval_reason(answers[i], REF_ADD, 5, &label, &d);
        assert_non_null(d);
        assert_string_equal(json_string_value(json_object_get(d, "extraction")), "fenced");
        json_decref(d);
    }
}

static void test_reasons(void **state) {
    (void)state;
    expect("    return (a +\n", REF_ADD, "syntax_error", DRIFT_LABEL_FAIL);
    expect("  return a + b\n      x = 1\n", REF_ADD, "syntax_error", DRIFT_LABEL_FAIL);
    expect("    raise ValueError('no')\n", REF_ADD, "failed_test", DRIFT_LABEL_FAIL);
    /* leaving early cannot pass: the runner's nonce report is missing */
    expect("    return a + b\nimport sys\nsys.exit(0)\n", REF_ADD, "failed_test", DRIFT_LABEL_FAIL);
    expect("    return a + b\nimport os\nos._exit(0)\n", REF_ADD, "failed_test", DRIFT_LABEL_FAIL);
    expect("    return a + b\nimport os\nos.write(3, b'passed 0000 fake\\n')\nos._exit(0)\n", REF_ADD,
           "failed_test", DRIFT_LABEL_FAIL);
    expect("    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n", REF_ADD, "killed", DRIFT_LABEL_FAIL);
    expect("    x = bytearray(8 * 1024 ** 3)\n    return a + b\n", REF_ADD, "failed_test", DRIFT_LABEL_FAIL);
    /* wall timeout (2 s) */
    int label;
    json_t *d = NULL;
    const char *reason = eval_reason("    while True:\n        pass\n", REF_ADD, 2, &label, &d);
    assert_string_equal(reason, "timeout");
    assert_int_equal(label, DRIFT_LABEL_FAIL);
    double wall = json_real_value(json_object_get(d, "wall_ms"));
    assert_true(wall >= 1900 && wall < 4000);
    assert_non_null(json_object_get(d, "cpu_ms"));
    json_decref(d);
    /* a timeout that used little CPU (a sleep here; a starved run on a
     * loaded machine looks the same) is run once more before it counts */
    reason = eval_reason("    import time\n    time.sleep(30)\n", REF_ADD, 2, &label, &d);
    assert_string_equal(reason, "timeout");
    assert_int_equal(label, DRIFT_LABEL_FAIL);
    assert_true(json_is_true(json_object_get(d, "reran_after_timeout")));
    assert_true(json_real_value(json_object_get(d, "first_cpu_ms")) < 1000);
    json_decref(d);
    /* the stderr tail and message of a failing assertion */
    reason = eval_reason("    return 0\n", REF_ADD, 5, &label, &d);
    assert_string_equal(reason, "failed_test");
    assert_non_null(strstr(json_string_value(json_object_get(d, "stderr_tail")), "AssertionError"));
    assert_non_null(strstr(json_string_value(json_object_get(d, "message")), "AssertionError"));
    json_decref(d);
}

static void test_bad_reference(void **state) {
    (void)state;
    drift_eval_result r;
    drift_error err = {0};
    static const char *const bad[] = {"{\"prompt\":\"\"}", "not json", "[1]",
                                      "{\"prompt\":\"\",\"test\":\"\",\"entry_point\":\"a;b\"}"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(drift_eval_code("x", bad[i], NULL, &r, &err), DRIFT_ERR_PARSE);
        assert_int_equal(r.label, DRIFT_LABEL_ERROR);
        assert_non_null(r.detail_json);
        assert_non_null(strstr(r.detail_json, "\"reason\":\"bad_reference\""));
        assert_non_null(strstr(err.msg, "code reference"));
        drift_eval_result_clear(&r);
    }
    /* a missing interpreter is a sandbox error label, with the reason */
    drift_code_opts o;
    drift_code_opts_default(&o);
    o.python = "/no/such/python";
    assert_int_equal(drift_eval_code("x", REF_ADD, &o, &r, NULL), DRIFT_ERR_SANDBOX);
    assert_int_equal(r.label, DRIFT_LABEL_ERROR);
    assert_non_null(strstr(r.detail_json, "sandbox_error"));
    assert_non_null(strstr(r.detail_json, "/no/such/python"));
    drift_eval_result_clear(&r);
}

/* ---- the HumanEval set ---- */

typedef struct problem {
    char *id, *ref, *canonical, *prompt;
} problem;

typedef struct job {
    problem *p;
    size_t n;
    atomic_size_t next;
    int stride;
    atomic_int failures;
    atomic_int runs;
} job;

static char *replace_all(const char *s, const char *from, const char *to) {
    util_buf b = {0};
    size_t fl = strlen(from);
    const char *q;
    while ((q = strstr(s, from))) {
        buf_append(&b, s, (size_t)(q - s));
        buf_puts(&b, to);
        s = q + fl;
    }
    buf_puts(&b, s);
    return buf_steal(&b);
}

static void check_one(job *j, const problem *p, const char *answer, const char *want, int want_label,
                      const char *what) {
    int label;
    const char *reason = eval_reason(answer, p->ref, 10, &label, NULL);
    atomic_fetch_add(&j->runs, 1);
    if (strcmp(reason, want) != 0 || label != want_label) {
        fprintf(stderr, "%s %s: got %s, want %s\n", p->id, what, reason, want);
        atomic_fetch_add(&j->failures, 1);
    }
}

static void *worker(void *arg) {
    job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) break;
        if ((int)(i % (size_t)j->stride) != 0) continue;
        const problem *p = &j->p[i];
        check_one(j, p, p->canonical, "passed", DRIFT_LABEL_PASS, "canonical");
        if (i % (size_t)(8 * j->stride) != 0) continue; /* mutants on every 8th problem */
        check_one(j, p, "", "failed_test", DRIFT_LABEL_FAIL, "body deleted");
        char *m = replace_all(p->canonical, "return ", "return None and ");
        check_one(j, p, m, "failed_test", DRIFT_LABEL_FAIL, "return None and");
        free(m);
        m = util_asprintf("%s    x = (\n", p->canonical);
        check_one(j, p, m, "syntax_error", DRIFT_LABEL_FAIL, "unclosed paren");
        free(m);
        /* the canonical solution as a standalone, fenced answer */
        m = util_asprintf("Solution:\n```python\n%s%s```\n", p->prompt, p->canonical);
        check_one(j, p, m, "passed", DRIFT_LABEL_PASS, "fenced standalone");
        free(m);
    }
    return NULL;
}

static void test_humaneval(void **state) {
    (void)state;
    const char *shared = getenv("DRIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/datasets/humaneval_prompts.jsonl", shared ? shared : "/work/shared");
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s not found: skipped\n", path);
        skip();
    }
    problem *ps = calloc(200, sizeof *ps);
    size_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0 && n < 200) {
        json_t *o = json_loads(line, 0, NULL);
        assert_non_null(o);
        json_t *ref = json_pack("{s:O,s:O,s:O}", "prompt", json_object_get(o, "prompt"), "test_cases",
                                json_object_get(o, "test_cases"), "entry_point", json_object_get(o, "entry_point"));
        assert_non_null(ref);
        ps[n].id = util_strdup(json_string_value(json_object_get(o, "task_id")));
        ps[n].canonical = util_strdup(json_string_value(json_object_get(o, "canonical_solution")));
        ps[n].prompt = util_strdup(json_string_value(json_object_get(o, "prompt")));
        ps[n].ref = json_dumps(ref, JSON_COMPACT);
        json_decref(ref);
        json_decref(o);
        n++;
    }
    free(line);
    fclose(f);
    assert_int_equal(n, 164);
    job j = {.p = ps, .n = n, .stride = 1};
    atomic_init(&j.next, 0);
    atomic_init(&j.failures, 0);
    atomic_init(&j.runs, 0);
#ifdef DRIFT_SANITIZE
    j.stride = 4;
#endif
    if (getenv("DRIFT_SANITIZED")) j.stride = 4;
    double t0 = util_now_ms();
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, &j), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    fprintf(stderr, "humaneval: %d runs (stride %d) in %.1f s, %d wrong\n", atomic_load(&j.runs), j.stride,
            (util_now_ms() - t0) / 1000, atomic_load(&j.failures));
    for (size_t i = 0; i < n; i++) {
        free(ps[i].id);
        free(ps[i].ref);
        free(ps[i].canonical);
        free(ps[i].prompt);
    }
    free(ps);
    assert_int_equal(atomic_load(&j.failures), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sandbox_check), cmocka_unit_test(test_continuation),
        cmocka_unit_test(test_standalone_and_fences), cmocka_unit_test(test_extract),
        cmocka_unit_test(test_fence_tag_case), cmocka_unit_test(test_reasons),
        cmocka_unit_test(test_bad_reference), cmocka_unit_test(test_forged_verdicts),
        cmocka_unit_test(test_humaneval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
