#!/usr/bin/env bash
# llamacpp_vs.sh - the embedded engine beside llama.cpp's llama-bench, in one
# run, on the same GGUF files, the same thread counts, prompt and decode
# lengths: prompt processing of PROMPT tokens (pp) and generation of GEN
# tokens from an empty context one at a time (tg), each the mean of REPS runs
# after a warm-up, as llama-bench measures them. Prints both tokens/s with
# the ratio (ours / llama.cpp) per model, test and thread count.
#
# usage: bench/llamacpp_vs.sh LLAMA_BIN [MODEL.gguf ...]
#   LLAMA_BIN: the bin directory of a llama.cpp you built (holding
#              llama-bench), e.g. ~/llama.cpp/build/bin. Default models:
#              models/*.gguf.
# environment: THREADS (1,2) PROMPT (128) GEN (64) REPS (5) ROUNDS (2: the
#   two programs alternate A B B A ..., and each figure is the mean over
#   rounds) PROFILE (cpu-f32) BUILD (build: where bench_engine_bench is).
#
# The machine may be shared: the load average is printed before and after;
# figures from a loaded machine swing by tens of percent, so compare the
# ratios of one run, not figures across runs.
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bin=$1
shift
lb="$bin/llama-bench"
[ -x "$lb" ] || { echo "llamacpp_vs.sh: no llama-bench in $bin (give llama.cpp's build/bin)" >&2; exit 2; }
build=${BUILD:-build}
eb="$build/bench_engine_bench"
[ -x "$eb" ] || { echo "llamacpp_vs.sh: no $eb: build first (cmake --build $build)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "llamacpp_vs.sh: python3 is needed to read llama-bench's JSON" >&2; exit 2; }
threads=${THREADS:-1,2}
prompt=${PROMPT:-128}
gen=${GEN:-64}
reps=${REPS:-5}
rounds=${ROUNDS:-2}
profile=${PROFILE:-cpu-f32}
for v in "$prompt" "$gen" "$reps" "$rounds"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || { echo "llamacpp_vs.sh: PROMPT, GEN, REPS and ROUNDS must be positive integers" >&2; exit 2; }
done
[[ "$threads" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "llamacpp_vs.sh: THREADS must look like 1,2" >&2; exit 2; }
if [ $# -eq 0 ]; then set -- models/*.gguf; fi
for m in "$@"; do [ -f "$m" ] || { echo "llamacpp_vs.sh: no model $m" >&2; exit 2; }; done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores visible"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "llama.cpp: $lb"
echo "ours: $eb, profile $profile; pp$prompt and tg$gen, threads $threads, $reps reps x $rounds rounds"

run_llama() { # model round
    "$lb" -m "$1" -p "$prompt" -n "$gen" -t "$threads" -r "$reps" -o json >"$out/llama.$3.$2.json" 2>"$out/llama.err" ||
        { echo "llama-bench failed on $1:" >&2; tail -5 "$out/llama.err" >&2; exit 1; }
}
run_ours() { # model round
    "$eb" --model "$1" --profiles "$profile" --threads "$threads" --prompt "$prompt" --gen "$gen" --reps "$reps" \
        --tg-from-empty --csv >"$out/ours.$3.$2.txt" 2>"$out/ours.err" ||
        { echo "bench_engine_bench failed on $1:" >&2; tail -5 "$out/ours.err" >&2; exit 1; }
}
i=0
for m in "$@"; do
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then run_llama "$m" "$r" "$i"; run_ours "$m" "$r" "$i"
        else run_ours "$m" "$r" "$i"; run_llama "$m" "$r" "$i"; fi
    done
    i=$((i + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$prompt" "$gen" "$@" <<'EOF'
import glob, json, os, sys
out, prompt, gen, models = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def mean(v): return sum(v) / len(v) if v else float("nan")
commits = set()
print(f"{'model':<22} {'test':<7} {'threads':>7} {'llama.cpp t/s':>14} {'ours t/s':>10} {'ours/llama':>10}")
for i, m in enumerate(models):
    ll, ours = {}, {}
    for f in sorted(glob.glob(os.path.join(out, f"llama.{i}.*.json"))):
        for t in json.load(open(f)):
            commits.add(str(t.get("build_commit", "?")))
            test = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
            ll.setdefault((test, int(t["n_threads"])), []).append(float(t["avg_ts"]))
    for f in sorted(glob.glob(os.path.join(out, f"ours.{i}.*.txt"))):
        for line in open(f):
            if not line.startswith("csv,engine,"): continue
            c = line.strip().split(",")
            th = int(c[3])
            ours.setdefault((f"pp{prompt}", th), []).append(float(c[6]))
            ours.setdefault((f"tg{gen}", th), []).append(float(c[8]))
    for key in sorted(set(ll) | set(ours), key=lambda k: (k[0][:2], k[1])):
        a, b = mean(ll.get(key, [])), mean(ours.get(key, []))
        print(f"{os.path.basename(m):<22} {key[0]:<7} {key[1]:>7} {a:>14.1f} {b:>10.1f} {b / a:>9.2f}x")
print("llama.cpp build_commit: " + ", ".join(sorted(commits)))
EOF
