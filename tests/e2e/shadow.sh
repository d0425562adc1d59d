#!/usr/bin/env bash
# shadow.sh - `driftbench shadow` (issue 39), the mirroring proxy, against
# local servers:
#   1. `driftbench serve` ref as the primary (behind a recording relay,
#      shadow_tee.py, that keeps the bytes the primary sent and slices SSE
#      replies 40 ms apart) and serve cpu-int4 as the candidate: the client
#      gets the primary's bytes exactly (non-streaming, streaming, GET
#      /v1/models), status and Content-Type; a stream arrives as it is sent
#      (first byte well before the last); every request is stored on both
#      sides; the streamed answer is stored as the same message as the
#      non-streamed one; temperature 0.8 is counted not comparable; /metrics
#      parses as Prometheus text and its counts agree with the store;
#   2. fake servers: a failing candidate gives mirror errors, never pairs
#      compared; a failing primary's status and body reach the client
#      unchanged and make an error pair; an unreachable primary is a 502
#      with a JSON error; a body over --max-body is a 413; the client's
#      Authorization reaches the primary and not the candidate;
#   3. a slow candidate under concurrent load: every client answered fast
#      (200), drops counted (mirrored + dropped = requests);
#   4. --sample 0.5: the same traffic samples the same requests;
#   5. kill -9 under load, then a restart with the same store: integrity
#      check ok, and every request whose primary answer is stored gets its
#      candidate answer; a clean SIGTERM stop exits 0 and says what was left;
#   6. --max-reply: a primary reply over it reaches the client whole and is a
#      drop (reason reply_too_large), not stored; --retention N with a short
#      --retention-period is applied while the proxy runs (each side keeps
#      its newest N, counted in /metrics and said on stderr), and with a
#      slow candidate the pairs still waiting keep their requests.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 needed"
command -v curl > /dev/null || skip_all "curl needed"
command -v sqlite3 > /dev/null || skip_all "sqlite3 needed"

# start_shadow, stop_shadow, prom_check, metric, metrics, wait_pairs: lib.sh
# start_shadow NAME ARGS...: the proxy on an ephemeral port; sets SP (port) and SHPID
# body_of FILE: the body of the last HTTP/1.1 response recorded in FILE (a
# kept-alive connection carries several, one after another; Content-Length or
# chunked)
body_of() {
  python3 - "$1" <<'EOF'
import sys
raw, body = open(sys.argv[1], "rb").read(), b""
while raw:
    head, _, rest = raw.partition(b"\r\n\r\n")
    h = head.decode("latin-1").lower()
    if "transfer-encoding: chunked" in h:
        out = b""
        while True:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                rest = rest.partition(b"\r\n")[2]
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body, raw = out, rest
    else:
        n = [int(l.split(":")[1]) for l in h.split("\r\n") if l.startswith("content-length:")]
        body, raw = (rest[:n[0]], rest[n[0]:]) if n else (rest, b"")
sys.stdout.buffer.write(body)
EOF
}
# last_conn: the relay's connection that carried the latest reply (the proxy keeps them alive)
last_conn() { ls -t "$T/tee" | head -1 | sed 's/conn\.//'; }

# ---- 1. serve ref (primary, through the recording relay) and serve cpu-int4 ----
M=$S/models/qwen2-7m.gguf
start_serve() { # NAME PROFILE -> PORT_<NAME>
  "$D" serve --model "$M" --profile "$2" --port 0 --threads 1 --lifetime 600 > "$T/$1.out" 2> "$T/$1.err" &
  PIDS+=($!)
  wait_port_file "$T/$1.out" 200 || fail "serve $2 printed no PORT: $(cat "$T/$1.err")"
  eval "PORT_$1=$PORT"
}
start_serve ref ref
start_serve int4 cpu-int4
mkdir -p "$T/tee"
python3 "$S/tests/e2e/shadow_tee.py" "$PORT_ref" "$T/tee" > "$T/tee.out" 2>&1 &
PIDS+=($!)
wait_port_file "$T/tee.out" || fail "the relay did not start"
PTEE=$PORT
start_shadow s1 --primary "http://127.0.0.1:$PTEE/v1?model=qwen2-7m&api=chat" \
  --candidate "http://127.0.0.1:$PORT_int4/v1?model=qwen2-7m&api=chat" --db "$T/s1.db" --name t1
check 'curl -s "http://127.0.0.1:$SP/health" | grep -q "\"ok\""' "health"

