#!/usr/bin/env bash
# store_postgres.sh - the CLI on a PostgreSQL store (--db postgresql://...)
# does what it does on an SQLite file, end to end, with the embedded engine
# as the target (no model server; one engine thread per process):
#   1. the same commands on an SQLite file and on a fresh PostgreSQL
#      database print the same and exit the same, once what legitimately
#      differs is masked (the store's path/URL, the output directory, ISO
#      timestamps, divergence's elapsed time): 5 runs (3 math with
#      --logprobs, 2 chat), score with an embedded embedder, the stored
#      answers byte for byte, then compare (text, json, markdown, github,
#      junit, --kl, chat, an unknown label), table (text, -o csv), report
#      (html), monitor (text, json), divergence, and pri/anova on the two
#      tables (pri refuses a 3-row table: the same refusal on both); a read
#      command on an empty database is exit 2 and creates nothing;
#   2. many writers: 8 `run`s at once into one new database (8 labels, one
#      suite) all succeed, each run holds each answer once, the prompts are
#      stored once, the 8 runs agree; two `run`s of one label: while the
#      first holds the label (paused with SIGSTOP once it has stored
#      answers) the second is refused, exit 2 naming the label and the
#      first's pid; two `run`s of one label started at the same moment: one
#      writes, the other is refused or (if it came after) finds nothing to do;
#      one label in two stores in two schemas of one database at once: both
#      succeed (the header of src/store/store_pg.c: one database can hold
#      several stores in several schemas);
#   3. the server dies (pg_ctl stop -m immediate) under a run (paused while
#      it goes, so that it is surely mid-run): the run exits non-zero by
#      itself within 60 s with an error naming the store; after a restart
#      the same command resumes, asks only the rest, and ends with each
#      answer once;
#   4. matrix --shard i/3 into three SQLite shard files, merged into a
#      PostgreSQL database (a postgres:// URL) and into an SQLite file: the
#      same merge summary, table and compare on both (and on a copy merged
#      back from PostgreSQL into SQLite); merging a shard again skips its
#      runs and changes no row (a digest of every table and sequence).
# Without DRIFT_TEST_PG the script re-runs itself under tests/pg/with_server.sh
# (a private server; exit 77 when none can start). With an outside server
# (DRIFT_TEST_PG set by hand) it creates and drops its own databases and
# skips part 3 unless DRIFT_TEST_PG_CTL is set too. DRIFT_SANITIZED set:
# shorter runs in parts 2 and 3.
if [ -z "${DRIFT_TEST_PG:-}" ]; then exec bash "$(dirname "$0")/../pg/with_server.sh" bash "$0" "$@"; fi
if ! command -v psql > /dev/null; then echo "SKIP: no psql (PostgreSQL client)"; exit 77; fi
. "$(dirname "$0")/lib.sh"
unset GITHUB_STEP_SUMMARY
DBS=()
on_exit() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
  for d in "${DBS[@]}"; do psql "$DRIFT_TEST_PG" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" > /dev/null 2>&1; done
}
trap 'exit 130' INT TERM
# the runs that must still be going when something happens to them: long
# enough to be caught, short enough for a sanitizer build (~20x slower)
if [ -n "${DRIFT_SANITIZED:-}" ]; then NL=16 N=24; else NL=64 N=120; fi
t_start=$(date +%s)
t_part=$t_start
part() { local now; now=$(date +%s); echo "store_postgres: $1 done in $((now - t_part)) s"; t_part=$now; }

