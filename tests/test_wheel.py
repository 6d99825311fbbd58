"""The release as a user gets it: ``scripts/wheel-smoke.sh`` builds the wheel and the sdist, runs
``twine check``, installs the BUILT WHEEL (never this checkout) into a fresh virtualenv for Python
3.11, 3.12 and 3.13, and runs the README's quick start on SQLite, ``conveyor --version`` and
``conveyor install`` plus a job on PostgreSQL there. A Python missing from this machine is skipped by
the script, saying so. Marked ``wheel``: ``-m 'not wheel'`` deselects it (it runs by default, CI too).
Cost on the 2-core CI machine under load: 35 s wall for an unchanged wheel (venvs reused), about 60 s
for a changed one (fresh venvs, installed offline from cached wheelhouses), about 100 s the first time
(the dependencies downloaded from PyPI)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DSN

ROOT = Path(__file__).resolve().parents[1]
#: The Pythons to smoke-test: all three supported, or those $CONVEYOR_WHEEL_PYTHONS lists ("3.12 3.13").
VERSIONS = tuple(os.environ.get("CONVEYOR_WHEEL_PYTHONS", "3.11 3.12 3.13").split())


@pytest.mark.wheel
def test_the_built_wheel_installs_and_runs_on_every_python() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "wheel-smoke.sh"), *VERSIONS],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "CONVEYOR_TEST_DSN": DSN},
    )
    print(done.stdout)  # the smoke's report, shown by pytest -s or on failure
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.split("== summary\n", 1)[1].splitlines()
    for version in VERSIONS:
        ends = (f"ok   python {version} ", f"SKIP python {version}:")
        assert any(line.startswith(ends) for line in summary), done.stdout
    assert "twine check" in done.stdout and "PASSED" in done.stdout
