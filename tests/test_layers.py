"""The layer contracts (``[tool.importlinter]`` in pyproject.toml) hold, and they do catch a wrong
import: a copy of the package with one import against the layers fails them, naming the contract
and the import. The conformance suite, for its part, names no engine class or driver."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
LAYERS = "Layers: interfaces > app > runtime > definitions > engine > values"
SEAM = "Only the engine chooser and the engines' own public modules reach a concrete"


def lint_imports(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``src`` (first on the path), without its cache."""
    env = os.environ | {"PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
        timeout=120,
    )


def copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package and its contracts in which ``module`` (a path under src/conveyor)
    also runs ``line``; returns the config to check it with."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "conveyor", src / "conveyor", ignore=shutil.ignore_patterns("__pycache__"))
    target = src / "conveyor" / module
    target.write_text(target.read_text() + f"\n{line}\n")
    config = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", config)
    return config


def test_the_package_keeps_its_layers() -> None:
    run = lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 3 kept, 0 broken." in run.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "chain"),
    [
        # The engine seam reaching up to the app: the layering is broken.
        ("engine/base.py", "from conveyor import app", LAYERS, "conveyor.engine.base -> conveyor.app"),
        # A value reaching the runtime, inside a function (it counts too).
        (
            "job.py",
            "def _late():\n    from conveyor._runtime import node",
            LAYERS,
            "conveyor.job -> conveyor._runtime.node",
        ),
        # The CLI reaching into an engine's modules instead of the seam.
        (
            "cli/jobs.py",
            "from conveyor.engine.postgres import schema",
            SEAM,
            "conveyor.cli.jobs -> conveyor.engine.postgres.schema",
        ),
    ],
    ids=["engine-to-app", "value-to-runtime", "cli-to-engine-internals"],
)
def test_a_wrong_import_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str, chain: str
) -> None:
    run = lint_imports(tmp_path / "src", copy_with(tmp_path, module, line))
    assert run.returncode != 0
    out = " ".join(run.stdout.split())  # lint-imports wraps long lines
    assert f"{contract}" in out and "BROKEN" in out, run.stdout
    assert chain in out, run.stdout


DRIVERS = {"psycopg", "psycopg_pool", "sqlite3", "aiosqlite", "asyncpg", "asyncmy", "aiomysql", "pymysql"}
ENGINES = {"conveyor.engine.postgres", "conveyor.engine.sqlite", "conveyor.engine.mysql"}


def test_conformance_tests_name_no_engine_class_or_driver() -> None:
    """Only ``tests/conformance/conftest.py`` (the registry) knows the engines: a new engine adds
    its factories there and nothing else."""
    offenders: list[str] = []
    for path in sorted((ROOT / "tests" / "conformance").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in DRIVERS or any(name.startswith(e) for e in ENGINES):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not offenders, "\n".join(offenders)