req() { # CONTENT STREAM TEMPERATURE
  printf '{"model":"qwen2-7m","messages":[{"role":"user","content":"%s"}],"max_tokens":8,"temperature":%s,"stream":%s}' \
    "$1" "$3" "$2"
}
n_sent=0
for k in 1 2 3 4 s1 s2 nc; do
  stream=false temp=0
  case $k in s*) stream=true ;; nc) temp=0.8 ;; esac
  req "Tell me about number $k" $stream $temp > "$T/req.$k"
  curl -s -D "$T/h.$k" -o "$T/via.$k" -H 'Content-Type: application/json' --data-binary "@$T/req.$k" \
    "http://127.0.0.1:$SP/v1/chat/completions"
  n_sent=$((n_sent + 1))
  c=$(last_conn)
  body_of "$T/tee/conn.$c" > "$T/prim.$k"
  check 'cmp -s "$T/via.$k" "$T/prim.$k" && [ -s "$T/via.$k" ]' \
    "request $k: the client's bytes are not the primary's: $(head -c 300 "$T/via.$k") vs $(head -c 300 "$T/prim.$k")"
  ctype=application/json
  [ $stream = true ] && ctype=text/event-stream
  check 'head -1 "$T/h.$k" | grep -q " 200" && grep -qi "^content-type: $ctype" "$T/h.$k" && grep -qai "^content-type: $ctype" "$T/tee/conn.$c"' \
    "request $k: status or Content-Type: $(cat "$T/h.$k")"
done
check 'grep -q "^data: \[DONE\]" "$T/via.s1"' "the streamed reply is SSE: $(head -c 200 "$T/via.s1")"
# a stream arrives as the primary sends it (the relay spreads it over > 1 s)
python3 - "$SP" "$T/req.s2" > "$T/stream_times" <<'EOF'
import socket, sys, time
body = open(sys.argv[2], "rb").read()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body)
t0, first, data = time.time(), None, b""
while True:
    b = s.recv(65536)
    if not b:
        break
    data += b
    if first is None and b"data: " in data:
        first = time.time() - t0
print("%.3f %.3f" % (first, time.time() - t0))
EOF
read -r t_first t_all < "$T/stream_times"
n_sent=$((n_sent + 1))
check 'python3 -c "import sys; f, a = map(float, sys.argv[1:]); sys.exit(0 if a > 0.5 and f < a - 0.4 else 1)" $t_first $t_all' \
  "the stream was not relayed as it arrived: first event at ${t_first}s, the end at ${t_all}s"
# GET /v1/models passes through
curl -s -o "$T/via.models" "http://127.0.0.1:$SP/v1/models"
body_of "$T/tee/conn.$(last_conn)" > "$T/prim.models"
check 'cmp -s "$T/via.models" "$T/prim.models" && grep -q qwen2-7m "$T/via.models"' "GET /v1/models: $(cat "$T/via.models")"
check 'wait_pairs $SP $n_sent 20' "not every pair completed: $(curl -s "http://127.0.0.1:$SP/metrics" | grep -v "^#" | head -20)"
metrics $SP "$T/m1"
check 'prom_check "$T/m1"' "/metrics does not parse: $(prom_check "$T/m1" 2>&1 | tail -3)"
check '[ "$(metric "$T/m1" driftbench_shadow_mirrored_total)" = $n_sent ] && [ "$(metric "$T/m1" driftbench_shadow_compared_total)" = $((n_sent - 1)) ] && [ "$(metric "$T/m1" driftbench_shadow_not_comparable_total)" = 1 ]' \
  "counts: $(grep -v "^#" "$T/m1" | head -16)"
# the streaming judge: every comparable pair judged, the exact class counted
check '[ "$(metric "$T/m1" driftbench_traffic_compared_total)" = $((n_sent - 1)) ] && [ "$(metric "$T/m1" driftbench_traffic_pairs_total)" = $n_sent ] && [ -n "$(metric "$T/m1" "driftbench_traffic_flips_total{class=\"exact\"}")" ]' \
  "judge counts: $(grep "^driftbench_traffic" "$T/m1" | head -12)"
check '[ "$(metric "$T/m1" driftbench_shadow_primary_added_latency_seconds_count)" -ge $((n_sent - 1)) ]' "added latency histogram: $(grep added_latency "$T/m1" | tail -2)"
# the store: both sides of every request, replay's layout; the stream's answer is the non-streamed one's
check '[ "$(sql "$T/s1.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = '"'shadow-primary'"' and x.failed = 0")" = $n_sent ] && [ "$(sql "$T/s1.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = '"'shadow-candidate'"' and x.failed = 0")" = $n_sent ]' \
  "stored rows: $(sql "$T/s1.db" "select r.label, count(*) from responses x join runs r on r.id = x.run_id group by 1")"
