"""Chunk workers under SIGKILL (issue 37): a node process killed in the middle of a chunk's call
leaves each of its jobs executing; the rescue gives each back, and a live node runs each exactly
once more. With real ``conveyor start`` processes, on PostgreSQL and SQLite."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from conveyor import Conveyor, JobState
from tests import cluster_jobs as jobs
from tests.conftest import DSN
from tests.helpers import FAST_NODE, holds, poll
from tests.node_processes import describe, node_env, node_processes


def starts(log: Path) -> list[tuple[int, int, int]]:
    """(job id, pid, attempt) of each start recorded by ``record_chunk``, by job and attempt."""
    if not log.exists():
        return []
    rows = [tuple(int(x) for x in line.split()) for line in log.read_text().splitlines()]
    return sorted(((r[0], r[1], r[2]) for r in rows if len(r) == 3), key=lambda r: (r[0], r[2]))


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["postgres", "sqlite"])
async def test_a_chunk_killed_mid_call_runs_each_of_its_jobs_once_more(
    engine_name: str, prefix: str, tmp_path: Path
) -> None:
    producer_timeout, heartbeat = 2.0, 0.5
    if engine_name == "postgres":
        url, where = DSN, {"prefix": prefix}
        options: tuple[str, ...] = ("--prefix", prefix)
    else:
        url, where, options = f"sqlite:///{tmp_path / 'jobs.db'}", {}, ()
    log = tmp_path / "starts.log"
    survivor = Conveyor(
        url,
        **{
            **FAST_NODE,
            **where,
            "node": f"survivor-{uuid.uuid4().hex[:6]}",
            "queues": {"chunked": 5},
            "heartbeat_interval": heartbeat,
            "producer_timeout": producer_timeout,
            "rescue_interval": 0.5,
        },
    )
    await survivor.install()
    ids = list(await survivor.enqueue_many([jobs.record_chunk.new(log=str(log), n=n) for n in range(3)]))
    env = node_env(heartbeat, producer_timeout)
    async with node_processes(url, tmp_path, 1, env, *options, "-q", "chunked:5") as nodes:
        try:
            (doomed,) = nodes
            first = await poll(
                lambda: starts(log),
                lambda s: len(s) == 3,
                timeout=30,
                what=f"the first chunk's starts\n{describe(nodes)}",
            )
            assert first == [(i, doomed.pid, 1) for i in sorted(ids)]  # all started on the doomed node
            await survivor.start()
            doomed.process.send_signal(signal.SIGKILL)
            await doomed.process.exited()
            for job_id in ids:
                done = await poll(
                    lambda job_id=job_id: survivor.get_job(job_id),
                    lambda j: j is not None and j.state is JobState.COMPLETED,
                    timeout=30,
                    what=f"job {job_id} rescued and completed",
                )
                assert done is not None and done.attempt == 2 and done.meta.get("rescued") == 1
            # Exactly once more each, however many rescue rounds pass.
            again = [(i, os.getpid(), 2) for i in ids]
            expected = sorted(first + again, key=lambda r: (r[0], r[2]))
            await holds(lambda: starts(log), lambda s: s == expected, during=1.5, what="starts")
        finally:
            await survivor.stop()
