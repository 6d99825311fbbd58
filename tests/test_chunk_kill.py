"""Chunk workers under SIGKILL (issue 37): a node process killed in the middle of a chunk's call
leaves each of its jobs executing; the rescue gives each back, and a live node runs each exactly
once more, in a chunk of its own. PostgreSQL, with real ``conveyor start`` processes (the rescue
path is the engines' own, proved on both by the conformance suite)."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from conveyor import Conveyor, JobState
from conveyor.engine.postgres import PostgresEngine
from tests import cluster_jobs as jobs
from tests.helpers import holds, make_app, poll
from tests.node_processes import describe, node_env, node_processes


async def starts(dsn: str, prefix: str) -> list[tuple[int, int, int]]:
    """(job id, pid, attempt) of each start recorded by ``record_chunk``."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT job_id, pid, attempt FROM {} ORDER BY job_id, attempt").format(
                jobs.runs_table(prefix)
            )
        )
        return [(int(a), int(b), int(c)) for a, b, c in await cursor.fetchall()]


@pytest.mark.slow
async def test_a_chunk_killed_mid_call_runs_each_of_its_jobs_once_more(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    jobs.create_runs_table(dsn, prefix)
    producer_timeout, heartbeat = 2.0, 0.5
    inserter = Conveyor(dsn, prefix=prefix)
    try:
        requests = [jobs.record_chunk.new(dsn=dsn, prefix=prefix, n=n) for n in range(3)]
        ids = list(await inserter.enqueue_many(requests))
    finally:
        await inserter.close()
    survivor = make_app(
        dsn,
        prefix,
        node=f"survivor-{uuid.uuid4().hex[:6]}",
        queues={"chunked": 5},
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=0.5,
    )
    env = node_env(heartbeat, producer_timeout)
    async with node_processes(dsn, tmp_path, 1, env, "--prefix", prefix, "-q", "chunked:5") as nodes:
        try:
            (doomed,) = nodes
            first = await poll(
                lambda: starts(dsn, prefix),
                lambda s: len(s) == 3,
                timeout=30,
                what=f"the first chunk's starts\n{describe(nodes)}",
            )
            assert first == [(i, doomed.pid, 1) for i in sorted(ids)]  # all started on the doomed node
            await survivor.start()
            doomed.process.send_signal(signal.SIGKILL)
            await doomed.process.wait()
            for job_id in ids:
                done = await poll(
                    lambda job_id=job_id: engine.get_job(job_id),
                    lambda j: j is not None and j.state is JobState.COMPLETED,
                    timeout=30,
                    what=f"job {job_id} rescued and completed",
                )
                assert done is not None and done.attempt == 2 and done.meta.get("rescued") == 1
            # Exactly once more each, however many rescue rounds pass.
            again = [(i, os.getpid(), 2) for i in ids]
            expected = sorted(first + again, key=lambda start: (start[0], start[2]))
            await holds(lambda: starts(dsn, prefix), lambda s: s == expected, during=1.5, what="starts")
        finally:
            await survivor.stop()
