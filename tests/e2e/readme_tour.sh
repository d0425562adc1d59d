#!/usr/bin/env bash
# readme_tour.sh - the README's tour runs as written, so it cannot rot.
#
# README.md's fenced blocks, read in order:
#   - the first is exactly `make lab` / `make test` (the two commands), and
#     the Makefile still has both (make -n prints the lab and ctest);
#   - every other block is either ```text (output, prose) or follows a
#     `<!-- tour -->` line: a command block, run here in order, each with
#     `bash -e -o pipefail` in one directory that holds only `build` (this
#     build) and `models` (the shipped models), as a fresh clone after
#     `make lab` would; no ../shared beside it, and a block that names
#     ../ or a network address is refused. `<!-- tour exit=0,1,3 -->`
#     allows those exit codes (a verdict: 1 block, 3 inconclusive);
#     default 0;
#   - a ```text block after `<!-- tour output -->` is output of the tour
#     block before it: each of its lines but "..." must be a line of what
#     that block printed (stdout and stderr), so pasted output stays real.
. "$(dirname "$0")/lib.sh"
readme=$S/README.md
[ -f "$readme" ] || fail "no $readme"
work=$T/clone
mkdir -p "$work" "$T/blocks"
ln -s "$B" "$work/build"
ln -s "$S/models" "$work/models"

# split the README: $T/blocks/N.sh (tour), N.out (output to check), plan lines
python3 - "$readme" "$T/blocks" >"$T/plan" <<'EOF' || fail "cannot read the README's blocks"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
out = sys.argv[2]
blocks, i = [], 0
while i < len(lines):
    m = re.match(r"^```(\S*)\s*$", lines[i])
    if not m:
        i += 1
        continue
    start, lang = i, m.group(1)
    j = i + 1
    while j < len(lines) and lines[j].rstrip() != "```":
        j += 1
    if j == len(lines):
        print(f"bad {start + 1} unterminated fenced block")
        sys.exit(0)
    k = start - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    marker = lines[k].strip() if k >= 0 and lines[k].strip().startswith("<!-- tour") else ""
    blocks.append((start + 1, lang, marker, lines[start + 1:j]))
    i = j + 1
if not blocks:
    print("bad 0 no fenced block")
    sys.exit(0)
first = blocks[0]
if [l.strip() for l in first[3]] != ["make lab", "make test"]:
    print(f"bad {first[0]} the first block is not exactly `make lab` / `make test`")
for n, (line, lang, marker, body) in enumerate(blocks[1:], 1):
    if marker.startswith("<!-- tour output"):
        if lang != "text":
            print(f"bad {line} a tour output block must be ```text")
        open(f"{out}/{n}.out", "w").write("\n".join(body) + "\n")
        print(f"output {n} {line}")
    elif marker.startswith("<!-- tour"):
        m = re.match(r"<!-- tour(?: exit=([0-9,]+))? -->$", marker)
        if not m:
            print(f"bad {line} unknown marker {marker}")
            continue
        text = "\n".join(body)
        if re.search(r"\.\./|https?://(?!127\.0\.0\.1|localhost)", text):
            print(f"bad {line} a tour block reaches outside the clone (../ or a remote address)")
            continue
        open(f"{out}/{n}.sh", "w").write(text + "\n")
        print(f"run {n} {line} {m.group(1) or '0'}")
    elif lang != "text":
        print(f"bad {line} a ```{lang} block that the tour does not run (mark it <!-- tour --> or make it ```text)")
EOF
grep '^bad' "$T/plan" | while read -r _ line why; do echo "FAIL: README.md:$line: $why"; done
check '! grep -q "^bad" "$T/plan"' "the README's blocks are the tour's"
runs=$(grep -c '^run ' "$T/plan")
check '[ "$runs" -ge 5 ]' "the tour has $runs command blocks (5 at least: two measures, a compare, runs, suites)"

# the two commands stay true
if command -v make >/dev/null; then
    make -n -C "$S" lab BUILD="$B" >"$T/make.lab" 2>&1
    check 'grep -q "driftbench lab" "$T/make.lab"' "make -n lab runs driftbench lab"
    make -n -C "$S" test BUILD="$B" >"$T/make.test" 2>&1
    check 'grep -q "ctest" "$T/make.test"' "make -n test runs ctest"
fi

# run the tour in order
last=
start=$(date +%s)
while read -r kind n line codes; do
    case $kind in
    run)
        (cd "$work" && bash -e -o pipefail "$T/blocks/$n.sh") >"$T/blocks/$n.log" 2>&1
        rc=$?
        case ",$codes," in
        *",$rc,"*) ok ;;
        *) bad "README.md:$line: the block exited $rc (allowed: $codes)"; tail -20 "$T/blocks/$n.log" ;;
        esac
        last=$n
        ;;
    output)
        if [ -z "$last" ]; then bad "README.md:$line: output with no tour block before it"; continue; fi
        missing=0
        while IFS= read -r want; do
            case "${want//[[:space:]]/}" in ''|'...') continue ;; esac   # a line of "..." stands for lines left out
            grep -qxF -- "$want" "$T/blocks/$last.log" || { missing=$((missing + 1)); [ $missing -le 5 ] && echo "  not printed: $want"; }
        done <"$T/blocks/$n.out"
        check '[ $missing = 0 ]' "README.md:$line: $missing line(s) of the output shown are not what the tour printed (run it again and paste)"
        ;;
    esac
done < <(grep -E '^(run|output) ' "$T/plan")
echo "the tour's $runs blocks ran in $(( $(date +%s) - start )) s"
# what the tour leaves: the store with its four runs, the page
check '[ "$(sqlite3 "$work/tour.db" "select count(*) from runs")" = 4 ]' "tour.db holds the tour's four runs"
check '[ -s "$work/report.html" ]' "the report page was written"
finish
