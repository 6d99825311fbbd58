"""Conveyor's ``@worker`` over an oban-py ``@job`` function or ``@worker`` class keeps oban-py's call
forms (issue 31.19): ``new({"a": 1}, priority=3)`` and ``enqueue({...})``, the args as one positional
mapping, and over a ``@job`` function its own ``new(1, b=5)``. Driven under .venv-oban (oban-py needs
Python 3.12): tests/oban_py/dual_calls.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_oban_compat import OBAN_PYTHON

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not OBAN_PYTHON.exists(), reason="oban-py is not installed: run scripts/ensure-oban-venv.sh"
)


def test_oban_py_call_forms_work_on_a_dual_worker(tmp_path: Path) -> None:
    run = subprocess.run(
        [str(OBAN_PYTHON), "-m", "tests.oban_py.dual_calls", str(tmp_path / "dual.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["add.new(dict)"] == {"args": {"a": 1}, "priority": 0, "queue": "dual"}
    assert out["add.new(dict, priority)"] == {"args": {"a": 1, "b": 3}, "priority": 3, "queue": "dual"}
    assert out["add.new(1, b=5)"]["args"] == {"a": 1, "b": 5}  # oban-py's @job form: the signature's
    assert out["add.new(a=4)"]["args"] == {"a": 4}  # Conveyor's form: keywords are the args
    assert out["Echo.new(dict)"]["args"] == {"x": 1}
    assert out["Echo.new(dict, scheduled_in)"]["priority"] == 2  # oban-py's option name is taken too
    assert out["Echo.new(x=1)"]["args"] == {"x": 1}
    assert (
        out["Echo.new(5)"]["error"] == "ValidationError"
        and "one mapping of args" in out["Echo.new(5)"]["message"]
    )
    # enqueue({...}) and enqueue_sync({...}) on the current Conveyor app, and the jobs run.
    assert out["results"] == [15, {"y": 2}, 3]
