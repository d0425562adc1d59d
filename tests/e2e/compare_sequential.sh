#!/usr/bin/env bash
# compare_sequential.sh - `compare --sequential` over a real store: two runs
# of the 5-prompt math fixture through the fake server (4 counted pairs,
# 1 flip, 1 error pair left out). The error pair (1 of 5) is over the gate's
# 5% left-out limit: BLOCK (exit 1) for it, reason left_out. With it allowed
# (--max-left-out 50): budget 1% allows no flip: BLOCK (exit 1) as soon as
# the flip comes in the seeded order; budget 60% is a DEPLOY (exit 0) once
# 3 flips can no longer be reached; budget 50% is never certain before the
# pairs run out and then gets compare's decision, INCONCLUSIVE (exit 3); no
# budget is not gated (exit 0, said so); the same seed gives the same
# report; text, json and markdown; bad flags are exit 2 naming the flag.
. "$(dirname "$0")/lib.sh"

start_server "$FIX/math5_baseline.txt"; P1=$PORT
start_server "$FIX/math5_target.txt"; P2=$PORT
DB=$T/s.db
$D --quiet run --db "$DB" --label base --target "http://127.0.0.1:$P1/v1?model=m" --suite "$FIX/math5.jsonl" \
  --config model=m,hardware=h100,precision=fp16,framework=vllm
$D --quiet run --db "$DB" --label targ --target "http://127.0.0.1:$P2/v1?model=m&api=chat" --suite "$FIX/math5.jsonl" \
  --retries 1 --config model=m,hardware=b200,precision=fp8,framework=sglang
$D --quiet score --db "$DB"
C=(compare --db "$DB" --baseline base --target targ)

"$D" "${C[@]}" --format json > "$T/plain.json"
check 'grep -q "\"flips\": *1" "$T/plain.json" && ! grep -q sequential "$T/plain.json"' "plain compare: 1 flip, no sequential part"

"$D" "${C[@]}" --sequential --budget math=1 --format json > "$T/left.json"; rc=$?
check '[ $rc -eq 1 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1])); w=d[\"workloads\"][0]
assert d[\"verdict\"]==\"block\" and d[\"exit_code\"]==1 and w[\"verdict\"]==\"block\" and w[\"reason\"]==\"left_out\", (d[\"verdict\"], w)
" "$T/left.json"' "budget 1%, the error pair (1 of 5) over the 5% left-out limit: BLOCK for it, exit 1 (rc $rc): $(head -c 300 "$T/left.json")"

# the error pair allowed (--max-left-out 50): the replay decides on the flips
L=(--max-left-out 50)
"$D" "${C[@]}" "${L[@]}" --sequential --budget math=1 --format json > "$T/block.json"; rc=$?
check '[ $rc -eq 1 ]' "budget 1%: exit 1 (got $rc)"
check 'python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
assert list(d)[:2]==[\"schema_version\",\"verdict\"] and d[\"schema_version\"]==1, list(d)
w=[x for x in d[\"workloads\"] if x[\"workload\"]==\"math\"][0]
assert d[\"verdict\"]==\"block\" and d[\"summary\"]==\"BLOCK (exit 1): math (stopped early)\", d[\"summary\"]
assert w[\"gated\"] and w[\"verdict\"]==\"block\" and w[\"reason\"]==\"rate\" and w[\"early\"] and w[\"n\"]==4, w
assert w[\"flips\"]==1 and 1<=w[\"asked\"]<4 and w[\"interval\"][0]>0.01, w
assert w[\"full_verdict\"]==\"inconclusive\", w   # 1 of 4 alone: the exact interval straddles 1%
assert d[\"sequential\"][\"seed\"]==42 and d[\"sequential\"][\"alpha\"]==0.05
" "$T/block.json"' "budget 1%: BLOCK early at the flip, interval over the budget: $(head -c 400 "$T/block.json")"

# budget 60%: after 3 pairs with 1 flip the suite's rate is at most 2 of 4,
# under 60%: DEPLOY early
"$D" "${C[@]}" "${L[@]}" --sequential --budget math=60 > "$T/deploy.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^verdict: DEPLOY (exit 0): every gated workload deploys" "$T/deploy.txt" && grep -Eq "^math +3 +4 +1 .* DEPLOY \(early\)" "$T/deploy.txt"' \
  "budget 60%: DEPLOY early after 3 of 4, exit 0 (rc $rc): $(cat "$T/deploy.txt")"
"$D" "${C[@]}" "${L[@]}" --sequential --budget math=60 > "$T/deploy2.txt"
check 'cmp -s "$T/deploy.txt" "$T/deploy2.txt"' "the same seed gives the same report"
# budget 50%: 2 of 4 would be within it, so nothing is certain before the
# pairs run out; then compare's fixed-size decision: 1 of 4, exact interval
# [0.63%, 80.59%] straddles 50%: INCONCLUSIVE, exit 3
"$D" "${C[@]}" "${L[@]}" --sequential --budget math=50 > "$T/end.txt"; rc=$?
check '[ $rc -eq 3 ] && grep -q "^verdict: INCONCLUSIVE (exit 3): math (suite ran out undecided)" "$T/end.txt" && grep -Eq "^math +4 +4 +1 .* INCONCLUSIVE \(suite end\)" "$T/end.txt"' \
  "budget 50%: the pairs run out undecided, compare's INCONCLUSIVE, exit 3 (rc $rc): $(cat "$T/end.txt")"

"$D" "${C[@]}" --sequential --budget math=none --format markdown > "$T/none.md"; rc=$?
check '[ $rc -eq 0 ] && grep -q "no budget" "$T/none.md" && grep -q "^| math |" "$T/none.md" && head -1 "$T/none.md" | grep -q "\*\*not gated\*\*$"' \
  "no budget: not gated, exit 0 (rc $rc): $(cat "$T/none.md")"
for bad in "--sequential --alpha 0.9" "--sequential --alpha x" "--seed 5" "--alpha 0.1" "--sequential --format junit"; do
  # shellcheck disable=SC2086
  "$D" "${C[@]}" $bad > /dev/null 2> "$T/bad.err"; rc=$?
  check '[ $rc -eq 2 ] && [ -s "$T/bad.err" ]' "'$bad': exit 2 with a message (rc $rc: $(cat "$T/bad.err"))"
done
grep -q -- "--sequential" <("$D" compare --help) && ok || bad "compare --help mentions --sequential"

finish
