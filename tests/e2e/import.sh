#!/usr/bin/env bash
# import.sh - `driftbench import` then `compare` with no server: two
# lm-eval --log_samples GSM8K runs (llama-server over qwen2-7m f16 and Q4_0)
# and the two providers of a real promptfoo results.json. The expected flips
# are counted from the fixture files with python here (tool verdicts that
# differ between the two runs; our math evaluator agrees with them on these
# answers, which the import's summary line says); the gate on 12 lm-eval
# pairs with a flip cannot decide 2% or 1% (INCONCLUSIVE, exit 3, "more
# prompts") and the point rule blocks 1% (exit 1); the promptfoo pair with a
# request error (1 of 13 left out) blocks; bad files are exit 2 naming the file,
# line and field, and leave the store as it was; a document that differs
# between two runs of a task names both files and the document.
. "$(dirname "$0")/lib.sh"
FIX=$S/tests/data/import
A=$FIX/lmeval/qwen2-7m-f16/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
B=$FIX/lmeval/qwen2-7m-q4_0/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
PF=$FIX/promptfoo/results.json
runs() { "$D" compare --db "$1" --baseline '?' --target '?' 2>&1 | sed -n 's/.*runs: \(.*\) (not found).*/\1/p'; }
DB=$T/s.db

# ---- lm-eval ----
"$D" import --db "$DB" "$A" "$B" > "$T/imp.txt" 2> "$T/imp.err"; rc=$?
check '[ $rc -eq 0 ]' "lm-eval import: exit 0 (got $rc: $(cat "$T/imp.err"))"
check 'grep -q "^imported 2 runs" "$T/imp.txt"' "lm-eval import: says 2 runs"
check '[ "$(grep -c "lm_eval:exact_match,strict-match pass .*; math pass .* & math fail 0, .* & math pass 0" "$T/imp.txt")" = 2 ]' \
  "lm-eval import: both runs set the harness's verdict beside ours, no disagreement"
read -r WANT_FLIPS WANT_C2I N <<< "$(python3 - "$A" "$B" <<'EOF'
import json, sys
def verdicts(path):
    return {r["doc_id"]: r["exact_match"] for r in map(json.loads, open(path)) if r["filter"] == "strict-match"}
a, b = verdicts(sys.argv[1]), verdicts(sys.argv[2])
print(sum(a[d] != b[d] for d in a), sum(a[d] == 1 and b[d] == 0 for d in a), len(a))
EOF
)"
"$D" compare --db "$DB" --baseline qwen2-7m-f16/gsm8k --target qwen2-7m-q4_0/gsm8k --format json > "$T/c.json"; rc=$?
check '[ $rc -eq 3 ]' "compare lm-eval runs, the default math budget 2%: 12 pairs cannot decide it, exit 3 (got $rc)"
read -r GOT_N GOT_FLIPS GOT_C2I VERDICT <<< "$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); w=[x for x in d["workloads"] if x["workload"]=="math"][0]
print(w["n"], w["flips"], w["correct_to_incorrect"], d["verdict"])' "$T/c.json")"
check '[ "$GOT_N" = "$N" ] && [ "$GOT_FLIPS" = "$WANT_FLIPS" ] && [ "$GOT_C2I" = "$WANT_C2I" ] && [ "$WANT_FLIPS" -gt 0 ]' \
  "lm-eval compare: n $GOT_N flips $GOT_FLIPS c->i $GOT_C2I, want $N $WANT_FLIPS $WANT_C2I"
check '[ "$VERDICT" = inconclusive ]' "lm-eval compare: json verdict inconclusive (got $VERDICT)"
"$D" compare --db "$DB" --baseline qwen2-7m-f16/gsm8k --target qwen2-7m-q4_0/gsm8k --budget math=1 > "$T/g.txt"; rc=$?
check '[ $rc -eq 3 ] && grep -q "^verdict: INCONCLUSIVE (exit 3): math needs more pairs" "$T/g.txt" && grep -q "straddles the budget 1.00%: about [0-9]* more prompts" "$T/g.txt"' \
  "budget math=1%: the interval straddles it, INCONCLUSIVE with how many more prompts (exit 3, got $rc: $(sed -n 5,6p "$T/g.txt"))"
"$D" compare --db "$DB" --baseline qwen2-7m-f16/gsm8k --target qwen2-7m-q4_0/gsm8k --budget math=1 --decide point > "$T/gp.txt"; rc=$?
check '[ $rc -eq 1 ] && grep -q "^verdict: BLOCK (exit 1): math [0-9.]*% over budget 1.00%" "$T/gp.txt" && grep -q "^rule: point estimate" "$T/gp.txt"' \
  "budget math=1% --decide point: the flip rate over the budget blocks (exit 1, got $rc: $(sed -n 5p "$T/gp.txt"))"

# ---- promptfoo ----
"$D" import --db "$DB" "$PF" > "$T/pf.txt" 2> "$T/pf.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^imported 2 runs" "$T/pf.txt"' "promptfoo import: 2 runs (exit $rc: $(cat "$T/pf.err"))"
read -r PN PERR PFLIPS <<< "$(python3 - "$PF" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))["results"]["results"]
by = {}
for r in res:
    by.setdefault(r["provider"]["label"], {})[r["testIdx"]] = r
