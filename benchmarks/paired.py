"""Paired runs against a base commit: ``run.py enqueue-one --base COMMIT`` (and ``node-cost``).

The base commit is checked out once in a ``git worktree`` under the system's temporary folder
(``conveyor-base-<sha>``, kept for the next run). Two worker processes serve the scenario's blocks
(a script answering one JSON line per JSON request: ``enqueue_sides.serve``, ``node_cost.serve``),
one with the current tree's ``conveyor`` package and one with the base's (``PYTHONPATH=<tree>/src``,
checked in each process); both run this tree's benchmark code, so they do the same work. The
scenario asks them for its blocks in turn (``enqueue_one.interleave``), so a change in the
machine's load weighs on both sides within seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from common import Settings

ROOT = Path(__file__).resolve().parent.parent
SIDES = Path(__file__).resolve().parent / "enqueue_sides.py"
#: Times one block: (mode, side, first index, count) -> seconds.
RunBlock = Callable[[str, str, int, int], Awaitable[float]]


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


class Worker:
    """A process serving ``script`` (``enqueue_sides.py`` unless told) with ``tree``'s ``conveyor``
    package."""

    def __init__(self, tree: Path, settings: Settings, script: Path = SIDES) -> None:
        source = tree / "src"
        # The process checks which package it imported before it measures anything.
        code = (
            "import runpy, sys, conveyor; "
            f"assert conveyor.__file__.startswith({str(source)!r}), conveyor.__file__; "
            f"sys.argv = [{str(script)!r}, *sys.argv[1:]]; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(script.parent)])}
        self.tree = tree
        self._process = subprocess.Popen(
            [sys.executable, "-c", code, settings.engine, settings.dsn],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, question: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(question) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the worker on {self.tree} stopped (exit {self._process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()  # the worker cleans up and exits
        self._process.wait(timeout=120)


@contextmanager
def paired_workers(settings: Settings, script: Path = SIDES) -> Iterator[dict[str, Worker]]:
    """The workers serving ``script`` on the base commit's tree and on this one, by ``base`` and
    ``current``; closed on the way out."""
    assert settings.base is not None
    workers = {"base": Worker(base_tree(settings.base), settings, script)}
    try:
        workers["current"] = Worker(ROOT, settings, script)
        yield workers
    finally:
        for worker in workers.values():
            worker.close()


@asynccontextmanager
async def paired_blocks(settings: Settings) -> AsyncIterator[tuple[list[str], RunBlock]]:
    """The sides of both trees (``current:<side>``, ``base:<side>``), and the function that times one
    block of one of them in its tree's process. Both processes are warmed up first."""
    with paired_workers(settings) as workers:
        sides = workers["current"].ask({"names": True})["names"]
        for worker in workers.values():
            worker.ask({"warm": 10**9})
        names = [f"{tree}:{side}" for side in sides for tree in ("current", "base")]

        async def run_block(mode: str, name: str, start: int, count: int) -> float:
            tree, side = name.split(":")
            question = {"mode": mode, "side": side, "start": start, "count": count}
            seconds: float = workers[tree].ask(question)["seconds"]
            return seconds

        yield names, run_block
