#!/usr/bin/env bash
# progress.sh - progress without a terminal (stderr to a file, as in CI
# logs) and on one (script(1)'s pseudo-terminal, skipped without it):
# DRIFT_PROGRESS_SECS's periodic lines with counts, rate, elapsed and time
# left, then the final line; none in a quick command at the default
# interval; -v's line per request (run, measure) and the final line of
# score; --quiet silences it all; stdout stays the command's output; a bad
# DRIFT_PROGRESS_SECS is exit 2. Against the embedded target with the tiny
# model (tests/data/models/tiny-qwen2-f16.gguf).
. "$(dirname "$0")/lib.sh"

model="$S/tests/data/models/tiny-qwen2-f16.gguf"
[ -f "$model" ] || fail "no $model"
TGT="embedded:$model?profile=ref"
N=40
RUN=(run --suite builtin:math --limit $N --max-tokens 16 --target "$TGT")

# periodic lines at a short interval, then the final line
DRIFT_PROGRESS_SECS=0.002 "$D" "${RUN[@]}" --db "$T/a.db" --label p > "$T/p.out" 2> "$T/p.err"; rc=$?
check '[ $rc -eq 0 ]' "run: rc $rc ($(cat "$T/p.err"))"
check '[ ! -s "$T/p.out" ]' "stdout stays empty: $(cat "$T/p.out")"
periodic='^run '"'"'p'"'"': [0-9]+/'$N' \([0-9]+%\)  ([0-9.]+/(s|min)|--/s)  ([0-9]+|--) tokens/s  elapsed [0-9]+:[0-9]{2}  left ([0-9]+:[0-9]{2}|--)$'
np=$(grep -cE "$periodic" "$T/p.err")
check '[ "$np" -ge 1 ]' "at least one periodic line ($np): $(cat "$T/p.err")"
check 'grep -qE "^run '"'"'p'"'"': '$N'/'$N' in [0-9]+:[0-9]{2} \([0-9.]+/(s|min), [0-9]+ tokens/s on average\)$" "$T/p.err"' \
  "the final line: $(cat "$T/p.err")"
# the order: starting line, periodic lines, final line, the answers line
order=$(sed -E "s/^run 'p': [0-9]+\/$N \(.*/P/; s/^run 'p': $N\/$N in .*/F/; s/^starting run .*/S/; s/^run 'p': $N answers.*/A/" "$T/p.err" | uniq | tr -d '\n')
check '[ "$order" = "SPFA" ]' "lines in order start, periodic, final, answers: '$order' ($(cat "$T/p.err"))"
check '! grep -q "$(printf "\r")" "$T/p.err"' "no carriage return (no bar) without a terminal"

# the default interval (10 s): a quick run prints what it printed before, nothing more
"$D" "${RUN[@]}" --db "$T/b.db" --label q 2> "$T/q.err"; rc=$?
check '[ $rc -eq 0 ] && [ "$(wc -l < "$T/q.err")" -eq 2 ]' "default interval: two lines only (rc $rc): $(cat "$T/q.err")"
check 'grep -q "^starting run .q.: '$N' prompts" "$T/q.err" && grep -q "^run .q.: '$N' answers, 0 errors stored$" "$T/q.err"' \
  "default interval: the start and answers lines: $(cat "$T/q.err")"

# -v: one line per request, then the final line
"$D" -v "${RUN[@]}" --db "$T/c.db" --label v 2> "$T/v.err"; rc=$?
reqline='^run '"'"'v'"'"' [0-9]+/'$N': builtin-math-test-[0-9]+ #0 ok( \((stop|length)\))?, 1 attempt, [0-9.]+ (ms|s), [0-9]+\+[0-9]+ tokens$'
nv=$(grep -cE "$reqline" "$T/v.err")
check '[ $rc -eq 0 ] && [ "$nv" -eq $N ]' "-v: $N request lines ($nv, rc $rc): $(head -5 "$T/v.err")"
nids=$(grep -oE "builtin-math-test-[0-9]+ #0" "$T/v.err" | sort -u | wc -l)
check '[ "$nids" -eq $N ]' "-v: each prompt once ($nids distinct)"
check 'grep -qE "^run .v.: '$N'/'$N' in " "$T/v.err"' "-v: the final line even for a quick run"
# a resumed run with nothing missing asks nothing: no request line
"$D" -v "${RUN[@]}" --db "$T/c.db" --label v 2> "$T/v2.err"; rc=$?
check '[ $rc -eq 0 ] && ! grep -qE "$reqline" "$T/v2.err"' "-v, nothing to ask: no request line ($(cat "$T/v2.err"))"

# score -v: the score stage's final line
"$D" -v score --db "$T/c.db" --label v > "$T/s.out" 2> "$T/s.err"; rc=$?
check '[ $rc -eq 0 ] && grep -qE "^score: '$N'/'$N' in [0-9]+:[0-9]{2} " "$T/s.err"' "score -v: its final line (rc $rc): $(cat "$T/s.err")"

# measure -v: the request lines of both runs
"$D" -v measure --db "$T/m.db" --baseline "$TGT" --target "$TGT&weights=q8_0" --suite builtin:math --limit 6 \
  --max-tokens 8 > "$T/m.out" 2> "$T/m.err"; rc=$?
