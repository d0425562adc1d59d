#!/usr/bin/env bash
# stack_detect.sh - an HTTP run records what its server says it is
# (engine/stack_probe.c, eng_http_detect):
# 1. against `driftbench serve`: the run's config has framework
#    "driftbench-embedded/..." (the served profile's level, as an embedded
#    run records it), the precision and hardware of the served profile,
#    framework_version, server_model and detected_from "/v1/driftbench/info";
#    a run with --config framework=X,precision=Y keeps the user's levels;
#    a target with detect=0 records "unknown" as before.
# 2. against a fake vLLM (python http.server: GET /version {"version":...},
#    GET /v1/models owned_by "vllm", POST /v1/completions): framework "vllm",
#    framework_version from /version, detected_from "/version,/models";
#    hardware (vLLM does not say) stays "unknown".
# 3. against a server whose introspection replies are hostile (junk, huge,
#    wrong types) the run succeeds and records "unknown"; resuming it on the
#    fake vLLM is the same run (detected members are not compared), while a
#    new --config member still refuses the resume.
. "$(dirname "$0")/lib.sh"
spid=
on_exit() { [ -n "$spid" ] && kill -9 $spid 2>/dev/null; }
model="$S/tests/data/models/tiny-qwen2-f16.gguf"
[ -f "$model" ] || skip_all "no $model"
printf '{"prompt":"1+1=","answer":"2"}\n{"prompt":"2+2=","answer":"4"}\n' > "$T/s.jsonl"
DB=$T/r.db
cfg() { sqlite3 "$DB" "select config from runs where label='$1'"; }
jget() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], "<none>"))' "$1" "$2"; }

# ---- 1. driftbench serve ----
"$D" serve --model "$model" --port 0 --threads 1 --lifetime 120 > "$T/sout" 2> "$T/serr" &
spid=$!
wait_port_file "$T/sout" 200 || { cat "$T/serr"; fail "serve printed no PORT"; }
U="http://127.0.0.1:$PORT/v1?model=tiny-qwen2-f16"
info=$(curl -s "http://127.0.0.1:$PORT/v1/driftbench/info")
check '[ "$(jget "$info" model)" = tiny-qwen2-f16 ]' "info names the served model: $info"
"$D" run -q --db "$DB" --label s1 --target "$U" --suite "$T/s.jsonl" --max-tokens 4 2> "$T/e1" || { cat "$T/e1"; fail "run s1"; }
c=$(cfg s1)
check '[[ "$(jget "$c" framework)" == driftbench* ]]' "serve run: framework driftbench*: $c"
check '[ "$(jget "$c" framework)" = "$(jget "$info" framework)" ]' "serve run: framework as /v1/driftbench/info says"
check '[ "$(jget "$c" precision)" = "$(jget "$info" precision)" ] && [ "$(jget "$c" precision)" != unknown ]' "serve run: precision: $c"
check '[ "$(jget "$c" hardware)" = "$(jget "$info" hardware)" ] && [ "$(jget "$c" hardware)" != unknown ]' "serve run: hardware: $c"
check '[ "$(jget "$c" detected_from)" = /v1/driftbench/info ]' "serve run: detected_from: $c"
check '[ "$(jget "$c" framework_version)" != "<none>" ]' "serve run: framework_version: $c"
"$D" run -q --db "$DB" --label s2 --target "$U" --suite "$T/s.jsonl" --max-tokens 4 --config framework=mine,precision=p8 2> "$T/e2" || { cat "$T/e2"; fail "run s2"; }
c=$(cfg s2)
check '[ "$(jget "$c" framework)" = mine ] && [ "$(jget "$c" precision)" = p8 ]' "the user's --config wins: $c"
check '[ "$(jget "$c" hardware)" = "$(jget "$info" hardware)" ]' "what the user did not set is still detected: $c"
"$D" run -q --db "$DB" --label s3 --target "$U&detect=0" --suite "$T/s.jsonl" --max-tokens 4 2> "$T/e3" || { cat "$T/e3"; fail "run s3"; }
c=$(cfg s3)
check '[ "$(jget "$c" framework)" = unknown ] && [ "$(jget "$c" detected_from)" = "<none>" ]' "detect=0: nothing asked: $c"
kill -TERM $spid; wait $spid 2>/dev/null; spid=

