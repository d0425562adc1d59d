#!/usr/bin/env bash
# slurm_array.sh - matrix shards as a real Slurm job array on this machine:
# munged, slurmctld and slurmd (Debian's munge and slurm-wlm packages) are
# started in a temporary directory with a generated single-node slurm.conf
# (localhost, free ports, no cgroups, no accounting), `sbatch --array=0-3
# docs/scale/slurm-array.sh` runs `driftbench matrix` without --shard (each task takes its shard from
# SLURM_ARRAY_TASK_ID/COUNT) into a store of its own, and `driftbench merge`
# joins them: the merged store holds the same runs, answers and scores as
# the matrix run unsharded. Task 1's first server dies mid-run (the task
# fails); `scontrol requeue` retries it and it resumes its shard. The
# serving stacks are tests/server/fakeserver.c, started by the matrix.
# Exit 77 (skipped, with the reason) where Slurm is not installed or cannot
# start here. The array script is docs/scale/slurm-array.sh, as documented.
. "$(dirname "$0")/lib.sh"
for c in munged mungekey slurmctld slurmd sbatch squeue sinfo scontrol; do
  command -v "$c" > /dev/null || PATH=$PATH:/usr/sbin command -v "$c" > /dev/null ||
    skip_all "$c not found: Slurm's single-node test needs the Debian packages slurmctld slurmd slurm-client munge (scripts/install-deps.sh --test)"
done
export PATH=$PATH:/usr/sbin
# slurmd launches jobs as their user, which takes root; a cluster of one user's daemons is not tried
[ "$(id -u)" = 0 ] || skip_all "not root: slurmd needs root to launch jobs (CI containers run as root; so does \`sudo -E ctest -R slurm_array\`)"
chmod 755 "$T"   # munged wants its socket's directory searchable by all, and writable by its owner only
DPIDS=()
on_exit() {
  [ -n "${SLURM_CONF:-}" ] && [ -n "${JOB:-}" ] && scancel "$JOB" 2>/dev/null
  for p in "${DPIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${DPIDS[@]}"; do for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; kill -9 "$p" 2>/dev/null; done
}
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# ---------------------------------------------------------------- munge
mungekey --create --keyfile="$T/munge.key" > "$T/mungekey.out" 2>&1 || skip_all "mungekey cannot create a key: $(cat "$T/mungekey.out")"
chmod 600 "$T/munge.key"
munged -F --socket="$T/munge.sock" --key-file="$T/munge.key" --log-file="$T/munged.log" \
  --pid-file="$T/munged.pid" --seed-file="$T/munged.seed" > "$T/munged.out" 2>&1 &
DPIDS+=($!)
for _ in $(seq 50); do [ -S "$T/munge.sock" ] && break; sleep 0.1; done
[ -S "$T/munge.sock" ] || skip_all "munged did not start: $(tail -3 "$T/munged.out")"

# ---------------------------------------------------------------- slurm
H=$(hostname -s)
read -r P1 P2 < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
mkdir -p "$T/state" "$T/spool"
cat > "$T/slurm.conf" <<EOF
ClusterName=driftbench
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$P1
SlurmdPort=$P2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
NodeName=$H NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=drift Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -D -c > "$T/slurmctld.out" 2>&1 &
DPIDS+=($!)
slurmd -D > "$T/slurmd.out" 2>&1 &
DPIDS+=($!)
up=0
for _ in $(seq 100); do
  [ "$(sinfo -h -o %t 2>/dev/null)" = idle ] && { up=1; break; }
  sleep 0.2
done
[ $up = 1 ] || skip_all "slurmctld/slurmd did not come up on this machine: $(tail -2 "$T/slurmctld.out" "$T/slurmd.out" "$T/slurmctld.log" "$T/slurmd.log" 2>/dev/null | tr '\n' ' ' | head -c 600)"
echo "slurm: up (controller port $P1, node $H)"

# ---------------------------------------------------------------- the matrix
# 6 configurations (shards of 2, 2, 1, 1 over 4 tasks), each with its own
# fake server; c1's first start dies after 3 replies (task 1 fails once).
srv() { echo "echo \$\$ >> $T/pids; exec $FAKE --port {port} --lifetime 300 --model {model}"; }
die_cmd="echo \$\$ >> $T/pids; if [ -n \"\$SLURM_JOB_ID\" ] && [ ! -e $T/died ]; then touch $T/died; X=--die-after; N=3; else X=; N=; fi; exec $FAKE --port {port} --lifetime 300 --model {model} \$X \$N"
{
  echo '{"suites": ["builtin:math"], "limit": 8, "decoding": {"max_tokens": 16}, "baseline": "c0", "configs": ['
  for i in 0 1 2 3 4 5; do
    cmd=$(srv); [ $i = 1 ] && cmd=$die_cmd
    printf '%s{"label":"c%d","target":"http://127.0.0.1:{port}/v1?model=m%d&api=completions","dims":{"model":"m%d"},"server":{"start":"%s"}}\n' \
      "$([ $i = 0 ] || echo ,)" $i $i $i "$(printf '%s' "$cmd" | sed 's/\\/\\\\/g; s/"/\\"/g')"
  done
  echo ']}'
} > "$T/spec.json"
"$D" matrix --spec "$T/spec.json" --list > /dev/null 2> "$T/list.err" || { echo "FAIL: the spec does not parse: $(cat "$T/list.err")"; exit 1; }

