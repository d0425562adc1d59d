#!/usr/bin/env bash
# secrets.sh - issue 34, "secrets stay secret", end to end: every password
# and key below holds the marker SECRETMARK, and the marker must not appear
# in anything driftbench prints (stdout, stderr, written reports) or stores
# (sqlite3 .dump of each SQLite store, pg_dump of each PostgreSQL database).
#   1. http targets on local fake servers (tests/server/fakeserver.c), an
#      SQLite store: run with a URL password (escaped %40 %2F %25), resumed
#      with another password; a key named per target (api_key_env=NAME)
#      sent to a local server that requires it; a raw '@' and '/' in the
#      password; api_key= in the spec; a named key to a non-local http host
#      (192.0.2.1: refused, exit 2, naming the target and
#      allow_insecure_key=1, before any connection); a dead server ("every
#      request to ... failed"); score, compare (text, json, markdown),
#      table, report; measure (both sides with credentials, and its {port}
#      error); matrix --list of a spec whose target holds a password; merge
#      of that store; the records hold the targets without password or key
#      variable; score with an embedder's and a guard's URL holding a
#      password (their names are stored with the scores).
#   2. PostgreSQL stores (tests/pg/with_server.sh; skipped when none can
#      start): the password in the userinfo (raw '@' '/' '%', and escaped),
#      in ?password=, in a libpq key=value string (quoted with a space and
#      a quote, and bare): run, import (lm-eval), compare, merge in and out,
#      merge of a store into itself, and read commands on a database that
#      does not exist.
. "$(dirname "$0")/lib.sh"
FAKE_LIFETIME=600
if [ -z "${DRIFT_TEST_PG:-}" ] && [ -z "${DRIFT_SECRETS_NO_PG:-}" ]; then
  bash "$S/tests/pg/with_server.sh" bash "$0" "$@"; rc=$?
  [ $rc -ne 77 ] && exit $rc
  echo "secrets: no PostgreSQL server here: part 2 skipped"
  export DRIFT_SECRETS_NO_PG=1
fi
SUITE=$FIX/math5.jsonl
LMEVAL=$S/tests/data/import/lmeval/qwen2-7m-f16/samples_gsm8k_2026-12-02T05-40-00.000000.jsonl
M=SECRETMARK
PW_RAW="p@ss/w$M%x"           # raw '@', '/', '%'
PW_ENC="p%40ss%2Fw$M%25x"     # the same, escaped
export DRIFT_E2E_KEY="sk-$M"
unset OPENAI_API_KEY GITHUB_STEP_SUMMARY http_proxy HTTP_PROXY all_proxy ALL_PROXY
O=$T/out                      # everything driftbench printed or wrote
mkdir -p "$O"
DBS=()
on_exit() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
  for d in "${DBS[@]}"; do psql "$DRIFT_TEST_PG" -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" > /dev/null 2>&1; done
}
trap 'exit 130' INT TERM


# dr NAME WANT ARGS...: runs driftbench, its stdout and stderr kept as
# $O/NAME.out and $O/NAME.err; WANT is the exit codes accepted ("0", "0|1|3":
# a gate's verdict, whichever it is, is not what this test is about).
dr() {
  local name=$1 want=$2
  shift 2
  "$D" "$@" > "$O/$name.out" 2> "$O/$name.err"
  RC=$?
  if [[ "|$want|" == *"|$RC|"* ]]; then ok; else bad "$name: exit $RC, wanted $want: $(head -c 600 "$O/$name.err")"; fi
}
said() { grep -q -- "$2" "$O/$1.err" "$O/$1.out" || bad "$1: does not say '$2': $(head -c 600 "$O/$1.err")"; }

# ---------------------------------------------------------------- 1. http
start_server "$FIX/math5_baseline.txt"; P1=$PORT
start_server "$FIX/math5_target.txt" --api-key "sk-$M"; P3=$PORT
DEAD=$(free_port)
A=$T/a.db
BASE="http://bob:$PW_ENC@127.0.0.1:$P1/v1?model=llama"
TARG="http://127.0.0.1:$P3/v1?model=llama&api=chat&api_key_env=DRIFT_E2E_KEY"

