#!/bin/sh
# drift_eval.sh - one model's accuracy, margins and drift with the embedded engine: the test splits at
# profile ref (with --logprobs 2, for logprob_gaps.py), then at each other profile given, scored, and each
# compared with ref (flips per workload; chat SDR > 0.30 with the embedder below).
#
#   tools/train/drift_eval.sh DRIFTBENCH MODEL.gguf DB "math:150 code:164 safety:100 chat:100 long:20" "cpu-bf16 cpu-fp8" [EMBEDDER.gguf]
#
# Labels are NAME-PROFILE (NAME the file's base name). The embedder defaults to models/llama-gqa-7m.gguf
# at the lab's fixed embedder profile (cpu-f32, avx2, one thread), so that SDRs of all models are measured
# in one space. Resumable: `run` keeps stored answers.
set -eu
B=$1 M=$2 DB=$3 SUITES=$4 PROFILES=$5
EMB=${6:-models/llama-gqa-7m.gguf}
NAME=$(basename "$M" .gguf)
for s in $SUITES; do  # workload by workload, every profile: a run cut short still pairs up
  wl=${s%%:*} n=${s#*:}
  for prof in ref $PROFILES; do
    lp=""; [ "$prof" = ref ] && lp="--logprobs 2"
    # shellcheck disable=SC2086
    "$B" --quiet run --db "$DB" --label "$NAME-$prof" --target "embedded:$M?profile=$prof" --suite "builtin:$wl" \
      --limit "$n" --concurrency 4 --max-tokens 512 $lp --config "model=$NAME,precision=$prof"
  done
done
"$B" --quiet score --db "$DB" --embedder "embedded:$EMB?profile=cpu-f32&isa=avx2&threads=1" --jobs 2
for prof in $PROFILES; do
  "$B" compare --db "$DB" --baseline "$NAME-ref" --target "$NAME-$prof" --format json -o "$DB.$NAME-$prof.json" || true
  "$B" compare --db "$DB" --baseline "$NAME-ref" --target "$NAME-$prof" || true
done
