#!/usr/bin/env bash
# compare_risk.sh - per-prompt flip risk end to end with the embedded engine:
# the shipped qwen2-7m model at profile ref asked with --logprobs 5, the same
# model at cpu-int4 (no logprobs) as the target, 40 math prompts. compare
# shows the risk of every flip with its rank and the AUC / precision@10%
# with intervals (text, json, markdown); the json's AUC and precision are
# recomputed here from its own per-prompt listing; with the int4 run as the
# baseline compare says once that the baseline has no logprobs. run --order
# risk asks prompts riskiest first (the stored order is checked against the
# listing), --order random is seeded (same seed, same order); bad order
# flags are exit 2 naming the problem.
. "$(dirname "$0")/lib.sh"
M=$S/models/qwen2-7m.gguf

DB=$T/r.db
R=(--suite "builtin:math" --limit 40 --max-tokens 48 --concurrency 1)
$D --quiet run --db "$DB" --label ref --target "embedded:$M?profile=ref&threads=1" "${R[@]}" --logprobs 5 || exit 1
$D --quiet run --db "$DB" --label int4 --target "embedded:$M?profile=cpu-int4&threads=1" "${R[@]}" || exit 1
$D --quiet score --db "$DB" --jobs 1 || exit 1
# math out of the gate: 40 pairs with a few flips are INCONCLUSIVE under the
# default 2% (exit 3); this test is about flip risk, not the gate
C=(compare --db "$DB" --budget math=none)

"$D" "${C[@]}" --baseline ref --target int4 > "$T/c.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^flip risk from the baseline.s logprobs" "$T/c.txt"' "text: a risk section (rc $rc)"
check 'grep -Eq "^  math +risk/v[12][-a-z]* +AUC [0-9.]+ \[[0-9.]+, [0-9.]+\] +prec@10% [0-9.]+ \[" "$T/c.txt"' \
  "text: math AUC and precision with intervals: $(grep -A2 "^flip risk" "$T/c.txt")"
check 'grep -Eq "(correct|incorrect)->(correct|incorrect)  risk [0-9.]+ \(rank [0-9]+ of 40\)" "$T/c.txt"' \
  "text: each flip shows its risk and rank: $(grep -- "->" "$T/c.txt" | head -3)"
check '! grep -q "no logprobs" "$T/c.txt"' "text: no 'no logprobs' note when there are logprobs"

"$D" "${C[@]}" --baseline ref --target int4 --no-risk > "$T/c0.txt"
check '! grep -q "flip risk\|  risk [0-9]" "$T/c0.txt" && grep -q "^math " "$T/c0.txt"' "--no-risk: no risk shown"

"$D" "${C[@]}" --baseline ref --target int4 --format json > "$T/c.json"
check 'python3 - "$T/c.json" <<"EOF"
import json, math, sys
d = json.load(open(sys.argv[1]))
w = [x for x in d["workloads"] if x["workload"] == "math"][0]
r, rows = w["risk"], w["risk_by_prompt"]
assert d["risk"]["resamples"] == 2000, d["risk"]
assert r["n"] == w["n"] == len(rows) == 40 and r["unknown"] == 0, (r, w["n"], len(rows))
assert r["flips"] == w["flips"] == sum(x["flipped"] for x in rows) > 0, r
assert all(0 < x["risk"] <= 1 for x in rows)
assert all("risk" in f for f in w["flipped"])
pos = [x["risk"] for x in rows if x["flipped"]]
neg = [x["risk"] for x in rows if not x["flipped"]]
auc = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))
assert abs(auc - r["auc"]) < 1e-9, (auc, r["auc"])
assert r["auc_ci95"][0] <= r["auc"] <= r["auc_ci95"][1], r
top = sorted(rows, key=lambda x: -x["risk"])[:4]          # ceil(10% of 40), no ties at the cut here
if len({x["risk"] for x in rows}) == 40:
    assert abs(r["prec10"] - sum(x["flipped"] for x in top) / 4) < 1e-9, r
assert r["top_n"] == 4 and abs(r["base_rate"] - r["flips"] / 40) < 1e-12
EOF' "json: risk object and listing consistent, AUC recomputed"