# newdb NAME: a fresh database on the server; its URL in $URL
newdb() {
  local name=drift_e2e_$$_$1
  psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE $name" > /dev/null || { echo "cannot create database $name"; exit 1; }
  DBS+=("$name")
  URL=$(printf '%s' "$DRIFT_TEST_PG" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$name#")
}
q() { psql "$1" -XAtqc "$2" 2> /dev/null; }
# answers DB LABEL: "answers,distinct prompts,failed" of run LABEL
answers() {
  q "$1" "select count(*)||','||count(distinct r.prompt_rowid)||','||coalesce(sum(r.failed), 0) from responses r
          join runs u on u.id=r.run_id where u.label='$2'"
}
# norm STORE FILE: FILE with what may differ masked: STORE (the path or
# URL), the side's output directory ($T/sq/, $T/pg/: files written with -o,
# --html), the temp dir, ISO timestamps, and elapsed times (divergence)
norm() {
  NORM_STORE=$1 NORM_T=$T perl -pe '
    s/\Q$ENV{NORM_STORE}\E/STORE/g;
    s/\Q$ENV{NORM_T}\E\/(sq|pg)\//OUT\//g;
    s/\Q$ENV{NORM_T}\E/TMP/g;
    s/\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-][\d:]+)?/TIME/g;
    s/^(\d+ positions scored); [\d.]+ s$/$1; ELAPSED/;
    s/"elapsed_ms": [\d.eE+-]+/"elapsed_ms": ELAPSED/g' "$2"
}
# same WHAT FILE_SQ FILE_PG: the two files equal after norm
same() {
  norm "$SQ" "$2" > "$2.n"
  norm "$PG" "$3" > "$3.n"
  if cmp -s "$2.n" "$3.n"; then ok; else bad "$1 differs between SQLite and PostgreSQL:
$(diff -u "$2.n" "$3.n" | head -40)"; fi
}

M=$S/models/llama-fragile-7m.gguf
EMB="embedded:$S/models/qwen2-7m.gguf?profile=cpu-f32"
tgt() { echo "embedded:$M?profile=$1&threads=1"; }   # one thread: the machine may be shared

# ======================================================= 1. same commands, two stores
mkdir -p "$T/sq" "$T/pg"
SQ=$T/sq/store.db
newdb one; PG=$URL
# ON DB DIR NAME CMD...: runs `driftbench CMD` on store DB (--db DB inserted
# after the command's name), stdout to DIR/NAME.out, stderr to DIR/NAME.err,
# the exit code to DIR/NAME.rc
on() {
  local db=$1 dir=$2 name=$3 cmd=$4
  shift 4
  "$D" "$cmd" --db "$db" "$@" > "$dir/$name.out" 2> "$dir/$name.err"
  echo $? > "$dir/$name.rc"
}
# BOTH NAME CMD...: `on` for both stores, then every output compared
both() {
  local name=$1
  shift
  on "$SQ" "$T/sq" "$name" "$@"
  on "$PG" "$T/pg" "$name" "$@"
  same "$name: exit code" "$T/sq/$name.rc" "$T/pg/$name.rc"
  same "$name: stdout" "$T/sq/$name.out" "$T/pg/$name.out"
  same "$name: stderr" "$T/sq/$name.err" "$T/pg/$name.err"
}
MATH=(--suite builtin:math --limit 10 --max-tokens 32)
CHAT=(--suite builtin:chat --limit 6 --max-tokens 24)
both run-base-m run --label base-m --target "$(tgt cpu-f32)" "${MATH[@]}" --logprobs 3 --config model=m,precision=f32
both run-i4-m run --label i4-m --target "$(tgt cpu-int4)" "${MATH[@]}" --logprobs 3 --config model=m,precision=int4
both run-bf16-m run --label bf16-m --target "$(tgt cpu-bf16)" "${MATH[@]}" --logprobs 3 --config model=m,precision=bf16
both run-base-c run --label base-c --target "$(tgt cpu-f32)" "${CHAT[@]}" --config model=c,precision=f32
both run-i4-c run --label i4-c --target "$(tgt cpu-int4)" "${CHAT[@]}" --config model=c,precision=int4
for n in base-m i4-m bf16-m base-c i4-c; do
  check '[ "$(cat "$T/pg/run-$n.rc")" = 0 ] && [ "$(cat "$T/sq/run-$n.rc")" = 0 ]' \
    "run $n succeeds on both stores: $(cat "$T/sq/run-$n.err" "$T/pg/run-$n.err" | head -c 600)"
