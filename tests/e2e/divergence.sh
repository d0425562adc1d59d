#!/usr/bin/env bash
# divergence.sh - `driftbench divergence` end to end on tiny runs of the
# shipped qwen2-7m (4 math + 2 chat prompts, 24 tokens): the same profile
# twice is exactly 0 KL and 100% same top-1; int4 weights against ref are
# not; text, json and markdown; the raw-text form over README.md; a run
# whose model file moved is found with --models; bad input is exit 2 with
# a message naming the problem (unknown label, an HTTP run whose server
# returns no prompt logprobs: tests/e2e/divergence_http.sh has servers that
# do; a missing store, model or text file, bad flags).
. "$(dirname "$0")/lib.sh"

cp "$S/models/qwen2-7m.gguf" "$T/moved.gguf"
M=$S/models/qwen2-7m.gguf
DB=$T/s.db
R=(--db "$DB" --suite builtin:math --suite builtin:chat --limit 2 --max-tokens 24)
$D --quiet run "${R[@]}" --label ref --target "embedded:$M?profile=ref" || bad "run ref"
$D --quiet run "${R[@]}" --label ref2 --target "embedded:$M?profile=ref" || bad "run ref2"
$D --quiet run "${R[@]}" --label int4 --target "embedded:$M?profile=cpu-int4" || bad "run int4"
$D --quiet run "${R[@]}" --label moved --target "embedded:$T/moved.gguf?profile=cpu-f32" || bad "run moved"