# ---- 2./3. a fake vLLM, then a hostile one ----
cat > "$T/fake.py" <<'PY'
# fake.py MODE: vllm (a vLLM-shaped /version and /v1/models) or hostile
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
mode = sys.argv[1]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def send(self, code, body, ctype="application/json"):
        b = body.encode() if isinstance(body, str) else body
        self.send_response(code); self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        if mode == "vllm":
            if self.path == "/version": return self.send(200, json.dumps({"version": "0.6.3.post1"}))
            if self.path == "/v1/models":
                return self.send(200, json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm", "root": "org/m"}]}))
            return self.send(404, '{"detail":"Not Found"}')
        # hostile: every probe gets something wrong
        junk = {"/v1/driftbench/info": '{"framework": "driftbench\\u0000x", "precision": 7, "hardware": ["x"]}',
                "/get_server_info": '{"model_path": "' + "A" * 5000 + '"}',
                "/props": '{"build_info": "b\\u0001ad", "default_generation_settings": 3',
                "/info": '{"model_id": null, "model_dtype": "f16"}',
                "/version": '{"version": "1", "x": 2}',
                "/v1/models": '{"data": [' + "[]," * 100000 + '{}]}'}
        return self.send(200, junk.get(self.path, "not json"))
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0)); self.rfile.read(n)
        self.send(200, json.dumps({"id": "c", "object": "text_completion", "model": "m",
            "choices": [{"index": 0, "text": " 2", "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}))
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("PORT", s.server_address[1], flush=True)
s.serve_forever()
PY
for mode in vllm hostile; do
  python3 "$T/fake.py" $mode > "$T/f.$mode" 2>&1 &
  PIDS+=($!)
  wait_port_file "$T/f.$mode" 200 || fail "fake $mode did not start"
  eval "port_$mode=$PORT"
  "$D" run -q --db "$DB" --label $mode --target "http://127.0.0.1:$PORT/v1?model=m" --suite "$T/s.jsonl" --max-tokens 4 2> "$T/e.$mode" || { cat "$T/e.$mode"; bad "run $mode failed"; }
done
c=$(cfg vllm)
check '[ "$(jget "$c" framework)" = vllm ]' "fake vLLM: framework vllm: $c"
check '[ "$(jget "$c" framework_version)" = 0.6.3.post1 ]' "fake vLLM: version from /version: $c"
check '[ "$(jget "$c" detected_from)" = "/version,/models" ]' "fake vLLM: detected_from: $c"
check '[ "$(jget "$c" hardware)" = unknown ] && [ "$(jget "$c" precision)" = unknown ]' "fake vLLM: what it does not say stays unknown: $c"
check '[ "$(jget "$c" model)" = m ]' "fake vLLM: the spec's model kept: $c"
c=$(cfg hostile)
check '[ "$(jget "$c" framework)" = unknown ] && [ "$(jget "$c" precision)" = unknown ] && [ "$(jget "$c" detected_from)" = "<none>" ]' "hostile replies: nothing recorded: $c"
# a resume whose server now says something else (the run moved to the fake
# vLLM) is the same run: what a server says of itself is not compared, and
# the stored config stays
"$D" run -q --db "$DB" --label hostile --target "http://127.0.0.1:$port_vllm/v1?model=m" --suite "$T/s.jsonl" --max-tokens 4 2> "$T/e.resume"; rc=$?
check '[ $rc = 0 ]' "resume on a server that says more: $(cat "$T/e.resume")"
check '[ "$(jget "$(cfg hostile)" framework)" = unknown ]' "resume: the stored config stays"
"$D" run -q --db "$DB" --label hostile --target "http://127.0.0.1:$port_vllm/v1?model=m" --suite "$T/s.jsonl" --max-tokens 4 --config batch=2 2> "$T/e.resume2"; rc=$?
check '[ $rc != 0 ] && grep -q "other settings" "$T/e.resume2"' "a --config the run did not have still refuses the resume: $(cat "$T/e.resume2")"
finish
