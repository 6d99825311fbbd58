"""Where a pytest run's CPU goes, test by test: a pytest plugin, and the summary of what it wrote.

Loaded by ``suite_cpu.py --profile FILE`` (``-p suite_cpu_plugin``, ``SUITE_CPU_PROFILE=FILE``), it
appends one JSON line per test phase (setup, call, teardown) to FILE: wall seconds, the CPU of the
pytest process itself (``time.process_time``), of the subprocesses it waited for, and of the
PostgreSQL and MariaDB servers in that window. The servers' figures belong to the phase only when
one test runs at a time (``-n 0`` or ``-p no:xdist``) and nobody else uses the servers
(``suite_cpu.py --private``); the process's own CPU is right with any number of workers.

    python benchmarks/suite_cpu_plugin.py FILE [--by module|engine|phase|test] [--top N] [--sort COLUMN]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest
from cpu_account import ServerCpu
from suite_cpu import DEFAULT_DSN, DEFAULT_MARIADB, _mariadb_pid, _process_seconds

PROFILE = os.environ.get("SUITE_CPU_PROFILE")
# A server of each worker's own (suite_cpu.py --servers N): set before the tests' conftest reads it.
if (_dsns := os.environ.get("SUITE_CPU_DSNS", "").split()) and (
    _worker := os.environ.get("PYTEST_XDIST_WORKER")
):
    os.environ["CONVEYOR_TEST_DSN"] = _dsns[int(_worker.removeprefix("gw")) % len(_dsns)]
_servers: dict[str, Any] = {}
#: CPU seconds the cyclic garbage collector took in this process, by generation.
_gc_seconds = [0.0, 0.0, 0.0]
_gc_started = [0.0]


def _gc_callback(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[0] = time.process_time()
    else:
        _gc_seconds[info["generation"]] += time.process_time() - _gc_started[0]


if PROFILE:
    gc.callbacks.append(_gc_callback)


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _server_seconds() -> tuple[float | None, float | None]:
    if not _servers:
        _servers["pg"] = asyncio.run(ServerCpu.find(os.environ.get("CONVEYOR_TEST_DSN", DEFAULT_DSN)))
        _servers["my"] = _mariadb_pid(os.environ.get("CONVEYOR_MARIADB_URL", DEFAULT_MARIADB))
    pg, my = _servers["pg"], _servers["my"]
    return (pg.seconds() if pg else None), (_process_seconds(my) if my else None)


def _sessions() -> int | None:
    """Sessions the worker's private server has begun (``--pg-stats``), on a connection kept open."""
    if not os.environ.get("SUITE_CPU_PG_STATS"):
        return None
    if "conn" not in _servers:
        import psycopg

        _servers["conn"] = psycopg.connect(os.environ["CONVEYOR_TEST_DSN"], autocommit=True)
    row = _servers["conn"].execute("SELECT sessions FROM pg_stat_database WHERE datname = 'test'").fetchone()
    return int(row[0])


def _record(item: pytest.Item, phase: str) -> Generator[None, None, None]:
    pg0, my0 = _server_seconds()
    sessions0 = _sessions()
    wall0, cpu0, children0 = time.perf_counter(), time.process_time(), _children()
    yield
    wall, cpu, children = time.perf_counter() - wall0, time.process_time() - cpu0, _children() - children0
    pg1, my1 = _server_seconds()
    sessions1 = _sessions()
    line = {
        "test": item.nodeid,
        "phase": phase,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
        "end": round(time.time(), 3),
        "wall": round(wall, 4),
        "cpu": round(cpu, 4),
        "children": round(children, 3),
        "pg": None if pg0 is None or pg1 is None else round(pg1 - pg0, 3),
        "my": None if my0 is None or my1 is None else round(my1 - my0, 3),
    }
    if sessions0 is not None and sessions1 is not None:
        line["sessions"] = sessions1 - sessions0
    assert PROFILE is not None
    with open(PROFILE, "a") as out:
        out.write(json.dumps(line) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    yield from _record(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _record(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield from _record(item, "teardown")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The whole process's CPU (a line of phase ``worker`` or ``controller``), and the
    garbage collector's share of it by generation (``gc``): what no test phase holds is start-up,
    collection and xdist's traffic."""
    if PROFILE is None:
        return
    worker = hasattr(config, "workerinput")
    line = {
        "test": f"(process {os.getpid()})",
        "phase": "worker" if worker else "controller",
        "wall": 0.0,
        "cpu": round(time.process_time(), 3),
        "children": round(_children(), 3),
        "pg": None,
        "my": None,
        "gc": [round(seconds, 3) for seconds in _gc_seconds],
    }
    with open(PROFILE, "a") as out:
        out.write(json.dumps(line) + "\n")


def _key(line: dict[str, Any], by: str) -> str:
    test: str = line["test"]
    if by == "module":
        return test.split("::", 1)[0]
    if by == "engine":
        for engine in ("postgres", "sqlite", "mariadb"):
            if f"[{engine}" in test or f"-{engine}]" in test or f"-{engine}-" in test:
                return engine
        return "(none)"
    if by == "phase":
        return str(line["phase"])
    return test


def summary(path: str, by: str, top: int, sort: str = "sum") -> None:
    columns = ("wall", "cpu", "children", "pg", "my", "sessions")
    totals: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(("n", *columns), 0.0))
    with open(path) as lines:
        for text in lines:
            line = json.loads(text)
            row = totals[_key(line, by)]
            row["n"] += line["phase"] == "call"
            for column in columns:
                row[column] += line.get(column) or 0.0
    for row in totals.values():
        row["sum"] = row["cpu"] + row["children"] + row["pg"] + row["my"]
    print(
        f"{'tests':>6} {'wall':>8} {'cpu':>8} {'subproc':>8} {'pg':>8} {'maria':>8} {'sessions':>8}"
        f" {'sum':>8}  {by}"
    )
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][sort])
    everything = {c: sum(r[c] for r in totals.values()) for c in ("n", *columns, "sum")}
    for name, row in [*ranked[:top], ("(all)", everything)]:
        figures = " ".join(f"{row[c]:8.1f}" for c in (*columns, "sum"))
        print(f"{int(row['n']):6d} {figures}  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file")
    parser.add_argument("--by", choices=("module", "engine", "phase", "test"), default="module")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--sort", choices=("sum", "wall", "cpu", "children", "pg", "my", "sessions"), default="sum"
    )
    options = parser.parse_args()
    summary(options.file, options.by, options.top, options.sort)
