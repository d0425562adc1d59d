#!/usr/bin/env python3
"""run_cases.py - runs the CLI cases, tests/cli/*.case, against the CLI.

A case is data: the command line, the exit code, stdout and stderr byte for
byte (curl's tests/data and jq's tests in spirit):

    # what the case checks (lines starting with '#', before the fields)
    args: compare --db {TMP}/none.db --baseline a --target b
    exit: 2
    --- stdout
    --- stderr
    driftbench compare: {TMP}/none.db: no such store (no such file) (not found)

`args` is split as a shell would (quotes, no expansion). Placeholders, in
args and in the expected output: {TMP} a private empty directory (also the
working directory) made for the case, {SRC} the source tree, {PORT} a TCP
port on 127.0.0.1 nothing listens on. In the output the actual values are
replaced by the placeholders before the comparison. A section whose text
does not end with a newline has the line "\\ no newline at end" after it.

    DRIFTBENCH=build/driftbench python3 tests/cli/run_cases.py [NAME...]
    DRIFT_UPDATE_GOLDEN=1 ...   rewrites each case's exit code and output
                                from what the CLI does now (read the diff)

ctest runs it as cli_cases. Exit 0 when every case passes, 1 otherwise.
"""
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NO_NL = "\\ no newline at end\n"


def parse(path):
    head, sections, cur = [], {}, None
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    # split keeps the text after the last "\n" (empty when the file ends in one)
    lines = [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    for line in lines:
        if line.startswith("--- ") and line.strip()[4:] in ("stdout", "stderr"):
            cur = line.strip()[4:]
            sections[cur] = ""
        elif cur is None:
            head.append(line)
        else:
            sections[cur] += line
    fields = {}
    for line in head:
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    for k, v in sections.items():
        if v.endswith("\n" + NO_NL):
            sections[k] = v[: -len("\n" + NO_NL)]
        elif v == NO_NL:
            sections[k] = ""
    return head, fields, sections


def section(name, text):
    out = "--- %s\n%s" % (name, text)
    if text and not text.endswith("\n"):
        out += "\n" + NO_NL
    return out


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_case(cli, src, path, update):
    head, fields, want = parse(path)
    tmp = tempfile.mkdtemp(prefix="drift_cli_case.")
    port = str(free_port())
    subst = {"{TMP}": tmp, "{SRC}": src, "{PORT}": port}
    try:
        args = fields.get("args", "")
        for k, v in subst.items():
            args = args.replace(k, v)
        p = subprocess.run([cli] + shlex.split(args), cwd=tmp, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=float(fields.get("timeout", "60")))
        got = {}
        for name, data in (("stdout", p.stdout), ("stderr", p.stderr)):
            text = data.decode("utf-8", errors="surrogateescape")
            for k, v in subst.items():
                if k != "{PORT}":
                    text = text.replace(v, k)
            got[name] = text.replace(":" + port, ":{PORT}").replace(" " + port, " {PORT}")
        if update:
            with open(path, "w", encoding="utf-8", newline="", errors="surrogateescape") as f:
                kept = [l for l in head if not l.startswith("exit:")]
                f.write("".join(kept).rstrip("\n") + "\n")
                f.write("exit: %d\n" % p.returncode)
                f.write(section("stdout", got["stdout"]))
                f.write(section("stderr", got["stderr"]))
            return []
        problems = []
        if str(p.returncode) != fields.get("exit"):
            problems.append("exit %d, want %s" % (p.returncode, fields.get("exit")))
        for name in ("stdout", "stderr"):
            if got[name] != want.get(name, ""):
                w, g = want.get(name, ""), got[name]
                i = 0
                while i < len(w) and i < len(g) and w[i] == g[i]:
                    i += 1
                a = max(0, i - 40)
                problems.append("%s differs at character %d:\n  want: %r\n  got:  %r" % (name, i, w[a:i + 80], g[a:i + 80]))
        return problems
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    cli = os.environ.get("DRIFTBENCH")
    if not cli:
        print("set DRIFTBENCH to the CLI", file=sys.stderr)
        return 2
    cli = os.path.abspath(cli)  # the cases run in their own directories
    src = os.environ.get("DRIFT_SOURCE") or os.path.dirname(os.path.dirname(HERE))
    update = os.environ.get("DRIFT_UPDATE_GOLDEN") == "1"
    names = sys.argv[1:] or sorted(f[:-5] for f in os.listdir(HERE) if f.endswith(".case"))
    failed = 0
    for name in names:
        problems = run_case(cli, src, os.path.join(HERE, name + ".case"), update)
        if problems:
            failed += 1
            print("FAIL: %s\n  %s" % (name, "\n  ".join(problems)))
    print("cli_cases: %d passed, %d failed%s" % (len(names) - failed, failed, " (rewritten)" if update else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
