/* code.c - the code evaluator: pass@1 of a HumanEval-style answer.
 *
 * 1. Extract the program from the answer (code_extract):
 *    - fenced blocks (```python, ```py, ```python3 or a bare ```): the one
 *      that defines the entry point, else the first;
 *    - otherwise the whole answer.
 *    If the code defines `def ENTRY(` it is a standalone solution and runs
 *    after the prompt (the prompt ends with the stub's docstring, which is a
 *    complete function, so the answer's definition replaces it while the
 *    prompt's imports and helper functions stay); else it is a completion
 *    that continues the prompt (HumanEval convention): prompt + completion.
 *    Then the reference's tests (`test` or `test_cases`, defining
 *    check(candidate)) and `check(ENTRY)` are appended.
 * 2. Run it in the sandbox (sandbox.c) through a small runner that compiles
 *    the program first (SyntaxError -> syntax_error), executes it (any
 *    exception -> failed_test) and reports on fd 3 with a per-run nonce read
 *    from stdin, so an answer that calls exit(0) early cannot pass.
 * 3. Verdict: passed, failed_test, syntax_error, timeout, killed (signal),
 *    or sandbox_error (DRIFT_LABEL_ERROR, never a fail). The detail keeps the
 *    reason, the extraction rule, the program hash, exit code / signal, wall
 *    time, the runner's message and the last 500 bytes of stderr. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

#include "driftbench/eval.h"
#include "eval/sandbox.h"
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

/* ---- extraction ---- */

/* Does code contain "def NAME(" at the start of a line (any indentation)? */
static int defines(const char *code, size_t len, const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i + 4 + nl < len; i++) {
        if (i > 0 && code[i - 1] != '\n' && code[i - 1] != ' ' && code[i - 1] != '\t') continue;
        if (strncmp(code + i, "def ", 4) != 0) continue;
        size_t j = i + 4;
        while (j < len && code[j] == ' ') j++;
        if (j + nl < len && strncmp(code + j, name, nl) == 0) {
            size_t k = j + nl;
            while (k < len && code[k] == ' ') k++;
            if (k < len && code[k] == '(') return 1;
        }
    }
    return 0;
}

static int python_lang(const char *tag, size_t n) {
    while (n && (tag[n - 1] == ' ' || tag[n - 1] == '\t' || tag[n - 1] == '\r')) n--;
    while (n && (*tag == ' ' || *tag == '\t')) { tag++; n--; }
    if (n == 0) return 1;
    static const char *const ok[] = {"python", "py", "python3", "Python", "Python3"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strlen(ok[i]) == n && strncmp(tag, ok[i], n) == 0) return 1;
    return 0;
}

/* Chooses the code of the answer: a fenced block (see above) or the whole
 * answer. Sets *start, *len into answer; returns the rule name. */
static const char *pick_code(const char *answer, const char *entry, const char **start, size_t *len) {
    const char *first = NULL, *best = NULL;
    size_t first_len = 0, best_len = 0;
    const char *p = answer;
    while ((p = strstr(p, "```")) != NULL) {
        const char *tag = p + 3;
        const char *eol = strchr(tag, '\n');
        if (!eol) break;
        const char *body = eol + 1;
        const char *end = strstr(body, "```");
        size_t blen = end ? (size_t)(end - body) : strlen(body);
        if (python_lang(tag, (size_t)(eol - tag))) {
            if (!first) {
                first = body;
                first_len = blen;
            }
            if (!best && entry && defines(body, blen, entry)) {
                best = body;
                best_len = blen;
            }
        }
        if (!end) break;
        p = end + 3;
    }
    if (best) {
        *start = best;
        *len = best_len;
        return "fenced";
    }
    if (first) {
        *start = first;
        *len = first_len;
        return "fenced";
    }
    *start = answer;
    *len = strlen(answer);
    return "raw";
}

/* Builds the program; returns malloc'd text and sets *rule. */
static char *build_program(const char *answer, const char *prompt, const char *tests, const char *entry,
                           const char **rule, const char **mode) {
    const char *code;
    size_t clen;
    *rule = pick_code(answer, entry, &code, &clen);
    drift_buf b = {0};
    int standalone = defines(code, clen, entry);
    *mode = standalone ? "standalone" : "continuation";
    buf_puts(&b, prompt);
    if (standalone && b.len && b.data[b.len - 1] != '\n') buf_puts(&b, "\n");
    if (standalone) buf_puts(&b, "\n");
    buf_append(&b, code, clen);
    buf_puts(&b, "\n\n");
    buf_puts(&b, tests);
    buf_printf(&b, "\n\ncheck(%s)\n", entry);
    return buf_steal(&b);
}

/* ---- the runner ---- */

static const char RUNNER[] =
    "import sys, os\n"
    "_nonce = sys.stdin.readline().strip()\n"
    "def _report(kind, msg=''):\n"
    "    try:\n"
    "        line = '%s %s %s\\n' % (kind, _nonce, msg.replace('\\n', ' ')[:400])\n"
    "        os.write(3, line.encode('utf-8', 'replace'))\n"
    "    except BaseException:\n"
    "        pass\n"
    "def _describe(e):\n"
    "    try:\n"
    "        return '%s: %s' % (type(e).__name__, e)\n"
    "    except BaseException:\n"
    "        return type(e).__name__\n"
    "try:\n"
    "    with open('solution.py', 'rb') as f:\n"
    "        _src = f.read()\n"
    "    _code = compile(_src, 'solution.py', 'exec')\n"
    "except (SyntaxError, ValueError) as e:\n"
    "    _report('syntax_error', _describe(e))\n"
    "    sys.exit(3)\n"
    "_g = {'__name__': '__solution__', '__builtins__': __builtins__}\n"
    "try:\n"
    "    exec(_code, _g)\n"
    "except BaseException as e:\n"
    "    import traceback\n"
    "    traceback.print_exc()\n"
    "    _report('failed_test', _describe(e))\n"
    "    sys.exit(1)\n"
    "_report('passed')\n";

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

