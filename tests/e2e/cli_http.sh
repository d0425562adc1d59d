#!/usr/bin/env bash
# cli_http.sh - the real CLI against two real local OpenAI-compatible servers
# (tests/server/fakeserver.c) whose scripted answers differ on known prompts:
# exact flips, directions, CIs and exit codes (the gate's default budget
# blocks the one error pair as left out; --budget math=none is not gated;
# --max-left-out 50 leaves 4 pairs INCONCLUSIVE, exit 3; --decide point
# keeps the old rule, a rate equal to the budget deploys); measure in one go; resume
# after SIGKILL with no duplicate and no lost response; bad suites, bad URLs,
# unreachable servers and bad flags.
. "$(dirname "$0")/lib.sh"

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
# 4 counted pairs, 1 flip, 1 pair with a request error: 1 of 5 pairs (20%)
# left out is over the gate's 5% limit, so the default gate (math 2%) blocks
# for the pair left out, whatever the flips
$D compare --db "$DB" --baseline h100 --target b200 --format json -o "$T/c.json"
rc=$?
check '[ $rc -eq 1 ]' "compare with the default math budget: BLOCK for a pair left out (exit 1, got $rc)"
python3 - "$T/c.json" <<'EOF' || bad "json contract and values"
import json, sys
c = json.load(open(sys.argv[1]))
assert list(c)[:3] == ["schema_version", "verdict", "decision"], list(c)[:3]   # the schema version, then the decision first
assert c["verdict"] == "block", c["verdict"]
d = c["decision"]
assert d["verdict"] == "block" and d["exit_code"] == 1 and d["rule"] == "interval" and d["gated"] == 1, d
assert d["summary"] == "BLOCK (exit 1): math has too many pairs left out", d["summary"]
assert abs(d["max_left_out"] - 0.05) < 1e-12
dw = d["workloads"][0]
assert dw["workload"] == "math" and dw["decision"] == "block" and dw["reason"] == "left_out", dw
assert dw["left_out"] == 1 and dw["n"] == 4 and dw["flips"] == 1 and abs(dw["budget"] - 0.02) < 1e-12, dw
# Clopper-Pearson 95% for 1/4, computed here independently (bisection on the binomial tails)
from math import comb
def tail_le(k, n, p): return sum(comb(n, i) * p**i * (1-p)**(n-i) for i in range(k + 1))
def solve(f):
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid): lo = mid
        else: hi = mid
    return lo
cp_lo = solve(lambda p: 1 - tail_le(0, 4, p) < 0.025)   # P(X >= 1) = 0.025
cp_hi = solve(lambda p: tail_le(1, 4, p) > 0.025)       # P(X <= 1) = 0.025
assert abs(dw["ci95"][0] - cp_lo) < 1e-9 and abs(dw["ci95"][1] - cp_hi) < 1e-9, (dw["ci95"], cp_lo, cp_hi)
assert c["baseline"]["label"] == "h100" and c["target"]["label"] == "b200"
assert c["baseline"]["config"]["hardware"] == "h100" and c["target"]["config"]["framework"] == "sglang"
w = c["workloads"][0]
for k in ["workload","n","errors","flips","flip_rate","ci95","correct_to_incorrect","incorrect_to_correct",
          "baseline_accuracy","target_accuracy","net_change","mcnemar_p","budget","verdict","flipped"]:
    assert k in w, k
