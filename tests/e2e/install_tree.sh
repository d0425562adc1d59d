#!/usr/bin/env bash
# install_tree.sh - `cmake --install` into a DESTDIR under the build
# directory, then the INSTALLED tree on its own (docs/install.md):
#   - every part is where the GNU layout puts it: bin/driftbench,
#     libdriftbench.so.0 (SONAME) with only drift_* exported, the static
#     library, the headers, driftbench.pc, the models under
#     share/driftbench, a man page per command, the bash completion;
#   - the man pages render without a warning (groff -ww, man -l);
#   - the installed binary, run from a scratch folder with no DRIFT_*
#     variable, finds its data in the install (not the source tree): its
#     `version` says so, and `lab --quick` at a small size runs on the
#     installed models with the installed guard;
#   - built with DRIFT_SOURCE_LOOKUP=OFF (the packages' configuration), the
#     installed binary and library do not name the source tree (the bytes
#     of the files, as `strings` would find them) and `version` says there
#     is no source-tree lookup; built with it ON (a checkout's default),
#     `version` names the source tree as the last lookup;
#   - a C program built with `pkg-config --cflags --libs driftbench` against
#     the installed library (and once statically, --static) calls the API;
#   - the completion completes commands, options and subcommands;
#   - the uninstall removes everything the install put.
. "$(dirname "$0")/lib.sh"

command -v cmake >/dev/null || skip_all "no cmake"
command -v pkg-config >/dev/null || skip_all "no pkg-config"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$B/CMakeCache.txt")
[ -n "$prefix" ] || fail "no CMAKE_INSTALL_PREFIX in $B/CMakeCache.txt"
grep -q '^DRIFT_SHARED_LIB:BOOL=ON' "$B/CMakeCache.txt" || skip_all "DRIFT_SHARED_LIB is off: no shared library to install"
grep -q '^DRIFT_SANITIZE:BOOL=ON' "$B/CMakeCache.txt" && skip_all "the sanitizer build installs no shared library"
dest=$B/install_tree.dest
root=$dest$prefix
# the build directory's manifest is a real install's (make uninstall reads it): keep it
manifest=$B/install_manifest.txt
[ -f "$manifest" ] && cp "$manifest" "$T/manifest.saved"
on_exit() {
  if [ -f "$T/manifest.saved" ]; then cp "$T/manifest.saved" "$manifest"; else rm -f "$manifest"; fi
  rm -rf "$dest"
}
rm -rf "$dest"
DESTDIR=$dest cmake --install "$B" >"$T/install.log" 2>&1 || fail "cmake --install: $(tail -5 "$T/install.log")"
cp "$manifest" "$T/manifest.test"

