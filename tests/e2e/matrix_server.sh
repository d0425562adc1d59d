#!/usr/bin/env bash
# matrix_server.sh - the matrix starts, shares and stops its configurations'
# servers (tests/server/fakeserver.c as the serving stack): the happy path
# (two configurations each with its own server, two sharing one; every
# server gone afterwards; a second call skips all and starts none), a start
# command that fails (exit 127), one that never gets healthy (bounded by
# ready_timeout_s), one that dies mid-run (exit 2 naming the command and its
# last words; the same command again restarts it and completes: every
# answer once, none lost, no error left), measure with --baseline-start /
# --target-start, and the spec errors of "server" and "{port}".
. "$(dirname "$0")/lib.sh"
export TMPDIR=$T          # the servers' logs go here (kept when one fails)
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
# A server start command (lib.sh's server_start_cmd): one line per start in
# $T/starts.NAME; matrix fills {model}, measure serves model m
start_cmd() { server_start_cmd "$1" '{model}' "$2"; } # NAME EXTRA
measure_cmd() { server_start_cmd "$1" m; }            # NAME
target='http://127.0.0.1:{port}/v1?model=m&api=completions'

# ---------------------------------------------------------------- happy path
cat > "$T/happy.json" <<EOF
{"suites": ["builtin:math"], "limit": 6, "decoding": {"max_tokens": 16}, "baseline": "own-a",
 "configs": [
  {"label": "own-a", "target": "$target", "dims": {"model": "m", "framework": "a"},
   "server": {"start": "$(start_cmd a "")", "ready_timeout_s": 20}},
  {"label": "own-b", "target": "$target", "dims": {"model": "m", "framework": "b"},
   "server": {"start": "$(start_cmd b "--health-after 0.3")"}},
  {"label": "shared-1", "target": "$target", "dims": {"model": "m", "framework": "s1"},
   "server": {"start": "$(start_cmd s "")"}},
  {"label": "shared-2", "target": "$target", "dims": {"model": "m", "framework": "s2"},
   "server": {"start": "$(start_cmd s "")"}}
 ]}
EOF
DB=$T/happy.db
t0=$(now)
$D matrix --spec "$T/happy.json" --db "$DB" --concurrency 2 > "$T/happy.out" 2> "$T/happy.err"
check '[ $? -eq 0 ]' "happy matrix exit 0 ($(cat "$T/happy.err"))"
echo "happy path: $(secs "$t0") s"
check '[ "$(sql "$DB" "select count(*) from responses")" = 24 ]' "4 configurations x 6 answers stored"
check '[ "$(sql "$DB" "select count(*) from responses where error is not null")" = 0 ]' "no errors stored"
check '[ "$(sql "$DB" "select count(*) from runs where finished_at is not null")" = 4 ]' "4 runs finished"
check '[ "$(sql "$DB" "select count(distinct target) from runs")" = 1 ] && [ "$(sql "$DB" "select target from runs limit 1")" = "$target" ]' \
  "the stored target keeps {port} (a resume on another port is the same run)"
check '[ "$(wc -l < "$T/starts.a")" = 1 ] && [ "$(wc -l < "$T/starts.b")" = 1 ]' "own servers started once each"
check '[ "$(wc -l < "$T/starts.s")" = 1 ]' "the two configurations with the same command share one server"
check 'all_gone' "no server left running after the matrix"
check '[ -z "$(ls "$T" | grep "^driftbench-server-.*\.log$")" ]' "clean stops leave no log behind"
$D matrix --spec "$T/happy.json" --db "$DB" > /dev/null 2> "$T/again.err"
check '[ $? -eq 0 ]' "second call exit 0"
check '[ "$(grep -c "complete, skipped" "$T/again.err")" = 4 ]' "second call skips the 4 complete runs"
check '[ "$(cat "$T"/starts.* | wc -l)" = 3 ]' "a complete run starts no server"
$D matrix --spec "$T/happy.json" --list > "$T/list.out"
check 'grep -q "shared-2	http://127.0.0.1:{port}/v1?model=m&api=completions	echo" "$T/list.out"' "--list shows the server command"

# ---------------------------------------------------------------- start fails
cat > "$T/fail.json" <<EOF
{"suites": ["builtin:math"], "limit": 2, "baseline": "x",
 "configs": [{"label": "x", "target": "$target", "dims": {"model": "m"},
   "server": {"start": "/nonexistent/llama-server -m {model} --port {port}"}}]}
