#!/usr/bin/env bash
# Installs the Debian (bookworm) packages DriftBench builds and tests with,
# only those that are missing. Safe to run again; does nothing when all are present.
# Usage: scripts/install-deps.sh [--optional] [--test]
#   --optional adds the python comparison stack and chromium used by benchmarks and the report test
#   --test     adds what only the test suite needs: PyTorch for the PyTorch server's end-to-end test
#              (tools/torch_server, tests/e2e/torch_server.sh), Slurm and munge for the job-array test
#              (tests/e2e/slurm_array.sh starts its own single-node cluster; about 3 MB to download);
#              `make test` passes it, `make lab` does not
set -eu
need=(build-essential cmake pkg-config git
      libcurl4-openssl-dev libjansson-dev libsqlite3-dev sqlite3 libpq-dev
      libxgboost-dev libgsl-dev libpcre2-dev libutf8proc-dev
      libmicrohttpd-dev libseccomp-dev bubblewrap libzstd-dev libcmocka-dev libyaml-dev
      python3 curl clang libclang-rt-14-dev)
for arg in "$@"; do
  case "$arg" in
    --optional) need+=(python3-statsmodels python3-sklearn python3-xgboost python3-numpy chromium) ;;
    --test) need+=(python3-torch python3-numpy slurmctld slurmd slurm-client munge postgresql) ;;
    *) echo "install-deps: unknown option '$arg' (--optional, --test)" >&2; exit 2 ;;
  esac
done
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
