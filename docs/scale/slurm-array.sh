#!/bin/bash
# docs/scale/slurm-array.sh - a DriftBench matrix as a Slurm job array: each
# array task runs one shard of the spec's configurations into a store of its
# own; a last job, started when every task is done, merges the shards.
#
#   sbatch --array=0-7 docs/scale/slurm-array.sh matrix.json /shared/drift
#   # then, once: sbatch --dependency=afterok:<array job id> --wrap \
#   #   'driftbench merge -o /shared/drift/all.db /shared/drift/shard-*.db'
#
# `driftbench matrix` without --shard takes its shard from the task's
# environment (SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT, or MIN/MAX
# and STEP: --array=0-7, 1-8 and 0-14:2 all work; a list with gaps such as
# --array=1,3,7 is refused) and says so on stderr:
#   matrix: shard 3/8 from Slurm (SLURM_ARRAY_TASK_ID=2, SLURM_ARRAY_TASK_COUNT=8, ...)
# A task that fails or is requeued (scontrol requeue, a node failure with
# --requeue) runs the same shard into the same store again: complete runs
# are skipped and an interrupted one resumes where it stopped.
# OUT_DIR may instead be a PostgreSQL URL (postgresql://user@host/db): every
# task then writes into that one shared store (run locks keep two tasks off
# one configuration) and there is nothing to merge.
# tests/e2e/slurm_array.sh runs this on a single-node Slurm it starts itself.
#SBATCH --job-name=driftbench
#SBATCH --cpus-per-task=2
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --output=driftbench-%A_%a.out
set -eu
SPEC=${1:?usage: sbatch --array=0-N slurm-array.sh SPEC.json OUT_DIR}
OUT=${2:?usage: sbatch --array=0-N slurm-array.sh SPEC.json OUT_DIR}
DRIFTBENCH=${DRIFTBENCH:-driftbench}
case "$OUT" in
  postgresql://* | postgres://*) DB=$OUT ;; # one shared PostgreSQL store
  *)                                        # one SQLite file per task: files are not shared between nodes
    mkdir -p "$OUT"
    DB="$OUT/shard-$SLURM_ARRAY_TASK_ID.db" ;;
esac
exec "$DRIFTBENCH" matrix --spec "$SPEC" --db "$DB"
