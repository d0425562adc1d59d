#!/usr/bin/env bash
# device.sh - the real-stack study (tools/study/run.sh) on a GPU machine that
# has nvcc, CMake and PyTorch but none of Debian's libraries, one call at a
# time within a call's time limit; every call resumes the last.
#
#   bash tools/study/device.sh DIR [MODEL.gguf ...]      (from the repository root)
#
# DIR (an ignored folder that travels with the call) holds:
#   bundle.tar.xz        driftbench built with CUDA and its libraries
#                        (tools/device/bundle.sh; bin/driftbench is enough)
#   llamacpp-src.tar.xz  llama.cpp's source (CMakeLists.txt cmake common ggml
#                        src include tools vendor app scripts), built here
#   study.db.gz          optional: the store of an earlier call, resumed
# $OUT gets study.db.gz (15 MB parts study.db.gz.part-NN when larger: a file
# that comes back is at most 16 MiB) with the answers only: score them where
# the code sandbox is,
# `driftbench score --db study.db`, then tools/study/tables.sh for the tables),
# run.log and the llama.cpp build log's tail.
#
# llama.cpp's CUDA build takes about 8 minutes on 16 cores: the first call
# starts it in its own process session (it outlives the call while the
# machine stays warm, about 30 s after a call) and runs the engine and
# PyTorch configurations meanwhile; a call that finds the build finished adds
# the llama.cpp configurations. Environment: STUDY_S [480] seconds of matrix
# per call, JOBS [8], THREADS [2], and run.sh's sizes (MATH CODE SAFETY CHAT
# LONG MAX_TOKENS).
set -u -o pipefail
[ $# -ge 1 ] || { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
DIR=$(cd "$1" && pwd); shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$PWD/study_out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

# driftbench, with its libraries on its own path only (exported globally they
# would replace the system's libcurl under curl and Python)
B=/tmp/study_bundle
if [ ! -x "$B/bin/driftbench" ]; then
  mkdir -p "$B" && tar -xJf "$DIR/bundle.tar.xz" -C "$B" || { echo "device.sh: cannot unpack $DIR/bundle.tar.xz" >&2; exit 2; }
fi
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s/bin/driftbench "$@"\n' "$B" "$B" >/tmp/driftbench
chmod +x /tmp/driftbench
/tmp/driftbench version --gpu || exit 2

# llama.cpp with CUDA, beside the project, in the background
L=/tmp/lcpp
if [ ! -x "$L/b/bin/llama-server" ] && [ ! -e "$L/building" ] && [ -f "$DIR/llamacpp-src.tar.xz" ]; then
  mkdir -p "$L" && tar -xJf "$DIR/llamacpp-src.tar.xz" -C "$L" && touch "$L/building"
  setsid bash -c "cd $L && cmake -S . -B b -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF &&
    cmake --build b -j 12 --target llama-server llama-quantize; echo \"rc=\$?\" >$L/built; rm -f $L/building" \
    >"$L/build.log" 2>&1 </dev/null &
  echo "device.sh: llama.cpp's CUDA build started in the background ($L/build.log)"
fi
llama=()
if [ -x "$L/b/bin/llama-server" ]; then
  # its shared libraries sit beside it; a wrapper keeps them off everyone else's path
  mkdir -p /tmp/lbin
  for t in llama-server llama-quantize; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/b/bin exec %s/b/bin/%s "$@"\n' "$L" "$L" "$t" >/tmp/lbin/$t
    chmod +x /tmp/lbin/$t
  done
  llama=(LLAMA_BIN=/tmp/lbin)
  echo "device.sh: llama.cpp is built: its configurations are in"
else
  echo "device.sh: llama.cpp not built yet: engine and PyTorch configurations only"
fi

S=/tmp/study
mkdir -p "$S"
[ -s "$S/study.db" ] || { [ -f "$DIR/study.db.gz" ] && gzip -dc "$DIR/study.db.gz" >"$S/study.db"; }
env "${llama[@]}" DRIFTBENCH=/tmp/driftbench PY=python3 GPU=1 SCORE=0 JOBS="${JOBS:-8}" THREADS="${THREADS:-2}" \
  MATRIX_TIMEOUT="${STUDY_S:-480}" bash "$ROOT/tools/study/run.sh" "$S" "$@"
rc=$?
gzip -c "$S/study.db" >"$OUT/study.db.gz"
# a file that comes back from the machine is at most 16 MiB: larger stores
# come back in parts (cat study.db.gz.part-* > study.db.gz)
if [ "$(stat -c %s "$OUT/study.db.gz")" -gt 15000000 ]; then
  split -b 15000000 -d "$OUT/study.db.gz" "$OUT/study.db.gz.part-" && rm "$OUT/study.db.gz"
fi
cp "$S/run.log" "$OUT/" 2>/dev/null
tail -n 5 "$L/build.log" >"$OUT/llamacpp_build_tail.txt" 2>/dev/null
exit $rc
