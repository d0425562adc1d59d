#!/usr/bin/env bash
# serve_load.sh - `driftbench serve` (a process) under load from another
# process (loadgen: 32 concurrent clients, every third request invalid):
# every valid request answered, every invalid one refused with its 4xx, no
# crash, resident memory steady across rounds, clean exit on SIGTERM; the
# default connection limits neither evict nor refuse any of its connections.
. "$(dirname "$0")/lib.sh"
dir=$T
# under AddressSanitizer freed memory sits in a quarantine (256 MiB by default),
# which would read as growth: keep it small so the RSS check stays meaningful
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4:thread_local_quarantine_size_kb=64"
"$D" serve --model "$S/tests/data/models/tiny-qwen2-f16.gguf" --port 0 --threads 1 \
    --max-batch 8 --lifetime 120 >"$dir/out" 2>"$dir/err" &
spid=$!
PIDS+=("$spid")
wait_port_file "$dir/out" || { cat "$dir/err"; fail "no PORT line"; }
port=$PORT
rss() { awk '/^VmRSS:/{print $2}' "/proc/$spid/status"; }
# warm-up: three rounds, so that the allocator's caches (ASan's per-thread
# ones grow for several rounds) have settled before the measured rounds
for _ in 1 2 3; do "$B/loadgen" "http://127.0.0.1:$port" 32 3 3 4 >/dev/null || fail "warm-up: loadgen exit $?"; done
before=$(rss) || fail "no VmRSS of serve"
for round in 1 2 3; do
    line=$("$B/loadgen" "http://127.0.0.1:$port" 32 3 3 4) || fail "round $round: loadgen exit $? ($line)"
    echo "round $round: $line"
    case "$line" in "ok=64 refused=32 unexpected=0 overloaded=0 "*) ;; *) echo "unexpected outcome"; exit 1 ;; esac
done
after=$(rss) || fail "no VmRSS of serve after the rounds"
echo "RSS ${before} kB -> ${after} kB"
[ $((after - before)) -lt 8192 ] || { echo "RSS grew by $((after - before)) kB"; exit 1; }
kill -0 $spid || fail "serve died under load"
kill -TERM $spid || fail "serve died before SIGTERM"
rc=0; wait $spid || rc=$?
[ "$rc" = 0 ] || { echo "serve exited $rc"; cat "$dir/err"; exit 1; }
grep -q "refused (4xx)" "$dir/err" || fail "no 'refused (4xx)' statistics: $(cat "$dir/err")"
# the default connection limits (64 per address) leave 32 clients of one address alone
grep -q "connections: 0 timed out, 0 evicted, 0 refused" "$dir/err" || { echo "connections cut"; cat "$dir/err"; exit 1; }
echo "serve_load: ok"
