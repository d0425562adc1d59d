#!/usr/bin/env bash
# bundle.sh - build DriftBench with its CUDA backend here and pack what the
# GPU machine needs to run it: the binaries and the shared libraries they use
# that a bare CUDA image lacks (Debian's libcurl, jansson, sqlite, xgboost, ...).
# The GPU machine has nvcc and the CUDA libraries but none of Debian's, and
# nothing can be installed there, so we carry them (glibc, libstdc++ and the
# CUDA libraries are the machine's own, which are newer).
#
#   tools/device/bundle.sh [BUILD_DIR]       (default build-dev)
#
# Writes $BUNDLE_DIR/bundle.tar.xz (default .devbundle/, ignored by git;
# another directory must be ignored too for a `run` call to carry it). On the GPU machine, from
# the repo root (the `run` call carries .devbundle):
#   tar -xJf .devbundle/bundle.tar.xz -C .devbundle
#   export LD_LIBRARY_PATH=$PWD/.devbundle/lib:/usr/local/cuda/lib64
#   .devbundle/bin/driftbench version
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-dev}
O=${BUNDLE_DIR:-.devbundle}
ex=$(git rev-parse --git-path info/exclude) # a worktree has its own .git file
mkdir -p "$(dirname "$ex")"
grep -qx "/$O/" "$ex" 2>/dev/null || echo "/$O/" >>"$ex"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DDRIFT_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="${CUDACXX:-/usr/local/cuda/bin/nvcc}" >/dev/null
grep -q 'DRIFT_HAVE_CUDA' "$B/CMakeCache.txt" "$B"/CMakeFiles/driftbench.dir/flags.make 2>/dev/null ||
    { echo "bundle.sh: $B was configured without the CUDA backend (nvcc not found?)" >&2; exit 1; }
cmake --build "$B" -j"$(nproc)"
rm -rf "$O"/bin "$O"/lib "$O"/bundle.tar.xz
mkdir -p "$O"/bin "$O"/lib
bins=(driftbench)
for t in test_cuda_ops test_cuda_model test_models bench_cuda; do
    [ -x "$B/$t" ] && bins+=("$t")
done
for b in "${bins[@]}"; do cp "$B/$b" "$O"/bin/; strip --strip-debug "$O"/bin/"$b"; done
# Shared libraries, minus the ones the GPU image brings itself.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libgcc_s|libstdc\+\+|libcuda\.so|libcublas|libcudart|libnvidia)'
for b in "$O"/bin/*; do
    ldd "$b" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    cp -L "$path" "$O/lib/$name"
done
# xz -9: a 64 MiB dictionary spans all the binaries, which share the CUDA
# kernels (~8 MB each); xz's default 8 MiB window stopped short of that once
# they grew past it and the archive tripled (42 MB against 16).
tar -C "$O" -cf - bin lib | xz -9 >"$O"/bundle.tar.xz
echo "bundle.sh: $(du -h "$O"/bundle.tar.xz | cut -f1) in $O/bundle.tar.xz ($(ls "$O"/bin | tr '\n' ' '))"
