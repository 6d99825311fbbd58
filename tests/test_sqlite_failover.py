"""A frozen SQLite leader (SIGSTOP): a surviving node takes its lease once its heartbeats are
``producer_timeout`` old, rescues its job, and the slot of the queue's global limit it held comes
back, all long before its 30 s lease ends; thawed, the old leader gives up the job and the lease."""

from __future__ import annotations

import signal
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from conveyor import Conveyor, JobState
from tests import cluster_jobs as jobs
from tests.forked import Started
from tests.helpers import holds, poll
from tests.node_processes import describe, node_processes

#: Seconds of slack on timing assertions: two CPU cores shared with other work.
SLACK = 1.5


def freeze_between_writes(process: Started, database: Path) -> None:
    """SIGSTOP ``process`` at a moment it holds no write lock on ``database``: a process frozen
    inside a write transaction stops every other writer of an SQLite file until it runs again,
    which no engine can prevent and is not what this test is about. Freezes, then checks from a
    connection of its own that a write could begin; if not, thaws it for a moment and tries again."""
    for _ in range(200):
        process.send_signal(signal.SIGSTOP)
        probe = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            process.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()
    raise AssertionError(f"{process.pid} held the write lock of {database} at every try")


@pytest.mark.slow
async def test_a_frozen_sqlite_leaders_job_and_slot_come_back_long_before_its_lease_ends(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    producer_timeout, rescue_interval, heartbeat = 2.0, 1.0, 0.5
    config = tmp_path / "conveyor.toml"
    config.write_text("[queues.limited]\nlimit = 2\nglobal_limit = 1\n")
    env = {
        "CONVEYOR_HEARTBEAT_INTERVAL": str(heartbeat),
        "CONVEYOR_PRODUCER_TIMEOUT": str(producer_timeout),
        "CONVEYOR_RESCUE_INTERVAL": str(rescue_interval),
    }
    survivor = Conveyor(
        url,
        queues={"limited": {"limit": 2, "global_limit": 1}},
        node=f"survivor-{uuid.uuid4().hex[:6]}",
        poll_interval=0.2,
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=rescue_interval,
        shutdown_grace=1,
    )
    await survivor.install()
    engine = await survivor.engine()

    async def leader() -> str | None:
        found = await engine.get_leader("conveyor")
        return found.node if found else None

    async with node_processes(url, tmp_path, 1, env, "--config", str(config)) as nodes:
        (frozen,) = nodes
        try:
            await poll(leader, frozen.owns, timeout=30, what=f"a leader\n{describe(nodes)}")
            first = await survivor.enqueue(jobs.sleeps_first.new(first=60.0, later=0.1))
            waiting = await survivor.enqueue(jobs.sleeps_first.new(first=0.1))
            running = await poll(
                lambda: survivor.get_job(first),
                lambda j: j is not None and j.state is JobState.EXECUTING,
                timeout=30,
                what=f"the first run\n{describe(nodes)}",
            )
            assert running is not None and frozen.owns(running.attempted_by[0])
            await survivor.start()
            # The waiting job stays available while the survivor's contact outlasts producer_timeout.
            await holds(
                lambda: survivor.get_job(waiting),
                lambda j: j is not None and j.state is JobState.AVAILABLE,
                during=producer_timeout + heartbeat,
                what="the waiting job",
            )

            freeze_between_writes(frozen.process, tmp_path / "jobs.db")
            stopped = time.monotonic()
            done = await poll(
                lambda: survivor.get_job(first),
                lambda j: j is not None and j.state is JobState.COMPLETED,
                timeout=30,
                what="the rescued run",
                every=0.02,
            )
            rescued_after = time.monotonic() - stopped
            await poll(
                lambda: survivor.get_job(waiting),
                lambda j: j is not None and j.state is JobState.COMPLETED,
                timeout=30,
                what="the waiting job",
                every=0.02,
            )
            waited = time.monotonic() - stopped
            print(
                f"\nfrozen leader: its job done again {rescued_after:.2f}s, the waiting one {waited:.2f}s "
                f"after SIGSTOP (producer_timeout {producer_timeout}s, lease 30s)"
            )
            target = producer_timeout + rescue_interval + 2
            assert rescued_after < target + SLACK and waited < target + SLACK, (rescued_after, waited)
            assert done is not None and done.attempt == 2 and done.meta["rescued"] == 1
            assert done.attempted_by[0] == survivor.settings.node
            assert await leader() == survivor.settings.node

            # Thawed, the old leader learns the job is not its any more and the lease is gone.
            frozen.process.send_signal(signal.SIGCONT)
            await holds(
                leader,
                lambda name: name == survivor.settings.node,
                during=producer_timeout,
                what="the leader",
            )
            after = await survivor.get_job(first)
            assert after is not None and after.state is JobState.COMPLETED and after.attempt == 2
            assert frozen.process.returncode is None, describe(nodes)
            assert "lost the leadership" in frozen.output(), describe(nodes)
        finally:
            frozen.process.send_signal(signal.SIGCONT)
            await survivor.stop()
