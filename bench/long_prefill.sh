#!/bin/sh
# long_prefill.sh - the quick lab's long-context prefill at one profile, end to
# end, for farm-bench --vs: the first N prompts of builtin:long (~2,000-token
# prefills), 128 new tokens, 1 engine thread, batch 32 as the lab's. Prints
# the md5 of the stored texts.
#   bench/long_prefill.sh BINARY [N] [EXTRA_SPEC_KEYS] [MODEL]
# e.g. farm-bench -n 5 --vs 'bench/long_prefill.sh old/driftbench 2' -- bench/long_prefill.sh build/driftbench 2
set -e
bin=$1 n=${2:-2} extra=${3:-} model=${4:-models/llama-fragile-7m.gguf}
db=$(mktemp /tmp/longpf.XXXXXX)
rm -f "$db"
"$bin" -q run --db "$db" --label a --concurrency 32 --max-tokens 128 --limit "$n" \
    --target "embedded:$model?precision=w16a16&framework=vllm&hardware=avx2&threads=1$extra" \
    --suite "builtin:long" >/dev/null
sqlite3 "$db" 'select prompt_rowid, text from responses order by prompt_rowid' | md5sum
rm -f "$db" "$db-wal" "$db-shm"
