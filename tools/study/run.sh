#!/usr/bin/env bash
# run.sh - the real-stack study (issue 24) in one command: quantize the shipped
# models with llama.cpp's llama-quantize, write the matrix spec
# (tools/study/real_stacks.py), run it (every server started and stopped by
# `driftbench matrix`), then the flip table, ANOVA, PRI held-out evaluation
# and the paired comparisons the study's questions need.
#
#   tools/study/run.sh OUTDIR [MODEL.gguf ...]
#
# Environment (defaults in brackets):
#   DRIFTBENCH [build/driftbench]   LLAMA_BIN [unset: no llama.cpp stacks]
#   PY [unset: no PyTorch stacks; a python3 that imports torch]
#   GPU [0; 1 adds the CUDA configurations]   JOBS [nproc/THREADS]   THREADS [2]
#   MATH CODE SAFETY CHAT LONG [200 164 100 100 30]   MAX_TOKENS [512]
#   MATRIX_TIMEOUT [none: seconds after which the matrix is stopped (SIGTERM:
#   what was answered is kept) and run.sh exits; run it again to resume]
#   API [completions]   SCORE [1; 0 stores the answers only: score them on
#   another machine with `driftbench score --db study.db`, e.g. where the GPU
#   machine lacks the code sandbox]   GUARD [driftbench's default guard]
#   EMBEDDER [the robust llama-gqa-7m on cpu-f32, as the lab's chat embedder]
# OUTDIR gets quant/ (the quantized files), matrix.json, study.db, run.log,
# and tools/study/tables.sh's flip_rates.csv, anova.txt, pri_eval.txt,
# pairs.txt, pairs.csv and summary.md. Running it
# again resumes: the matrix asks only what is missing.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
OUTDIR=$1; shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
D=${DRIFTBENCH:-$ROOT/build/driftbench}
THREADS=${THREADS:-2}
JOBS=${JOBS:-$(( $(nproc) / THREADS > 0 ? $(nproc) / THREADS : 1 ))}
[ -x "$D" ] || { echo "run.sh: $D: not built (make build, or DRIFTBENCH=path)" >&2; exit 2; }
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("$ROOT"/models/qwen2-7m.gguf "$ROOT"/models/llama-gqa-7m.gguf "$ROOT"/models/llama-moe-6m.gguf)
mkdir -p "$OUTDIR/quant"
OUTDIR=$(cd "$OUTDIR" && pwd)
exec > >(tee -a "$OUTDIR/run.log") 2>&1

args=(--quant "$OUTDIR/quant" --threads "$THREADS" --api "${API:-completions}"
      --math "${MATH:-200}" --code "${CODE:-164}" --safety "${SAFETY:-100}" --chat "${CHAT:-100}" --long "${LONG:-30}"
      --max-tokens "${MAX_TOKENS:-512}")
abs=()
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "run.sh: $m: no such file" >&2; exit 2; }
  abs+=("$(cd "$(dirname "$m")" && pwd)/$(basename "$m")")
done
if [ -n "${LLAMA_BIN:-}" ]; then
  [ -x "$LLAMA_BIN/llama-server" ] || { echo "run.sh: $LLAMA_BIN/llama-server: not found" >&2; exit 2; }
  args+=(--llama-bin "$LLAMA_BIN")
  for m in "${abs[@]}"; do
    for q in Q8_0 Q4_0 Q4_K_M; do
      f=$OUTDIR/quant/$(basename "$m" .gguf)-$q.gguf
      [ -s "$f" ] || "$LLAMA_BIN/llama-quantize" "$m" "$f" "$q" >"$OUTDIR/quant/quantize.log" 2>&1 ||
        { echo "run.sh: llama-quantize $m $q failed:"; tail -5 "$OUTDIR/quant/quantize.log"; exit 2; }
    done
  done
fi
if [ -n "${PY:-}" ]; then
  "$PY" -c 'import torch' || { echo "run.sh: $PY cannot import torch" >&2; exit 2; }
  args+=(--python "$PY")
fi
[ "${GPU:-0}" = 1 ] && args+=(--gpu)
python3 "$ROOT/tools/study/real_stacks.py" --models "${abs[@]}" "${args[@]}" >"$OUTDIR/matrix.json"
echo "run.sh: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["configs"]))' "$OUTDIR/matrix.json") configurations, $JOBS side by side, $(date -u +%FT%TZ)"

score=()
[ -n "${GUARD:-}" ] && score+=(--guard "$GUARD")
score+=(--embedder "${EMBEDDER:-embedded:$ROOT/models/llama-gqa-7m.gguf?profile=cpu-f32&threads=1}")
SECONDS=0
[ "${SCORE:-1}" = 0 ] && score+=(--no-score)
to=()
[ -n "${MATRIX_TIMEOUT:-}" ] && to=(timeout "$MATRIX_TIMEOUT")
"${to[@]}" "$D" matrix --spec "$OUTDIR/matrix.json" --db "$OUTDIR/study.db" --parallel "$JOBS" --concurrency 16 "${score[@]}" ||
  { rc=$?; echo "run.sh: the matrix stopped (exit $rc) after ${SECONDS}s; run again to resume"; exit "$rc"; }
echo "run.sh: matrix done in ${SECONDS}s"
if [ "${SCORE:-1}" = 0 ]; then
  echo "run.sh: answers stored, not scored; next: driftbench score --db $OUTDIR/study.db, then tools/study/tables.sh $OUTDIR"
  exit 0
fi
DRIFTBENCH="$D" bash "$ROOT/tools/study/tables.sh" "$OUTDIR"
