/* code.c - the code evaluator: pass@1 of a HumanEval-style answer.
 *
 * 1. Extract the program from the answer (code_build_program, in
 *    code_extract.c, over drift_code_extract):
 *    - fenced blocks (```python, ```py, ```python3 in any case, or a bare
 *      ```): the one that defines the entry point, else the first;
 *    - otherwise the whole answer.
 *    If the code defines `def ENTRY(` it is a standalone solution and runs
 *    after the prompt (the prompt ends with the stub's docstring, which is a
 *    complete function, so the answer's definition replaces it while the
 *    prompt's imports and helper functions stay); else it is a completion
 *    that continues the prompt (HumanEval convention): prompt + completion.
 *    Then the reference's tests (`test` or `test_cases`, defining
 *    check(candidate)) and `check(ENTRY)` are appended.
 * 2. Run it in the sandbox (src/sandbox/) as two processes that share nothing
 *    the answer could use:
 *    - the runner (trusted code, ours) holds the reference's tests and the
 *      verdict channel (fd 3). It ignores catchable signals, makes itself
 *      non-dumpable (so no process of the same uid can read its memory or
 *      descriptors through /proc or ptrace), forks the host, and only then
 *      reads a per-run nonce and the job (prompt, tests, entry point) from
 *      stdin and reports "ready";
 *    - the host, forked before the runner read anything secret, closes the
 *      channel and stdin first, then runs the answer's program (prompt +
 *      completion, never the tests) and answers the runner's calls of the
 *      entry point over two pipes: arguments in, a return value or an
 *      exception out, encoded as JSON with only exact builtin types (so an
 *      object whose __eq__ is always true cannot come back, and nothing the
 *      host sends can run code in the runner). A fork, not a second
 *      interpreter: one interpreter start per answer.
 *    The runner executes the prompt (for its helper functions) and the tests
 *    with `candidate` bound to a proxy of the host's entry point. Model code
 *    never runs in the runner, so it cannot reach the nonce, the tests, the
 *    channel or the runner's frames; it can only answer calls, or die.
 * 3. Verdict, decided here from what the supervisor observed:
 *    - no "ready" on the channel: the sandbox or the interpreter failed before
 *      any model code ran -> sandbox_error (DRIFT_LABEL_ERROR, never a fail);
 *      no byte the program prints decides this;
 *    - "passed" counts only with the runner's clean exit (code 0);
 *    - failed_test, syntax_error, killed (the host or the runner died of a
 *      signal), timeout (wall clock; a timeout whose CPU time was under half
 *      the wall time is run once more, so a loaded machine does not make a
 *      flip out of a slow start).
 *    The detail keeps the reason, the extraction rule, the program hash, exit
 *    code / signal, wall and CPU time, the runner's message and the last 500
 *    bytes of stderr. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "eval/code_internal.h"
#include "eval/evaluator.h"
#include "sandbox/sandbox.h"
#include "util/util.h"

void drift_code_opts_default(drift_code_opts *o) {
    memset(o, 0, sizeof *o);
    o->python = "/usr/bin/python3";
    o->timeout_s = 10;
    o->cpu_s = 10;
    o->mem_mb = 1024;
}

drift_status drift_sandbox_check(const drift_code_opts *o, char *mechanism, size_t cap, drift_error *err) {
    drift_code_opts d;
    if (!o) {
        drift_code_opts_default(&d);
        o = &d;
    }
    unsigned mech;
    return sbx_probe(o->python ? o->python : "/usr/bin/python3", o->unsafe_exec, &mech, mechanism, cap, err);
}

/* ---- the runner and the host (Python, see the top of the file) ---- */

/* One program: the framing both sides use (4-byte big-endian length + JSON,
 * at most 16 MiB) and the value encoding (exact builtin types only: None,
 * bool, str and lists as JSON; tagged ints {"i"}, floats {"f"}, tuples {"t"},
 * dicts {"d"}, sets {"s"}, frozensets {"z"}, bytes {"b"}, complex {"c"}; the
 * runner's decoder builds nothing else), then the host's main (run in the
 * forked child) and the runner's. */