EOF
t0=$(now)
$D matrix --spec "$T/fail.json" --db "$T/fail.db" 2> "$T/fail.err"
rc=$?
check '[ $rc -eq 2 ]' "a start command that fails: exit 2 (got $rc)"
check 'grep -q "configuration .x.: server \`/nonexistent/llama-server -m m --port [0-9]*\` exited with status 127 before it was healthy" "$T/fail.err"' \
  "the message names the configuration, the command and status 127 ($(head -c 400 "$T/fail.err"))"
check 'grep -q "not found" "$T/fail.err"' "the tail of its output is shown"
check 'awk -v s="$(secs "$t0")" "BEGIN{exit !(s < 10)}"' "a failing start is seen at once"
check '[ "$(sql "$T/fail.db" "select count(*) from responses")" = 0 ]' "nothing asked"

# ---------------------------------------------------------------- never healthy
cat > "$T/never.json" <<EOF
{"suites": ["builtin:math"], "limit": 2, "baseline": "x",
 "configs": [{"label": "x", "target": "$target", "dims": {"model": "m"},
   "server": {"start": "$(start_cmd never --never-healthy)", "ready_timeout_s": 1.5}}]}
EOF
t0=$(now)
$D matrix --spec "$T/never.json" --db "$T/never.db" 2> "$T/never.err"
rc=$?
el=$(secs "$t0")
check '[ $rc -eq 2 ]' "never healthy: exit 2 (got $rc)"
check 'grep -q "was not healthy within 1.5 s (last GET http://127.0.0.1:[0-9]*/health: HTTP 503)" "$T/never.err"' \
  "the message says the timeout and the last probe ($(head -c 400 "$T/never.err"))"
check 'awk -v s="$el" "BEGIN{exit !(s >= 1.5 && s < 15)}"' "bounded by ready_timeout_s (took $el s)"
check 'all_gone' "the unhealthy server is stopped"

# ---------------------------------------------------------------- dies mid-run
# The first start dies after 5 generation replies; later starts do not.
die_cmd="echo \$\$ >> $T/pids; echo start >> $T/starts.die; if [ ! -e $T/died ]; then touch $T/died; X=--die-after; N=5; else X=; N=; fi; exec $FAKE --port {port} --lifetime 120 \$X \$N"
cat > "$T/die.json" <<EOF
{"suites": ["builtin:math"], "limit": 16, "decoding": {"max_tokens": 16}, "baseline": "x",
 "configs": [{"label": "x", "target": "http://127.0.0.1:{port}/v1?model=fake&api=completions", "dims": {"model": "m"},
   "server": {"start": "$die_cmd"}}]}
EOF
DB=$T/die.db
t0=$(now)
$D matrix --spec "$T/die.json" --db "$DB" --concurrency 3 2> "$T/die.err"
rc=$?
el=$(secs "$t0")
check '[ $rc -eq 2 ]' "dies mid-run: exit 2 (got $rc)"
check 'grep -q "configuration .x.: run stopped ([0-9]* of 16 requests stored; the same command again restarts the server" "$T/die.err"' \
  "the message says the run stopped and how to resume ($(head -c 600 "$T/die.err"))"
check 'grep -q "server \`echo .*fakeserver --port [0-9]* --lifetime 120 \$X \$N\` exited with status 3" "$T/die.err"' "names the command and status 3"
check 'grep -q "dying after 5 generation replies" "$T/die.err"' "shows the tail of its output"
check 'grep -q "(log $T/driftbench-server-[0-9]*-.*\.log)" "$T/die.err" && ls "$T"/driftbench-server-*.log > /dev/null' "the log of the dead server is kept"
check 'awk -v s="$el" "BEGIN{exit !(s < 10)}"' "the death stops the run at once (took $el s, no retry back-offs)"
n1=$(sql "$DB" "select count(*) from responses where error is null")
check '[ "$n1" -ge 1 ] && [ "$n1" -lt 16 ]' "some answers stored before the death ($n1)"
check '[ "$(sql "$DB" "select finished_at is null from runs")" = 1 ]' "the run is left unfinished"
$D matrix --spec "$T/die.json" --db "$DB" 2> "$T/die2.err"
rc=$?
check '[ $rc -eq 0 ]' "the same command again: exit 0 (got $rc: $(tail -3 "$T/die2.err"))"
check 'grep -q "resuming run .x.: 16 prompts x 1 replicate(s), $((16 - n1)) to request" "$T/die2.err"' "asks only what is missing ($((16 - n1)))"
check '[ "$(sql "$DB" "select count(*) from responses")" = 16 ]' "16 responses: none lost, none twice"
check '[ "$(sql "$DB" "select count(distinct prompt_rowid) from responses")" = 16 ]' "16 distinct prompts"
check '[ "$(sql "$DB" "select count(*) from responses where error is not null")" = 0 ]' "no error left from the dead server"
check '[ "$(sql "$DB" "select finished_at is not null from runs")" = 1 ]' "the run is finished"
check '[ "$(wc -l < "$T/starts.die")" = 2 ]' "the server was restarted once"
check 'all_gone' "no server left running"

