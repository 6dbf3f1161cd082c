#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for the sql source's tests (core/tests/sql.rs) and
# prints the line that exports its URL: eval "$(.ci/postgres.sh)". Installs Debian's
# postgresql when no server binaries are there. The cluster lives in a new temporary
# directory, owned by the postgres user when run as root (initdb refuses root), listens on
# 127.0.0.1 only, on a free port, trusts local connections (user sluice, database postgres)
# and skips fsync. Stop it with: eval "$SLUICE_POSTGRES_STOP" (also printed).
set -euo pipefail

if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
bin=$(compgen -G "/usr/lib/postgresql/*/bin" | sort -V | tail -n 1)
data=$(mktemp -d /tmp/sluice-postgres.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
if [ "$(id -u)" = 0 ]; then chown postgres: "$data"; fi

as_owner "$bin/initdb" -D "$data/db" -A trust -U sluice -E UTF8 --no-sync >/dev/null
as_owner "$bin/pg_ctl" -D "$data/db" -l "$data/log" -w \
  -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
echo "export SLUICE_POSTGRES_URL=postgresql://sluice@127.0.0.1:$port/postgres"
echo "export SLUICE_POSTGRES_DATA=$data/db"
stop="$bin/pg_ctl -D $data/db -m fast stop"
if [ "$(id -u)" = 0 ]; then stop="runuser -u postgres -- $stop"; fi
echo "export SLUICE_POSTGRES_STOP=\"$stop\""
