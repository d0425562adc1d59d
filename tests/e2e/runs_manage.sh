#!/usr/bin/env bash
# runs_manage.sh - runs are managed (cli/cmd_runs.c, src/store/store_manage.c):
# 1. two measures without labels in one directory (default store) against
#    the embedded engine: the second, with another decoding, takes
#    baseline-2 / target-2 instead of failing on a mismatch; re-running the
#    first resumes baseline / target (nothing asked again);
# 2. an old (schema v2) store: rename migrates it to v3 and keeps every row
#    (scores and embeddings follow the run); delete --yes removes that run's
#    rows only; a run a live writer of another host holds is refused.
. "$(dirname "$0")/lib.sh"
M=$S/tests/data/models/tiny-qwen2-f16.gguf
REF="embedded:$M?profile=cpu-f32&threads=1"
cd "$T" || fail "cd $T"

# 1. default labels never collide, and resume
measure() { "$D" --quiet measure --baseline "$REF" --target "$REF" --suite 'builtin:math?n=3' "$@"; }
measure --max-tokens 8 > m1.out 2> m1.err; rc=$?
check '[ $rc -ne 2 ] && [ $rc -lt 4 ]' "first default measure runs (rc $rc: $(tail -2 m1.err))"
measure --max-tokens 12 > m2.out 2> m2.err; rc=$?
check '[ $rc -ne 2 ] && [ $rc -lt 4 ]' "a second default measure with other settings runs beside it (rc $rc: $(tail -2 m2.err))"
labels=$(sql driftbench-measure.db "select group_concat(label, ' ') from (select label from runs order by id)")
check '[ "$labels" = "baseline target baseline-2 target-2" ]' "labels taken: '$labels'"
n_before=$(sql driftbench-measure.db "select count(*) from responses")
measure --max-tokens 8 > m3.out 2> m3.err; rc=$?
n_after=$(sql driftbench-measure.db "select count(*) from responses")
labels=$(sql driftbench-measure.db "select count(*) from runs")
check '[ $rc -ne 2 ] && [ $rc -lt 4 ] && [ "$labels" = 4 ] && [ "$n_before" = "$n_after" ]' \
  "re-running the first measure resumes its runs (rc $rc, $labels runs, responses $n_before -> $n_after)"
cmp -s m1.out m3.out; check '[ $? -eq 0 ]' "the resumed measure reports what the first did"
"$D" runs list --db driftbench-measure.db > list.out; rc=$?
check '[ $rc -eq 0 ] && [ "$(grep -c embedded list.out)" = 4 ]' "runs list shows the four runs (rc $rc)"

# 2. an old store: rename migrates it and keeps every row
cp "$S/tests/data/stores/runs_v2.db" old.db
rows() { sql old.db "select (select count(*) from runs)||' '||(select count(*) from responses)||' '||(select count(*) from scores)||' '||(select count(*) from embeddings)||' '||(select count(*) from prompts)"; }
before=$(rows)
"$D" runs rename cand candidate --db old.db > rn.out 2> rn.err; rc=$?
check '[ $rc -eq 0 ] && [ "$(sql old.db "pragma user_version")" = 3 ]' "rename migrates the v2 store to v3 (rc $rc: $(cat rn.err))"
check '[ "$(rows)" = "$before" ]' "every row kept by the migration and the rename ($before -> $(rows))"
scored=$(sql old.db "select count(*) from scores s join responses r on r.id = s.response_id join runs u on u.id = r.run_id where u.label = 'candidate'")
check '[ "$scored" = 5 ]' "the scores follow the renamed run ($scored of 5)"
"$D" runs rename base candidate --db old.db > /dev/null 2> rn2.err; rc=$?
check '[ $rc -eq 2 ] && grep -q "exists already" rn2.err' "rename onto an existing label is refused (rc $rc)"
"$D" runs rename vllm-h100 other --db old.db > /dev/null 2> rn3.err; rc=$?
check '[ $rc -eq 2 ] && grep -q "being written" rn3.err' "rename of a run another host writes is refused (rc $rc)"
"$D" runs delete candidate --db old.db --yes > del.out 2> del.err; rc=$?
check '[ $rc -eq 0 ] && grep -q "deleted run candidate: 5 responses (0 failed), 5 scores, 1 embeddings" del.out' \
  "delete --yes says what it removed (rc $rc: $(cat del.out del.err))"
check '[ "$(rows)" = "2 5 3 0 5" ]' "only that run's rows went (runs responses scores embeddings prompts: $(rows))"
"$D" runs delete vllm-h100 --db old.db --yes > /dev/null 2> del2.err; rc=$?
check '[ $rc -eq 2 ] && grep -q "being written" del2.err && [ "$(rows)" = "2 5 3 0 5" ]' \
  "delete of a locked run is refused and changes nothing (rc $rc)"
finish
