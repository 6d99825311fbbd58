#!/usr/bin/env bash
# Set up (virtualenv, package) and run the demo: define jobs, enqueue, run, report. It runs on a
# SQLite file by default (no server); pass a postgresql:// URL to run it on PostgreSQL instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e . 2>&1 | grep -v '^WARNING: Location' || true
case "${1:-${CONVEYOR_DATABASE_URL:-}}" in
    postgres*) bash scripts/ensure-postgres.sh ;;
esac
exec .venv/bin/python examples/demo.py "$@"
