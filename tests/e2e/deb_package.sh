#!/usr/bin/env bash
# deb_package.sh - the Debian package (debian/, docs/packaging.md) built from
# this tree and used: dpkg-buildpackage -us -uc -b in a copy of the tree
# (DEB_BUILD_OPTIONS "parallel=NPROC" unless set: the package's own check runs,
# which needs ../shared beside the tree like `make test`; without it, or with
# DEB_BUILD_OPTIONS=nocheck, only what is shipped is built), then
#   - dpkg-deb -c: each package holds what it should (the CLI and its man
#     pages in driftbench, libdriftbench.so.0 in libdriftbench0, the headers,
#     the static library and driftbench.pc in libdriftbench-dev, the models in
#     driftbench-data, the Python module in python3-driftbench);
#   - the binaries do not name the directory they were built in (built with
#     DRIFT_SOURCE_LOOKUP=OFF: no source-tree lookup, no path in __FILE__ or
#     the debug info);
#   - lintian: no error;
#   - as root (or with sudo -n): apt install ./driftbench_*.deb
#     ./driftbench-data_*.deb ./libdriftbench*.deb ./python3-driftbench_*.deb,
#     then the installed /usr/bin/driftbench says it has no source-tree
#     lookup and runs `lab --quick` small (--limit 1, 8 new tokens) from an
#     empty directory (its models from /usr/share/driftbench), a C program
#     builds against the installed library with pkg-config and runs, the
#     installed Python module reads the lab's store and `runs list --json`
#     and its Library() (the installed libdriftbench.so.0) compares two runs
#     as `driftbench compare --format json` does, then the packages are
#     removed (apt purge) and nothing is left.
# Slow (a whole build from nothing), so it runs only with DRIFT_TEST_PACKAGE=1
# (exit 77 otherwise) and prints the time of each step. Needs dpkg-dev,
# debhelper, lintian and the Build-Depends (scripts/install-deps.sh --package).
# The Python checks run Debian's /usr/bin/python3 (the package's
# interpreter), not the first python3 on PATH.
. "$(dirname "$0")/lib.sh"
[ "${DRIFT_TEST_PACKAGE:-0}" = 1 ] || skip_all "the package build is slow: DRIFT_TEST_PACKAGE=1 runs it"
for c in dpkg-buildpackage dh lintian dpkg-deb git; do
  command -v "$c" > /dev/null || skip_all "no $c (scripts/install-deps.sh --package installs dpkg-dev, debhelper, lintian)"
done
t0=$(date +%s)
lap() { local now; now=$(date +%s); echo "deb_package: $1: $((now - t0)) s"; t0=$now; }

# the tree as it is (tracked and untracked files, not ignored ones: no build dir)
src=$T/pkg/driftbench-0.1.0
mkdir -p "$src"
git -C "$S" ls-files -z --cached --others --exclude-standard | (cd "$S" && xargs -0 -r cp --parents -t "$src" 2> /dev/null)
[ -f "$src/debian/control" ] || fail "the copy of the tree has no debian/control"
# the package's own check (debian/rules: the unit tests, the CLI cases, the
# layer checks on the package's build: its flags, DRIFT_SOURCE_LOOKUP=OFF)
# runs unless DEB_BUILD_OPTIONS says nocheck; some unit tests read the
# paper's data in ../shared beside the tree, as `make test` does
if [ -z "${DEB_BUILD_OPTIONS+set}" ]; then
  if [ -d "$S/../shared" ]; then
    ln -s "$(cd "$S/../shared" && pwd)" "$T/pkg/shared"
    DEB_BUILD_OPTIONS="parallel=$(nproc)"
  else
    skip "no ../shared beside $S (the unit tests' data): the package's own check is left out (nocheck)"
    DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)"
  fi
elif [ -d "$S/../shared" ]; then
  ln -s "$(cd "$S/../shared" && pwd)" "$T/pkg/shared"
fi
export DEB_BUILD_OPTIONS
(cd "$src" && dpkg-buildpackage -us -uc -b) > "$T/build.log" 2>&1 || { tail -40 "$T/build.log"; fail "dpkg-buildpackage -us -uc -b"; }
lap "dpkg-buildpackage -us -uc -b ($DEB_BUILD_OPTIONS)"
cd "$T/pkg" || fail "cd $T/pkg"
PKGS="driftbench driftbench-data libdriftbench0 libdriftbench-dev python3-driftbench"
for p in $PKGS; do
  ls ${p}_*.deb > /dev/null 2>&1 || fail "no ${p}_*.deb: $(ls)"
