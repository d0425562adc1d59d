#!/usr/bin/env bash
# kl_vs_llamacpp.sh - `driftbench divergence --text` beside llama.cpp's own
# `llama-perplexity --kl-divergence` on the same pair of GGUF files and the
# same text: the model as shipped (F16) is the baseline; it is quantized with
# llama-quantize to each of TYPES (into a temporary directory, never the
# repository) and each quantized file is the target. Both tools split the
# text the same way (chunks of CTX tokens, the second half of each scored);
# llama-perplexity's engine runs the quantized matmuls its way (Q4_0/Q8_0
# weights against Q8_0-quantized activations), ours dequantizes the weights
# and runs f32, so the figures agree within that difference, not to the bit.
# Prints, per type: PPL(base), mean KL with its uncertainty, same top-1 and
# RMS delta-p from each tool, and the ratios ours / llama.cpp.
#
# usage: bench/kl_vs_llamacpp.sh LLAMA_BIN [MODEL.gguf [TEXT]]
#   LLAMA_BIN: llama.cpp's build/bin (llama-quantize, llama-perplexity).
#   MODEL: default models/qwen2-7m.gguf; TEXT: default README.md.
# environment: CTX (256) TYPES (Q4_0 Q8_0) THREADS (2) PROFILE (cpu-f32,
#   the embedded profile of both stacks) BUILD (build) KEEP (1: keep the
#   temporary directory and print its path).
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bin=$1
model=${2:-models/qwen2-7m.gguf}
text=${3:-README.md}
ctx=${CTX:-256}
types=${TYPES:-Q4_0 Q8_0}
threads=${THREADS:-2}
profile=${PROFILE:-cpu-f32}
build=${BUILD:-build}
db="$build/driftbench"
for t in llama-quantize llama-perplexity; do
    [ -x "$bin/$t" ] || { echo "kl_vs_llamacpp.sh: no $t in $bin (give llama.cpp's build/bin)" >&2; exit 2; }
done
[ -x "$db" ] || { echo "kl_vs_llamacpp.sh: no $db: build first (cmake --build $build)" >&2; exit 2; }
[ -r "$model" ] || { echo "kl_vs_llamacpp.sh: no model file $model" >&2; exit 2; }
[ -r "$text" ] || { echo "kl_vs_llamacpp.sh: no text file $text" >&2; exit 2; }
[[ "$ctx" =~ ^[1-9][0-9]*$ ]] || { echo "kl_vs_llamacpp.sh: CTX must be a positive integer" >&2; exit 2; }
tmp=$(mktemp -d /tmp/kl_vs_llamacpp.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "files in $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi

# figure NAME FILE: the first number after "NAME:" in a llama-perplexity-style log
figure() { awk -v k="$1" 'index($0, k) == 1 { sub(/^[^:]*:[ ]*/, ""); print $1; exit }' "$2"; }
unc() { awk -v k="$1" 'index($0, k) == 1 { sub(/^[^±]*±[ ]*/, ""); print $1; exit }' "$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.3f", a / b }'; }

echo "machine: $(uname -m), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
ver=$("$bin/llama-perplexity" --version 2>&1 || true)
ver=$(printf '%s\n' "$ver" | grep -m1 -o 'version: .*' || true)
echo "model $model, text $text, ctx $ctx, profile $profile, llama.cpp ${ver:-?}"
"$bin/llama-perplexity" -m "$model" -f "$text" -c "$ctx" -t "$threads" --kl-divergence-base "$tmp/base.kld" \
    > "$tmp/base.log" 2>&1 || { tail -5 "$tmp/base.log" >&2; exit 1; }
printf '\n%-6s %-10s %12s %22s %16s %10s\n' type tool "PPL(base)" "mean KL ± unc" "same top-1 %" "RMS dp %"
for q in $types; do
    qf="$tmp/$(basename "$model" .gguf)-$q.gguf"
    "$bin/llama-quantize" "$model" "$qf" "$q" > "$tmp/quant-$q.log" 2>&1 || { tail -5 "$tmp/quant-$q.log" >&2; exit 1; }
    lp="$tmp/llama-$q.log"
    "$bin/llama-perplexity" -m "$qf" -f "$text" -c "$ctx" -t "$threads" --kl-divergence-base "$tmp/base.kld" \
        --kl-divergence > "$lp" 2>&1 || { tail -5 "$lp" >&2; exit 1; }
    dp="$tmp/driftbench-$q.txt"
    "$db" --quiet divergence --text "$text" --ctx "$ctx" --baseline "embedded:$model?profile=$profile" \
        --target "embedded:$qf?profile=$profile" > "$dp"
    # llama-perplexity's "Mean PPL(base)" of a KL run comes from its 16-bit log probabilities,
    # clipped 16 nats under the top; its plain perplexity run's final estimate is the model's own
    l_ppl=$(awk '/Final estimate: PPL =/ { for (i = 1; i <= NF; i++) if ($i == "=") { print $(i + 1); exit } }' "$tmp/base.log")
    d_ppl=$(figure "Mean PPL(base)" "$dp")
    l_kl=$(figure "Mean    KLD" "$lp") d_kl=$(figure "Mean    KLD" "$dp")
    l_klu=$(unc "Mean    KLD" "$lp") d_klu=$(unc "Mean    KLD" "$dp")
    l_top=$(figure "Same top p" "$lp") d_top=$(figure "Same top p" "$dp")
    l_rms=$(figure "RMS Δp" "$lp") d_rms=$(figure "RMS Δp" "$dp")
    printf '%-6s %-10s %12s %22s %16s %10s\n' "$q" llama.cpp "$l_ppl" "$l_kl ± $l_klu" "$l_top" "$l_rms"
    printf '%-6s %-10s %12s %22s %16s %10s\n' "$q" driftbench "$d_ppl" "$d_kl ± $d_klu" "$d_top" "$d_rms"
    printf '%-6s %-10s %12s %22s %16s %10s\n' "$q" ratio "$(ratio "$d_ppl" "$l_ppl")" "$(ratio "$d_kl" "$l_kl")" \
        "$(ratio "$d_top" "$l_top")" "$(ratio "$d_rms" "$l_rms")"
    # the difference of the two means against its noise: the larger of the two uncertainties
    awk -v a="$d_kl" -v b="$l_kl" -v ua="$d_klu" -v ub="$l_klu" \
        'BEGIN { u = ua > ub ? ua : ub; printf "%-6s mean KL differs by %.6f = %.2f x the larger uncertainty\n", "", a - b, (u > 0 ? (a - b) / u : 0) }' \
        | sed "s/^ */$q: /"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