assert w["workload"] == "math" and w["n"] == 4 and w["errors"] == 1 and w["flips"] == 1, w
assert w["verdict"] == "block" and w["decision_reason"] == "left_out" and abs(w["left_out_share"] - 0.2) < 1e-12, w
assert abs(w["budget"] - 0.02) < 1e-12, w["budget"]
assert w["correct_to_incorrect"] == 1 and w["incorrect_to_correct"] == 0
assert abs(w["flip_rate"] - 0.25) < 1e-12
# Wilson 95% for 1/4 (the table's interval), computed here independently
import math
z = 1.959963984540054; n = 4; p = 0.25
den = 1 + z*z/n; mid = (p + z*z/(2*n))/den; half = z*math.sqrt(p*(1-p)/n + z*z/(4*n*n))/den
assert abs(w["ci95"][0] - (mid-half)) < 1e-9 and abs(w["ci95"][1] - (mid+half)) < 1e-9, w["ci95"]
assert w["baseline_accuracy"] == 1.0 and w["target_accuracy"] == 0.75
assert abs(w["mcnemar_p"] - 1.0) < 1e-12
assert [f["prompt_id"] for f in w["flipped"]] == ["m1"] and w["flipped"][0]["direction"] == "correct_to_incorrect"
EOF
$D compare --db "$DB" --baseline h100 --target b200 --budget math=none --format json -o "$T/none.json"
rc=$?
check '[ $rc -eq 0 ]' "compare with --budget math=none: nothing gated, exit 0 (got $rc)"
check 'python3 -c "
import json,sys
c=json.load(open(sys.argv[1])); w=c[\"workloads\"][0]
assert c[\"verdict\"]==\"not_gated\" and c[\"decision\"][\"gated\"]==0 and c[\"decision\"][\"exit_code\"]==0, c[\"decision\"]
assert w[\"verdict\"]==\"not_gated\" and w[\"budget\"] is None and (w[\"n\"],w[\"errors\"],w[\"flips\"])==(4,1,1), w
" "$T/none.json"' "--budget math=none: not_gated in json, the counts unchanged"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 > "$T/c.txt"
rc=$?
check '[ $rc -eq 1 ]' "compare over budget with a pair left out exits 1 (got $rc)"
check 'grep -q "m1" "$T/c.txt" && grep -q "25.00%" "$T/c.txt" && sed -n 5p "$T/c.txt" | grep -qx "verdict: BLOCK (exit 1): math has too many pairs left out"' \
  "text report names the flip and leads with the verdict: $(sed -n 5p "$T/c.txt")"
check 'grep -q "1 of 5 pairs left out (1 with errors, 0 unscored): 20.0% is over the 5.0% limit (--max-left-out)" "$T/c.txt"' \
  "text report says how many pairs were left out and the limit"
# with the pair left out allowed (--max-left-out 50) the decision is on the flips:
# 1 of 4 (exact 95% CI 0.63%..80.59%) straddles 1%: INCONCLUSIVE, exit 3
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 --max-left-out 50 > "$T/inc.txt"
rc=$?
check '[ $rc -eq 3 ] && grep -q "^verdict: INCONCLUSIVE (exit 3): math needs more pairs" "$T/inc.txt" && grep -q "straddles the budget 1.00%" "$T/inc.txt"' \
  "budget 1%, --max-left-out 50: 4 pairs cannot decide, INCONCLUSIVE exit 3 (got $rc: $(sed -n 5,6p "$T/inc.txt"))"
# the point rule (--decide point): 25% over 1% blocks; a flip rate equal to the budget deploys
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 --max-left-out 50 --decide point > "$T/pt1.txt"
rc=$?
check '[ $rc -eq 1 ] && grep -q "^verdict: BLOCK (exit 1): math 25.00% over budget 1.00%" "$T/pt1.txt" && grep -q "^rule: point estimate" "$T/pt1.txt"' \
  "--decide point, budget 1%: BLOCK on the rate, exit 1 (got $rc: $(sed -n 5p "$T/pt1.txt"))"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=25 --max-left-out 50 --decide point > "$T/pt25.txt"
rc=$?
check '[ $rc -eq 0 ] && grep -q "^verdict: DEPLOY (exit 0)" "$T/pt25.txt" && grep -q "within the budget 25.00% (point rule)" "$T/pt25.txt"' \
  "--decide point: a flip rate equal to the budget deploys, exit 0 (got $rc: $(sed -n 5,6p "$T/pt25.txt"))"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 --format markdown > "$T/c.md"
check 'grep -q "^|" "$T/c.md" && head -1 "$T/c.md" | grep -q "\*\*BLOCK\*\*$"' "markdown has a table and leads with **BLOCK**"
$D compare --db "$DB" --baseline h100 --target b200 --budget math=1 --format junit > "$T/c.xml"
check 'grep -q "<testsuite" "$T/c.xml" && grep -q "<failure type=\"left-out\"" "$T/c.xml" && grep -q "<property name=\"verdict\" value=\"block\"/>" "$T/c.xml"' \
  "junit has a failing testcase (left-out) and the verdict property"
python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" "$T/c.xml" || bad "junit is well-formed XML"

# ---------------------------------------------------------------- measure
$D --quiet measure --db "$T/meas.db" --baseline "http://127.0.0.1:$P1/v1?model=llama" \
  --target "http://127.0.0.1:$P2/v1?model=llama&api=chat" --suite "$SUITE" --retries 1 --budget math=1 \
  --format json -o "$T/meas.json"
check '[ $? -eq 1 ]' "measure over budget exits 1"
check 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); w=d[\"workloads\"][0]; assert (w[\"flips\"],w[\"errors\"],w[\"n\"])==(1,1,4) and d[\"verdict\"]==\"block\" and w[\"decision_reason\"]==\"left_out\", (d[\"verdict\"], w)" "$T/meas.json"' \
  "measure finds the same flip and the same decision (BLOCK, a pair left out)"

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
CLOSED=$(free_port)
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

finish
