#!/usr/bin/env bash
# serve_drain.sh - `driftbench serve` as a process: ephemeral port printed as
# "PORT n", answers curl, and on SIGTERM finishes the request in flight
# (128 sequences of models/qwen2-7m.gguf: seconds of work, written to the
# server before the signal) before exiting 0; the final statistics, taken
# after the drain, count it (answered, and answered during the drain);
# afterwards the port is closed.
. "$(dirname "$0")/lib.sh"
dir=$T
# a drain deadline far above the work (sanitizer builds decode slowly)
"$D" serve --model "$S/models/qwen2-7m.gguf" --port 0 --threads 1 \
    --lifetime 900 --drain-timeout 600 >"$dir/out" 2>"$dir/err" &
spid=$!
PIDS+=("$spid")
wait_port_file "$dir/out" || { cat "$dir/err"; fail "no PORT line"; }
port=$PORT
grep -q "listening on http://127.0.0.1:$port" "$dir/err" || fail "no 'listening on' line: $(cat "$dir/err")"
base="http://127.0.0.1:$port"
[ "$(curl -s "$base/health")" = '{"status":"ok"}' ] || fail "/health"
code=$(curl -s -o "$dir/bad" -w '%{http_code}' "$base/v1/completions" -d '{"prompt":"x","max_tokens":-3}') || fail "curl exit $?"
[ "$code" = 400 ] && grep -q '"param":"max_tokens"' "$dir/bad" || fail "max_tokens -3: $code $(cat "$dir/bad")"
# a large request, then SIGTERM while it runs. post.py says when the request
# is written: the server reads it at once (a connection still in the
# kernel's backlog when the listener closes would be refused, as anywhere)
cat >"$dir/post.py" <<'PY'
# post.py PORT BODY OUT SENT: POST /v1/completions; SENT appears once the
# request is written; OUT gets the status line's code, then the body
import socket, sys
port, body, out, sent = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
open(sent, "w").write("sent\n")
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
head, _, rest = data.partition(b"\r\n\r\n")
open(out, "wb").write((head.split(b" ")[1] if head else b"000") + b"\n" + rest)
PY
prompts=$(python3 -c 'import json; print(json.dumps(["drain %d" % i for i in range(32)]))')
python3 "$dir/post.py" "$port" "{\"prompt\":$prompts,\"n\":4,\"max_tokens\":32,\"temperature\":0.7}" \
    "$dir/big_reply" "$dir/sent" &
cpid=$!
for _ in $(seq 200); do [ -f "$dir/sent" ] && break; sleep 0.05; done
[ -f "$dir/sent" ] || { echo "the request was not sent"; exit 1; }
sleep 0.3
kill -TERM $spid || fail "serve died before SIGTERM"
wait $cpid || { echo "the client failed: $?"; cat "$dir/err"; exit 1; }
rc=0; wait $spid || rc=$?
[ "$rc" = 0 ] || { echo "serve exited $rc"; cat "$dir/err"; exit 1; }
head -1 "$dir/big_reply" >"$dir/big_code"
tail -n +2 "$dir/big_reply" >"$dir/big"
[ "$(cat "$dir/big_code")" = 200 ] || { echo "in-flight request got $(cat "$dir/big_code")"; cat "$dir/big"; exit 1; }
n=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["choices"]))' "$dir/big")
[ "$n" = 128 ] || { echo "in-flight request has $n choices"; exit 1; }
grep -q "stopping (draining" "$dir/err" || fail "no 'stopping (draining' line: $(cat "$dir/err")"
# the statistics come after the drain: the big request is answered, during it
grep -q "stopped: 3 requests, 2 answered, 1 refused (4xx), 0 overloaded (503)" "$dir/err" &&
    grep -q "drain: 1 answered, 0 cancelled at the deadline" "$dir/err" ||
    { echo "the final statistics miss the request answered during the drain"; cat "$dir/err"; exit 1; }
if curl -s -m 2 "$base/health" >/dev/null; then echo "still listening after exit"; exit 1; fi
echo "serve_drain: ok (128 sequences answered across SIGTERM, counted in the final statistics)"
