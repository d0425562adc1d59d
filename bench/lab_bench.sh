#!/usr/bin/env bash
# lab_bench.sh - wall time, CPU time and speed of `driftbench lab --quick`
# on 2 cores (taskset), from a fresh output directory, with what it found:
# the lab's own closing line (answers/s, tokens/s, the estimate beside the
# measured time), answers cut by the token limit per workload, flips per
# workload summed over the flip table, and the stochastic leg against its
# null. The machine's load is printed before and after: on a shared machine
# wall time moves with it, CPU time (user + sys) much less.
# usage: bench/lab_bench.sh [BUILD_DIR] [extra lab flags...]   (default build)
set -euo pipefail
build=${1:-build}
shift || true
cli="$build/driftbench"
[ -x "$cli" ] || { echo "no $cli: build first"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pin=""
command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ] && pin="taskset -c 0,1"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores visible, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: $pin $cli lab --quick $*"
/usr/bin/time -f '%e %U %S' -o "$out/time" $pin "$cli" lab --quick --out "$out/lab" "$@" >"$out/stdout" 2>"$out/stderr" || {
    echo "lab failed:"; tail -20 "$out/stderr"; exit 1; }
read -r wall user sys <"$out/time"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E '^lab \(quick\)|^size: |^estimate: |^quick: |^lab: |^scoring: ' "$out/stdout"
printf 'lab --quick wall (outside): %.1f s; CPU %.1f s user + %.1f s sys (%.2f cores busy on average)\n' \
    "$wall" "$user" "$sys" "$(echo "($user + $sys) / $wall" | bc -l)"
echo "answers cut by the token limit:"
sed 's/^/  /' "$out/lab/cuts.txt"
echo "flips per workload (summed over the flip table's rows):"
awk -F, 'NR > 1 { f[$6] += $8; n[$6] += $9 } END { for (w in f) printf "  %s: %d flips in %d pairs (%.2f%%)\n", w, f[w], n[w], n[w] ? 100 * f[w] / n[w] : 0 }' \
    "$out/lab/flip_rates.csv" | sort
echo "stochastic leg:"
sed 's/^/  /' "$out/lab/stochastic.txt"
