#!/usr/bin/env bash
# compare_github.sh - `compare --format github` over a real store: two runs
# of the 5-prompt math fixture through the fake server (4 counted pairs,
# 1 flip, 1 error pair left out), the baseline labelled with characters
# that workflow commands must escape. Budget 1%: the error pair (1 of 5) is
# over the gate's 5% left-out limit: exit 1, the verdict ::error first, one
# ::error for math (escaped label, pairs left out, the flipped prompt) and
# one ::warning for the error pair; the summary between
# ::stop-commands::TOKEN and ::TOKEN:: is appended to $GITHUB_STEP_SUMMARY
# (what was there is kept) and leads with **BLOCK**; with --max-left-out 50
# the 4 pairs are INCONCLUSIVE: exit 3, warnings only, the exact CI; with
# the point rule and budget 50%: exit 0, a ::notice verdict, no ::error; an
# unwritable summary file and --sequential with github are exit 2.
. "$(dirname "$0")/lib.sh"

start_server "$FIX/math5_baseline.txt"; P1=$PORT
start_server "$FIX/math5_target.txt"; P2=$PORT
DB=$T/s.db
BASE='h100%fp16,vllm:1'
$D --quiet run --db "$DB" --label "$BASE" --target "http://127.0.0.1:$P1/v1?model=m" --suite "$FIX/math5.jsonl"
$D --quiet run --db "$DB" --label targ --target "http://127.0.0.1:$P2/v1?model=m&api=chat" --suite "$FIX/math5.jsonl" \
  --retries 1
$D --quiet score --db "$DB"
C=(compare --db "$DB" --baseline "$BASE" --target targ)

SUM=$T/step_summary.md
echo "earlier step" > "$SUM"
# budget 1%, the default rule: the error pair is 1 of 5 left out (over the
# 5% limit), so math is blocked for it (exit 1) whatever its flips
GITHUB_STEP_SUMMARY=$SUM "$D" "${C[@]}" --budget math=1 --format github > "$T/fail.out" 2> "$T/fail.err"; rc=$?
check '[ $rc -eq 1 ]' "blocked: exit 1 (got $rc: $(cat "$T/fail.err"))"
ESC='(h100%25fp16%2Cvllm%3A1 -> targ)'
TITLE="title=DriftBench math $ESC"
RULE='rule: interval: the exact (Clopper-Pearson) 95%25 interval of each flip rate against its budget: DEPLOY when all of it is within, BLOCK when all of it is over, INCONCLUSIVE when it straddles; a workload with over 5.0%25 of its pairs left out (errors, unscored) is blocked, one with no scored pair is an error'
check '[ "$(head -n 1 "$T/fail.out")" = "::error title=DriftBench verdict $ESC::verdict: BLOCK (exit 1): math has too many pairs left out%0A$RULE" ]' \
  "the first line is the verdict, an ::error with the rule: $(head -n 1 "$T/fail.out")"
check '[ "$(grep -c "^::error " "$T/fail.out")" = 2 ]' "two ::error lines, the verdict and math: $(grep '^::' "$T/fail.out")"
check 'grep -qxF "::error $TITLE::math BLOCK: 1 of 5 pairs left out (1 with errors, 0 unscored): 20.0%25 is over the 5.0%25 limit (--max-left-out); left-out pairs can hide drift%0Afirst flipped prompts:%0A  m1 (correct->incorrect)" "$T/fail.out"' \
  "the math error: escaped title, pairs left out, the limit, the flipped prompt: $(grep '^::error title=DriftBench math' "$T/fail.out")"
check 'grep -qxF "::warning $TITLE::math: 1 pair(s) left out for request or evaluator errors (4 compared)" "$T/fail.out"' \
  "the error pair is a warning"
