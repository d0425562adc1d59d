#!/usr/bin/env bash
# Installs the Debian (bookworm) packages DriftBench builds and tests with,
# only those that are missing. Safe to run again; does nothing when all are present.
# Usage: scripts/install-deps.sh [--optional] [--test] [--package]
#   --optional adds the python comparison stack and chromium used by benchmarks and the report test, and
#              clang with libFuzzer's runtime for fuzzing the parsers by hand (tests/fuzz/driver.c; the tests
#              replay the corpora with the normal build, without clang)
#   --test     adds what only the test suite needs: PyTorch for the PyTorch server's end-to-end test
#              (tools/torch_server, tests/e2e/torch_server.sh), Slurm and munge for the job-array test
#              (tests/e2e/slurm_array.sh starts its own single-node cluster; about 3 MB to download),
#              chromium for the results browser's DOM test (tests/e2e/view_chromium.sh, skipped without it);
#              `make test` passes it, `make lab` does not; and Debian's pandas, setuptools, wheel, pip and venv
#              and psycopg2 for the Python package's tests (tests/e2e/python_package.sh, python_postgres.sh)
#   --package  adds what building the Debian package needs (dpkg-buildpackage, debhelper, lintian:
#              tests/e2e/deb_package.sh, docs/packaging.md); nobody else pays for it
# On a system without apt-get and dpkg (not Debian or Ubuntu) it installs
# nothing: it prints the Debian packages needed beside their names on Fedora
# (dnf), Arch (pacman) and Homebrew where known, the install command for the
# package manager it finds, and exits 1. Once they are installed,
# DRIFT_SKIP_DEPS=1 (`make lab DRIFT_SKIP_DEPS=1`) skips this script; CMake
# then names what is still missing.
set -eu
need=(build-essential cmake pkg-config git
      libcurl4-openssl-dev libjansson-dev libsqlite3-dev sqlite3 libpq-dev
      libxgboost-dev libgsl-dev libpcre2-dev libutf8proc-dev
      libmicrohttpd-dev libseccomp-dev bubblewrap libzstd-dev libcmocka-dev libyaml-dev
      python3 curl)
for arg in "$@"; do
  case "$arg" in
    --optional) need+=(python3-statsmodels python3-sklearn python3-xgboost python3-numpy chromium)
                need+=(clang libclang-rt-14-dev) ;;
    --test) need+=(python3-torch python3-numpy slurmctld slurmd slurm-client munge postgresql chromium)
            need+=(python3-pandas python3-setuptools python3-wheel python3-pip python3-venv python3-psycopg2) ;;
    --package) need+=(dpkg-dev debhelper lintian fakeroot) ;;
    *) echo "install-deps: unknown option '$arg' (--optional, --test, --package)" >&2; exit 2 ;;
  esac
done
# --test: groff and man for the install tree's test, which lints the generated man pages
# (tests/e2e/install_tree.sh: groff -ww, man -l; skipped without them)
for arg in "$@"; do [ "$arg" != --test ] || need+=(groff-base man-db); done
if [ "${DRIFT_SKIP_DEPS:-0}" = 1 ]; then
  echo "install-deps: DRIFT_SKIP_DEPS=1: not checking the packages (CMake names what is missing)" >&2
  exit 0
fi

