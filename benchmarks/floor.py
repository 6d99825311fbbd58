"""The SQL floor of a drain: what the database alone does with Conveyor's own fetch and ack.

``pgbench`` (no Python anywhere) runs ``drain_floor.pgbench`` with 2 clients: each transaction claims
100 available jobs of one queue with the node's fetch statement (``FOR UPDATE SKIP LOCKED``,
``available`` -> ``executing``) and acks them ``completed`` with the node's ack statement, both
prepared, on sessions set up as the engine's hot pool sets up its own by default (generic plans, no
sequential or bitmap scans). The table is a fresh Conveyor schema holding the same backlog as a
drain, inserted the same way. The figure is jobs per second of wall time from starting pgbench to its exit.

The script is the engine's statements rendered for pgbench (``render_script``): ``%(name)s`` becomes
``:name``, the schema comes from ``search_path``, and the fetch's last ``SELECT`` hands the claimed
ids back as one JSON array of ack records (``\\gset``) instead of the rows, which pgbench cannot pass
on: the server builds the acks the node builds in Python, and sends no rows. Each statement commits
by itself, as on the node. ``drain-floor`` refuses to run if the committed script is not what the
engine's statements render to now (``python benchmarks/floor.py --write`` renders it again).
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench_jobs
import psycopg
import statement_times
from common import Figures, Settings, alternate, fresh_app
from cpu_account import CpuWindow, ServerCpu
from drain import DRAIN_JOBS, drain_once
from node_runs import enqueue_all
from psycopg.conninfo import conninfo_to_dict
from statement_times import StatementTimes

from conveyor import Conveyor
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres.schema import ERRORS_APPEND
from conveyor.engine.postgres.sessions import hot_session

SCRIPT = Path(__file__).with_name("drain_floor.pgbench")
PGBENCH = os.environ.get("CONVEYOR_PGBENCH", "/usr/bin/pgbench")
#: Jobs a transaction of the script claims and acks (the node's batches at c=100).
BATCH = 100
CLIENTS = 2
#: Rounds of (floor, c=100, c=20) in ``drain-floor``.
FLOOR_ROUNDS = 5
#: The session settings of the engine's hot pool as it runs by default (``sessions.hot_session``), and
#: what every engine session sets (``sessions.configure_session``): the UTC zone and no JIT. Without
#: ``jit=off`` the floor's generic plans (whose disabled scans cost 1e10) are compiled on every call,
#: and the floor ran at 150-190 jobs/s instead of thousands; ``run_floor`` adds the schema.
SESSION = " ".join(
    f"-c {name}={value}" for name, value in {**hot_session(), "TimeZone": "UTC", "jit": "off"}.items()
)

#: The end of the engine's fetch: the claimed rows, in claim order.
FETCH_TAIL = "SELECT * FROM updated ORDER BY priority, scheduled_at, id;"
#: What the script ends its fetch with instead: the ack records the node would send for those rows.
FLOOR_TAIL = """SELECT coalesce(jsonb_agg(jsonb_build_object(
    'id', id, 'attempt', attempt, 'state', 'completed', 'schedule_in', NULL,
    'error', NULL, 'meta', NULL, 'snoozed', false
) ORDER BY priority, scheduled_at, id), '[]') AS acks
FROM updated \\gset"""
HEADER = """\
-- The SQL floor of a drain (benchmarks/floor.py renders this file from the engine's statements;
-- do not edit it by hand: python benchmarks/floor.py --write).
-- One transaction: claim :demand jobs with the node's fetch, ack them completed with its ack.
"""


def _statements(prefix: str) -> tuple[str, str]:
    """The fetch (no limits) and the ack (jsonb errors) an engine on ``prefix`` sends."""
    engine = PostgresEngine("postgresql://", prefix=prefix)  # never opened: its statements only
    ack = engine.sql.compose("ack_jobs", append_error=ERRORS_APPEND["jsonb"])
    return engine._fetch_statement.decode(), ack


def _for_pgbench(statement: str, prefix: str) -> str:
    """A statement of the engine as pgbench runs it: no comment lines, unqualified names (the schema
    is on the search_path), ``:name`` variables, the database's clock."""
    lines = [line for line in statement.splitlines() if not line.lstrip().startswith("--") and line.strip()]
    text = "\n".join(lines).replace(f'"{prefix}".', "")
    text = text.replace("%(now)s::timestamp", "NULL::timestamp")
    return re.sub(r"%\((\w+)\)s", r":\1", text)


