#!/usr/bin/env bash
# shadow_bench.sh - the shadow proxy's added latency (issue 39; the numbers
# in BENCHMARKS.md): a local fake server as the primary, another as the
# candidate, `driftbench shadow` between clients and the primary (every
# request mirrored, --sample 1), and bench_shadow_bench timing 64 concurrent
# clients straight to the primary and through the proxy, in alternating
# rounds of one run.
#
#   [SAMPLE=1] bench/shadow_bench.sh [BUILD_DIR=build] [CLIENTS=64] [REQUESTS=20] [ROUNDS=3]
#   (SAMPLE=0: nothing mirrored, the relay alone; QUEUE=N: the proxy's --queue, default 4096)
set -u
B=${1:-build}
CLIENTS=${2:-64} REQUESTS=${3:-20} ROUNDS=${4:-3}
T=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
port_of() { # FILE -> the "PORT n" a server printed
  local _
  for _ in $(seq 200); do
    awk '/^PORT/{print $2; f=1} END {exit !f}' "$1" 2> /dev/null && return 0
    sleep 0.05
  done
  echo "no PORT in $1" >&2
  exit 2
}
printf 'default | echo\n' > "$T/script"
"$B/fakeserver" --script "$T/script" --lifetime 900 --quiet > "$T/p.out" 2> /dev/null &
pids+=($!)
"$B/fakeserver" --script "$T/script" --lifetime 900 --quiet > "$T/c.out" 2> /dev/null &
pids+=($!)
PP=$(port_of "$T/p.out")
PC=$(port_of "$T/c.out")
"$B/driftbench" shadow --primary "http://127.0.0.1:$PP/v1?model=fake&api=chat" \
  --candidate "http://127.0.0.1:$PC/v1?model=fake&api=chat" --db "$T/shadow.db" --listen 127.0.0.1:0 \
  --queue "${QUEUE:-4096}" --sample "${SAMPLE:-1}" > "$T/s.out" 2> "$T/s.err" &
pids+=($!)
PS=$(port_of "$T/s.out")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
"$B/bench_shadow_bench" "http://127.0.0.1:$PP" "http://127.0.0.1:$PS" "$CLIENTS" "$REQUESTS" "$ROUNDS"
rc=$?
curl -s "http://127.0.0.1:$PS/metrics" | grep -E '^driftbench_shadow_(requests|mirrored|dropped|pairs)_total|added_latency_seconds_(sum|count)'
exit $rc