"$D" "${C[@]}" --baseline ref --target int4 --format markdown > "$T/c.md"
check 'grep -q "^\*\*Flip risk\*\*" "$T/c.md" && grep -Eq "^\| math \| .risk/v" "$T/c.md" && grep -q "risk (rank)" "$T/c.md"' \
  "markdown: risk table and the flips' risk column"

"$D" "${C[@]}" --baseline int4 --target ref > "$T/n.txt"
check '[ "$(grep -c "flip risk: the baseline has no logprobs; run it with --logprobs N" "$T/n.txt")" = 1 ]' \
  "no logprobs: said once: $(grep -i risk "$T/n.txt")"
"$D" "${C[@]}" --baseline int4 --target ref --format json > "$T/n.json"
check '! grep -q "\"risk" "$T/n.json"' "no logprobs: no risk keys in json"
"$D" "${C[@]}" --baseline int4 --target ref --format markdown > "$T/n.md"
check 'grep -q "the baseline has no logprobs" "$T/n.md"' "no logprobs: said in markdown"

# --order risk: the stored order (concurrency 1) is the descending risk of ref's answers
$D --quiet run --db "$DB" --label ord --target "embedded:$M?profile=cpu-f32&threads=1" --suite builtin:math --limit 40 \
  --max-tokens 4 --concurrency 1 --order risk --risk-from ref; rc=$?
check '[ $rc -eq 0 ]' "run --order risk: exit 0 (got $rc)"
check 'python3 - "$DB" "$T/c.json" <<"EOF"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
got = [r[0] for r in db.execute("select p.prompt_id from responses s join prompts p on p.rowid = s.prompt_rowid "
                                "join runs r on r.id = s.run_id where r.label = ? order by s.id", ("ord",))]
w = [x for x in json.load(open(sys.argv[2]))["workloads"] if x["workload"] == "math"][0]
risk = {x["prompt_id"]: x["risk"] for x in w["risk_by_prompt"]}
seq = [risk[p] for p in got]
assert len(got) == 40 and all(a >= b for a, b in zip(seq, seq[1:])), seq
EOF' "run --order risk: prompts asked in descending risk"

for l in rnd1 rnd2; do
  $D --quiet run --db "$DB" --label $l --target "embedded:$M?profile=cpu-f32&threads=1" --suite builtin:math --limit 40 \
    --max-tokens 4 --concurrency 1 --order random --order-seed 7
done
ord() { python3 -c "
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(' '.join(r[0] for r in db.execute(\"select p.prompt_id from responses s join prompts p on p.rowid = s.prompt_rowid join runs r on r.id = s.run_id where r.label = ? order by s.id\", (sys.argv[2],))))
" "$DB" "$1"; }
check '[ "$(ord rnd1)" = "$(ord rnd2)" ] && [ "$(ord rnd1)" != "$(ord int4)" ]' "run --order random: seeded, not the suite order"

"$D" run --db "$DB" --label x --target "embedded:$M?profile=cpu-f32" --suite builtin:math --limit 2 --order risk \
  --risk-from int4 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -q "run .int4. has no stored logprobs" "$T/e1"' "risk-from without logprobs: exit 2 ($rc): $(cat "$T/e1")"
check '[ -z "$(ord x)" ] && ! python3 -c "import sqlite3,sys; sys.exit(0 if sqlite3.connect(sys.argv[1]).execute(\"select 1 from runs where label=?\", (\"x\",)).fetchone() else 1)" "$DB"' \
  "risk-from without logprobs: no run 'x' created"
"$D" run --db "$DB" --label x2 --target "embedded:$M" --suite builtin:math --order sideways 2> "$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "sideways" "$T/e2"' "bad --order: exit 2 naming it"
"$D" run --db "$DB" --label x3 --target "embedded:$M" --suite builtin:math --risk-from ref 2> "$T/e3"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--risk-from goes with --order risk" "$T/e3"' "--risk-from alone: exit 2"
"$D" run --db "$DB" --label x4 --target "embedded:$M" --suite builtin:math --order risk --risk-from nope 2> "$T/e4"; rc=$?
check '[ $rc -eq 2 ] && grep -q "nope" "$T/e4"' "--risk-from unknown label: exit 2 naming it: $(cat "$T/e4")"
"$D" measure --db "$T/m.db" --baseline "embedded:$M" --target "embedded:$M" --suite builtin:math --order risk 2> "$T/e5"
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--logprobs" "$T/e5"' "measure --order risk without logprobs: exit 2"

finish
