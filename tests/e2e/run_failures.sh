#!/usr/bin/env bash
# run_failures.sh - failed requests say why (issue 33, "a gate that fails
# closed"), against the fake server (tests/server/fakeserver.c):
#   run: a target answering 404 (a wrong model name) exits 2 with "HTTP 404",
#   its first message and what to check, never "is the server up?"; a
#   refused port exits 2 with that hint; a server answering some requests
#   500 stores the answers, exits 0 and counts the 500s on their own line;
#   measure prints the same lines and exits 2 when one side fails entirely.
#   matrix: a configuration whose server is down does not stop the others;
#   the matrix then exits 2 naming it and why; called again it asks that
#   run again (not skipped as complete) and, with the server back, exits 0;
#   configurations that could not start (a server that never starts, a
#   model file that is not there) are named too, side by side (--parallel).
. "$(dirname "$0")/lib.sh"
export TMPDIR=$T


# six prompts; two of them carry BROKEN, which the fault script answers 500
python3 - "$T/s.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(6):
        p = "Compute ANSWER=%d please" % i + (" BROKEN" if i in (2, 4) else "")
        f.write(json.dumps({"prompt_id": "q%d" % i, "prompt": p, "answer": str(i)}) + "\n")
EOF
printf 'default | echo\nfault | BROKEN | 500\n' > "$T/faults.txt"
start_server "$T/faults.txt" --model served; P=$PORT
DB=$T/r.db

# ---------------------------------------------------------------- run: HTTP 404
$D run --db "$DB" --label wrong-model --target "http://127.0.0.1:$P/v1?model=nope" --suite "$T/s.jsonl" \
  2> "$T/404.err"
rc=$?
check '[ $rc -eq 2 ]' "404: exit 2 (got $rc)"
check 'grep -q "^run .wrong-model.: 0 answers, 6 errors stored" "$T/404.err"' "404: the answers/errors line is kept"
check 'grep -q "^  6 x HTTP 404; first: HTTP 404: The model .nope. does not exist\.$" "$T/404.err"' \
  "404: the summary names HTTP 404, its count and first message ($(cat "$T/404.err"))"
check 'grep -q "failed: HTTP 404 (first error: HTTP 404: The model .nope. does not exist.); the server answered HTTP 404: check the URL and the model name$" "$T/404.err"' \
  "404: the failure line says what to check"
check '! grep -q "is the server up" "$T/404.err"' "404: no 'is the server up?'"
check '[ "$(sql "$DB" "select count(*) from responses r join runs u on u.id = r.run_id where u.label = '"'wrong-model'"' and r.error is not null")" = 6 ]' \
  "404: six errors stored"

# ---------------------------------------------------------------- run: refused
CLOSED=$(free_port)
$D run --db "$DB" --label down --target "http://127.0.0.1:$CLOSED/v1?model=m" --suite "$T/s.jsonl" --retries 1 \
  --connect-timeout 1 2> "$T/refused.err"
rc=$?
check '[ $rc -eq 2 ]' "refused: exit 2 (got $rc)"
check 'grep -q "^  6 x could not connect; first: connection failed: " "$T/refused.err"' \
  "refused: the summary names the cause ($(cat "$T/refused.err"))"
check 'grep -q "failed: could not connect (first error: connection failed: .*); is the server up?$" "$T/refused.err"' \
  "refused: the hint is there"
# --quiet: no summary lines, but the failure line keeps cause and hint
$D --quiet run --db "$DB" --label down-q --target "http://127.0.0.1:$CLOSED/v1?model=m" --suite "$T/s.jsonl" \
  --retries 0 2> "$T/refused-q.err"
rc=$?
check '[ $rc -eq 2 ] && [ "$(wc -l < "$T/refused-q.err")" = 1 ] && grep -q "is the server up?" "$T/refused-q.err"' \
  "refused --quiet: one line, with the hint ($(cat "$T/refused-q.err"))"

# ---------------------------------------------------------------- run: some 500
$D run --db "$DB" --label some500 --target "http://127.0.0.1:$P/v1?model=served" --suite "$T/s.jsonl" \
  --retries 1 2> "$T/500.err"
rc=$?
check '[ $rc -eq 0 ]' "some 500: exit 0, the answers are stored (got $rc: $(cat "$T/500.err"))"
check 'grep -q "^run .some500.: 4 answers, 2 errors stored" "$T/500.err"' "some 500: 4 answers, 2 errors"
check 'grep -q "^  2 x HTTP 500; first: HTTP 500 after 2 attempts: .*injected fault: HTTP 500" "$T/500.err"' \
  "some 500: the 500s are counted on their line"
check '[ "$(grep -c "^  [0-9]* x " "$T/500.err")" = 1 ]' "some 500: one kind, one line"
check '! grep -q "is the server up" "$T/500.err"' "some 500: no 'is the server up?'"

# ---------------------------------------------------------------- measure
$D measure --db "$T/meas.db" --baseline "http://127.0.0.1:$P/v1?model=served" \
  --target "http://127.0.0.1:$P/v1?model=nope" --suite "$T/s.jsonl" --retries 1 > /dev/null 2> "$T/meas.err"
rc=$?
check '[ $rc -eq 2 ]' "measure with a 404 target: exit 2 (got $rc)"
check 'grep -q "^  2 x HTTP 500; first: " "$T/meas.err" && grep -q "^  6 x HTTP 404; first: " "$T/meas.err"' \
  "measure prints the same summary lines for both sides ($(cat "$T/meas.err"))"
check 'grep -q "^driftbench measure: every request to .*model=nope failed: HTTP 404 .*check the URL and the model name$" "$T/meas.err"' \
  "measure: the failure line says what to check"
