#!/usr/bin/env bash
# Set up (virtualenv, package, PostgreSQL running) and run the demo: define jobs, enqueue, run, report.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e . 2>&1 | grep -v '^WARNING: Location' || true
bash scripts/ensure-postgres.sh
exec .venv/bin/python examples/demo.py "$@"
