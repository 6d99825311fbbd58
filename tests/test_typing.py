"""Static typing of the job API: mypy sees a job function's parameters in ``new``, ``enqueue``,
``enqueue_sync`` and ``options(...).enqueue``, and reports calls that do not fit them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

USAGE = Path(__file__).parent / "typing" / "job_api_usage.py"


def test_mypy_sees_the_parameters_of_job_functions(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path),
            str(USAGE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    reported = {int(m.group(1)) for m in re.finditer(r"job_api_usage\.py:(\d+): error", done.stdout)}
    lines = USAGE.read_text().splitlines()
    expected = {n for n, line in enumerate(lines, 1) if re.search(r"\)  # E: ", line)}
    assert reported == expected, done.stdout
