#!/usr/bin/env bash
# bench/run.sh BUILD_DIR - runs every benchmark program once with its default
# sizes and prints the figures that go into bench/BENCHMARKS.md (with the
# machine and the date). Not part of `make test`: timings are never asserted.
set -u
B=${1:-build}
echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
for prog in http_client store_bench compare_bench sandbox_bench kernels_bench engine_bench analysis_bench serve_bench; do
  exe=$B/bench_$prog
  [ -x "$exe" ] || { echo "## $prog: not built"; continue; }
  echo "## $prog"
  (cd "$B" && "./bench_$prog") 2>&1
done
# Debian's python3 (python3-statsmodels, -sklearn, -xgboost from
# scripts/install-deps.sh --optional), not whatever python3 is first on PATH
if [ -x /usr/bin/python3 ] && [ -f bench/analysis_ref.py ]; then
  echo "## analysis_ref.py (Python reference for analysis_bench)"
  /usr/bin/python3 bench/analysis_ref.py 2>&1
fi
