# tests/e2e/lib.sh - the preamble every e2e script shares, written once.
# shellcheck shell=bash disable=SC2034  # sourced: the variables are the scripts'
#
# Every tests/e2e/*.sh is bash and starts with
#     . "$(dirname "$0")/lib.sh"
# and, when it counts its checks, ends with `finish`. ctest runs each script
# with DRIFTBENCH (the CLI), DRIFT_BUILD and DRIFT_SOURCE set; by hand,
# DRIFTBENCH=build/driftbench bash tests/e2e/NAME.sh is enough (the others
# default to the CLI's directory and this checkout).
#
# The dialect: `set -u` and no `set -e`. A check is explicit, never an
# accident of a command's exit status:
#   check 'CONDITION' "message"   counted; the script goes on (most scripts)
#   ok / bad "message"            the same, by hand
#   fail "message"                fatal: prints FAIL and exits 1 at once
#   skip "message" / skip_all "m" a case, or the whole script (exit 77), not
#                                 possible here
# `finish` prints "NAME: P passed, F failed" and is the script's status.
#
# It sets D (the CLI), S (source root), B (build directory), FAKE
# (tests/server/fakeserver), FIX (tests/data/fake), T (a private temporary
# directory) and PIDS. At exit every pid in PIDS and every pid a started
# command wrote to "$T/pids" is killed (SIGKILL), the script's own
# `on_exit` function runs first when it defines one, and T is removed.
#
# The fake OpenAI server (tests/server/fakeserver, scripted by a file of
# answers, see tests/data/fake) is started by one controller:
#   start_server SCRIPT_FILE [ARGS...]  sets PORT (and SERVER_PID), killed
#                                 at exit; ARGS go to the fake server
#   start_server_text 'TEXT'      the same from text (printf %b escapes)
# Other servers (driftbench serve, python) are waited for with
#   wait_port_file FILE [TRIES]   the "PORT n" line a server prints -> PORT
#   free_port                     prints a TCP port nobody listens on now
# Servers driftbench starts itself: server_start_cmd NAME MODEL [EXTRA]
# (counted starts in $T/starts.NAME) and all_gone (each has exited)
# `driftbench serve` at a profile: start_serve NAME PROFILE [MODEL] (PORT_NAME).
# Shared by a few scripts: div / divergence_check (token-level divergence
# JSON, the checks in divergence_checks.py beside this file), python_with /
# python_test_store (the Python package's tests).

set -u
D=${DRIFTBENCH:?set DRIFTBENCH to the CLI}
S=${DRIFT_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
B=${DRIFT_BUILD:-$(dirname "$D")}
FAKE=$B/fakeserver
FIX=$S/tests/data/fake
E2E_NAME=$(basename "$0" .sh)
T=$(mktemp -d) || { echo "FAIL: mktemp -d"; exit 1; }
PIDS=()

e2e_cleanup() {
  local p
  if declare -F on_exit > /dev/null; then on_exit; fi
  for p in "${PIDS[@]}"; do kill -9 "$p" 2> /dev/null; done
  if [ -f "$T/pids" ]; then while read -r p; do kill -9 "$p" 2> /dev/null; done < "$T/pids"; fi
  rm -rf "$T"
}
trap e2e_cleanup EXIT

fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; }
skip_all() { echo "SKIP: $*"; exit 77; }
finish() { echo "$E2E_NAME: $passes passed, $fails failed"; [ "$fails" -eq 0 ]; }

sql() { sqlite3 "$1" "$2"; }
now_ms() { date +%s%3N; }
now() { date +%s.%N; }

# wait_port_file FILE [TRIES]: waits (TRIES x 50 ms, default 100) for the
# "PORT n" line a server writes to FILE; sets PORT, returns 1 without it
wait_port_file() {
  local _
  for _ in $(seq "${2:-100}"); do
    PORT=$(awk '/^PORT/{print $2}' "$1" 2> /dev/null)
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  return 1
}

# start_server SCRIPT_FILE [FAKESERVER_ARGS...]: the fake server answering
# from SCRIPT_FILE (lifetime FAKE_LIFETIME s, default 300), disowned (a
# script's `wait` never waits for it); sets PORT and SERVER_PID; a server
# that does not start fails the script
start_server() {
  local out=$T/srv.$RANDOM script=$1
  shift
  "$FAKE" --script "$script" --lifetime "${FAKE_LIFETIME:-300}" --quiet "$@" > "$out" 2> /dev/null &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  disown "$SERVER_PID"
  wait_port_file "$out" || { echo "server did not start"; exit 1; }
}