check '[ "$(sql "$T/s1.db" "select count(distinct suite) || suite from prompts")" = "1shadow:t1" ]' "suite: $(sql "$T/s1.db" "select distinct suite from prompts")"
sed 's/"stream":true/"stream":false/' "$T/req.s1" > "$T/req.s1.whole"
curl -s -H 'Content-Type: application/json' --data-binary "@$T/req.s1.whole" "http://127.0.0.1:$PORT_ref/v1/chat/completions" > "$T/whole.s1"
python3 - "$T/req.s1" > "$T/canon.s1" <<'EOF'
import json, sys
print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":"), sort_keys=True), end="")
EOF
python3 - "$T/s1.db" "$T/canon.s1" > "$T/stored.s1" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); want = open(sys.argv[2]).read()
for (t,) in c.execute("select x.text from responses x join runs r on r.id = x.run_id join prompts p on p.id = x.prompt_rowid "
                      "where r.label = 'shadow-primary' and p.input = ?", (want,)):
    print(t)
EOF
check 'python3 - "$T/stored.s1" "$T/whole.s1" <<EOF
import json, sys
stored = json.loads(open(sys.argv[1]).read())
whole = json.load(open(sys.argv[2]))["choices"][0]["message"]
assert stored["content"] == whole["content"] and stored["content"], (stored, whole)
EOF' "the streamed answer stored: $(cat "$T/stored.s1") vs $(head -c 300 "$T/whole.s1")"
"$D" runs list --db "$T/s1.db" > "$T/runs1" 2>&1
check 'grep -q shadow-primary "$T/runs1" && grep -q shadow-candidate "$T/runs1"' "runs list: $(cat "$T/runs1")"
stop_shadow
rc=$?
check '[ $rc -eq 0 ] && grep -q "0 left queued" "$T/s1.err"' "clean stop: exit $rc: $(tail -3 "$T/s1.err")"

# ---- 2. fake servers: failures ----
start_server_text 'fault | BROKEN | 500\ndefault | echo\n'
PA=$PORT
start_server_text 'fault | * | 500\n'
PC=$PORT
HA="http://127.0.0.1:$PA/v1?model=fake&api=chat"
start_shadow s2 --primary "$HA" --candidate "http://127.0.0.1:$PC/v1?model=fake&api=chat" --db "$T/s2.db" --retries 0 --max-body 2048
for k in 1 2 3 4 5; do
  curl -s -o "$T/f.$k" -H 'Authorization: Bearer client-token' -H 'Content-Type: application/json' \
    -d "{\"model\":\"fake\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"ANSWER=$k\"}]}" \
    "http://127.0.0.1:$SP/v1/chat/completions"
done
curl -s "http://127.0.0.1:$PA/last_headers" > "$T/prim.hdr"
check 'grep -q "The answer is 5" "$T/f.5"' "a failing candidate: the client still gets the primary's answer: $(cat "$T/f.5")"
code=$(curl -s -o "$T/f.broken" -w '%{http_code}' -d '{"model":"fake","temperature":0,"messages":[{"role":"user","content":"BROKEN"}]}' \
  "http://127.0.0.1:$SP/v1/chat/completions")
curl -s -o "$T/f.broken.direct" -d '{"model":"fake","temperature":0,"messages":[{"role":"user","content":"BROKEN"}]}' \
  "http://127.0.0.1:$PA/v1/chat/completions"
check '[ "$code" = 500 ] && cmp -s "$T/f.broken" "$T/f.broken.direct"' "a failing primary: $code $(cat "$T/f.broken")"
check 'wait_pairs $SP 5 20' "the failing candidate's pairs did not complete"
curl -s "http://127.0.0.1:$PC/last_headers" > "$T/cand.hdr"
check 'grep -qi "^authorization: Bearer client-token" "$T/prim.hdr" && ! grep -qi "client-token" "$T/cand.hdr" && grep -q "POST" "$T/cand.hdr"' \
  "Authorization: primary got $(cat "$T/prim.hdr"); candidate got $(cat "$T/cand.hdr")"
