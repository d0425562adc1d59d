#!/usr/bin/env python3
"""check-layers.py [ROOT] - the layer rules of tools/layers/layers.txt over
the #include lines of src/, cli/ and include/ (ctest `layers`).

Each #include "..." of a file is resolved as the compiler would (the file's
own directory, then include/, then src/ for the library, cli/ for the CLI)
and named by the module it belongs to; an arrow the data file says `never`
fails the check (exit 1, one line per include: file:line: FROM -> TO, the
rule). Arrows listed `pending` are reported and pass; a pending arrow that
no longer occurs is reported too, so the list can be emptied. It also
checks that every public header has a `header` line and that every function
and variable a public header declares carries DRIFT_API (status.h), which
-fvisibility=hidden needs to export it."""
import fnmatch
import glob
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def load_rules(path):
    headers, nevers, pending = {}, [], set()
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        w = line.split()
        if w[0] == "header" and len(w) == 3:
            headers[w[1]] = w[2]
        elif w[0] in ("never", "pending") and len(w) >= 4 and w[2] == "->":
            src, rest = w[1], w[3:]
            exc = []
            if "except" in rest:
                i = rest.index("except")
                rest, exc = rest[:i], rest[i + 1:]
            if w[0] == "never":
                nevers.append((src, set(rest), exc, n))
            else:
                for t in rest:
                    pending.add((src, t))
        else:
            sys.exit(f"{path}:{n}: cannot read: {raw.rstrip()}")
    return headers, nevers, pending


def module_of_file(rel):
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "cli":
        return "cli"
    if parts[0] == "include":
        return "include"
    return None


def resolve(root, rel, inc):
    """The repository path an #include "inc" of file rel resolves to, or None."""
    here = os.path.dirname(rel)
    dirs = [here, "include"]
    dirs += ["cli"] if rel.startswith("cli/") else ["src"]
    for d in dirs:
        p = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(root, p)):
            return p
    # not found where it may be looked for: is it the other side's header?
    for d in ("src", "cli"):
        p = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(root, p)):
            return "unreachable:" + p
    return None


def target_module(headers, path):
    """(module, is_private) of a resolved header path."""
    if path.startswith("include/driftbench/"):
        return headers.get(os.path.basename(path), "?"), False
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2:
        base = parts[-1]
        return parts[1], base.endswith("_internal.h") or base.endswith("_impl.h")
    if parts[0] == "cli":
        return "cli", False
    return "?", False


def check_api(root):
    """Public declarations without DRIFT_API."""
    bad = []
    for f in sorted(glob.glob(os.path.join(root, "include/driftbench/*.h"))):
        s = open(f, encoding="utf-8").read()
        s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
        s = re.sub(r"//[^\n]*", " ", s)
        s = re.sub(r"\\\n", " ", s)
        s = "\n".join(l for l in s.split("\n")
                      if not l.strip().startswith("#") and not l.strip().startswith('extern "C"')
                      and l.strip() != "}")
        depth, cur = 0, ""
        for ch in s:
            depth += (ch == "{") - (ch == "}")
            cur += ch
            if depth == 0 and ch == ";":
                st = " ".join(cur.split())
                cur = ""
                if st.startswith("typedef") or st.startswith("}"):
                    continue
                if ("(" in st or st.startswith("extern")) and "DRIFT_API" not in st:
                    bad.append(f"{os.path.relpath(f, root)}: declared without DRIFT_API: {st[:100]}")
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), "..", ".."))
    headers, nevers, pending = load_rules(os.path.join(root, "tools/layers/layers.txt"))
    errors, seen_pending = [], {}
    for h in sorted(glob.glob(os.path.join(root, "include/driftbench/*.h"))):
        if os.path.basename(h) not in headers:
            errors.append(f"include/driftbench/{os.path.basename(h)}: no `header` line in layers.txt")
    files = []
    for pat in ("src/**/*.c", "src/**/*.h", "src/**/*.cu", "src/**/*.cuh", "cli/*.c", "cli/*.h",
                "include/driftbench/*.h"):
        files += glob.glob(os.path.join(root, pat), recursive=True)
    for f in sorted(set(files)):
        rel = os.path.relpath(f, root)
        fmod = module_of_file(rel)
        if fmod == "include":
            fmod = headers.get(os.path.basename(rel), "?")
        for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            inc = m.group(1)
            path = resolve(root, rel, inc)
            if path is None:
                continue   # a generated or system header: not ours
            arrows = []    # (kind, from, to) this include makes
            if path.startswith("unreachable:"):
                path = path.split(":", 1)[1]
                if rel.startswith("src/") and path.startswith("cli/"):
                    arrows.append(("src", "cli"))
            tmod, private = target_module(headers, path)
            if rel.startswith("cli/") and not (path.startswith("include/") or path.startswith("cli/")):
                arrows.append(("cli", "src"))
            if private and tmod != fmod:
                arrows.append(("*", "internals"))
            if tmod != fmod:
                arrows.append((fmod, tmod))
            for a_from, a_to in dict.fromkeys(arrows):
                for src, tos, exc, rn in nevers:
                    if src != a_from and not (src == "*" and a_to == "internals"):
                        if not (src == "*" and a_from not in ("src",) and a_to in tos):
                            continue
                    if not (a_to in tos or ("*" in tos and a_to not in ("util", "internals"))):
                        continue
                    if any(fnmatch.fnmatch(rel, g) for g in exc):
                        continue
                    arrow = f"{a_from} -> {a_to}"
                    where = f"{rel}:{n}: {arrow} (#include \"{inc}\"; layers.txt:{rn})"
                    if (a_from, a_to) in pending:
                        seen_pending.setdefault((a_from, a_to), []).append(where)
                    else:
                        errors.append(where)
                    break
    errors += check_api(root)
    for (a, b) in sorted(pending):
        hits = seen_pending.get((a, b), [])
        if hits:
            print(f"pending {a} -> {b}: {len(hits)} include(s), being removed:")
            for h in hits:
                print("  " + h)
        else:
            print(f"pending {a} -> {b}: gone; remove it from tools/layers/layers.txt")
    if errors:
        print(f"check-layers: {len(errors)} violation(s) of tools/layers/layers.txt:", file=sys.stderr)
        for e in errors:
            print("  " + e, file=sys.stderr)
        return 1
    print("check-layers: every #include keeps the layer rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
