#!/usr/bin/env bash
# cli_run_lock.sh - two processes writing one label: while a `run` writes
# label L, a second `run` of L refuses at once (exit 2, a message naming L
# and the owner) and asks nothing; another label goes ahead meanwhile; the
# lock of a run that was SIGKILLed is taken over by the next run of L; a lock
# held from another host is refused with the way to remove it.
. "$(dirname "$0")/lib.sh"
sql() { sqlite3 "$1" "$2" 2>/dev/null; }

stat_of() {
  python3 -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen("http://127.0.0.1:%s/stats" % sys.argv[1], timeout=5)).get(sys.argv[2], 0))' "$@"
}

# every prompt holds HANG: the first two requests hang (times=2), the rest are answered
start_server_text 'default | echo\nfault | HANG | sleep | seconds=600 | times=2\n'; P=$PORT
python3 - "$T/s.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(10):
        f.write(json.dumps({"prompt_id": "q%d" % i, "prompt": "HANG Compute ANSWER=%d" % i, "answer": str(i)}) + "\n")
EOF
U="http://127.0.0.1:$P/v1?model=m"
DB=$T/lock.db

# A: holds label L, its two slots stuck on the hanging requests
"$D" --quiet run --db "$DB" --label L --target "$U" --suite "$T/s.jsonl" --concurrency 2 2> "$T/a.err" &
A=$!
PIDS+=($A)
for _ in $(seq 200); do
  [ "$(sql "$DB" "select count(*) from run_locks where label='L'")" = 1 ] && [ "$(stat_of "$P" generate)" -ge 2 ] && break
  sleep 0.05
done
check '[ "$(sql "$DB" "select pid from run_locks where label='"'L'"'")" = "$A" ]' "the lock names the writer's pid"

# B: the same label, while A runs: refused at once, nothing asked
t0=$(now_ms)
"$D" run --db "$DB" --label L --target "$U" --suite "$T/s.jsonl" --concurrency 2 > /dev/null 2> "$T/b.err"
rc=$?
el=$(($(now_ms) - t0))
check '[ $rc -eq 2 ]' "second writer of L exits 2 (got $rc)"
check '[ $el -lt 5000 ]' "second writer refuses at once (took $el ms)"
check "grep -q \"run 'L' is being written\" \"$T/b.err\" && grep -q \"pid $A\" \"$T/b.err\"" \
  "the refusal names the label and the owner: $(head -c 400 "$T/b.err")"
check '[ "$(stat_of "$P" generate)" = 2 ]' "the refused run asked the server nothing"
check '[ "$(sql "$DB" "select count(*) from runs")" = 1 ]' "the refused run created nothing"

# C: another label meanwhile is fine (the hang fault is used up: answered)
"$D" --quiet run --db "$DB" --label M --target "$U" --suite "$T/s.jsonl" --concurrency 2
rc=$?
check '[ $rc -eq 0 ]' "another label runs while L is held"
check '[ "$(sql "$DB" "select count(*) from responses r join runs u on u.id=r.run_id where u.label='"'M'"' and error is null")" = 10 ]' \
  "label M complete"

# A dies without cleaning up: its lock is stale, the next run of L takes it over
kill -9 $A; wait $A 2>/dev/null
check '[ "$(sql "$DB" "select count(*) from run_locks where label='"'L'"'")" = 1 ]' "a SIGKILLed run leaves its lock"
"$D" run --db "$DB" --label L --target "$U" --suite "$T/s.jsonl" --concurrency 2 2> "$T/l2.err"
rc=$?
check '[ $rc -eq 0 ]' "the next run of L takes the dead owner's lock over: $(head -c 300 "$T/l2.err")"
check 'grep -q "resuming run" "$T/l2.err"' "and resumes L"
check '[ "$(sql "$DB" "select count(*) from responses r join runs u on u.id=r.run_id where u.label='"'L'"' and error is null")" = 10 ]' \
  "label L complete"
check '[ "$(sql "$DB" "select count(*) from run_locks")" = 0 ]' "finished runs hold no lock"

# a lock from another host is not judged: refused with how to remove it
sql "$DB" "insert into run_locks(label,pid,host,proc_start,token,started_at) values('X',1,'elsewhere.example',0,'t','2026-01-01T00:00:00Z')"
"$D" run --db "$DB" --label X --target "$U" --suite "$T/s.jsonl" > /dev/null 2> "$T/x.err"
rc=$?
check '[ $rc -eq 2 ]' "a lock of another host: exit 2 (got $rc)"
check "grep -q \"run 'X' is being written\" \"$T/x.err\" && grep -q elsewhere.example \"$T/x.err\"" \
  "names the label and the host: $(head -c 400 "$T/x.err")"
hint=$(sed -n 's/.*sqlite3 [^ ]* "\(DELETE FROM run_locks[^"]*\)".*/\1/p' "$T/x.err")
check '[ -n "$hint" ]' "the message says how to remove the lock"
sql "$DB" "$hint"
"$D" --quiet run --db "$DB" --label X --target "$U" --suite "$T/s.jsonl"
rc=$?
check '[ $rc -eq 0 ]' "after removing the lock as told, X runs"

finish