head -c 3000 /dev/zero | tr '\0' 'x' > "$T/big"
code=$(curl -s -o "$T/f.big" -w '%{http_code}' --data-binary "@$T/big" "http://127.0.0.1:$SP/v1/chat/completions")
check '[ "$code" = 413 ]' "a body over --max-body: $code $(cat "$T/f.big")"
metrics $SP "$T/m2"
check 'prom_check "$T/m2"' "/metrics (2) does not parse"
check '[ "$(metric "$T/m2" driftbench_shadow_mirror_errors_total)" = 5 ] && [ "$(metric "$T/m2" driftbench_shadow_compared_total)" = 0 ] && [ "$(metric "$T/m2" driftbench_shadow_primary_errors_total)" = 1 ] && [ "$(metric "$T/m2" driftbench_shadow_primary_error_pairs_total)" = 1 ] && [ "$(metric "$T/m2" "driftbench_traffic_flips_total{class=\"exact\"}")" = 0 ]' \
  "failures counted: $(grep -v "^#" "$T/m2" | head -16)"
check '[ "$(sql "$T/s2.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = '"'shadow-candidate'"' and x.failed = 1")" = 5 ] && [ "$(sql "$T/s2.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = '"'shadow-primary'"' and x.error like '"'HTTP 500%'"'")" = 1 ]' \
  "error rows: $(sql "$T/s2.db" "select r.label, substr(x.error, 1, 60) from responses x join runs r on r.id = x.run_id")"
stop_shadow
# an unreachable primary
DEAD=$(free_port)
start_shadow s2b --primary "http://127.0.0.1:$DEAD/v1?model=fake&api=chat" --candidate "http://127.0.0.1:$PC/v1?model=fake&api=chat" --db "$T/s2b.db"
code=$(curl -s -o "$T/f.dead" -w '%{http_code}' -d '{"model":"fake","messages":[{"role":"user","content":"x"}]}' "http://127.0.0.1:$SP/v1/chat/completions")
check '[ "$code" = 502 ] && python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"error\"][\"type\"] == \"shadow_primary_unreachable\"" "$T/f.dead"' \
  "an unreachable primary: $code $(cat "$T/f.dead")"
stop_shadow
# bad flags: exit 2
"$D" shadow --primary "$HA" --candidate "embedded:/nonexistent.gguf" --db "$T/bad.db" --listen 127.0.0.1:0 > /dev/null 2> "$T/bad.err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "candidate" "$T/bad.err"' "an embedded candidate: exit $rc $(cat "$T/bad.err")"

# ---- 3. a slow candidate under load: drops counted, no client slowed ----
start_server_text 'fault | * | sleep | seconds=3\ndefault | echo\n'
PSLOW=$PORT
start_shadow s3 --primary "$HA" --candidate "http://127.0.0.1:$PSLOW/v1?model=fake&api=chat" --db "$T/s3.db" \
  --queue 2 --mirror-connections 1 --timeout 20
seq 40 | xargs -P 10 -I{} curl -s -o /dev/null -w '%{http_code} %{time_total}\n' \
  -d '{"model":"fake","temperature":0,"messages":[{"role":"user","content":"load {} ANSWER={}"}]}' \
  "http://127.0.0.1:$SP/v1/chat/completions" > "$T/load3"
check '[ "$(grep -c "^200 " "$T/load3")" = 40 ]' "under load, every client answered: $(sort "$T/load3" | uniq -c | head)"
# the candidate takes 3 s a request: a client that waited on it would take that long
check 'awk "\$2 > 2.5 {bad = 1} END {exit bad}" "$T/load3"' "a client waited on the slow candidate: $(sort -k2 -n "$T/load3" | tail -3)"
metrics $SP "$T/m3"
mir=$(metric "$T/m3" driftbench_shadow_mirrored_total)
drop=$(metric "$T/m3" 'driftbench_shadow_dropped_total{reason="queue_full"}')
busy=$(metric "$T/m3" 'driftbench_shadow_dropped_total{reason="store_busy"}')
check '[ "$drop" -gt 0 ] && [ "$mir" -gt 0 ] && [ $((mir + drop + busy)) = 40 ]' "drops: mirrored $mir, queue_full $drop, store_busy $busy"
check '[ "$(metric "$T/m3" driftbench_shadow_queue_depth)" -le 2 ]' "queue depth over its capacity: $(metric "$T/m3" driftbench_shadow_queue_depth)"
stop_shadow

