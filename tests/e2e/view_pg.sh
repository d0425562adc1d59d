#!/usr/bin/env bash
# view_pg.sh - `driftbench view --db postgresql://...` serves what it serves
# over an SQLite file: the same commands (two embedded runs of the shipped
# qwen2-7m model, ref and cpu-int4, math and safety, scored) build one store
# in an SQLite file and one in a fresh PostgreSQL database; a `view` of each
# answers /api/runs, /api/comparisons, /api/pairs (all, each workload,
# flipped only, each direction, a text search, a configuration, a page),
# /api/pair (every flipped pair) and /api/history the same, once what
# legitimately differs is masked (timestamps, times taken, the store's name); the lists
# are not empty and have flips (so the comparison says something). An
# unknown label is 404 on both. The PostgreSQL store is unchanged by the
# view (a digest of every table, before and after).
# Without DRIFT_TEST_PG it re-runs itself under tests/pg/with_server.sh (a
# private server; exit 77 when none can start), as store_postgres.sh.
if [ -z "${DRIFT_TEST_PG:-}" ]; then exec bash "$(dirname "$0")/../pg/with_server.sh" bash "$0" "$@"; fi
if ! command -v psql > /dev/null; then echo "SKIP: no psql (PostgreSQL client)"; exit 77; fi
. "$(dirname "$0")/lib.sh"
command -v python3 > /dev/null || skip_all "python3 is not installed"
DBS=()
on_exit() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
  for d in "${DBS[@]}"; do psql "$DRIFT_TEST_PG" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" > /dev/null 2>&1; done
}
trap 'exit 130' INT TERM
name=drift_e2e_$$_view
psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE $name" > /dev/null || fail "cannot create database $name"
DBS+=("$name")
PG=$(printf '%s' "$DRIFT_TEST_PG" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$name#")
SQ=$T/v.db

M=$S/models/qwen2-7m.gguf
R=(--suite builtin:math --suite builtin:safety --limit 10 --max-tokens 48 --concurrency 1)
for db in "$SQ" "$PG"; do
  "$D" -q run --db "$db" --label ref --target "embedded:$M?profile=ref&threads=1" "${R[@]}" --logprobs 5 ||
    fail "run ref on $db"
  "$D" -q run --db "$db" --label int4 --target "embedded:$M?profile=cpu-int4&threads=1" "${R[@]}" ||
    fail "run int4 on $db"
  "$D" -q score --db "$db" --jobs 1 || fail "score $db"
done

# a digest of every table of the PostgreSQL store (the view is read-only)
digest() {
  psql "$PG" -XAtq -c "select string_agg(table_name, ' ' order by table_name) from information_schema.tables
                       where table_schema = current_schema()" | tr ' ' '\n' | while read -r t; do
    [ -n "$t" ] && echo "$t $(psql "$PG" -XAtqc "select md5(coalesce(string_agg(x::text, '|' order by x::text), '')) from $t x")"
  done | md5sum
}
before=$(digest)

start_view() { # DB NAME -> sets PORT_<NAME>
  "$D" view --db "$1" --port 0 > "$T/$2.out" 2> "$T/$2.err" &
  PIDS+=($!)
  wait_port_file "$T/$2.out" 300 || fail "view $2 printed no PORT: $(cat "$T/$2.err")"
  eval "PORT_$2=$PORT"
}
start_view "$SQ" sq
start_view "$PG" pg

python3 - "$PORT_sq" "$PORT_pg" > "$T/py.out" 2>&1 << 'EOF'
import http.client, json, re, sys, urllib.parse
ports = {"sqlite": int(sys.argv[1]), "pg": int(sys.argv[2])}
fails = []
def check(cond, msg):
    if not cond: fails.append(msg)
def get(side, path, **params):
    c = http.client.HTTPConnection("127.0.0.1", ports[side], timeout=120)
    c.request("GET", path + ("?" + urllib.parse.urlencode(params) if params else ""))
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data
TIME = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")
def mask(o):
    """timestamps, times taken (latency_ms) and the store's name: what differs between the two stores by right"""
    if isinstance(o, dict):
        return {k: ("STORE" if k in ("store", "db") else "MS" if k.endswith("_ms") else mask(v)) for k, v in o.items()}
    if isinstance(o, list):
        return [mask(v) for v in o]
    if isinstance(o, str) and TIME.match(o):
        return "TIME"
    if isinstance(o, float):
        return round(o, 9)  # the same sums in another order (SQL aggregates)
    return o
def both(path, **params):
    got = {}
    for side in ports:
        st, data = get(side, path, **params)
        check(st == 200, f"{side} {path} {params}: status {st}: {data[:200]!r}")
        got[side] = json.loads(data) if st == 200 else None
    a, b = mask(got["sqlite"]), mask(got["pg"])
    if a != b:
        sa, sb = json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True)
        i = next((i for i in range(min(len(sa), len(sb))) if sa[i] != sb[i]), min(len(sa), len(sb)))
        fails.append(f"{path} {params}: SQLite and PostgreSQL differ at {i}: {sa[max(0, i - 120):i + 120]!r} vs {sb[max(0, i - 120):i + 120]!r}")
    return got["pg"]
runs = both("/api/runs")
check(runs and [r["label"] for r in runs["runs"]] == ["ref", "int4"], f"runs: {runs and [r['label'] for r in runs['runs']]}")
check(runs and all(r["responses"] == 20 for r in runs["runs"]), "runs: 20 answers each")
cmps = both("/api/comparisons")
check(cmps and len(cmps["comparisons"]) == 1, f"comparisons: {cmps}")
allp = both("/api/pairs", baseline="ref", target="int4", limit=500)
check(allp and allp["total"] == 20 and len(allp["pairs"]) == 20, f"pairs: {allp and allp['total']}")
flipped = both("/api/pairs", baseline="ref", target="int4", flipped=1, limit=500)
check(flipped and flipped["total"] > 0, "the fixture has flips (qwen2-7m, int4)")
for wl in ("math", "safety"):
    both("/api/pairs", baseline="ref", target="int4", workload=wl, limit=500)
for d in sorted({p.get("direction") for p in (allp or {"pairs": []})["pairs"] if p.get("direction")}):
    both("/api/pairs", baseline="ref", target="int4", direction=d, limit=500)
both("/api/pairs", baseline="ref", config="precision=int4", limit=500)
both("/api/pairs", baseline="ref", target="int4", limit=5, offset=5)
words = [w for p in (allp or {"pairs": []})["pairs"] for w in re.findall(r"[A-Za-z]{4,}", p.get("target_text") or p.get("baseline_text") or "")]
both("/api/pairs", baseline="ref", target="int4", q=(words[0] if words else "the"), limit=500)
for p in (flipped or {"pairs": []})["pairs"]:
    d = both("/api/pair", baseline="ref", target="int4", response=p["response"])
    check(d and d["baseline_answer"]["text"] is not None, f"pair {p['response']}: {d}")
both("/api/history", label="ref")
for side in ports:
    st, _ = get(side, "/api/history", label="no-such-label")
    check(st == 404, f"{side}: an unknown label: {st}")
print("\n".join(fails) if fails else "ok %d flipped pairs of %d" % (flipped["total"], allp["total"]))
EOF
check 'grep -q "^ok" "$T/py.out"' "view over PostgreSQL = over SQLite: $(head -c 3000 "$T/py.out")"
cat "$T/py.out"
check '[ "$before" = "$(digest)" ]' "the view changed the PostgreSQL store"
finish
