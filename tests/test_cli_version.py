"""``conveyor --version`` prints the installed package's version (importlib.metadata), which is
``conveyor.__version__`` (the one source the build reads, docs/versioning.md)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import conveyor
from tests.test_cli_errors import conveyor as run_conveyor


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    installed = importlib.metadata.version("conveyor")
    run = run_conveyor("--version", cwd=tmp_path)
    assert run.code == 0 and run.out.strip() == f"conveyor, version {installed}", run
    assert installed == conveyor.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", installed), installed  # PEP 440, as the policy says
