#!/usr/bin/env bash
# cli_global_flags.sh - --quiet/-q and --verbose/-v anywhere on the command
# line (cli/main.c): before the command, right after it, among and after
# its arguments, with getopt commands (run, compare) and hand-parsed ones
# (merge); an option's value that reads "-q" or "-v" (`--label -q`) stays
# the value; after `--` nothing is taken out; after a flag without a value
# (`--sequential -q`) the global flag is still one; and main.c's table of
# flags without a value holds every getopt no_argument option of cli/*.c.
. "$(dirname "$0")/lib.sh"

start_server "$FIX/math5_baseline.txt"
TGT="http://127.0.0.1:$PORT/v1?model=m"
DB=$T/s.db
RUN=(run --db "$DB" --target "$TGT" --suite "$FIX/math5.jsonl")

# run: the label "-q" is a value (run stays verbose), then -q after the command's arguments
"$D" "${RUN[@]}" --label -q 2> "$T/r1.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "starting run .-q.: 5 prompts" "$T/r1.err"' "--label -q: the label is '-q', not quiet (rc $rc: $(cat "$T/r1.err"))"
"$D" "${RUN[@]}" --label -v -v 2> "$T/r2.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "starting run .-v." "$T/r2.err"' "--label -v -v: label '-v', the second -v a flag (rc $rc: $(cat "$T/r2.err"))"
"$D" "${RUN[@]}" --label=-v 2> "$T/r3.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "resuming run .-v." "$T/r3.err"' "--label=-v is the same run ($(cat "$T/r3.err"))"
"$D" "${RUN[@]}" --label base -q 2> "$T/r4.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/r4.err" ]' "-q after the arguments: quiet (rc $rc: $(cat "$T/r4.err"))"
"$D" run --quiet "${RUN[@]:1}" --label base2 2> "$T/r5.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/r5.err" ]' "--quiet right after the command: quiet ($(cat "$T/r5.err"))"
"$D" run --db "$DB" -q --target "$TGT" --suite "$FIX/math5.jsonl" --label base3 2> "$T/r6.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/r6.err" ]' "-q among the arguments: quiet ($(cat "$T/r6.err"))"
"$D" -q "${RUN[@]}" --label base4 2> "$T/r7.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/r7.err" ]' "-q before the command: quiet, as before ($(cat "$T/r7.err"))"
check '[ "$(sqlite3 "$DB" "select group_concat(label, \" \") from (select label from runs order by label)")" = "-q -v base base2 base3 base4" ]' \
  "the stored labels: $(sqlite3 "$DB" "select group_concat(label, ' ') from runs")"

# merge (hand-parsed): -v anywhere is accepted, --quiet after the inputs silences it
"$D" merge -o "$T/m1.db" "$DB" -v 2> "$T/m1.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^merge: 6 runs copied" "$T/m1.err"' "merge ... -v: accepted, still talks (rc $rc: $(cat "$T/m1.err"))"
"$D" merge -o "$T/m2.db" "$DB" --quiet 2> "$T/m2.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/m2.err" ]' "merge ... --quiet: quiet (rc $rc: $(cat "$T/m2.err"))"

# compare: after a flag without a value, after --, and an unknown flag still an error
# (the runs are not scored: math is taken out of the gate, which would
# otherwise be an error for want of scores, exit 2; the gate is not the point here)
C=(compare --db "$DB" --baseline base --target base2 --budget math=none)
"$D" "${C[@]}" --sequential -v > "$T/c1.out" 2> "$T/c1.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "DriftBench sequential gate: base -> base2" "$T/c1.out"' "--sequential -v: -v is the global flag (rc $rc: $(cat "$T/c1.err"))"
"$D" "${C[@]}" -- -q > /dev/null 2> "$T/c2.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "unexpected argument .-q." "$T/c2.err"' "after --, -q is the command's argument (rc $rc: $(cat "$T/c2.err"))"
"$D" "${C[@]}" -x > /dev/null 2> "$T/c3.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown or incomplete option .-x." "$T/c3.err"' "an unknown flag is still exit 2 ($(cat "$T/c3.err"))"
"$D" "${C[@]}" --format -q > /dev/null 2> "$T/c4.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown format \"-q\"" "$T/c4.err"' "--format -q: '-q' is the format's value ($(cat "$T/c4.err"))"
"$D" --verbose compare --help -q > "$T/h.out"; rc=$?
check '[ $rc -eq 0 ] && grep -q "usage: driftbench compare" "$T/h.out"' "flags on both sides of the command with --help"

# every getopt flag without a value (no_argument in cli/*.c) is in main.c's table
missing=""
for o in $(grep -ho '{"[a-z0-9-]*", no_argument' "$S"/cli/*.c | cut -d'"' -f2 | sort -u); do
  grep -q "\"--$o\"" "$S/cli/main.c" || missing="$missing --$o"
done
check '[ -z "$missing" ]' "options without a value missing from main.c's no_value_options:$missing"

finish