done
both score score --embedder "$EMB"
check '[ "$(cat "$T/pg/score.rc")" = 0 ]' "score on PostgreSQL: $(head -c 400 "$T/pg/score.err")"
check '[ "$(q "$PG" "select count(*) from responses where failed=0 and text is not null")" = 42 ] &&
       [ "$(q "$PG" "select count(*) from embeddings")" = 12 ] && [ "$(q "$PG" "select count(*) from runs where finished_at is not null")" = 5 ]' \
  "PostgreSQL holds 3x10 + 2x6 answers, 12 chat embeddings, 5 finished runs"
check '[ "$(q "$PG" "select count(*) from responses where logprobs is not null")" = 30 ]' "the --logprobs runs stored logprobs (30)"
# the stored answers themselves, byte for byte (texts are BYTEA on PostgreSQL)
python3 - "$SQ" > "$T/sq/answers.txt" <<'EOF'
import hashlib, sqlite3, sys
c = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
c.text_factory = bytes
for row in c.execute("select u.label, p.prompt_id, r.replicate, r.failed, r.finish_reason, r.completion_tokens, r.text "
                     "from responses r join runs u on u.id=r.run_id join prompts p on p.id=r.prompt_rowid "
                     "order by u.label, p.prompt_id"):
    f = ["" if x is None else x.decode() if isinstance(x, bytes) else str(x) for x in row[:6]]
    t = row[6] if isinstance(row[6], bytes) else str(row[6]).encode()
    print("|".join(f) + "|" + hashlib.md5(t).hexdigest())
EOF
q "$PG" "select u.label||'|'||p.prompt_id||'|'||r.replicate||'|'||r.failed||'|'||coalesce(r.finish_reason,'')||'|'||
         coalesce(r.completion_tokens::text,'')||'|'||md5(r.text)
         from responses r join runs u on u.id=r.run_id join prompts p on p.id=r.prompt_rowid order by u.label, p.prompt_id" \
  > "$T/pg/answers.txt"
check '[ -s "$T/sq/answers.txt" ] && [ "$(wc -l < "$T/sq/answers.txt")" = 42 ]' "42 answers read back from the SQLite file"
same "stored answers (label, prompt, replicate, failed, finish, tokens, md5 of text)" "$T/sq/answers.txt" "$T/pg/answers.txt"

# every read command
for f in text json markdown github junit; do
  both "compare-$f" compare --baseline base-m --target i4-m --format "$f"
done
check 'grep -q "\"flips\"" "$T/pg/compare-json.out"' "compare json on PostgreSQL has flips: $(head -c 300 "$T/pg/compare-json.err")"
check 'grep -q "flip risk" "$T/pg/compare-text.out"' "compare on PostgreSQL shows the flip risk from the stored logprobs"
# --budget math=none: the gate is not the point here (3 of 10 flip, a BLOCK, exit 1)
both compare-kl compare --baseline base-m --target i4-m --budget math=none --kl --kl-limit 2 --format json
check '[ "$(cat "$T/pg/compare-kl.rc")" = 0 ] && grep -q "kl" "$T/pg/compare-kl.out"' "compare --kl on PostgreSQL: $(head -c 300 "$T/pg/compare-kl.err")"
both compare-bf16 compare --baseline base-m --target bf16-m --workload math --format markdown
both compare-chat compare --baseline base-c --target i4-c --format json
both compare-chat-text compare --baseline base-c --target i4-c
both compare-missing compare --baseline base-m --target nosuch
check '[ "$(cat "$T/pg/compare-missing.rc")" = 2 ]' "compare of an unknown label on PostgreSQL: exit 2"
both table-text table --baseline 'base-{model}'
check '[ "$(cat "$T/pg/table-text.rc")" = 0 ] && grep -q "i4-m" "$T/pg/table-text.out" && grep -q "i4-c" "$T/pg/table-text.out"' \
  "table on PostgreSQL has the i4 rows: $(head -c 400 "$T/pg/table-text.out" "$T/pg/table-text.err")"
