#!/usr/bin/env bash
# Make the virtualenv .venv-oban (Python 3.12+) holding oban-py, which tests/test_oban_compat.py drives
# in subprocesses to prove Conveyor shares a database with it. Idempotent: does nothing when oban-py
# is already importable there. Without a Python 3.12 it prints a notice and exits 0 (the tests skip).
set -euo pipefail
cd "$(dirname "$0")/.."

OBAN_VERSION=${OBAN_VERSION:-0.7.0}
VENV=.venv-oban

if [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('oban') != '$OBAN_VERSION')" \
        >/dev/null 2>&1; then
    exit 0
fi

# A candidate counts only if it really runs and is 3.12 or newer (a pyenv shim may exist but fail).
usable() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }

PY312=""
for candidate in "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] && usable "$candidate"; then
        PY312=$candidate
        break
    fi
done
if [ -z "$PY312" ]; then
    echo "notice: no Python 3.12 found (python3.12 on PATH or ~/.pyenv/versions/3.12*);" \
        "skipping the oban-py virtualenv, so the oban-py compatibility tests will be skipped" >&2
    exit 0
fi

if [ ! -x "$VENV/bin/python" ] || ! usable "$VENV/bin/python"; then
    rm -rf "$VENV"
    "$PY312" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "oban==$OBAN_VERSION" 2>&1 |
    grep -v '^WARNING: Location' || true
"$VENV/bin/python" -c 'import oban' # fail here, clearly, if the install did not work
