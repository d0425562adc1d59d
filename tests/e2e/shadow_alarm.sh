#!/usr/bin/env bash
# shadow_alarm.sh - the shadow proxy judged live (issue 39): `driftbench
# serve` ref as the primary, builtin:math prompts sent as chat requests with
# temperature 0, and
#   1. a drifting candidate (serve cpu-int4): the exact class's alarm is
#      raised, logged on stderr the moment it happens and latched on /metrics
#      (driftbench_alarm_firing{class="exact"} 1), /metrics parses;
#   2. kill -9, then a restart with the same store: the judge resumes from the
#      stored pairs (counts and the alarm continue), new pairs add to them;
#   3. an identical candidate (the same ref server): no alarm, no exact flip;
#   2b. `shadow --report` over the store (no proxy): the same counts, the
#      alarm, and windows over time (text), the judge's state (json);
#   4. --store-texts hashes (with --redact emails): the startup line says so,
#      the judge still counts live, and neither the SQLite file nor its WAL
#      holds a prompt or an answer in plain text.
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 needed"
command -v curl > /dev/null || skip_all "curl needed"
command -v sqlite3 > /dev/null || skip_all "sqlite3 needed"

# start_shadow, stop_shadow, prom_check, metric, metrics, wait_pairs: lib.sh
SHADOW_PORT_WAIT=300 # start_shadow (lib.sh) waits 30 s for the port here, as this script always did
# send PORT FIRST LAST: math prompts FIRST..LAST (1-based) as chat requests, temperature 0
send() {
  python3 - "$1" "$2" "$3" "$T/math.jsonl" <<'EOF' || return 1
import json, sys, urllib.request
port, a, b, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(path)]
for r in rows[a - 1:b]:
    inp = r["input"]
    msgs = json.loads(inp)["messages"] if inp.lstrip().startswith("{") else [{"role": "user", "content": inp}]
    body = {"model": "qwen2-7m", "messages": msgs, "max_tokens": 24, "temperature": 0}
    q = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    with urllib.request.urlopen(q, timeout=120) as f:
        assert f.status == 200 and json.load(f)["choices"], "no answer"
EOF
}

M=$S/models/qwen2-7m.gguf
"$D" suites export builtin:math --n 60 -o "$T/math.jsonl" 2> "$T/export.err" || fail "suites export: $(cat "$T/export.err")"
[ "$(wc -l < "$T/math.jsonl")" -ge 50 ] || fail "builtin:math gave too few prompts"
start_serve ref ref
start_serve int4 cpu-int4
PRIM="http://127.0.0.1:$PORT_ref/v1?model=qwen2-7m&api=chat"
DRIFT="http://127.0.0.1:$PORT_int4/v1?model=qwen2-7m&api=chat"
N=40

# ---- 1. a drifting candidate: the alarm is raised ----
start_shadow a1 --primary "$PRIM" --candidate "$DRIFT" --db "$T/a.db" --name math --budget exact=1
check 'grep -q "storing prompts and answers in full" "$T/a1.err"' "the startup line does not say what is stored: $(cat "$T/a1.err")"
send $SP 1 $N || fail "requests through the proxy failed"
check 'wait_pairs $SP $N 60' "not every pair completed: $(curl -s "http://127.0.0.1:$SP/metrics" | grep -v "^#" | head)"
metrics $SP "$T/m1"
check 'prom_check "$T/m1"' "/metrics does not parse: $(prom_check "$T/m1" 2>&1 | tail -3)"
f1=$(metric "$T/m1" 'driftbench_traffic_flips_total{class="exact"}')
check '[ "$(metric "$T/m1" driftbench_traffic_pairs_total)" = $N ] && [ "$(metric "$T/m1" driftbench_traffic_compared_total)" = $N ] && [ "${f1:-0}" -ge 10 ]' \
  "cpu-int4 should change most answers: $(grep '^driftbench_traffic' "$T/m1")"
fire1=$(metric "$T/m1" 'driftbench_alarm_firing{class="exact"}')
check '[ "$fire1" = 1 ]' "the alarm is not firing on /metrics: $(grep alarm "$T/m1")"
check 'grep -Eq "^driftbench shadow: alarm raised: exact at pair [0-9]+ \([0-9]+ flips in [0-9]+ pairs" "$T/a1.err"' \
  "no alarm line on stderr: $(cat "$T/a1.err")"
check '[ "$(grep -c "alarm raised: exact" "$T/a1.err")" = 1 ]' "the alarm was logged more than once: $(cat "$T/a1.err")"
# the math class is judged too (the final number of each answer)
math1=$(metric "$T/m1" 'driftbench_traffic_flips_total{class="math"}')
check '[ -n "$math1" ]' "no math class: $(grep flips_total "$T/m1")"

# ---- 2. kill -9 and restart: the judge resumes from the store ----
kill -9 "$SHPID"
wait "$SHPID" 2> /dev/null
start_shadow a2 --primary "$PRIM" --candidate "$DRIFT" --db "$T/a.db" --name math --budget exact=1
check 'grep -q "the judge resumed from $N stored pair" "$T/a2.err"' "no resume line: $(cat "$T/a2.err")"
metrics $SP "$T/m2"
f2=$(metric "$T/m2" 'driftbench_traffic_flips_total{class="exact"}')
fire2=$(metric "$T/m2" 'driftbench_alarm_firing{class="exact"}')
check '[ "$(metric "$T/m2" driftbench_traffic_pairs_total)" = $N ] && [ "$f2" = "$f1" ] && [ "$fire2" = 1 ]' \
  "counts after the restart: $(grep -E '^driftbench_(traffic|alarm_firing)' "$T/m2") before: flips $f1"