# The same package elsewhere: "Fedora (dnf)|Arch (pacman)|Homebrew"; "-" where
# there is none or we do not know it (names as those distributions give them;
# the code sandbox, seccomp and bubblewrap, is Linux only).
equiv() {
  case "$1" in
    build-essential)      echo "gcc make|base-devel|- (Xcode command line tools)" ;;
    cmake)                echo "cmake|cmake|cmake" ;;
    pkg-config)           echo "pkgconf-pkg-config|pkgconf|pkgconf" ;;
    git)                  echo "git|git|git" ;;
    libcurl4-openssl-dev) echo "libcurl-devel|curl|curl" ;;
    libjansson-dev)       echo "jansson-devel|jansson|jansson" ;;
    libsqlite3-dev)       echo "sqlite-devel|sqlite|sqlite" ;;
    sqlite3)              echo "sqlite|sqlite|sqlite" ;;
    libpq-dev)            echo "libpq-devel|postgresql-libs|libpq" ;;
    libxgboost-dev)       echo "xgboost-devel|xgboost|xgboost" ;;
    libgsl-dev)           echo "gsl-devel|gsl|gsl" ;;
    libpcre2-dev)         echo "pcre2-devel|pcre2|pcre2" ;;
    libutf8proc-dev)      echo "utf8proc-devel|libutf8proc|utf8proc" ;;
    libmicrohttpd-dev)    echo "libmicrohttpd-devel|libmicrohttpd|libmicrohttpd" ;;
    libseccomp-dev)       echo "libseccomp-devel|libseccomp|- (Linux only)" ;;
    bubblewrap)           echo "bubblewrap|bubblewrap|- (Linux only)" ;;
    libzstd-dev)          echo "libzstd-devel|zstd|zstd" ;;
    libcmocka-dev)        echo "libcmocka-devel|cmocka|cmocka" ;;
    python3)              echo "python3|python|python" ;;
    curl)                 echo "curl|curl|curl" ;;
    clang)                echo "clang|clang|llvm" ;;
    libclang-rt-14-dev)   echo "compiler-rt|compiler-rt|llvm" ;;
    python3-statsmodels)  echo "python3-statsmodels|python-statsmodels|-" ;;
    python3-sklearn)      echo "python3-scikit-learn|python-scikit-learn|-" ;;
    python3-xgboost)      echo "python3-xgboost|python-xgboost|-" ;;
    python3-numpy)        echo "python3-numpy|python-numpy|numpy" ;;
    chromium)             echo "chromium|chromium|- (cask chromium)" ;;
    python3-torch)        echo "python3-torch|python-pytorch|pytorch" ;;
    slurmctld)            echo "slurm-slurmctld|slurm-llnl|-" ;;
    slurmd)               echo "slurm-slurmd|slurm-llnl|-" ;;
    slurm-client)         echo "slurm|slurm-llnl|-" ;;
    munge)                echo "munge|munge|-" ;;
    postgresql)           echo "postgresql-server|postgresql|postgresql@16" ;;
    python3-pandas)       echo "python3-pandas|python-pandas|-" ;;
    python3-setuptools)   echo "python3-setuptools|python-setuptools|-" ;;
    python3-wheel)        echo "python3-wheel|python-wheel|-" ;;
    python3-pip)          echo "python3-pip|python-pip|-" ;;
    python3-venv)         echo "python3|python|python" ;;
    python3-psycopg2)     echo "python3-psycopg2|python-psycopg2|-" ;;
    dpkg-dev|debhelper|lintian|fakeroot) echo "-|-|- (Debian packaging)" ;;
    groff-base)           echo "groff-base|groff|groff" ;;
    man-db)               echo "man-db|man-db|-" ;;
    *)                    echo "-|-|-" ;;
  esac
}

# Not Debian: say what is needed and stop.
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  {
    echo "install-deps: this system has no apt-get/dpkg-query, so it is not Debian or Ubuntu and nothing was installed."
    echo "DriftBench needs these packages (Debian bookworm names, then the same elsewhere; '-': none known):"
    printf '  %-22s %-26s %-22s %s\n' "Debian" "Fedora (dnf)" "Arch (pacman)" "Homebrew"
    col=0
    case "$(command -v dnf || command -v pacman || command -v brew || true)" in
      */dnf) col=1; mgr="sudo dnf install" ;;
      */pacman) col=2; mgr="sudo pacman -S --needed" ;;
      */brew) col=3; mgr="brew install" ;;
    esac
    names=()
    for p in "${need[@]}"; do
      IFS='|' read -r fed arch brew <<<"$(equiv "$p")"
      printf '  %-22s %-26s %-22s %s\n' "$p" "$fed" "$arch" "$brew"
      case $col in 1) n=$fed ;; 2) n=$arch ;; 3) n=$brew ;; *) n=- ;; esac
      case "$n" in -*) ;; *) for w in $n; do case " ${names[*]-} " in *" $w "*) ;; *) names+=("$w") ;; esac; done ;; esac
    done
    if [ "$col" != 0 ]; then
      echo "On this system, something like:"
      echo "  $mgr ${names[*]}"
    fi
    echo "Install them with your package manager, then run the same make command with DRIFT_SKIP_DEPS=1"
    echo "(e.g. make lab DRIFT_SKIP_DEPS=1); CMake then names any library it still cannot find."
  } >&2
  exit 1
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
