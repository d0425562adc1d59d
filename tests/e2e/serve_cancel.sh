#!/usr/bin/env bash
# serve_cancel.sh - `driftbench serve` cancels generation nobody will wait
# for. The long request (models/qwen2-7m.gguf, 16 sequences of up to 4000
# sampled tokens) takes well over 30 s on any CPU; each check passes only
# when it is cut short:
# 1. drain deadline: SIGTERM with --drain-timeout 2 while it decodes: the
#    process exits 0 within 15 s, the client gets 503 "shutting_down", and
#    the final statistics count it as cancelled at the deadline;
# 2. a client that gives up (curl -m 2 closes its connection) has its
#    generation cancelled: a later request is answered within 10 s instead
#    of queueing behind it, and the statistics count it (client gone);
# 3. a second SIGTERM during the drain exits at once (within 5 s, status 143).
. "$(dirname "$0")/lib.sh"
dir=$T
spid=
cpid=
on_exit() { kill -9 $spid $cpid 2>/dev/null; }
model="$S/models/qwen2-7m.gguf"
long='{"prompt":"Once upon a time","max_tokens":4000,"n":16,"temperature":0.7,"seed":7}'

start() { # start [serve flags]: sets spid and base
    : >"$dir/out"
    "$D" serve --model "$model" --port 0 --threads 1 --lifetime 600 "$@" >"$dir/out" 2>"$dir/err" &
    spid=$!
    wait_port_file "$dir/out" 200 || { cat "$dir/err"; fail "no PORT line"; }
    port=$PORT
    base="http://127.0.0.1:$port"
}

# post.py PORT BODY OUT SENT: POST /v1/completions; SENT appears once the
# request is written (the server reads it at once); OUT gets the status
# code, then the body
cat >"$dir/post.py" <<'PY'
import socket, sys
port, body, out, sent = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
open(sent, "w").write("sent\n")
data = b""
while True:
    try:
        d = s.recv(65536)
    except OSError:
        break
    if not d:
        break
    data += d
head, _, rest = data.partition(b"\r\n\r\n")
open(out, "wb").write((head.split(b" ")[1] if head else b"000") + b"\n" + rest)
PY
post_long() { # in the background (cpid); returns once the request is written
    rm -f "$dir/sent"
    python3 "$dir/post.py" "$port" "$long" "$dir/long" "$dir/sent" &
    cpid=$!
    for _ in $(seq 200); do [ -f "$dir/sent" ] && break; sleep 0.05; done
    [ -f "$dir/sent" ] || { echo "the long request was not sent"; exit 1; }
    sleep 0.5 # decoding
}

elapsed() { python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"; }

# waits for serve to exit (at most $1 s); sets rc and secs (from $t0)
wait_exit() {
    for _ in $(seq $(($1 * 20))); do kill -0 $spid 2>/dev/null || break; sleep 0.05; done
    if kill -0 $spid 2>/dev/null; then
        echo "serve still running $1 s after the signal"
        cat "$dir/err"
        exit 1
    fi
    rc=0
    wait $spid || rc=$?
    secs=$(elapsed "$t0" "$(now)")
    spid=
}

# ---- 1. drain deadline ----
start --drain-timeout 2
post_long
t0=$(now)
kill -TERM $spid || fail "serve died before SIGTERM"
wait_exit 15
echo "drain deadline 2 s: exited $rc after $secs s"
[ "$rc" = 0 ] || { echo "serve exited $rc"; cat "$dir/err"; exit 1; }
wait $cpid || true
cpid=
[ "$(head -1 "$dir/long")" = 503 ] && grep -q '"code":"shutting_down"' "$dir/long" ||
    { echo "the cut request got: $(head -c 300 "$dir/long")"; exit 1; }
grep -q "drain: 0 answered, 1 cancelled at the deadline" "$dir/err" || { echo "not counted"; cat "$dir/err"; exit 1; }

# ---- 2. a client that leaves ----
start
rc=0
curl -s -m 2 -o /dev/null "$base/v1/completions" -d "$long" || rc=$?
[ "$rc" = 28 ] || { echo "the long request ended with curl exit $rc, expected 28 (client timeout)"; exit 1; }
t0=$(now)
code=$(curl -s -m 10 -o "$dir/short" -w '%{http_code}' "$base/v1/completions" \
    -d '{"prompt":"Once","max_tokens":4,"temperature":0}') || true
echo "after the client left: next request got $code in $(elapsed "$t0" "$(now)") s"
[ "$code" = 200 ] || { echo "the next request was not answered within 10 s"; exit 1; }
t0=$(now)
kill -TERM $spid || fail "serve died before SIGTERM"
wait_exit 15
[ "$rc" = 0 ] || { echo "serve exited $rc"; cat "$dir/err"; exit 1; }
grep -q "stopped: 2 requests, 1 answered, .* 1 cancelled (client gone)" "$dir/err" ||
    { echo "the departed client is not counted"; cat "$dir/err"; exit 1; }

# ---- 3. second SIGTERM ----
start
post_long
kill -TERM $spid || fail "serve died before SIGTERM"
sleep 1
kill -0 $spid 2>/dev/null || { echo "serve did not drain (exited on the first signal)"; cat "$dir/err"; exit 1; }
t0=$(now)
kill -TERM $spid || fail "serve died before the second SIGTERM"
wait_exit 5
echo "second SIGTERM: exited $rc after $secs s"
[ "$rc" = 143 ] || { echo "expected exit status 143 (128 + SIGTERM), got $rc"; cat "$dir/err"; exit 1; }
grep -q "second signal, exiting now" "$dir/err" || fail "no 'second signal, exiting now': $(cat "$dir/err")"
wait $cpid 2>/dev/null || true
cpid=
echo "serve_cancel: ok"