static const char RUNNER[] =
    "import sys, os, json\n"
    "_CAP = 1 << 24\n"
    "class SolutionProcessError(BaseException):\n"
    "    pass\n"
    "def _rd(fd, n):\n"
    "    b = b''\n"
    "    while len(b) < n:\n"
    "        c = os.read(fd, n - len(b))\n"
    "        if not c:\n"
    "            raise EOFError('channel closed')\n"
    "        b += c\n"
    "    return b\n"
    "def _send(fd, obj):\n"
    "    d = json.dumps(obj, ensure_ascii=True).encode()\n"
    "    d = len(d).to_bytes(4, 'big') + d\n"
    "    while d:\n"
    "        d = d[os.write(fd, d):]\n"
    "def _recv(fd):\n"
    "    n = int.from_bytes(_rd(fd, 4), 'big')\n"
    "    if n > _CAP:\n"
    "        raise SolutionProcessError('message of %d bytes' % n)\n"
    "    return json.loads(_rd(fd, n).decode('utf-8'))\n"
    "def _enc(v, d=0):\n"
    "    if d > 200:\n"
    "        raise ValueError('nested too deeply')\n"
    "    t = type(v)\n"
    "    if v is None or t is bool or t is str:\n"
    "        return v\n"
    "    if t is int:\n"
    "        return {'i': str(v)}\n"
    "    if t is float:\n"
    "        return {'f': repr(v)}\n"
    "    if t is list:\n"
    "        return [_enc(x, d + 1) for x in v]\n"
    "    if t is tuple:\n"
    "        return {'t': [_enc(x, d + 1) for x in v]}\n"
    "    if t is dict:\n"
    "        return {'d': [[_enc(k, d + 1), _enc(x, d + 1)] for k, x in v.items()]}\n"
    "    if t is set:\n"
    "        return {'s': [_enc(x, d + 1) for x in v]}\n"
    "    if t is frozenset:\n"
    "        return {'z': [_enc(x, d + 1) for x in v]}\n"
    "    if t is bytes:\n"
    "        return {'b': v.hex()}\n"
    "    if t is complex:\n"
    "        return {'c': [repr(v.real), repr(v.imag)]}\n"
    "    return _enc_other(v, d)\n"
    "def _dec(v, d=0):\n"
    "    if d > 200:\n"
    "        raise SolutionProcessError('nested too deeply')\n"
    "    if v is None or v is True or v is False:\n"
    "        return v\n"
    "    t = type(v)\n"
    "    if t is str:\n"
    "        return v\n"
    "    if t is list:\n"
    "        return [_dec(x, d + 1) for x in v]\n"
    "    if t is dict and len(v) == 1:\n"
    "        k, x = next(iter(v.items()))\n"
    "        tx = type(x)\n"
    "        if k == 'i' and tx is str:\n"
    "            return int(x)\n"
    "        if k == 'f' and tx is str:\n"
    "            return float(x)\n"
    "        if k == 'b' and tx is str:\n"
    "            return bytes.fromhex(x)\n"
    "        if tx is list:\n"
    "            if k == 't':\n"
    "                return tuple(_dec(y, d + 1) for y in x)\n"
    "            if k == 's':\n"
    "                return set(_dec(y, d + 1) for y in x)\n"
    "            if k == 'z':\n"
    "                return frozenset(_dec(y, d + 1) for y in x)\n"
    "            if k == 'c' and len(x) == 2 and type(x[0]) is str and type(x[1]) is str:\n"
    "                return complex(float(x[0]), float(x[1]))\n"
    "            if k == 'd':\n"
    "                out = {}\n"
    "                for p in x:\n"
    "                    if type(p) is not list or len(p) != 2:\n"
    "                        raise SolutionProcessError('bad dict item')\n"
    "                    out[_dec(p[0], d + 1)] = _dec(p[1], d + 1)\n"
    "                return out\n"
    "    raise SolutionProcessError('unexpected value')\n"
    "def _describe(e):\n"
    "    try:\n"
    "        return '%s: %s' % (type(e).__name__, e)\n"
    "    except BaseException:\n"
    "        return type(e).__name__\n"
    "# The runner: holds the tests and the verdict channel (fd 3). It runs the\n"
    "# answer's code only in a separate process (the host), which it cannot reach.\n"
    "import signal, builtins, time\n"
    "def _enc_other(v, d):\n"
    "    raise TypeError('a %s cannot be passed to the solution' % type(v).__name__)\n"
    "_IGNORED = ('SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGALRM', 'SIGVTALRM',\n"
    "            'SIGPROF', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGIO', 'SIGPWR', 'SIGURG', 'SIGWINCH', 'SIGPIPE')\n"
    "for _n in _IGNORED:\n"
    "    try:\n"
    "        signal.signal(getattr(signal, _n), signal.SIG_IGN)\n"
    "    except (AttributeError, OSError, ValueError):\n"
    "        pass\n"
    "import ctypes\n"
    "if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:\n"
    "    os._exit(4)\n"
    "# The host: the forked child that runs the answer's code and answers the\n"
    "# runner's calls. It is forked before the runner reads its stdin, so it never\n"
    "# holds the nonce or the tests, and it closes the verdict channel first.\n"
    "# Everything here is reachable by the answer, so nothing here is trusted.\n"
    "def _host_enc_other(v, d):\n"
    "    if isinstance(v, bool):\n"
    "        return bool(v)\n"
    "    if isinstance(v, int) or hasattr(v, '__index__'):\n"
    "        return {'i': str(int(v.__index__()))}\n"
    "    if isinstance(v, float):\n"
    "        return {'f': repr(float(v))}\n"
    "    if isinstance(v, str):\n"
    "        return str(v)\n"
    "    raise TypeError('a %s cannot be passed back' % type(v).__name__)\n"
    "def _host_main(rq, rs, others):\n"
    "    global _enc_other\n"
    "    _enc_other = _host_enc_other\n"
    "    os.close(3)\n"
    "    for fd in others:\n"
    "        os.close(fd)\n"
    "    nul = os.open('/dev/null', os.O_RDONLY)\n"
    "    os.dup2(nul, 0)\n"
    "    os.close(nul)\n"
    "    os.dup2(rq, 3)\n"
    "    os.dup2(rs, 4)\n"
    "    for fd in (rq, rs):\n"
    "        if fd > 4:\n"
    "            os.close(fd)\n"
    "    for n in _IGNORED:\n"
    "        try:\n"
    "            signal.signal(getattr(signal, n), signal.SIG_DFL)\n"
    "        except (AttributeError, OSError, ValueError):\n"
    "            pass\n"
    "    signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "    signal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
    "    try:\n"
    "        entry = _recv(3)['entry']\n"
    "        with open('solution.py', 'rb') as f:\n"
    "            code = compile(f.read(), 'solution.py', 'exec')\n"
    "    except (SyntaxError, ValueError) as e:\n"
    "        _send(4, {'k': 'syntax_error', 'm': _describe(e)})\n"
    "        os._exit(3)\n"
    "    except BaseException as e:\n"
    "        os._exit(5)\n"
    "    g = {'__name__': '__solution__', '__builtins__': builtins}\n"
    "    try:\n"
    "        exec(code, g)\n"
    "    except BaseException as e:\n"
    "        import traceback\n"
    "        traceback.print_exc()\n"
    "        _send(4, {'k': 'load_error', 'm': _describe(e)})\n"
    "        os._exit(1)\n"
    "    fn = g.get(entry)\n"
    "    if not callable(fn):\n"
    "        _send(4, {'k': 'load_error', 'm': 'NameError: %s is not defined' % entry})\n"
    "        os._exit(1)\n"
    "    _send(4, {'k': 'ok'})\n"
    "    while True:\n"
    "        try:\n"
    "            m = _recv(3)\n"
    "            a, kw = _dec(m[0]), _dec(m[1])\n"
    "        except BaseException:\n"
    "            os._exit(0)\n"
    "        try:\n"
    "            r = fn(*a, **kw)\n"
    "        except BaseException as e:\n"
    "            _send(4, {'k': 'exc', 'e': type(e).__name__, 'm': _describe(e)})\n"
    "            continue\n"
    "        try:\n"
    "            v = _enc(r)\n"
    "        except BaseException as e:\n"
    "            _send(4, {'k': 'exc', 'e': 'TypeError', 'm': 'the return value: ' + _describe(e)})\n"
    "            continue\n"
    "        _send(4, {'k': 'ret', 'v': v})\n"
    "_rq_r, _rq_w = os.pipe()\n"
    "_rs_r, _rs_w = os.pipe()\n"
    "_pid = os.fork()\n"
    "if _pid == 0:\n"
    "    try:\n"
    "        _host_main(_rq_r, _rs_w, (_rq_w, _rs_r))\n"
    "    finally:\n"
    "        os._exit(6)\n"
    "os.close(_rq_r)\n"
    "os.close(_rs_w)\n"
    "_raw = sys.stdin.buffer.read()\n"
    "_nl = _raw.index(b'\\n')\n"
    "_nonce = _raw[:_nl].decode('ascii')\n"
    "_job = json.loads(_raw[_nl + 1:].decode('utf-8'))\n"
    "del _raw\n"
    "def _report(kind, msg=''):\n"
    "    line = '%s %s %s\\n' % (kind, _nonce, msg.replace('\\n', ' ')[:400])\n"
    "    os.write(3, line.encode('utf-8', 'replace'))\n"
    "_report('ready')\n"
    "_send(_rq_w, {'entry': _job['entry']})\n"
    "def _finish(code, kind, msg=''):\n"
    "    try:\n"
    "        os.kill(_pid, signal.SIGKILL)\n"
    "        os.waitpid(_pid, 0)\n"
    "    except OSError:\n"
    "        pass\n"
    "    _report(kind, msg)\n"
    "    os._exit(code)\n"
    "def _reply():\n"
    "    try:\n"
    "        return _recv(_rs_r)\n"
    "    except SolutionProcessError:\n"
    "        raise\n"
    "    except BaseException as e:\n"
    "        raise SolutionProcessError('the solution process: ' + _describe(e))\n"
    "_broken = []\n"
    "def _exc(name, msg):\n"
    "    c = getattr(builtins, name, None) if type(name) is str else None\n"
    "    if not (isinstance(c, type) and issubclass(c, Exception)) or issubclass(c, (StopIteration, StopAsyncIteration)):\n"
    "        c = RuntimeError\n"
    "    try:\n"
    "        return c(msg if type(msg) is str else '')\n"
    "    except BaseException:\n"
    "        return RuntimeError(msg if type(msg) is str else '')\n"
    "def candidate(*a, **kw):\n"
    "    if _broken:\n"
    "        raise SolutionProcessError(_broken[0])\n"
    "    req = [_enc(list(a)), _enc(kw)]\n"
    "    try:\n"
    "        _send(_rq_w, req)\n"
    "        m = _reply()\n"
    "        if type(m) is dict and m.get('k') == 'ret' and 'v' in m:\n"
    "            return _dec(m['v'])\n"
    "        if type(m) is not dict or m.get('k') != 'exc':\n"
    "            raise SolutionProcessError('an unexpected reply from the solution process')\n"
    "    except BaseException as x:\n"
    "        _broken.append(str(x) if isinstance(x, SolutionProcessError) else 'the solution process: ' + _describe(x))\n"
    "        raise SolutionProcessError(_broken[0])\n"
    "    raise _exc(m.get('e'), m.get('m'))\n"
    "def _host_signal():\n"
    "    for _ in range(100):\n"
    "        try:\n"
    "            p, st = os.waitpid(_pid, os.WNOHANG)\n"
    "        except OSError:\n"
    "            return 0\n"
    "        if p:\n"
    "            return os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0\n"
    "        time.sleep(0.01)\n"
    "    return 0\n"
    "def _host_died(why):\n"
    "    s = _host_signal()\n"
    "    if s:\n"
    "        _finish(1, 'killed', signal.Signals(s).name if s in signal.valid_signals() else 'signal %d' % s)\n"
    "    _finish(1, 'failed_test', why)\n"
    "try:\n"
    "    _m = _reply()\n"
    "except BaseException as e:\n"
    "    _host_died('the solution process ended before it loaded (%s)' % _describe(e))\n"
    "if type(_m) is dict and _m.get('k') == 'syntax_error':\n"
    "    _finish(3, 'syntax_error', str(_m.get('m')))\n"
    "if type(_m) is not dict or _m.get('k') != 'ok':\n"
    "    _finish(1, 'failed_test', str(_m.get('m')) if type(_m) is dict else 'bad first message')\n"
    "_g = {'__name__': '__tests__', '__builtins__': builtins}\n"
    "try:\n"
    "    exec(compile(_job['prompt'], 'prompt.py', 'exec'), _g)\n"
    "except BaseException:\n"
    "    pass\n"
    "_g[_job['entry']] = candidate\n"
    "try:\n"
    "    exec(compile(_job['tests'], 'tests.py', 'exec'), _g)\n"
    "    _g['check'](candidate)\n"
    "    if _broken:\n"
    "        raise SolutionProcessError(_broken[0])\n"
    "except BaseException as e:\n"
    "    import traceback\n"
    "    traceback.print_exc()\n"
    "    if _broken:\n"
    "        _host_died(_describe(e))\n"
    "    _finish(1, 'failed_test', _describe(e))\n"
    "_finish(0, 'passed')\n";