def render_script() -> str:
    """The pgbench script for the engine's statements as they are in this checkout."""
    prefix = "floor_prefix"
    fetch, ack = (_for_pgbench(s, prefix) for s in _statements(prefix))
    if not fetch.endswith(FETCH_TAIL):
        raise RuntimeError(f"fetch_jobs.sql no longer ends with {FETCH_TAIL!r}: update benchmarks/floor.py")
    fetch = fetch[: -len(FETCH_TAIL)] + FLOOR_TAIL
    return f"{HEADER}{fetch}\n{ack}\n"


def check_jobs(jobs: int) -> None:
    if jobs % (BATCH * CLIENTS):
        raise ValueError(f"the floor drains whole batches: --jobs must be a multiple of {BATCH * CLIENTS}")


def check_script() -> None:
    """Refuse to measure a floor that is not the engine's statements of this checkout."""
    if not SCRIPT.exists() or SCRIPT.read_text() != render_script():
        raise RuntimeError(
            f"{SCRIPT.name} is not the engine's current fetch and ack: run python benchmarks/floor.py --write"
        )


async def run_floor(
    engine: PostgresEngine,
    jobs: int,
    window: CpuWindow | None = None,
    statements: StatementTimes | None = None,
) -> float:
    """Drain the ``jobs`` available jobs of queue ``default`` in ``engine``'s schema with pgbench;
    the jobs per second from its start to its exit. Fails unless every job ended completed.
    ``window`` (if given) measures the CPU used meanwhile (pgbench's as this process's children's),
    ``statements`` the server's execution time of its statements."""
    check_jobs(jobs)
    check_script()
    conninfo = conninfo_to_dict(engine.dsn)
    command = [
        PGBENCH, "-n", "-M", "prepared", "-c", str(CLIENTS), "-j", str(CLIENTS),
        "-t", str(jobs // BATCH // CLIENTS), "-f", str(SCRIPT),
        "-D", "queue=default", "-D", f"demand={BATCH}", "-D", "node=floor",
        "-D", "producer=floor", "-D", f"ended_channel={engine.ended_channel}",
        "-h", str(conninfo.get("host", "127.0.0.1")), "-p", str(conninfo.get("port", 5432)),
        "-U", str(conninfo.get("user", "postgres")), str(conninfo.get("dbname", "postgres")),
    ]  # fmt: skip
    env = {**os.environ, "PGOPTIONS": f"{SESSION} -c search_path={engine.prefix}"}
    before = await statement_times.read(engine.dsn) if statements is not None else None
    if window is not None:
        window.start()
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    seconds = time.perf_counter() - started
    if window is not None:
        window.stop()
    if process.returncode != 0:
        raise RuntimeError(f"pgbench failed ({process.returncode}): {err.decode()}{out.decode()}")
    if statements is not None and before is not None:
        after = await statement_times.read(engine.dsn)
        if after is not None:
            statements.add(before, after, jobs)
    async with await psycopg.AsyncConnection.connect(engine.dsn, autocommit=True) as conn:
        table = f"{quote_identifier(engine.prefix)}.oban_jobs"
        counts = f"SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FROM {table}"
        cur = await conn.execute(counts.encode())
        row = await cur.fetchone()
    if row is None or row[0] != jobs or row[1] != jobs:
        raise RuntimeError(f"the floor completed {row and row[0]} of {row and row[1]} jobs, not {jobs}")
    return round(jobs / seconds, 1)


async def floor_once(
    settings: Settings, jobs: int, window: CpuWindow | None = None, statements: StatementTimes | None = None
) -> float:
    """The floor on a fresh schema holding ``jobs`` available jobs, inserted as ``drain`` inserts them."""
    async with fresh_app(settings, pool_size=2) as base:
        await enqueue_all(base, (bench_jobs.noop.new(n=n) for n in range(jobs)))
        engine = await base.engine()
        assert isinstance(engine, PostgresEngine)
        return await run_floor(engine, jobs, window, statements)


@dataclass(slots=True)
class Costs:
    """What the rounds of one variant cost, per job (microseconds of CPU) and per fetch."""

    server_us: list[float] = field(default_factory=list)
    client_us: list[float] = field(default_factory=list)
    busy: list[float] = field(default_factory=list)
    fetch_ms: list[float] = field(default_factory=list)
    per_fetch: list[float] = field(default_factory=list)

    def add(self, window: CpuWindow, jobs: int, client_seconds: float) -> None:
        self.client_us.append(client_seconds / jobs * 1e6)
        if window.server_seconds is not None:
            self.server_us.append(window.server_seconds / jobs * 1e6)
            cores = os.cpu_count() or 1
            self.busy.append((window.server_seconds + client_seconds) / (window.wall * cores))


class FetchRecorder:
    """Notes the duration and size of each fetch that claimed something (``producer.fetch``)."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.counts: list[int] = []

    def attach(self, app: Conveyor) -> object:
        return app.on("producer.fetch", self._record)

    def _record(self, event: str, data: dict[str, Any]) -> None:
        if data["count"]:
            self.durations.append(data["duration"])
            self.counts.append(data["count"])


async def drain_floor(settings: Settings) -> Figures:
    """The floor and Conveyor's drain at c=100 and c=20 (default settings, node start included),
    ``FLOOR_ROUNDS`` rounds alternated in one run (every other round in reverse order, so a drift of
    the machine's load weighs on each alike): medians, ranges, and each drain's ratio to the floor.
    Targets: c=100 >= 0.8x, c=20 >= 0.6x."""
    rounds = settings.round_count(FLOOR_ROUNDS)
    if settings.engine != "postgres":
        raise RuntimeError("drain-floor runs on PostgreSQL only (pgbench)")
    jobs = settings.job_count(DRAIN_JOBS)
    levels = (settings.concurrency,) if settings.concurrency is not None else (100, 20)
    check_jobs(jobs)
    check_script()
    server = await ServerCpu.find(settings.dsn)
    measured: dict[str, list[float]] = {"floor": [], **{f"c{level}": [] for level in levels}}
    costs = {variant: Costs() for variant in measured}
    statements = {variant: StatementTimes() for variant in measured}
    for round_ in range(rounds):
        variants = ["floor", *(f"c{level}" for level in levels)]
        for variant in alternate(round_, variants):
            window = CpuWindow(server)
            if variant == "floor":
                measured[variant].append(await floor_once(settings, jobs, window, statements[variant]))
                costs[variant].add(window, jobs, window.children)
            else:
                fetches = FetchRecorder()
                drained = await drain_once(
                    settings,
                    jobs,
                    int(variant[1:]),
                    prepare=fetches.attach,
                    window=window,
                    statements=statements[variant],
                )
                measured[variant].append(drained["jobs_per_s"])
                costs[variant].add(window, jobs, window.own)
                costs[variant].fetch_ms.append(statistics.median(fetches.durations) * 1000)
                costs[variant].per_fetch.append(statistics.mean(fetches.counts))
    floor = statistics.median(measured["floor"])
    figures: Figures = {"jobs": jobs, "rounds": rounds, "batch": BATCH, "clients": CLIENTS}
    cores = os.cpu_count() or 1
    for variant, rates in measured.items():
        figures[f"{variant}_jobs_per_s"] = statistics.median(rates)
        figures[f"{variant}_range"] = [min(rates), max(rates)]
        if variant != "floor":
            figures[f"{variant}_ratio"] = round(statistics.median(rates) / floor, 3)
    for variant, times in statements.items():
        # The server's execution time by kind of statement (pg_stat_statements, when loaded).
        if times.kinds:
            figures[f"{variant}_statements"] = times.figures()
    for variant, cost in costs.items():
        client = "pgbench" if variant == "floor" else "node"
        figures[f"{variant}_{client}_cpu_us_per_job"] = _median(cost.client_us)
        if cost.server_us:
            figures[f"{variant}_server_cpu_us_per_job"] = _median(cost.server_us)
            figures[f"{variant}_cores_busy"] = _median(cost.busy, 2)
        if variant == "floor":
            continue
        figures[f"{variant}_fetch_ms"] = _median(cost.fetch_ms, 3)
        figures[f"{variant}_jobs_per_fetch"] = _median(cost.per_fetch)
        level = int(variant[1:])
        # However fast the node, a queue of limit C claims at most C jobs per fetch round trip.
        figures[f"{variant}_latency_ceiling_ratio"] = round(
            level / (_median(cost.fetch_ms, 3) / 1000) / floor, 3
        )
        if cost.server_us:
            # However well the node overlaps its work, the cores do at most this much of it.
            per_job = statistics.median(cost.server_us) + statistics.median(cost.client_us)
            if per_job > 0:  # /proc counts in clock ticks: a tiny run may see none
                figures[f"{variant}_cpu_ceiling_ratio"] = round(cores * 1e6 / per_job / floor, 3)
    return figures | {"leadership": False}


def _median(values: list[float], digits: int = 1) -> float:
    return round(statistics.median(values), digits)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python benchmarks/floor.py --write  (renders drain_floor.pgbench)")
    SCRIPT.write_text(render_script())
    print(f"wrote {SCRIPT}")
