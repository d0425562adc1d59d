#!/usr/bin/env bash
# lab_pilot.sh - does each lab level move answers? (issue 36)
#
# For each model: the baseline (precision=w16a16&framework=vllm&hardware=avx2)
# and every level (the baseline with one preset swapped) answer the same
# prompts (greedy, --max-tokens 128) through `driftbench run`; `driftbench
# score` labels them and `driftbench compare --format json` pairs each level
# with the baseline. The table counts, per level and model, the answers whose
# text differs from the baseline's (read from the store), the label flips
# (compare's flips, both directions) and the level's answer rate.
# A cpu-f32 row runs the old lab's baseline (profile=cpu-f32: f32 throughout,
# isa=auto) for its speed and its distance from the new one.
# An A/A row runs the baseline a second time (threads=1 instead of 2, the
# concurrency the other runs use): it must change nothing.
#
# PAIRS (optional, "A:B ..." of levels in LEVELS) adds rows that compare two
# levels with each other instead of with the baseline (is a level distinct
# from its nearest neighbour?): texts changed, label flips, both accuracies.
#
#   bench/lab_pilot.sh [OUTDIR]      (env: DRIFTBENCH, MODELS, SUITES, LEVELS, CONC, PAIRS)
#
# Writes OUTDIR/pilot.db, OUTDIR/pilot.md (the table) and OUTDIR/cmp-*.json.
# CPU only, modest: --concurrency ${CONC:-2}.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/lab_pilot}
BIN=${DRIFTBENCH:-build/driftbench}
MODELS=${MODELS:-"models/llama-fragile-7m.gguf models/qwen2-fragile-7m.gguf"}
SUITES=${SUITES:-"builtin:math?limit=150 builtin:code?limit=40"}
CONC=${CONC:-2}
BASE="precision=w16a16&framework=vllm&hardware=avx2"
LEVELS=${LEVELS:-"hardware=avx512 hardware=avx512-bf16 hardware=sse2 hardware=tc-bf16 hardware=tc-fp8 hardware=tc-fp8-nopromote
precision=w16a16-f16 precision=w8a8-fp8 precision=w8a8-int8 precision=w4a16 precision=w4a16-mxfp4 precision=w4a16-nvfp4
framework=sglang framework=trtllm framework=hf-eager"}
mkdir -p "$OUT"
DB="$OUT/pilot.db"

run() { # label spec model
    local t0 t1 s name lim
    for s in $SUITES; do
        name=${s%%\?*}
        lim=${s#*limit=}
        t0=$(date +%s.%N)
        "$BIN" run --db "$DB" --label "$1-${name#builtin:}" --target "embedded:$3?$2" --suite "$name" --limit "$lim" \
            --max-tokens 128 --concurrency "$CONC" >/dev/null 2>"$OUT/run-$1-${name#builtin:}.log"
        t1=$(date +%s.%N)
        echo "$1-${name#builtin:} $(echo "$t1 - $t0" | bc)" >>"$OUT/times.txt"
    done
}

touch "$OUT/times.txt" # appended: a resumed run (nothing left to ask) keeps its first, real time
for m in $MODELS; do
    mn=$(basename "$m" .gguf)
    run "$mn-base" "$BASE" "$m"
    run "$mn-aa" "$BASE&threads=1" "$m"
    run "$mn-cpu-f32" "profile=cpu-f32" "$m" # the old lab's baseline, for its speed and its distance
    for lv in $LEVELS; do run "$mn-$lv" "$BASE&$lv" "$m"; done
done
"$BIN" score --db "$DB" >/dev/null 2>"$OUT/score.log"

# row MODEL BASE TARGET SUITE JSON NAME [SECS]: compare's JSON of MODEL-TARGET-SUITE against
# MODEL-BASE-SUITE into JSON, then one table row per workload: answers, texts changed (read from
# the store), compare's flips and accuracies, and with SECS (a level's run) its seconds and
# tokens/s ("-" without: a pair of levels)
row() {
    "$BIN" compare --db "$DB" --baseline "$1-$2-$4" --target "$1-$3-$4" --format json --no-risk \
        >"$5" 2>/dev/null || true
    python3 - "$DB" "$1-$2-$4" "$1-$3-$4" "$5" "$1" "$6" "${7:-}" <<'EOF'
import json, sqlite3, sys
db, base, lvl, cmpf, model, level, secs = sys.argv[1:]
c = sqlite3.connect(db)
q = """select p.workload, count(*), sum(a.text != b.text)
       from responses a join runs ra on a.run_id = ra.id
       join responses b on b.prompt_rowid = a.prompt_rowid and b.replicate = a.replicate
       join runs rb on b.run_id = rb.id join prompts p on p.id = a.prompt_rowid
       where ra.label = ? and rb.label = ? and a.failed = 0 and b.failed = 0 group by p.workload"""
speed = "- | -"
if secs:
    toks = c.execute("select sum(completion_tokens) from responses r join runs u on r.run_id = u.id where u.label = ?", (lvl,)).fetchone()[0] or 0
    speed = f"{secs} | {toks / max(float(secs or 1), 1e-9):.0f}"
try:
    cmp = {w["workload"]: w for w in json.load(open(cmpf))["workloads"]}
except Exception:
    cmp = {}
for w, n, d in sorted(c.execute(q, (base, lvl))):
    x = cmp.get(w, {})
    f = lambda k, fmt="{}": fmt.format(x[k]) if k in x and x[k] is not None else "-"
    print(f"| {model} | {level} | {w} | {n} | {d} | {f('flips')} | {f('correct_to_incorrect')} | "
          f"{f('incorrect_to_correct')} | {f('baseline_accuracy', '{:.3f}')} | {f('target_accuracy', '{:.3f}')} | {speed} |")
EOF
}

{
    echo "| model | level | workload | n | texts changed | label flips | c->i | i->c | base acc | level acc | run s | tokens/s |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for m in $MODELS; do
        mn=$(basename "$m" .gguf)
        for lv in aa cpu-f32 $LEVELS; do
            for s in $SUITES; do
                sn=${s%%\?*}
                sn=${sn#builtin:}
                secs=$(awk -v l="$mn-$lv-$sn" '$1 == l && $2 > m {m = $2} END {printf "%.0f", m}' "$OUT/times.txt")
                row "$mn" base "$lv" "$sn" "$OUT/cmp-$mn-$lv-$sn.json" "$lv" "$secs"
            done
        done
    done
    for pr in ${PAIRS:-}; do
        a=${pr%%:*}
        b=${pr#*:}
        for m in $MODELS; do
            mn=$(basename "$m" .gguf)
            for s in $SUITES; do
                sn=${s%%\?*}
                sn=${sn#builtin:}
                row "$mn" "$b" "$a" "$sn" "$OUT/pair-$mn-$a-$b-$sn.json" "$a vs $b"
            done
        done
    done
} >"$OUT/pilot.md"
cat "$OUT/pilot.md"