# ---- the layout ----
pc=$(find "$root" -name driftbench.pc -path '*/pkgconfig/*' | head -1)
check '[ -n "$pc" ]' "driftbench.pc installed"
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir driftbench)
check '[ "${libdir#"$prefix"/}" != "$libdir" ]' "the .pc's libdir $libdir is under the prefix $prefix"
L=$dest$libdir
check '[ -x "$root/bin/driftbench" ]' "bin/driftbench"
check '[ -f "$L/libdriftbench.a" ]' "the static library"
check '[ -L "$L/libdriftbench.so" ] && [ -L "$L/libdriftbench.so.0" ]' "libdriftbench.so and .so.0 links"
soname=$(readelf -d "$L/libdriftbench.so.0" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
check '[ "$soname" = libdriftbench.so.0 ]' "SONAME libdriftbench.so.0 (got '$soname')"
for h in "$S"/include/driftbench/*.h; do
  [ -f "$root/include/driftbench/$(basename "$h")" ] || bad "header $(basename "$h") not installed"
done
n_models=$(ls "$S"/models/*.gguf | wc -l)
n_inst=$(ls "$root"/share/driftbench/models/*.gguf 2>/dev/null | wc -l)
check '[ "$n_inst" = "$n_models" ] && [ "$n_inst" -gt 0 ]' "the $n_models shipped models installed ($n_inst)"
check '[ -f "$root/share/driftbench/models/guard/guard-llama-1m.gguf" ]' "the guard installed"
check '[ -f "$root/share/driftbench/models/MODELS.md" ]' "MODELS.md installed"
check '[ -f "$root/share/bash-completion/completions/driftbench" ]' "the bash completion installed"

# ---- only drift_ exported ----
nm -D --defined-only "$L/libdriftbench.so.0" | awk '{print $NF}' >"$T/exports"
check '[ "$(grep -c "^drift_" "$T/exports")" -gt 100 ]' "drift_ functions exported ($(grep -c '^drift_' "$T/exports"))"
others=$(grep -v '^drift_' "$T/exports" | head -5 | tr '\n' ' ')
check '[ -z "$others" ]' "only drift_* exported (also: $others)"

# ---- man pages: one per command, each renders clean ----
cmds=$("$D" --help | sed -n '/^commands:/,/^$/p' | awk 'NF && $1 != "commands:" {print $1}')
check '[ -n "$cmds" ]' "the command list from driftbench --help"
for c in $cmds; do
  [ -f "$root/share/man/man1/driftbench-$c.1" ] || bad "no man page driftbench-$c.1"
done
check '[ -f "$root/share/man/man1/driftbench.1" ] && [ -f "$root/share/man/man5/driftbench-formats.5" ]' \
  "driftbench(1) and driftbench-formats(5)"
if command -v groff >/dev/null; then
  for f in "$root"/share/man/man1/*.1 "$root"/share/man/man5/*.5; do
    w=$(groff -ww -man -Tutf8 -z "$f" 2>&1)
    [ -z "$w" ] || bad "groff -ww $(basename "$f"): $w"
  done
else
  skip "no groff: the pages are not linted"
fi
if command -v man >/dev/null; then
  MANWIDTH=80 man -l "$root/share/man/man1/driftbench-lab.1" >"$T/man.txt" 2>"$T/man.err"
  check 'grep -q -- "--models DIR" "$T/man.txt" && [ ! -s "$T/man.err" ]' "man -l renders driftbench-lab(1) ($(head -2 "$T/man.err"))"
  # the page says what --help says (generated from it): every option of lab
  for o in $("$D" lab --help | grep -oE '^  --[a-z-]+'); do
    grep -q -- "$o" "$T/man.txt" || bad "driftbench-lab(1) lacks $o"
  done
fi

# ---- the installed binary, away from the source tree ----
mkdir -p "$T/run" && cd "$T/run" || fail "cd $T/run"
clean_env() { env -i PATH=/usr/bin:/bin HOME="$T/run" LANG=C.UTF-8 "$@"; }
clean_env "$root/bin/driftbench" version >"$T/version" 2>&1 || bad "installed version: exit $? ($(cat "$T/version"))"
check 'grep -q "^models: $root/share/driftbench/models (installed)$" "$T/version"' \
  "the installed binary finds the installed models ($(grep '^models' "$T/version"))"
check 'grep -q "^guard: $root/share/driftbench/models/guard/guard-llama-1m.gguf$" "$T/version"' \
  "the installed binary finds the installed guard ($(grep '^guard' "$T/version"))"
check 'grep -Eq "^commit: ([0-9a-f]{7,}|unknown)$" "$T/version"' "version has the commit"
check 'grep -Eq "^libraries: curl [0-9.]+, sqlite [0-9.]+, jansson [0-9.]+, libyaml [0-9.]+, libpq [0-9.]+, xgboost [0-9.]+, gsl [0-9.]+" "$T/version"' \
  "version has the libraries' run-time versions"
clean_env "$root/bin/driftbench" version --format json >"$T/version.json" 2>&1 || bad "version --format json: exit $?"
check 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert next(iter(d))==\"schema_version\" and d[\"data\"][\"from\"]==\"installed\" and d[\"libraries\"][\"sqlite\"] and \"cuda\" in d[\"build\"]" "$T/version.json"' \
  "version --format json: schema_version first, data from the install, libraries, build options"
# the source tree in the lookup: as configured (DRIFT_SOURCE_LOOKUP)
src_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
if grep -q '^DRIFT_SOURCE_LOOKUP:BOOL=OFF' "$B/CMakeCache.txt"; then
  check 'grep -q "^lookup: .*no source tree (built with DRIFT_SOURCE_LOOKUP=OFF)$" "$T/version"' \
    "DRIFT_SOURCE_LOOKUP=OFF: version says there is no source-tree lookup ($(grep '^lookup' "$T/version"))"
  check 'python3 -c "import json,sys; d=json.load(open(sys.argv[1]))[\"data\"]; assert d[\"source_tree\"] is None and \"source tree\" not in d[\"lookup\"]" "$T/version.json"' \
    "DRIFT_SOURCE_LOOKUP=OFF: version --format json has no source tree"
  for f in "$root/bin/driftbench" "$L/libdriftbench.so.0" "$L/libdriftbench.a"; do
    check '[ -n "$src_dir" ] && ! grep -aqF "$src_dir" "$f"' \
      "DRIFT_SOURCE_LOOKUP=OFF: $(basename "$f") does not name the source tree $src_dir ($(grep -acF "$src_dir" "$f") lines do)"
  done
else
  check '[ -n "$src_dir" ] && grep "^lookup: " "$T/version" | grep -qF ", the source tree $src_dir (compiled in)"' \
    "DRIFT_SOURCE_LOOKUP=ON: version names the source tree $src_dir last ($(grep '^lookup' "$T/version"))"
fi
# DRIFT_DATA_DIR comes before the install
mkdir -p "$T/data/models"
cp "$S"/models/qwen2-7m.gguf "$T/data/models/"
clean_env DRIFT_DATA_DIR="$T/data" "$root/bin/driftbench" version >"$T/version2" 2>&1
check 'grep -q "^models: $T/data/models (DRIFT_DATA_DIR)$" "$T/version2"' "DRIFT_DATA_DIR wins ($(grep '^models' "$T/version2"))"

start=$(date +%s)
clean_env "$root/bin/driftbench" lab --quick --out lab --limit 1 --max-tokens 6 --long 1 >"$T/lab.out" 2>"$T/lab.err"
rc=$?
echo "installed lab --quick --limit 1 took $(( $(date +%s) - start )) s"
check '[ "$rc" = 0 ]' "installed lab --quick: exit $rc ($(tail -3 "$T/lab.err"))"
check 'grep -q "^models: $root/share/driftbench/models (installed)$" "$T/lab.out"' \
  "lab ran on the installed models ($(grep '^models' "$T/lab.out"))"
check '! grep -q "test fixtures" "$T/lab.out"' "lab did not fall back to the fixtures"
check '! grep -q "^safety: not computable" "$T/lab.out"' "lab judged safety with the installed guard ($(grep '^safety: not' "$T/lab.out"))"
check 'grep -q "^report: lab/report.html$" "$T/lab.out" && [ -s lab/report.html ]' "lab wrote its report"
check '! grep -q "$S/models" lab/matrix.json && grep -q "$root/share/driftbench/models/" lab/matrix.json' \
  "lab's matrix names the installed models, not the source tree's"

# ---- a C program against the installed library, via pkg-config ----
cat >"$T/use.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <driftbench/install.h>
#include <driftbench/model.h>
#include <driftbench/profile.h>
#include <driftbench/status.h>
#include <driftbench/suite.h>

int main(int argc, char **argv) {
    int want_data = argc > 1 && !strcmp(argv[1], "--data");
    drift_error err = {0};
    drift_suite *s = NULL;
    if (drift_suite_load("builtin:math?n=5", &s, &err) != DRIFT_OK) {
        fprintf(stderr, "suite: %s\n", err.msg);
        return 1;
    }
    printf("version %s\nprompts %zu %s\n", drift_version(), s->n, s->prompts[0].workload == DRIFT_WL_MATH ? "math" : "?");
    drift_suite_free(s);
    char *red = drift_redact("postgresql://me:hunter2@db/x");
    printf("redacted %s\n", red && !strstr(red, "hunter2") ? "yes" : "no");
    free(red);
    if (!want_data) return 0;
    const char *from = NULL;
    char *guard = drift_data_find("models/guard/guard-llama-1m.gguf", &from);
    if (!guard) {
        fprintf(stderr, "no guard found\n");
        return 1;
    }
    printf("guard %s (%s)\n", guard, from);
    drift_numeric_profile prof;
    drift_model *m = NULL;
    if (drift_profile_get("ref", &prof, &err) != DRIFT_OK || drift_model_load(guard, &prof, &m, &err) != DRIFT_OK) {
        fprintf(stderr, "guard model: %s\n", err.msg);
        return 1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (drift_model_tokenize(m, " unsafe", 7, 0, 0, &ids, &n, &err) != DRIFT_OK) {
        fprintf(stderr, "tokenize: %s\n", err.msg);
        return 1;
    }
    printf("tokens %zu\n", n);
    free(ids);
    drift_model_free(m);
    free(guard);
    return 0;
}
EOF
pcenv() { PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest pkg-config "$@"; }
flags=$(pcenv --cflags --libs driftbench) || bad "pkg-config --cflags --libs driftbench failed"
check '[[ "$flags" == *"-I$root/include"* && "$flags" == *"-ldriftbench"* ]]' "pkg-config flags point into the install: $flags"
# shellcheck disable=SC2086  # the flags are words
cc -std=c11 -Wall -Werror -o "$T/use" "$T/use.c" $flags -Wl,-rpath,"$L" 2>"$T/cc.err" ||
  bad "cc with pkg-config's flags: $(head -5 "$T/cc.err")"
if [ -x "$T/use" ]; then
  check 'readelf -d "$T/use" | grep -q "NEEDED.*libdriftbench.so.0"' "the program needs libdriftbench.so.0"
  clean_env "$T/use" --data >"$T/use.out" 2>&1 || bad "the program: exit $? ($(cat "$T/use.out"))"
  check 'grep -q "^version $("$D" version | head -1 | cut -d" " -f2)$" "$T/use.out"' "drift_version() = driftbench version"
  check 'grep -q "^prompts 5 math$" "$T/use.out" && grep -q "^redacted yes$" "$T/use.out"' "a suite loads and a URL is redacted"
  # found beside libdriftbench.so (lib/../share), not the program's folder nor the source tree
  check 'grep -q "^guard $root/share/driftbench/models/guard/guard-llama-1m.gguf (installed)$" "$T/use.out"' \
    "the library finds the installed guard by its own location ($(grep '^guard' "$T/use.out"))"
  check 'grep -q "^tokens 1$" "$T/use.out"' "the guard loads and tokenizes"
fi
# the static library: Requires.private (each dependency's own --libs: Debian's
# libcurl.pc --static names libraries with no -dev here) and Libs.private
requires=$(pcenv --print-requires-private driftbench | awk '{print $1}' | tr '\n' ' ')
check '[ -n "$requires" ]' "Requires.private lists the dependencies"
private=$(sed -n 's/^Libs.private: //p' "$pc")
# shellcheck disable=SC2086  # the flags are words
cc -std=c11 -o "$T/use_static" "$T/use.c" $(pcenv --cflags driftbench) "$L/libdriftbench.a" \
  $(pkg-config --libs $requires) $private 2>"$T/ccs.err" ||
  bad "static link with Requires.private and Libs.private: $(head -5 "$T/ccs.err")"
if [ -x "$T/use_static" ]; then
  check '! readelf -d "$T/use_static" | grep -q libdriftbench' "the static program does not need libdriftbench.so"
  clean_env "$T/use_static" >"$T/uses.out" 2>&1 || bad "the static program: exit $? ($(cat "$T/uses.out"))"
  check 'grep -q "^prompts 5 math$" "$T/uses.out"' "the static program loads a suite"
fi

# ---- the completion ----
comp=$root/share/bash-completion/completions/driftbench
complete_words() { bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _driftbench; echo "${COMPREPLY[*]}"' _ "$comp" "$@"; }
check '[ "$(complete_words driftbench la)" = lab ]' "completes a command"
check '[ "$(complete_words driftbench lab --mo)" = --models ]' "completes an option"
check '[ "$(complete_words driftbench runs "")" = "list show rename delete" ]' "completes subcommands ($(complete_words driftbench runs ""))"
cmds_comp=$(complete_words driftbench "" | tr ' ' '\n' | sort | tr '\n' ' ')
check '[ "$cmds_comp" = "$(echo "$cmds" | sort | tr "\n" " ")" ]' "the completion knows every command"

# ---- uninstall ----
cd "$T" || fail "cd $T"
DESTDIR=$dest cmake -DMANIFEST="$T/manifest.test" -DPREFIX="$prefix" -P "$S/tools/install/uninstall.cmake" >"$T/uninstall.log" 2>&1 ||
  bad "uninstall: $(tail -3 "$T/uninstall.log")"
left=$(find "$dest" -type f -o -type l | head -5)
check '[ -z "$left" ]' "uninstall removed every installed file (left: $left)"
check '[ ! -e "$root/share/driftbench" ] && [ ! -e "$root/include/driftbench" ]' "and our own folders"
finish