on "$SQ" "$T/sq" table-csv table --baseline 'base-{model}' -o "$T/sq/t.csv"
on "$PG" "$T/pg" table-csv table --baseline 'base-{model}' -o "$T/pg/t.csv"
same "table -o csv" "$T/sq/t.csv" "$T/pg/t.csv"
same "table -o csv: stderr" "$T/sq/table-csv.err" "$T/pg/table-csv.err"
on "$SQ" "$T/sq" report report --baseline 'base-{model}' --html "$T/sq/r.html"
on "$PG" "$T/pg" report report --baseline 'base-{model}' --html "$T/pg/r.html"
check '[ "$(cat "$T/pg/report.rc")" = 0 ] && grep -qi "<html" "$T/pg/r.html"' "report on PostgreSQL: $(head -c 300 "$T/pg/report.err")"
same "report html" "$T/sq/r.html" "$T/pg/r.html"
same "report stderr" "$T/sq/report.err" "$T/pg/report.err"
both monitor monitor --baseline base-c --target i4-c
both monitor-json monitor --baseline base-c --target i4-c --format json
check '[ "$(cat "$T/pg/monitor.rc")" = 0 ] && grep -q "embeddings:" "$T/pg/monitor.out"' "monitor on PostgreSQL reads the embeddings: $(head -c 300 "$T/pg/monitor.err")"
both divergence divergence --baseline base-m --target i4-m --limit 2 --format json
check '[ "$(cat "$T/pg/divergence.rc")" = 0 ] && grep -q "kl_mean" "$T/pg/divergence.out"' "divergence on PostgreSQL: $(head -c 300 "$T/pg/divergence.err")"
# pri and anova read the table files: the same table, the same result (ok or not)
for s in sq pg; do
  "$D" pri eval --table "$T/$s/t.csv" --no-tune --folds 2 > "$T/$s/pri.out" 2> "$T/$s/pri.err"; echo $? > "$T/$s/pri.rc"
  "$D" anova --table "$T/$s/t.csv" > "$T/$s/anova.out" 2> "$T/$s/anova.err"; echo $? > "$T/$s/anova.rc"
done
for n in pri anova; do
  same "$n: exit code" "$T/sq/$n.rc" "$T/pg/$n.rc"
  same "$n: stdout" "$T/sq/$n.out" "$T/pg/$n.out"
  same "$n: stderr" "$T/sq/$n.err" "$T/pg/$n.err"
done
# a read command on a database that holds no store: refused, nothing created
newdb empty; EMPTY=$URL
"$D" table --db "$EMPTY" --baseline base > /dev/null 2> "$T/empty.err"; rc=$?
check '[ $rc -eq 2 ] && grep -qF "$EMPTY" "$T/empty.err" && [ "$(q "$EMPTY" "select count(*) from pg_tables where schemaname=current_schema()")" = 0 ]' \
  "table on an empty database: exit 2 naming it, no table created (rc $rc: $(cat "$T/empty.err"))"

part "part 1 (two stores)"
# ======================================================= 2. many writers
newdb many; W=$URL
WR=(--target "$(tgt cpu-f32)" --suite builtin:math --limit 8 --max-tokens 24)
for i in 0 1 2 3 4 5 6 7; do
  "$D" run --db "$W" --label "w$i" "${WR[@]}" > /dev/null 2> "$T/w$i.err" &
  PIDS+=($!)
  WP[$i]=$!
done
for i in 0 1 2 3 4 5 6 7; do
  wait "${WP[$i]}"; rc=$?
  check '[ $rc -eq 0 ]' "writer w$i of 8 at once into a new database: exit 0 (got $rc: $(head -c 500 "$T/w$i.err"))"
done
got=$(q "$W" "select count(*) from runs where finished_at is not null")
check '[ "$got" = 8 ]' "8 finished runs ($got)"
per=$(q "$W" "select string_agg(c::text, ',' order by label) from (select u.label, count(*) c from responses r
               join runs u on u.id=r.run_id where r.failed=0 and r.error is null and r.text is not null group by u.label) x")