# everything before the fence is an annotation; the fence closes on the last line
fence=$(grep -n "^::stop-commands::" "$T/fail.out" | cut -d: -f1)
token=$(sed -n "${fence}p" "$T/fail.out" | sed 's/^::stop-commands:://')
check '[ -n "$fence" ] && [ ${#token} -ge 16 ]' "a ::stop-commands:: line with a token ($fence, $token)"
check '[ "$(head -n $((fence - 1)) "$T/fail.out" | grep -vc "^::\(error\|warning\) title=")" = 0 ]' "only annotations before the fence"
check '[ "$(tail -n 1 "$T/fail.out")" = "::$token::" ]' "the fence closes on the last line"
check '[ "$(grep -c "^::" "$T/fail.out")" = $((fence + 1)) ]' "no other line starts with ::"
# the step summary: what was there, then exactly the fenced Markdown
sed -n "$((fence + 1)),\$p" "$T/fail.out" | sed '$d' > "$T/fenced.md"
{ echo "earlier step"; cat "$T/fenced.md"; } > "$T/expect.md"
check 'cmp -s "$SUM" "$T/expect.md"' "the summary is appended to \$GITHUB_STEP_SUMMARY: $(diff "$SUM" "$T/expect.md" | head -5)"
check 'grep -qx "### DriftBench: .h100%fp16,vllm:1. .* \*\*BLOCK\*\*" "$SUM" && grep -qxF "**Verdict: BLOCK (exit 1): math has too many pairs left out**" "$SUM" && grep -q "^| math | 4 | 1 | 1 | 25.00%" "$SUM"' \
  "the summary is the Markdown report, led by the decision: $(head -3 "$SUM")"
check '! grep -qF "$token" "$T/fenced.md"' "the token is not in the summary"

# without the variable: the same output, no file written
"$D" "${C[@]}" --budget math=1 --format github -o "$T/nofile.out"; rc=$?
check '[ $rc -eq 1 ] && cmp -s "$T/nofile.out" "$T/fail.out"' "-o FILE: the same text without \$GITHUB_STEP_SUMMARY (rc $rc)"

# the error pair allowed (--max-left-out 50): 1 flip of 4 cannot decide 1%,
# INCONCLUSIVE (exit 3): warnings only, the verdict first, the exact CI
GITHUB_STEP_SUMMARY=$SUM "$D" "${C[@]}" --budget math=1 --max-left-out 50 --format github > "$T/inc.out" 2>&1; rc=$?
check '[ $rc -eq 3 ]' "inconclusive: exit 3 (got $rc)"
check 'head -n 1 "$T/inc.out" | grep -q "^::warning title=DriftBench verdict (h100%25fp16%2Cvllm%3A1 -> targ)::verdict: INCONCLUSIVE (exit 3): math needs more pairs%0Arule: interval: "' \
  "inconclusive: the first line is a ::warning with the verdict: $(head -n 1 "$T/inc.out")"
check '! grep -q "^::error" "$T/inc.out" && grep -qF "::warning $TITLE::math INCONCLUSIVE: 1 of 4 flipped: 25.00%25, exact 95%25 CI [0.63%25, 80.59%25], straddles the budget 1.00%25: about " "$T/inc.out"' \
  "inconclusive: no ::error, math warns with the rate, the exact CI and the budget: $(grep "^::warning $TITLE::math INC" "$T/inc.out")"

# the old point rule with the error pair allowed: 25% within 50% deploys (exit 0)
GITHUB_STEP_SUMMARY=$SUM "$D" "${C[@]}" --budget math=50 --max-left-out 50 --decide point --format github > "$T/pass.out" 2>&1; rc=$?
check '[ $rc -eq 0 ]' "within budget: exit 0 (got $rc)"
check 'head -n 1 "$T/pass.out" | grep -q "^::notice title=DriftBench verdict (h100%25fp16%2Cvllm%3A1 -> targ)::verdict: DEPLOY (exit 0): " && ! grep -q "^::error" "$T/pass.out" && grep -qxF "::warning $TITLE::math: 1 pair(s) left out for request or evaluator errors (4 compared)" "$T/pass.out"' \
  "within budget: a ::notice verdict, no error, the error pair still warns: $(grep '^::' "$T/pass.out" | head -3)"
check '[ "$(grep -c "^### DriftBench" "$SUM")" = 3 ]' "a summary appended each time"
GITHUB_STEP_SUMMARY=$T/no/such/dir/sum.md "$D" "${C[@]}" --format github > /dev/null 2> "$T/nodir.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "GITHUB_STEP_SUMMARY $T/no/such/dir/sum.md: cannot append" "$T/nodir.err"' \
  "an unwritable summary file: exit 2 naming it (rc $rc: $(cat "$T/nodir.err"))"
"$D" "${C[@]}" --sequential --format github > /dev/null 2> "$T/seq.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "not junit, github or html" "$T/seq.err"' "--sequential with github: exit 2 ($(cat "$T/seq.err"))"
"$D" "${C[@]}" --format gitlab > /dev/null 2> "$T/fmt.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "unknown format \"gitlab\" (known: text, json, markdown, junit, github, html)" "$T/fmt.err"' \
  "unknown format names the known ones ($(cat "$T/fmt.err"))"

finish
