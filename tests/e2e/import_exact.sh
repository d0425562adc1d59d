#!/usr/bin/env bash
# import_exact.sh - import is exact (issue 34). A file imported again at the
# same path with other content is refused (exit 2, naming the file and the
# run) and leaves the store as it was; --replace replaces the stored runs
# (compare then counts the new answers); the same content again changes
# nothing. An import killed with SIGKILL leaves its private store in
# $TMPDIR; the next import removes it (and keeps a directory of the same
# pattern whose process is alive).
. "$(dirname "$0")/lib.sh"
PF=$S/tests/data/import/promptfoo/results.json
on_exit() { kill -9 $SLOW 2>/dev/null; }
SLOW=
DB=$T/s.db
flips() {
  "$D" compare --db "$DB" --baseline qwen2-7m-f16 --target qwen2-7m-q4_0-ctx160 --format json 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["workloads"][0]["flips"])'
}

# ---- a changed file: refused, then replaced ----
cp "$PF" "$T/results.json"
"$D" --quiet import --db "$DB" "$T/results.json" 2> "$T/e0"; rc=$?
check '[ $rc -eq 0 ]' "first import: exit 0 (got $rc: $(cat "$T/e0"))"
BEFORE=$(flips)
"$D" import --db "$DB" "$T/results.json" > "$T/o1" 2>&1; rc=$?
check '[ $rc -eq 0 ] && grep -q "already stored by the same import" "$T/o1"' "same file again: exit 0, left as it was (got $rc)"
# the target's answer to one test it got right, now wrong (and marked so)
python3 - "$T/results.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]["results"]:
    if r["provider"]["label"] == "qwen2-7m-q4_0-ctx160" and r["success"] and r.get("failureReason") != 2:
        r["response"]["output"] = "The answer is -1."
        r["success"] = False
        break
json.dump(d, open(sys.argv[1], "w"))
EOF
sum=$(md5sum < "$DB")
"$D" import --db "$DB" "$T/results.json" > /dev/null 2> "$T/e1"; rc=$?
check '[ $rc -eq 2 ] && grep -qF "$T/results.json: the file changed since it was imported as run" "$T/e1"' \
  "changed file: exit 2 naming the file and the run (got $rc: $(cat "$T/e1"))"
check '[ "$(md5sum < "$DB")" = "$sum" ] && [ "$(flips)" = "$BEFORE" ]' "changed file refused: the store as it was"
"$D" import --db "$DB" --replace "$T/results.json" > "$T/o2" 2> "$T/e2"; rc=$?
check '[ $rc -eq 0 ] && [ "$(grep -c "replaced the stored run" "$T/o2")" = 2 ]' \
  "--replace: exit 0, both runs replaced (got $rc: $(cat "$T/e2"))"
check '[ "$(flips)" = "$((BEFORE + 1))" ]' "after --replace compare counts the new answer (flips $(flips), were $BEFORE)"
"$D" import --db "$DB" "$T/results.json" > "$T/o3" 2>&1; rc=$?
check '[ $rc -eq 0 ] && grep -q "already stored by the same import" "$T/o3"' "the replaced file again: exit 0, unchanged (got $rc)"

# ---- a killed import's private store is removed by the next one ----
TD=$T/tmp
mkdir -p "$TD" "$TD/driftbench-import-1-live01"   # pid 1 is alive: left alone
python3 - "$T/big.json" <<'EOF'
import json, sys
res = []
for p in range(2):
    for t in range(40000):
        a = t * 7 % 1000
        res.append({"provider": {"id": "m%d" % p, "label": "s%d" % p}, "prompt": {"raw": "Q %d: %d + 0?" % (t, a)},
                    "testIdx": t, "vars": {"answer": str(a)}, "response": {"output": "The answer is %d." % a},
                    "success": True, "score": 1})
json.dump({"results": {"version": 3, "results": res}, "config": {"description": "big"}}, open(sys.argv[1], "w"))
EOF
TMPDIR=$TD "$D" --quiet import --db "$T/big.db" --workload math "$T/big.json" 2>/dev/null &
SLOW=$!
dir=
for _ in $(seq 1 1200); do   # up to 60 s for its private store to appear
  dir=$(ls -d "$TD"/driftbench-import-$SLOW-* 2>/dev/null | head -1)
  [ -n "$dir" ] && break
  kill -0 $SLOW 2>/dev/null || break
  sleep 0.05
done
kill -9 $SLOW 2>/dev/null
wait $SLOW 2>/dev/null
check '[ -n "$dir" ] && [ -d "$dir" ]' "the killed import left its private store (driftbench-import-$SLOW-*)"
TMPDIR=$TD "$D" --quiet import --db "$T/other.db" "$PF" 2> "$T/e4"; rc=$?
check '[ $rc -eq 0 ]' "the next import: exit 0 (got $rc: $(cat "$T/e4"))"
check '[ -n "$dir" ] && [ ! -e "$dir" ]' "the next import removed the stale private store"
check '[ -d "$TD/driftbench-import-1-live01" ] && [ "$(ls "$TD" | wc -l)" = 1 ]' \
  "a live pid's directory is kept, and the import left none of its own ($(ls "$TD" | tr '\n' ' '))"

finish
