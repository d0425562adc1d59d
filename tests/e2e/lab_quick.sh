#!/usr/bin/env bash
# lab_quick.sh - `driftbench lab --quick` end to end at a reduced size
# (--limit 3 prompts per suite, 12 new tokens): exit 0, every output file,
# the summary first, the flip table's paper columns, the stochastic leg with
# its null, the cut answers per workload, the size and time estimate printed
# first, configurations side by side, the long-context subset (whose prompts
# do not fit the fixtures' context: said, not fatal), the closing "report:"
# line; then a second run resumes without generating anything; then
# `--full --dry-run` says how big the full matrix is (with a WARNING on
# fewer than 8 cores) and runs nothing.
. "$(dirname "$0")/lib.sh"
work=$T
cd "$work" || fail "cd $work"   # no models/ here: the lab must fall back to the fixtures
out="$work/lab"
start=$(date +%s)
"$D" lab --quick --out "$out" --limit 3 --max-tokens 12 >"$work/stdout" 2>"$work/stderr" || {
    echo "FAIL: lab exited $?"; cat "$work/stdout" "$work/stderr"; exit 1; }
echo "lab --quick --limit 3 took $(( $(date +%s) - start )) s"
for f in lab.db matrix.json matrix_long.json flip_rates.csv anova.txt pri.txt report.html cuts.txt summary.txt stochastic.txt; do
    [ -s "$out/$f" ] || { echo "FAIL: $out/$f missing or empty"; ls -la "$out"; exit 1; }
done
head -1 "$out/flip_rates.csv" | grep -q '^experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,num_comparisons,ci_low,ci_high' \
    || { echo "FAIL: flip_rates.csv header"; head -2 "$out/flip_rates.csv"; exit 1; }
rows=$(( $(wc -l <"$out/flip_rates.csv") - 1 ))
[ "$rows" -ge 20 ] || { echo "FAIL: only $rows table rows"; exit 1; }
grep -q "using the test fixtures, whose answers are noise" "$work/stdout" || { echo "FAIL: no fixture notice"; cat "$work/stdout"; exit 1; }
grep -q "^report: $out/report.html\$" "$work/stdout" || { echo "FAIL: no report line"; tail -5 "$work/stdout"; exit 1; }
grep -q "tokens/s" "$work/stdout" || { echo "FAIL: no tokens/s"; exit 1; }
# the size and the time estimate come before anything runs
grep -Eq '^size: [0-9]+ configurations x 12 prompts \(math 3, code 3, ' "$work/stdout" || { echo "FAIL: no size line"; head -8 "$work/stdout"; exit 1; }
grep -Eq '^estimate: [0-9]+ configurations to run: about [0-9.]+ (s|min) of generation' "$work/stdout" || { echo "FAIL: no estimate"; head -8 "$work/stdout"; exit 1; }
grep -q '^quick: long_context (3 prompts, each a prefill of ~[0-9]* tokens) runs on 5 configurations only' "$work/stdout" || { echo "FAIL: no word on long_context"; exit 1; }
grep -q '^long_context: every request failed on 5 of 5 configurations' "$work/stdout" || { echo "FAIL: the fixtures' long_context failures not said"; grep long_context "$work/stdout"; exit 1; }
# the design before the run: its levels, crossings, controls and what each workload's pairs resolve
grep -q '^design: baseline base@MODEL = precision w16a16, framework vllm, hardware avx2, its answers with top-5 logprobs; levels: model 2, hardware 3, precision 3, framework 3 (baseline.s included); 24 level configurations + 2 baselines; controls apart from the axes: 2 A/A' "$work/stdout" \
    || { echo "FAIL: no design line"; grep '^design' "$work/stdout"; exit 1; }
grep -Eq '^resolution .*math 3 prompts x 24 = 72 pairs: 5\.07% / 56\.15%' "$work/stdout" || { echo "FAIL: no resolution line"; grep '^resolution' "$work/stdout"; exit 1; }
# the A/A control: zero flips, said; the ref oracle apart from the axes
grep -q '^A/A check: passed: 2 A/A run(s), 0 flips' "$work/stdout" || { echo "FAIL: no A/A check"; tail -5 "$work/stdout"; exit 1; }
! grep -Eq '^(aa|ref)@' "$out/flip_rates.csv" || { echo "FAIL: a control is a row of the axes' table"; exit 1; }
grep -q 'How far is the baseline from exact' "$out/summary.txt" || { echo "FAIL: no ref oracle in the summary"; cat "$out/summary.txt"; exit 1; }
# the paper's questions, each answered or "cannot say"
for q in 'Does the workload ordering hold?' 'Are hardware and precision systematic' 'Does net accuracy hide safety flips?' 'Flip risk' 'Logistic model'; do
    grep -q "$q" "$out/summary.txt" || { echo "FAIL: summary lacks '$q'"; cat "$out/summary.txt"; exit 1; }
