#!/usr/bin/env bash
# gate_fail_closed.sh - issue 33, "a gate that fails closed": every case
# below was "PASS, exit 0" before the gate (49b2806, e7bc412); each now gets
# its own decision and exit code, from compare and from measure alike.
#   (a) two runs never scored, compare --budget math=1: ERROR, exit 2; the
#       message says "never scored" and gives `driftbench score --db DB`
#       (scored, the same compare is INCONCLUSIVE, exit 3: it was the scores);
#   (b) the target server down (a closed port, --retries 0): every pair has a
#       failed request: ERROR, exit 2, from compare and from measure;
#   (c) chat scored without --embedder: ERROR, exit 2, naming the embeddings
#       and --embedder (measure and compare; chat's ERROR outranks math's
#       INCONCLUSIVE);
#   (d) no --budget at all: qwen2-7m cpu-f32 (ref's answers, faster) against
#       cpu-mxfp4 on builtin:math (8 flips of 30) is BLOCKed by the default
#       math budget 2%, exit 1, from measure and compare;
#   (e) 12 pairs without a flip, --budget math=0.5: INCONCLUSIVE, exit 3,
#       with how many more prompts (724: 0 of 736 is the first count whose
#       exact interval is under 0.5%); --decide point: DEPLOY, exit 0, and
#       the report says it is the point rule;
#   (f) a target answering HTTP 500 to 2 of 20 prompts: 10% of the pairs left
#       out is over the 5% limit: BLOCK, exit 1, "left out"; with
#       --max-left-out 50 the decision is on the rate (0 of 18: INCONCLUSIVE
#       under 2%, DEPLOY under 20%);
#   (g) --budget W=none for every present workload: not gated, exit 0 (even
#       over the stores of (a) and (c)); one workload left gated is decided;
#   (h) every format leads with the decision (the BLOCK of (d)): text's line
#       5 before the flip taxonomy, JSON's first key, Markdown's first line,
#       JUnit's first child of the testsuite (<properties>), GitHub's first
#       annotation; compare --sequential too.
# The fake server (tests/server/fakeserver.c) for (a), (b), (f); the
# embedded engine on the shipped models/qwen2-7m.gguf for (c), (d), (e).
# DRIFT_SANITIZED set: (d) asks 16 prompts instead of 30 (4 of them flip).
. "$(dirname "$0")/lib.sh"
M=$S/models/qwen2-7m.gguf
T0=$SECONDS
lap() { echo "[$((SECONDS - T0)) s] $*"; T0=$SECONDS; }

# line N of FILE
line() { sed -n "${2}p" "$1"; }

start_server "$FIX/math5_baseline.txt"; P1=$PORT
SUITE5=$FIX/math5.jsonl

# ------------------------------------------------ (a) never scored
DB=$T/a.db
$D --quiet run --db "$DB" --label a --target "http://127.0.0.1:$P1/v1?model=m" --suite "$SUITE5" || bad "(a) run a"
$D --quiet run --db "$DB" --label b --target "http://127.0.0.1:$P1/v1?model=m" --suite "$SUITE5" || bad "(a) run b"
"$D" compare --db "$DB" --baseline a --target b --budget math=1 > "$T/a.out" 2> "$T/a.err"; rc=$?
check '[ $rc -eq 2 ]' "(a) never scored: exit 2 (got $rc)"
check 'grep -qF "math: no scored pair: the answers of its 5 pairs were never scored; run \`driftbench score --db $DB\`" "$T/a.err"' \
  "(a) stderr says never scored and names the command: $(cat "$T/a.err")"
