#!/usr/bin/env bash
# cli_http.sh - the real CLI against two real local OpenAI-compatible servers
# (tests/server/fakeserver.c) whose scripted answers differ on known prompts:
# exact flips, directions, CIs and exit codes; measure in one go; resume
# after SIGKILL with no duplicate and no lost response; bad suites, bad URLs,
# unreachable servers and bad flags.
set -u
D=${DRIFTBENCH:?} B=${DRIFT_BUILD:?} S=${DRIFT_SOURCE:?}
FAKE=$B/fakeserver
FIX=$S/tests/data/fake
T=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { if eval "$1"; then ok; else bad "$2"; fi; }

# start_server SCRIPT -> sets PORT
start_server() {
  local out=$T/srv.$RANDOM
  "$FAKE" --script "$1" --lifetime 300 --quiet > "$out" 2>/dev/null &
  PIDS+=($!)
  for _ in $(seq 100); do
    PORT=$(awk '/^PORT/{print $2}' "$out" 2>/dev/null)
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  echo "server did not start"; exit 1
}
sql() { sqlite3 "$1" "$2"; }

# ---------------------------------------------------------------- flips
start_server "$FIX/math5_baseline.txt"; P1=$PORT
start_server "$FIX/math5_target.txt"; P2=$PORT
DB=$T/m.db
SUITE=$FIX/math5.jsonl
$D --quiet run --db "$DB" --label h100 --target "http://127.0.0.1:$P1/v1?model=llama&api=completions" \
  --config model=llama-3.1-8b,hardware=h100,precision=fp16,framework=vllm --suite "$SUITE" --concurrency 4
check '[ $? -eq 0 ]' "baseline run exit 0"
$D --quiet run --db "$DB" --label b200 --target "http://127.0.0.1:$P2/v1?model=llama&api=chat" \
  --config model=llama-3.1-8b,hardware=b200,precision=fp8,framework=sglang --suite "$SUITE" --retries 1
check '[ $? -eq 0 ]' "target run exit 0 (one request error is stored, not fatal)"
check '[ "$(sql "$DB" "select count(*) from responses where error is not null")" = 1 ]' "exactly one stored error"
check '[ "$(sql "$DB" "select count(*) from responses")" = 10 ]' "10 responses stored"
$D --quiet score --db "$DB"
check '[ $? -eq 0 ]' "score exit 0"
$D compare --db "$DB" --baseline h100 --target b200 --format json -o "$T/c.json"
check '[ $? -eq 0 ]' "compare without a math budget passes (exit 0)"
python3 - "$T/c.json" <<'EOF' || bad "json contract and values"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["verdict"] == "pass", c["verdict"]
assert c["baseline"]["label"] == "h100" and c["target"]["label"] == "b200"
assert c["baseline"]["config"]["hardware"] == "h100" and c["target"]["config"]["framework"] == "sglang"
w = c["workloads"][0]
for k in ["workload","n","errors","flips","flip_rate","ci95","correct_to_incorrect","incorrect_to_correct",
          "baseline_accuracy","target_accuracy","net_change","mcnemar_p","budget","verdict","flipped"]:
    assert k in w, k
assert w["workload"] == "math" and w["n"] == 4 and w["errors"] == 1 and w["flips"] == 1, w
assert w["correct_to_incorrect"] == 1 and w["incorrect_to_correct"] == 0
assert abs(w["flip_rate"] - 0.25) < 1e-12
# Wilson 95% for 1/4, computed here independently
import math
z = 1.959963984540054; n = 4; p = 0.25
den = 1 + z*z/n; mid = (p + z*z/(2*n))/den; half = z*math.sqrt(p*(1-p)/n + z*z/(4*n*n))/den
assert abs(w["ci95"][0] - (mid-half)) < 1e-9 and abs(w["ci95"][1] - (mid+half)) < 1e-9, w["ci95"]
assert w["baseline_accuracy"] == 1.0 and w["target_accuracy"] == 0.75
assert abs(w["mcnemar_p"] - 1.0) < 1e-12
assert [f["prompt_id"] for f in w["flipped"]] == ["m1"] and w["flipped"][0]["direction"] == "correct_to_incorrect"
EOF
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 > "$T/c.txt"
check '[ $? -eq 1 ]' "compare over budget exits 1"
check 'grep -q "m1" "$T/c.txt" && grep -q "25.00%" "$T/c.txt" && grep -qi "fail" "$T/c.txt"' "text report names the flip and verdict"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=25 > /dev/null
check '[ $? -eq 0 ]' "flip rate equal to the budget passes"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 --format markdown > "$T/c.md"
check 'grep -q "^|" "$T/c.md"' "markdown has a table"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 --format junit > "$T/c.xml"
check 'grep -q "<testsuite" "$T/c.xml" && grep -q "<failure" "$T/c.xml"' "junit has a failing testcase"
python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" "$T/c.xml" || bad "junit is well-formed XML"

# ---------------------------------------------------------------- measure
$D --quiet measure --db "$T/meas.db" --baseline "http://127.0.0.1:$P1/v1?model=llama" \
  --target "http://127.0.0.1:$P2/v1?model=llama&api=chat" --suite "$SUITE" --retries 1 --budget math=1 \
  --format json -o "$T/meas.json"
check '[ $? -eq 1 ]' "measure over budget exits 1"
check 'python3 -c "import json,sys; w=json.load(open(sys.argv[1]))[\"workloads\"][0]; assert (w[\"flips\"],w[\"errors\"],w[\"n\"])==(1,1,4)" "$T/meas.json"' \
  "measure finds the same flip"

