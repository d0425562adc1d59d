#!/usr/bin/env bash
# container.sh - the Containerfile (docs/container.md) built with podman or
# docker and run: the image's default command is the lab; here `lab --quick`
# at a small size (--limit 2, 8 new tokens) into a mounted directory, which
# must hold the report, and `driftbench --help` as the entrypoint. Skipped
# (77) where no container engine runs (no podman/docker, or its daemon does
# not answer), and unless DRIFT_TEST_CONTAINER=1 (the build compiles the
# package from nothing and downloads Debian packages: minutes).
. "$(dirname "$0")/lib.sh"
ENGINE=
for e in podman docker; do
  if command -v "$e" > /dev/null && timeout 20 "$e" info > /dev/null 2>&1; then ENGINE=$e; break; fi
done
[ -n "$ENGINE" ] || skip_all "no container engine runs here (podman or docker with a daemon)"
[ "${DRIFT_TEST_CONTAINER:-0}" = 1 ] || skip_all "$ENGINE runs, but the image build is slow: DRIFT_TEST_CONTAINER=1 runs it"
tag=driftbench-test-$$
on_exit() { "$ENGINE" rmi -f "$tag" > /dev/null 2>&1; }
t0=$(date +%s)
"$ENGINE" build -t "$tag" -f "$S/Containerfile" "$S" > "$T/build.log" 2>&1 || { tail -30 "$T/build.log"; fail "$ENGINE build"; }
echo "container: $ENGINE build: $(( $(date +%s) - t0 )) s"
out=$("$ENGINE" run --rm "$tag" --help 2>&1); rc=$?
check '[ $rc -eq 0 ] && printf "%s" "$out" | grep -q "^usage: driftbench"' "the entrypoint is driftbench (rc $rc): $(printf '%s' "$out" | head -3)"
mkdir -p "$T/lab" && chmod 777 "$T/lab"
t0=$(date +%s)
"$ENGINE" run --rm -v "$T/lab:/lab" "$tag" lab --quick --out /lab --limit 2 --max-tokens 8 > "$T/lab.log" 2>&1; rc=$?
echo "container: lab --quick --limit 2: $(( $(date +%s) - t0 )) s"
check '[ $rc -eq 0 ] && [ -s "$T/lab/report.html" ] && [ -s "$T/lab/flip_rates.csv" ]' "lab in the container (rc $rc): $(tail -5 "$T/lab.log")"
finish
