#!/usr/bin/env bash
# lab_shard.sh - `driftbench lab --full` as a job array: plan once, run the
# matrix's shards anywhere (Slurm array tasks, a Kubernetes Indexed Job, or
# machines by hand), merge, and let `lab` finish on the merged store.
#
#   tools/lab_shard/lab_shard.sh plan   DIR [lab flags...]   # lab --full --dry-run: DIR/matrix.json, the
#                                                          # size and estimate; the flags kept in DIR/lab_args
#   tools/lab_shard/lab_shard.sh run    DIR [I N]          # shard I of N (1-based) into DIR/shards/shard-I-of-N.db;
#                                                          # without I N, from the array's environment
#                                                          # (SLURM_ARRAY_TASK_ID..., JOB_COMPLETION_INDEX +
#                                                          # DRIFT_SHARD_COUNT), as `driftbench matrix` reads it
#   tools/lab_shard/lab_shard.sh finish DIR                # merge the shards into DIR/lab.db, then
#                                                          # `driftbench lab --full --out DIR` with the plan's flags
#
# What each step relies on:
#  - plan writes DIR/matrix.json (every configuration of --full, long
#    context included) and nothing else; its model paths are relative to the
#    directory plan ran in when the models are under it, so run and finish
#    change to that directory (kept in DIR/lab_cwd) first: start every task
#    where the same paths resolve (a shared file system, or the same checkout).
#  - run is `driftbench matrix --spec DIR/matrix.json --db SHARD`: each
#    configuration is generated and scored by exactly one shard; a task that
#    is retried resumes its own store (complete runs skipped).
#  - finish: `driftbench merge` joins the shard stores (a label stored twice
#    with different content is an error); then lab, re-run on the same
#    design, finds every configuration of the matrix complete and generates
#    nothing for it, runs the stochastic leg (not sharded: 4 runs x 100
#    math prompts, or --limit, x 5 replicates; plan prints its size) and
#    every analysis. The findings are those of an
#    unsharded run (tests/e2e/lab_shard.sh checks it at a tiny size).
# The lab flags given to plan (--limit, --max-tokens, --models, --threads,
# --guard, --embedder ...) must not change between plan and finish: they are
# stored in DIR/lab_args and reused, and plan refuses a DIR planned with others.
# Environment: DRIFTBENCH (default: driftbench on PATH).
set -euo pipefail
BIN=${DRIFTBENCH:-driftbench}
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
step=$1 dir=$2
shift 2
case "$step" in
plan)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    args=$(printf '%q ' "$@")
    if [ -f "$dir/lab_args" ] && [ "$(cat "$dir/lab_args")" != "$args" ]; then
        echo "lab_shard: $dir was planned with other flags ($(cat "$dir/lab_args")); use a new directory" >&2
        exit 2
    fi
    printf '%s' "$args" >"$dir/lab_args"
    pwd >"$dir/lab_cwd"
    "$BIN" lab --full --dry-run --out "$dir" "$@"
    n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["configs"]))' "$dir/matrix.json" 2>/dev/null || echo "?")
    echo "lab_shard: $n configurations in $dir/matrix.json; run each shard with: $0 run $dir I N (or as an array task), then: $0 finish $dir"
    ;;
run)
    [ -f "$dir/matrix.json" ] && [ -f "$dir/lab_cwd" ] || { echo "lab_shard: $dir has no plan (run: $0 plan $dir ...)" >&2; exit 2; }
    dir=$(cd "$dir" && pwd)
    mkdir -p "$dir/shards"
    cd "$(cat "$dir/lab_cwd")"
    if [ $# -ge 2 ]; then
        [[ $1 =~ ^[0-9]+$ && $2 =~ ^[0-9]+$ && $1 -ge 1 && $1 -le $2 ]] || { echo "lab_shard: shard '$1' of '$2': want 1 <= I <= N" >&2; exit 2; }
        exec "$BIN" matrix --spec "$dir/matrix.json" --db "$dir/shards/shard-$1-of-$2.db" --shard "$1/$2"
    fi
    # from the job array's environment: one store per task, named by its index
    idx=${SLURM_ARRAY_TASK_ID:-${JOB_COMPLETION_INDEX:-}}
    [ -n "$idx" ] || { echo "lab_shard: give I N, or run as a Slurm array task or Kubernetes Indexed Job" >&2; exit 2; }
    exec "$BIN" matrix --spec "$dir/matrix.json" --db "$dir/shards/task-$idx.db"
    ;;
finish)
    [ -f "$dir/lab_args" ] || { echo "lab_shard: $dir has no plan" >&2; exit 2; }
    dir=$(cd "$dir" && pwd)
    shopt -s nullglob
    shards=("$dir"/shards/*.db)
    [ ${#shards[@]} -gt 0 ] || { echo "lab_shard: no shard stores in $dir/shards" >&2; exit 2; }
    cd "$(cat "$dir/lab_cwd")"
    "$BIN" merge --db "$dir/lab.db" "${shards[@]}"
    eval "set -- $(cat "$dir/lab_args")"
    exec "$BIN" lab --full --out "$dir" "$@"
    ;;
*) usage ;;
esac
