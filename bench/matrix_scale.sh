#!/usr/bin/env bash
# bench/matrix_scale.sh BUILD_DIR [CONFIGS] [PROMPTS] - a matrix of many small
# configurations split over N shard processes on this machine, two ways to
# one store:
#   postgres   every shard writes into one PostgreSQL database at once
#              (`matrix --shard I/N --db postgresql://...`)
#   sqlite     every shard writes its own SQLite file, then `merge` joins
#              them into one (the merge's time is counted)
# for N = 1, 2, 4, 8. The configurations all ask one local fake
# OpenAI-compatible server (tests/server/fakeserver, echo mode: an answer
# costs microseconds), so the figures are those of the client, the store
# and the score stage, not of a model. Each row: answers, wall seconds,
# answers/s, the store's rows written per second (responses + scores), and
# the merge's share. The private PostgreSQL server comes from
# tests/pg/with_server.sh (skipped, with a message, where it cannot start).
# Defaults: 64 configurations x 200 math prompts = 12,800 answers per row.
set -u
B=$(cd "${1:-build}" && pwd)
CONFIGS=${2:-64}
PROMPTS=${3:-200}
S=$(cd "$(dirname "$0")/.." && pwd)
D=$B/driftbench
[ -x "$D" ] && [ -x "$B/fakeserver" ] || { echo "matrix_scale: build $B first (driftbench, fakeserver)"; exit 2; }
if [ -z "${DRIFT_TEST_PG:-}" ]; then
  exec bash "$S/tests/pg/with_server.sh" bash "$0" "$@"
fi
T=$(mktemp -d)
cleanup() { [ -n "${FPID:-}" ] && kill "$FPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
"$B/fakeserver" --lifetime 3600 --quiet > "$T/port" 2>/dev/null &
FPID=$!
for _ in $(seq 100); do PORT=$(awk '/^PORT/{print $2}' "$T/port"); [ -n "$PORT" ] && break; sleep 0.05; done
{
  printf '{"suites": ["builtin:math"], "limit": %d, "baseline": "c0", "configs": [' "$PROMPTS"
  for i in $(seq 0 $((CONFIGS - 1))); do
    printf '%s{"label":"c%d","target":"http://127.0.0.1:%s/v1?model=m%d","config":{"model":"m","hardware":"h%d","precision":"p%d","framework":"f"}}' \
      "$([ "$i" = 0 ] || echo ,)" "$i" "$PORT" "$i" $((i % 4)) $((i % 3))
  done
  printf ']}\n'
} > "$T/spec.json"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "$CONFIGS configurations x $PROMPTS prompts = $((CONFIGS * PROMPTS)) answers per row"
printf '%-9s %6s %8s %8s %10s %12s %8s\n' store shards answers wall_s answers/s rows/s merge_s
now() { date +%s.%N; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
row() { # STORE N WALL MERGE DBFORCOUNT
  local n_ans
  n_ans=$(( CONFIGS * PROMPTS ))
  awk -v s="$1" -v n="$2" -v a="$n_ans" -v w="$3" -v m="$4" \
    'BEGIN { printf "%-9s %6d %8d %8.2f %10.0f %12.0f %8s\n", s, n, a, w, a / w, 2 * a / w, m }'
}
for N in 1 2 4 8; do
  # PostgreSQL: N shards into one database
  db="m$N"
  psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE $db" >/dev/null
  URL="postgresql://postgres@/$db?host=$DRIFT_TEST_PG_DIR"
  "$D" --quiet run --db "$URL" --label warm --target "http://127.0.0.1:$PORT/v1?model=w" --suite builtin:math \
    --limit 1 > /dev/null 2>&1  # the schema exists before the shards race
  t0=$(now)
  pids=()
  for i in $(seq 1 "$N"); do
    "$D" --quiet matrix --spec "$T/spec.json" --db "$URL" --shard "$i/$N" > "$T/pg.$N.$i.log" 2>&1 &
    pids+=($!)
  done
  okall=1
  for p in "${pids[@]}"; do wait "$p" || okall=0; done
  t1=$(now)
  got=$(psql "$URL" -Atc "SELECT count(*) FROM responses r JOIN runs u ON u.id = r.run_id WHERE u.label LIKE 'c%' AND r.failed = 0")
  [ "$okall" = 1 ] && [ "$got" = $((CONFIGS * PROMPTS)) ] || { echo "postgres N=$N: a shard failed or $got answers"; cat "$T"/pg."$N".*.log; exit 1; }
  row postgres "$N" "$(minus "$t1" "$t0")" -
  # SQLite: N shard files, then merge
  t0=$(now)
  pids=()
  for i in $(seq 1 "$N"); do
    "$D" --quiet matrix --spec "$T/spec.json" --db "$T/s.$N.$i.db" --shard "$i/$N" > "$T/sq.$N.$i.log" 2>&1 &
    pids+=($!)
  done
  okall=1
  for p in "${pids[@]}"; do wait "$p" || okall=0; done
  t1=$(now)
  "$D" --quiet merge --db "$T/all.$N.db" "$T"/s."$N".*.db > /dev/null || okall=0
  t2=$(now)
  got=$(sqlite3 "$T/all.$N.db" "SELECT count(*) FROM responses WHERE failed = 0")
  [ "$okall" = 1 ] && [ "$got" = $((CONFIGS * PROMPTS)) ] || { echo "sqlite N=$N: a shard or the merge failed, or $got answers"; exit 1; }
  row sqlite "$N" "$(minus "$t2" "$t0")" "$(minus "$t2" "$t1")"
done
