#!/usr/bin/env bash
# cuda_unavailable.sh - on a machine without a usable CUDA GPU (or with a
# build that has no CUDA backend), `driftbench run` against an embedded
# target whose profile says backend=cuda stops before sending anything: exit
# 2, and a message saying why (no CUDA backend built in / no CUDA GPU found),
# no run stored. `profiles --gpu` marks the cuda profiles unavailable and
# `version` says what was built (`version --gpu` also counts the GPUs).
# Everywhere, GPU or not: commands that open no cuda profile never load the
# CUDA driver or cuBLAS (issue 23: that made every command slow and large);
# LD_DEBUG=libs shows every library the loader looks for, dlopen included.
# Where a GPU is visible the rest prints SKIP and passes (the GPU path is
# tests/unit/test_cuda_model.c's).
. "$(dirname "$0")/lib.sh"

model=$S/models/qwen2-7m.gguf
# no CUDA unless asked: version, the profile list, a cuda profile's
# description, a CPU run
lazy() { # CMD...
  LD_DEBUG=libs "$@" >"$T/lazy.out" 2>"$T/lazy.err" || bad "$*: exit $? ($(grep -v '^ *[0-9]*:' "$T/lazy.err" | head -3))"
  grep -E 'libcuda\.so|libcublas' "$T/lazy.err" | head -2 >"$T/lazy.hit"
  [ -s "$T/lazy.hit" ] && bad "$*: loads CUDA without a cuda profile: $(cat "$T/lazy.hit")"
  return 0
}
lazy "$D" version
lazy "$D" profiles
lazy "$D" profiles cuda-fp8
lazy "$D" --quiet run --db "$T/cpu.db" --label cpu --target "embedded:$model?profile=cpu-f32" \
  --suite builtin:math --limit 1 --max-tokens 2

"$D" version >"$T/version" 2>&1 || bad "version exit $?"
grep -q '^cuda: ' "$T/version" || bad "version does not say whether cuda is built: $(cat "$T/version")"
"$D" version --gpu >"$T/version" 2>&1 || bad "version --gpu exit $?"
grep -Eq '^cuda: (not built|built in, [0-9]+ GPUs? visible)' "$T/version" ||
  bad "version --gpu does not say how many GPUs: $(cat "$T/version")"
if grep -q '^cuda: built in, [1-9]' "$T/version"; then
  [ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
  echo "SKIP: a CUDA GPU is visible ($(grep '^cuda:' "$T/version")); the no-GPU path is not testable here"
  exit 0
fi

for prof in cuda-f32 cuda-bf16 cuda-fp8; do
  "$D" --quiet run --db "$T/r.db" --label gpu-$prof --target "embedded:$model?profile=$prof" \
    --suite builtin:math --limit 2 --max-tokens 4 >"$T/out" 2>"$T/err"
  rc=$?
  [ "$rc" = 2 ] || bad "$prof: exit $rc, want 2 ($(cat "$T/err"))"
  grep -q 'backend=cuda' "$T/err" || bad "$prof: message does not name backend=cuda: $(cat "$T/err")"
  grep -Eq 'no CUDA backend|no CUDA GPU found' "$T/err" || bad "$prof: message does not say why: $(cat "$T/err")"
  grep -qi 'segmentation\|abort\|assert' "$T/err" && bad "$prof: crashed: $(cat "$T/err")"
done
# a custom spec with backend=cuda is refused the same way
"$D" --quiet run --db "$T/r.db" --label gpu-custom --target "embedded:$model?profile=cpu-bf16&backend=cuda&gemm=vendor" \
  --suite builtin:math --limit 2 --max-tokens 4 >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] || bad "custom backend=cuda: exit $rc, want 2 ($(cat "$T/err"))"
cat "$T/err"
# nothing was stored under those labels
if [ -f "$T/r.db" ] && command -v sqlite3 >/dev/null 2>&1; then
  n=$(sqlite3 "$T/r.db" "select count(*) from responses" 2>/dev/null || echo 0)
  [ "$n" = 0 ] || bad "$n responses stored by runs that could not start"
fi
# accum=bf16 is not a GPU option: bad input, named
"$D" --quiet run --db "$T/r.db" --label x --target "embedded:$model?profile=cuda-f32&accum=bf16" \
  --suite builtin:math --limit 1 >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] || bad "accum=bf16: exit $rc, want 2"
grep -q 'accum=bf16' "$T/err" || bad "accum=bf16: message does not name it: $(cat "$T/err")"
# the profile list lists them; --gpu marks them unavailable (a build without
# CUDA marks them without being asked); the CPU ones are not
"$D" profiles >"$T/profiles" || bad "profiles exit $?"
grep -q '^cuda-f32 ' "$T/profiles" || bad "profiles does not list cuda-f32"
"$D" profiles --gpu >"$T/profiles" || bad "profiles --gpu exit $?"
for prof in cuda-f32 cuda-bf16 cuda-fp8; do
  grep -E "^$prof .*\[unavailable\]" "$T/profiles" >/dev/null || bad "profiles --gpu: $prof not marked unavailable"
done
grep -E '^cpu-f32 .*unavailable' "$T/profiles" >/dev/null && bad "profiles --gpu: cpu-f32 marked unavailable"
grep -q 'gemm' <(grep '^cpu-' "$T/profiles") && bad "profiles: a cpu spec mentions gemm"
"$D" profiles --gpu cuda-fp8 >"$T/one" || bad "profiles --gpu cuda-fp8 exit $?"
grep -q 'unavailable here' "$T/one" || bad "profiles --gpu cuda-fp8 does not say it is unavailable"
grep -q 'gemm=vendor' "$T/one" || bad "profiles cuda-fp8 does not show gemm=vendor"

[ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "ok: backend=cuda without a GPU is refused with exit 2 and a clear message"
