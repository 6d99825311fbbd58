"""``drain-nodes``: one backlog drained by one node process, then by four, on one database.

Each variant starts its node processes (``node_process.py``, default settings, separate OS
processes) on a fresh schema and waits until every one is ready; then ``jobs`` (default 50,000)
``bench_jobs.tally`` no-op jobs are inserted in one transaction, and the clock runs from its commit
until the nodes' acks of all of them are written. One node runs the queue at limit C
(``--concurrency``, default 100), four nodes at C/4 each: the same total concurrency. The variants
alternate for ``NODES_ROUNDS`` rounds each. Every job must have run exactly once: the node processes
report the jobs they ran, and the table must hold each job completed at attempt 1. Reported:
median and range of each variant's jobs/s, the ratio four/one of the medians (target >= 1.0), and
the CPU seconds the node processes spent from ready to stop (summed over a variant's processes).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import bench_jobs
import psycopg
import statement_times
from common import Figures, Settings, fresh_app, rate
from cpu_account import ServerCpu
from statement_times import StatementTimes

from conveyor import Conveyor
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine

NODES_JOBS = 50_000
NODES_CONCURRENCY = 100
NODES_COUNT = 4
NODES_ROUNDS = 3
NODE_SCRIPT = Path(__file__).with_name("node_process.py")
#: Seconds a node process may take to start, and the whole drain to finish, before the round fails.
START_TIMEOUT = 60.0
DRAIN_TIMEOUT = 300.0


class NodeProcess:
    """A running ``node_process.py`` and the last count of written acks it reported."""

    def __init__(self, process: asyncio.subprocess.Process, ran_file: Path) -> None:
        self.process = process
        self.ran_file = ran_file
        self.written = 0
        #: CPU seconds the process spent from ready to the end of the drain (it says when stopped).
        self.cpu = 0.0

    @classmethod
    async def start(cls, dsn: str, prefix: str, concurrency: int, ran_file: Path) -> NodeProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(NODE_SCRIPT),
            dsn,
            prefix,
            str(concurrency),
            str(ran_file),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(process, ran_file)

    async def line(self) -> str:
        assert self.process.stdout is not None
        raw = await self.process.stdout.readline()
        if not raw:
            raise RuntimeError(f"node process {self.process.pid} exited with {await self.process.wait()}")
        return raw.decode().strip()

    async def ready(self) -> None:
        while (await self.line()) != "ready":
            pass

    async def follow(self, progress: asyncio.Event) -> None:
        """Read ``written N`` reports until the process ends its output."""
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            kind, _, value = raw.decode().partition(" ")
            if kind == "written":
                self.written = int(value)
                progress.set()
            elif kind == "cpu":
                self.cpu = float(value)

    async def stop(self) -> list[int]:
        """Close its standard input (it stops gracefully) and return the jobs it ran."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = await asyncio.wait_for(self.process.wait(), START_TIMEOUT)
        if code != 0:
            raise RuntimeError(f"node process {self.process.pid} exited with {code}")
        ran: list[int] = json.loads(self.ran_file.read_text())
        return ran


async def drain_with_nodes(
    settings: Settings, jobs: int, concurrency: int, nodes: int, statements: StatementTimes | None = None
) -> Figures:
    """One drain of ``jobs`` by ``nodes`` node processes sharing ``concurrency``; checks that every
    job ran exactly once. ``statements``: the server's execution time of the drain's statements."""
    async with fresh_app(settings, pool_size=4) as base:
        engine = await base.engine()
        assert isinstance(engine, PostgresEngine)
        with tempfile.TemporaryDirectory(prefix="conveyor-nodes-") as folder:
            started = [
                await NodeProcess.start(
                    engine.dsn, engine.prefix, concurrency // nodes, Path(folder) / f"ran-{i}.json"
                )
                for i in range(nodes)
            ]
            try:
                await asyncio.wait_for(asyncio.gather(*(p.ready() for p in started)), START_TIMEOUT)
                progress = asyncio.Event()
                readers = [asyncio.create_task(p.follow(progress)) for p in started]
                await base.enqueue_many(bench_jobs.tally.new(n=n) for n in range(jobs))
                before = await statement_times.read(engine.dsn) if statements is not None else None
                server = await ServerCpu.find(engine.dsn)
                server_began = server.seconds() if server is not None else 0.0
                began = time.perf_counter()
                seconds = await _until_written(started, progress, jobs, began)
                server_cpu = server.seconds() - server_began if server is not None else None
                if statements is not None and before is not None:
                    after = await statement_times.read(engine.dsn)
                    if after is not None:
                        statements.add(before, after, jobs)
                runs: list[int] = []
                for process in started:
                    runs += await process.stop()
                await asyncio.gather(*readers)
            finally:
                for process in started:
                    if process.process.returncode is None:
                        process.process.kill()
                        await process.process.wait()
        attempts = await _attempts(base)
    counts = Counter(runs)
    return {
        "nodes": nodes,
        "seconds": round(seconds, 4),
        "jobs_per_s": rate(jobs, seconds),
        "node_cpu_s": round(sum(p.cpu for p in started), 3),
        # The database server's, over the same span (None when its processes cannot be read here).
        "server_cpu_s": round(server_cpu, 3) if server_cpu is not None else None,
        "runs": len(runs),
        "double_runs": sum(c - 1 for c in counts.values() if c > 1),
        "missing": sum(1 for n in range(jobs) if n not in counts),
        "not_completed_once": attempts,
    }