static const char *sig_name(int sig) {
    switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGSYS: return "SIGSYS";
    case SIGTERM: return "SIGTERM";
    case SIGPIPE: return "SIGPIPE";
    default: return "signal";
    }
}

/* The runner's lines on the channel: "KIND NONCE message". */
static int chan_line(const char *line, size_t n, const char *kind, const char *nonce, const char **msg) {
    size_t kl = strlen(kind), nl = strlen(nonce);
    if (n < kl + 1 + nl || memcmp(line, kind, kl) != 0 || line[kl] != ' ' || memcmp(line + kl + 1, nonce, nl) != 0)
        return 0;
    if (n > kl + 1 + nl && line[kl + 1 + nl] != ' ') return 0;
    *msg = line + (n > kl + 1 + nl ? kl + 2 + nl : kl + 1 + nl);
    return 1;
}

int code_chan_ready(const char *chan, size_t len, const char *nonce) {
    const char *msg;
    const char *nl = memchr(chan, '\n', len);
    size_t n = nl ? (size_t)(nl - chan) : len;
    return nonce[0] && chan_line(chan, n, "ready", nonce, &msg);
}

int code_parse_verdict(const char *chan, size_t len, const char *nonce, char *kind, size_t kind_cap, char *msg,
                       size_t msg_cap) {
    static const char *const kinds[] = {"passed", "failed_test", "syntax_error", "killed"};
    if (kind_cap) kind[0] = '\0';
    if (msg_cap) msg[0] = '\0';
    if (!nonce[0]) return 0;
    const char *p = chan, *end = chan + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            const char *m;
            if (!chan_line(p, n, kinds[i], nonce, &m)) continue;
            snprintf(kind, kind_cap, "%s", kinds[i]);
            size_t ml = (size_t)(p + n - m);
            if (msg_cap) {
                if (ml >= msg_cap) ml = msg_cap - 1;
                memcpy(msg, m, ml);
                msg[ml] = '\0';
            }
            return 1;
        }
        if (!nl) break;
        p = nl + 1;
    }
    return 0;
}

