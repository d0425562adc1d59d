#!/usr/bin/env bash
# lab_write_fail.sh - `driftbench lab` when a file of its report cannot be
# written: exit 2 with a message naming the path (it used to say so and exit
# 0). Before the matrix runs (DIR/matrix.json) the lab stops at once and
# generates nothing; after it (DIR/report.html) the other files are still
# written. The tests run as root, whom mode bits do not stop, so "cannot be
# written" is a path under a regular file (--out FILE) or a path that is a
# directory.
. "$(dirname "$0")/lib.sh"
cd "$T"               # no models/ here: the lab falls back to the fixtures
# fatal, with what the lab printed
die() { for f in "$T"/*.out "$T"/*.err; do echo "--- $f"; cat "$f"; done; fail "$@"; }

# 1. --out is a regular file: nothing under it can be written
touch "$T/afile"
"$D" lab --quick --limit 1 --max-tokens 2 --out "$T/afile" >"$T/1.out" 2>"$T/1.err"
rc=$?
[ "$rc" = 2 ] || die "--out FILE exited $rc, want 2"
grep -q "^driftbench lab: cannot write $T/afile/matrix.json: Not a directory\$" "$T/1.err" || die "no message naming $T/afile/matrix.json"
! grep -q '^size:' "$T/1.out" || die "--out FILE went on past the matrix"

# 2. DIR/matrix.json is a directory: stops before the store or any run
mkdir -p "$T/d2/matrix.json"
"$D" lab --quick --limit 1 --max-tokens 2 --out "$T/d2" >"$T/2.out" 2>"$T/2.err"
rc=$?
[ "$rc" = 2 ] || die "unwritable matrix.json exited $rc, want 2"
grep -q "^driftbench lab: cannot write $T/d2/matrix.json: Is a directory\$" "$T/2.err" || die "no message naming $T/d2/matrix.json"
[ ! -e "$T/d2/lab.db" ] || die "a store was made though matrix.json could not be written"

# 3. DIR/report.html is a directory: the lab runs, writes the rest, exits 2
mkdir -p "$T/d3/report.html"
"$D" lab --quick --limit 1 --max-tokens 2 --out "$T/d3" >"$T/3.out" 2>"$T/3.err"
rc=$?
[ "$rc" = 2 ] || die "unwritable report.html exited $rc, want 2"
grep -q "^driftbench lab: cannot write $T/d3/report.html: Is a directory\$" "$T/3.err" || die "no message naming $T/d3/report.html"
for f in lab.db matrix.json flip_rates.csv anova.txt summary.txt cuts.txt stochastic.txt; do
    [ -s "$T/d3/$f" ] || die "$f not written beside the unwritable report"
done
ok
finish
