#!/bin/sh
# stochastic_leg.sh - one run of the quick lab's stochastic leg, end to end,
# for farm-bench --vs: the first N math prompts x 5 replicates at temperature
# 0.7 (seed 42), 128 new tokens, 1 engine thread, batch 32 as the lab's, at
# the baseline (w16a16, vllm, avx2) or another precision. Prints the md5 of
# the stored texts (the same seeds must give the same texts).
#   bench/stochastic_leg.sh BINARY [N] [PRECISION] [MODEL]
# e.g. farm-bench -n 5 --vs 'bench/stochastic_leg.sh old/driftbench 20' -- bench/stochastic_leg.sh build/driftbench 20
set -e
bin=$1 n=${2:-20} prec=${3:-w16a16} model=${4:-models/llama-fragile-7m.gguf}
db=$(mktemp /tmp/stoch.XXXXXX)
rm -f "$db"
"$bin" -q run --db "$db" --label s --concurrency 32 --max-tokens 128 --limit "$n" --replicates 5 \
    --temperature 0.7 --seed 42 \
    --target "embedded:$model?precision=$prec&framework=vllm&hardware=avx2&threads=1" \
    --suite "builtin:math" >/dev/null
sqlite3 "$db" 'select prompt_rowid, replicate, text from responses order by prompt_rowid, replicate' | md5sum
rm -f "$db" "$db-wal" "$db-shm"