/* Finds the runner's report carrying the nonce: "KIND NONCE message". */
static const char *chan_verdict(const char *chan, const char *nonce, const char **msg) {
    static const char *const kinds[] = {"passed", "failed_test", "syntax_error"};
    const char *line = chan;
    size_t nl = strlen(nonce);
    while (line && *line) {
        for (size_t i = 0; i < 3; i++) {
            size_t kl = strlen(kinds[i]);
            if (strncmp(line, kinds[i], kl) == 0 && line[kl] == ' ' && strncmp(line + kl + 1, nonce, nl) == 0 &&
                (line[kl + 1 + nl] == ' ' || line[kl + 1 + nl] == '\n')) {
                *msg = line[kl + 1 + nl] == ' ' ? line + kl + 2 + nl : "";
                return kinds[i];
            }
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    return NULL;
}

/* A JSON string of bytes that may not be valid UTF-8 (a tail cut in the
 * middle of a character, binary output): invalid bytes become '?'. */
static json_t *json_text(const char *p, size_t n) {
    json_t *j = json_stringn(p, n);
    if (j) return j;
    char *c = drift_strndup(p, n);
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
    char *program = build_program(answer, prompt, tests, entry, &rule, &mode);
    json_decref(ref);
    if (!program) return drift_error_set(err, DRIFT_ERR_NOMEM, "code: out of memory");
    char hash[17];
    drift_hash_hex(program, strlen(program), hash);

    /* nonce: not derivable from the program */
    char nonce[40];
    {
        drift_rng rng;
        static __thread uint64_t counter;
        drift_rng_seed(&rng, (uint64_t)(drift_now_ms() * 1e3) ^ ((uint64_t)getpid() << 32) ^
                                 (uint64_t)(uintptr_t)&rng ^ (++counter * 0x9E3779B97F4A7C15ull));
        snprintf(nonce, sizeof nonce, "%016llx%016llx", (unsigned long long)drift_rng_next(&rng),
                 (unsigned long long)drift_rng_next(&rng));
    }
    char stdin_line[48];
    snprintf(stdin_line, sizeof stdin_line, "%s\n", nonce);

    static const char *const args_s[] = {"-I", "-S", "-c", RUNNER, NULL};
    static const char *const args_site[] = {"-I", "-c", RUNNER, NULL};
    sbx_file file = {"solution.py", program, strlen(program)};
    sbx_spec s;
    memset(&s, 0, sizeof s);
    s.python = python;
    s.args = o->site_packages ? args_site : args_s;
    s.files = &file;
    s.n_files = 1;
    s.stdin_data = stdin_line;
    s.stdin_len = strlen(stdin_line);
    sbx_limits_default(&s.lim);
    if (o->timeout_s > 0) s.lim.timeout_s = o->timeout_s;
    if (o->cpu_s > 0) s.lim.cpu_s = o->cpu_s;
    if (o->mem_mb > 0) s.lim.mem_mb = o->mem_mb;
    s.mech = mech;

    sbx_result r;
    drift_error serr = {0};
    drift_status src = sbx_run(&s, &r, &serr);
    free(program);

    json_t *det = json_object();
    json_object_set_new(det, "extraction", json_string(rule));
    json_object_set_new(det, "mode", json_string(mode));
    json_object_set_new(det, "program_hash", json_string(hash));
    json_object_set_new(det, "sandbox", json_string(mech_s));
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
    json_object_set_new(det, "stderr_tail", json_text(tail, strlen(tail)));
    json_object_set_new(det, "stdout_bytes", json_integer((json_int_t)r.out.total));
    if (r.exited) json_object_set_new(det, "exit_code", json_integer(r.exit_code));
    if (r.term_signal) json_object_set_new(det, "signal", json_string(sig_name(r.term_signal)));
    if (r.stray) json_object_set_new(det, "stray_processes", json_true());
    if (r.oom_kills) json_object_set_new(det, "oom_kills", json_integer(r.oom_kills));

    const char *msg = "";
    const char *v = chan_verdict(r.chan, nonce, &msg);
    const char *reason;
    int label;
    if (r.timed_out) {
        reason = "timeout";
        label = DRIFT_LABEL_FAIL;
    } else if (v && strcmp(v, "passed") == 0 && r.exited) {
        reason = "passed";
        label = DRIFT_LABEL_PASS;
    } else if (v && strcmp(v, "syntax_error") == 0) {
        reason = "syntax_error";
        label = DRIFT_LABEL_FAIL;
    } else if (r.term_signal) {
        reason = "killed";
        label = DRIFT_LABEL_FAIL;
    } else if (v) {
        reason = "failed_test";
        label = DRIFT_LABEL_FAIL;
    } else if (r.exited && r.exit_code == 1 && strncmp(r.err.head, "bwrap:", 6) == 0) {
        reason = "sandbox_error";
        label = DRIFT_LABEL_ERROR;
        msg = "bubblewrap failed";
    } else {
        /* exited without the runner's report: os._exit, exit() inside the
         * program, or the interpreter died before the tests ran */
        reason = "failed_test";
        label = DRIFT_LABEL_FAIL;
        msg = "the program exited before the tests completed";
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
