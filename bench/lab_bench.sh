#!/usr/bin/env bash
# lab_bench.sh - wall time and generation speed of `driftbench lab --quick`
# on 2 cores (taskset), from a fresh output directory. The lab prints its
# own tokens/s (completion tokens generated / seconds spent generating).
# usage: bench/lab_bench.sh [BUILD_DIR]   (default build)
set -euo pipefail
build=${1:-build}
cli="$build/driftbench"
[ -x "$cli" ] || { echo "no $cli: build first"; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pin=""
command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ] && pin="taskset -c 0,1"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores visible, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
start=$(date +%s.%N)
$pin "$cli" lab --quick --out "$out/lab" >"$out/stdout" 2>"$out/stderr"
end=$(date +%s.%N)
grep -E '^lab: ' "$out/stdout"
printf 'lab --quick wall (outside): %.1f s\n' "$(echo "$end - $start" | bc)"
