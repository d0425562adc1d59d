#!/usr/bin/env bash
# bench/cuda.sh BUNDLE MODE - the CUDA backend (issue 8) on the GPU machine.
#
# Run from the repository root of the device machine:
#     bench/cuda.sh .devbundle all
# BUNDLE is a prebuilt tree: bin/{driftbench,test_cuda_ops,test_cuda_model,bench_cuda}
# (or those at its top, as in a CMake build directory) and lib/*.so* (or
# ../lib/*.so*: the libraries the binaries need besides /usr/local/cuda/lib64),
# as tools/device/bundle.sh makes it; its bundle.tar.xz is unpacked if needed.
#
# MODE
#   ops     nvidia-smi -L, `driftbench version --gpu`, then the GPU op tests
#           (test_cuda_ops: every op x format against the CPU reference) and
#           the model tests (test_cuda_model).
#   suites  the built-in suites on every shipped model (models/*.gguf, guard
#           models left out), on the CPU and on the GPU with matching
#           profiles, all runs in ONE store: labels PROFILE@MODEL
#             cpu-f32@M   cuda-f32@M     CPU f32 vs GPU f32
#             cpu-bf16@M  cuda-bf16@M    CPU bf16 vs GPU bf16
#             cuda-fp8@M                 GPU bf16 vs GPU fp8 (cuBLASLt)
#           then each GPU profile of $BI_PROFILES (NAME, or NAME=QUERY for a
#           query other than profile=NAME) with batch_invariant=1 and 0
#           at batch 1 and at $BATCH: NAME-bi1-b1@M, -bi1-b64@M,
#           -bi0-b1@M, -bi0-b64@M (the batch size of an embedded target is its
#           spec key batch=N). CPU legs use threads=$THREADS.
#           The store is snapshotted after every run to $OUT/cuda_runs.db.gz.
#   bench   bench_cuda (bench/cuda.c): copy bandwidth, GEMM rate, prefill and
#           decode tokens/s per model and profile, the 1B model, the CPU leg;
#           writes $OUT/bench_cuda.json and $OUT/bench_cuda.md.
#   all     ops, then suites (smaller default sizes), then bench, within
#           $BUDGET_S seconds (the device call may run 10 minutes at most).
#   ab      BUNDLE (the change, "after") against $AB_BUNDLE (another build,
#           "before"): the suites (sizes as in suites, --logprobs
#           $AB_LOGPROBS) on every model in each profile of $AB_PROFILES
#           (NAME, or NAME=QUERY as in BI_PROFILES) at batch $BATCH, through both builds into two stores, compared
#           response by response (texts and logprobs, 17 digits: the same
#           bits); then $AB_ROUNDS rounds of bench_cuda ($BENCH_ARGS), each
#           before, after and, with $AB_BEFORE_ENV (VAR=VALUE ...), before
#           under that environment; writes $OUT/ab.md (the comparison and
#           each leg's tables).
#
# Output ($OUT, default ./cuda_out): cuda.log (everything printed),
# cuda_runs.db.gz, bench_cuda.json, bench_cuda.md; at most 4 files.
#
# Environment (defaults in brackets; suite sizes: 0 leaves a suite out):
#   MATH_N CODE_N SAFETY_N CHAT_N LONG_N   prompts per suite
#        [suites: 200 100 100 100 10; all: 100 50 50 50 5]
#   MAX_TOKENS [128]  BATCH [64]  THREADS [16]  BI_PROFILES [cuda-bf16 cuda-bf16-vendor=profile=cuda-bf16&gemm=vendor]
#   BI_LIMIT   [unset] --limit for the four batch-invariance runs only
#   MODELS     [every models/*.gguf but guard models] space-separated stems
#   BUDGET_S   [570] wall-clock budget of the whole call, in seconds
#   BENCH_RESERVE_S [200] (all) seconds kept for bench while suites run
#   OPS_TIMEOUT_S   [240] per test program
#   BENCH_ARGS [none] extra bench_cuda options, e.g. "--big none --iters 3"
#   DB         [a fresh store under $TMPDIR] an existing store resumes its runs
#   AB_BUNDLE  (ab) the "before" build, laid out as BUNDLE
#   AB_PROFILES [cuda-f32 cuda-bf16 cuda-fp8]  AB_LOGPROBS [2]  AB_ROUNDS [2]
#   AB_BEFORE_ENV [none] (ab) e.g. DRIFT_CUDA_ATT_GM=1
#
# Exit: 0 everything ran and passed; 1 a test, run or benchmark failed;
# 3 nothing failed but the time budget left steps out (listed at the end);
# 2 bad arguments. Scoring and comparing happen on the dev machine (see the
# commands printed at the end).
set -u -o pipefail

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
[ $# -eq 2 ] || { usage >&2; exit 2; }
BUNDLE=$1 MODE=$2
case "$MODE" in ops | suites | bench | all | ab) ;; *) echo "cuda.sh: MODE must be ops, suites, bench, all or ab (got '$MODE')" >&2; exit 2 ;; esac
if [ "$MODE" = ab ]; then
  [ -n "${AB_BUNDLE:-}" ] && [ -d "$AB_BUNDLE" ] || { echo "cuda.sh: ab needs AB_BUNDLE, the other build's directory" >&2; exit 2; }