done
has() { dpkg-deb -c "$1"_*.deb | awk '{print $6}' | grep -Eq "$2"; }
check 'has driftbench "^\./usr/bin/driftbench$"' "driftbench holds /usr/bin/driftbench"
check 'has driftbench "^\./usr/share/man/man1/driftbench.*\.1\.gz$"' "driftbench holds driftbench(1)"
check 'has driftbench "^\./usr/share/bash-completion/"' "driftbench holds the bash completion"
check 'has libdriftbench0 "^\./usr/lib/[^/]+/libdriftbench\.so\.0"' "libdriftbench0 holds libdriftbench.so.0"
check '! has libdriftbench0 "\.a$|/include/"' "libdriftbench0 holds no development files"
check 'has libdriftbench-dev "^\./usr/include/driftbench/compare\.h$"' "libdriftbench-dev holds the headers"
check 'has libdriftbench-dev "/libdriftbench\.a$" && has libdriftbench-dev "/pkgconfig/driftbench\.pc$"' \
  "libdriftbench-dev holds the static library and driftbench.pc"
check 'has driftbench-data "^\./usr/share/driftbench/models/.*\.gguf$"' "driftbench-data holds the models"
check 'has python3-driftbench "^\./usr/lib/python3/dist-packages/driftbench/__init__\.py$" && has python3-driftbench "/driftbench/library\.py$"' \
  "python3-driftbench holds the module"
check '! has python3-driftbench "__pycache__|\.pyc$|/tests/"' "python3-driftbench holds no byte code and no tests"
dpkg-deb -f python3-driftbench_*.deb Depends > "$T/pydeps"
check 'grep -q "python3-pandas" "$T/pydeps" && grep -q "libdriftbench0" "$T/pydeps"' "python3-driftbench depends on python3-pandas and libdriftbench0: $(cat "$T/pydeps")"
dpkg-deb -x libdriftbench0_*.deb "$T/x"
dpkg-deb -x driftbench_*.deb "$T/x"
so=$(find "$T/x" -type f -name 'libdriftbench.so.0.*' | head -1)
check '[ -n "$so" ] && objdump -p "$so" | grep -q "SONAME *libdriftbench.so.0$"' "the library's SONAME is libdriftbench.so.0: $(objdump -p "$so" 2>&1 | grep SONAME)"
check '[ -n "$so" ] && ! objdump -T "$so" | awk "\$4 == \".text\" {print \$7}" | grep -v "^drift_" | grep -q .' \
  "the library exports drift_ functions only: $(objdump -T "$so" | awk '$4 == ".text" {print $7}' | grep -v '^drift_' | head -3)"
# DRIFT_SOURCE_LOOKUP=OFF: neither the CLI nor the library names the tree it was built in
for f in "$T/x/usr/bin/driftbench" "$so"; do
  check '[ -f "$f" ] && ! grep -aqF "$src" "$f"' "$(basename "$f") does not name the build's source tree $src: $(grep -aoF "$src" "$f" 2>&1 | head -2)"
