#!/usr/bin/env bash
# measure_stage.sh - the measure stage (src/pipeline/measure.c) keeps its
# resources open and touches only its two labels:
# 1. a run of a third label in the same store, stored and not scored, stays
#    unscored after measure (measure scores its two labels only; before the
#    stage, measure scored every run of the store);
# 2. a sequential measure with --baseline-start / --target-start
#    (tests/server/fakeserver.c as the serving stack) over several chunks
#    starts each server once (each start command appends a line to a
#    file), leaves none running, and gives the same report as compare
#    --sequential on its store.
. "$(dirname "$0")/lib.sh"
M=$S/models/llama-fragile-7m.gguf
export TMPDIR=$T
scored() { # DB LABEL: scores stored for the label's responses
  sql "$1" "select count(*) from scores s join responses r on r.id = s.response_id join runs u on u.id = r.run_id where u.label = '$2'"
}

# 1. a third run stays unscored
REF="embedded:$M?profile=cpu-f32&threads=1"
DB=$T/third.db
"$D" --quiet run --db "$DB" --label other --target "$REF" --suite builtin:math --limit 3 --max-tokens 16; rc=$?
check '[ $rc -eq 0 ] && [ "$(scored "$DB" other)" = 0 ]' "the third run is stored unscored (rc $rc)"
"$D" --quiet measure --db "$DB" --baseline "$REF" --target "$REF" --suite builtin:math --limit 3 --max-tokens 16 \
  > "$T/m1.out" 2> "$T/m1.err"; rc=$?
check '[ $rc -ne 2 ]' "measure on the shared store runs (rc $rc: $(tail -3 "$T/m1.err"))"
check '[ "$(scored "$DB" baseline)" = 3 ] && [ "$(scored "$DB" target)" = 3 ]' \
  "measure scored its two labels ($(scored "$DB" baseline), $(scored "$DB" target))"
check '[ "$(scored "$DB" other)" = 0 ]' "measure left the third run unscored (got $(scored "$DB" other) scores)"

# 2. a sequential measure starts each server once
start_cmd() { server_start_cmd "$1" m; } # NAME (lib.sh)
target='http://127.0.0.1:{port}/v1?model=m&api=completions'
DB=$T/seq.db
"$D" measure --db "$DB" --suite builtin:math --limit 120 --max-tokens 16 --sequential --budget math=10 \
  --format json --baseline "$target" --baseline-start "$(start_cmd b)" \
  --target "$target" --target-start "$(start_cmd t)" --start-timeout 20 > "$T/seq.json" 2> "$T/seq.err"; rc=$?
chunks=$(grep -c "^measure: chunk " "$T/seq.err")
check '[ $rc -ne 2 ] && [ "$chunks" -ge 2 ]' "sequential measure over $chunks chunks (rc $rc: $(tail -3 "$T/seq.err"))"
check '[ "$(wc -l < "$T/starts.b")" = 1 ] && [ "$(wc -l < "$T/starts.t")" = 1 ]' \
  "each server started once for $chunks chunks (baseline $(wc -l < "$T/starts.b"), target $(wc -l < "$T/starts.t"))"
check '[ "$(grep -c "server ready on port" "$T/seq.err")" = 2 ]' "two 'ready' lines"
check 'all_gone' "measure left no server running"
"$D" compare --db "$DB" --baseline baseline --target target --sequential --budget math=10 --format json > "$T/seqc.json"
check 'python3 - "$T/seq.json" "$T/seqc.json" <<PY
import json, sys
m, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
wm = [w for w in m["workloads"] if w["workload"] == "math"][0]
wc = [w for w in c["workloads"] if w["workload"] == "math"][0]
for k in ("asked", "flips", "verdict", "early", "interval", "n"):
    assert wm[k] == wc[k], (k, wm, wc)
PY' "the same report as compare --sequential on the store"

finish
