#!/bin/sh
# hw_levels_gen.sh - one hardware level's generation, end to end, for
# farm-bench --vs (issue 36's engine speed): N math + N code prompts of the
# quick lab's suites, 128 new tokens, 1 engine thread, top-5 logprobs, into
# a fresh store; prints the md5 of the stored texts and logprobs so that two
# builds' answers can be compared bit for bit.
# batch 32 as the lab runs its configurations (DRIFT_LAB_BATCH).
#   bench/hw_levels_gen.sh BINARY HARDWARE [N] [PRECISION] [MODEL]
# e.g. farm-bench -n 5 --vs 'bench/hw_levels_gen.sh old/driftbench sse2' -- bench/hw_levels_gen.sh build/driftbench sse2
set -e
bin=$1 hw=$2 n=${3:-20} prec=${4:-w16a16} model=${5:-models/llama-fragile-7m.gguf}
db=$(mktemp /tmp/hwgen.XXXXXX)
rm -f "$db"
"$bin" -q run --db "$db" --label a --concurrency 32 --max-tokens 128 --logprobs 5 --limit "$n" \
    --target "embedded:$model?precision=$prec&framework=vllm&hardware=$hw&threads=1" \
    --suite "builtin:math?n=60" --suite "builtin:code?n=40" >/dev/null
sqlite3 "$db" 'select prompt_rowid, text, hex(logprobs) from responses order by prompt_rowid' | md5sum
rm -f "$db" "$db-wal" "$db-shm"