# ---------------------------------------------------------------- signals
# A slow server (every answer waits 30 s); SIGTERM once: the run stops, the
# server is stopped, exit 2. SIGTERM twice, with a server that ignores
# SIGTERM and runs as the shell's child (so the first stop waits its 10 s
# grace, and the shell's parent-death signal would not reach it): the
# second signal exits at once and SIGKILLs the server's process group on
# the way out. Either way no orphan.
printf 'fault | * | sleep | seconds=30\n' > "$T/slow.txt"
slow_cmd[1]=$(start_cmd slow "--script $T/slow.txt")
slow_cmd[2]="trap '' TERM; $FAKE --port {port} --lifetime 120 --script $T/slow.txt --model m & echo \$! >> $T/pids; wait"
for n in 1 2; do
  cat > "$T/slow$n.json" <<EOF
{"suites": ["builtin:math"], "limit": 4, "baseline": "x",
 "configs": [{"label": "x", "target": "$target", "dims": {"model": "m"},
   "server": {"start": "${slow_cmd[$n]}"}}]}
EOF
  : > "$T/pids"
  $D matrix --spec "$T/slow$n.json" --db "$T/slow$n.db" 2> "$T/slow$n.err" &
  mp=$!
  for _ in $(seq 100); do [ -s "$T/pids" ] && grep -q "starting run" "$T/slow$n.err" && break; sleep 0.05; done
  sleep 0.3
  t0=$(now)
  for _ in $(seq $n); do kill -TERM $mp; sleep 0.5; done
  wait $mp
  rc=$?
  check '[ $rc -eq 2 ]' "SIGTERM x$n: exit 2 (got $rc)"
  check 'all_gone' "SIGTERM x$n: the server is gone, no orphan"
  el=$(secs "$t0")
  # from the first signal: waiting for an answer would take ~30 s, the
  # server's grace 10 s; 8 s leaves a loaded machine room to stop
  check 'awk -v s="$el" "BEGIN{exit !(s < 8)}"' "SIGTERM x$n: no wait for the slow answers or the grace ($el s)"
done
check 'grep -q "interrupted" "$T/slow1.err"' "SIGTERM once says interrupted ($(tail -2 "$T/slow1.err"))"
check 'grep -q "interrupted again" "$T/slow2.err"' "SIGTERM twice exits at once"

# ---------------------------------------------------------------- measure
MDB=$T/measure.db
$D --quiet measure --db "$MDB" --suite builtin:math --limit 4 --max-tokens 16 \
  --baseline "$target" --baseline-start "$(measure_cmd mb)" \
  --target "$target" --target-start "$(measure_cmd mt)" --start-timeout 20 > "$T/measure.out" 2> "$T/measure.err"
rc=$?
# the same fake server on both sides: 4 pairs, no flip, which cannot show a
# rate within the default math budget 2%: INCONCLUSIVE, exit 3
check '[ $rc -eq 3 ] && grep -q "^verdict: INCONCLUSIVE (exit 3): math needs more pairs" "$T/measure.out"' \
  "measure with started servers: the gate's verdict, INCONCLUSIVE for 4 pairs (got $rc: $(tail -3 "$T/measure.err"; grep "^verdict" "$T/measure.out"))"
