#!/usr/bin/env bash
# Make the virtualenv .venv-oban (Python 3.12+) holding oban-py, which tests/test_oban_compat.py and
# tests/test_oban_mixed.py drive in subprocesses to prove Conveyor shares a database with it, and this
# checkout of Conveyor (editable), so a Conveyor node can run there and import oban-py's workers.
# Idempotent: does nothing when both are already importable there. Without a Python 3.12 it prints a
# notice and exits 0 (the tests skip).
set -euo pipefail
cd "$(dirname "$0")/.."

OBAN_VERSION=${OBAN_VERSION:-0.7.0}
VENV=.venv-oban

# Conveyor in .venv-oban must be this checkout's (an editable install points at one source tree).
conveyor_here() {
    "$VENV/bin/python" -c "import conveyor, pathlib, sys; \
sys.exit(pathlib.Path(conveyor.__file__).resolve().parents[1] != pathlib.Path('src').resolve())" \
        >/dev/null 2>&1
}
install_conveyor() {
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e . 2>&1 |
        grep -v '^WARNING: Location' || true
    # Not fatal: the oban-py tests that need no Conveyor node there still run; the others skip.
    conveyor_here || echo "notice: Conveyor could not be installed in $VENV;" \
        "the mixed-fleet tests (tests/test_oban_mixed.py) will be skipped" >&2
}

if [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('oban') != '$OBAN_VERSION')" \
        >/dev/null 2>&1; then
    conveyor_here || install_conveyor
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
install_conveyor
