#!/usr/bin/env bash
# Make sure the MariaDB (or MySQL) server the MySQL engine's conformance cases use is up: start the
# local one if it is installed but down. When none can be reached, say so and exit 0: the mariadb
# cases of tests/conformance then skip themselves, naming the reason (tests/conformance/mariadb.py).
# CONVEYOR_MARIADB_HOST/PORT override where it is looked for (CONVEYOR_MARIADB_URL, for the tests).
set -uo pipefail
HOST=${CONVEYOR_MARIADB_HOST:-127.0.0.1}
PORT=${CONVEYOR_MARIADB_PORT:-3306}

up() {
    if command -v mysqladmin >/dev/null 2>&1; then
        mysqladmin ping --silent -h "$HOST" -P "$PORT" -u root --connect-timeout=2 >/dev/null 2>&1
    else
        .venv/bin/python -c "import pymysql; pymysql.connect(host='$HOST', port=$PORT, user='root', connect_timeout=2).close()" >/dev/null 2>&1
    fi
}

if up; then exit 0; fi
if [ -x /etc/init.d/mariadb ]; then
    /etc/init.d/mariadb start >/dev/null 2>&1 || true
elif [ -x /etc/init.d/mysql ]; then
    /etc/init.d/mysql start >/dev/null 2>&1 || true
else
    echo "== MariaDB: no server on $HOST:$PORT and none installed here: the mariadb conformance cases will be skipped" >&2
    exit 0
fi
for _ in $(seq 1 30); do
    if up; then exit 0; fi
    sleep 1
done
echo "== MariaDB: installed but not reachable on $HOST:$PORT after starting it: the mariadb conformance cases will be skipped" >&2
exit 0