/* A JSON string of bytes that may not be valid UTF-8 (a tail cut in the
 * middle of a character, binary output): invalid bytes become '?'. */
static json_t *json_text(const char *p, size_t n) {
    json_t *j = json_stringn(p, n);
    if (j) return j;
    char *c = util_strndup(p, n);
    if (!c) return json_string("");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)c[i] >= 0x80 || c[i] == '\0') c[i] = '?';
    j = json_stringn(c, n);
    free(c);
    return j ? j : json_string("");
}

static void set_result(drift_eval_result *out, int label, json_t *detail) {
    out->label = label;
    out->value = label == DRIFT_LABEL_PASS ? 1.0 : label == DRIFT_LABEL_FAIL ? 0.0 : NAN;
    out->detail_json = json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(detail);
}

/* Error return that still leaves a label and an explanation in out. */
static drift_status fail_out(drift_eval_result *out, drift_status rc, const char *reason, const drift_error *err) {
    json_t *d = json_object();
    json_object_set_new(d, "reason", json_string(reason));
    if (err) json_object_set_new(d, "message", json_text(err->msg, strnlen(err->msg, sizeof err->msg)));
    set_result(out, DRIFT_LABEL_ERROR, d);
    return rc;
}

drift_status drift_eval_code(const char *answer, const char *reference_json, const drift_code_opts *o,
                             drift_eval_result *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    out->label = DRIFT_LABEL_ERROR;
    out->value = NAN;
    drift_error local;
    if (!err) err = &local;
    if (!answer || !reference_json) return drift_error_set(err, DRIFT_ERR_INVALID, "code: NULL answer or reference");
    drift_code_opts d;
    if (!o) {
        drift_code_opts_default(&d);
        o = &d;
    }
    const char *python = o->python ? o->python : "/usr/bin/python3";

    json_error_t jerr;
    json_t *ref = json_loads(reference_json, 0, &jerr);
    if (!ref || !json_is_object(ref)) {
        json_decref(ref);
        drift_error_set(err, DRIFT_ERR_PARSE, "code reference: %s (line %d)", ref ? "not an object" : jerr.text,
                        jerr.line);
        return fail_out(out, DRIFT_ERR_PARSE, "bad_reference", err);
    }
    const char *prompt = json_string_value(json_object_get(ref, "prompt"));
    json_t *jt = json_object_get(ref, "test");
    if (!json_is_string(jt)) jt = json_object_get(ref, "test_cases");
    const char *tests = json_string_value(jt);
    const char *entry = json_string_value(json_object_get(ref, "entry_point"));
    if (!prompt || !tests || !entry || !entry[0]) {
        json_decref(ref);
        drift_error_set(err, DRIFT_ERR_PARSE, "code reference: missing string field '%s'",
                        !prompt ? "prompt" : !tests ? "test" : "entry_point");
        return fail_out(out, DRIFT_ERR_PARSE, "bad_reference", err);
    }
    for (const char *c = entry; *c; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) {
            drift_error_set(err, DRIFT_ERR_PARSE, "code reference: entry_point '%.100s' is not an identifier", entry);
            json_decref(ref);
            return fail_out(out, DRIFT_ERR_PARSE, "bad_reference", err);
        }

    unsigned mech;
    char mech_s[64];
    drift_status rc = sbx_probe(python, o->unsafe_exec, &mech, mech_s, sizeof mech_s, err);
    if (rc != DRIFT_OK) {
        json_decref(ref);
        return fail_out(out, rc, "sandbox_error", err);
    }

    const char *rule, *mode;
    char *program = code_build_program(answer, prompt, entry, &rule, &mode);
    /* the job for the runner, on its stdin after the nonce line */
    json_t *job = json_pack("{s:s,s:s,s:s}", "prompt", prompt, "tests", tests, "entry", entry);
    char *job_s = job ? json_dumps(job, JSON_COMPACT) : NULL;
    json_decref(job);
    /* the program hash covers the tests too (prompt, tests and entry point
     * live in ref: hashed before it is released) */
    char hash[17];
    if (program) {
        util_buf hb = {0};
        buf_puts(&hb, program);
        buf_puts(&hb, "\n# tests\n");
        buf_puts(&hb, tests);
        util_hash_hex(hb.data ? hb.data : "", hb.len, hash);
        free(hb.data);
    }
    json_decref(ref);
    if (!program || !job_s) {
        free(program);
        free(job_s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "code: out of memory");
    }

    /* nonce: not derivable from the program */
    char nonce[40];
    {
        util_rng rng;
        static __thread uint64_t counter;
        util_rng_seed(&rng, (uint64_t)(util_now_ms() * 1e3) ^ ((uint64_t)getpid() << 32) ^
                                 (uint64_t)(uintptr_t)&rng ^ (++counter * 0x9E3779B97F4A7C15ull));
        snprintf(nonce, sizeof nonce, "%016llx%016llx", (unsigned long long)util_rng_next(&rng),
                 (unsigned long long)util_rng_next(&rng));
    }
    char *stdin_data = util_asprintf("%s\n%s", nonce, job_s);
    free(job_s);
    if (!stdin_data) {
        free(program);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "code: out of memory");
    }

    static const char *const args_s[] = {"-I", "-S", "-c", RUNNER, NULL};
    static const char *const args_site[] = {"-I", "-c", RUNNER, NULL};
    sbx_file file = {"solution.py", program, strlen(program)};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = python;
    s.args = o->site_packages ? args_site : args_s;
    s.files = &file;
    s.n_files = 1;
    s.stdin_data = stdin_data;
    s.stdin_len = strlen(stdin_data);
    sbx_limits_default(&s.lim);
    if (o->timeout_s > 0) s.lim.timeout_s = o->timeout_s;
    if (o->cpu_s > 0) s.lim.cpu_s = o->cpu_s;
    if (o->mem_mb > 0) s.lim.mem_mb = o->mem_mb;
    s.mech = mech;
    s.cancel = o->cancel;
    s.cancel_user = o->cancel_user;

    sbx_result r;
    drift_error serr = {0};
    drift_status src = sbx_run(&s, &r, &serr);
    /* A wall timeout that used under half its time on the CPU may be the
     * machine's load, not the answer: run it once more before calling it a
     * timeout. A loop that spins hits the CPU limit or uses its wall time. */
    int reran = 0;
    double first_wall_ms = 0, first_cpu_ms = 0;
    if (src == DRIFT_OK && r.timed_out && r.cpu_ms < 0.5 * r.wall_ms && !(o->cancel && o->cancel(o->cancel_user))) {
        first_wall_ms = r.wall_ms;
        first_cpu_ms = r.cpu_ms;
        sbx_result_free(&r);
        reran = 1;
        src = sbx_run(&s, &r, &serr);
    }
    free(program);
    free(stdin_data);
    if (src == DRIFT_ERR_CANCELLED) {
        sbx_result_free(&r);
        drift_error_set(err, DRIFT_ERR_CANCELLED, "code: cancelled");
        return fail_out(out, DRIFT_ERR_CANCELLED, "cancelled", err);
    }

    json_t *det = json_object();
    json_object_set_new(det, "extraction", json_string(rule));
    json_object_set_new(det, "mode", json_string(mode));
    json_object_set_new(det, "program_hash", json_string(hash));
    json_object_set_new(det, "sandbox", json_string(mech_s));
    if (reran) {
        json_object_set_new(det, "reran_after_timeout", json_true());
        json_object_set_new(det, "first_wall_ms", json_real(round(first_wall_ms * 10) / 10));
        json_object_set_new(det, "first_cpu_ms", json_real(round(first_cpu_ms * 10) / 10));
    }
    if (src != DRIFT_OK) {
        json_object_set_new(det, "reason", json_string("sandbox_error"));
        json_object_set_new(det, "message", json_text(serr.msg, strlen(serr.msg)));
        sbx_result_free(&r);
        set_result(out, DRIFT_LABEL_ERROR, det);
        return DRIFT_OK;
    }
    char tail[501];
    sbx_stream_tail(&r.err, tail, sizeof tail);
    json_object_set_new(det, "wall_ms", json_real(round(r.wall_ms * 10) / 10));
    json_object_set_new(det, "cpu_ms", json_real(round(r.cpu_ms * 10) / 10));
    json_object_set_new(det, "stderr_tail", json_text(tail, strlen(tail)));
    json_object_set_new(det, "stdout_bytes", json_integer((json_int_t)r.out.total));
    if (r.exited) json_object_set_new(det, "exit_code", json_integer(r.exit_code));
    if (r.term_signal) json_object_set_new(det, "signal", json_string(sig_name(r.term_signal)));
    if (r.stray) json_object_set_new(det, "stray_processes", json_true());
    if (r.oom_kills) json_object_set_new(det, "oom_kills", json_integer(r.oom_kills));

    /* Only the runner writes the channel, and only trusted code has run when
     * it writes "ready"; everything below is decided from the channel and
     * from what the supervisor saw (exit status, signal, timer), never from
     * what the program printed. */
    char kind[16], msgb[420];
    int ready = code_chan_ready(r.chan, r.chan_len, nonce);
    int have = code_parse_verdict(r.chan, r.chan_len, nonce, kind, sizeof kind, msgb, sizeof msgb);
    const char *msg = have ? msgb : "";
    const char *reason;
    int label;
    if (!ready) {
        reason = "sandbox_error";
        label = DRIFT_LABEL_ERROR;
        snprintf(msgb, sizeof msgb, "the test runner did not start (%s%s%d)",
                 r.timed_out ? "wall timeout, " : "", r.term_signal ? "signal " : "exit code ",
                 r.term_signal ? r.term_signal : r.exit_code);
        msg = msgb;
    } else if (r.timed_out) {
        reason = "timeout";
        label = DRIFT_LABEL_FAIL;
    } else if (have && strcmp(kind, "passed") == 0) {
        /* "passed" with anything but the runner's clean exit is not a pass */
        int clean = r.exited && r.exit_code == 0;
        reason = clean ? "passed" : r.term_signal ? "killed" : "failed_test";
        label = clean ? DRIFT_LABEL_PASS : DRIFT_LABEL_FAIL;
        if (!clean) msg = "the test runner did not exit cleanly after its report";
    } else if (have && strcmp(kind, "syntax_error") == 0) {
        reason = "syntax_error";
        label = DRIFT_LABEL_FAIL;
    } else if (have && strcmp(kind, "killed") == 0) {
        reason = "killed";
        label = DRIFT_LABEL_FAIL;
    } else if (have) {
        reason = "failed_test";
        label = DRIFT_LABEL_FAIL;
    } else if (r.term_signal) {
        reason = "killed";
        label = DRIFT_LABEL_FAIL;
    } else {
        reason = "failed_test";
        label = DRIFT_LABEL_FAIL;
        msg = "the test runner ended without a verdict";
    }
    json_object_set_new(det, "reason", json_string(reason));
    if (msg[0]) {
        size_t ml = strcspn(msg, "\n");
        json_object_set_new(det, "message", json_text(msg, ml));
    }
    sbx_result_free(&r);
    set_result(out, label, det);
    return DRIFT_OK;
}

