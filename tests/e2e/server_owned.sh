#!/usr/bin/env bash
# server_owned.sh - the servers the matrix and measure start are ours, die
# with us, and take values as data (issue 34), with tests/server/fakeserver.c
# as the serving stack:
#   a port squatter: a process of someone else's binds the chosen port
#     before our server and answers /health 200: the matrix and measure exit
#     2 naming the port and the squatter's pid, and store nothing under the
#     configuration's label;
#   kill -9 of driftbench during a matrix whose start command is not an exec
#     (sh -c 'server; echo': the server a grandchild): the server is gone
#     and its port closed within a few seconds;
#   hostile dimension values ($(touch ...), backquotes, quotes, ';') run
#     nothing and reach the server's command line literally; a placeholder
#     inside quotes is refused.
. "$(dirname "$0")/lib.sh"
export TMPDIR=$T          # the servers' logs go here
PWN=/tmp/PWNED_xyz_$$     # what a value that ran would create
bg_pids=()
on_exit() {
  local p
  for p in "${bg_pids[@]}"; do [ "$p" -gt 1 ] 2>/dev/null && kill -9 "$p" 2>/dev/null; done
  rm -f "$PWN" "$PWN".*
}
target='http://127.0.0.1:{port}/v1?model=m&api=completions'

# 1 when something listens on 127.0.0.1:PORT (or 0.0.0.0) per /proc/net/tcp
listening() { # PORT
  local hex
  hex=$(printf '%04X' "$1")
  awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' /proc/net/tcp
}
# the pid of the process whose command line holds ARG (0 if none)
pid_with_arg() { # ARG
  local d
  for d in /proc/[0-9]*; do
    if { tr '\0' '\n' < "$d/cmdline"; } 2>/dev/null | grep -qxF -- "$1"; then echo "${d#/proc/}"; return; fi
  done
  echo 0
}
# waits up to S seconds for CONDITION (a shell expression)
wait_for() { # S CONDITION
  local i
  for i in $(seq $(($1 * 20))); do eval "$2" && return 0; sleep 0.05; done
  return 1
}
# a squatter: once FILE holds a port, fakeserver takes it, serving the same
# model, so its answers would pass for the server's (our child, not
# driftbench's: someone else's server as far as driftbench can tell)
squat() { # FILE
  ( while [ ! -s "$1" ]; do sleep 0.01; done; exec "$FAKE" --port "$(cat "$1")" --lifetime 60 --model m --quiet ) > /dev/null &
  SQ=$!
  bg_pids+=("$SQ")
}

# ---------------------------------------------------------------- squatter: matrix
# our server writes its port, then takes 1.5 s to bind it; the squatter is faster
slow_start="echo {port} > $T/port.m; sleep 1.5; exec $FAKE --port {port} --lifetime 60"
cat > "$T/squat.json" <<EOF
{"suites": ["builtin:math"], "limit": 4, "baseline": "ref",
 "configs": [
  {"label": "ref", "target": "$target", "dims": {"model": "m", "side": "ref"},
   "server": {"start": "exec $FAKE --port {port} --lifetime 60"}},
  {"label": "victim", "target": "$target", "dims": {"model": "m", "side": "victim"},
   "server": {"start": "$slow_start", "ready_timeout_s": 20}}]}
EOF
squat "$T/port.m"
DB=$T/squat.db
$D matrix --spec "$T/squat.json" --db "$DB" > /dev/null 2> "$T/squat.err"
rc=$?
port=$(cat "$T/port.m" 2>/dev/null)
check '[ $rc -eq 2 ]' "matrix with a squatter: exit 2 (got $rc: $(tail -3 "$T/squat.err"))"
check 'grep -q "configuration .victim.: server .*127.0.0.1:$port, where /health answered, is held by pid $SQ (\`$FAKE --port $port " "$T/squat.err"' \
  "the message names the configuration, the port and the squatter's pid ($(grep victim "$T/squat.err" | head -c 600))"
check '[ "$(sql "$DB" "select count(*) from runs where label = '"'victim'"'")" = 0 ]' "no run stored under the victim's label"
check '[ "$(sql "$DB" "select count(*) from responses r join runs u on u.id = r.run_id where u.label = '"'victim'"'")" = 0 ]' \
  "no answer stored under the victim's label"
check '[ "$(sql "$DB" "select count(*) from responses r join runs u on u.id = r.run_id where u.label = '"'ref'"' and r.error is null")" = 4 ]' \
  "the configuration with its own port ran"
check 'kill -0 $SQ 2>/dev/null' "the squatter is not ours to stop"
kill -9 "$SQ" 2>/dev/null; wait "$SQ" 2>/dev/null

# ---------------------------------------------------------------- squatter: measure
squat "$T/port.t"
MDB=$T/measure.db
$D --quiet measure --db "$MDB" --suite builtin:math --limit 4 --max-tokens 16 \
  --baseline "$target" --baseline-start "exec $FAKE --port {port} --lifetime 60 --model m" \
  --target "$target" --target-start "echo {port} > $T/port.t; sleep 1.5; exec $FAKE --port {port} --lifetime 60 --model m" \
  --start-timeout 20 > /dev/null 2> "$T/measure.err"
