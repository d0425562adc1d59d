#!/usr/bin/env bash
# measure_sequential.sh - `measure --sequential` end to end with the
# embedded engine: qwen2-7m at profile ref against its cpu-int4
# (a flip rate of several percent on math) with a 2% budget stops early
# with BLOCK (exit 1); the same stack against itself (rate 0) with a 10%
# budget stops early with DEPLOY (exit 0). Each time fewer pairs than the
# suite were asked (the stored runs hold only those, unfinished), and
# compare --sequential on the stored runs gives the same pairs asked,
# flips, interval and verdict; running the command again asks nothing new
# and gives the same report. The HTML report draws each stopping curve
# (stop, budget, verdict). Bad flag combinations exit 2 naming them.
. "$(dirname "$0")/lib.sh"
M=$S/models/qwen2-7m.gguf

# cpu-f32 rather than ref: the same answers here, several times faster (under
# ASan the ref profile made this test take minutes)
REF="embedded:$M?profile=cpu-f32&threads=1"
INT4="embedded:$M?profile=cpu-int4&threads=1"
R=(--suite builtin:math --max-tokens 48 --concurrency 1 --sequential --format json)

# same report from measure and from compare --sequential on its store
same() {
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
m, c, n, verdict = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
wm = [w for w in m["workloads"] if w["workload"] == "math"][0]
wc = [w for w in c["workloads"] if w["workload"] == "math"][0]
assert wm["gated"] and wm["n"] == n, wm
assert wm["verdict"] == verdict and wm["early"] and wm["asked"] < n, wm
for k in ("asked", "flips", "verdict", "early", "interval", "n"):
    assert wm[k] == wc[k], (k, wm, wc)
PY
}

# 1. a clear flip rate against a 2% budget: BLOCK early
DB=$T/b.db
"$D" --quiet measure --db "$DB" --baseline "$REF" --target "$INT4" "${R[@]}" --limit 300 --budget math=2 > "$T/b.json"; rc=$?
check '[ $rc -eq 1 ]' "int4 vs f32, budget 2%: exit 1 (got $rc)"
"$D" compare --db "$DB" --baseline baseline --target target --sequential --budget math=2 --format json > "$T/bc.json"
check 'same "$T/b.json" "$T/bc.json" 300 block' "BLOCK early, compare --sequential agrees: $(head -c 600 "$T/b.json")"
asked=$(python3 -c 'import json,sys; print([w for w in json.load(open(sys.argv[1]))["workloads"] if w["workload"]=="math"][0]["asked"])' "$T/b.json")
"$D" compare --db "$DB" --baseline baseline --target target --budget math=2 --format json > "$T/fixed.json"
check 'python3 -c "
import json,sys
w=[w for w in json.load(open(sys.argv[1]))[\"workloads\"] if w[\"workload\"]==\"math\"][0]
assert $asked <= w[\"n\"] < 300, w
" "$T/fixed.json"' "the stored runs hold only the chunks asked (about $asked pairs, < 300)"
# again: nothing new is asked, the same report
"$D" --quiet measure --db "$DB" --baseline "$REF" --target "$INT4" "${R[@]}" --limit 300 --budget math=2 > "$T/b2.json"; rc=$?
check '[ $rc -eq 1 ] && cmp -s "$T/b.json" "$T/b2.json"' "the same command again: the same report (rc $rc)"

# the HTML report's stopping curve, replayed from the stored runs
"$D" --quiet report --db "$DB" --html "$T/b.html"; rc=$?
check '[ $rc -eq 0 ] && grep -q "id=\"sequential\"" "$T/b.html" && grep -q "<td class=\"num\">$asked / 300<br>" "$T/b.html" \
  && grep -q "budget 2.00%</title>" "$T/b.html" && grep -q "<b>BLOCK</b><br><span class=\"sub\">early" "$T/b.html" \
  && [ "$(grep -o "<title>lower bound</title>" "$T/b.html" | wc -l)" -eq 1 ]' \
  "report: a stopping curve with the stop at $asked of 300, the budget and BLOCK (rc $rc)"

# 2. the same stack against itself (rate 0) under a 10% budget: DEPLOY early
DB=$T/d.db
"$D" --quiet measure --db "$DB" --baseline "$REF" --target "$REF" "${R[@]}" --limit 200 --budget math=10 > "$T/d.json"; rc=$?
check '[ $rc -eq 0 ]' "f32 vs f32, budget 10%: exit 0 (got $rc)"
"$D" compare --db "$DB" --baseline baseline --target target --sequential --budget math=10 --format json > "$T/dc.json"
check 'same "$T/d.json" "$T/dc.json" 200 deploy' "DEPLOY early, compare --sequential agrees: $(head -c 600 "$T/d.json")"
"$D" --quiet report --db "$DB" --html "$T/d.html"
check 'grep -q "<b>DEPLOY</b><br><span class=\"sub\">early" "$T/d.html"' "report: the DEPLOY stop"

# 3. bad combinations: exit 2, naming the problem
M2=(measure --db "$T/x.db" --baseline "$REF" --target "$INT4" --suite builtin:math --limit 2)
"$D" "${M2[@]}" --sequential --order risk --logprobs 5 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -q "order risk" "$T/e1" && grep -q "random order" "$T/e1"' "--order risk refused (rc $rc): $(cat "$T/e1")"
"$D" "${M2[@]}" --sequential --order suite 2> "$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "order suite" "$T/e2"' "--order suite refused (rc $rc): $(cat "$T/e2")"
"$D" "${M2[@]}" --alpha 0.1 2> "$T/e3"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--alpha goes with --sequential" "$T/e3"' "--alpha alone (rc $rc): $(cat "$T/e3")"
"$D" "${M2[@]}" --sequential --alpha 0.9 2> "$T/e4"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--alpha" "$T/e4"' "--alpha 0.9 (rc $rc): $(cat "$T/e4")"
"$D" "${M2[@]}" --sequential --format junit 2> "$T/e5"; rc=$?
check '[ $rc -eq 2 ] && grep -q "junit" "$T/e5"' "--format junit (rc $rc): $(cat "$T/e5")"
check '[ ! -e "$T/x.db" ]' "a refused measure creates no store"

finish
