#!/usr/bin/env bash
# bench/run.sh BUILD_DIR - runs every benchmark program once with its default
# sizes and prints the figures that go into bench/BENCHMARKS.md (with the
# machine and the date). Not part of `make test`: timings are never asserted.
set -u
B=${1:-build}
echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
for prog in http_client store_bench compare_bench sandbox_bench kernels_bench engine_bench analysis_bench serve_bench \
            promptfoo_import; do
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
# the store's write rate by writer count, and a sharded matrix into one store:
# PostgreSQL (a private server from tests/pg/with_server.sh) against SQLite
if [ -x "$B/bench_store_writers" ]; then
  echo "## store_writers"
  "$B/bench_store_writers" --db "/tmp/store_writers.$$.db" 2>&1
  "$B/bench_store_writers" --db "/tmp/store_writers.$$.db" --files 1 2>&1
  bash tests/pg/with_server.sh bash -c 'psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE writers" &&
    "$0" --db "postgresql://postgres@/writers?host=$DRIFT_TEST_PG_DIR"' "$B/bench_store_writers" 2>&1
fi
echo "## matrix_scale"
bash bench/matrix_scale.sh "$B" 2>&1