async def _until_written(
    processes: list[NodeProcess], progress: asyncio.Event, jobs: int, began: float
) -> float:
    deadline = began + DRAIN_TIMEOUT
    while sum(p.written for p in processes) < jobs:
        progress.clear()
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"only {sum(p.written for p in processes)} of {jobs} acks written")
        try:
            await asyncio.wait_for(progress.wait(), left)
        except TimeoutError:
            continue
    return time.perf_counter() - began


def _per_job(results: list[Figures], variant: str, jobs: int) -> Figures:
    """The nodes' and the server's CPU per job (microseconds, medians): where a variant's time went."""
    node_cpu = statistics.median(r["node_cpu_s"] for r in results)
    figures: Figures = {f"{variant}_cpu_us_per_job": round(node_cpu / jobs * 1e6, 1)}
    server = [r["server_cpu_s"] for r in results if r["server_cpu_s"] is not None]
    if server:
        figures[f"{variant}_server_cpu_us_per_job"] = round(statistics.median(server) / jobs * 1e6, 1)
    return figures


async def _attempts(base: Conveyor) -> int:
    """Jobs not completed at exactly attempt 1 (a job claimed twice spends two attempts)."""
    engine = await base.engine()
    assert isinstance(engine, PostgresEngine)
    table = f"{quote_identifier(engine.prefix)}.oban_jobs"
    async with await psycopg.AsyncConnection.connect(engine.dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            f"SELECT count(*) FROM {table} WHERE state <> 'completed' OR attempt <> 1".encode()
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def drain_nodes(settings: Settings) -> Figures:
    rounds = settings.round_count(NODES_ROUNDS)
    if settings.engine != "postgres":
        raise RuntimeError("drain-nodes runs on PostgreSQL only")
    jobs = settings.job_count(NODES_JOBS)
    concurrency = settings.concurrency or NODES_CONCURRENCY
    if concurrency % NODES_COUNT:
        raise RuntimeError(f"--concurrency must divide by {NODES_COUNT}")
    one: list[Figures] = []
    many: list[Figures] = []
    statements = {1: StatementTimes(), NODES_COUNT: StatementTimes()}
    for round_ in range(rounds):
        order = [(1, one), (NODES_COUNT, many)]
        if round_ % 2:
            order.reverse()
        for nodes, results in order:
            results.append(await drain_with_nodes(settings, jobs, concurrency, nodes, statements[nodes]))
    one_rates = [r["jobs_per_s"] for r in one]
    many_rates = [r["jobs_per_s"] for r in many]
    every = one + many
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "nodes": NODES_COUNT,
        "rounds": rounds,
        "one_node_jobs_per_s": statistics.median(one_rates),
        "one_node_range": [min(one_rates), max(one_rates)],
        "nodes_jobs_per_s": statistics.median(many_rates),
        "nodes_range": [min(many_rates), max(many_rates)],
        "ratio": round(statistics.median(many_rates) / statistics.median(one_rates), 3),
        "one_node_cpu_s": statistics.median(r["node_cpu_s"] for r in one),
        "nodes_cpu_s": statistics.median(r["node_cpu_s"] for r in many),
        **_per_job(one, "one_node", jobs),
        **_per_job(many, "nodes", jobs),
        # The server's execution time by kind of statement (pg_stat_statements, when loaded).
        **({"one_node_statements": statements[1].figures()} if statements[1].kinds else {}),
        **({"nodes_statements": statements[NODES_COUNT].figures()} if statements[NODES_COUNT].kinds else {}),
        "double_runs": sum(r["double_runs"] for r in every),
        "missing": sum(r["missing"] for r in every),
        "not_completed_once": sum(r["not_completed_once"] for r in every),
        "timed_from": "the backlog's insert committed (nodes already running) to the last ack written",
    }