/* ---- the method (eval/evaluator.h): answers run one at a time, on the
 * score stage's threads; the state is the isolation's name
 * (drift_sandbox_check), written into each score's detail ---- */

#define CODE_MECH_CAP 128

static drift_status code_open(const eval_config *cfg, void **state, drift_error *err) {
    char *mech = calloc(1, CODE_MECH_CAP);
    if (!mech) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status rc = drift_sandbox_check(cfg->code, mech, CODE_MECH_CAP, err);
    if (rc != DRIFT_OK) {
        free(mech);
        return rc;
    }
    *state = mech;
    return DRIFT_OK;
}

static const char *code_isolation(const void *state) { return state ? (const char *)state : ""; }

static void code_key(const eval_config *cfg, const void *state, eval_key_add add, void *k) {
    const drift_code_opts *c = cfg->code;
    char num[96];
    snprintf(num, sizeof num, "%.17g/%.17g/%ld/%d/%d", c->timeout_s, c->cpu_s, c->mem_mb, c->unsafe_exec,
             c->site_packages);
    add(k, num);
    add(k, c->python);
    add(k, code_isolation(state));
}

/* Adds "sandbox": mech to a code score's detail when the evaluator did not
 * record it and the sandbox was involved (a label, or a sandbox_error);
 * not for a bad reference, which never reached the sandbox. */
