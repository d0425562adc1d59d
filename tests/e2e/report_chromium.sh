#!/usr/bin/env bash
# report_chromium.sh - a small matrix over a fixture model, run as two
# shards, merged, tabled and reported: the matrix page (decisions in its
# rows, fixed colour legend, contents) and the comparison page of one
# configuration (--target: verdict first, what was compared, decisions
# drawn against budgets; the gate's options change the verdict as they
# change compare's); a store of one configuration gives the comparison
# page by itself. Both pages are then rendered by headless Chromium
# (Debian's chromium) into PNGs. Without chromium the render step prints
# "SKIP: chromium not installed" (the rest still runs).
. "$(dirname "$0")/lib.sh"
work=$T
model="$S/tests/data/models/tiny-qwen2-f16.gguf"
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
"$D" -q matrix --spec "$work/spec.json" --db "$work/a.db" --shard 1/2 --embedder "$emb" || fail "matrix --shard 1/2"
"$D" -q matrix --spec "$work/spec.json" --db "$work/b.db" --shard 2/2 --embedder "$emb" || fail "matrix --shard 2/2"
"$D" merge --db "$work/m.db" "$work/a.db" "$work/b.db" || fail "merge"
"$D" table --db "$work/m.db" --baseline ref -o "$work/t.csv" || fail "table"
rows=$(( $(wc -l <"$work/t.csv") - 1 ))
[ "$rows" = 6 ] || { echo "FAIL: $rows table rows, expected 3 configurations x 2 workloads"; cat "$work/t.csv"; exit 1; }
# a bad spec is a parse error naming the field, exit 2
echo '{"suites":[],"baseline":"x"}' >"$work/bad.json"
"$D" matrix --spec "$work/bad.json" --db "$work/x.db" 2>"$work/err"; rc=$?
[ "$rc" = 2 ] && grep -q "suites" "$work/err" || { echo "FAIL: bad spec gave $rc"; cat "$work/err"; exit 1; }
"$D" report --db "$work/m.db" --baseline ref --html "$work/report.html" || fail "report (matrix page)"
for want in 'id="flipped"' 'id="heatmap"' '<nav class="toc">' 'class="dword' 'the default budgets), 10 and 20%'; do
    grep -qF "$want" "$work/report.html" || { echo "FAIL: matrix report lacks $want"; exit 1; }
done
grep -q 'class="verdict' "$work/report.html" && { echo "FAIL: the matrix page has a verdict"; exit 1; }
# the comparison page of one configuration: the verdict leads
"$D" report --db "$work/m.db" --baseline ref --target tiny-qwen2/int4 --html "$work/cmp.html" 2>"$work/cmp.err" ||
    { cat "$work/cmp.err"; fail "report (comparison page)"; }
grep -q 'tiny-qwen2/int4' "$work/cmp.err" || { echo "FAIL: report said"; cat "$work/cmp.err"; exit 1; }
first=$(grep -o -m1 -E '<section class="verdict|id="compared"|id="decisions"|id="heatmap"' "$work/cmp.html" | head -1)
[ "$first" = '<section class="verdict' ] || { echo "FAIL: the comparison page starts with $first"; exit 1; }
for want in 'id="compared"' 'id="decisions"' '<tr><th>rule</th>' '<tr><th>error rates</th>' 'decoding: max_tokens'; do
    grep -qF "$want" "$work/cmp.html" || { echo "FAIL: comparison page lacks $want"; exit 1; }
done
# its verdict is compare's, under the same gate options
for gate in "" "--budget math=100,chat=100" "--budget math=none,chat=none" "--decide point --max-left-out 50"; do
    # shellcheck disable=SC2086
    "$D" -q report --db "$work/m.db" --baseline ref --target tiny-qwen2/int4 $gate --html "$work/g.html" || fail "report, gate '$gate'"
    # shellcheck disable=SC2086
    "$D" compare --db "$work/m.db" --baseline ref --target tiny-qwen2/int4 $gate >"$work/g.txt" 2>/dev/null
    want=$(sed -n 's/^verdict: \([A-Za-z ]*\) (exit.*/\1/p' "$work/g.txt" | head -1)
    got=$(sed -n 's/.*<div class="vword">\([^<]*\)<.*/\1/p' "$work/g.html")
    [ -n "$want" ] && [ "$want" = "$got" ] || { echo "FAIL: gate '$gate': compare says '$want', the page '$got'"; exit 1; }
    line=$(grep '^verdict:' "$work/g.txt" | head -1 | sed 's/^verdict: //')
    grep -qF "<p class=\"vsum\">$line</p>" "$work/g.html" || { echo "FAIL: gate '$gate': no '$line' on the page"; exit 1; }
done
# a store of one configuration besides its baseline gives the comparison page by itself
"$D" -q run --db "$work/one.db" --label ref --target "$emb" --suite 'builtin:math?n=4' --max-tokens 8 || fail "run ref"
"$D" -q run --db "$work/one.db" --label 'int4<x>' --target "embedded:$model?profile=cpu-f32&weights=int4&threads=1" \
    --suite 'builtin:math?n=4' --max-tokens 8 || fail "run int4<x>"
"$D" -q score --db "$work/one.db" || fail "score"
"$D" -q report --db "$work/one.db" --baseline ref --html "$work/one.html" || fail "report (one comparison)"
grep -q '<section class="verdict' "$work/one.html" && grep -qF 'int4&lt;x&gt;' "$work/one.html" \
    || { echo "FAIL: a store of one comparison did not give its page"; exit 1; }
"$D" -q report --db "$work/one.db" --baseline ref --matrix --html "$work/one_m.html" || fail "report --matrix"
grep -q 'id="heatmap"' "$work/one_m.html" || { echo "FAIL: --matrix"; exit 1; }
if ! command -v chromium >/dev/null 2>&1; then
    echo "SKIP: chromium not installed (matrix, merge, table and both report pages checked)"
    exit 0
fi
shoot() { # page.html -> page.png, checked
    local profile size sig
    profile=$(mktemp -d) || fail "mktemp -d"
    timeout 180 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
        --screenshot="${1%.html}.png" --window-size=1200,2000 "file://$1" >/dev/null 2>&1 || true
    rm -rf "$profile"
    [ -s "${1%.html}.png" ] || { echo "FAIL: chromium wrote no screenshot of $1"; exit 1; }
    sig=$(head -c 8 "${1%.html}.png" | od -An -tx1 | tr -d ' \n')
    [ "$sig" = "89504e470d0a1a0a" ] || { echo "FAIL: not a PNG"; exit 1; }
    size=$(stat -c %s "${1%.html}.png")
    [ "$size" -gt 20000 ] || { echo "FAIL: screenshot of $size bytes looks blank"; exit 1; }
    echo "$size"
}
size=$(shoot "$work/report.html") || { echo "$size"; exit 1; }
csize=$(shoot "$work/cmp.html") || { echo "$csize"; exit 1; }
if [ -n "${DRIFT_KEEP_SCREENSHOT:-}" ]; then
    cp "$work/report.png" "$DRIFT_KEEP_SCREENSHOT"; cp "$work/report.html" "${DRIFT_KEEP_SCREENSHOT%.png}.html"
    cp "$work/cmp.png" "${DRIFT_KEEP_SCREENSHOT%.png}-comparison.png"; cp "$work/cmp.html" "${DRIFT_KEEP_SCREENSHOT%.png}-comparison.html"
fi
echo "PASS: both report pages rendered by chromium ($size and $csize bytes PNG)"