check '[ "$per" = "8,8,8,8,8,8,8,8" ]' "every run holds its 8 answers ($per)"
got=$(q "$W" "select count(*) from (select run_id, prompt_rowid, replicate from responses group by 1, 2, 3 having count(*) > 1) x")
check '[ "$got" = 0 ]' "no answer stored twice ($got)"
got=$(q "$W" "select count(*)||','||count(distinct (suite, prompt_id)) from prompts")
check '[ "$got" = "8,8" ]' "the suite's 8 prompts stored once (prompts, distinct: $got)"
got=$(q "$W" "select count(*) from (select prompt_rowid from responses group by 1 having count(distinct md5(text)) > 1 or count(*) <> 8) x")
check '[ "$got" = 0 ]' "the 8 runs of one profile agree, prompt by prompt ($got prompts differ)"
got=$(q "$W" "select count(*) from run_locks")
check '[ "$got" = 0 ]' "no run lock left ($got)"

# two runs of one label: the first is paused (SIGSTOP) once it holds the lock
# and has stored answers, the second starts meanwhile and must be refused
L=(--db "$W" --label same --target "$(tgt cpu-f32)" --suite builtin:math --limit $NL --max-tokens 32 --concurrency 1)
"$D" run "${L[@]}" > /dev/null 2> "$T/l1.err" &
A=$!
PIDS+=($A)
for _ in $(seq 1200); do
  [ "$(q "$W" "select count(*) from responses r join runs u on u.id=r.run_id where u.label='same'")" -ge 1 ] 2> /dev/null && break
  kill -0 $A 2> /dev/null || break
  sleep 0.05
done
kill -STOP $A 2> /dev/null; a_stopped=$?
timeout -k 5 60 "$D" run "${L[@]}" > /dev/null 2> "$T/l2.err"; rc2=$?
kill -CONT $A 2> /dev/null
wait $A; rc1=$?
check '[ $rc1 -eq 0 ]' "the first writer of 'same' succeeds (got $rc1: $(head -c 400 "$T/l1.err"))"
if [ $a_stopped -eq 0 ]; then
  check '[ $rc2 -eq 2 ] && grep -q "run .same. is being written by another driftbench" "$T/l2.err" && grep -q "pid $A " "$T/l2.err"' \
    "the second writer of 'same', while the first holds it: exit 2 naming the label and the owner (rc $rc2: $(cat "$T/l2.err"))"
else # the first ended before it could be paused: the second has nothing to do
  echo "note: the first writer of 'same' ended before the second started: the refusal is not checked"
  check '[ $rc2 -eq 0 ] && grep -q ", 0 to request" "$T/l2.err"' \
    "the second writer of 'same' (the first ended before): nothing to do (rc $rc2: $(cat "$T/l2.err"))"
fi
got=$(answers "$W" same)
check '[ "$got" = "$NL,$NL,0" ]' "'same' holds its $NL answers once each (answers, prompts, failed: $got)"