# ---- 4. --sample: the same traffic, the same sample ----
start_server_text 'default | echo\n'
PFAST=$PORT
for run in a b; do
  start_shadow s4$run --primary "$HA" --candidate "http://127.0.0.1:$PFAST/v1?model=fake&api=chat" --db "$T/s4$run.db" --sample 0.5
  for k in $(seq 20); do
    curl -s -o /dev/null -d "{\"model\":\"fake\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"sample $k\"}]}" \
      "http://127.0.0.1:$SP/v1/chat/completions"
  done
  metrics $SP "$T/m4$run"
  stop_shadow
  sql "$T/s4$run.db" "select input from prompts order by input" > "$T/sample.$run"
done
n4=$(wc -l < "$T/sample.a")
check '[ "$n4" -gt 0 ] && [ "$n4" -lt 20 ] && cmp -s "$T/sample.a" "$T/sample.b"' "sampling: $n4 of 20; the two runs differ: $(diff "$T/sample.a" "$T/sample.b" | head -3)"
check '[ $(( $(metric "$T/m4a" driftbench_shadow_sampled_out_total) + $(metric "$T/m4a" driftbench_shadow_mirrored_total) )) = 20 ]' "sampled out + mirrored != 20"

# ---- 5. kill -9 under load, restart: nothing lost ----
start_server_text 'fault | * | sleep | seconds=1\ndefault | echo\n'
PSLOW1=$PORT
start_shadow s5 --primary "$HA" --candidate "http://127.0.0.1:$PSLOW1/v1?model=fake&api=chat" --db "$T/s5.db" \
  --queue 64 --mirror-connections 1
(for k in $(seq 400); do
  curl -s -o /dev/null -d "{\"model\":\"fake\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"kill $k ANSWER=$k\"}]}" \
    "http://127.0.0.1:$SP/v1/chat/completions"
done) &
LOADPID=$!
sleep 2
kill -9 "$SHPID"
wait "$LOADPID" 2> /dev/null
check '[ "$(sql "$T/s5.db" "pragma integrity_check")" = ok ]' "integrity after kill -9: $(sql "$T/s5.db" "pragma integrity_check" | head -3)"
np=$(sql "$T/s5.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = 'shadow-primary' and x.failed = 0")
nc=$(sql "$T/s5.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = 'shadow-candidate'")
check '[ "$np" -gt "$nc" ] && [ "$nc" -ge 0 ]' "after kill -9: $np primary answers, $nc candidate rows (want fewer candidate rows)"
start_shadow s5b --primary "$HA" --candidate "http://127.0.0.1:$PFAST/v1?model=fake&api=chat" --db "$T/s5.db"
check 'wait_pairs $SP $np 20' "after the restart, not every stored primary got its candidate answer: $(curl -s "http://127.0.0.1:$SP/metrics" | grep -E "pairs_total|resumed|queue_depth")"
metrics $SP "$T/m5"
check '[ "$(metric "$T/m5" driftbench_shadow_resumed_total)" = $((np - nc)) ] && [ "$(metric "$T/m5" driftbench_shadow_mirrored_total)" = "$np" ]' \
  "resumed: $(metric "$T/m5" driftbench_shadow_resumed_total), want $((np - nc)); mirrored $(metric "$T/m5" driftbench_shadow_mirrored_total), want $np"
left=$(sql "$T/s5.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = 'shadow-primary' and x.failed = 0 and not exists (select 1 from responses y join runs q on q.id = y.run_id where q.label = 'shadow-candidate' and y.prompt_rowid = x.prompt_rowid)")
check '[ "$left" = 0 ]' "$left stored primary answers have no candidate row after the restart"
stop_shadow
rc=$?
check '[ $rc -eq 0 ] && grep -q "left queued" "$T/s5b.err"' "clean stop after the restart: exit $rc $(tail -2 "$T/s5b.err")"
check '[ "$(sql "$T/s5.db" "pragma integrity_check")" = ok ]' "integrity at the end"
# ---- 6. --max-reply and the retention applied while running ----
LONG=$(head -c 1500 /dev/zero | tr '\0' 'x')
start_server_text "answer | LONGREPLY | $LONG\ndefault | echo\n"
PLONG=$PORT
start_shadow s6 --primary "http://127.0.0.1:$PLONG/v1?model=fake&api=chat" \
  --candidate "http://127.0.0.1:$PFAST/v1?model=fake&api=chat" --db "$T/s6.db" --max-reply 1024 \
  --retention 3 --retention-period 0.3
curl -s -o "$T/f.long" -d '{"model":"fake","temperature":0,"messages":[{"role":"user","content":"LONGREPLY"}]}' \
  "http://127.0.0.1:$SP/v1/chat/completions"