check '[ "$(sql "$MDB" "select count(*) from responses where error is null")" = 8 ]' "measure: 2 x 4 answers"
check '[ "$(wc -l < "$T/starts.mb")" = 1 ] && [ "$(wc -l < "$T/starts.mt")" = 1 ]' "measure started each server once"
check 'all_gone' "measure left no server running"
$D --quiet measure --db "$T/m2.db" --suite builtin:math --limit 2 --baseline "$target" \
  --baseline-start "/nonexistent/vllm --port {port}" --target "$target" --target-start "$(measure_cmd mt)" 2> "$T/m2.err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "baseline-start: server \`/nonexistent/vllm --port [0-9]*\` exited with status 127" "$T/m2.err"' \
  "measure: a failing start is exit 2 naming it ($(head -c 300 "$T/m2.err"))"
$D --quiet measure --db "$T/m3.db" --suite builtin:math --limit 2 --baseline "$target" \
  --target "$target" --target-start "$(measure_cmd mt)" 2> "$T/m3.err"
check '[ $? -eq 2 ] && grep -q "uses {port}, which only --baseline-start gives" "$T/m3.err"' "measure: {port} without a start command"

# ---------------------------------------------------------------- spec errors
spec_err() { # JSON EXPECTED
  printf '%s' "$1" > "$T/bad.json"
  $D matrix --spec "$T/bad.json" --list > /dev/null 2> "$T/bad.err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$2" "$T/bad.err"; then ok; else bad "spec error '$2' (rc $rc: $(cat "$T/bad.err"))"; fi
}
base='"suites":["builtin:math"],"baseline":"x"'
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:1/v1\",\"server\":{\"start\":\"srv --port {port}\"}}]}" \
  "configs[0].target: must use {port}"
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:{port}/v1\"}]}" \
  "configs[0].target: uses {port}, which is only known with a \"server\""
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:{port}/v1\",\"server\":{\"start\":\"srv\"}}]}" \
  "configs[0].server.start: must use {port}"
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:{port}/v1\",\"server\":{\"start\":\"srv -m {modle} --port {port}\"}}]}" \
  "configs[0].server.start: placeholder {modle} is not a dimension"
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:{port}/v1\",\"server\":{\"start\":\"srv --port {port}\",\"health\":\"health\"}}]}" \
  "configs[0].server.health: must be a path"
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:{port}/v1\",\"server\":{\"start\":\"srv --port {port}\",\"ready_timeout_s\":0}}]}" \
  "configs[0].server.ready_timeout_s: must be a number"
spec_err "{$base,\"configs\":[{\"label\":\"x\",\"target\":\"http://h:{port}/v1\",\"server\":{\"start\":\"srv --port {port}\",\"stop\":1}}]}" \
  "configs[0].server.stop: unknown key"
spec_err "{\"suites\":[\"builtin:math\"],\"baseline\":\"a\",\"dimensions\":{\"port\":[\"a\"]},\"target\":\"embedded:x\"}" \
  "dimensions.port: dimension names use only"
spec_err "{\"suites\":[\"builtin:math\"],\"baseline\":\"a\",\"dimensions\":{\"m\":[\"a\"]},\"target\":\"http://h:{port}/v1\"}" \
  "target: uses {port}"
# the product's server: {dim} is the level's text, ${VAR} and JSON braces stay for the shell
printf '%s' '{"suites":["builtin:math"],"baseline":"a","dimensions":{"model":{"a":"models/a.gguf","b":"models/b.gguf"}},
 "target":"http://127.0.0.1:{port}/v1?model={model}","label":"{model}",
 "server":{"start":"${LLAMA}/llama-server -m {model} --port {port} --kw {\"x\":1}"}}' > "$T/prod.json"
$D matrix --spec "$T/prod.json" --list > "$T/prod.out" 2>&1
check '[ $? -eq 0 ] && grep -qF "1	b	http://127.0.0.1:{port}/v1?model=models/b.gguf	\${LLAMA}/llama-server -m models/b.gguf --port {port} --kw {\"x\":1}" "$T/prod.out"' \
  "product server: placeholders filled, shell braces kept ($(cat "$T/prod.out"))"
# the documented llama-server example parses
$D matrix --spec "$S/tests/data/matrix/llama_server.json" --list > "$T/llama.out" 2>&1
check '[ $? -eq 0 ] && [ "$(wc -l < "$T/llama.out")" = 6 ]' "tests/data/matrix/llama_server.json parses ($(cat "$T/llama.out"))"

finish
