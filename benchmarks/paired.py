"""Paired runs against a base commit: ``run.py SCENARIO --base COMMIT``.

The base commit is checked out once in a ``git worktree`` under the system's temporary folder
(``conveyor-base-<sha>``, kept for the next run). Each round runs the scenario for one round
(``--rounds 1``) in a subprocess per side, the current tree and the base, in alternating order
(the base first in even rounds), with the same settings. Both sides run this tree's benchmark code;
only the ``conveyor`` package differs (``PYTHONPATH=<tree>/src``, checked in each subprocess), so
they do the same work and a change in the machine's load weighs on both.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Figures, Settings

ROOT = Path(__file__).resolve().parent.parent
RUN = Path(__file__).resolve().parent / "run.py"


def base_tree(commit: str) -> Path:
    """A worktree of ``commit`` (made on first use), or SystemExit naming what git said."""
    found = _git("rev-parse", "--verify", f"{commit}^{{commit}}")
    tree = Path(tempfile.gettempdir()) / f"conveyor-base-{found[:12]}"
    if not (tree / "src" / "conveyor" / "__init__.py").exists():
        _git("worktree", "add", "--detach", str(tree), found)
    return tree


def _git(*arguments: str) -> str:
    done = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"--base: git {' '.join(arguments)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


async def one_round(tree: Path, scenario: str, settings: Settings) -> list[Figures]:
    """One round of ``scenario`` with ``tree``'s ``conveyor``: its JSON lines."""
    source = tree / "src"
    # The subprocess checks which package it imported before it measures anything.
    code = (
        "import runpy, sys, conveyor; "
        f"assert conveyor.__file__.startswith({str(source)!r}), conveyor.__file__; "
        f"sys.argv = [{str(RUN)!r}, *sys.argv[1:]]; runpy.run_path({str(RUN)!r}, run_name='__main__')"
    )
    arguments = ["--engine", settings.engine, "--dsn", settings.dsn, "--rounds", "1", "--json"]
    if settings.jobs is not None:
        arguments += ["--jobs", str(settings.jobs)]
    command = [sys.executable, "-c", code, scenario, *arguments]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(RUN.parent)])}
    done = await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"a round on {tree} failed:\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


async def paired_rounds(
    scenario: str, settings: Settings, rounds: int
) -> list[tuple[list[Figures], list[Figures]]]:
    """``rounds`` pairs of (current tree's figures, base's figures), sides alternated."""
    assert settings.base is not None
    base = base_tree(settings.base)
    pairs = []
    for number in range(rounds):
        if number % 2 == 0:
            before = await one_round(base, scenario, settings)
            current = await one_round(ROOT, scenario, settings)
        else:
            current = await one_round(ROOT, scenario, settings)
            before = await one_round(base, scenario, settings)
        pairs.append((current, before))
    return pairs