send $SP $((N + 1)) $((N + 5)) || fail "requests after the restart failed"
check 'wait_pairs $SP $((N + 5)) 60' "the new pairs did not complete"
metrics $SP "$T/m3"
f3=$(metric "$T/m3" 'driftbench_traffic_flips_total{class="exact"}')
check '[ "$(metric "$T/m3" driftbench_traffic_pairs_total)" = $((N + 5)) ] && [ "${f3:-0}" -ge "$f1" ]' \
  "counts do not continue: $(grep '^driftbench_traffic' "$T/m3")"
stop_shadow
check '[ $? -eq 0 ]' "clean stop after the restart: $(tail -2 "$T/a2.err")"

# drift over time of the store, no proxy: the same counts and the alarm, by window
"$D" shadow --db "$T/a.db" --report --budget exact=1 --window 60 > "$T/r.txt" 2> "$T/r.err"
check '[ $? -eq 0 ]' "shadow --report: $(cat "$T/r.err")"
check 'grep -Eq "^pairs $((N + 5)): $((N + 5)) compared" "$T/r.txt" && grep -Eq "^exact +$f3 +$((N + 5)) +0 +ALARM raised at pair [0-9]+" "$T/r.txt" && grep -q "^drift over time (windows of 60 s" "$T/r.txt"' \
  "the report: $(cat "$T/r.txt")"
"$D" shadow --db "$T/a.db" --report --budget exact=1 --format json > "$T/r.json"
check 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"schema_version\"] == 1 and list(d)[0] == \"schema_version\" and d[\"judge\"][\"driftbench_traffic_stream\"] == 1" "$T/r.json"' "report json: $(head -c 300 "$T/r.json")"

# ---- 3. an identical candidate: silence ----
start_shadow b1 --primary "$PRIM" --candidate "$PRIM" --db "$T/b.db" --name math --budget exact=1
send $SP 1 $N || fail "requests through the proxy (identical) failed"
check 'wait_pairs $SP $N 60' "not every pair completed (identical)"
metrics $SP "$T/mb"
check 'prom_check "$T/mb"' "/metrics (identical) does not parse"
fb=$(metric "$T/mb" 'driftbench_traffic_flips_total{class="exact"}')
fireb=$(metric "$T/mb" 'driftbench_alarm_firing{class="exact"}')
check '[ "$fb" = 0 ] && [ "$fireb" = 0 ] && [ "$(metric "$T/mb" driftbench_traffic_compared_total)" = $N ]' \
  "an identical candidate drifted: $(grep -E '^driftbench_(traffic|alarm)' "$T/mb")"
check '! grep -q "alarm raised" "$T/b1.err"' "an alarm on an identical candidate: $(cat "$T/b1.err")"
stop_shadow

# ---- 4. hashes: no plaintext in the store ----
start_shadow h1 --primary "$PRIM" --candidate "$DRIFT" --db "$T/h.db" --name math --store-texts hashes --redact emails
check 'grep -q "hash" "$T/h1.err" && grep -q "cannot be mirrored" "$T/h1.err"' "the startup line does not say hashes: $(cat "$T/h1.err")"
send $SP 1 5 || fail "requests through the proxy (hashes) failed"
check 'wait_pairs $SP 5 60' "not every pair completed (hashes)"
metrics $SP "$T/mh"
check '[ "$(metric "$T/mh" driftbench_traffic_compared_total)" = 5 ]' "the judge did not count live with hashes: $(grep '^driftbench_traffic' "$T/mh")"
kill -9 "$SHPID"
wait "$SHPID" 2> /dev/null
check '[ "$(sql "$T/h.db" "select count(*) from prompts where input like '"'sha256:%'"'")" = 5 ] && [ "$(sql "$T/h.db" "select count(*) from responses where text like '"'sha256:%'"'")" = 10 ]' \
  "hashed rows: $(sql "$T/h.db" "select substr(input,1,80) from prompts limit 2")"
# no prompt text nor any answer's content anywhere in the file (or its WAL)
python3 - "$T/math.jsonl" "$T/h.db" > "$T/plain" <<'EOF'
import glob, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][:5]
blob = b"".join(open(p, "rb").read() for p in glob.glob(sys.argv[2] + "*"))
for r in rows:
    inp = r["input"]
    t = json.loads(inp)["messages"][-1]["content"] if inp.lstrip().startswith("{") else inp
    for piece in (t[:40], json.dumps(t)[1:41]):
        if len(piece) >= 20 and piece.encode() in blob:
            print("plaintext prompt:", piece)
EOF
check '[ ! -s "$T/plain" ]' "$(cat "$T/plain")"
check '! sqlite3 "$T/h.db" "select text from responses" | grep -q "\"content\""' "an answer stored as a message"
start_shadow h2 --primary "$PRIM" --candidate "$DRIFT" --db "$T/h.db" --name math --store-texts hashes
check 'grep -q "stored pair(s) could not be judged again (stored as hashes" "$T/h2.err"' "the restart with hashes does not say the judge starts over: $(cat "$T/h2.err")"
"$D" shadow --db "$T/h.db" --report > "$T/rh.txt" 2>&1
check 'grep -q "5 stored as hashes, not judged" "$T/rh.txt"' "the report over hashes: $(cat "$T/rh.txt")"
stop_shadow
finish
