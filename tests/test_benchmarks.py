"""The benchmark script runs and reports, so it cannot rot between benchmark runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("insert-bulk", "insert-single")


def test_benchmarks_print_one_json_object_per_scenario(dsn: str) -> None:
    command = [sys.executable, "benchmarks/run.py", *SCENARIOS, "--jobs", "500", "--json", "--dsn", dsn]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(SCENARIOS), done.stdout
    for scenario, line in zip(SCENARIOS, lines, strict=True):
        figures = json.loads(line)
        assert isinstance(figures, dict)
        assert figures["scenario"] == scenario
        assert figures["engine"] == "postgres"
        assert figures["jobs"] == 500
        assert figures["jobs_per_s"] > 0
    single = json.loads(lines[1])
    assert 0 < single["p50_ms"] <= single["p95_ms"] <= single["p99_ms"]
