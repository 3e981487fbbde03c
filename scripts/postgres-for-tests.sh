#!/usr/bin/env bash
# Makes sure a PostgreSQL server runs on loopback with a `tether` role and database, for
# the Postgres tests. Idempotent: installs the Debian package only when it is missing,
# starts the first cluster only when it is down, creates the role and database once.
set -euo pipefail
# Only the URL goes to stdout: what apt, pg_ctlcluster and psql print goes to stderr.
prepare() {
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    if ! command -v pg_lsclusters >/dev/null; then
        $SUDO apt-get update -qq
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    read -r version cluster port status _ < <(pg_lsclusters --no-header | head -n 1)
    if [ "$status" != online ]; then
        # A machine restored from an image can keep the socket lock of a server that no
        # longer runs; its PID may now belong to another process, and the start then fails.
        lock=/var/run/postgresql/.s.PGSQL.$port.lock
        if [ -f "$lock" ]; then
            pid=$(head -n 1 "$lock")
            [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ] || $SUDO rm -f "$lock"
        fi
        $SUDO pg_ctlcluster "$version" "$cluster" start
    fi
    as_postgres() { $SUDO runuser -u postgres -- "$@"; }
    [ "$(id -u)" = 0 ] || as_postgres() { sudo -u postgres "$@"; }
    if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'tether'" | grep -q 1; then
        as_postgres psql -p "$port" -qc "CREATE ROLE tether LOGIN SUPERUSER PASSWORD 'tether'"
    fi
    if ! as_postgres psql -p "$port" -tAc "SELECT 1 FROM pg_database WHERE datname = 'tether'" | grep -q 1; then
        as_postgres createdb -p "$port" -O tether tether
    fi
}
prepare >&2
echo "postgresql://tether:tether@127.0.0.1:$port/tether"
