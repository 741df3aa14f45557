#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL cluster on loopback, then stops and removes the cluster, also
# when the command fails or the script is interrupted.
#
#   scripts/with-postgres.sh [COMMAND ...]      default command: swift test (in this package)
#
# A COMMAND runs in the directory the script was started from (so that another package, such as
# Examples/TenantService, can run its own tests against the server); the default command runs in this package.
#
# Installs Debian's `postgresql` package when its server binaries are missing. The cluster lives in a temporary
# directory owned by the `postgres` user (initdb refuses to run as root), listens on 127.0.0.1 only, on
# $IDENTITY_PG_PORT or a free port, trusts local connections, and is gone at the end. The command sees libpq's
# variables PGHOST, PGPORT, PGUSER, PGDATABASE, plus IDENTITY_PG_DATA / IDENTITY_PG_BIN / IDENTITY_PG_RUNAS, which
# the tests use to kill (SIGKILL) and restart the server mid-run.
set -euo pipefail
caller_dir="$PWD"
cd "$(dirname "$0")/.."

find_bin() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
    done
    return 1
}

if ! PG_BIN=$(find_bin); then
    echo "PostgreSQL server binaries missing: installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
    PG_BIN=$(find_bin)
fi

RUN_AS=()
if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin postgres
    RUN_AS=(runuser -u postgres --)
fi

PORT="${IDENTITY_PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')}"
ROOT=$(mktemp -d /tmp/identity-pg.XXXXXX)
DATA="$ROOT/data"
chmod 755 "$ROOT"
mkdir -p "$DATA"
if [ ${#RUN_AS[@]} -gt 0 ]; then chown -R postgres "$ROOT"; fi

cleanup() {
    local status=$?
    "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$DATA" -m immediate -w stop >/dev/null 2>&1 || true
    # A server killed by a test and not restarted leaves no pg_ctl to stop it: end it by its pid file.
    if [ -f "$DATA/postmaster.pid" ]; then kill -9 "$(head -1 "$DATA/postmaster.pid")" 2>/dev/null || true; fi
    rm -rf "$ROOT"
    echo "== throwaway PostgreSQL on port $PORT stopped and removed"
    exit $status
}
trap cleanup EXIT INT TERM

"${RUN_AS[@]}" "$PG_BIN/initdb" -D "$DATA" -U postgres --auth=trust --no-sync -E UTF8 >"$ROOT/initdb.log" 2>&1 \
    || { cat "$ROOT/initdb.log"; exit 1; }
cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$ROOT'
fsync = on
max_connections = 200
CONF
"${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$DATA" -l "$ROOT/server.log" -w -t 30 start >/dev/null
echo "== throwaway PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT ($DATA)"

export PGHOST=127.0.0.1 PGPORT="$PORT" PGUSER=postgres PGDATABASE=postgres
export IDENTITY_PG_DATA="$DATA" IDENTITY_PG_BIN="$PG_BIN" IDENTITY_PG_LOG="$ROOT/server.log"
export IDENTITY_PG_RUNAS="${RUN_AS[*]}"

if [ $# -eq 0 ]; then set -- swift test; else cd "$caller_dir"; fi
"$@"