a, b = by["qwen2-7m-f16"], by["qwen2-7m-q4_0-ctx160"]
err = [t for t in a if a[t]["failureReason"] == 2 or b[t]["failureReason"] == 2]
ok = [t for t in a if t not in err]
print(len(ok), len(err), sum(a[t]["success"] != b[t]["success"] for t in ok))
EOF
)"
"$D" compare --db "$DB" --baseline qwen2-7m-f16 --target qwen2-7m-q4_0-ctx160 --format json > "$T/p.json"; rc=$?
read -r GN GE GF GV GR <<< "$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); w=d["workloads"][0]; print(w["n"], w["errors"], w["flips"], d["verdict"], w["decision_reason"])' "$T/p.json")"
check '[ "$GN $GE $GF" = "$PN $PERR $PFLIPS" ] && [ "$PERR" -gt 0 ]' \
  "promptfoo compare: n/errors/flips $GN $GE $GF, want $PN $PERR $PFLIPS (exit $rc)"
# the pair with a request error is 1 of 13 left out, over the gate's 5%: BLOCK
check '[ $rc -eq 1 ] && [ "$GV $GR" = "block left_out" ]' "promptfoo compare: the error pair blocks as left out (exit $rc, $GV $GR)"

# ---- the same import again: nothing changes ----
BEFORE=$(runs "$DB")
"$D" --quiet import --db "$DB" "$A"; rc=$?
check '[ $rc -eq 0 ] && [ "$(runs "$DB")" = "$BEFORE" ]' "re-import: exit 0, same runs (got $rc)"
"$D" import --db "$DB" --partial -q "$A" > "$T/q.txt"; rc=$?
check '[ $rc -eq 0 ] && [ ! -s "$T/q.txt" ]' "--partial -q: -q is the global flag, not --partial's value (exit $rc)"

# ---- bad files: exit 2, file:line: field, nothing stored ----
head -c 300 "$A" > "$T/samples_gsm8k_2026-01-01.jsonl"
"$D" import --db "$DB" --label cut "$T/samples_gsm8k_2026-01-01.jsonl" 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -q "samples_gsm8k_2026-01-01.jsonl:1: not a JSON object" "$T/e1"' \
  "truncated line: exit 2 naming file:line (got $rc: $(cat "$T/e1"))"
python3 - "$A" "$T/samples_gsm8k_2026-01-02.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows[5]["exact_match"] = 0.5
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
EOF
"$D" import --db "$DB" --label half "$A" "$T/samples_gsm8k_2026-01-02.jsonl" 2> "$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "samples_gsm8k_2026-01-02.jsonl:6: field \"exact_match\": 0.5 is not pass/fail" "$T/e2"' \
  "metric 0.5: exit 2 naming line 6 and the field (got $rc: $(cat "$T/e2"))"
check '[ "$(runs "$DB")" = "$BEFORE" ]' "bad files: the store holds the same runs"
mkdir -p "$T/edited"
python3 - "$A" "$T/edited/samples_gsm8k_2026-01-03.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if r["doc_id"] == 3:
        r["doc"]["question"] += " (edited)"
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in rows))
EOF
"$D" import --db "$DB" --label edited "$T/edited/samples_gsm8k_2026-01-03.jsonl" 2> "$T/e3"; rc=$?
check '[ $rc -eq 2 ] && grep -q "edited/samples_gsm8k_2026-01-03.jsonl (line 4) and .*qwen2-7m-f16/samples_gsm8k.*document 3 of lm-eval:gsm8k differs" "$T/e3"' \
  "edited document: exit 2 naming both files and document 3 (got $rc: $(cat "$T/e3"))"
"$D" import --db "$T/pair.db" --label x "$A" --label y "$T/edited/samples_gsm8k_2026-01-03.jsonl" 2> "$T/e4"; rc=$?
check '[ $rc -eq 2 ] && grep -q "document 3 of lm-eval:gsm8k differs" "$T/e4"' "edited document as a pair: exit 2 (got $rc)"
cp "$S/tests/fuzz/corpus/fuzz_import_lmeval/choices.jsonl" "$T/samples_boolq_2026-01-01.jsonl"
"$D" import --db "$T/w.db" "$T/samples_boolq_2026-01-01.jsonl" 2> "$T/e5"; rc=$?
check '[ $rc -eq 2 ] && grep -q "task boolq: DriftBench does not know its workload; .*--workload" "$T/e5"' \
  "unknown task without --workload: exit 2 (got $rc)"
"$D" import --db "$T/w.db" --workload long_context "$T/samples_boolq_2026-01-01.jsonl" > "$T/w.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "lm_eval:acc pass 1/1; DriftBench.s evaluator: none" "$T/w.txt"' \
  "a pass/fail task with --workload: stored with the harness's verdict only (got $rc)"
"$D" import --db "$DB" --verdict maybe "$A" 2> "$T/e6"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--verdict: .maybe." "$T/e6"' "bad flag value: exit 2 naming the flag"
check '[ "$(runs "$DB")" = "$BEFORE" ]' "after every refusal: the store holds the same runs"

finish
