#!/usr/bin/env bash
# replay_postgres.sh - `driftbench replay` on a PostgreSQL store does what
# it does on an SQLite file: the same log against the same two scripted
# fake servers (a math flip, a schema flip, a request the target fails)
# gives the same JSON report on both stores, first run and resumed run
# (the resume asks only the failed request again, on both); the stored
# answers are the same, byte for byte. Re-runs itself under
# tests/pg/with_server.sh (exit 77 when no server can start).
if [ -z "${DRIFT_TEST_PG:-}" ]; then exec bash "$(dirname "$0")/../pg/with_server.sh" bash "$0" "$@"; fi
if ! command -v psql > /dev/null; then echo "SKIP: no psql (PostgreSQL client)"; exit 77; fi
. "$(dirname "$0")/lib.sh"
DBS=()
on_exit() {
  for d in "${DBS[@]}"; do psql "$DRIFT_TEST_PG" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" > /dev/null 2>&1; done
}
name=drift_e2e_$$_replay
psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE $name" > /dev/null || fail "cannot create database $name"
DBS+=("$name")
URL=$(printf '%s' "$DRIFT_TEST_PG" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$name#")

start_server_text 'default | echo\nanswer | JSONQ | {"answer": 4}\n'
HA="http://127.0.0.1:$PORT/v1?model=fake&api=chat"
start_server_text 'answer | ANSWER=3 | The answer is 4.\\n#### 4\nanswer | JSONQ | {"answer": "four"}\nfault | BROKEN | 500\ndefault | echo\n'
HB="http://127.0.0.1:$PORT/v1?model=fake&api=chat"
{
  for k in 1 2 3 4 5; do printf '{"messages":[{"role":"user","content":"q ANSWER=%d"}]}\n' "$k"; done
  printf '{"messages":[{"role":"user","content":"BROKEN ANSWER=6"}]}\n'
  printf '{"messages":[{"role":"user","content":"JSONQ"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","properties":{"answer":{"type":"integer"}}}}}}\n'
} > "$T/log.jsonl"
for pass in 1 2; do
  for side in sq pg; do
    if [ $side = sq ]; then db=$T/s.db; else db=$URL; fi
    "$D" --quiet replay --log "$T/log.jsonl" --db "$db" --baseline "$HA" --target "$HB" --retries 0 \
      --format json -o "$T/$side$pass.json" 2> "$T/$side$pass.err"
    echo $? > "$T/$side$pass.rc"
  done
  check 'cmp -s "$T/sq$pass.json" "$T/pg$pass.json"' "pass $pass: reports differ: $(diff "$T/sq$pass.json" "$T/pg$pass.json" | head -20) $(cat "$T/pg$pass.err")"
  check '[ "$(cat "$T/sq$pass.rc")" = 1 ] && [ "$(cat "$T/pg$pass.rc")" = 1 ]' "pass $pass: exit $(cat "$T/sq$pass.rc") / $(cat "$T/pg$pass.rc"), want 1"
done
check 'python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
assert d[\"target\"][\"asked\"] == 1 and d[\"baseline\"][\"asked\"] == 0, d
assert d[\"classes\"][\"math\"][\"flips\"] == 1 and d[\"classes\"][\"schema\"][\"flips\"] == 1, d
assert d[\"errors\"][\"target\"] == 1
" "$T/pg2.json"' "resumed report on PostgreSQL: $(head -c 800 "$T/pg2.json")"
sq_ans=$(sqlite3 "$T/s.db" "select p.prompt_id||'|'||u.label||'|'||r.failed||'|'||coalesce(r.text,'') from responses r join runs u on u.id=r.run_id join prompts p on p.id=r.prompt_rowid order by p.prompt_id, u.label")
pg_ans=$(psql "$URL" -XAtqc "select p.prompt_id||'|'||u.label||'|'||r.failed||'|'||coalesce(convert_from(r.text,'UTF8'),'') from responses r join runs u on u.id=r.run_id join prompts p on p.id=r.prompt_rowid order by p.prompt_id collate \"C\", u.label collate \"C\"")
check '[ -n "$sq_ans" ] && [ "$sq_ans" = "$pg_ans" ]' "stored answers differ: $(diff <(echo "$sq_ans") <(echo "$pg_ans") | grep "^>" | head -3)"
finish