done
! grep -q 'No axis is predictable' "$out/summary.txt" || { echo "FAIL: the dropped overreach is back"; exit 1; }
# the baselines' answer shape: 2 models x 3 math prompts, every one cut at 12 tokens (cuts.txt below says so)
tr '\n' ' ' <"$out/summary.txt" | grep -q 'Answer shape at the baseline (its 2 run(s) pooled, one per model; .* math 6 answers, median 12 tokens (p10 12, p90 12, max 12; 100.0% cut at 12 tokens), smallest gap < 0.1 in [0-9.]*% of answers' \
    || { echo "FAIL: no answer shape in the summary"; cat "$out/summary.txt"; exit 1; }
grep -q 'Answer shape at the baseline' "$out/report.html" || { echo "FAIL: no answer shape in report.html"; exit 1; }
# the baseline's answers carry logprobs, the others do not
lp=$(sqlite3 "$out/lab.db" "select count(*) from responses r join runs u on u.id = r.run_id where u.label like 'base@%' and r.logprobs is not null") || fail "sqlite3 cannot count logprobs"
[ "$lp" -gt 0 ] || { echo "FAIL: the baseline has no logprobs"; exit 1; }
lq=$(sqlite3 "$out/lab.db" "select count(*) from responses r join runs u on u.id = r.run_id where u.label not like 'base@%' and r.logprobs is not null") || fail "sqlite3 cannot count logprobs"
[ "$lq" = 0 ] || { echo "FAIL: $lq answers of other runs carry logprobs"; exit 1; }
grep -Eq '^lab: [0-9]+ configurations, 2 side by side' "$work/stdout" || [ "$(nproc)" -lt 2 ] || { echo "FAIL: not side by side"; tail -3 "$work/stdout"; exit 1; }
# the summary comes before the flip table; the cut answers are counted per workload
s=$(grep -n '== summary: what this lab found ==' "$work/stdout" | cut -d: -f1)
f=$(grep -n '== flip rate by workload' "$work/stdout" | cut -d: -f1)
[ -n "$s" ] && [ -n "$f" ] && [ "$s" -lt "$f" ] || { echo "FAIL: the summary is not first ($s, $f)"; exit 1; }
n_cfg=$(grep -c '"label"' "$out/matrix.json") || fail "no configuration in matrix.json"
n_ans=$((n_cfg * 3))
grep -q "^math: $n_ans of $n_ans answers cut at 12 new tokens (100.00%)" "$out/cuts.txt" || { echo "FAIL: cuts.txt"; cat "$out/cuts.txt"; exit 1; }
cut_db=$(sqlite3 "$out/lab.db" "select count(*) from responses r join runs u on u.id = r.run_id join prompts p on p.id = r.prompt_rowid where u.label not like 'stochastic/%' and p.workload = 'code' and r.failed = 0 and r.finish_reason = 'length'") ||
    fail "sqlite3 cannot count the cut code answers"
grep -q "^code: $cut_db of $n_ans answers cut" "$out/cuts.txt" || { echo "FAIL: code cuts != $cut_db in the store"; cat "$out/cuts.txt"; exit 1; }
grep -Eq '^scoring: [0-9]+ distinct verdicts kept, [1-9][0-9]* reused' "$work/stdout" || { echo "FAIL: no verdict reused"; grep '^scoring' "$work/stdout"; exit 1; }
grep -Eq 'generation [0-9.]+ s, estimated [0-9]+ s' "$work/stdout" || { echo "FAIL: estimate not beside the measured time"; tail -3 "$work/stdout"; exit 1; }
grep -q "ANOVA type 2" "$out/anova.txt" || { echo "FAIL: anova.txt"; cat "$out/anova.txt"; exit 1; }
grep -q "held-out level" "$out/pri.txt" || { echo "FAIL: pri.txt"; cat "$out/pri.txt"; exit 1; }
grep -q 'id="heatmap"' "$out/report.html" || { echo "FAIL: report has no heatmap"; exit 1; }
# every configuration is a run, plus one ref per model
configs=$(grep -c '"label"' "$out/matrix.json") || fail "no configuration in matrix.json"
runs=$(sqlite3 "$out/lab.db" "select count(*) from runs where finished_at is not null and label not like 'stochastic/%'") ||
    fail "sqlite3 cannot count the runs"
[ "$runs" = "$configs" ] || { echo "FAIL: $runs finished runs for $configs configurations"; exit 1; }
# the stochastic leg: two sampled runs (5 replicates) and its summary
stoch=$(sqlite3 "$out/lab.db" "select count(*) from responses r join runs u on u.id = r.run_id where u.label like 'stochastic/%'") ||
    fail "sqlite3 cannot count the stochastic answers"
