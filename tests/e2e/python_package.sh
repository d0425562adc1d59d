#!/usr/bin/env bash
# python_package.sh - the Python package (python/, docs/python.md) installed
# the documented way (`pip install --no-build-isolation --no-index ./python`
# into a venv over Debian's python3-pandas, no network) and checked against
# the CLI on a small store: the shipped qwen2-7m model at profile ref and at
# cpu-int4 over 16 built-in math and 16 safety prompts, scored. The unit tests
# (python/tests/test_driftbench.py) compare the package's runs, answers,
# scores, pairs and flip table with `runs list --json` and `compare --format
# json`, its ctypes compare with the CLI's JSON (equal documents), its gate
# with compare's decisions and exit code, and its schema-version checks.
# Skipped (77) when no python3 with pandas and venv is found (Debian:
# scripts/install-deps.sh --test installs python3-pandas, python3-venv,
# python3-setuptools, python3-wheel, python3-pip).
. "$(dirname "$0")/lib.sh"
PY=$(python_with "pandas, setuptools, venv") || skip_all "no python3 with pandas, setuptools and venv (Debian: python3-pandas python3-setuptools python3-venv)"
LIB=$B/libdriftbench.so
[ -e "$LIB" ] || skip_all "no $LIB (the shared library: DRIFT_SHARED_LIB=ON)"

DB=$T/s.db
python_test_store "$DB"

# install: a venv that sees Debian's pandas; pip builds the package from a copy
# (pip writes build/ and *.egg-info beside the sources) with setuptools from the
# system, no index
"$PY" -m venv --system-site-packages "$T/venv" || fail "python3 -m venv (Debian: python3-venv)"
cp -r "$S/python" "$T/src"
"$T/venv/bin/python" -m pip install --quiet --no-build-isolation --no-index --no-deps "$T/src" > "$T/pip.log" 2>&1 ||
  { cat "$T/pip.log"; fail "pip install --no-build-isolation --no-index ./python"; }
check '"$T/venv/bin/python" -m pip show driftbench > /dev/null 2>&1' "pip lists the installed driftbench"

cd "$T" || fail "cd $T"
DRIFT_PY_STORE=$DB DRIFT_PY_BASE=ref DRIFT_PY_TARG=int4 DRIFT_PY_JSON=$T/c.json DRIFT_PY_JSON_NONE=$T/c0.json \
  DRIFT_PY_RC=$rc DRIFT_PY_RUNS=$T/runs.json DRIFTBENCH_LIB=$LIB DRIFT_PY_VENV=$T/venv \
  "$T/venv/bin/python" "$S/python/tests/test_driftbench.py" -v > "$T/unit.log" 2>&1
urc=$?
check '[ $urc -eq 0 ]' "python/tests/test_driftbench.py (rc $urc): $(tail -30 "$T/unit.log")"
check 'grep -q "^Ran [1-9][0-9]* tests" "$T/unit.log"' "the unit tests ran: $(tail -3 "$T/unit.log")"

# the README's example script runs on the same store
"$T/venv/bin/python" "$S/python/examples/drift_report.py" "$DB" ref int4 > "$T/ex.out" 2>&1; erc=$?
check '[ $erc -eq 0 ] && grep -q "^flip table" "$T/ex.out"' "examples/drift_report.py (rc $erc): $(cat "$T/ex.out")"
finish
