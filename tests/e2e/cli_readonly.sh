#!/usr/bin/env bash
# cli_readonly.sh - the read-only commands (compare, table, report, monitor)
# open the store read-only: a path that does not exist is an error naming it
# (exit 2) and no file appears; the store's bytes, size and mtime stay as
# they were and no -wal/-shm/-journal is left; a store that the caller cannot
# write can be read.
#
# What "cannot write" covers, honestly: the tests run as root, whom mode
# bits do not stop, so
#   - "a 0444 file of another user in a directory we cannot write" is run as
#     the unprivileged user nobody (setpriv), on a root-owned 0444 store in a
#     root-owned 0755 directory: both when no writer is connected (read as
#     immutable) and while a writer holds it open with commits that are only
#     in its -wal (read through the WAL: the test renames a run there and
#     reads the new name);
#   - "a read-only directory / mount" is a read-only bind mount made in a
#     private mount namespace (unshare -m), read as root.
# Each of the two prints SKIP (and does not count as passed) where setpriv
# or unshare is missing or not permitted.
. "$(dirname "$0")/lib.sh"
chmod 755 "$T"

# a store with two scored runs (one flip, one error), closed
start_server "$FIX/math5_baseline.txt"; P1=$PORT
start_server "$FIX/math5_target.txt"; P2=$PORT
mkdir -m 755 "$T/w"
DB=$T/w/s.db
$D --quiet run --db "$DB" --label base --target "http://127.0.0.1:$P1/v1?model=m" --suite "$FIX/math5.jsonl" \
  --config model=m,hardware=h100,precision=fp16,framework=vllm
$D --quiet run --db "$DB" --label targ --target "http://127.0.0.1:$P2/v1?model=m&api=chat" --suite "$FIX/math5.jsonl" \
  --retries 1 --config model=m,hardware=b200,precision=fp8,framework=sglang
$D --quiet score --db "$DB"
check '[ -s "$DB" ] && [ ! -e "$DB-wal" ] && [ ! -e "$DB-shm" ]' "the store is closed cleanly"

fingerprint() { echo "$(md5sum < "$1") $(stat -c '%s %.9Y' "$1") $(ls -A "$(dirname "$1")" | tr '\n' ' ')"; }
# read_all DB OUTDIR [RUNNER...]: compare, table and report; each must succeed
# (compare with --budget math=none: the fixture's error pair is 1 of 5 left out,
# which the gate blocks, exit 1; what is checked here is that the store reads)
read_all() {
  local db=$1 out=$2
  shift 2
  "$@" "$D" compare --db "$db" --baseline base --target targ --budget math=none --format json > "$out/c.json" 2> "$out/c.err"
  rc=$?
  check '[ $rc -eq 0 ] && grep -q "\"flips\": *1" "$out/c.json"' "compare reads $db ${*:-as root}: $(head -c 300 "$out/c.err")"
  "$@" "$D" table --db "$db" --baseline base --format csv > "$out/t.txt" 2> "$out/t.err"
  rc=$?
  check '[ $rc -eq 0 ] && grep -q "^experiment_id," "$out/t.txt"' "table reads $db ${*:-as root}: $(head -c 300 "$out/t.err")"
  "$@" "$D" report --db "$db" --baseline base --html - > "$out/r.html" 2> "$out/r.err"
  rc=$?
  check '[ $rc -eq 0 ] && grep -qi "<html" "$out/r.html"' "report reads $db ${*:-as root}: $(head -c 300 "$out/r.err")"
}

# ------------------------------------------------ a path that does not exist
for c in compare table report monitor; do
  case $c in
    compare|monitor) args=(--baseline base --target targ) ;;
    table) args=(--baseline base) ;;
    report) args=(--html "$T/r.html") ;;
  esac
  "$D" $c --db "$T/none.db" "${args[@]}" > /dev/null 2> "$T/none.err"
  rc=$?
  check '[ $rc -eq 2 ] && grep -q "none.db" "$T/none.err" && grep -qi "no such store" "$T/none.err"' \
    "$c on a missing store: exit 2 naming it (rc $rc: $(head -c 200 "$T/none.err"))"
  check '[ ! -e "$T/none.db" ] && [ ! -e "$T/none.db-wal" ] && [ ! -e "$T/none.db-journal" ]' \
    "$c on a missing store creates no file"
