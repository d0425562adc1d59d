#!/usr/bin/env bash
# compare_evaluator.sh - `compare --evaluator NAME` on imported runs, and the
# unpaired answers of runs over different document sets. A copy of the
# promptfoo fixture has two tool verdicts inverted (the answers untouched),
# so the tool's verdict and ours disagree on them: --evaluator promptfoo
# must give the flips the copy's "success" fields imply, --evaluator math
# those of the untouched fixture (python counts both from the files). An
# evaluator a run lacks is exit 2 naming the ones it has. Two lm-eval runs,
# one with three documents removed (imported with --partial), pair the
# shared documents and say three baseline answers were left unpaired.
. "$(dirname "$0")/lib.sh"
FIX=$S/tests/data/import
A=$FIX/lmeval/qwen2-7m-f16/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
B=$FIX/lmeval/qwen2-7m-q4_0/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
PF=$FIX/promptfoo/results.json
BASE=qwen2-7m-f16 TARG=qwen2-7m-q4_0-ctx160
# math out of the gate: the promptfoo fixture leaves 1 of 13 pairs out (a
# request error), which the gate blocks (exit 1), and 9 lm-eval pairs are
# INCONCLUSIVE (exit 3); this test is about which scores are counted
NG=(--budget math=none)

# ---- promptfoo with two tool verdicts inverted ----
# Writes the edited copy and prints: pairs, errors, flips by the copy's
# verdicts, flips by the original verdicts (ours agree with those: the
# import says so below).
read -r PN PERR TOOLF OURF <<< "$(python3 - "$PF" "$T/results.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
res = doc["results"]["results"]
by = {}
for r in res:
    by.setdefault(r["provider"]["label"], {})[r["testIdx"]] = r
a, b = by["qwen2-7m-f16"], by["qwen2-7m-q4_0-ctx160"]
err = [t for t in a if a[t]["failureReason"] == 2 or b[t]["failureReason"] == 2]
ok = sorted(t for t in a if t not in err)
orig = {t: (a[t]["success"], b[t]["success"]) for t in ok}
# invert the target's verdict on the first two answered tests that agree
inv = [t for t in ok if a[t]["success"] == b[t]["success"]][:2]
assert len(inv) == 2
for t in inv:
    b[t]["success"] = not b[t]["success"]
    if isinstance(b[t].get("gradingResult"), dict):
        b[t]["gradingResult"]["pass"] = b[t]["success"]
json.dump(doc, open(sys.argv[2], "w"))
print(len(ok), len(err), sum(a[t]["success"] != b[t]["success"] for t in ok), sum(x != y for x, y in orig.values()))
EOF
)"
DB=$T/pf.db
"$D" import --db "$DB" "$T/results.json" > "$T/imp.txt" 2> "$T/imp.err"; rc=$?
check '[ $rc -eq 0 ]' "import the edited promptfoo file: exit 0 (got $rc: $(cat "$T/imp.err"))"
check 'grep -q "^$TARG: .*promptfoo pass & math fail [12]\|^$TARG: .*promptfoo fail & math pass [12]" "$T/imp.txt"' \
  "the import sees the tool and us disagree on the target ($(cat "$T/imp.txt"))"
flips() { # evaluator -> "n errors flips"
  "$D" compare --db "$DB" --baseline "$BASE" --target "$TARG" --evaluator "$1" "${NG[@]}" --format json > "$T/c_$1.json" || return
  python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); w=d["workloads"][0]
