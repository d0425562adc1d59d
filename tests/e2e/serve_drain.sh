#!/bin/bash
# serve_drain.sh - `driftbench serve` as a process: ephemeral port printed as
# "PORT n", answers curl, and on SIGTERM finishes the request in flight
# (128 sequences) before exiting 0; afterwards the port is closed.
set -euo pipefail
: "${DRIFTBENCH:?}" "${DRIFT_SOURCE:?}"
dir=$(mktemp -d /tmp/drift_e2e_serve.XXXXXX)
trap 'kill -9 $spid 2>/dev/null || true; rm -rf "$dir"' EXIT
"$DRIFTBENCH" serve --model "$DRIFT_SOURCE/tests/data/models/tiny-qwen2-f16.gguf" --port 0 --threads 1 \
    --lifetime 120 >"$dir/out" 2>"$dir/err" &
spid=$!
for _ in $(seq 100); do grep -q '^PORT ' "$dir/out" && break; sleep 0.05; done
port=$(awk '/^PORT /{print $2}' "$dir/out")
[ -n "$port" ] || { echo "no PORT line"; cat "$dir/err"; exit 1; }
grep -q "listening on http://127.0.0.1:$port" "$dir/err"
base="http://127.0.0.1:$port"
[ "$(curl -s "$base/health")" = '{"status":"ok"}' ]
code=$(curl -s -o "$dir/bad" -w '%{http_code}' "$base/v1/completions" -d '{"prompt":"x","max_tokens":-3}')
[ "$code" = 400 ] && grep -q '"param":"max_tokens"' "$dir/bad"
# a large request, then SIGTERM while it runs
prompts=$(python3 -c 'import json; print(json.dumps(["drain %d" % i for i in range(32)]))')
curl -s -o "$dir/big" -w '%{http_code}' "$base/v1/completions" \
    -d "{\"prompt\":$prompts,\"n\":4,\"max_tokens\":32,\"temperature\":0.7}" >"$dir/big_code" &
cpid=$!
# the request must have reached the server before SIGTERM (a connection still
# in the kernel's backlog when the listener closes is refused, as anywhere)
sleep 1
kill -TERM $spid
wait $cpid || { echo "curl failed: $?"; cat "$dir/err"; exit 1; }
rc=0; wait $spid || rc=$?
[ "$rc" = 0 ] || { echo "serve exited $rc"; cat "$dir/err"; exit 1; }
[ "$(cat "$dir/big_code")" = 200 ] || { echo "in-flight request got $(cat "$dir/big_code")"; cat "$dir/big"; exit 1; }
n=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["choices"]))' "$dir/big")
[ "$n" = 128 ] || { echo "in-flight request has $n choices"; exit 1; }
grep -q "stopping (draining" "$dir/err"
if curl -s -m 2 "$base/health" >/dev/null; then echo "still listening after exit"; exit 1; fi
echo "serve_drain: ok (128 sequences answered across SIGTERM)"