done
: > "$T/empty.db"
"$D" compare --db "$T/empty.db" --baseline base --target targ > /dev/null 2> "$T/empty.err"
rc=$?
check '[ $rc -eq 2 ] && grep -q "empty.db" "$T/empty.err" && [ ! -s "$T/empty.db" ]' \
  "an empty file is no store (exit 2) and stays empty: $(head -c 200 "$T/empty.err")"

# ------------------------------------------------ reading writes nothing
before=$(fingerprint "$DB")
sleep 0.05
mkdir "$T/o1"
read_all "$DB" "$T/o1"
"$D" monitor --db "$DB" --baseline base --target targ > /dev/null 2>&1 # no embeddings: an error, still no write
check '[ "$(fingerprint "$DB")" = "$before" ]' "reading left the store and its directory as they were"

# ------------------------------------------------ another user, a 0444 file, a directory it cannot write
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if "${NOBODY[@]}" true 2>/dev/null; then
  mkdir -m 755 "$T/ro"
  cp "$DB" "$T/ro/s.db"
  chmod 444 "$T/ro/s.db"
  RDB=$T/ro/s.db
  mkdir -m 777 "$T/o2"
  check '! "${NOBODY[@]}" touch "$T/ro/probe" 2>/dev/null' "nobody cannot write the directory (the premise)"
  before=$(fingerprint "$RDB")
  read_all "$RDB" "$T/o2" "${NOBODY[@]}"
  check '[ "$(fingerprint "$RDB")" = "$before" ]' "nobody's reads left the store as it was"

  # a writer (root) holds it open and commits a rename that is only in its -wal
  python3 - "$RDB" > "$T/writer.out" <<'EOF' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("UPDATE runs SET label='targ_live' WHERE label='targ'")
print("committed", flush=True)
time.sleep(60)
EOF
  W=$!
  PIDS+=($W)
  for _ in $(seq 200); do grep -q committed "$T/writer.out" && break; sleep 0.05; done
  check '[ -s "$RDB-wal" ]' "the writer's commit is in the -wal"
  "${NOBODY[@]}" "$D" compare --db "$RDB" --baseline base --target targ_live --budget math=none --format json \
    > "$T/o2/live.json" 2> "$T/o2/live.err"
  rc=$?
  check '[ $rc -eq 0 ] && grep -q "\"flips\": *1" "$T/o2/live.json"' \
    "nobody reads what is only in the live writer's -wal: $(head -c 300 "$T/o2/live.err")"
  kill $W; wait $W 2>/dev/null
else
  skip "setpriv cannot switch to the user nobody here: the other-user case is not covered"
fi

# ------------------------------------------------ a read-only mount
mkdir -m 755 "$T/mnt"
cp "$DB" "$T/mnt/s.db"
mkdir "$T/o3"
if unshare -m sh -c "mount --bind '$T/mnt' '$T/mnt' && mount -o remount,ro,bind '$T/mnt' && ! touch '$T/mnt/probe' 2>/dev/null" 2>/dev/null; then
  cat > "$T/inmount.sh" <<EOF
mount --bind '$T/mnt' '$T/mnt' && mount -o remount,ro,bind '$T/mnt' || exit 99
D='$D'
$(declare -f ok bad check read_all)
read_all '$T/mnt/s.db' '$T/o3'
"\$D" --quiet run --db '$T/mnt/s.db' --label more --target "http://127.0.0.1:$P1/v1?model=m" --suite '$FIX/math5.jsonl' 2> '$T/o3/run.err'
rc=\$?
check '[ \$rc -eq 2 ] && grep -q s.db "$T/o3/run.err"' "a writing command on the read-only mount is refused with exit 2 (rc \$rc: \$(head -c 200 '$T/o3/run.err'))"
echo "\$passes \$fails" > '$T/o3/counts'
EOF
  unshare -m bash "$T/inmount.sh"
  if [ -s "$T/o3/counts" ]; then
    read -r p f < "$T/o3/counts"
    passes=$((passes + p)); fails=$((fails + f))
  else
    bad "the read-only mount test did not run"
  fi
else
  skip "unshare -m with a read-only bind mount is not permitted here: the read-only mount case is not covered"
fi

finish
