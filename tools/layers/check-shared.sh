#!/usr/bin/env bash
# check-shared.sh SHARED_CLI STATIC_CLI LIBDRIFTBENCH_SO - the shared build's
# check (ctest shared_cli). That driftbench-shared linked at all already says
# the CLI calls nothing the library hides (--no-allow-shlib-undefined); this
# checks that
#   1. it loads the libdriftbench.so just built (not another one),
#   2. it answers as the static CLI does (version, --help, an error),
#   3. the library exports only the public API: every defined dynamic
#      symbol is drift_* (include/driftbench/, DRIFT_API), nothing util_,
#      eng_, store_... (the -fvisibility=hidden of CMakeLists.txt).
set -euo pipefail
shared=$1 static=$2 lib=$3
fail() { echo "check-shared: $*" >&2; exit 1; }

libdir=$(cd "$(dirname "$lib")" && pwd)
loaded=$(ldd "$shared" | awk '/libdriftbench\.so/ {print $3}')
[ -n "$loaded" ] || fail "$shared does not load libdriftbench.so"
[ "$(cd "$(dirname "$loaded")" && pwd)" = "$libdir" ] || fail "$shared loads $loaded, not the one in $libdir"

for args in "version" "--help" "no-such-command"; do
    set +e
    # shellcheck disable=SC2086
    out_s=$("$shared" $args 2>&1); rc_s=$?
    # shellcheck disable=SC2086
    out_t=$("$static" $args 2>&1); rc_t=$?
    set -e
    out_s=${out_s//driftbench-shared/driftbench}
    [ "$rc_s" = "$rc_t" ] || fail "'$args': exit $rc_s, the static CLI's $rc_t"
    [ "$out_s" = "$out_t" ] || fail "'$args': output differs from the static CLI's"
done

extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^drift_' | grep -Ev '^(_init|_fini)$' || true)
[ -z "$extra" ] || fail "libdriftbench.so exports symbols outside the public API:
$extra"
echo "check-shared: driftbench-shared loads $loaded, answers as the static CLI, exports $(nm -D --defined-only "$lib" | grep -c ' drift_') drift_ symbols and nothing else"