rc=$?
port=$(cat "$T/port.t" 2>/dev/null)
check '[ $rc -eq 2 ]' "measure with a squatter: exit 2 (got $rc: $(tail -3 "$T/measure.err"))"
check 'grep -q -- "--target-start: server .*127.0.0.1:$port, where /health answered, is held by pid $SQ " "$T/measure.err"' \
  "measure names the port and the squatter ($(head -c 600 "$T/measure.err"))"
check '[ "$(sql "$MDB" "select count(*) from runs where label = '"'target'"'")" = 0 ]' "measure stored nothing under the target's label"
kill -9 "$SQ" 2>/dev/null; wait "$SQ" 2>/dev/null

# ---------------------------------------------------------------- kill -9
# every answer waits 30 s: the matrix is mid-run when it is killed; the
# start command is not an exec, so the server is the inner shell's child
printf 'fault | * | sleep | seconds=30\n' > "$T/slow.txt"
mark="kill9-$$"
cat > "$T/kill.json" <<EOF
{"suites": ["builtin:math"], "limit": 4, "baseline": "x",
 "configs": [{"label": "x", "target": "http://127.0.0.1:{port}/v1?model=$mark&api=completions", "dims": {"model": "m"},
   "server": {"start": "echo {port} > $T/port.k; sh -c '$FAKE --port {port} --lifetime 120 --script $T/slow.txt --model $mark; echo server ended'"}}]}
EOF
$D matrix --spec "$T/kill.json" --db "$T/kill.db" > /dev/null 2> "$T/kill.err" &
mp=$!
bg_pids+=("$mp")
wait_for 20 'grep -q "starting run" "$T/kill.err" 2>/dev/null'
port=$(cat "$T/port.k" 2>/dev/null)
srv=$(pid_with_arg "$mark")
check '[ -n "$port" ] && listening "$port" && [ "$srv" != 0 ]' "the server runs and listens before the kill (port ${port:-?}, pid $srv)"
check '[ "$(awk "{print \$4}" /proc/$srv/stat 2>/dev/null)" != "$mp" ]' "the server is not driftbench's direct child (a grandchild at least)"
kill -9 "$mp"
wait "$mp" 2>/dev/null
wait_for 5 '! kill -0 $srv 2>/dev/null'
check '! kill -0 $srv 2>/dev/null' "kill -9 of driftbench: the server (pid $srv) is gone within 5 s"
check '! listening "$port"' "kill -9 of driftbench: nothing listens on its port $port"
check '[ "$(pid_with_arg "$mark")" = 0 ]' "kill -9 of driftbench: no process with the server's command line is left"
[ "$srv" -gt 1 ] && kill -9 "$srv" 2>/dev/null   # (0: none; kill 0 would be our own group)

# ---------------------------------------------------------------- values are data
rm -f "$PWN" "$PWN".*
# level texts with shell in them; the start command records its arguments
cat > "$T/values.json" <<'EOF'
{"suites": ["builtin:math"], "limit": 2, "decoding": {"max_tokens": 8}, "baseline": "subst",
 "dimensions": {"v": {"subst": "$(touch @PWN@)", "back": "`touch @PWN@.b`", "quote": "x'; touch @PWN@.q; '",
                      "semi": "a;touch @PWN@.s", "plain": "models/b.gguf"}},
 "target": "http://127.0.0.1:{port}/v1?model=m&api=completions", "label": "{v}",
 "server": {"start": "printf '%s\\n' {v} >> @T@/argv; exec @FAKE@ --port {port} --lifetime 60 --model m --quiet"}}
EOF
sed -i "s|@PWN@|$PWN|g; s|@T@|$T|g; s|@FAKE@|$FAKE|g" "$T/values.json"
$D matrix --spec "$T/values.json" --db "$T/values.db" > /dev/null 2> "$T/values.err"
rc=$?
check '[ $rc -eq 0 ]' "a matrix with shell in its values: exit 0 (got $rc: $(tail -3 "$T/values.err"))"
check '[ ! -e "$PWN" ] && [ -z "$(ls "$PWN".* 2>/dev/null)" ]' "no value ran (no $PWN*)"
printf '%s\n' "\$(touch $PWN)" "\`touch $PWN.b\`" "x'; touch $PWN.q; '" "a;touch $PWN.s" "models/b.gguf" > "$T/argv.want"
check 'diff -q "$T/argv.want" "$T/argv" > /dev/null' "each value reached the command line literally ($(cat "$T/argv" 2>/dev/null))"
check '[ "$(sql "$T/values.db" "select count(*) from responses where error is null")" = 10 ]' "every configuration ran"
$D matrix --spec "$T/values.json" --list > "$T/values.list"
check 'grep -qF "printf '"'"'%s\n'"'"' '"'"'\$(touch $PWN)'"'"' >>" "$T/values.list"' "--list shows the value quoted ($(head -1 "$T/values.list"))"
check '[ ! -e "$PWN" ]' "--list runs nothing"
# a placeholder inside quotes, where a second shell would read it, is refused
sed 's|"start": "printf|"start": "sh -c '"'"'exec printf {v}'"'"'; printf|' "$T/values.json" > "$T/quoted.json"
$D matrix --spec "$T/quoted.json" --list > /dev/null 2> "$T/quoted.err"
rc=$?
check '[ $rc -eq 2 ] && grep -qF "placeholder {v} is inside '"'"'...'"'"' quotes" "$T/quoted.err"' \
  "a placeholder inside quotes is refused (rc $rc: $(cat "$T/quoted.err"))"
check '[ ! -e "$PWN" ]' "still nothing ran"

finish
