#!/usr/bin/env bash
# compare_kl.sh - token KL where users look: `compare --kl` and
# `report --kl N` on tiny runs of the shipped qwen2-7m (2 math + 2 chat
# prompts, 24 tokens). The same profile twice is exactly 0 KL with every
# top-1 token the same, in text, json and markdown; int4 weights are not
# 0; --kl-limit samples per workload; the HTML report has a KL section with
# one dot per configuration only with --kl; an HTTP run (the fake server,
# which returns no prompt logprobs) is one line in compare and a "not
# drawn" note in the report, never an error; bad flags are exit 2.
. "$(dirname "$0")/lib.sh"
M=$S/models/qwen2-7m.gguf

DB=$T/s.db
R=(--db "$DB" --suite builtin:math --suite builtin:chat --limit 2 --max-tokens 24)
$D --quiet run "${R[@]}" --label ref --target "embedded:$M?profile=ref" || bad "run ref"
$D --quiet run "${R[@]}" --label ref2 --target "embedded:$M?profile=ref" || bad "run ref2"
$D --quiet run "${R[@]}" --label int4 --target "embedded:$M?profile=cpu-int4" || bad "run int4"
$D --quiet score --db "$DB" 2> /dev/null || bad "score"

# ---- compare --kl ----
# Math and chat out of the gate (NG): the runs are scored without an embedder,
# so chat has no counted pair (an error, exit 2), and 2 math pairs are
# INCONCLUSIVE (exit 3); this test is about KL, not the gate.
NG=(--budget math=none,chat=none)
"$D" compare --db "$DB" --baseline ref --target ref2 "${NG[@]}" --kl --format json > "$T/same.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
k=json.load(open(sys.argv[1]))[\"token_kl\"]
o=k[\"overall\"]
assert k[\"limit\"]==0 and o[\"prompts\"]==4 and o[\"positions\"]>0, k
assert o[\"kl_mean\"]==0 and o[\"kl_max\"]==0 and o[\"same_top\"]==1 and o[\"prompts_top1_parted\"]==0, o
assert o[\"first_diff_min\"] is None
assert set(k[\"workloads\"])=={\"math\",\"chat\"}
assert sum(w[\"positions\"] for w in k[\"workloads\"].values())==o[\"positions\"]
" "$T/same.json"' "same stack: KL exactly 0, same top-1 everywhere (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target int4 "${NG[@]}" --kl --format json > "$T/int4.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
k=json.load(open(sys.argv[1]))[\"token_kl\"]
o=k[\"overall\"]
assert o[\"kl_mean\"]>0 and o[\"kl_se\"]>0 and 0<=o[\"same_top\"]<=1, o
for w in k[\"workloads\"].values():
    assert (w[\"first_diff_min\"] is None)==(w[\"prompts_top1_parted\"]==0), w
" "$T/int4.json"' "int4 weights: KL > 0 (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target int4 "${NG[@]}" --kl --kl-limit 1 --format json > "$T/lim.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
k=json.load(open(sys.argv[1]))[\"token_kl\"]
assert k[\"limit\"]==1 and k[\"overall\"][\"prompts\"]==2 and all(w[\"prompts\"]==1 for w in k[\"workloads\"].values()), k
" "$T/lim.json"' "--kl-limit 1: one prompt per workload (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target ref2 "${NG[@]}" --kl > "$T/same.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^token KL(baseline||target), teacher-forced" "$T/same.txt" &&
  grep -Eq "^  all +4 +[0-9]+  0\.000000 .* 100\.00%  0 of 4" "$T/same.txt"' "text: the KL table, 0 and 100% (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target int4 "${NG[@]}" --kl --format markdown > "$T/int4.md"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^\*\*Token KL\*\*" "$T/int4.md" && grep -q "^| \*\*all\*\* | 4 |" "$T/int4.md"' \
  "markdown: the KL table (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target int4 --format json > "$T/nokl.json"
check 'python3 -c "import json,sys; assert \"token_kl\" not in json.load(open(sys.argv[1]))" "$T/nokl.json"' \
  "without --kl: no token_kl key"
"$D" compare --db "$DB" --baseline ref --target int4 --kl-limit 3 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--kl-limit and --models go with --kl" "$T/e1"' "--kl-limit alone: exit 2 (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target int4 --kl --kl-limit 0 2> "$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--kl-limit" "$T/e2"' "--kl-limit 0: exit 2 (rc $rc)"

"$D" compare --db "$DB" --baseline ref --target int4 --kl --format junit 2> "$T/e5"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--kl shows in text, json and markdown" "$T/e5"' "--kl with junit: exit 2 (rc $rc)"
"$D" compare --db "$DB" --baseline ref --target int4 --kl --sequential 2> "$T/e6"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--kl shows in text, json and markdown" "$T/e6"' "--kl with --sequential: exit 2 (rc $rc)"

# ---- report --kl ----
"$D" --quiet report --db "$DB" --baseline ref --html "$T/r.html"; rc=$?
check '[ $rc -eq 0 ] && ! grep -q "id=\"kl\"" "$T/r.html"' "report without --kl: no KL section (rc $rc)"
"$D" --quiet report --db "$DB" --baseline ref --html "$T/rk.html" --kl 2; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import re,sys
s=open(sys.argv[1]).read()
i=s.index(\"id=\\\"kl\\\"\"); sec=s[i:s.index(\"</div>\",i)]
dots=re.findall(r\"<circle [^>]*><title>([^:<]+): KL ([^,]+), flip rate\", sec)
assert sorted(d[0] for d in dots)==[\"int4\",\"ref2\"], dots
kl=dict(dots); assert float(kl[\"ref2\"])==0 and float(kl[\"int4\"])>0, kl
assert \"Spearman\" in sec and \"2 sampled prompts per workload (seed 1\" in sec
" "$T/rk.html"' "report --kl 2: a dot per configuration, ref2 at KL 0 (rc $rc)"
"$D" report --db "$DB" --baseline ref --html "$T/x.html" --kl-seed 3 2> "$T/e3"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--kl-seed and --models go with --kl" "$T/e3"' "--kl-seed alone: exit 2 (rc $rc)"
"$D" report --db "$DB" --baseline ref --html "$T/x.html" --kl x 2> "$T/e4"; rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--kl" "$T/e4"' "--kl x: exit 2 (rc $rc)"

# ---- an HTTP run: one line, not an error ----
FAKEOK=0
if [ -x "$FAKE" ]; then
  out=$T/srv
  "$FAKE" --script "$FIX/math5_baseline.txt" --lifetime 300 --quiet > "$out" 2>/dev/null &
  PIDS+=($!)
  for _ in $(seq 100); do PORT=$(awk '/^PORT/{print $2}' "$out" 2>/dev/null); [ -n "$PORT" ] && break; sleep 0.05; done
  if [ -n "${PORT:-}" ]; then
    H=$T/h.db
    $D --quiet run --db "$H" --label baseline --target "http://127.0.0.1:$PORT/v1?model=m" --suite "$FIX/math5.jsonl" --max-tokens 16 &&
      $D --quiet run --db "$H" --label emb --target "embedded:$M?profile=ref" --suite "$FIX/math5.jsonl" --max-tokens 16 &&
      $D --quiet score --db "$H" 2> /dev/null && FAKEOK=1
  fi
fi
check '[ $FAKEOK -eq 1 ]' "an HTTP run through the fake server and an embedded one on the same suite"
"$D" compare --db "$H" --baseline baseline --target emb --budget math=none --kl > "$T/h.txt" 2> "$T/h.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^token KL: not computed: the server does not return prompt logprobs" "$T/h.txt"' \
  "compare --kl with an HTTP run: one line, not an error (rc $rc: $(cat "$T/h.err"))"
"$D" compare --db "$H" --baseline baseline --target emb --budget math=none --kl --format json > "$T/h.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys; k=json.load(open(sys.argv[1]))[\"token_kl\"]; assert \"prompt logprobs\" in k[\"unavailable\"], k" "$T/h.json"' \
  "json: token_kl.unavailable says why (rc $rc)"
"$D" --quiet report --db "$H" --html "$T/h.html" --kl 2; rc=$?
check '[ $rc -eq 0 ] && grep -q "id=\"kl\"" "$T/h.html" && grep -q "Not drawn (teacher forcing needs[^<]*: emb ([^<]*does not return prompt logprobs[^<]*)\." "$T/h.html"' \
  "report --kl on an HTTP baseline without prompt logprobs: the section says it cannot, and why (rc $rc): $(grep -o "Not drawn[^<]*" "$T/h.html")"

finish
