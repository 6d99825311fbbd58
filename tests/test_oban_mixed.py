"""A mixed fleet: an oban-py 0.7 node and a Conveyor node on one database, as one fleet.

Both nodes are real processes under .venv-oban's Python 3.12: oban-py through tests/oban_py/driver.py,
Conveyor through ``conveyor start --import tests.oban_py.mixed_workers`` (the migration path: the
oban-py app's modules, run unchanged). The rescue thresholds are shortened keeping their ratios:
oban-py refreshes its producers every 15 s and forgets them after 60 s; Conveyor beats every 2 s,
rescues its own producers after 15 s silent and oban-py's after four of their intervals (all divided
by ``BEAT_SCALE``); oban-py rescues by age after 300 s (divided by ``SCALE``, so the jobs that must
outlive it stay short; it stays the longest threshold). Skipped when .venv-oban lacks oban-py or
Conveyor.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from conveyor import Conveyor, Job, JobFilter, JobRequest, JobState, NodeNotFoundError
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine
from tests import helpers
from tests.test_oban_compat import DRIVER, OBAN_PYTHON, oban_py

ROOT = Path(__file__).resolve().parents[1]
CONVEYOR = ROOT / ".venv-oban" / "bin" / "conveyor"

pytestmark = pytest.mark.skipif(
    not (OBAN_PYTHON.exists() and CONVEYOR.exists()),
    reason="oban-py or Conveyor is not installed in .venv-oban: run scripts/ensure-oban-venv.sh",
)

WORKERS = "tests.oban_py.mixed_workers"
RUN_LOG = f"{WORKERS}.RunLog"
#: oban-py's age rescue is its default divided by this.
SCALE = 50
#: The heartbeats and the timeouts built on them are their defaults divided by this: not as short as
#: SCALE would make them, so a loaded machine's scheduling delays stay well inside their margins.
BEAT_SCALE = 25
RESCUE_AFTER = 300 / SCALE  # oban-py's lifeline: executing longer than this is rescued (6 s)
REFRESH = 15 / BEAT_SCALE  # oban-py's producer refresh (0.6 s): Conveyor judges them after 4 of these
OBAN_OPTIONS: dict[str, Any] = {
    "lifeline": {"interval": 60 / SCALE, "rescue_after": RESCUE_AFTER},
    "refresher": {"interval": REFRESH, "max_age": 60 / BEAT_SCALE},
    "stager": {"interval": 0.1},
    # oban-py's lease lasts int(interval) seconds: 2 s is as short as it goes (30 s by default).
    "leader_interval": 2.0,
}
CONVEYOR_ENV = {
    "CONVEYOR_MIXED_FLEET": "true",
    "CONVEYOR_HEARTBEAT_INTERVAL": str(2 / BEAT_SCALE),
    "CONVEYOR_PRODUCER_TIMEOUT": str(15 / BEAT_SCALE),
    "CONVEYOR_FOREIGN_HEARTBEAT_INTERVAL": str(REFRESH),  # oban-py's refresher interval
    "CONVEYOR_RESCUE_INTERVAL": str(5 / BEAT_SCALE),
    "CONVEYOR_LEADER_TTL": "4.0",  # renewed every 2 s, as oban-py renews its 2 s lease every 1 s
    "CONVEYOR_POLL_INTERVAL": "0.2",
    "CONVEYOR_STAGE_INTERVAL": "0.1",
    "CONVEYOR_SHUTDOWN_GRACE": "1",
}
#: Longer than both runtimes' rescue thresholds: oban-py's age (6 s) and Conveyor's (0.6 s for its
#: own producers, 2.4 s for oban-py's).
LONG = RESCUE_AFTER + 1.5


# -- the two nodes -----------------------------------------------------------------------------------
class ConveyorNode:
    """``conveyor start`` under .venv-oban, importing the oban-py workers."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: Any, name: str) -> None:
        self.proc = proc
        self.name = name
        self._stderr = stderr

    @classmethod
    async def start(cls, dsn: str, prefix: str, name: str, queues: str) -> ConveyorNode:
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()/kill()
        proc = await asyncio.create_subprocess_exec(
            str(CONVEYOR),
            "start",
            "--dsn",
            dsn,
            "--prefix",
            prefix,
            "--queues",
            queues,
            "--import",
            WORKERS,
            "--node",
            name,
            "--log-level",
            "WARNING",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
            cwd=ROOT,
            env={**os.environ, **CONVEYOR_ENV},
        )
        node = cls(proc, stderr, name)
        await node._ready()
        return node

    def errors(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    async def _ready(self, timeout: float = 20.0) -> None:
        started = f"conveyor node {self.name} running queues"
        with contextlib.suppress(AssertionError):  # timed out: failed below, with the node's output
            await helpers.poll(
                lambda: started in self.errors() or self.proc.returncode is not None,
                timeout=timeout,
                what="the node to start or exit",
                every=0.05,
            )
        if started not in self.errors():
            await self.kill()
            pytest.fail(f"the Conveyor node did not start; stderr:\n{self.errors()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                pytest.fail(f"the Conveyor node did not stop; stderr:\n{self.errors()}")
            assert self.proc.returncode == 0, self.errors()
        self._stderr.close()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self._stderr.close()


class ObanNode:
    """An oban-py node (driver ``serve``): its pid, and what it says about leading, read from its
    events as they come."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr: Any, name: str) -> None:
        self.proc = proc
        self.name = name
        self.pid = proc.pid
        self.leading: list[bool] = []
        self.ready = asyncio.Event()
        self._stderr = stderr
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, dsn: str, prefix: str, name: str, queues: dict[str, int]) -> ObanNode:
        options = {"dsn": dsn, "prefix": prefix, "node": name, "queues": queues, **OBAN_OPTIONS}
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()/kill()
        proc = await asyncio.create_subprocess_exec(
            str(OBAN_PYTHON),
            str(DRIVER),
            "serve",
            json.dumps(options),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )
        node = cls(proc, stderr, name)
        try:
            await asyncio.wait_for(node.ready.wait(), 20)
        except TimeoutError:
            await node.kill()
            pytest.fail(f"the oban-py node did not start; stderr:\n{node.errors()}")
        return node

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            event = json.loads(line)
            if event["event"] == "ready":
                self.ready.set()
            elif event["event"] == "leader":
                self.leading.append(event["is_leader"])

    def errors(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    async def leads(self) -> bool:
        """Whether oban-py itself says it leads."""
        return bool(self.leading and self.leading[-1])

    async def stop(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"stop\n")
            await self.proc.stdin.drain()
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                pytest.fail(f"the oban-py node did not stop; stderr:\n{self.errors()}")
            assert self.proc.returncode == 0, self.errors()
        await self._close()

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._close()

    async def _close(self) -> None:
        await self._reader
        self._stderr.close()


@dataclass
class Fleet:
    app: Conveyor
    engine: PostgresEngine
    log: Path
    conveyor: ConveyorNode | None = None
    oban: ObanNode | None = None


@asynccontextmanager
async def fleet(dsn: str, prefix: str, tmp_path: Path) -> AsyncIterator[Fleet]:
    """An installed schema and a client app; the test starts the nodes it wants on it."""
    engine = PostgresEngine(dsn, prefix=prefix, max_connections=4)
    await engine.open()
    await engine.install()
    app = Conveyor(engine=engine)
    mixed = Fleet(app, engine, tmp_path / "runs.log")
    mixed.log.touch()
    try:
        yield mixed
    finally:
        for node in (mixed.conveyor, mixed.oban):
            if node is not None:
                await node.kill()
        await app.close()
        await engine.close()


def runs(log: Path) -> dict[int, list[tuple[str, int, int]]]:
    """Each job's log lines: (start|end, attempt, pid), in order."""
    found: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for line in log.read_text().splitlines():
        kind, job_id, attempt, pid = line.split()
        found[int(job_id)].append((kind, int(attempt), int(pid)))
    return found


def run_log(log: Path, queue: str = "mixed", **args: Any) -> JobRequest:
    return JobRequest(RUN_LOG, args={"log": str(log), **args}, queue=queue)


async def until(check: Any, what: str, timeout: float = 20.0) -> None:
    await helpers.poll(check, timeout=timeout, what=what, every=0.05)


async def states(engine: PostgresEngine, ids: Iterable[int]) -> dict[int, JobState]:
    """Each job's state, in one query: a poll asks it every 50 ms, of hundreds of jobs."""
    wanted = list(ids)
    found = {job.id: job.state for job in await jobs_of(engine, wanted)}
    assert set(found) == set(wanted), set(wanted) - set(found)
    return found


async def jobs_of(engine: PostgresEngine, ids: Sequence[int]) -> list[Job]:
    return await engine.list_jobs(JobFilter(ids=ids, limit=len(ids)))


async def final(engine: PostgresEngine, ids: Sequence[int], timeout: float = 30.0) -> None:
    async def done() -> bool:
        return all(s.is_final for s in (await states(engine, ids)).values())

    await until(done, f"{len(ids)} jobs to finish", timeout)


async def leader(dsn: str, prefix: str) -> str | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT node FROM {}.oban_leaders WHERE name = 'Oban'").format(sql.Identifier(prefix))
        row = conn.execute(query).fetchone()
    return None if row is None else str(row[0])


async def conveyor_leads(mixed: Fleet, dsn: str, prefix: str) -> None:
    """The one leader of the fleet is the Conveyor node, and oban-py knows it does not lead."""
    assert mixed.conveyor is not None and mixed.oban is not None
    oban = mixed.oban

    async def settled() -> bool:
        return await leader(dsn, prefix) == "conveyor-1" and not await oban.leads()

    await until(settled, "the Conveyor node to lead the fleet alone")


# -- 1. 600 jobs exactly once, long jobs on both sides untouched -----------------------------------
async def test_a_mixed_fleet_runs_every_job_once_and_rescues_no_live_job(
    dsn: str, prefix: str, tmp_path: Path
) -> None:
    async with fleet(dsn, prefix, tmp_path) as mixed:
        # oban-py starts first and leads; the Conveyor node takes the lease from it.
        mixed.oban = await ObanNode.start(dsn, prefix, "oban-1", {"mixed": 20, "long_oban": 3})
        await until(mixed.oban.leads, "oban-py to lead while alone")
        mixed.conveyor = await ConveyorNode.start(dsn, prefix, "conveyor-1", "mixed:20,long_conveyor:3")
        await conveyor_leads(mixed, dsn, prefix)

        log = mixed.log
        # Short jobs, so that both nodes (20 slots each) get their share of the 600 (fifteen fills
        # of both nodes' slots).
        ids = await mixed.app.enqueue_many(run_log(log, sleep=0.02) for _ in range(600))
        long_ids = await mixed.app.enqueue_many(
            [
                run_log(log, "long_oban", sleep=LONG),
                run_log(log, "long_conveyor", sleep=LONG),
                run_log(log, "mixed", sleep=LONG),
                # Blocks oban-py's event loop (and so its heartbeats) for 1.5 of its refresh
                # intervals: with no margin over the interval, Conveyor rescued such jobs.
                run_log(log, "long_oban", block=1.5 * REFRESH),
            ]
        )
        await final(mixed.engine, ids, timeout=60)
        await final(mixed.engine, long_ids, timeout=2 * LONG + 10)
        assert not await mixed.oban.leads() and await leader(dsn, prefix) == "conveyor-1"

        seen = runs(log)
        for job_id in ids + long_ids:
            assert [kind for kind, _, _ in seen[job_id]] == ["start", "end"], (job_id, seen[job_id])
        by_pid = defaultdict(int)
        for job_id in ids:
            by_pid[seen[job_id][0][2]] += 1
        assert set(by_pid) == {mixed.oban.pid, mixed.conveyor.pid}, by_pid  # both ran their share
        assert [seen[i][0][2] for i in long_ids[:2]] == [mixed.oban.pid, mixed.conveyor.pid]
        finished = await jobs_of(mixed.engine, ids + long_ids)
        assert len(finished) == len(ids + long_ids)
        for job in finished:
            assert job.state is JobState.COMPLETED and job.attempt == 1
            assert "rescued" not in job.meta, job
        await mixed.conveyor.stop()
        await mixed.oban.stop()


# -- 2. kill -9 of either node: the other rescues its jobs, once -------------------------------------
@pytest.mark.parametrize("victim", ["oban-py", "conveyor"])
async def test_the_jobs_of_a_killed_node_are_rescued_by_the_other_once(
    dsn: str, prefix: str, tmp_path: Path, victim: str
) -> None:
    async with fleet(dsn, prefix, tmp_path) as mixed:
        log = mixed.log
        start_victim, start_survivor = (
            (_start_oban, _start_conveyor) if victim == "oban-py" else (_start_conveyor, _start_oban)
        )
        # The victim starts alone, so it claims every job; the survivor joins once it has.
        doomed = await start_victim(mixed, dsn, prefix)
        ids = await mixed.app.enqueue_many(run_log(log, "doomed", first_sleep=60) for _ in range(5))

        async def all_started() -> bool:
            return all(runs(log).get(job_id) for job_id in ids)

        await until(all_started, "the victim to start every job")
        survivor = await start_survivor(mixed, dsn, prefix)
        await conveyor_leads(mixed, dsn, prefix)
        await doomed.kill()
        # oban-py rescues a dead Conveyor node's jobs by their age (RESCUE_AFTER), once it leads;
        # Conveyor rescues a dead oban-py node's jobs four of its heartbeat intervals after its last.
        await final(mixed.engine, ids, timeout=RESCUE_AFTER + 20)

        seen = runs(log)
        for job_id in ids:
            assert seen[job_id] == [
                ("start", 1, doomed.pid),
                ("start", 2, survivor.pid),
                ("end", 2, survivor.pid),
            ]
            job = await mixed.engine.get_job(job_id)
            assert job is not None and job.state is JobState.COMPLETED and job.meta["rescued"] == 1
        if victim == "conveyor":
            assert await mixed.oban.leads()  # type: ignore[union-attr]  # the fleet's leader now


async def _start_oban(mixed: Fleet, dsn: str, prefix: str) -> ObanNode:
    mixed.oban = await ObanNode.start(dsn, prefix, "oban-1", {"doomed": 5})
    return mixed.oban


async def _start_conveyor(mixed: Fleet, dsn: str, prefix: str) -> ConveyorNode:
    mixed.conveyor = await ConveyorNode.start(dsn, prefix, "conveyor-1", "doomed:5")
    return mixed.conveyor


# -- 3. node-targeted pause and resume, both ways ---------------------------------------------------
async def test_node_targeted_pause_and_resume_cross_both_ways(dsn: str, prefix: str, tmp_path: Path) -> None:
    async with fleet(dsn, prefix, tmp_path) as mixed:
        oban = mixed.oban = await ObanNode.start(dsn, prefix, "oban-1", {"mixed": 5})
        conveyor = mixed.conveyor = await ConveyorNode.start(dsn, prefix, "conveyor-1", "mixed:5")
        log = mixed.log

        async def who_runs(count: int) -> set[int]:
            ids = await mixed.app.enqueue_many(run_log(log, sleep=0.05) for _ in range(count))
            await final(mixed.engine, ids)
            seen = runs(log)
            return {seen[job_id][0][2] for job_id in ids}

        # Conveyor (a client with its own instance name) pauses the oban-py node: Oban.oban-1.
        await mixed.app.pause_queue("mixed", node="oban-1")
        await until(lambda: _paused(mixed, "oban-1"), "oban-py to report its queue paused")
        assert await who_runs(20) == {conveyor.pid}
        # oban-py pauses the Conveyor node, with its own API: Oban.conveyor-1.
        await oban_py("signal", dsn=dsn, prefix=prefix, action="pause", queue="mixed", node="conveyor-1")
        await until(lambda: _paused(mixed, "conveyor-1"), "the Conveyor node to report its queue paused")
        await mixed.app.resume_queue("mixed", node="oban-1")
        assert await who_runs(20) == {oban.pid}
        await oban_py("signal", dsn=dsn, prefix=prefix, action="resume", queue="mixed", node="conveyor-1")
        await until(lambda: _paused(mixed, "conveyor-1", False), "the Conveyor node to resume")
        await mixed.app.pause_queue("mixed", node="oban-1")
        await until(lambda: _paused(mixed, "oban-1"), "oban-py to pause again")
        assert await who_runs(10) == {conveyor.pid}

        # A node nobody runs: reported, nothing sent.
        with pytest.raises(NodeNotFoundError):
            await mixed.app.pause_queue("mixed", node="oban-9")
        await conveyor.stop()
        await oban.stop()


async def _paused(mixed: Fleet, node: str, paused: bool = True) -> bool:
    """Whether ``node``'s producer row says its queue is paused (both runtimes write it there)."""
    rows = [p for p in await mixed.engine.list_producers() if p.node == node]
    return bool(rows) and all(p.meta.get("paused") is paused for p in rows)


# -- 4. oban-py workers run on Conveyor, with their outcomes' meaning --------------------------------
OUTCOME_JOBS: dict[str, dict[str, Any]] = {
    "SnoozeOnce": {},
    "CancelIt": {"who": "ada"},
    "RecordIt": {"numbers": [1, 2, 3]},
    "FailsWithBackoff": {},
    "TooSlow": {},
    "multiply": {"a": 6, "b": 7},
    "snooze_function": {"seconds": 120},
}


def outcome_requests(queue: str) -> list[JobRequest]:
    return [
        JobRequest(f"{WORKERS}.{name}", args=args, queue=queue, tags=["Mixed"])
        for name, args in OUTCOME_JOBS.items()
    ]


def summary(job: Any) -> dict[str, Any]:
    """What an outcome leaves in the row, without what differs between runs (times, texts)."""
    meta = {k: v for k, v in job.meta.items() if k != "return"}
    return {
        "state": job.state.value,
        "attempt": job.attempt,
        "meta": meta,
        "errors": len(job.errors),
        "wait": None
        if job.state.value not in ("scheduled", "retryable")
        else round((job.scheduled_at - job.attempted_at).total_seconds(), -1),
        "result": job.result if meta.get("recorded") else None,
    }


#: What each outcome job leaves after its first run, on oban-py and on Conveyor alike.
EXPECTED: dict[str, dict[str, Any]] = {
    "SnoozeOnce": {
        "state": "scheduled",
        "attempt": 0,  # a snooze gives the attempt back
        "meta": {"snoozed": 1, "why": "busy"},  # oban-py's Snooze(meta=...) is merged in
        "errors": 0,
        "wait": 3600,
        "result": None,
    },
    "CancelIt": {"state": "cancelled", "attempt": 1, "meta": {}, "errors": 1, "wait": None, "result": None},
    "RecordIt": {
        "state": "completed",
        "attempt": 1,
        "meta": {"recorded": True},
        "errors": 0,
        "wait": None,
        "result": {"sum": 6, "attempt": 1, "tags": ["mixed"]},
    },
    # The worker's own backoff (1000 s); its own timeout (0.2 s) is an error, retried by default.
    "FailsWithBackoff": {
        "state": "retryable",
        "attempt": 1,
        "meta": {},
        "errors": 1,
        "wait": 1000,
        "result": None,
    },
    "TooSlow": {"state": "retryable", "attempt": 1, "meta": {}, "errors": 1, "wait": 20, "result": None},
    # A function job: keyword args, and oban.current_job() is the running job.
    "multiply": {
        "state": "completed",
        "attempt": 1,
        "meta": {"recorded": True},
        "errors": 0,
        "wait": None,
        "result": {"product": 42, "attempt": 1},
    },
    "snooze_function": {
        "state": "scheduled",
        "attempt": 0,
        "meta": {"snoozed": 1},
        "errors": 0,
        "wait": 120,
        "result": None,
    },
}


async def settled(app: Conveyor, ids: Sequence[int]) -> None:
    """Every job has run once (none waits or runs: snoozed and failed ones wait far out)."""

    async def ran() -> bool:
        jobs = [await app.get_job(job_id) for job_id in ids]
        return all(j is not None and j.state not in (JobState.AVAILABLE, JobState.EXECUTING) for j in jobs)

    await until(ran, "every outcome job to run once")


async def summaries(app: Conveyor, ids: Sequence[int]) -> dict[str, dict[str, Any]]:
    return {name: summary(await app.get_job(job_id)) for name, job_id in zip(OUTCOME_JOBS, ids, strict=True)}


async def assert_error_texts(app: Conveyor, ids: Sequence[int]) -> None:
    cancelled, too_slow = await app.get_job(ids[1]), await app.get_job(ids[4])
    assert cancelled is not None and "not today, ada" in cancelled.errors[0]["error"]
    assert too_slow is not None and "timed out after 0.2s" in too_slow.errors[0]["error"]


async def test_oban_py_workers_run_on_conveyor_as_on_oban_py(dsn: str, prefix: str, tmp_path: Path) -> None:
    async with fleet(dsn, prefix, tmp_path) as mixed:
        ours = await mixed.app.enqueue_many(outcome_requests("on_conveyor"))
        theirs = await mixed.app.enqueue_many(outcome_requests("on_oban"))
        mixed.conveyor = await ConveyorNode.start(dsn, prefix, "conveyor-1", "on_conveyor:10")
        mixed.oban = await ObanNode.start(dsn, prefix, "oban-1", {"on_oban": 10})
        await settled(mixed.app, ours + theirs)
        assert await summaries(mixed.app, ours) == await summaries(mixed.app, theirs) == EXPECTED
        await assert_error_texts(mixed.app, ours)
        await mixed.conveyor.stop()
        await mixed.oban.stop()


async def test_oban_py_workers_run_on_a_conveyor_node_on_sqlite(tmp_path: Path) -> None:
    """The translation is the node's, not the engine's: the same on Conveyor's default engine."""
    path = tmp_path / "mixed.db"
    url = f"sqlite:///{path}"
    app = Conveyor(engine=SqliteEngine(path))
    try:
        await app.install()
        ids = await app.enqueue_many(outcome_requests("on_conveyor"))
        node = await ConveyorNode.start(url, "public", "conveyor-1", "on_conveyor:10")
        try:
            await settled(app, ids)
            assert await summaries(app, ids) == EXPECTED
            await assert_error_texts(app, ids)
        finally:
            await node.stop()
    finally:
        await app.close()
