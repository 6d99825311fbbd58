"""The release as a user gets it: ``scripts/wheel-smoke.sh`` builds the wheel and the sdist, runs
``twine check``, installs the BUILT WHEEL (never this checkout) into a fresh virtualenv for Python
3.11, 3.12 and 3.13, and runs the README's quick start on SQLite, ``conveyor --version`` and
``conveyor install`` plus a job on PostgreSQL there. A Python missing from this machine is skipped by
the script, saying so. Marked ``wheel``: ``-m 'not wheel'`` deselects it (it runs by default, CI too).

The release is built once per test run (``built_wheel``, shared by the xdist workers through a lock
file), and each Python is a test of its own, so the workers smoke them side by side. A venv is reused
while the wheel is unchanged; a changed wheel gets a fresh one, installed offline from a cached
wheelhouse of the dependencies (downloaded from PyPI the first time)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DSN

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "wheel-smoke.sh"
CACHE = Path(os.environ.get("WHEEL_SMOKE_CACHE", ROOT / ".cache" / "wheel-smoke"))
#: The Pythons to smoke-test: all three supported, or those $CONVEYOR_WHEEL_PYTHONS lists ("3.12 3.13").
VERSIONS = tuple(os.environ.get("CONVEYOR_WHEEL_PYTHONS", "3.11 3.12 3.13").split())
#: This test run (the same in every xdist worker): its release is built once, into a folder of its own.
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


def smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "CONVEYOR_TEST_DSN": DSN, "WHEEL_SMOKE_CACHE": str(CACHE)},
    )


@pytest.fixture(scope="session")
def built_wheel() -> Iterator[Path]:
    """The folder holding this run's release, built and checked (twine, the data files) by the first
    worker to ask; the others wait for it on the lock and reuse it."""
    CACHE.mkdir(parents=True, exist_ok=True)
    dist = CACHE / f"dist-{RUN}"
    with (CACHE / "dist.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (dist / ".built").exists():
                for old in CACHE.glob("dist-*"):  # earlier runs' releases, an hour old or more
                    if old != dist and time.time() - old.stat().st_mtime > 3600:
                        shutil.rmtree(old, ignore_errors=True)
                done = smoke("--build-only", "--dist", str(dist))
                print(done.stdout)
                assert done.returncode == 0, done.stdout + done.stderr
                assert "twine check" in done.stdout and "PASSED" in done.stdout, done.stdout
                assert "ok   the wheel holds all" in done.stdout, done.stdout
                (dist / ".built").touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    yield dist


@pytest.mark.wheel
@pytest.mark.parametrize("version", VERSIONS)
def test_the_built_wheel_installs_and_runs_on_python(built_wheel: Path, version: str) -> None:
    done = smoke("--dist", str(built_wheel), version)
    print(done.stdout)  # the smoke's report, shown by pytest -s or on failure
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.split("== summary\n", 1)[1].splitlines()
    ends = (f"ok   python {version} ", f"SKIP python {version}:")
    assert any(line.startswith(ends) for line in summary), done.stdout