# ---------------------------------------------------------------- resume after SIGKILL
N=120
python3 - "$T/many.jsonl" $N <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"prompt_id": "q%03d" % i, "prompt": "Compute ANSWER=%d please" % i, "answer": str(i)}) + "\n")
EOF
printf 'default | echo\nfault | * | sleep | seconds=0.05\n' > "$T/slow.txt"
start_server "$T/slow.txt"; P3=$PORT
RDB=$T/resume.db
$D --quiet run --db "$RDB" --label slow --target "http://127.0.0.1:$P3/v1?model=m" --suite "$T/many.jsonl" \
  --concurrency 2 &
RUNPID=$!
for _ in $(seq 200); do
  c=$(sql "$RDB" "select count(*) from responses" 2>/dev/null || echo 0)
  [ "${c:-0}" -ge 20 ] && break
  sleep 0.05
done
kill -9 $RUNPID 2>/dev/null; wait $RUNPID 2>/dev/null
before=$(sql "$RDB" "select count(*) from responses")
check '[ "$before" -gt 0 ] && [ "$before" -lt $N ]' "killed mid-run with part stored ($before of $N)"
$D --quiet run --db "$RDB" --label slow --target "http://127.0.0.1:$P3/v1?model=m" --suite "$T/many.jsonl" \
  --concurrency 8
check '[ $? -eq 0 ]' "resumed run exit 0"
check '[ "$(sql "$RDB" "select count(*) from responses")" = $N ]' "no lost response after resume"
check '[ "$(sql "$RDB" "select count(distinct prompt_rowid) from responses")" = $N ]' "no duplicate after resume"
check '[ "$(sql "$RDB" "select count(*) from runs")" = 1 ]' "one run"
$D --quiet run --db "$RDB" --label slow --target "http://127.0.0.1:$P3/v1?model=m" --suite "$T/many.jsonl" \
  --temperature 0.5 2> "$T/mm.err"
check '[ $? -eq 2 ] && grep -q temperature "$T/mm.err"' "resume with other decoding refused, naming the field"
check '[ "$(sql "$RDB" "select count(*) from responses")" = $N ]' "refused resume stored nothing"

# ---------------------------------------------------------------- replicates
$D --quiet run --db "$T/rep.db" --label r --target "http://127.0.0.1:$P1/v1?model=llama" --suite "$SUITE" \
  --temperature 0.7 --replicates 3
check '[ "$(sql "$T/rep.db" "select count(*) from responses")" = 15 ]' "3 replicates x 5 prompts stored"

# ---------------------------------------------------------------- bad input
run_err() { # expect exit 2 and stderr matching $2
  local want=$1; shift
  "$D" "$@" > /dev/null 2> "$T/err"
  local rc=$?
  if [ $rc -ne 2 ] || ! grep -qi -- "$want" "$T/err"; then bad "'$*' -> rc $rc: $(head -c 300 "$T/err")"; else ok; fi
}
U="http://127.0.0.1:$P1/v1?model=llama"
run_err "nope.jsonl" run --db "$T/b.db" --label x --target "$U" --suite "$T/nope.jsonl"
printf '{"prompt_id":"a","prompt":"x","answer":"1"}\n{"prompt_id":"b","prompt":"y",\n' > "$T/badline.jsonl"
run_err "badline.jsonl:2" run --db "$T/b.db" --label x --target "$U" --suite "$T/badline.jsonl"
printf '{"prompt_id":"a","prompt":"x","answer":"1"}\n{"prompt_id":"b","answer":"2"}\n' > "$T/nofield.jsonl"
run_err "nofield.jsonl:2" run --db "$T/b.db" --label x --target "$U" --suite "$T/nofield.jsonl"
run_err "ftp" run --db "$T/b.db" --label x --target "ftp://127.0.0.1/v1?model=m" --suite "$SUITE"
run_err "model" run --db "$T/b.db" --label x --target "http://127.0.0.1:$P1/v1" --suite "$SUITE"
run_err "port" run --db "$T/b.db" --label x --target "http://127.0.0.1:99999/v1?model=m" --suite "$SUITE"
# a closed port: every request fails quickly, is stored as an error, and run says so
CLOSED=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1]); s.close()")
run_err "failed" run --db "$T/u.db" --label x --target "http://127.0.0.1:$CLOSED/v1?model=m" --suite "$SUITE" \
  --retries 1 --connect-timeout 1
check '[ "$(sql "$T/u.db" "select count(*) from responses where error is not null")" = 5 ]' "unreachable: 5 errors stored"
run_err "unknown" run --db "$T/b.db" --label x --target "$U" --suite "$SUITE" --bogus
run_err "concurrency" run --db "$T/b.db" --label x --target "$U" --suite "$SUITE" --concurrency 0
run_err "required" run --db "$T/b.db" --label x --suite "$SUITE"
run_err "unknown command" frobnicate
run_err "nolabel" compare --db "$DB" --baseline h100 --target nolabel
run_err "budget" compare --db "$DB" --baseline h100 --target b200 --budget math=abc
run_err "format" compare --db "$DB" --baseline h100 --target b200 --format yaml
printf 'this is not a store\n' > "$T/notastore.db"
cp "$T/notastore.db" "$T/notastore.orig"
run_err "notastore.db" compare --db "$T/notastore.db" --baseline a --target b
check 'cmp -s "$T/notastore.db" "$T/notastore.orig"' "a foreign file is left untouched"
for c in run score compare measure suites version; do
  "$D" $c --help > /dev/null 2>&1 || bad "$c --help"
done

echo "cli_http: $passes passed, $fails failed"
[ $fails -eq 0 ]