check '[ "$(line "$T/a.out" 5)" = "verdict: ERROR (exit 2): math has no scored pair" ]' "(a) the report leads with ERROR: $(line "$T/a.out" 5)"
"$D" compare --db "$DB" --baseline a --target b --budget math=1 --format json > "$T/a.json" 2> /dev/null; rc=$?
check '[ $rc -eq 2 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); w=d[\"decision\"][\"workloads\"][0]
assert d[\"verdict\"]==\"error\" and d[\"decision\"][\"exit_code\"]==2, d[\"verdict\"]
assert w[\"workload\"]==\"math\" and w[\"decision\"]==\"error\" and w[\"n\"]==0 and w[\"left_out\"]==5, w
" "$T/a.json"' "(a) json: verdict error, math error with 0 counted of 5 (rc $rc)"
# the missing piece supplied: the same compare decides (5 pairs, no flip, 1%: not enough)
$D --quiet score --db "$DB" || bad "(a) score"
"$D" compare --db "$DB" --baseline a --target b --budget math=1 > "$T/a2.out" 2> "$T/a2.err"; rc=$?
check '[ $rc -eq 3 ] && [ ! -s "$T/a2.err" ] && [ "$(line "$T/a2.out" 5)" = "verdict: INCONCLUSIVE (exit 3): math needs more pairs" ]' \
  "(a) once scored: INCONCLUSIVE, exit 3 (rc $rc: $(line "$T/a2.out" 5) $(cat "$T/a2.err"))"
lap "(a) never scored"

# ------------------------------------------------ (b) the target server down
DB=$T/b.db
DOWN=$(free_port)
$D --quiet run --db "$DB" --label up --target "http://127.0.0.1:$P1/v1?model=m" --suite "$SUITE5" || bad "(b) run up"
$D --quiet run --db "$DB" --label down --target "http://127.0.0.1:$DOWN/v1?model=m" --suite "$SUITE5" --retries 0 \
  --connect-timeout 1 2> "$T/b.run.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "is the server up?" "$T/b.run.err"' "(b) the run against a closed port: exit 2 (got $rc)"
$D --quiet score --db "$DB" || bad "(b) score"
"$D" compare --db "$DB" --baseline up --target down > "$T/b.out" 2> "$T/b.err"; rc=$?
check '[ $rc -eq 2 ]' "(b) target down: compare exit 2 (got $rc)"
check 'grep -qF "driftbench compare: math: no scored pair: every pair has a failed request or evaluator error (baseline 0, target 5)" "$T/b.err"' \
  "(b) stderr: every pair has a failed request, counted per side: $(cat "$T/b.err")"
check '[ "$(line "$T/b.out" 5)" = "verdict: ERROR (exit 2): math has no scored pair" ] && grep -q "^  math  *ERROR  *no scored pair: all 5 pairs have a failed request" "$T/b.out"' \
  "(b) the report: ERROR, all 5 pairs failed: $(sed -n 5,6p "$T/b.out")"
"$D" measure --db "$T/b2.db" --baseline "http://127.0.0.1:$P1/v1?model=m" --target "http://127.0.0.1:$DOWN/v1?model=m" \
  --suite "$SUITE5" --retries 0 --connect-timeout 1 > "$T/b2.out" 2> "$T/b2.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "^driftbench measure: every request to http://127.0.0.1:$DOWN/v1?model=m failed: could not connect" "$T/b2.err"' \
  "(b) measure with the target down: exit 2, the same as compare (rc $rc: $(tail -1 "$T/b2.err"))"
lap "(b) target down"

# ------------------------------------------------ (c) chat without an embedder
DB=$T/c.db
"$D" --quiet measure --db "$DB" --baseline "embedded:$M?profile=cpu-f32" --target "embedded:$M?profile=cpu-int4" \
  --suite builtin:chat --suite builtin:math --limit 3 --max-tokens 16 > "$T/c.out" 2> "$T/c.err"; rc=$?
WANT_C="chat: no scored pair: chat answers have no embeddings; run \`driftbench score --db $DB --embedder URL|embedded:MODEL.gguf\` (or --budget chat=none)"
check '[ $rc -eq 2 ] && grep -qxF "driftbench measure: $WANT_C" "$T/c.err"' \
  "(c) measure of chat without --embedder: exit 2 naming the embeddings and --embedder (rc $rc: $(cat "$T/c.err"))"
check '[ "$(line "$T/c.out" 5)" = "verdict: ERROR (exit 2): chat has no scored pair" ] && grep -q "^  math  *INCONCLUSIVE " "$T/c.out" && grep -q "^  chat  *ERROR  *no scored pair: the 3 chat pairs have no embeddings; score them with an embedder (driftbench score --embedder" "$T/c.out"' \
  "(c) the report: ERROR over math's INCONCLUSIVE: $(sed -n 5,7p "$T/c.out")"
"$D" compare --db "$DB" --baseline baseline --target target > "$T/c2.out" 2> "$T/c2.err"; rc=$?
check '[ $rc -eq 2 ] && grep -qxF "driftbench compare: $WANT_C" "$T/c2.err"' "(c) compare on the same store: exit 2, the same message (rc $rc: $(cat "$T/c2.err"))"
lap "(c) chat without an embedder"

# ------------------------------------------------ (g) nothing gated
"$D" compare --db "$DB" --baseline baseline --target target --budget chat=none,math=none > "$T/g.out" 2> "$T/g.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/g.err" ] && [ "$(line "$T/g.out" 5)" = "verdict: not gated (exit 0): no workload has a budget, nothing was decided" ]' \
  "(g) --budget chat=none,math=none: not gated, exit 0 (rc $rc: $(line "$T/g.out" 5) $(cat "$T/g.err"))"
check 'grep -q "^  math  *not gated  *no budget (--budget math=none)" "$T/g.out" && grep -q "^  chat  *not gated  *no budget (--budget chat=none)" "$T/g.out"' \
  "(g) each workload says not gated: $(sed -n 6,7p "$T/g.out")"
"$D" compare --db "$DB" --baseline baseline --target target --budget chat=none,math=none --format json > "$T/g.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
assert d[\"verdict\"]==\"not_gated\" and d[\"decision\"][\"gated\"]==0, d[\"decision\"]
assert sorted(w[\"verdict\"] for w in d[\"workloads\"])==[\"not_gated\",\"not_gated\"], d[\"workloads\"]
" "$T/g.json"' "(g) json: not_gated, for both workloads (rc $rc)"
"$D" compare --db "$DB" --baseline baseline --target target --budget chat=none > "$T/g2.out" 2>&1; rc=$?
check '[ $rc -eq 3 ] && grep -q "^verdict: INCONCLUSIVE (exit 3): math needs more pairs" "$T/g2.out"' \
  "(g) only chat opted out: math is still gated, INCONCLUSIVE on 3 pairs (rc $rc)"
"$D" compare --db "$T/a.db" --baseline a --target b --budget math=none > /dev/null 2> "$T/g3.err"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/g3.err" ]' "(g) the scored runs of (a) with math=none: exit 0 (rc $rc)"
lap "(g) not gated"

# ------------------------------------------------ (d) no --budget: the default blocks
DB=$T/d.db
ND=30
[ -n "${DRIFT_SANITIZED:-}" ] && ND=16
# cpu-f32 rather than ref as the baseline: the same answers here, 3x faster
"$D" --quiet measure --db "$DB" --baseline "embedded:$M?profile=cpu-f32" --target "embedded:$M?profile=cpu-mxfp4" \
  --suite builtin:math --limit $ND --max-tokens 96 > "$T/d.out" 2> "$T/d.err"; rc=$?
check '[ $rc -eq 1 ]' "(d) measure, no --budget: exit 1 (got $rc: $(cat "$T/d.err"))"
check '[ "$(line "$T/d.out" 5)" = "verdict: BLOCK (exit 1): math $(grep -o "[0-9.]*% over budget 2.00%" "$T/d.out" | head -1)" ] && grep -Eq "^  math +BLOCK +[0-9]+ of $ND flipped: .*, all over the budget 2.00%$" "$T/d.out"' \
  "(d) BLOCK under the default math budget 2%: $(sed -n 5,6p "$T/d.out")"
"$D" compare --db "$DB" --baseline baseline --target target > "$T/h.txt"; rc=$?
check '[ $rc -eq 1 ] && cmp -s <(sed -n 5,6p "$T/d.out") <(sed -n 5,6p "$T/h.txt")' "(d) compare on measure's store: the same decision, exit 1 (rc $rc)"
lap "(d) default budget blocks ($ND prompts)"

# ------------------------------------------------ (h) every format leads with the decision
C=(compare --db "$DB" --baseline baseline --target target)
vline=$(grep -n "^verdict: BLOCK (exit 1)" "$T/h.txt" | head -1 | cut -d: -f1)
tline=$(grep -n "^flip taxonomy" "$T/h.txt" | cut -d: -f1)
check '[ "$vline" = 5 ] && [ -n "$tline" ] && [ "$vline" -lt "$tline" ] && [ "$(line "$T/h.txt" 1)" = "DriftBench comparison: baseline -> target" ]' \
  "(h) text: the verdict on line 5, before the flip taxonomy (verdict $vline, taxonomy $tline)"
"$D" "${C[@]}" --format json > "$T/h.json"; rc=$?
check '[ $rc -eq 1 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
assert list(d)[:3]==[\"schema_version\",\"verdict\",\"decision\"], list(d)[:3]
assert d[\"verdict\"]==\"block\" and d[\"decision\"][\"verdict\"]==\"block\" and d[\"decision\"][\"exit_code\"]==1, d[\"decision\"]
w=d[\"decision\"][\"workloads\"][0]
assert w[\"workload\"]==\"math\" and w[\"reason\"]==\"rate\" and w[\"budget\"]==0.02 and w[\"ci95\"][0]>0.02, w
" "$T/h.json"' "(h) json: the first key is verdict (block), then decision (rc $rc)"
"$D" "${C[@]}" --format markdown > "$T/h.md"; rc=$?
check '[ $rc -eq 1 ] && head -1 "$T/h.md" | grep -q "^### DriftBench: .baseline. → .target. — \*\*BLOCK\*\*$"' \
  "(h) markdown: the first line ends in **BLOCK** (rc $rc: $(head -1 "$T/h.md"))"
"$D" "${C[@]}" --format junit > "$T/h.xml"; rc=$?
check '[ $rc -eq 1 ] && python3 -c "
import sys, xml.etree.ElementTree as ET
r=ET.parse(sys.argv[1]).getroot()
s=r.find(\"testsuite\"); kids=list(s)
assert kids[0].tag==\"properties\", [k.tag for k in kids]
p={x.get(\"name\"): x.get(\"value\") for x in kids[0]}
assert p[\"verdict\"]==\"block\" and p[\"exit_code\"]==\"1\" and p[\"rule\"]==\"interval\", p
f=s.find(\"testcase[@name=\x27math\x27]/failure\")
assert f is not None and f.get(\"type\")==\"drift\", ET.tostring(s)[:300]
" "$T/h.xml"' "(h) junit: <properties> first in the testsuite, verdict block; math a drift failure (rc $rc)"
"$D" "${C[@]}" --format github > "$T/h.gh"; rc=$?
check '[ $rc -eq 1 ] && head -1 "$T/h.gh" | grep -q "^::error title=DriftBench verdict (baseline -> target)::verdict: BLOCK (exit 1): math "' \
  "(h) github: the first line is the verdict's ::error (rc $rc: $(head -1 "$T/h.gh" | cut -c1-160))"
"$D" "${C[@]}" --sequential > "$T/h.seq"; rc=$?
check '[ $rc -eq 1 ] && [ "$(line "$T/h.seq" 2 | cut -c1-24)" = "verdict: BLOCK (exit 1):" ]' \
  "(h) compare --sequential: the verdict on line 2 (rc $rc: $(line "$T/h.seq" 2))"
lap "(h) formats"

# ------------------------------------------------ (e) too few pairs
DB=$T/e.db
"$D" --quiet measure --db "$DB" --baseline "embedded:$M?profile=cpu-f32" --target "embedded:$M?profile=cpu-f32" \
  --suite builtin:math --limit 12 --max-tokens 16 --budget math=0.5 > "$T/e.out" 2> "$T/e.err"; rc=$?
# the first n whose exact 95% upper bound for 0 of n is under 0.5%: 1 - 0.025^(1/n) < 0.005
MORE=$(python3 -c "
n = 1
while 1 - 0.025 ** (1 / n) >= 0.005: n += 1
print(n - 12)")
check '[ $rc -eq 3 ]' "(e) measure, 12 pairs, budget 0.5%: exit 3 (got $rc: $(cat "$T/e.err"))"
check '[ "$(line "$T/e.out" 5)" = "verdict: INCONCLUSIVE (exit 3): math needs more pairs" ] && grep -qF "  math          INCONCLUSIVE  0 of 12 flipped: 0.00%, exact 95% CI [0.00%, 26.46%], straddles the budget 0.50%: about $MORE more prompts at the rate seen would likely decide it" "$T/e.out"' \
  "(e) INCONCLUSIVE, about $MORE more prompts: $(sed -n 5,6p "$T/e.out")"
"$D" compare --db "$DB" --baseline baseline --target target --budget math=0.5 > "$T/e2.out"; rc=$?
check '[ $rc -eq 3 ] && cmp -s <(sed -n 5,6p "$T/e.out") <(sed -n 5,6p "$T/e2.out")' "(e) compare: the same, exit 3 (rc $rc)"
"$D" compare --db "$DB" --baseline baseline --target target --budget math=0.5 --decide point > "$T/e3.out"; rc=$?
check '[ $rc -eq 0 ] && [ "$(line "$T/e3.out" 5)" = "verdict: DEPLOY (exit 0): the gated workload is within its budget" ]' \
  "(e) --decide point: DEPLOY, exit 0 (rc $rc: $(line "$T/e3.out" 5))"
check 'grep -q "^  math  *DEPLOY  *0 of 12 flipped: .*within the budget 0.50% (point rule)$" "$T/e3.out" && grep -q "^rule: point estimate (--decide point)" "$T/e3.out" && grep -q "^error rates: not controlled" "$T/e3.out"' \
  "(e) --decide point: the report says it is the point rule, its error not controlled: $(sed -n 6,8p "$T/e3.out")"
"$D" --quiet measure --db "$DB" --baseline "embedded:$M?profile=cpu-f32" --target "embedded:$M?profile=cpu-f32" \
  --suite builtin:math --limit 12 --max-tokens 16 --budget math=0.5 --decide point > /dev/null 2>&1; rc=$?
check '[ $rc -eq 0 ]' "(e) measure --decide point (nothing asked again): exit 0 (got $rc)"
lap "(e) too few pairs"

# ------------------------------------------------ (f) too many pairs left out
python3 - "$T/f.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(20):
        p = "Compute ANSWER=%d please" % i + (" BROKEN" if i in (5, 13) else "")
        f.write(json.dumps({"prompt_id": "f%02d" % i, "prompt": p, "answer": str(i)}) + "\n")
EOF
printf 'default | echo\n' > "$T/echo.txt"
printf 'default | echo\nfault | BROKEN | 500\n' > "$T/faults.txt"
start_server "$T/echo.txt"; PE=$PORT
start_server "$T/faults.txt"; PF=$PORT
DB=$T/f.db
$D --quiet run --db "$DB" --label base --target "http://127.0.0.1:$PE/v1?model=m" --suite "$T/f.jsonl" || bad "(f) run base"
$D --quiet run --db "$DB" --label flaky --target "http://127.0.0.1:$PF/v1?model=m" --suite "$T/f.jsonl" --retries 0; rc=$?
check '[ $rc -eq 0 ] && [ "$(sqlite3 "$DB" "select count(*) from responses where error is not null")" = 2 ]' \
  "(f) the flaky target: 18 answers and 2 HTTP 500 stored, exit 0 (got $rc)"
$D --quiet score --db "$DB" || bad "(f) score"
"$D" compare --db "$DB" --baseline base --target flaky > "$T/f.out" 2> "$T/f.err"; rc=$?
check '[ $rc -eq 1 ] && [ ! -s "$T/f.err" ] && [ "$(line "$T/f.out" 5)" = "verdict: BLOCK (exit 1): math has too many pairs left out" ]' \
  "(f) 2 of 20 pairs failed: BLOCK, exit 1 (rc $rc: $(line "$T/f.out" 5) $(cat "$T/f.err"))"
check 'grep -qF "  math          BLOCK         2 of 20 pairs left out (2 with errors, 0 unscored): 10.0% is over the 5.0% limit (--max-left-out); left-out pairs can hide drift" "$T/f.out"' \
  "(f) the report says how many were left out and the limit: $(line "$T/f.out" 6)"
"$D" compare --db "$DB" --baseline base --target flaky --max-left-out 50 > "$T/f2.out"; rc=$?
check '[ $rc -eq 3 ] && grep -q "^  math  *INCONCLUSIVE  *0 of 18 flipped: 0.00%, exact 95% CI \[0.00%, 18.53%\], straddles the budget 2.00%" "$T/f2.out"' \
  "(f) --max-left-out 50: decided on the rate, 0 of 18 cannot show 2%: exit 3 (rc $rc: $(sed -n 5,6p "$T/f2.out"))"
"$D" compare --db "$DB" --baseline base --target flaky --max-left-out 50 --budget math=20 > "$T/f3.out"; rc=$?
check '[ $rc -eq 0 ] && [ "$(line "$T/f3.out" 5)" = "verdict: DEPLOY (exit 0): the gated workload is within its budget" ] && grep -q "^  math  *DEPLOY  *0 of 18 flipped: 0.00%, exact 95% CI \[0.00%, 18.53%\], all within the budget 20.00%" "$T/f3.out"' \
  "(f) --max-left-out 50 --budget math=20: 0 of 18 is within 20%, DEPLOY, exit 0 (rc $rc: $(sed -n 5,6p "$T/f3.out"))"
lap "(f) pairs left out"

finish
