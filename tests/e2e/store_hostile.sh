#!/usr/bin/env bash
# store_hostile.sh - the store is data, not code (issue 34). A store whose
# `responses` table was replaced by a view over an endless recursive query
# used to hang compare, report, table and merge for ever: each of them now
# refuses it at once (exit 2, the message naming the view), as it refuses a
# store with a trigger or a table whose SQL is not ours; the same store
# untouched still works. `timeout` only turns a hang into a failure here;
# nothing is timed.
. "$(dirname "$0")/lib.sh"
FIX=$S/tests/data/import
A=$FIX/lmeval/qwen2-7m-f16/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
B=$FIX/lmeval/qwen2-7m-q4_0/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
BASE=qwen2-7m-f16/gsm8k TGT=qwen2-7m-q4_0/gsm8k

"$D" --quiet import --db "$T/good.db" "$A" "$B" 2> "$T/imp.err"; rc=$?
check '[ $rc -eq 0 ]' "fixture store: import exit 0 (got $rc: $(cat "$T/imp.err"))"

# tamper DB SQL: a copy of the good store changed through plain SQLite
tamper() {
  cp "$T/good.db" "$1"
  python3 - "$1" "$2" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript(sys.argv[2])
db.commit()
db.close()
EOF
}
tamper "$T/view.db" "DROP TABLE responses;
CREATE VIEW responses AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM r)
  SELECT x AS id, 1 AS run_id, x AS prompt_rowid, 0 AS replicate, 0 AS failed, NULL AS http_status,
         1 AS attempts, NULL AS prompt_tokens, NULL AS completion_tokens, NULL AS latency_ms,
         NULL AS finish_reason, NULL AS created_at, NULL AS error, 'x' AS text, NULL AS logprobs FROM r;"
tamper "$T/trigger.db" "CREATE TRIGGER wipe AFTER INSERT ON scores BEGIN DELETE FROM runs; END;"
tamper "$T/altered.db" "ALTER TABLE runs ADD COLUMN note TEXT;"

# every read command and merge, on each hostile store
for db in view trigger altered; do
  case $db in
    view) want="view 'responses' where DriftBench has a table" ;;
    trigger) want="trigger 'wipe', which is not DriftBench's" ;;
    altered) want="table 'runs', whose SQL is not the one DriftBench creates" ;;
  esac
  for cmd in compare report table merge; do
    case $cmd in
      compare) args=(compare --db "$T/$db.db" --baseline "$BASE" --target "$TGT") ;;
      report) args=(report --db "$T/$db.db" --html "$T/r.html" --baseline "$BASE") ;;
      table) args=(table --db "$T/$db.db" --baseline "$BASE") ;;
      merge) rm -f "$T/out.db"; args=(merge --db "$T/out.db" "$T/$db.db") ;;
    esac
    timeout 60 "$D" "${args[@]}" > /dev/null 2> "$T/err"; rc=$?
    check '[ $rc -eq 2 ] && grep -qF "$want" "$T/err"' \
      "$cmd on the $db store: exit 2 naming the object (got $rc: $(head -c 300 "$T/err"))"
  done
done
# a writer is refused too (a trigger would run on its writes), the file left as it was
sum=$(md5sum < "$T/trigger.db")
"$D" --quiet import --db "$T/trigger.db" --label again "$A" 2> "$T/err"; rc=$?
check '[ $rc -eq 2 ] && grep -qF "trigger '"'"'wipe'"'"'" "$T/err" && [ "$(md5sum < "$T/trigger.db")" = "$sum" ]' \
  "import into the trigger store: exit 2, the file untouched (got $rc)"

# the untouched store still works
"$D" compare --db "$T/good.db" --baseline "$BASE" --target "$TGT" > "$T/c.txt" 2>&1; rc=$?
check '[ $rc -ne 2 ] && grep -q "DriftBench comparison" "$T/c.txt"' "compare on the good store works (exit $rc)"
"$D" table --db "$T/good.db" --baseline "$BASE" > /dev/null 2> "$T/err"; rc=$?
check '[ $rc -eq 0 ]' "table on the good store: exit 0 (got $rc: $(cat "$T/err"))"
"$D" report --db "$T/good.db" --html "$T/good.html" --baseline "$BASE" > /dev/null 2> "$T/err"; rc=$?
check '[ $rc -eq 0 ] && [ -s "$T/good.html" ]' "report on the good store: exit 0 (got $rc: $(cat "$T/err"))"
rm -f "$T/out.db"
"$D" --quiet merge --db "$T/out.db" "$T/good.db" 2> "$T/err"; rc=$?
check '[ $rc -eq 0 ]' "merge of the good store: exit 0 (got $rc: $(cat "$T/err"))"

finish
