#!/usr/bin/env bash
# with_server.sh CMD [ARGS...] - runs CMD with a private PostgreSQL server:
# a fresh cluster in a temporary directory (initdb, pg_ctl), listening on a
# Unix socket only, stopped and removed when CMD ends. CMD gets
#   DRIFT_TEST_PG       a libpq URL of the server's "postgres" database
#   DRIFT_TEST_PG_DIR   the cluster's directory (data/, the socket, the log)
#   DRIFT_TEST_PG_CTL   "pg_ctl -D DATA" as the server's owner: tests that
#                       stop and restart the server mid-run call
#                       "$DRIFT_TEST_PG_CTL stop -m immediate" / "... start"
# PostgreSQL refuses to run as root: as root the cluster belongs to the
# "postgres" user of Debian's postgresql package (runuser). Exit 77 (skip)
# with a message when no PostgreSQL server can be started here; otherwise
# CMD's exit code.
set -u
bindir=""
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bindir=$d; done
if [ -z "$bindir" ]; then
  echo "with_server: SKIP: no PostgreSQL server here (Debian: apt-get install postgresql; scripts/install-deps.sh --test)" >&2
  exit 77
fi
as=()
owner=$(id -un)
if [ "$(id -u)" -eq 0 ]; then
  if ! id postgres >/dev/null 2>&1; then
    echo "with_server: SKIP: running as root and there is no 'postgres' user to own the server" >&2
    exit 77
  fi
  as=(runuser -u postgres --)
  owner=postgres
fi
dir=$(mktemp -d /tmp/drift-pg.XXXXXX)
chmod 755 "$dir"
[ "$owner" = postgres ] && chown postgres: "$dir"
cleanup() {
  "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1; then
  echo "with_server: SKIP: initdb failed:" >&2; tail -5 "$dir/initdb.log" >&2
  exit 77
fi
# Unix socket in $dir, no TCP; fsync stays on (tests kill the server).
opts="-c listen_addresses='' -c unix_socket_directories='$dir' -c max_connections=200 -c shared_buffers=64MB"
if ! "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -o "$opts" -l "$dir/server.log" -w -t 60 start >/dev/null 2>&1; then
  echo "with_server: SKIP: the server did not start:" >&2; tail -5 "$dir/server.log" >&2
  exit 77
fi
export DRIFT_TEST_PG="postgresql://postgres@/postgres?host=$dir"
export DRIFT_TEST_PG_DIR="$dir"
export DRIFT_TEST_PG_CTL="${as[*]} $bindir/pg_ctl -D $dir/data -o \"$opts\" -l $dir/server.log -w -t 180"
"$@"