check '[ "$(wc -c < "$T/f.long")" -gt 1500 ] && grep -q "$LONG" "$T/f.long"' "a reply over --max-reply is relayed whole: $(head -c 200 "$T/f.long")"
for k in $(seq 6); do
  curl -s -o /dev/null -d "{\"model\":\"fake\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"keep $k ANSWER=$k\"}]}" \
    "http://127.0.0.1:$SP/v1/chat/completions"
done
check 'wait_pairs $SP 6 20' "the pairs of section 6 did not complete"
# the retention runs every 0.3 s: once every pair is stored, each side keeps its newest 3
for _ in $(seq 50); do
  [ "$(sql "$T/s6.db" "select count(*) from responses")" = 6 ] && break
  sleep 0.1
done
metrics $SP "$T/m6"
check 'prom_check "$T/m6"' "/metrics (6) does not parse"
check '[ "$(metric "$T/m6" "driftbench_shadow_dropped_total{reason=\"reply_too_large\"}")" = 1 ] && [ "$(metric "$T/m6" driftbench_shadow_mirrored_total)" = 6 ] && [ "$(metric "$T/m6" "driftbench_shadow_skipped_total{reason=\"not_mirrorable\"}")" = 0 ]' \
  "reply_too_large: $(grep -E "dropped|skipped|mirrored_total" "$T/m6" | grep -v "^#")"
check '[ "$(sql "$T/s6.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = '"'shadow-primary'"'")" = 3 ] && [ "$(sql "$T/s6.db" "select count(*) from responses x join runs r on r.id = x.run_id where r.label = '"'shadow-candidate'"'")" = 3 ] && [ "$(sql "$T/s6.db" "select count(*) from prompts")" = 3 ] && ! grep -q LONGREPLY "$T/s6.db"' \
  "retention while running: $(sql "$T/s6.db" "select r.label, count(*) from responses x join runs r on r.id = x.run_id group by 1; select count(*) from prompts")"
check '[ "$(metric "$T/m6" driftbench_shadow_retention_deleted_total)" = 6 ] && grep -q "retention 3: 0 stored answers deleted" "$T/s6.err" && grep -Eq "retention 3: [1-6] stored answers deleted" "$T/s6.err"' \
  "retention counted and said: $(metric "$T/m6" driftbench_shadow_retention_deleted_total); $(grep retention "$T/s6.err")"
stop_shadow
rc=$?
check '[ $rc -eq 0 ] && grep -q "1 dropped" "$T/s6.err"' "clean stop (6): exit $rc $(tail -2 "$T/s6.err")"
# a count retention under a slow candidate: the pairs still waiting keep their primary answer and
# request (else the store refuses their candidate answers: store errors), then each side keeps its newest 1
start_server_text 'fault | * | sleep | seconds=1\ndefault | echo\n'
PSLOW6=$PORT
start_shadow s6b --primary "$HA" --candidate "http://127.0.0.1:$PSLOW6/v1?model=fake&api=chat" --db "$T/s6b.db" \
  --mirror-connections 1 --retention 1 --retention-period 0.2
for k in 1 2 3; do
  curl -s -o /dev/null -d "{\"model\":\"fake\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"wait $k ANSWER=$k\"}]}" \
    "http://127.0.0.1:$SP/v1/chat/completions"
done
check 'wait_pairs $SP 3 20' "the slow candidate's pairs did not complete: $(curl -s "http://127.0.0.1:$SP/metrics" | grep -E "pairs_total|store_errors")"
for _ in $(seq 30); do
  [ "$(sql "$T/s6b.db" "select count(*) from responses")" = 2 ] && break
  sleep 0.1
done
metrics $SP "$T/m6b"
check '[ "$(metric "$T/m6b" driftbench_shadow_store_errors_total)" = 0 ] && [ "$(metric "$T/m6b" driftbench_shadow_mirror_errors_total)" = 0 ] && [ "$(sql "$T/s6b.db" "select count(*) from responses")" = 2 ] && [ "$(sql "$T/s6b.db" "select count(*) from prompts")" = 1 ]' \
  "retention with pairs waiting: store errors $(metric "$T/m6b" driftbench_shadow_store_errors_total): $(grep -i "retention\|store" "$T/s6b.err" | tail -3); $(sql "$T/s6b.db" "select count(*) from responses; select count(*) from prompts")"
stop_shadow
rc=$?
check '[ $rc -eq 0 ]' "clean stop (6b): exit $rc $(tail -2 "$T/s6b.err")"
finish