check '! grep -q "is the server up" "$T/meas.err"' "measure: no 'is the server up?' for a 404"

# ---------------------------------------------------------------- matrix
# three configurations; the middle one's server is down (a closed port)
DOWN=$(free_port)
cat > "$T/m.json" <<EOF
{"suites": ["builtin:math"], "limit": 3, "decoding": {"max_tokens": 16}, "baseline": "up-a",
 "configs": [
  {"label": "up-a", "target": "http://127.0.0.1:$P/v1?model=served", "dims": {"model": "m", "framework": "a"}},
  {"label": "down-b", "target": "http://127.0.0.1:$DOWN/v1?model=served", "dims": {"model": "m", "framework": "b"}},
  {"label": "up-c", "target": "http://127.0.0.1:$P/v1?model=served", "dims": {"model": "m", "framework": "c"}}
 ]}
EOF
MDB=$T/m.db
$D matrix --spec "$T/m.json" --db "$MDB" 2> "$T/m.err"
rc=$?
check '[ $rc -eq 2 ]' "matrix with a configuration down: exit 2 (got $rc)"
check '[ "$(sql "$MDB" "select count(*) from responses r join runs u on u.id = r.run_id where u.label = '"'up-c'"' and r.error is null")" = 3 ]' \
  "matrix: the configuration after the failed one ran"
check '[ "$(sql "$MDB" "select count(*) from scores s join responses r on r.id = s.response_id join runs u on u.id = r.run_id where u.label in ('"'up-a','up-c'"')")" -ge 6 ]' \
  "matrix: the others are scored"
check 'grep -q "^driftbench matrix: 1 of 3 configurations failed entirely" "$T/m.err"' \
  "matrix: says how many failed ($(cat "$T/m.err"))"
check 'grep -q "^  configuration .down-b.: every request to http://127.0.0.1:$DOWN/v1?model=served failed: could not connect (first error: connection failed: .*); is the server up?$" "$T/m.err"' \
  "matrix: names the configuration and why"
check '[ "$(grep -c "^  configuration " "$T/m.err")" = 1 ]' "matrix: names only the failed one"
check '! grep -q "next: driftbench table" "$T/m.err"' "matrix: no 'next:' advice after a failure"
# called again: the failed run is asked again (not skipped as complete), still exit 2
$D matrix --spec "$T/m.json" --db "$MDB" 2> "$T/m2.err"
rc=$?
check '[ $rc -eq 2 ]' "matrix again, server still down: exit 2 (got $rc: $(cat "$T/m2.err"))"
check 'grep -q "resuming run .down-b.: 3 prompts x 1 replicate(s), 3 to request" "$T/m2.err"' "matrix again: the failed run is asked again"
check '[ "$(grep -c "complete, skipped" "$T/m2.err")" = 2 ]' "matrix again: the two complete runs are skipped"
check 'grep -q "^  configuration .down-b.: " "$T/m2.err"' "matrix again: names it again"
# with a server on that port, the same command completes
printf 'default | echo\n' > "$T/echo.txt"
start_server "$T/echo.txt" --port "$DOWN" --model served
$D matrix --spec "$T/m.json" --db "$MDB" 2> "$T/m3.err"
rc=$?
check '[ $rc -eq 0 ]' "matrix with the server back: exit 0 (got $rc: $(cat "$T/m3.err"))"
check '[ "$(sql "$MDB" "select count(*) from responses where error is not null")" = 0 ]' "no error left"

# --parallel 2; configurations that could not start (a server that never
# starts, a model file that does not exist) and one answered 404
cat > "$T/p.json" <<EOF
{"suites": ["builtin:math"], "limit": 2, "decoding": {"max_tokens": 16}, "baseline": "ok-1",
 "configs": [
  {"label": "ok-1", "target": "http://127.0.0.1:$P/v1?model=served", "dims": {"model": "m", "framework": "a"}},
  {"label": "no-start", "target": "http://127.0.0.1:{port}/v1?model=served", "dims": {"model": "m", "framework": "b"},
   "server": {"start": "/nonexistent/llama-server --port {port}"}},
  {"label": "no-model", "target": "embedded:/nonexistent/m.gguf?profile=ref", "dims": {"model": "m", "framework": "e"}},
  {"label": "wrong-model", "target": "http://127.0.0.1:$P/v1?model=nope", "dims": {"model": "m", "framework": "c"}},
  {"label": "ok-2", "target": "http://127.0.0.1:$P/v1?model=served", "dims": {"model": "m", "framework": "d"}}
 ]}
EOF
$D matrix --spec "$T/p.json" --db "$T/p.db" --parallel 2 2> "$T/p.err"
rc=$?
check '[ $rc -eq 2 ]' "matrix --parallel 2 with three failed configurations: exit 2 (got $rc)"
check 'grep -q "^driftbench matrix: 3 of 5 configurations failed entirely" "$T/p.err"' "--parallel: three failed ($(cat "$T/p.err"))"
check 'grep -q "^  configuration .no-start.: server \`/nonexistent/llama-server --port [0-9]*\` exited with status 127" "$T/p.err"' \
  "--parallel: the server that never started is named with its status"
check 'grep -q "^  configuration .no-model.: /nonexistent/m.gguf: " "$T/p.err"' "--parallel: the target that did not open is named"
check 'grep -q "^  configuration .wrong-model.: every request to .* failed: HTTP 404 .*check the URL and the model name$" "$T/p.err"' \
  "--parallel: the 404 configuration is named with what to check"
check '[ "$(sql "$T/p.db" "select count(*) from responses where error is null")" = 4 ]' "--parallel: ok-1 and ok-2 answered"

finish
