#!/usr/bin/env bash
# tables.sh - the real-stack study's tables from a scored store (issue 24):
# the flip table against each model's ref baseline, ANOVA, PRI held-out
# evaluation, the paired comparisons the study's questions need, and the
# findings' summary (tools/study/summarize.py). run.sh calls it after the
# matrix; call it yourself on a store that was run elsewhere and scored here
# (`driftbench score --db OUTDIR/study.db`).
#
#   tools/study/tables.sh OUTDIR          (OUTDIR/study.db, scored)
#
# Environment: DRIFTBENCH [build/driftbench]. Writes OUTDIR/flip_rates.csv,
# anova.txt, pri_eval.txt, pairs.txt, pairs.csv and summary.md.
set -euo pipefail
[ $# -eq 1 ] || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
OUTDIR=$(cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=${DRIFTBENCH:-$ROOT/build/driftbench}
DB=$OUTDIR/study.db
[ -s "$DB" ] || { echo "tables.sh: $DB: no store" >&2; exit 2; }
"$D" table --db "$DB" --baseline 'ref@{model}' -o "$OUTDIR/flip_rates.csv"
"$D" anova --table "$OUTDIR/flip_rates.csv" --strata workload >"$OUTDIR/anova.txt" || true
"$D" pri eval --table "$OUTDIR/flip_rates.csv" >"$OUTDIR/pri_eval.txt" || true

# the study's paired questions: framework drift at the same weights and
# precision, batching in PyTorch, the hardware at the same stack. The labels
# are the store's (the table's experiment ids plus the baselines).
labels=$( (cut -d, -f1 "$OUTDIR/flip_rates.csv" | tail -n +2; cut -d, -f2 "$OUTDIR/flip_rates.csv" | tail -n +2 | sed 's/^/ref@/') | sort -u)
: >"$OUTDIR/pairs.txt"
echo "baseline,target,workload,n,flips,flip_rate,ci_low,ci_high,correct_to_incorrect,incorrect_to_correct" >"$OUTDIR/pairs.csv"
pair() { # pair BASELINE TARGET: both labels must be in the store
  grep -qx "$1" <<<"$labels" && grep -qx "$2" <<<"$labels" || return 0
  { echo "== $1 -> $2"; "$D" compare --db "$DB" --baseline "$1" --target "$2" || true; echo; } >>"$OUTDIR/pairs.txt"
  "$D" compare --db "$DB" --baseline "$1" --target "$2" --format json 2>/dev/null |
    python3 "$ROOT/tools/study/summarize.py" --pair-csv "$1" "$2" >>"$OUTDIR/pairs.csv" || true
}
for s in $(cut -d, -f2 "$OUTDIR/flip_rates.csv" | tail -n +2 | sort -u); do
  for hw in cpu h200; do
    pair "engine-$hw-q4_k_m@$s" "llamacpp-$hw-q4_k_m@$s"
    pair "engine-$hw-q4_0@$s" "llamacpp-$hw-q4_0@$s"
    pair "engine-$hw-q8_0@$s" "llamacpp-$hw-q8_0@$s"
    pair "engine-$hw-f32@$s" "pytorch-$hw-f32@$s"
    pair "engine-$hw-bf16@$s" "pytorch-$hw-bf16@$s"
    pair "pytorch-$hw-f32@$s" "pytorch-b16-$hw-f32@$s"
    pair "pytorch-$hw-bf16@$s" "pytorch-b16-$hw-bf16@$s"
    pair "pytorch-$hw-bf16@$s" "pytorch-sdpa-$hw-bf16@$s"
  done
  pair "engine-cpu-f32@$s" "engine-h200-f32@$s"
  pair "engine-cpu-q4_k_m@$s" "engine-h200-q4_k_m@$s"
  pair "llamacpp-cpu-f16@$s" "llamacpp-h200-f16@$s"
  pair "llamacpp-cpu-q4_k_m@$s" "llamacpp-h200-q4_k_m@$s"
  pair "pytorch-cpu-f32@$s" "pytorch-h200-f32@$s"
done
python3 "$ROOT/tools/study/summarize.py" --table "$OUTDIR/flip_rates.csv" --pairs "$OUTDIR/pairs.csv" --db "$DB" >"$OUTDIR/summary.md"
echo "tables.sh: $OUTDIR/flip_rates.csv, anova.txt, pri_eval.txt, pairs.txt, pairs.csv, summary.md"