[ "$stoch" = 60 ] || { echo "FAIL: stochastic leg stored $stoch responses (want 4 runs x 3 prompts x 5 replicates)"; exit 1; }
grep -q "expected flip rate over replicate pairs" "$out/stochastic.txt" || { echo "FAIL: stochastic.txt"; exit 1; }
grep -Eq "^(null: each stack against itself with seeds 1042\+r|against the null)" "$out/stochastic.txt" || { echo "FAIL: no null in stochastic.txt"; cat "$out/stochastic.txt"; exit 1; }
cp "$out/flip_rates.csv" "$work/flip_rates.first" || fail "cp flip_rates.csv"
# resume: nothing left to generate
"$D" lab --quick --out "$out" --limit 3 --max-tokens 12 >"$work/stdout2" 2>"$work/stderr2" || {
    echo "FAIL: second lab run exited $?"; cat "$work/stderr2"; exit 1; }
grep -q " 0 tokens generated now" "$work/stdout2" || { echo "FAIL: the second run generated again"; tail -3 "$work/stdout2"; exit 1; }
grep -q '^estimate: every configuration is stored already' "$work/stdout2" || { echo "FAIL: resumed estimate"; head -8 "$work/stdout2"; exit 1; }
cmp -s "$work/flip_rates.first" "$out/flip_rates.csv" || { echo "FAIL: the resumed lab wrote another flip table"; exit 1; }
# --full --dry-run: the size, the estimate, a WARNING on few cores; nothing run
"$D" lab --full --dry-run --limit 2 --out "$work/full" >"$work/stdout3" 2>"$work/stderr3" || {
    echo "FAIL: lab --full --dry-run exited $?"; cat "$work/stdout3" "$work/stderr3"; exit 1; }
[ -s "$work/full/matrix.json" ] && [ ! -e "$work/full/lab.db" ] || { echo "FAIL: dry run wrote a store or no matrix"; ls -la "$work/full"; exit 1; }
grep -q '^dry run: nothing generated' "$work/stdout3" || { echo "FAIL: dry run line"; cat "$work/stdout3"; exit 1; }
grep -Eq '^estimate: [0-9]+ configurations to run: about' "$work/stdout3" || { echo "FAIL: full estimate"; cat "$work/stdout3"; exit 1; }
if [ "$(nproc)" -lt 8 ]; then
    grep -q "^WARNING: --full is large for a $(nproc)-core machine" "$work/stderr3" || { echo "FAIL: no WARNING on $(nproc) cores"; cat "$work/stderr3"; exit 1; }
else
    ! grep -q "WARNING: --full" "$work/stderr3" || { echo "FAIL: WARNING on $(nproc) cores"; exit 1; }
fi
# `table` on the lab's store: its baselines are per model; a bare "ref" is exit 2
# naming the form meant and the store's labels, the forms work
"$D" table --db "$out/lab.db" --baseline ref >"$work/table.out" 2>"$work/table.err"; rc=$?
[ "$rc" = 2 ] && grep -q "no run is labelled 'ref'; did you mean 'ref@{model}'" "$work/table.err" &&
    grep -q "'base@{model}' (2 models)" "$work/table.err" || { echo "FAIL: table --baseline ref gave $rc"; cat "$work/table.err"; exit 1; }
"$D" table --db "$out/lab.db" --baseline 'base@{model}' -o "$work/base.csv" 2>/dev/null &&
    [ "$(wc -l <"$work/base.csv")" -ge "$(wc -l <"$out/flip_rates.csv")" ] || { echo "FAIL: table --baseline 'base@{model}'"; exit 1; }
"$D" table --db "$out/lab.db" --baseline 'ref@{model}' >/dev/null 2>&1 || { echo "FAIL: table --baseline 'ref@{model}'"; exit 1; }
# model paths under the working directory are recorded relative to it
(cd "$S" && "$D" lab --quick --dry-run --limit 1 --models tests/data/models --out "$work/rel" >"$work/stdout4" 2>&1) || {
    echo "FAIL: dry run from the source tree"; cat "$work/stdout4"; exit 1; }
grep -q '"target": "embedded:tests/data/models/tiny-' "$work/rel/matrix.json" || { echo "FAIL: model paths not relative"; grep -m2 target "$work/rel/matrix.json"; exit 1; }
! grep -q '"target": "embedded:/' "$work/rel/matrix.json" || { echo "FAIL: an absolute model path"; exit 1; }
# --long sizes the long-context leg alone (the other suites keep --limit's size)
"$D" lab --quick --dry-run --limit 1 --long 7 --out "$work/long7" >"$work/stdout5" 2>&1 || {
    echo "FAIL: dry run with --long"; cat "$work/stdout5"; exit 1; }
grep -q '^quick: long_context (7 prompts,' "$work/stdout5" || { echo "FAIL: --long 7 not the leg's size"; grep long_context "$work/stdout5"; exit 1; }
grep -q '"builtin:long?n=7"' "$work/long7/matrix_long.json" || { echo "FAIL: matrix_long.json without n=7"; exit 1; }
grep -q '"builtin:math?n=1"' "$work/long7/matrix.json" || { echo "FAIL: --long changed the other suites"; exit 1; }
echo "PASS: lab --quick ($rows table rows, $runs runs)"
