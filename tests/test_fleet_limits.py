"""Fleet-wide limits with real node processes: three ``conveyor start`` processes share a queue's
global limit, one is killed with SIGKILL mid-run, and the limit holds throughout while the dead
node's slots come back after rescue."""

from __future__ import annotations

import asyncio
import signal
import time
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from conveyor import JobState
from conveyor.engine.postgres import PostgresEngine
from tests import cluster_jobs as jobs
from tests.helpers import make_app, poll, table
from tests.node_processes import describe, node_env, node_processes

GLOBAL_LIMIT = 4
JOBS, SECONDS = 48, 0.4


def overlap_peak(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans open at one moment (a span ending as another starts does not overlap it)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


async def executing_now(conn: psycopg.AsyncConnection[Any], prefix: str, dead_after: float) -> int:
    """Jobs the database holds executing that have not ended by their own record: claimed and not
    started yet, running, or cut short by the kill. A job that ended may still be executing in the
    database until its node's ack is written; the limit does not count those of the claiming node
    (their slots are free), so neither does this. Nor does it count the jobs of a producer silent for
    ``dead_after`` (the killed node's, until rescued): the limit frees their slots then."""
    query = sql.SQL(
        "SELECT count(*) FROM {} AS j WHERE state = 'executing' AND queue = 'limited' AND NOT EXISTS ("
        " SELECT 1 FROM {} AS s WHERE s.job_id = j.id AND s.attempt = j.attempt AND s.ended_at IS NOT NULL)"
        " AND NOT EXISTS (SELECT 1 FROM {} AS p WHERE p.uuid::text = j.attempted_by[2]"
        "  AND p.updated_at < timezone('UTC', now()) - make_interval(secs => %s))"
    )
    producers = table(prefix, "oban_producers")
    cur = await conn.execute(query.format(table(prefix), jobs.spans_table(prefix), producers), (dead_after,))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def spans(conn: psycopg.AsyncConnection[Any], prefix: str) -> list[tuple[int, int, int, Any, Any]]:
    query = sql.SQL("SELECT job_id, pid, attempt, started_at, ended_at FROM {} ORDER BY started_at")
    cur = await conn.execute(query.format(jobs.spans_table(prefix)))
    return [tuple(row) for row in await cur.fetchall()]  # type: ignore[misc]


@pytest.mark.slow
async def test_three_node_processes_share_a_global_limit_through_a_kill(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    jobs.create_spans_table(dsn, prefix)
    config = tmp_path / "conveyor.toml"
    config.write_text(f"[queues.limited]\nlimit = 10\nglobal_limit = {GLOBAL_LIMIT}\n")
    producer_timeout, rescue_interval, heartbeat = 2.0, 0.5, 0.5
    # Rescue is a leader's duty: an in-test node leads, with nothing of its own to run.
    lifeline = make_app(
        dsn,
        prefix,
        queues={"idle": 1},
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=rescue_interval,
    )
    ids = await lifeline.enqueue_many(
        [jobs.record_span.new(dsn=dsn, prefix=prefix, seconds=SECONDS) for _ in range(JOBS)]
    )
    samples: list[int] = []
    sampling = True

    async def sample() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            while sampling:
                samples.append(await executing_now(conn, prefix, producer_timeout))
                await asyncio.sleep(0.005)

    await lifeline.start()
    sampler = asyncio.create_task(sample())
    env = node_env(heartbeat, producer_timeout)
    options = ("--prefix", prefix, "--config", str(config))
    try:
        async with (
            node_processes(dsn, tmp_path, 3, env, *options) as nodes,
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn,
        ):
            # Kill a process while it runs jobs, once the fleet is well under way.
            deadline = time.monotonic() + 60

            async def running_node() -> Any:
                found = await spans(conn, prefix)
                running = {pid for _, pid, _, _, ended in found if ended is None}
                return next((n.process for n in nodes if n.pid in running), None) if len(found) >= 8 else None

            victim = await poll(
                running_node, timeout=60, what=f"a node running jobs\n{describe(nodes)}", every=0.01
            )
            victim.send_signal(signal.SIGKILL)
            killed_at = (await (await conn.execute("SELECT clock_timestamp()")).fetchone())[0]  # type: ignore[index]
            await victim.exited()

            async def completed() -> int:
                cur = await conn.execute(
                    sql.SQL("SELECT count(*) FROM {} WHERE state = 'completed'").format(table(prefix))
                )
                row = await cur.fetchone()
                return int(row[0]) if row else 0

            await poll(
                completed,
                lambda n: n == JOBS,
                timeout=max(0.0, deadline - time.monotonic()),
                what=f"every job to complete\n{describe(nodes)}",
                every=0.05,
            )
            found = await spans(conn, prefix)
    finally:
        sampling = False
        with suppress(Exception):
            await sampler
        await lifeline.stop()

    # The database never held more than the global limit of jobs executing and not ended, sampled
    # every few ms.
    assert max(samples) <= GLOBAL_LIMIT, max(samples)
    # Nor did the jobs themselves: spans cut short by the kill end at the kill.
    intervals = [(start, end or killed_at) for _, _, _, start, end in found]
    assert overlap_peak(intervals) <= GLOBAL_LIMIT
    # Throughput used every slot: before the kill, and again after the rescue.
    assert overlap_peak([s for s in intervals if s[1] <= killed_at]) == GLOBAL_LIMIT
    assert overlap_peak([s for s in intervals if s[0] > killed_at]) == GLOBAL_LIMIT
    # The jobs the dead node held ran again elsewhere, once; every other job ran once.
    cut_short = {job_id for job_id, pid, _, _, end in found if pid == victim.pid and end is None}
    assert cut_short, "the victim was running jobs when it died"
    starts: dict[int, list[tuple[int, int]]] = {}
    for job_id, pid, attempt, _, _ in found:
        starts.setdefault(job_id, []).append((pid, attempt))
    assert sorted(starts) == sorted(ids)
    for job_id, runs in starts.items():
        if job_id in cut_short:
            assert len(runs) == 2 and runs[1][0] != victim.pid and runs[1][1] == 2, runs
        else:
            assert len(runs) == 1, (job_id, runs)
    done = await engine.get_job(ids[0])
    assert done is not None and done.state is JobState.COMPLETED
    busy = sum((end - start).total_seconds() for start, end in intervals)
    makespan = (max(end for _, end in intervals) - min(start for start, _ in intervals)).total_seconds()
    print(
        f"\nglobal limit {GLOBAL_LIMIT} over 3 processes, 1 killed: {JOBS} jobs of {SECONDS}s in "
        f"{makespan:.2f}s, slot use {busy / (GLOBAL_LIMIT * makespan):.0%}, peak sampled {max(samples)}"
    )