static void code_note_sandbox(drift_eval_result *res, const char *mech) {
    if (!mech || !mech[0]) return;
    json_error_t je;
    json_t *d = res->detail_json ? json_loads(res->detail_json, 0, &je) : json_object();
    if (!json_is_object(d) || json_object_get(d, "sandbox")) {
        json_decref(d);
        return;
    }
    const char *reason = json_string_value(json_object_get(d, "reason"));
    if (res->label == DRIFT_LABEL_ERROR && !(reason && !strcmp(reason, "sandbox_error"))) {
        json_decref(d);
        return;
    }
    json_object_set_new(d, "sandbox", json_string(mech));
    char *s = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(d);
    if (!s) return; /* out of memory: keep the detail as it was */
    free(res->detail_json);
    res->detail_json = s;
}

/* DRIFT_ERR_CANCELLED / DRIFT_ERR_UNSUPPORTED: not judged (out cleared);
 * any other failure becomes an error label (never a fail), DRIFT_OK. */
static drift_status code_judge(const eval_config *cfg, void *state, const char *answer, const char *reference_json,
                               drift_eval_result *out, drift_error *err) {
    drift_error e = {0};
    drift_status rc = drift_eval_code(answer, reference_json, cfg->code, out, &e);
    if (rc == DRIFT_ERR_CANCELLED || rc == DRIFT_ERR_UNSUPPORTED) {
        drift_eval_result_clear(out);
        if (err) *err = e;
        return rc;
    }
    if (rc != DRIFT_OK && out->label != DRIFT_LABEL_ERROR) {
        drift_eval_result_clear(out);
        out->label = DRIFT_LABEL_ERROR;
        out->value = NAN;
        json_t *d = json_pack("{s:s, s:s}", "reason", "sandbox_error", "error", e.msg);
        out->detail_json = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
    }
    code_note_sandbox(out, code_isolation(state));
    return DRIFT_OK;
}

const eval_method eval_code_method = {.name = "code-pass@1", .how = EVAL_THREADS, .key_input = EVAL_KEY_REFERENCE,
                                      .unavailable = "code: cannot run programs: ", .no_spec = "no sandbox",
                                      .failed = "code: evaluator unavailable: ", .open = code_open,
                                      .isolation = code_isolation, .key = code_key, .judge = code_judge,
                                      .close = free};
