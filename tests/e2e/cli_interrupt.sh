#!/usr/bin/env bash
# cli_interrupt.sh - Ctrl-C / SIGTERM during `run` and `measure` against the
# real fake server (tests/server/fakeserver.c): requests that never get an
# answer, and a retry back-off of 30 s (Retry-After), are ended at once; the
# command exits 2 within 2 s; every answer received before is stored; the
# unfinished requests are stored as nothing (no error row), and the same
# command again resumes and completes. A second signal exits at once even
# while the first one's clean-up waits (here: on a store another process
# holds locked).
. "$(dirname "$0")/lib.sh"

# stat_of PORT KEY [SUB]: a counter of the server's /stats
stat_of() {
  python3 - "$@" <<'EOF'
import json, sys, urllib.request
j = json.load(urllib.request.urlopen("http://127.0.0.1:%s/stats" % sys.argv[1], timeout=5))
v = j.get(sys.argv[2], 0)
if len(sys.argv) > 3 and sys.argv[3]: v = (v or {}).get(sys.argv[3], 0)
print(v if isinstance(v, int) else 0)
EOF
}

# wait_stat PORT KEY SUB N: waits (10 s at most) until the counter reaches N
wait_stat() {
  for _ in $(seq 200); do
    [ "$(stat_of "$1" "$2" "$3")" -ge "$4" ] && return 0
    sleep 0.05
  done
  return 1
}

# alive PID: the process exists and is not a zombie
alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
  [ -n "$st" ] && [ "$st" != Z ]
}

# wait_exit PID LIMIT_MS -> RC, ELAPSED_MS; SIGKILLs it past the limit (RC 137)
wait_exit() {
  local t0
  t0=$(now_ms)
  while alive "$1"; do
    if [ $(($(now_ms) - t0)) -gt "$2" ]; then kill -9 "$1" 2>/dev/null; break; fi
    sleep 0.02
  done
  wait "$1"
  RC=$?
  ELAPSED_MS=$(($(now_ms) - t0))
}

# suite FILE N_OK N_MARKED MARKER: N_OK plain prompts, then N_MARKED with MARKER
suite() {
  python3 - "$@" <<'EOF'
import json, sys
path, n_ok, n_marked, marker = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    for i in range(n_ok + n_marked):
        tag = marker + " " if i >= n_ok else ""
        f.write(json.dumps({"prompt_id": "q%02d" % i, "prompt": "%sCompute ANSWER=%d please" % (tag, i),
                            "answer": str(i)}) + "\n")
EOF
}

# ------------------------------------------------ SIGINT with requests in flight
start_server_text 'default | echo\nfault | HANG | sleep | seconds=600 | times=4\n'; P=$PORT
suite "$T/hang.jsonl" 6 4 HANG
U="http://127.0.0.1:$P/v1?model=m"
DB=$T/int.db
"$D" --quiet run --db "$DB" --label a --target "$U" --suite "$T/hang.jsonl" --concurrency 8 2> "$T/int.err" &
RUN=$!
PIDS+=($RUN)
wait_stat "$P" generate "" 10 || bad "the run sent its 10 requests"
wait_stat "$P" answers "" 6 || bad "the server answered the 6 plain prompts"
sleep 0.5 # the server counts an answer before it sends it: let the run receive the last ones
kill -INT $RUN
wait_exit $RUN 5000
check '[ $RC -eq 2 ]' "SIGINT with requests in flight: exit 2 (got $RC)"
check '[ $ELAPSED_MS -lt 2000 ]' "SIGINT with requests in flight: exit within 2 s (took $ELAPSED_MS ms)"
check 'grep -q "interrupted" "$T/int.err"' "says it was interrupted: $(head -c 300 "$T/int.err")"
check '[ "$(sql "$DB" "select count(*) from responses where error is null")" = 6 ]' \
  "the 6 answers received before the signal are stored"
check '[ "$(sql "$DB" "select count(*) from responses where error is not null")" = 0 ]' \
  "the aborted requests are not stored as errors"
check '[ "$(sql "$DB" "select count(*) from runs where finished_at is null")" = 1 ]' "the run is not marked finished"
"$D" run --db "$DB" --label a --target "$U" --suite "$T/hang.jsonl" --concurrency 8 2> "$T/int2.err"
rc=$?
check '[ $rc -eq 0 ]' "the rerun exits 0: $(head -c 300 "$T/int2.err")"
check 'grep -q "resuming run .a.: 10 prompts x 1 replicate(s), 4 to request" "$T/int2.err"' \
  "the rerun resumes and asks only the 4 missing: $(head -c 300 "$T/int2.err")"
check '[ "$(sql "$DB" "select count(*) from responses where error is null")" = 10 ]' "all 10 answered after resume"
check '[ "$(sql "$DB" "select count(*) from run_locks")" = 0 ]' "no run lock left behind"

