#!/usr/bin/env bash
# report_chromium.sh - a small matrix over a fixture model, run as two
# shards, merged, tabled and reported; the HTML page is then rendered by
# headless Chromium (Debian's chromium) into a PNG. Without chromium the
# render step prints "SKIP: chromium not installed" (the rest still runs).
set -euo pipefail
: "${DRIFTBENCH:?set DRIFTBENCH to the CLI}"
: "${DRIFT_SOURCE:?set DRIFT_SOURCE to the repository root}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model="$DRIFT_SOURCE/tests/data/models/tiny-qwen2-f16.gguf"
cat >"$work/spec.json" <<JSON
{"name": "chromium", "suites": ["builtin:math?n=4", "builtin:chat?n=4"],
 "decoding": {"max_tokens": 16}, "baseline": "ref",
 "configs": [{"label": "ref", "target": "embedded:$model?profile=ref",
              "dims": {"model": "tiny-qwen2", "hardware": "ref", "precision": "f32", "framework": "ref"}}],
 "dimensions": {"precision": {"int4": "int4", "fp8": "fp8", "mxfp4": "mxfp4"}},
 "target": "embedded:$model?profile=cpu-f32&weights={precision}&threads=1",
 "label": "tiny-qwen2/{precision}"}
JSON
emb="embedded:$model?profile=ref"
"$DRIFTBENCH" -q matrix --spec "$work/spec.json" --db "$work/a.db" --shard 1/2 --embedder "$emb"
"$DRIFTBENCH" -q matrix --spec "$work/spec.json" --db "$work/b.db" --shard 2/2 --embedder "$emb"
"$DRIFTBENCH" merge --db "$work/m.db" "$work/a.db" "$work/b.db"
"$DRIFTBENCH" table --db "$work/m.db" --baseline ref -o "$work/t.csv"
rows=$(( $(wc -l <"$work/t.csv") - 1 ))
[ "$rows" = 6 ] || { echo "FAIL: $rows table rows, expected 3 configurations x 2 workloads"; cat "$work/t.csv"; exit 1; }
# a bad spec is a parse error naming the field, exit 2
echo '{"suites":[],"baseline":"x"}' >"$work/bad.json"
set +e
"$DRIFTBENCH" matrix --spec "$work/bad.json" --db "$work/x.db" 2>"$work/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "suites" "$work/err" || { echo "FAIL: bad spec gave $rc"; cat "$work/err"; exit 1; }
"$DRIFTBENCH" report --db "$work/m.db" --baseline ref --html "$work/report.html"
grep -q 'id="flipped"' "$work/report.html" || { echo "FAIL: report"; exit 1; }
if ! command -v chromium >/dev/null 2>&1; then
    echo "SKIP: chromium not installed (matrix, merge, table and report checked)"
    exit 0
fi
profile=$(mktemp -d)
timeout 180 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
    --screenshot="$work/report.png" --window-size=1200,2000 "file://$work/report.html" >/dev/null 2>&1 || true
rm -rf "$profile"
[ -s "$work/report.png" ] || { echo "FAIL: chromium wrote no screenshot"; exit 1; }
sig=$(head -c 8 "$work/report.png" | od -An -tx1 | tr -d ' \n')
[ "$sig" = "89504e470d0a1a0a" ] || { echo "FAIL: not a PNG"; exit 1; }
size=$(stat -c %s "$work/report.png")
[ "$size" -gt 20000 ] || { echo "FAIL: screenshot of $size bytes looks blank"; exit 1; }
if [ -n "${DRIFT_KEEP_SCREENSHOT:-}" ]; then cp "$work/report.png" "$DRIFT_KEEP_SCREENSHOT"; cp "$work/report.html" "${DRIFT_KEEP_SCREENSHOT%.png}.html"; fi
echo "PASS: report rendered by chromium ($size bytes PNG)"