# two runs of one label started at the same moment: one writes; the other
# is refused, or (when it comes after the first is done) finds nothing to do
L=(--db "$W" --label twin --target "$(tgt cpu-f32)" --suite builtin:math --limit 12 --max-tokens 24 --concurrency 1)
"$D" run "${L[@]}" > /dev/null 2> "$T/t1.err" &
P1=$!
"$D" run "${L[@]}" > /dev/null 2> "$T/t2.err" &
P2=$!
PIDS+=($P1 $P2)
wait $P1; r1=$?
wait $P2; r2=$?
refused() { [ "$1" -eq 2 ] && grep -q "run .twin. is being \(written\|started\) by another driftbench" "$2"; }
check '{ [ $r1 -eq 0 ] && refused $r2 "$T/t2.err"; } || { [ $r2 -eq 0 ] && refused $r1 "$T/t1.err"; } ||
       { [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cat "$T/t1.err" "$T/t2.err" | grep -q ", 0 to request"; }' \
  "two writers of 'twin' at once: one writes, the other is refused or finds nothing to do (rc $r1, $r2: $(cat "$T/t1.err" "$T/t2.err"))"
got=$(answers "$W" twin)
check '[ "$got" = "12,12,0" ]' "'twin' holds its 12 answers once each (answers, prompts, failed: $got)"
"$D" --quiet score --db "$W" 2> "$T/wscore.err"; rc=$?
"$D" compare --db "$W" --baseline w0 --target w7 --format json > "$T/w07.json" 2> "$T/w07.err"
check '[ $rc -eq 0 ] && grep -q "\"flips\": *0," "$T/w07.json" && ! grep -q "\"flips\": *[1-9]" "$T/w07.json"' \
  "scored; w0 vs w7: no flips (rc $rc: $(head -c 300 "$T/wscore.err" "$T/w07.err"))"

# two stores in two schemas of one database (URL options=-csearch_path=...)
# are two stores: one label written in both at once
newdb schemas; SB=$URL
q "$SB" "CREATE SCHEMA s1; CREATE SCHEMA s2" > /dev/null
case $SB in *\?*) sep='&' ;; *) sep='?' ;; esac
U1="$SB${sep}options=-csearch_path%3Ds1" U2="$SB${sep}options=-csearch_path%3Ds2"
"$D" run --db "$U1" --label L --target "$(tgt cpu-f32)" --suite builtin:math --limit $NL --max-tokens 32 --concurrency 1 \
  > /dev/null 2> "$T/s1.err" &
A=$!
PIDS+=($A)
for _ in $(seq 1200); do
  [ "$(q "$SB" "select count(*) from s1.responses")" -ge 1 ] 2> /dev/null && break
  kill -0 $A 2> /dev/null || break
  sleep 0.05
done
kill -STOP $A 2> /dev/null
timeout -k 5 60 "$D" run --db "$U2" --label L --target "$(tgt cpu-f32)" --suite builtin:math --limit 4 --max-tokens 16 \
  > /dev/null 2> "$T/s2.err"; rc2=$?
kill -CONT $A 2> /dev/null
wait $A; rc1=$?
check '[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]' \
  "label L in schema s1 and, meanwhile, in schema s2: both succeed (rc $rc1, $rc2: $(cat "$T/s1.err" "$T/s2.err"))"
got=$(q "$SB" "select (select count(*) from s1.responses where failed=0)||','||(select count(*) from s2.responses where failed=0)")
check '[ "$got" = "$NL,4" ]' "each schema holds its own run's answers (s1,s2: $got)"

part "part 2 (many writers)"
# ======================================================= 3. the server goes away mid-run
if [ -z "${DRIFT_TEST_PG_CTL:-}" ]; then
  skip "the server cannot be stopped here (DRIFT_TEST_PG_CTL is not set): no server-death check"
