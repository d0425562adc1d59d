#!/usr/bin/env bash
# bench/view_comparisons.sh BUILD_DIR [MODELS] [PROMPTS] - what `driftbench
# view`'s GET /api/comparisons costs on a store with many runs, against the
# same comparisons done by `driftbench compare`, one process each.
#
# The store is built with the CLI: `matrix` over the shipped models
# (the first MODELS of models/*.gguf, default 5) x weights {bf16, int8, int4}
# x reduction order {sequential, pairwise}, embedded, PROMPTS math + PROMPTS
# safety prompts each (default 8), 32 tokens; so 30 runs by default, and
# 435 pairs of runs sharing prompts, of which the view lists 300 (its
# limit). Then, with a view on a free port:
#   first    the first GET /api/comparisons (every listed table built: compare
#            run for each pair, its flip risk)
#   again    the same request twice more (the tables cached while their runs
#            are unchanged)
#   compare  `driftbench compare --format json` for each comparison the view
#            listed, one after another (a process each: the store opened, the
#            scored sets loaded, compare, JSON out), summed
# Wall seconds from curl's time_total and date +%s.%N. Prints one line per
# figure. The store is built in a temporary directory and removed at the
# end; with DB=FILE it is built there (if FILE does not exist yet) and kept,
# so two builds of the CLI can be timed on the same store.
set -u
B=$(cd "${1:-build}" && pwd)
MODELS=${2:-5}
PROMPTS=${3:-8}
S=$(cd "$(dirname "$0")/.." && pwd)
D=$B/driftbench
[ -x "$D" ] || { echo "view_comparisons: build $B first (driftbench)"; exit 2; }
command -v curl > /dev/null && command -v python3 > /dev/null || { echo "view_comparisons: needs curl and python3"; exit 2; }
T=$(mktemp -d)
VPID=
cleanup() { [ -n "$VPID" ] && kill "$VPID" 2> /dev/null; rm -rf "$T"; }
trap cleanup EXIT
now() { date +%s.%N; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a-b}'; }

# ---- the store: a matrix over the shipped models ----
models=$(ls "$S"/models/*.gguf | head -n "$MODELS")
{
  printf '{"suites": ["builtin:math", "builtin:safety"], "limit": %d, "decoding": {"max_tokens": 32},\n' "$PROMPTS"
  printf ' "baseline": "%s/bf16/sequential", "dimensions": {"model": {' "$(basename "$(echo "$models" | head -1)" .gguf)"
  sep=
  for m in $models; do printf '%s"%s": "%s"' "$sep" "$(basename "$m" .gguf)" "$m"; sep=', '; done
  printf '}, "precision": ["bf16", "int8", "int4"], "framework": ["sequential", "pairwise"]},\n'
  printf ' "target": "embedded:{model}?profile=cpu-f32&weights={precision}&reduce={framework}&threads=1",\n'
  printf ' "label": "{model}/{precision}/{framework}"}\n'
} > "$T/spec.json"
V=${DB:-$T/v.db}
built="reused"
if [ ! -e "$V" ]; then
  t0=$(now)
  "$D" --quiet matrix --spec "$T/spec.json" --db "$V" --jobs 1 > "$T/matrix.log" 2>&1 ||
    { echo "view_comparisons: the matrix failed"; tail -5 "$T/matrix.log"; exit 1; }
  t1=$(now)
  built="built by matrix in $(minus "$t1" "$t0") s"
fi
runs=$("$D" runs list --db "$V" | tail -n +2 | wc -l)
answers=$(sqlite3 "$V" "SELECT count(*) FROM responses" 2> /dev/null || echo "?")
echo "store: $runs runs, $answers answers, $built ($(du -h "$V" | cut -f1))"

# ---- the view ----
"$D" view --db "$V" --port 0 > "$T/view.out" 2> "$T/view.err" &
VPID=$!
PORT=
for _ in $(seq 200); do PORT=$(awk '/^PORT/{print $2}' "$T/view.out"); [ -n "$PORT" ] && break; sleep 0.05; done
[ -n "$PORT" ] || { echo "view_comparisons: view did not start: $(cat "$T/view.err")"; exit 1; }
get() { curl -s -o "$T/$1.json" -w '%{http_code} %{time_total}' "http://127.0.0.1:$PORT/api/comparisons"; }
read -r c1 first < <(get first)
read -r c2 again1 < <(get again1)
read -r c3 again2 < <(get again2)
[ "$c1$c2$c3" = 200200200 ] || { echo "view_comparisons: HTTP $c1 $c2 $c3"; exit 1; }
cmp -s "$T/first.json" "$T/again2.json" || { echo "view_comparisons: the cached reply differs from the first"; exit 1; }
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for c in d["comparisons"]: print(c["baseline"], c["target"], c["pairs"], c["flips"])
print("truncated", d["truncated"], file=sys.stderr)
' "$T/first.json" > "$T/pairs.txt" 2> "$T/trunc.txt"
n=$(wc -l < "$T/pairs.txt")
flips=$(awk '{s += $4} END {print s + 0}' "$T/pairs.txt")
echo "GET /api/comparisons: $n comparisons listed ($(cat "$T/trunc.txt")), $flips flips in all"
echo "  first: $first s; again: $again1 s, $again2 s"

# ---- the peer: driftbench compare for each listed comparison ----
# (timed alone; each one's flips checked against the view's afterwards)
t0=$(now)
k=0 bad=0
while read -r b t pairs fl; do
  k=$((k + 1))
  "$D" --quiet compare --db "$V" --baseline "$b" --target "$t" --budget math=none,safety=none --format json \
    > "$T/c.$k.json" 2> /dev/null
  rc=$?
  [ $rc = 0 ] || [ $rc = 1 ] || [ $rc = 3 ] || bad=$((bad + 1))
done < "$T/pairs.txt"
t1=$(now)
echo "driftbench compare x $n (one process each): $(minus "$t1" "$t0") s ($bad failed)"
python3 -c '
import json, sys
T, n = sys.argv[1], 0
for k, line in enumerate(open(T + "/pairs.txt"), 1):
    b, t, pairs, fl = line.split()
    d = json.load(open("%s/c.%d.json" % (T, k)))
    got = sum(w.get("flips", 0) for w in d.get("workloads", []))
    if got != int(fl): print("  %s vs %s: compare says %d flips, the view %s" % (b, t, got, fl)); n += 1
print("flips: compare and the view agree on %d of %d comparisons" % (k - n, k))
' "$T"
