"""Static typing of the job API: mypy sees a job function's parameters in ``new``, ``enqueue``,
``enqueue_sync`` and ``options(...).enqueue``, and reports calls that do not fit them; a user's
module of the public API (tests/typing/public_api_usage.py) checks clean under pyright in strict
mode and under mypy --strict."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = Path(__file__).parent / "typing" / "job_api_usage.py"
PUBLIC_API = Path(__file__).parent / "typing" / "public_api_usage.py"
ROOT = Path(__file__).resolve().parents[1]


#: mypy's cache for these runs, kept between test runs: warm, a run re-checks only what changed (the
#: samples, Conveyor's changed modules and what imports them) in 0.5 s of CPU instead of analysing
#: Conveyor and the standard library from scratch (7-8 s). mypy checks every cached module against
#: its source's hash, its own version and the options, so a stale entry is re-checked, never trusted.
MYPY_CACHE = ROOT / ".cache" / "mypy-typing"


@pytest.fixture(scope="module")
def mypy_strict() -> str:
    """What ``mypy --strict`` reports on both sample modules, checked in one run."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(MYPY_CACHE),
            str(USAGE),
            str(PUBLIC_API),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1) and "(checked 2 source files)" in done.stdout, done.stdout + done.stderr
    return done.stdout


def test_mypy_sees_the_parameters_of_job_functions(mypy_strict: str) -> None:
    reported = {int(m.group(1)) for m in re.finditer(r"job_api_usage\.py:(\d+): error", mypy_strict)}
    lines = USAGE.read_text().splitlines()
    expected = {n for n, line in enumerate(lines, 1) if re.search(r"\)  # E: ", line)}
    assert reported == expected, mypy_strict


def test_a_user_module_checks_clean_under_pyright_strict() -> None:
    # [tool.pyright] in pyproject.toml: the sample, in strict mode; this interpreter's packages.
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 errors, 0 warnings" in done.stdout, done.stdout


def test_a_user_module_checks_clean_under_mypy_strict(mypy_strict: str) -> None:
    assert "public_api_usage.py" not in mypy_strict, mypy_strict