# waits until none of the job's tasks is pending or running (up to $1 s)
wait_job() {
  local t0; t0=$(now)
  while [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ]; do
    awk -v s="$(secs "$t0")" -v m="$1" 'BEGIN{exit !(s > m)}' && return 1
    sleep 0.5
  done
}
t0=$(now)
# the documented array script, as is (its #SBATCH lines, but one CPU a task here)
JOB=$(DRIFTBENCH=$D sbatch --parsable --array=0-3 --cpus-per-task=1 --chdir="$T" --output="$T/task-%a.out" \
  "$S/docs/scale/slurm-array.sh" "$T/spec.json" "$T" 2> "$T/sbatch.err")
check '[ -n "$JOB" ]' "sbatch --array=0-3 submits ($(cat "$T/sbatch.err"))"
check 'wait_job 300' "the array finishes within 300 s"
echo "array: $(secs "$t0") s"
# each task's exit as the scheduler recorded it
exits() { for i in 0 1 2 3; do scontrol -o show job "${JOB}_$i" | grep -o " ExitCode=[0-9]*" | cut -d= -f2; done | tr '\n' ' '; }
check '[ "$(exits)" = "0 2 0 0 " ]' "tasks 0, 2, 3 exit 0 and task 1 exit 2 (its server died): $(exits)"
for i in 0 1 2 3; do
  check 'grep -q "^matrix: shard $((i + 1))/4 from Slurm (SLURM_ARRAY_TASK_ID=$i, SLURM_ARRAY_TASK_COUNT=4" "$T/task-$i.out"' \
    "task $i says it runs shard $((i + 1))/4 from Slurm: $(head -2 "$T/task-$i.out")"
done
check '[ "$(sqlite3 "$T/shard-0.db" "select group_concat(label) from (select label from runs order by label)")" = "c0,c4" ]' "task 0 ran c0 and c4"
check '[ "$(sqlite3 "$T/shard-3.db" "select group_concat(label) from runs")" = "c3" ]' "task 3 ran c3"

# the scheduler's retry of the failed task resumes its shard
n1=$(sqlite3 "$T/shard-1.db" "select count(*) from responses where error is null")
t0=$(now)
scontrol requeue "${JOB}_1" 2> "$T/requeue.err"; rc=$?
check '[ $rc -eq 0 ]' "scontrol requeue ${JOB}_1 ($(cat "$T/requeue.err"))"
# a requeued job waits before it is eligible again; start it now
scontrol update JobId="${JOB}_1" StartTime=now 2>> "$T/requeue.err"
check 'wait_job 300' "the retried task finishes"
echo "retry: $(secs "$t0") s"
check '[ "$(exits)" = "0 0 0 0 " ]' "the retried task exits 0: $(exits)"
check 'grep -q "resuming run .c1.: 8 prompts x 1 replicate(s), $((8 - n1)) to request" "$T/task-1.out"' \
  "the retry resumes c1 ($n1 of 8 stored before): $(grep -m1 c1 "$T/task-1.out")"

# ---------------------------------------------------------------- merge = unsharded
"$D" merge -o "$T/merged.db" "$T"/shard-[0-3].db 2> "$T/merge.err"
check '[ $? -eq 0 ] && grep -q "^merge: 6 runs copied" "$T/merge.err"' "merge joins the 4 shard stores: $(cat "$T/merge.err")"
rm -f "$T/died"
"$D" --quiet matrix --spec "$T/spec.json" --db "$T/whole.db" 2> "$T/whole.err"
check '[ $? -eq 0 ]' "the unsharded matrix runs ($(tail -3 "$T/whole.err"))"
# a store's content, independent of row ids and times
dump() {
  sqlite3 "$1" "select 'run', label, target, config, decoding, templates, suites, finished_at is not null from runs order by label;
    select 'prompt', suite, prompt_id, workload, input, reference, hash from prompts order by suite, prompt_id;
    select 'response', r.label, p.suite, p.prompt_id, x.replicate, x.failed, x.http_status, x.finish_reason,
           x.completion_tokens, x.error, x.text
      from responses x join runs r on r.id = x.run_id join prompts p on p.id = x.prompt_rowid
      order by r.label, p.suite, p.prompt_id, x.replicate;
    select 'score', r.label, p.prompt_id, x.replicate, s.evaluator, s.label, s.value, s.detail
      from scores s join responses x on x.id = s.response_id join runs r on r.id = x.run_id
      join prompts p on p.id = x.prompt_rowid order by r.label, p.prompt_id, x.replicate, s.evaluator;"
}
dump "$T/merged.db" > "$T/merged.txt"
dump "$T/whole.db" > "$T/whole.txt"
check '[ "$(grep -c "^response|" "$T/whole.txt")" = 48 ] && [ "$(grep -c "^score|" "$T/whole.txt")" -ge 48 ]' \
  "the unsharded store: 6 x 8 answers, scored ($(cut -d'|' -f1 "$T/whole.txt" | sort | uniq -c | tr '\n' ' '))"
check 'cmp -s "$T/merged.txt" "$T/whole.txt"' "the merged store equals the unsharded one: $(diff "$T/merged.txt" "$T/whole.txt" | head -5)"
check '[ "$(sqlite3 "$T/merged.db" "select count(*) from responses where error is not null")" = 0 ]' "no error left in the merged store"

finish
