#!/usr/bin/env bash
# serve_limits.sh - `driftbench serve` (default limits: 128 connections, 64
# per address, 10 s request deadline) against slow and abusive clients:
# 1. 200 connections from 127.0.0.1 held open (150 idle, 50 sending their
#    headers one byte at a time) do not lock anyone out: /health from the
#    same address (the oldest idle connection is evicted) and from another
#    (127.0.0.2) each answer within 3 s, and so does a completion. Without
#    the limits the listener stops accepting at 128 and /health hangs.
# 2. With --request-timeout 2, a client trickling its headers (a byte every
#    0.2 s, so an inactivity timer never fires) and an idle one are both
#    closed after about 2 s (accepted: 1-8 s); the final statistics count the
#    timed-out and evicted connections.
. "$(dirname "$0")/lib.sh"
dir=$T
spid=
apid=
on_exit() { kill -9 $spid $apid 2>/dev/null; }
model="$S/tests/data/models/tiny-qwen2-f16.gguf"

start() { # start [serve flags]: sets spid and port
    : >"$dir/out"
    "$D" serve --model "$model" --port 0 --threads 1 --lifetime 300 "$@" >"$dir/out" 2>"$dir/err" &
    spid=$!
    wait_port_file "$dir/out" 200 || { cat "$dir/err"; fail "no PORT line"; }
    port=$PORT
}

stop() { # SIGTERM, expect exit 0
    kill -TERM $spid || fail "serve died before SIGTERM"
    local rc=0
    wait $spid || rc=$?
    [ "$rc" = 0 ] || { echo "serve exited $rc"; cat "$dir/err"; exit 1; }
    spid=
}

# ---- 1. connection exhaustion from one address ----
cat >"$dir/hold.py" <<'EOF'
# hold.py PORT NIDLE NSLOW SECONDS READY: hold idle + header-trickling connections
import socket, sys, time
port, nidle, nslow, secs, ready = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
held, slow = [], []
for _ in range(nidle):
    held.append(socket.create_connection(("127.0.0.1", port)))
for _ in range(nslow):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    slow.append(s)
open(ready, "w").write("ready\n")
t0 = time.time()
while time.time() - t0 < secs:
    for s in slow:
        try:
            s.send(b"a")
        except OSError:
            pass
    time.sleep(0.2)
EOF
start
python3 "$dir/hold.py" "$port" 150 50 60 "$dir/ready" &
apid=$!
for _ in $(seq 300); do [ -f "$dir/ready" ] && break; sleep 0.05; done
[ -f "$dir/ready" ] || { echo "the holder did not connect"; exit 1; }
sleep 0.5 # let the server accept the backlog
base="http://127.0.0.1:$port"
for src in 127.0.0.1 127.0.0.2; do
    rc=0
    out=$(curl -s -m 3 --interface $src -w ' %{time_total}' "$base/health") || rc=$?
    [ "$rc" = 0 ] || { echo "/health from $src with 200 connections held: curl exit $rc (28 = no answer within 3 s)"; exit 1; }
    echo "/health from $src with 200 connections held: $out s"
    case "$out" in '{"status":"ok"} '*) ;; *) echo "unexpected /health reply"; exit 1 ;; esac
done
code=$(curl -s -m 3 -o "$dir/gen" -w '%{http_code}' "$base/v1/completions" -d '{"prompt":"x","max_tokens":2}') || true
[ "$code" = 200 ] || { echo "completion with 200 connections held: $code"; cat "$dir/gen"; exit 1; }
kill $apid 2>/dev/null || true
wait $apid 2>/dev/null || true
apid=
stop
grep -q "listening on http://127.0.0.1:$port (.*connections: 128, 64 per client, request timeout 10 s)" "$dir/err" ||
    fail "the default limits are not said: $(cat "$dir/err")"
evicted=$(sed -n 's/.*connections: [0-9]* timed out, \([0-9]*\) evicted.*/\1/p' "$dir/err")
echo "evicted: $evicted"
[ -n "$evicted" ] && [ "$evicted" -ge 100 ] || { echo "expected >= 100 evictions"; cat "$dir/err"; exit 1; }

# ---- 2. request deadline ----
cat >"$dir/slow.py" <<'EOF'
# slow.py PORT: seconds until the server closes a header-trickling and an idle connection
import socket, sys, time
port = int(sys.argv[1])
trickle = socket.create_connection(("127.0.0.1", port))
idle = socket.create_connection(("127.0.0.1", port))
t0 = time.time()
trickle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
for c in (trickle, idle):
    c.settimeout(0.01)
closed = [None, None]
while time.time() - t0 < 20 and None in closed:
    for k, c in enumerate((trickle, idle)):
        if closed[k] is not None:
            continue
        try:
            if k == 0:
                c.send(b"a")
            if not c.recv(4096):
                closed[k] = time.time() - t0
        except socket.timeout:
            pass
        except OSError:
            closed[k] = time.time() - t0
    time.sleep(0.2)
print(" ".join("%.2f" % x if x is not None else "never" for x in closed))
EOF
start --request-timeout 2
read -r t_trickle t_idle < <(python3 "$dir/slow.py" "$port")
echo "request timeout 2 s: trickling client closed after $t_trickle s, idle one after $t_idle s"
for t in "$t_trickle" "$t_idle"; do
    [ "$t" != never ] || { echo "a slow client was never closed (20 s)"; exit 1; }
    python3 -c 'import sys; t = float(sys.argv[1]); sys.exit(0 if 1.0 <= t <= 8.0 else 1)' "$t" ||
        { echo "closed after $t s, expected 1-8 s"; exit 1; }
done
[ "$(curl -s -m 3 "http://127.0.0.1:$port/health")" = '{"status":"ok"}' ] || fail "/health after the slow clients"
stop
# Both slow clients were closed in time (checked above); the count is at
# least the trickling one: on a loaded machine libmicrohttpd's own idle
# timeout (the backstop) may close the idle one before the deadline thread
# counts it.
grep -Eq "connections: [12] timed out" "$dir/err" || { echo "timed-out connections not counted"; cat "$dir/err"; exit 1; }
echo "serve_limits: ok"
