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