done
lintian --fail-on error ./*.changes > "$T/lintian.log" 2>&1; lrc=$?
check '[ $lrc -eq 0 ]' "lintian: errors (rc $lrc): $(grep '^E:' "$T/lintian.log" | head -20)"
echo "lintian: $(grep -c '^E:' "$T/lintian.log") errors, $(grep -c '^W:' "$T/lintian.log") warnings: $(grep '^W:' "$T/lintian.log" | cut -d" " -f2,3 | tr "\n" " ")"
lap "contents and lintian"

SUDO=
if [ "$(id -u)" -ne 0 ]; then
  sudo -n true 2> /dev/null || { skip "installing the packages needs root (or sudo -n)"; finish; exit; }
  SUDO="sudo -n"
fi
if dpkg-query -W -f='${Status}' driftbench 2> /dev/null | grep -q "install ok installed"; then
  skip "driftbench is already installed here: not replacing it"
  finish
  exit
fi
on_exit() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $PKGS > /dev/null 2>&1; }
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  ./driftbench_*.deb ./driftbench-data_*.deb ./libdriftbench0_*.deb ./libdriftbench-dev_*.deb \
  ./python3-driftbench_*.deb > "$T/apt.log" 2>&1 ||
  { cat "$T/apt.log"; fail "apt install ./driftbench_*.deb ..."; }
lap "apt install"
mkdir -p "$T/run" && cd "$T/run" || fail "cd $T/run"
/usr/bin/driftbench version > version.out 2>&1
check 'grep -q "^lookup: .*no source tree (built with DRIFT_SOURCE_LOOKUP=OFF)$" version.out && grep -q "^models: /usr/share/driftbench/models (installed)$" version.out' \
  "the installed driftbench finds its models installed and has no source-tree lookup: $(grep -E '^(models|lookup)' version.out)"
/usr/bin/driftbench lab --quick --out lab --limit 1 --max-tokens 8 > lab.out 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ -s lab/report.html ] && [ -s lab/flip_rates.csv ]' "installed driftbench lab --quick (rc $rc): $(tail -5 lab.out)"
check '! grep -q "using the test fixtures" lab.out' "the installed lab found the shipped models, not the fixtures: $(grep -m1 models lab.out)"
lap "lab --quick --limit 1"
cat > v.c <<'C'
#include <driftbench/compare.h>
#include <driftbench/report.h>
#include <stdio.h>
int main(void) {
    double lo, hi;
    long more;
    drift_decision_reason why;
    drift_decision d = drift_gate_decide(0, 1000, 0, 0.02, DRIFT_DECIDE_INTERVAL, 0.05, &lo, &hi, &more, &why);
    printf("%s %d %d\n", drift_decision_name(d), drift_decision_exit_code(d), drift_json_schema_version());
    return 0;
}
C
# shellcheck disable=SC2046  # pkg-config's words are separate arguments
cc -o v v.c $(pkg-config --cflags --libs driftbench) > cc.log 2>&1; crc=$?
check '[ $crc -eq 0 ] && [ "$(./v)" = "deploy 0 1" ]' "a C program against the installed library (rc $crc): $(cat cc.log) $(./v 2>&1)"
check 'ldd ./v | grep -Eq "libdriftbench.so.0 => (/usr)?/lib/[^ ]*/libdriftbench.so.0 "' "it loads the installed libdriftbench.so.0: $(ldd ./v | grep drift)"
lap "C program"
# the Python module: the installed files (not a tree's), the lab's store, the
# CLI's runs list, and the installed library's compare equal to the CLI's
/usr/bin/driftbench runs list --db lab/lab.db --json > runs.json 2>&1 || bad "runs list --json: $(cat runs.json)"
cat > py.py <<'PY'
import json, subprocess, sys
import driftbench as db
assert db.__file__ == "/usr/lib/python3/dist-packages/driftbench/__init__.py", db.__file__
st = db.open_store("lab/lab.db")
runs = st.runs()
listed = db.read_runs("runs.json")
assert list(runs.label) == list(listed.label), (list(runs.label), list(listed.label))
assert len(st.answers()) == listed.responses.sum(), (len(st.answers()), listed.responses.sum())
a, b = list(listed.label)[:2]
lib = db.Library()
cli = subprocess.run(["/usr/bin/driftbench", "compare", "--db", "lab/lab.db", "--baseline", a, "--target", b,
                      "--format", "json"], capture_output=True, text=True)
assert lib.compare("lab/lab.db", a, b) == json.loads(cli.stdout), "Library.compare differs from the CLI"
assert lib.exit_code(db.read_compare(cli.stdout).verdict) == cli.returncode, cli.returncode
maps = {l.split()[-1] for l in open("/proc/self/maps") if "libdriftbench" in l}
print(f"python: {len(runs)} runs, {a} -> {b}: {json.loads(cli.stdout)['verdict']}, library {lib.path}")
print("mapped " + " ".join(sorted(maps)))
PY
env -u DRIFTBENCH_LIB -u DRIFT_BUILD -u PYTHONPATH /usr/bin/python3 py.py > py.out 2>&1; prc=$?
check '[ $prc -eq 0 ]' "the installed Python module (rc $prc): $(tail -5 py.out)"
check 'grep -Eq "^mapped (/usr)?/lib/[^ ]*/libdriftbench\.so\.0\.[0-9.]+$" py.out' "Library() loads the installed libdriftbench.so.0: $(tail -2 py.out)"
check '[ -n "$(find /usr/lib/python3/dist-packages/driftbench -name "*.pyc" 2> /dev/null | head -1)" ]' "postinst byte-compiled the module"
cd "$T" || fail "cd $T"
on_exit
check '! dpkg-query -W driftbench > /dev/null 2>&1 || ! dpkg-query -W -f="\${Status}" driftbench | grep -q "ok installed"' "apt purge removed driftbench"
check '[ ! -e /usr/bin/driftbench ] && [ ! -e /usr/share/driftbench ] && [ ! -e /usr/lib/python3/dist-packages/driftbench ]' \
  "nothing left in /usr: $(ls -d /usr/bin/driftbench /usr/share/driftbench /usr/lib/python3/dist-packages/driftbench 2>&1 | grep -v 'No such')"
lap "Python module, purge"
finish
