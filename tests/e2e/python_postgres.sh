#!/usr/bin/env bash
# python_postgres.sh - the Python package (docs/python.md) on a PostgreSQL
# store: the store of python_package.sh (the shipped qwen2-7m model at ref and
# cpu-int4, 16 math and 16 safety prompts, scored) written by the CLI into a
# private PostgreSQL server's database (tests/pg/with_server.sh), then
# python/tests/test_driftbench.py with DRIFT_PY_STORE the URL: the package's
# runs, answers, scores, pairs and flip table read through psycopg2 against
# the CLI's `runs list --json` and `compare --format json` of that database,
# and Library.compare(URL) equal to the CLI's JSON. The package is imported
# from the tree (python_package.sh tests the install). Skipped (77) without
# a python3 with pandas and psycopg2 (Debian: python3-pandas,
# python3-psycopg2) or when no PostgreSQL server can start here.
. "$(dirname "$0")/lib.sh"
PY=$(python_with "pandas, psycopg2") || skip_all "no python3 with pandas and psycopg2 (Debian: python3-pandas python3-psycopg2)"
LIB=$B/libdriftbench.so
[ -e "$LIB" ] || skip_all "no $LIB (the shared library: DRIFT_SHARED_LIB=ON)"
if [ -z "${DRIFT_TEST_PG:-}" ]; then exec bash "$S/tests/pg/with_server.sh" bash "$0" "$@"; fi

psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE drift_py" > /dev/null || fail "cannot create database drift_py"
on_exit() { psql "$DRIFT_TEST_PG" -qc "DROP DATABASE IF EXISTS drift_py WITH (FORCE)" > /dev/null 2>&1; }
URL=$(printf '%s' "$DRIFT_TEST_PG" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/drift_py#")
python_test_store "$URL"

cd "$T" || fail "cd $T"
PYTHONPATH=$S/python DRIFT_PY_STORE=$URL DRIFT_PY_BASE=ref DRIFT_PY_TARG=int4 DRIFT_PY_JSON=$T/c.json \
  DRIFT_PY_JSON_NONE=$T/c0.json DRIFT_PY_RC=$rc DRIFT_PY_RUNS=$T/runs.json DRIFTBENCH_LIB=$LIB \
  "$PY" "$S/python/tests/test_driftbench.py" -v > "$T/unit.log" 2>&1
urc=$?
check '[ $urc -eq 0 ]' "python/tests/test_driftbench.py on PostgreSQL (rc $urc): $(tail -30 "$T/unit.log")"
check 'grep -q "test_flip_table_matches_compare .* ok$" "$T/unit.log" && grep -q "test_compare_is_the_clis .* ok$" "$T/unit.log"' \
  "the store and library tests ran on PostgreSQL: $(grep -c " ok$" "$T/unit.log") ok"
finish
