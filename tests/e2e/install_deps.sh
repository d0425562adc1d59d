#!/usr/bin/env bash
# install_deps.sh - scripts/install-deps.sh and CMake on a system that lacks
# what they need, with a PATH of our own:
#   no apt-get/dpkg-query (not Debian): exit 1, installs nothing, names the
#     Debian packages beside Fedora's, Arch's and Homebrew's names, and with
#     dnf (or pacman) on the PATH the install command for it; `make deps`
#     stops on it; DRIFT_SKIP_DEPS=1 skips the check;
#   Debian (fake dpkg-query and apt-get): nothing missing, apt-get is not
#     called; one package missing, apt-get installs that one only;
#   CMake with no library visible to pkg-config: the configure stops naming
#     each library's Debian package.
. "$(dirname "$0")/lib.sh"
bash_bin=$(command -v bash)
script=$S/scripts/install-deps.sh
bin=$T/bin
mkdir -p "$bin"
ln -s "$bash_bin" "$bin/bash"

# not Debian, no known package manager
PATH=$bin "$bash_bin" "$script" >"$T/out" 2>"$T/err"; rc=$?
check '[ "$rc" = 1 ]' "no apt-get: exit 1 (got $rc)"
check 'grep -q "no apt-get/dpkg-query, so it is not Debian or Ubuntu and nothing was installed" "$T/err"' "no apt-get: says why"
check 'grep -Eq "^  libjansson-dev +jansson-devel +jansson +jansson$" "$T/err"' "a library: Debian, Fedora, Arch, Homebrew names"
check 'grep -Eq "^  libxgboost-dev " "$T/err" && grep -Eq "^  build-essential +gcc make +base-devel " "$T/err"' "every package listed"
check '! grep -q "On this system" "$T/err"' "no package manager found: no command guessed"
check 'grep -q "DRIFT_SKIP_DEPS=1" "$T/err"' "says how to go on once installed"
check '[ ! -s "$T/out" ]' "stdout stays empty"
! grep -q "python3-torch" "$T/err" || bad "--test's packages listed without --test"
PATH=$bin "$bash_bin" "$script" --test 2>"$T/err.test"
check 'grep -Eq "^  python3-torch +python3-torch +python-pytorch +pytorch$" "$T/err.test"' "--test adds its packages"

# dnf found: the command for it, each name once
printf '#!%s\nexit 0\n' "$bash_bin" >"$bin/dnf"
chmod +x "$bin/dnf"
PATH=$bin "$bash_bin" "$script" 2>"$T/err.dnf"; rc=$?
check '[ "$rc" = 1 ]' "dnf: still exit 1 (got $rc)"
check 'grep -q "^  sudo dnf install gcc make cmake pkgconf-pkg-config git libcurl-devel jansson-devel sqlite-devel sqlite libpq-devel xgboost-devel " "$T/err.dnf"' "dnf: the install command"
check '[ "$(grep "sudo dnf install" "$T/err.dnf" | tr " " "\n" | grep -c "^sqlite$")" = 1 ]' "dnf: each name once"
rm "$bin/dnf"
printf '#!%s\nexit 0\n' "$bash_bin" >"$bin/pacman"
chmod +x "$bin/pacman"
PATH=$bin "$bash_bin" "$script" 2>"$T/err.pacman"
check 'grep -q "^  sudo pacman -S --needed base-devel cmake pkgconf " "$T/err.pacman"' "pacman: the install command"
rm "$bin/pacman"

# dpkg-query without apt-get is not enough
printf '#!%s\nexit 0\n' "$bash_bin" >"$bin/dpkg-query"
chmod +x "$bin/dpkg-query"
PATH=$bin "$bash_bin" "$script" 2>/dev/null; rc=$?
check '[ "$rc" = 1 ]' "dpkg-query alone: exit 1 (got $rc)"

# skipped on request
DRIFT_SKIP_DEPS=1 PATH=$bin "$bash_bin" "$script" 2>"$T/err.skip"; rc=$?
check '[ "$rc" = 0 ] && grep -q "DRIFT_SKIP_DEPS=1: not checking" "$T/err.skip"' "DRIFT_SKIP_DEPS=1: exit 0, said (got $rc)"

# the Makefile's deps target stops on it, with the message
if make_bin=$(command -v make); then
    ln -s "$make_bin" "$bin/make"
    rm "$bin/dpkg-query"
    PATH=$bin "$make_bin" -C "$S" deps >"$T/make.out" 2>&1; rc=$?
    check '[ "$rc" != 0 ] && grep -q "not Debian or Ubuntu" "$T/make.out"' "make deps: stops with the message (rc $rc)"
    DRIFT_SKIP_DEPS=1 PATH=$bin "$make_bin" -C "$S" deps >"$T/make.skip" 2>&1; rc=$?
    check '[ "$rc" = 0 ]' "make deps DRIFT_SKIP_DEPS=1: goes on (rc $rc)"
else
    skip "make is not installed"
fi

# Debian, everything installed: apt-get is never called
for c in grep id; do ln -sf "$(command -v $c)" "$bin/$c"; done
cat >"$bin/dpkg-query" <<EOF
#!$bash_bin
p=\${@: -1}
[ "\$p" = libgsl-dev ] && [ -e "$T/gsl-missing" ] && exit 1
printf 'install ok installed'
EOF
printf '#!%s\necho "$*" >>"%s/apt.log"\n' "$bash_bin" "$T" >"$bin/apt-get"
printf '#!%s\n"$@"\n' "$bash_bin" >"$bin/sudo"
chmod +x "$bin/dpkg-query" "$bin/apt-get" "$bin/sudo"
PATH=$bin "$bash_bin" "$script" 2>"$T/err.deb"; rc=$?
check '[ "$rc" = 0 ] && [ ! -e "$T/apt.log" ]' "Debian, nothing missing: exit 0, no apt-get (rc $rc)"
touch "$T/gsl-missing"
PATH=$bin "$bash_bin" "$script" 2>"$T/err.deb2"; rc=$?
check '[ "$rc" = 0 ] && grep -q "install -y -qq --no-install-recommends libgsl-dev$" "$T/apt.log"' "Debian, one missing: apt-get installs it alone (rc $rc)"

# CMake: no library visible, each named with its Debian package
mkdir -p "$T/empty"
PKG_CONFIG_LIBDIR=$T/empty cmake -S "$S" -B "$T/cmake" -DDRIFT_CUDA=OFF >"$T/cmake.out" 2>&1; rc=$?
check '[ "$rc" != 0 ]' "CMake without libraries fails (rc $rc)"
for want in "jansson (Debian package: libjansson-dev)" "libcurl (Debian package: libcurl4-openssl-dev)" \
            "cmocka (Debian package: libcmocka-dev)" "scripts/install-deps.sh installs them on Debian"; do
    check 'tr -s " \n" "  " <"$T/cmake.out" | grep -qF "$want"' "CMake names '$want'"
done
finish