assert d["evaluator"]==sys.argv[2], d.get("evaluator")
assert d["verdict"]=="not_gated", d["verdict"]
print(w["n"], w["errors"], w["flips"])' "$T/c_$1.json" "$1"
}
GOT=$(flips promptfoo)
check '[ "$GOT" = "$PN $PERR $TOOLF" ]' "--evaluator promptfoo: n/errors/flips '$GOT', want '$PN $PERR $TOOLF'"
GOT=$(flips math)
check '[ "$GOT" = "$PN $PERR $OURF" ]' "--evaluator math: n/errors/flips '$GOT', want '$PN $PERR $OURF'"
check '[ "$TOOLF" != "$OURF" ]' "the two evaluators' flip counts differ ($TOOLF vs $OURF): the test can tell them apart"
"$D" compare --db "$DB" --baseline "$BASE" --target "$TARG" --evaluator promptfoo "${NG[@]}" > "$T/c.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^scores: evaluator \"promptfoo\" only" "$T/c.txt"' "text says which evaluator (exit $rc)"
"$D" compare --db "$DB" --baseline "$BASE" --target "$TARG" --evaluator promptfoo "${NG[@]}" --format markdown > "$T/c.md"; rc=$?
check '[ $rc -eq 0 ] && grep -q "Scores of evaluator .promptfoo. only" "$T/c.md"' "markdown says which evaluator (exit $rc)"
"$D" compare --db "$DB" --baseline "$BASE" --target "$TARG" --evaluator lm_eval:acc 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -q "baseline \"$BASE\": .*no score by evaluator \"lm_eval:acc\" (its evaluators: math, promptfoo)" "$T/e1"' \
  "unknown evaluator: exit 2 naming the run's evaluators (got $rc: $(cat "$T/e1"))"
"$D" compare --db "$DB" --baseline "$BASE" --target "$TARG" --evaluator "" 2> "$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--evaluator needs a name" "$T/e2"' "empty --evaluator: exit 2 (got $rc)"
"$D" compare --db "$DB" --baseline "$BASE" --target "$TARG" "${NG[@]}" --format json > "$T/plain.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); assert \"evaluator\" not in d and \"unpaired\" not in d, list(d)" "$T/plain.json"' \
  "without --evaluator, same documents: no evaluator or unpaired keys"

# ---- lm-eval, the target missing three documents (--partial) ----
python3 - "$B" "$T/part/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" <<'EOF'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
keep = [r for r in rows if r["doc_id"] not in (0, 4, 7)]
open(sys.argv[2], "w").write("".join(json.dumps(r) + "\n" for r in keep))
EOF
read -r WN WF <<< "$(python3 - "$A" "$T/part/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" <<'EOF'
import json, sys
def v(p): return {r["doc_id"]: r["exact_match"] for r in map(json.loads, open(p)) if r["filter"] == "strict-match"}
a, b = v(sys.argv[1]), v(sys.argv[2])
print(len(set(a) & set(b)), sum(a[d] != b[d] for d in set(a) & set(b)))
EOF
)"
LDB=$T/lm.db
"$D" --quiet import --db "$LDB" --label full "$A" 2> "$T/e3" &&
  "$D" --quiet import --db "$LDB" --partial --label part "$T/part/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl" 2>> "$T/e3"; rc=$?
check '[ $rc -eq 0 ]' "import a full and a partial lm-eval run (exit $rc: $(cat "$T/e3"))"
"$D" compare --db "$LDB" --baseline full --target part "${NG[@]}" --format json > "$T/u.json" 2> "$T/e4"; rc=$?
GOT=$(python3 -c '
import json,sys
d=json.load(open(sys.argv[1])); w=d["workloads"][0]
print(w["n"], w["flips"], d["unpaired"]["baseline"], d["unpaired"]["target"])' "$T/u.json" 2>&1)
check '[ $rc -eq 0 ] && [ "$GOT" = "$WN $WF 3 0" ]' "partial: n flips unpaired '$GOT', want '$WN $WF 3 0' (exit $rc: $(cat "$T/e4"))"
"$D" compare --db "$LDB" --baseline part --target full "${NG[@]}" > "$T/u.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^unpaired: 0 baseline and 3 target answer(s) have no counterpart" "$T/u.txt"' \
  "partial, the other way round: the text line (exit $rc)"
"$D" compare --db "$LDB" --baseline full --target part --evaluator lm_eval:exact_match,strict-match \
  "${NG[@]}" --format json > "$T/u2.json"; rc=$?
GOT=$(python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); print(d["workloads"][0]["n"], d["unpaired"]["baseline"])' "$T/u2.json" 2>&1)
check '[ $rc -eq 0 ] && [ "$GOT" = "$WN 3" ]' "partial with the harness's evaluator: '$GOT', want '$WN 3'"

finish