fi
[ -d "$BUNDLE" ] || { echo "cuda.sh: $BUNDLE: no such directory" >&2; exit 2; }
[ -d models ] || { echo "cuda.sh: run from the repository root (no models/ here)" >&2; exit 2; }

OUT=${OUT:-$PWD/cuda_out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/cuda.log") 2>&1
TEE_PID=$!

BUDGET_S=${BUDGET_S:-570}
BENCH_RESERVE_S=${BENCH_RESERVE_S:-200}
OPS_TIMEOUT_S=${OPS_TIMEOUT_S:-240}
MAX_TOKENS=${MAX_TOKENS:-128}
BATCH=${BATCH:-64}
THREADS=${THREADS:-16}
BI_PROFILES=${BI_PROFILES:-${BI_PROFILE:-cuda-bf16 cuda-bf16-vendor=profile=cuda-bf16&gemm=vendor}}
BI_LIMIT=${BI_LIMIT:-}
BENCH_ARGS=${BENCH_ARGS:-}
if [ "$MODE" = all ]; then d=(100 50 50 50 5); else d=(200 100 100 100 10); fi
MATH_N=${MATH_N:-${d[0]}} CODE_N=${CODE_N:-${d[1]}} SAFETY_N=${SAFETY_N:-${d[2]}} CHAT_N=${CHAT_N:-${d[3]}} LONG_N=${LONG_N:-${d[4]}}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/driftbench_cuda.XXXXXX")
DB=${DB:-$WORK/cuda_runs.db}

# binaries and libraries (tools/device/bundle.sh packs them as BUNDLE/bundle.tar.xz)
unpack() {
  if [ ! -e "$1/bin/driftbench" ] && [ ! -e "$1/driftbench" ] && [ -f "$1/bundle.tar.xz" ]; then
    echo "cuda.sh: unpacking $1/bundle.tar.xz"
    tar -xJf "$1/bundle.tar.xz" -C "$1" || { echo "cuda.sh: cannot unpack $1/bundle.tar.xz"; exit 1; }
  fi
}
unpack "$BUNDLE"
[ "$MODE" = ab ] && unpack "$AB_BUNDLE"
find_bin() {
  local d
  for d in "$BUNDLE/bin" "$BUNDLE"; do [ -x "$d/$1" ] && { echo "$d/$1"; return 0; }; done
  return 1
}
libs=
for d in "$BUNDLE/lib" "$BUNDLE/../lib"; do [ -d "$d" ] && libs="$libs${libs:+:}$(cd "$d" && pwd)"; done
export LD_LIBRARY_PATH="$libs${libs:+:}/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DRIFT_SOURCE=$PWD DRIFT_BUILD=$BUNDLE DRIFT_SHARED=$PWD/../shared

# bookkeeping: every step's name, status and seconds, for the summary
STEPS=() FAILED=0 SKIPPED=0
note() { STEPS+=("$(printf '%-44s %-9s %5ss' "$1" "$2" "$3")"); }
left() { echo $((BUDGET_S - SECONDS)); }
say() { echo; echo "=== $(date -u +%H:%M:%S) [+${SECONDS}s] $*"; }

# step NAME TIMEOUT CMD...: runs CMD under a timeout (SIGINT first, so
# `driftbench run` stores what it has and can resume), records the outcome.
# STEP_STDOUT=FILE sends CMD's stdout there; STEP_CUT_OK=1 counts a timeout
# as incomplete (exit 3) instead of failed.
step() {
  local name=$1 limit=$2; shift 2
  if [ "$limit" -lt 10 ]; then
    say "SKIP $name: time budget spent"
    note "$name" SKIPPED 0; SKIPPED=$((SKIPPED + 1)); return 3
  fi
  say "RUN $name (timeout ${limit}s): $*"
  local t0=$SECONDS rc
  if [ -n "${STEP_STDOUT:-}" ]; then timeout --signal=INT --kill-after=15 "$limit" "$@" >"$STEP_STDOUT"
  else timeout --signal=INT --kill-after=15 "$limit" "$@"; fi
  rc=$?
  if [ $rc -eq 0 ]; then note "$name" ok $((SECONDS - t0))
  elif [ $rc -eq 77 ]; then note "$name" "NO-GPU(77)" $((SECONDS - t0)); FAILED=$((FAILED + 1)) # a test's "skipped: no GPU"
  elif [ $rc -eq 124 ] && [ -n "${STEP_CUT_OK:-}" ]; then note "$name" "CUT" $((SECONDS - t0)); SKIPPED=$((SKIPPED + 1))
  elif [ $rc -eq 124 ]; then note "$name" TIMEOUT $((SECONDS - t0)); FAILED=$((FAILED + 1))
  else note "$name" "FAIL($rc)" $((SECONDS - t0)); FAILED=$((FAILED + 1)); fi
  return $rc
}

need_bin() {
  find_bin "$1" >/dev/null || { say "FAIL: $1 is not in $BUNDLE/bin or $BUNDLE"; note "$1 present" FAIL 0; FAILED=$((FAILED + 1)); return 1; }
}

cuda_built() {
  local v
  v=$("$(find_bin driftbench)" version --gpu 2>&1)
  echo "$v"
  if grep -q "cuda: not built" <<<"$v"; then
    say "FAIL: this driftbench was built without the CUDA backend; rebuild the bundle on a machine with nvcc"
    note "driftbench has the CUDA backend" FAIL 0; FAILED=$((FAILED + 1)); return 1
  fi
  if grep -q "cuda: built in, 0 GPUs" <<<"$v"; then
    say "FAIL: driftbench sees no GPU (driver, CUDA_VISIBLE_DEVICES?)"
    note "driftbench sees a GPU" FAIL 0; FAILED=$((FAILED + 1)); return 1
  fi
}

do_ops() {
  say "ops: the GPU"
  if nvidia-smi -L; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null
    note "nvidia-smi -L" ok 0
  else
    note "nvidia-smi -L" FAIL 0; FAILED=$((FAILED + 1))
  fi
  need_bin driftbench && cuda_built
  local t lim
  for t in test_cuda_ops test_cuda_model; do
    need_bin "$t" || continue
    lim=$OPS_TIMEOUT_S; [ "$(left)" -lt "$lim" ] && lim=$(left)
    step "$t" "$lim" "$(find_bin "$t")"
  done
}

models() {
  if [ -n "${MODELS:-}" ]; then echo "$MODELS"; return; fi
  local f n
  for f in models/*.gguf; do
    n=$(basename "$f" .gguf)
    case "$n" in *guard*) continue ;; esac
    echo "$n"
  done
}

snapshot_db() {
  [ -f "$DB" ] || return 0
  gzip -c "$DB" >"$OUT/cuda_runs.db.gz.part" && mv "$OUT/cuda_runs.db.gz.part" "$OUT/cuda_runs.db.gz"
}

# one_run LABEL TARGET_QUERY BATCH [extra run options]: one `driftbench run` into the store
one_run() {
  local label=$1 query=$2 b=$3; shift 3
  local m=${label#*@}
  local reserve=0 lim
  [ "$MODE" = all ] && reserve=$BENCH_RESERVE_S
  lim=$(($(left) - reserve))
  # cut by the budget = incomplete, not failed: the run resumes under the same label
  STEP_CUT_OK=1 step "run $label" "$lim" "$(find_bin driftbench)" run --db "$DB" --label "$label" \
    --target "embedded:models/$m.gguf?$query&batch=$b" --concurrency "$b" --config "batch=$b" \
    "${SUITE_ARGS[@]}" --max-tokens "$MAX_TOKENS" "$@"
  snapshot_db
}

do_suites() {
  need_bin driftbench && cuda_built || return 0
  SUITE_ARGS=()
  local s n
  for s in math:$MATH_N code:$CODE_N safety:$SAFETY_N chat:$CHAT_N long:$LONG_N; do
    n=${s#*:}
    [ "$n" -gt 0 ] && SUITE_ARGS+=(--suite "builtin:${s%%:*}?n=$n")
  done
  [ ${#SUITE_ARGS[@]} -gt 0 ] || { say "suites: every suite size is 0; nothing to run"; return 0; }
  local ms
  ms=$(models | tr '\n' ' ')
  say "suites: models: $ms; ${SUITE_ARGS[*]}; max_tokens $MAX_TOKENS; batch $BATCH; CPU threads $THREADS; store $DB"
  local m
  # the precision and hardware pairs first, for every model
  for m in $ms; do
    one_run "cpu-f32@$m" "profile=cpu-f32&threads=$THREADS" "$BATCH"
    one_run "cuda-f32@$m" "profile=cuda-f32" "$BATCH"
    one_run "cpu-bf16@$m" "profile=cpu-bf16&threads=$THREADS" "$BATCH"
    one_run "cuda-bf16@$m" "profile=cuda-bf16" "$BATCH"
    one_run "cuda-fp8@$m" "profile=cuda-fp8" "$BATCH"
  done
  # batch invariance: batch-$BATCH runs first (fast), batch 1 last (one sequence at a time)
  local lim=()
  [ -n "$BI_LIMIT" ] && lim=(--limit "$BI_LIMIT")
  for m in $ms; do
    for bp in $BI_PROFILES; do
      bn=${bp%%=*} bq=profile=$bp; [ "$bn" != "$bp" ] && bq=${bp#*=}
      one_run "$bn-bi1-b$BATCH@$m" "$bq&batch_invariant=1" "$BATCH" "${lim[@]}"
      one_run "$bn-bi0-b$BATCH@$m" "$bq&batch_invariant=0" "$BATCH" "${lim[@]}"
    done
  done
  for m in $ms; do
    for bp in $BI_PROFILES; do
      bn=${bp%%=*} bq=profile=$bp; [ "$bn" != "$bp" ] && bq=${bp#*=}
      one_run "$bn-bi1-b1@$m" "$bq&batch_invariant=1" 1 "${lim[@]}"
      one_run "$bn-bi0-b1@$m" "$bq&batch_invariant=0" 1 "${lim[@]}"
    done
  done
  [ -f "$DB" ] && say "suites: store $DB ($(du -h "$DB" | cut -f1)) -> $OUT/cuda_runs.db.gz ($(du -h "$OUT/cuda_runs.db.gz" | cut -f1))"
}

do_bench() {
  need_bin bench_cuda || return 0
  # the tables (stdout) to a file, shown after; progress (stderr) as it comes
  local extra=()
  read -ra extra <<<"$BENCH_ARGS"
  STEP_STDOUT=$WORK/bench_cuda.md step "bench_cuda" "$(left)" "$(find_bin bench_cuda)" "$OUT/bench_cuda.json" --models models \
    --cpu-threads "$THREADS" "${extra[@]}"
  cat "$WORK/bench_cuda.md"
  cp "$WORK/bench_cuda.md" "$OUT/bench_cuda.md"
}

# ab: the same runs through both builds, compared response by response; then
# bench_cuda legs alternating between them
ab_bin() { # ab_bin WHICH NAME: NAME of the after (BUNDLE) or before (AB_BUNDLE) build
  local d b
  [ "$1" = after ] && b=$BUNDLE || b=$AB_BUNDLE
  for d in "$b/bin" "$b"; do [ -x "$d/$2" ] && { echo "$d/$2"; return 0; }; done
  return 1
}
do_ab() {
  local w m p pn pq n s args=()
  for s in math:$MATH_N code:$CODE_N safety:$SAFETY_N chat:$CHAT_N long:$LONG_N; do
    n=${s#*:}
    [ "$n" -gt 0 ] && args+=(--suite "builtin:${s%%:*}?n=$n")
  done
  for w in before after; do
    ab_bin "$w" driftbench >/dev/null || { say "FAIL: no driftbench in the $w build"; note "$w driftbench present" FAIL 0; FAILED=$((FAILED + 1)); return 0; }
  done
  say "ab: after $BUNDLE, before $AB_BUNDLE; models $(models | tr '\n' ' '); ${args[*]}; batch $BATCH; --logprobs ${AB_LOGPROBS:-2}"
  for m in $(models); do
    for p in ${AB_PROFILES:-cuda-f32 cuda-bf16 cuda-fp8}; do
      pn=${p%%=*} pq=profile=$p
      [ "$pn" != "$p" ] && pq=${p#*=}
      for w in before after; do
        STEP_CUT_OK=1 step "$w $pn@$m" "$(left)" "$(ab_bin "$w" driftbench)" run --db "$WORK/$w.db" --label "$pn@$m" \
          --target "embedded:models/$m.gguf?$pq&batch=$BATCH" --concurrency "$BATCH" --config "batch=$BATCH" \
          "${args[@]}" --max-tokens "$MAX_TOKENS" --logprobs "${AB_LOGPROBS:-2}" >/dev/null
      done
    done
  done
  say "ab: the two stores, response by response"
  if python3 - "$WORK/before.db" "$WORK/after.db" >"$WORK/ab.md" <<'PY'; then note "ab: same responses" ok 0; else note "ab: same responses" FAIL 0; FAILED=$((FAILED + 1)); fi
import sqlite3, sys
q = ("SELECT r.label, p.suite, p.prompt_id, x.replicate, x.failed, x.text, x.logprobs, x.completion_tokens "
     "FROM responses x JOIN runs r ON r.id = x.run_id JOIN prompts p ON p.id = x.prompt_rowid")
def load(path):
    return {(l, s, pid, rep): (f, t, lp, n) for l, s, pid, rep, f, t, lp, n in sqlite3.connect(path).execute(q)}
b, a = load(sys.argv[1]), load(sys.argv[2])
labels = sorted({k[0] for k in b} | {k[0] for k in a})
print("| run | responses before / after | failed | same text | same logprobs | tokens |")
print("|---|---:|---:|---:|---:|---:|")
bad = 0
for l in labels:
    kb = {k for k in b if k[0] == l}
    ka = {k for k in a if k[0] == l}
    both = kb & ka
    fail = sum(1 for k in both if b[k][0] or a[k][0])
    st = sum(1 for k in both if b[k][1] == a[k][1])
    sl = sum(1 for k in both if b[k][2] == a[k][2] and b[k][2] is not None)
    tok = sum(a[k][3] or 0 for k in both)
    print(f"| {l} | {len(kb)} / {len(ka)} | {fail} | {st} | {sl} | {tok} |")
    if kb != ka or fail or st != len(both) or sl != len(both) or not both:
        bad += 1
print(f"\n{len(labels)} runs, {bad} with a difference (or failed, missing or empty)")
sys.exit(1 if bad else 0)
PY
  cat "$WORK/ab.md"; cp "$WORK/ab.md" "$OUT/ab.md"
  local r leg extra=() env=()
  read -ra extra <<<"$BENCH_ARGS"
  for r in $(seq 1 "${AB_ROUNDS:-2}"); do
    for leg in before after ${AB_BEFORE_ENV:+before-env}; do
      env=()
      [ "$leg" = before-env ] && read -ra env <<<"$AB_BEFORE_ENV"
      ab_bin "${leg%-env}" bench_cuda >/dev/null || { note "$leg bench_cuda present" FAIL 0; FAILED=$((FAILED + 1)); continue; }
      STEP_STDOUT=$WORK/bench_$leg$r.md step "bench_cuda $leg $r ${env[*]}" "$(left)" env "${env[@]}" \
        "$(ab_bin "${leg%-env}" bench_cuda)" "$WORK/bench_$leg$r.json" --models models "${extra[@]}"
      { echo; echo "## bench_cuda, $leg, round $r ${env[*]}"; cat "$WORK/bench_$leg$r.md"; } >>"$OUT/ab.md"
    done
  done
}

say "bench/cuda.sh $MODE: bundle $BUNDLE, out $OUT, budget ${BUDGET_S}s, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
case "$MODE" in
  ops) do_ops ;;
  suites) do_suites ;;
  bench) do_bench ;;
  all) do_ops; do_suites; do_bench ;;
  ab) do_ab ;;
esac

say "summary ($MODE, ${SECONDS}s)"
for s in "${STEPS[@]}"; do echo "  $s"; done
if [ -f "$OUT/cuda_runs.db.gz" ]; then
  cat <<EOF

On the dev machine (store: files_at/cuda_runs.db.gz):
  gunzip -k cuda_runs.db.gz
  build/driftbench score --db cuda_runs.db --embedder 'embedded:models/qwen2-7m.gguf?profile=ref'
  for m in $(models | tr '\n' ' '); do
    build/driftbench compare --db cuda_runs.db --baseline cpu-f32@\$m  --target cuda-f32@\$m
    build/driftbench compare --db cuda_runs.db --baseline cpu-bf16@\$m --target cuda-bf16@\$m
    build/driftbench compare --db cuda_runs.db --baseline cuda-bf16@\$m --target cuda-fp8@\$m
    (each NAME of BI_PROFILES) build/driftbench compare --db cuda_runs.db --baseline NAME-bi1-b1@\$m --target NAME-bi1-b$BATCH@\$m
    (likewise bi0)
  done
  build/driftbench table --db cuda_runs.db --baseline 'cpu-f32@{model}'
  python3 bench/cuda_flips.py cuda_runs.db build/driftbench     # the table of bench/BENCHMARKS.md
EOF
fi
rm -rf "$WORK"
if [ $FAILED -gt 0 ]; then echo "RESULT: $FAILED step(s) FAILED"; rc=1
elif [ $SKIPPED -gt 0 ]; then echo "RESULT: INCOMPLETE: $SKIPPED step(s) left out for the time budget"; rc=3
else echo "RESULT: all steps passed"; rc=0; fi
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null # the log is complete before the call ends
exit $rc