else
  newdb crash; C=$URL
  R=(--db "$C" --label big --target "$(tgt cpu-f32)" --suite builtin:math --limit $N --max-tokens 32 --concurrency 1)
  "$D" run "${R[@]}" > /dev/null 2> "$T/c1.err" &
  A=$!
  PIDS+=($A)
  n0=0
  for _ in $(seq 1200); do
    n0=$(q "$C" "select count(*) from responses")
    [ "${n0:-0}" -ge 3 ] && break
    kill -0 $A 2> /dev/null || break
    sleep 0.05
  done
  # paused while the server goes, so that it is surely mid-run when it does
  kill -STOP $A 2> /dev/null
  n0=$(q "$C" "select count(*) from responses")
  check '[ "${n0:-0}" -ge 3 ] && [ "${n0:-0}" -lt $N ] && kill -0 $A 2> /dev/null' \
    "the run is under way when the server stops ($n0 of $N stored): $(head -c 300 "$T/c1.err")"
  eval "$DRIFT_TEST_PG_CTL stop -m immediate" > /dev/null 2>&1
  kill -CONT $A 2> /dev/null
  t0=$(date +%s)
  for _ in $(seq 600); do kill -0 $A 2> /dev/null || break; sleep 0.1; done
  if kill -0 $A 2> /dev/null; then
    bad "the run still runs 60 s after its server died: $(cat "$T/c1.err")"
    kill -9 $A 2> /dev/null
  fi
  wait $A; rc=$?
  el=$(($(date +%s) - t0))
  check '[ $rc -ne 0 ] && [ $rc -lt 128 ]' "the run exits non-zero by itself when the server dies (rc $rc after $el s)"
  check 'grep -qF "$C" "$T/c1.err" && grep -q "store error" "$T/c1.err"' "its error names the store: $(cat "$T/c1.err")"
  eval "$DRIFT_TEST_PG_CTL start" > /dev/null 2>&1
  for _ in $(seq 100); do q "$C" "select 1" > /dev/null && break; sleep 0.1; done
  n1=$(q "$C" "select count(*) from responses where failed=0")
  check '[ -n "$n1" ] && [ "$n1" -ge "$n0" ] && [ "$n1" -lt $N ]' "the server is back with the committed answers ($n1, $n0 seen before the stop)"
  "$D" run "${R[@]}" > /dev/null 2> "$T/c2.err"; rc=$?
  check '[ $rc -eq 0 ]' "the same command after the restart: exit 0 (got $rc: $(cat "$T/c2.err"))"
  check 'grep -q "resuming run .big.: $N prompts x 1 replicate(s), $((N - n1)) to request" "$T/c2.err"' \
    "it resumes and asks only the $((N - n1)) missing: $(cat "$T/c2.err")"
  got=$(answers "$C" big)
  check '[ "$got" = "$N,$N,0" ]' "the run ends with its $N answers once each (answers, prompts, failed: $got)"
  check '[ "$(q "$C" "select count(*) from run_locks")" = 0 ] && [ "$(q "$C" "select count(*) from runs where finished_at is not null")" = 1 ]' \
    "the run is finished and holds no lock"
fi

part "part 3 (server death)"
# ======================================================= 4. shards merged into PostgreSQL
mkdir -p "$T/m"
cat > "$T/m/spec.json" <<EOF
{"suites": ["builtin:math"], "limit": 8, "decoding": {"max_tokens": 24}, "baseline": "c0",
 "configs": [
  {"label": "c0", "target": "$(tgt cpu-f32)", "dims": {"model": "m", "precision": "f32"}},
  {"label": "c1", "target": "$(tgt cpu-int4)", "dims": {"model": "m", "precision": "int4"}},
  {"label": "c2", "target": "$(tgt cpu-bf16)", "dims": {"model": "m", "precision": "bf16"}},
  {"label": "c3", "target": "$(tgt cpu-f16)", "dims": {"model": "m", "precision": "f16"}}]}
EOF
for i in 1 2 3; do
  "$D" matrix --spec "$T/m/spec.json" --db "$T/m/shard$i.db" --shard $i/3 > /dev/null 2> "$T/m/shard$i.err"; rc=$?
  check '[ $rc -eq 0 ]' "matrix shard $i/3: exit 0 (got $rc: $(tail -c 400 "$T/m/shard$i.err"))"
