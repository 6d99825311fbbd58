#!/usr/bin/env bash
# Install everything the tests need (virtualenv, the package with its dev extra, PostgreSQL running,
# MariaDB running when it is installed (its conformance cases skip, saying why, when no server is),
# chromium for the dashboard's browser tests) and run the whole suite: ruff, mypy, the import
# contracts (lint-imports), pytest (with pyright and mypy strict on sample user modules,
# tests/test_typing.py, and the wheel's smoke test on Python 3.11-3.13, tests/test_wheel.py). Extra
# arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import conveyor' # fail here, clearly, if the install did not work

bash scripts/ensure-postgres.sh
bash scripts/ensure-mariadb.sh
bash scripts/ensure-oban-venv.sh
bash scripts/ensure-chromium.sh
bash scripts/ensure-pgbouncer.sh

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
echo "== import contracts"
.venv/bin/lint-imports
echo "== pytest"
# Four workers on two cores: many tests wait on a database, a subprocess or a timer, and a fourth
# worker fills those waits for about 2 % more CPU (the measurements: benchmarks/README.md, "The test
# suite's CPU"). PYTEST_WORKERS=0 runs it in one process.
.venv/bin/pytest -n "${PYTEST_WORKERS:-4}" "$@"