# ------------------------------------------------ SIGTERM during a retry back-off
start_server_text 'default | echo\nfault | BUSY | 503 | retry_after=30 | times=1\n'; P=$PORT
suite "$T/busy.jsonl" 1 1 BUSY
U="http://127.0.0.1:$P/v1?model=m"
DB=$T/busy.db
"$D" --quiet run --db "$DB" --label b --target "$U" --suite "$T/busy.jsonl" --concurrency 2 2> "$T/busy.err" &
RUN=$!
PIDS+=($RUN)
wait_stat "$P" statuses 503 1 || bad "the server refused the BUSY prompt once"
wait_stat "$P" answers "" 1 || bad "the server answered the plain prompt"
sleep 0.5 # the run has the answer and waits 30 s for its retry
kill -TERM $RUN
wait_exit $RUN 5000
check '[ $RC -eq 2 ]' "SIGTERM in a back-off: exit 2 (got $RC)"
check '[ $ELAPSED_MS -lt 2000 ]' "SIGTERM in a back-off: exit within 2 s (took $ELAPSED_MS ms)"
check '[ "$(sql "$DB" "select count(*) from responses")" = 1 ]' "only the answer is stored (no error row for the BUSY prompt)"
check '[ "$(stat_of "$P" generate)" = 2 ]' "the retry was never sent"
"$D" --quiet run --db "$DB" --label b --target "$U" --suite "$T/busy.jsonl" --concurrency 2
rc=$?
check '[ $rc -eq 0 ]' "the rerun exits 0"
check '[ "$(sql "$DB" "select count(*) from responses where error is null")" = 2 ]' "both answered after resume"

# ------------------------------------------------ SIGINT during measure
# (--budget math=none: 6 pairs without a flip cannot show a rate within the
# default 2% and would be INCONCLUSIVE, exit 3; the gate is not the point here)
start_server_text 'default | echo\nfault | HANG | sleep | seconds=600 | times=2\n'; P=$PORT
suite "$T/meas.jsonl" 4 2 HANG
DB=$T/meas.db
"$D" --quiet measure --db "$DB" --baseline "http://127.0.0.1:$P/v1?model=m" \
  --target "http://127.0.0.1:$P/v1?model=m&api=chat" --suite "$T/meas.jsonl" --concurrency 8 \
  --budget math=none --format json -o "$T/meas.json" 2> "$T/meas.err" &
RUN=$!
PIDS+=($RUN)
wait_stat "$P" generate "" 6 || bad "measure sent the baseline's 6 requests"
wait_stat "$P" answers "" 4 || bad "the server answered 4 of them"
sleep 0.5
kill -INT $RUN
wait_exit $RUN 5000
check '[ $RC -eq 2 ]' "SIGINT during measure: exit 2 (got $RC)"
check '[ $ELAPSED_MS -lt 2000 ]' "SIGINT during measure: exit within 2 s (took $ELAPSED_MS ms)"
check '[ "$(sql "$DB" "select count(*) from responses where error is null")" = 4 ]' "measure stored the 4 answers"
check '[ "$(sql "$DB" "select count(*) from responses where error is not null")" = 0 ]' "and no error rows"
"$D" --quiet measure --db "$DB" --baseline "http://127.0.0.1:$P/v1?model=m" \
  --target "http://127.0.0.1:$P/v1?model=m&api=chat" --suite "$T/meas.jsonl" --concurrency 8 \
  --budget math=none --format json -o "$T/meas.json"
rc=$?
check '[ $rc -eq 0 ]' "measure again resumes and completes, nothing gated (exit 0, got $rc)"
check '[ "$(sql "$DB" "select count(*) from responses where error is null")" = 12 ]' "both runs complete (12 answers)"
check 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); w=d[\"workloads\"][0]; assert (w[\"n\"],w[\"flips\"],w[\"errors\"])==(6,0,0) and d[\"verdict\"]==w[\"verdict\"]==\"not_gated\", (d[\"verdict\"], w)" "$T/meas.json"' \
  "the resumed measure compares all 6 prompts"

# ------------------------------------------------ a second signal exits at once
start_server_text 'default | echo\nfault | HANG | sleep | seconds=600 | times=4\n'; P=$PORT
U="http://127.0.0.1:$P/v1?model=m"
DB=$T/twice.db
"$D" --quiet run --db "$DB" --label t --target "$U" --suite "$T/hang.jsonl" --concurrency 8 2> "$T/twice.err" &
RUN=$!
PIDS+=($RUN)
wait_stat "$P" generate "" 10 || bad "the run sent its 10 requests"
# another process holds the store's write lock: the first signal's clean-up
# (storing what was received) waits for it (busy timeout, 10 s)
python3 - "$DB" > "$T/holder.out" <<'EOF' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(30)
EOF
HOLDER=$!
PIDS+=($HOLDER)
for _ in $(seq 200); do grep -q held "$T/holder.out" && break; sleep 0.05; done
kill -INT $RUN
sleep 0.7
check 'alive $RUN' "after the first SIGINT the run is still storing (blocked by the holder)"
kill -INT $RUN
wait_exit $RUN 5000
check '[ $RC -eq 2 ]' "second SIGINT: exit 2 (got $RC)"
check '[ $ELAPSED_MS -lt 1000 ]' "second SIGINT: exit at once (took $ELAPSED_MS ms)"
check 'grep -q "interrupted again" "$T/twice.err"' "says it exits at once: $(head -c 300 "$T/twice.err")"
kill -9 $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
check '[ "$(sql "$DB" "pragma integrity_check")" = ok ]' "the store is intact"
"$D" --quiet run --db "$DB" --label t --target "$U" --suite "$T/hang.jsonl" --concurrency 8 2> "$T/twice2.err"
rc=$?
check '[ $rc -eq 0 ]' "the rerun takes over the dead run's lock and completes: $(head -c 300 "$T/twice2.err")"
check '[ "$(sql "$DB" "select count(*) from responses where error is null")" = 10 ]' "all 10 answered after resume"

finish