dr run_base 0 run --db "$A" --label base --target "$BASE" --suite "$SUITE"
dr run_base_again 0 run --db "$A" --label base --target "http://bob:another@127.0.0.1:$P1/v1?model=llama" --suite "$SUITE"
said run_base_again "resuming run 'base'"
dr run_targ 0 run --db "$A" --label targ --target "$TARG" --suite "$SUITE"
check '[ "$(sqlite3 "$A" "select count(*) from responses r join runs u on u.id=r.run_id where u.label='"'targ'"' and r.failed=0")" -ge 4 ] &&
       [ "$(sqlite3 "$A" "select count(*) from responses where error like '"'%401%'"'")" = 0 ]' \
  "the key named by the target reached the local server that requires it (answers, no HTTP 401)"
dr run_raw 2 run --db "$A" --label raw --target "http://bob:$PW_RAW@127.0.0.1:$P1/v1?model=llama" --suite "$SUITE"
dr run_keyparam 2 run --db "$A" --label kp --target "http://127.0.0.1:$P1/v1?model=llama&api_key=sk-$M" --suite "$SUITE"
said run_keyparam "api_key_env=NAME"
t0=$(date +%s%N)
dr run_remote 2 run --db "$A" --label remote --connect-timeout 5 \
  --target "http://192.0.2.1:9/v1?model=llama&api_key_env=DRIFT_E2E_KEY" --suite "$SUITE"
ms=$((($(date +%s%N) - t0) / 1000000))
said run_remote "allow_insecure_key=1"
said run_remote "target 'http://192.0.2.1:9/v1?model=llama"
check '[ $ms -lt 3000 ]' "the refusal came before any connection ($ms ms, connect timeout 5 s)"
dr run_dead 2 run --db "$A" --label dead --retries 0 --target "http://bob:$PW_ENC@127.0.0.1:$DEAD/v1?model=llama" --suite "$SUITE"
said run_dead "every request to http://bob:\*\*\*@127.0.0.1:$DEAD/v1?model=llama failed"
dr score 0 score --db "$A"
# the embedder's and the guard's URLs: their names are stored with the scores
start_server "$FIX/basic.txt"; P4=$PORT
E=$T/e.db
dr run_chat 0 run --db "$E" --label c --target "http://127.0.0.1:$P4/v1?model=m&api=chat" --suite builtin:chat --limit 2
dr run_safety 0 run --db "$E" --label s --target "http://127.0.0.1:$P4/v1?model=m" --suite builtin:safety --limit 2
dr score_urls 0 score --db "$E" --embedder "http://bob:$PW_ENC@127.0.0.1:$P4/v1?model=e" \
  --guard "http://bob:$PW_ENC@127.0.0.1:$P4/v1?model=g&api_key_env=DRIFT_E2E_KEY"
check '[ "$(sqlite3 "$E" "select distinct embedder from embeddings")" = "embed:http://bob:***@127.0.0.1:$P4/v1?model=e" ]' \
  "the embedder's name in the store: the password as ***"
check '[ "$(sqlite3 "$E" "select distinct evaluator from scores where evaluator like '"'guard:%'"'")" = "guard:http://bob:***@127.0.0.1:$P4/v1?model=g" ]' \
  "the guard's name in the store: the password as ***, no key variable"
dr compare 0\|1\|3 compare --db "$A" --baseline base --target targ
dr compare_json 0\|1\|3 compare --db "$A" --baseline base --target targ --format json -o "$O/compare.json"
dr compare_md 0\|1\|3 compare --db "$A" --baseline base --target targ --format markdown -o "$O/compare.md"
dr table 0 table --db "$A" --baseline base -o "$O/table.csv"
dr report 0 report --db "$A" --baseline base --html "$O/report.html"
check '[ "$(sqlite3 "$A" "select target from runs where label='"'base'"'")" = "http://bob:***@127.0.0.1:$P1/v1?model=llama" ]' \
  "the record's target: the password as ***"
check '[ "$(sqlite3 "$A" "select target from runs where label='"'targ'"'")" = "http://127.0.0.1:$P3/v1?model=llama&api=chat" ]' \
  "the record's target: no key variable"
check '[ "$(sqlite3 "$A" "select count(*) from runs")" = 3 ]' "refused targets created no run (base, targ, dead)"

dr measure 0\|1\|3 measure --db "$T/m.db" --baseline "$BASE" --target "$TARG" --suite "$SUITE"
dr measure_port 2 measure --db "$T/m.db" --baseline "http://bob:$PW_ENC@127.0.0.1:{port}/v1?model=m" --target "$TARG" \
  --suite "$SUITE"
