#!/usr/bin/env bash
# Installs the Debian (bookworm) packages DriftBench builds and tests with,
# only those that are missing. Safe to run again; does nothing when all are present.
# Usage: scripts/install-deps.sh [--optional]   (--optional adds the python
# comparison stack and chromium used by benchmarks and the report test)
set -eu
need=(build-essential cmake pkg-config git
      libcurl4-openssl-dev libjansson-dev libsqlite3-dev sqlite3
      libxgboost-dev libgsl-dev libpcre2-dev libutf8proc-dev
      libmicrohttpd-dev libseccomp-dev bubblewrap libzstd-dev libcmocka-dev
      python3 curl clang libclang-rt-14-dev)
if [ "${1:-}" = "--optional" ]; then
  need+=(python3-statsmodels python3-sklearn python3-xgboost python3-numpy chromium)
fi
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
