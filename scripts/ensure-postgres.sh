#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use is up; start the local cluster if it is installed but down.
set -euo pipefail
HOST=${PGHOST:-127.0.0.1}
PORT=${PGPORT:-5432}

up() { pg_isready -q -h "$HOST" -p "$PORT" 2>/dev/null; }

if up; then exit 0; fi
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    for version in $(ls /etc/postgresql); do
        pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    done
fi
for _ in $(seq 1 30); do
    if up; then exit 0; fi
    sleep 1
done
echo "PostgreSQL is not reachable on $HOST:$PORT and could not be started" >&2
exit 1