said measure_port "bob:\*\*\*@127.0.0.1:{port}"
cat > "$T/spec.json" << EOF
{"name": "secrets", "suites": ["$SUITE"], "baseline": "a",
 "configs": [{"label": "a", "target": "http://bob:$PW_ENC@127.0.0.1:$P1/v1?model=llama",
              "dims": {"model": "m", "hardware": "h", "precision": "p", "framework": "f"}}]}
EOF
dr matrix_list 0 matrix --spec "$T/spec.json" --list
said matrix_list "http://bob:\*\*\*@127.0.0.1:$P1"
dr merge_sqlite 0 merge --db "$T/merged.db" "$A" "$T/m.db"

# ---------------------------------------------------------------- 2. PostgreSQL
if [ -z "${DRIFT_SECRETS_NO_PG:-}" ]; then
  if ! command -v psql > /dev/null || ! command -v pg_dump > /dev/null; then
    echo "secrets: no psql / pg_dump: part 2 skipped"
  else
    DIR=$(printf '%s' "$DRIFT_TEST_PG" | sed -n 's/.*[?&]host=\([^&]*\).*/\1/p')
    # form K DB -> URL: the password in one of the ways of writing it
    form() {
      case $1 in
        raw) printf '%s' "postgresql://postgres:$PW_RAW@/$2?host=$DIR" ;;
        esc) printf '%s' "postgres://postgres:$PW_ENC@/$2?host=$DIR" ;;
        query) printf '%s' "postgresql://postgres@/$2?host=$DIR&password=$PW_ENC" ;;
        quoted) printf '%s' "host=$DIR dbname=$2 user=postgres password='$PW_RAW with \\' space'" ;;
        bare) printf '%s' "host=$DIR password=$PW_RAW dbname=$2 user=postgres" ;;
      esac
    }
    for k in raw esc query quoted bare; do
      db=drift_e2e_sec_$$_$k
      psql "$DRIFT_TEST_PG" -qc "CREATE DATABASE $db" > /dev/null || { bad "cannot create database $db"; continue; }
      DBS+=("$db")
      U=$(form $k "$db")
      dr "pg_${k}_run" 0 run --db "$U" --label base --target "http://127.0.0.1:$P1/v1?model=llama" --suite "$SUITE"
      dr "pg_${k}_run2" 0 run --db "$U" --label targ --target "$TARG" --suite "$SUITE"
      dr "pg_${k}_import" 0 import --db "$U" "$LMEVAL"
      dr "pg_${k}_score" 0 score --db "$U"
      dr "pg_${k}_compare" 0\|1\|3 compare --db "$U" --baseline base --target targ
      dr "pg_${k}_merge_out" 0 merge --db "$T/pg_$k.db" "$U"
      dr "pg_${k}_merge_in" 0 merge --db "$U" "$T/m.db"
      said "pg_${k}_merge_in" "runs copied"
      dr "pg_${k}_merge_self" 2 merge --db "$U" "$U"
      dr "pg_${k}_missing" 2 compare --db "$(form $k "no_such_db_$$")" --baseline base --target targ
      said "pg_${k}_missing" "no_such_db_$$"
      check '[ "$(psql "$(form esc "$db")" -XAtqc "select count(*) from runs")" = 5 ]' \
        "$k: the store holds its 5 runs (base, targ, the import, measure's two merged in)"
      pg_dump "$(printf '%s' "$DRIFT_TEST_PG" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$db#")" > "$T/dump_$k.sql" 2> /dev/null ||
        bad "$k: pg_dump failed"
      check '! grep -q "$M" "$T/dump_$k.sql"' "$k: the marker is not in the database (pg_dump)"
    done
  fi
fi

# ---------------------------------------------------------------- the marker, anywhere
for f in "$A" "$E" "$T/m.db" "$T/merged.db" "$T"/pg_*.db; do
  [ -f "$f" ] || continue
  check '! sqlite3 "$f" .dump | grep -q "$M"' "the marker is not in $(basename "$f") (sqlite3 .dump)"
done
leaks=$(grep -l "$M" "$O"/* 2> /dev/null)
check '[ -z "$leaks" ]' "the marker is in nothing printed or written: $(for f in $leaks; do echo "$(basename "$f"): $(grep -m1 -o ".\{0,60\}$M.\{0,20\}" "$f")"; done)"
check '[ "$(ls "$O" | wc -l)" -gt 20 ]' "outputs were collected"

finish