"$D" --quiet divergence --db "$DB" --baseline ref --target ref2 --format json > "$T/same.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
o=d[\"overall\"]
assert d[\"prompts_total\"]==4 and d[\"skipped\"]==0, d[\"prompts_total\"]
assert o[\"positions\"]>0 and o[\"kl_mean\"]==0 and o[\"kl_max\"]==0 and o[\"same_top\"]==1, o
assert set(d[\"workloads\"])=={\"math\",\"chat\"}
assert sum(p[\"answer_tokens\"] for p in d[\"prompts\"])==o[\"positions\"]
assert all(p[\"first_diff\"] is None for p in d[\"prompts\"])
" "$T/same.json"' "same profile twice: exactly 0 KL, 100% same top-1 (rc $rc): $(head -c 600 "$T/same.json")"

"$D" --quiet divergence --db "$DB" --baseline ref --target int4 --format json > "$T/int4.json"; rc=$?
check '[ $rc -eq 0 ] && python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
o=d[\"overall\"]
assert o[\"kl_mean\"]>1e-4 and o[\"kl_p50\"]<=o[\"kl_p90\"]<=o[\"kl_p99\"]<=o[\"kl_max\"], o
assert o[\"dp_min\"]<=o[\"dp_p01\"]<=o[\"dp_p50\"]<=o[\"dp_p99\"]<=o[\"dp_max\"], o
fd=[p[\"first_diff\"] for p in d[\"prompts\"] if p[\"first_diff\"]]
assert bool(fd)==(o[\"same_top\"]<1), (fd, o[\"same_top\"])
assert all(0<=f[\"index\"]<24 and f[\"baseline_id\"]!=f[\"target_id\"] for f in fd), fd
" "$T/int4.json"' "ref vs int4: KL > 0, ordered percentiles, first disagreements iff same top < 1: $(head -c 600 "$T/int4.json")"

"$D" --quiet divergence --db "$DB" --baseline ref --target int4 > "$T/int4.txt"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^math " "$T/int4.txt" && grep -q "^chat " "$T/int4.txt" && grep -q "^overall " "$T/int4.txt" \
  && grep -q "highest mean KL" "$T/int4.txt"' "text: a row per workload and overall, the top prompts: $(cat "$T/int4.txt")"
"$D" --quiet divergence --db "$DB" --baseline ref --target int4 --format markdown --workload math > "$T/int4.md"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^| math |" "$T/int4.md" && ! grep -q "^| chat |" "$T/int4.md"' \
  "markdown, --workload math only: $(cat "$T/int4.md")"

# a model file that is gone: the error says so, --models finds it by name
mkdir "$T/elsewhere" && mv "$T/moved.gguf" "$T/elsewhere/"
"$D" --quiet divergence --db "$DB" --baseline ref --target moved > /dev/null 2> "$T/moved.err"; rc=$?
check '[ $rc -eq 2 ] && grep -q "moved.gguf" "$T/moved.err" && grep -q -- "--models" "$T/moved.err"' \
  "moved model: exit 2 naming the file and --models (rc $rc): $(cat "$T/moved.err")"
"$D" --quiet divergence --db "$DB" --baseline ref --target moved --models "$T/elsewhere" --format json > "$T/moved.json"; rc=$?
check '[ $rc -eq 0 ] && grep -q "elsewhere/moved.gguf" "$T/moved.json"' "--models DIR finds it (rc $rc)"

# raw text, llama-perplexity's chunks: 3 of 128 tokens from README's first 6 KB at least
head -c 6000 "$S/README.md" > "$T/text.txt"
"$D" --quiet divergence --text "$T/text.txt" --ctx 128 --baseline "embedded:$M?profile=cpu-f32" \
  --target "embedded:$M?profile=cpu-f32" > "$T/text.out"; rc=$?
check '[ $rc -eq 0 ] && grep -q "Mean    KLD:   0.000000" "$T/text.out" && grep -q "Same top p: 100.000" "$T/text.out" \
  && grep -q "(63 positions per chunk)" "$T/text.out"' "text mode, same stack: 0 KL (rc $rc): $(cat "$T/text.out")"

# bad input: exit 2 with a message naming the problem
"$D" --quiet divergence --db "$DB" --baseline ref --target nosuch > /dev/null 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -q "nosuch" "$T/e1"' "unknown label: exit 2 naming it (rc $rc): $(cat "$T/e1")"
FAKEOK=0
if [ -x "$FAKE" ]; then
  out=$T/srv
  "$FAKE" --script "$FIX/math5_baseline.txt" --lifetime 300 --quiet > "$out" 2>/dev/null &
  PIDS+=($!)
  for _ in $(seq 100); do PORT=$(awk '/^PORT/{print $2}' "$out" 2>/dev/null); [ -n "$PORT" ] && break; sleep 0.05; done
  if [ -n "${PORT:-}" ]; then
    $D --quiet run --db "$DB" --label http --target "http://127.0.0.1:$PORT/v1?model=m" --suite "$FIX/math5.jsonl" && FAKEOK=1
  fi
fi
check '[ $FAKEOK -eq 1 ]' "an HTTP run through the fake server"
"$D" --quiet divergence --db "$DB" --baseline http --target ref > /dev/null 2> "$T/e2"; rc=$?
check '[ $rc -eq 2 ] && grep -q "does not return prompt logprobs" "$T/e2" && grep -q "echo" "$T/e2"' \
  "HTTP run whose server has no prompt logprobs: exit 2, says so (rc $rc): $(cat "$T/e2")"
"$D" --quiet divergence --db "$T/none.db" --baseline ref --target ref2 > /dev/null 2> "$T/e3"; rc=$?
check '[ $rc -eq 2 ] && grep -q "none.db" "$T/e3" && [ ! -e "$T/none.db" ]' "missing store: exit 2, not created (rc $rc): $(cat "$T/e3")"
"$D" --quiet divergence --text "$T/nofile.txt" --ctx 64 --baseline "embedded:$M" --target "embedded:$M" > /dev/null 2> "$T/e4"; rc=$?
check '[ $rc -eq 2 ] && grep -q "nofile.txt" "$T/e4"' "missing text: exit 2 naming it (rc $rc): $(cat "$T/e4")"
"$D" --quiet divergence --text "$T/text.txt" --ctx 4096 --baseline "embedded:$M" --target "embedded:$M" > /dev/null 2> "$T/e5"; rc=$?
check '[ $rc -eq 2 ] && grep -q "needs at least 8192" "$T/e5"' "text too short: exit 2 (rc $rc): $(cat "$T/e5")"
"$D" --quiet divergence --db "$DB" --baseline ref --target ref2 --workload math,poetry > /dev/null 2> "$T/e6"; rc=$?
check '[ $rc -eq 2 ] && grep -q "poetry" "$T/e6"' "a bad workload in a list: exit 2 naming it (rc $rc): $(cat "$T/e6")"
"$D" --quiet divergence --db "$DB" --baseline ref --target int4 --workload math,chat --format json > "$T/both.json"; rc=$?
check '[ $rc -eq 0 ] && cmp -s <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"overall\"])" "$T/both.json") \
  <(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"overall\"])" "$T/int4.json")' \
  "--workload math,chat = all workloads of this store (rc $rc)"
for b in "--format junit" "--ctx 64" "--limit x" "--workload poetry" "--bogus 1"; do
  # shellcheck disable=SC2086
  "$D" --quiet divergence --db "$DB" --baseline ref --target ref2 $b > /dev/null 2> "$T/bad.err"; rc=$?
  check '[ $rc -eq 2 ] && [ -s "$T/bad.err" ]' "'$b': exit 2 with a message (rc $rc: $(cat "$T/bad.err"))"
done
"$D" divergence --help > "$T/help" 2>&1
check 'grep -q "forced through the server" "$T/help" && grep -q -- "--http-logprobs" "$T/help" && grep -q -- "--text FILE" "$T/help"' "--help says how HTTP runs are forced"

finish
