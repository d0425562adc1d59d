#!/usr/bin/env bash
# lab_write_fail.sh - `driftbench lab` when a file of its report cannot be
# written: exit 2 with a message naming the path (it used to say so and exit
# 0). Before the matrix runs (DIR/matrix.json) the lab stops at once and
# generates nothing; after it (DIR/report.html) the other files are still
# written. The tests run as root, whom mode bits do not stop, so "cannot be
# written" is a path under a regular file (--out FILE) or a path that is a
# directory.
set -uo pipefail
: "${DRIFTBENCH:?set DRIFTBENCH to the CLI}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"            # no models/ here: the lab falls back to the fixtures
fail() { echo "FAIL: $*"; for f in "$work"/*.out "$work"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }

# 1. --out is a regular file: nothing under it can be written
touch "$work/afile"
"$DRIFTBENCH" lab --quick --limit 1 --max-tokens 2 --out "$work/afile" >"$work/1.out" 2>"$work/1.err"
rc=$?
[ "$rc" = 2 ] || fail "--out FILE exited $rc, want 2"
grep -q "^driftbench lab: cannot write $work/afile/matrix.json: Not a directory\$" "$work/1.err" || fail "no message naming $work/afile/matrix.json"
! grep -q '^size:' "$work/1.out" || fail "--out FILE went on past the matrix"

# 2. DIR/matrix.json is a directory: stops before the store or any run
mkdir -p "$work/d2/matrix.json"
"$DRIFTBENCH" lab --quick --limit 1 --max-tokens 2 --out "$work/d2" >"$work/2.out" 2>"$work/2.err"
rc=$?
[ "$rc" = 2 ] || fail "unwritable matrix.json exited $rc, want 2"
grep -q "^driftbench lab: cannot write $work/d2/matrix.json: Is a directory\$" "$work/2.err" || fail "no message naming $work/d2/matrix.json"
[ ! -e "$work/d2/lab.db" ] || fail "a store was made though matrix.json could not be written"

# 3. DIR/report.html is a directory: the lab runs, writes the rest, exits 2
mkdir -p "$work/d3/report.html"
"$DRIFTBENCH" lab --quick --limit 1 --max-tokens 2 --out "$work/d3" >"$work/3.out" 2>"$work/3.err"
rc=$?
[ "$rc" = 2 ] || fail "unwritable report.html exited $rc, want 2"
grep -q "^driftbench lab: cannot write $work/d3/report.html: Is a directory\$" "$work/3.err" || fail "no message naming $work/d3/report.html"
for f in lab.db matrix.json flip_rates.csv anova.txt summary.txt cuts.txt stochastic.txt; do
    [ -s "$work/d3/$f" ] || fail "$f not written beside the unwritable report"
done
echo "PASS: lab exits 2 naming a report file it cannot write (3 cases)"