# start_server_text TEXT: start_server with a script written from TEXT
start_server_text() {
  local script=$T/script.$RANDOM
  printf '%b' "$1" > "$script"
  start_server "$script"
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Servers that driftbench itself starts (matrix's "server", measure's
# --baseline-start / --target-start):
# server_start_cmd NAME MODEL [EXTRA]: a start command that records its pid
# in $T/pids (exec keeps it) and one line per start in $T/starts.NAME, then
# runs the fake server on {port} serving MODEL with EXTRA flags
server_start_cmd() {
  echo "echo \$\$ >> $T/pids; echo start >> $T/starts.$1; exec $FAKE --port {port} --lifetime 120 --model $2 ${3:-}"
}
# all_gone: every pid a start command recorded in $T/pids has exited
# (waits up to 3 s for reaping)
all_gone() {
  local _ p left
  for _ in $(seq 60); do
    left=0
    while read -r p; do kill -0 "$p" 2> /dev/null && left=1; done < "$T/pids"
    [ $left = 0 ] && return 0
    sleep 0.05
  done
  return 1
}

# `driftbench serve` of a model at a profile:
# start_serve NAME PROFILE [MODEL]: serves MODEL (default $M) at PROFILE on
# a free port (1 thread, 600 s), killed at exit; sets PORT and PORT_<NAME>;
# output in $T/NAME.out and .err; one that prints no PORT fails the script
start_serve() {
  "$D" serve --model "${3:-${M:?start_serve: set M or pass MODEL}}" --profile "$2" --port 0 --threads 1 \
    --lifetime 600 > "$T/$1.out" 2> "$T/$1.err" &
  PIDS+=($!)
  wait_port_file "$T/$1.out" 200 || fail "serve $2 printed no PORT: $(cat "$T/$1.err")"
  eval "PORT_$1=$PORT"
}

# Token-level divergence (the scripts that compare HTTP and embedded runs):
# div NAME BASELINE TARGET [ARGS]: `divergence` over $DB as JSON into
# $T/NAME.json (stderr $T/NAME.err); its exit status in rc
div() {
  local n=$1 b=$2 t=$3
  shift 3
  "$D" --quiet divergence --db "$DB" --baseline "$b" --target "$t" --format json "$@" > "$T/$n.json" 2> "$T/$n.err"
  rc=$?
}
# divergence_check VERB ARGS...: the shared checks of divergence JSON and the
# stored logprobs (same-zero, tolerance, mixed, compare-kl, stored-logprobs,
# forced-ppl: tests/e2e/divergence_checks.py says what each holds)
divergence_check() { python3 "$S/tests/e2e/divergence_checks.py" "$@"; }

# The Python package's tests (python_package.sh, python_postgres.sh):
# python_with MODULES: prints the first python3 (/usr/bin/python3, then the
# one on PATH) that imports MODULES ("pandas, venv"); nothing and status 1
# when none does
python_with() {
  local p
  for p in /usr/bin/python3 python3; do
    if "$p" -c "import $1" 2> /dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
# python_test_store STORE: the store python/tests/test_driftbench.py reads,
# written into STORE (a file or a PostgreSQL URL): the shipped qwen2-7m model (short math answers; the fragile ones answer in chains past these tokens)
# at ref and cpu-int4 over 16 math and 16 safety prompts, scored; compare's
# JSON in $T/c.json (its exit status in rc) and with --budget math=none in
# $T/c0.json, `runs list --json` in $T/runs.json; a step that fails fails
# the script
python_test_store() {
  local m=$S/models/qwen2-7m.gguf
  local r=(--suite builtin:math --suite builtin:safety --limit 16 --max-tokens 32 --concurrency 1)
  $D --quiet run --db "$1" --label ref --target "embedded:$m?profile=ref&threads=1" "${r[@]}" || fail "run ref"
  $D --quiet run --db "$1" --label int4 --target "embedded:$m?profile=cpu-int4&threads=1" "${r[@]}" || fail "run int4"
  $D --quiet score --db "$1" --jobs 1 || fail "score"
  "$D" compare --db "$1" --baseline ref --target int4 --format json > "$T/c.json"
  rc=$?
  [ "$rc" -le 3 ] && [ -s "$T/c.json" ] || fail "compare --format json: rc $rc"
  "$D" compare --db "$1" --baseline ref --target int4 --budget math=none --format json > "$T/c0.json"
  "$D" runs list --db "$1" --json > "$T/runs.json" || fail "runs list --json"
}

# ---- the shadow proxy (shadow.sh, shadow_alarm.sh) ----
# start_shadow NAME ARGS...: `driftbench shadow` on a free port with ARGS,
# stdout and stderr in $T/NAME.out and .err; sets SHPID and SP (its port);
# waits SHADOW_PORT_WAIT tenths of a second (default 200) for the port
start_shadow() {
  local name=$1
  shift
  "$D" shadow --listen 127.0.0.1:0 "$@" > "$T/$name.out" 2> "$T/$name.err" &
  SHPID=$!
  PIDS+=("$SHPID")
  wait_port_file "$T/$name.out" "${SHADOW_PORT_WAIT:-200}" || fail "shadow $name printed no PORT: $(cat "$T/$name.err")"
  SP=$PORT
}
# stop_shadow: SIGTERM to the proxy, then its exit status
stop_shadow() {
  kill -TERM "$SHPID"
  wait "$SHPID"
}
# prom_check FILE: the Prometheus text exposition format 0.0.4, strictly
# enough: HELP/TYPE before a family's samples, families contiguous and
# declared once, sample lines "name{labels} value", histogram buckets
# cumulative with +Inf equal to _count
prom_check() { python3 "$S/tests/e2e/shadow_prom.py" "$1"; }
# metric FILE NAME[{labels}]: the sample's value
metric() { awk -v k="$2" '$1 == k {print $2}' "$1"; }
# metrics PORT FILE: the proxy's /metrics page into FILE
metrics() { curl -s "http://127.0.0.1:$1/metrics" > "$2"; }
# wait_pairs PORT N SECONDS: until driftbench_shadow_pairs_total reaches N
wait_pairs() {
  local _ v
  for _ in $(seq $(($3 * 10))); do
    v=$(curl -s "http://127.0.0.1:$1/metrics" | awk '$1 == "driftbench_shadow_pairs_total" {print $2}')
    [ "${v:-0}" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