done
newdb merged
MP=$(printf '%s' "$URL" | sed 's#^postgresql://#postgres://#')   # the other spelling of a PostgreSQL URL
MS=$T/m/merged.db
"$D" merge --db "$MP" "$T/m/shard1.db" "$T/m/shard2.db" "$T/m/shard3.db" 2> "$T/m/mp.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^merge: 4 runs copied (0 already present)" "$T/m/mp.err"' "merge of 3 SQLite shards into PostgreSQL (rc $rc: $(cat "$T/m/mp.err"))"
"$D" merge --db "$MS" "$T/m/shard1.db" "$T/m/shard2.db" "$T/m/shard3.db" 2> "$T/m/ms.err"; rc=$?
check '[ $rc -eq 0 ] && grep -q "^merge: 4 runs copied (0 already present)" "$T/m/ms.err"' "merge of 3 SQLite shards into SQLite (rc $rc: $(cat "$T/m/ms.err"))"
SQ=$MS PG=$MP
same "merge: stderr" "$T/m/ms.err" "$T/m/mp.err"
got=$(q "$MP" "select (select count(*) from runs)||','||(select count(*) from prompts)||','||(select count(*) from responses)||','||(select count(*) from scores)")
check '[ "$got" = "4,8,32,32" ]' "the PostgreSQL store holds 4 runs, 8 prompts, 32 answers, 32 scores ($got)"
mkdir -p "$T/m/sq" "$T/m/pg"
for f in text csv; do
  "$D" table --db "$MS" --baseline c0 --format $f > "$T/m/sq/t.$f" 2> "$T/m/sq/t.$f.err"
  "$D" table --db "$MP" --baseline c0 --format $f > "$T/m/pg/t.$f" 2> "$T/m/pg/t.$f.err"
  same "table ($f) of the merged stores" "$T/m/sq/t.$f" "$T/m/pg/t.$f"
done
check '[ "$(grep -c "^c[123]," "$T/m/pg/t.csv")" = 3 ]' "the merged table has c1..c3: $(cat "$T/m/pg/t.csv")"
for f in text json; do
  "$D" compare --db "$MS" --baseline c0 --target c1 --format $f > "$T/m/sq/c.$f" 2> "$T/m/sq/c.$f.err"
  "$D" compare --db "$MP" --baseline c0 --target c1 --format $f > "$T/m/pg/c.$f" 2> "$T/m/pg/c.$f.err"
  same "compare c0 c1 ($f) of the merged stores" "$T/m/sq/c.$f" "$T/m/pg/c.$f"
  same "compare c0 c1 ($f) of the merged stores: stderr" "$T/m/sq/c.$f.err" "$T/m/pg/c.$f.err"
done
# back from PostgreSQL into a new SQLite file: the same table
"$D" --quiet merge --db "$T/m/back.db" "$MP" 2> "$T/m/back.err"; rc=$?
"$D" table --db "$T/m/back.db" --baseline c0 --format csv > "$T/m/back.csv" 2>> "$T/m/back.err"
check '[ $rc -eq 0 ] && cmp -s "$T/m/back.csv" "$T/m/sq/t.csv"' "merged back from PostgreSQL into SQLite: the same table (rc $rc: $(cat "$T/m/back.err"))"
# merging a shard again changes nothing
digest() {
  q "$1" "select 'runs', md5(coalesce(string_agg(t::text, ';' order by id), '')) from runs t
          union all select 'prompts', md5(coalesce(string_agg(t::text, ';' order by id), '')) from prompts t
          union all select 'responses', md5(coalesce(string_agg(t::text, ';' order by id), '')) from responses t
          union all select 'scores', md5(coalesce(string_agg(t::text, ';' order by id), '')) from scores t
          union all select 'embeddings', md5(coalesce(string_agg(t::text, ';' order by response_id, embedder), '')) from embeddings t
          union all select 'seq', (select last_value::text from runs_id_seq) || '/' || (select last_value::text from responses_id_seq)"
}
digest "$MP" > "$T/m/before"
"$D" merge --db "$MP" "$T/m/shard1.db" 2> "$T/m/again.err"; rc=$?
digest "$MP" > "$T/m/after"
check '[ $rc -eq 0 ] && grep -q "^merge: 0 runs copied (2 already present)" "$T/m/again.err"' "merging shard 1 again skips its 2 runs (rc $rc: $(cat "$T/m/again.err"))"
check '[ "$(wc -l < "$T/m/before")" = 6 ] && cmp -s "$T/m/before" "$T/m/after"' "and changes no row: $(diff "$T/m/before" "$T/m/after")"

part "part 4 (merge)"
echo "store_postgres: $passes passed, $fails failed in $(($(date +%s) - t_start)) s"
[ $fails -eq 0 ]