nb=$(grep -cE "^run 'baseline' [0-9]+/6: builtin-math-test-[0-9]+ #0 ok" "$T/m.err")
nt=$(grep -cE "^run 'target' [0-9]+/6: builtin-math-test-[0-9]+ #0 ok" "$T/m.err")
check '[ $rc -ne 2 ] && [ "$nb" -eq 6 ] && [ "$nt" -eq 6 ]' "measure -v: 6 + 6 request lines ($nb, $nt; rc $rc): $(cat "$T/m.err")"

# -v against a server answering some requests 500: the failed ones say so, with their attempts
python3 - "$T/f.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(4):
        f.write(json.dumps({"prompt_id": "q%d" % i, "prompt": "Compute ANSWER=%d" % i + (" BROKEN" if i == 1 else ""),
                            "answer": str(i)}) + "\n")
PY
printf 'default | echo\nfault | BROKEN | 500\n' > "$T/faults.txt"
start_server "$T/faults.txt" --model served
"$D" -v run --db "$T/h.db" --label fv --target "http://127.0.0.1:$PORT/v1?model=served" --suite "$T/f.jsonl" \
  --retries 1 2> "$T/fv.err"; rc=$?
check '[ $rc -eq 0 ] && grep -qE "^run .fv. [0-9]/4: q1 #0 failed: HTTP 500 after 2 attempts: .*, 2 attempts, [0-9.]+ (ms|s)$" "$T/fv.err"' \
  "-v: the failed request's line (rc $rc): $(cat "$T/fv.err")"
check '[ "$(grep -cE "^run .fv. [0-9]/4: q[023] #0 ok( \((stop|length)\))?, 1 attempt, " "$T/fv.err")" -eq 3 ]' "-v: the three answered ($(cat "$T/fv.err"))"
check 'grep -qE "^run .fv.: 4/4 in [0-9]+:[0-9]{2} \(.*\), 1 failed$" "$T/fv.err"' "-v: the final line counts the failed one"

# one slow request (a server that waits 3 s): the periodic lines come while
# the stage waits on it, not only when an answer comes back
printf 'default | echo\nfault | * | sleep | seconds=3\n' > "$T/slow.txt"
start_server "$T/slow.txt" --model served
DRIFT_PROGRESS_SECS=0.5 "$D" run --db "$T/sl.db" --label slow --target "http://127.0.0.1:$PORT/v1?model=served" \
  --suite "$T/f.jsonl" --limit 1 2> "$T/sl.err"; rc=$?
nw=$(grep -cE "^run 'slow': 0/1 \(0%\)  --/s(  (--|0) tokens/s)?  elapsed 0:0[0-9]  left --$" "$T/sl.err")
check '[ $rc -eq 0 ] && [ "$nw" -ge 3 ]' "a slow request: periodic lines while it waits ($nw, rc $rc): $(cat "$T/sl.err")"
check 'grep -qE "^run .slow.: 1/1 in 0:0[0-9] " "$T/sl.err"' "a slow request: then the final line ($(cat "$T/sl.err"))"

# --quiet: nothing at all, even with -v and a short interval
DRIFT_PROGRESS_SECS=0.01 "$D" -q -v "${RUN[@]}" --db "$T/d.db" --label quiet 2> "$T/quiet.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/quiet.err" ]' "--quiet: nothing on stderr (rc $rc): $(cat "$T/quiet.err")"

# 0: no periodic line
DRIFT_PROGRESS_SECS=0 "$D" "${RUN[@]}" --db "$T/e.db" --label z 2> "$T/z.err"; rc=$?
check '[ $rc -eq 0 ] && [ "$(wc -l < "$T/z.err")" -eq 2 ]' "DRIFT_PROGRESS_SECS=0: no periodic line: $(cat "$T/z.err")"

# a bad interval is exit 2, named
for bad in abc -1 10s 1e9; do
  DRIFT_PROGRESS_SECS=$bad "$D" "${RUN[@]}" --db "$T/f.db" --label bad 2> "$T/bad.err"; rc=$?
  check '[ $rc -eq 2 ] && grep -q "DRIFT_PROGRESS_SECS=.'"$bad"'.: expected seconds" "$T/bad.err"' \
    "DRIFT_PROGRESS_SECS=$bad: exit 2 (rc $rc): $(cat "$T/bad.err")"
done
check '[ ! -e "$T/f.db" ]' "a bad interval stops before anything is stored"

# on a terminal: the bar, redrawn in place, with the rate's and time left's fields
if command -v script > /dev/null 2>&1; then
  script -qc "$(printf '%q ' "$D" "${RUN[@]}" --db "$T/g.db" --label tty)" /dev/null > "$T/tty.out" 2>&1; rc=$?
  bars=$(tr '\r' '\n' < "$T/tty.out" | grep -cE "^run 'tty' +\[[#.]{20}\] [0-9]+/$N  left ([0-9]+:[0-9]{2}|--)  ([0-9.]+/(s|min)|--/s)")
  check '[ $rc -eq 0 ] && [ "$bars" -ge 1 ]' "tty: the bar with time left and rate ($bars): $(tr '\r' '\n' < "$T/tty.out" | tail -3)"
  check 'tr "\r" "\n" < "$T/tty.out" | grep -qE "\[#{20}\] $N/$N  left 0:00"' "tty: the bar's last state is full"
  check '! grep -qE "^run .tty.: [0-9]+/$N \(" "$T/tty.out"' "tty: no periodic line"
else
  skip "no script(1): the terminal's bar is not checked"
fi

finish
