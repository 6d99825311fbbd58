"""What the MySQL/MariaDB engine's statements by id must do on a table of any size: lock the rows
they name and no other. On a small table the optimizer reads ``WHERE id IN (...)`` by a full scan,
which under REPEATABLE READ locks every row it reads until the transaction ends: a claim meanwhile
skips those rows (``SKIP LOCKED``) and comes back empty, and a statement that meets a row another
transaction holds waits for it. Each case runs on a table of fifty jobs: 30 available in queue
``other`` (the lower ids), 20 in ``default`` that an operation works on. Also: what an ack batch
writes over ``errors`` another client filled with something other than a list.

The behaviour every engine shares (each ack's outcome, alone or in a batch) is in
tests/conformance/engine/test_hot_path_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import orjson
import pytest

from conveyor import JobFilter, JobState
from conveyor.acks import Ack
from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.ack_writes import json_arrays
from tests.conformance import mariadb
from tests.conformance.contract import ERROR, NODE, PRODUCER, T0, fetch, req
from tests.helpers import poll

pytestmark = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or "")

OTHERS = 30
JOBS = 20
LATER = T0 + timedelta(hours=1)


@pytest.fixture
async def engine() -> AsyncIterator[MysqlEngine]:
    async with mariadb.installed() as engine:
        yield engine


async def claimed(engine: MysqlEngine, ids: list[int]) -> None:
    assert sorted(await fetch(engine, demand=JOBS)) == ids


async def completed(engine: MysqlEngine, ids: list[int]) -> None:
    await claimed(engine, ids)
    assert sorted(await engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids], now=T0)) == ids


def mixed_acks(ids: list[int]) -> list[Ack]:
    """Both statements of an ack batch: plain completions, and acks with errors, meta, schedules."""
    kinds = [
        {"state": JobState.COMPLETED},
        {"state": JobState.RETRYABLE, "schedule_in": 30, "error": ERROR},
        {"state": JobState.COMPLETED, "meta": {"recorded": True}},
        {"state": JobState.SCHEDULED, "schedule_in": 5, "snoozed": True},
    ]
    return [Ack(job_id, 1, **kinds[n % len(kinds)]) for n, job_id in enumerate(ids)]


def _ids(result: Any) -> list[int]:
    return sorted(int(i) for i in result)


#: Per operation: what brings the 20 ``default`` jobs to where it applies, and the operation, which
#: returns the ids it changed.
Prepare = Callable[[MysqlEngine, list[int]], Awaitable[None]]
Run = Callable[[MysqlEngine, list[int]], Awaitable[list[int]]]


async def _nothing(engine: MysqlEngine, ids: list[int]) -> None:
    return None


async def _claim(engine: MysqlEngine, ids: list[int]) -> list[int]:
    return sorted(await fetch(engine, demand=JOBS))


async def _ack(engine: MysqlEngine, ids: list[int]) -> list[int]:
    return _ids(await engine.ack_jobs(mixed_acks(ids), now=T0))


async def _release(engine: MysqlEngine, ids: list[int]) -> list[int]:
    return _ids(await engine.release_jobs([(i, 1) for i in ids]))


async def _cancel(engine: MysqlEngine, ids: list[int]) -> list[int]:
    return _ids(await engine.cancel_jobs(JobFilter(ids=ids), now=T0))


async def _retry(engine: MysqlEngine, ids: list[int]) -> list[int]:
    return _ids(await engine.retry_jobs(JobFilter(ids=ids), now=T0))


async def _delete(engine: MysqlEngine, ids: list[int]) -> list[int]:
    return _ids(await engine.delete_jobs(JobFilter(ids=ids)))


async def _stage(engine: MysqlEngine, ids: list[int]) -> list[int]:
    assert await engine.stage_jobs(100, now=LATER) == {"default": JOBS}
    return ids


async def _rescue(engine: MysqlEngine, ids: list[int]) -> list[int]:
    rescued = await engine.rescue_jobs(timeout=60, backstop=60, now=LATER)
    return list(rescued.available)


OPERATIONS: dict[str, tuple[Prepare, Run]] = {
    "claim": (_nothing, _claim),
    "ack": (claimed, _ack),
    "release": (claimed, _release),
    "cancel": (claimed, _cancel),
    "retry": (completed, _retry),
    "delete": (completed, _delete),
    "stage": (_nothing, _stage),
    "rescue": (claimed, _rescue),
}
#: The operations that write a notification after their other statements (a claim and a delete
#: notify nothing).
NOTIFYING = ("ack", "release", "cancel", "retry", "stage", "rescue")


async def prepared(engine: MysqlEngine, operation: str) -> tuple[list[int], list[int]]:
    """The ``other`` jobs and the ``default`` ones, brought to where ``operation`` applies."""
    others = await engine.insert([req(queue="other") for _ in range(OTHERS)], now=T0)
    scheduled = operation == "stage"
    ids = await engine.insert([req(schedule_in=60 if scheduled else None) for _ in range(JOBS)], now=T0)
    await OPERATIONS[operation][0](engine, sorted(ids))
    return sorted(others), sorted(ids)


class Blocker:
    """Another client's transaction, holding locks an operation may meet."""

    def __init__(self, engine: MysqlEngine, conn: Any) -> None:
        self.engine = engine
        self.conn = conn
        self.table = f"`{engine.database}`"

    async def execute(self, statement: str, params: Any = None) -> list[Any]:
        async with self.conn.cursor() as cursor:
            await cursor.execute(statement, params)
            return list(await cursor.fetchall())

    async def hold_job(self, job_id: int) -> None:
        await self.execute(f"SELECT id FROM {self.table}.oban_jobs WHERE id = %s FOR UPDATE", (job_id,))

    async def hold_notifications(self) -> None:
        """Lock the gap above the last notification: the next notification written waits."""
        ((last,),) = await self.execute(
            f"SELECT COALESCE(MAX(id), 0) FROM {self.table}.conveyor_notifications"
        )
        await self.execute(
            f"SELECT id FROM {self.table}.conveyor_notifications WHERE id > %s FOR UPDATE", (last,)
        )

    async def someone_waits(self) -> bool:
        """Whether a transaction (the engine's) waits for a lock this one holds."""
        rows = await self.execute(
            "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS AS w"
            " JOIN information_schema.INNODB_TRX AS t ON t.trx_id = w.blocking_trx_id"
            " WHERE t.trx_mysql_thread_id = CONNECTION_ID()"
        )
        return bool(rows[0][0])


@pytest.fixture
async def blocker(engine: MysqlEngine) -> AsyncIterator[Blocker]:
    conn = await mariadb.caller(engine)
    try:
        yield Blocker(engine, conn)
    finally:
        await conn.rollback()
        await conn.close()


async def finished_or_waiting(task: asyncio.Task[list[int]], blocker: Blocker) -> bool:
    """Whether ``task`` ended before any of the engine's transactions waited for a lock."""
    done = await poll(
        lambda: _state(task, blocker),
        lambda state: state != "running",
        timeout=60,
        # InnoDB refreshes the lock tables of information_schema only once they were not read for
        # 0.1 s: read more often, they never show the wait.
        every=0.25,
        what="the operation to end or to wait for a lock",
    )
    return done == "done"


async def _state(task: asyncio.Task[list[int]], blocker: Blocker) -> str:
    if task.done():
        return "done"
    return "waiting" if await blocker.someone_waits() else "running"


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
async def test_an_operation_never_waits_for_a_job_it_does_not_name(
    engine: MysqlEngine, blocker: Blocker, operation: str
) -> None:
    """Another transaction holds an available job of queue ``other``: an operation on the
    ``default`` jobs ends without waiting for it (a scan would meet it, and wait)."""
    others, ids = await prepared(engine, operation)
    await blocker.hold_job(others[OTHERS // 2])
    task = asyncio.create_task(OPERATIONS[operation][1](engine, ids))
    try:
        assert await finished_or_waiting(task, blocker), f"{operation} waited for a job it does not name"
        assert await task == ids
    finally:
        await blocker.conn.rollback()
        await asyncio.wait([task])


@pytest.mark.parametrize("operation", NOTIFYING)
async def test_a_claim_during_an_operation_gets_every_other_available_job(
    engine: MysqlEngine, blocker: Blocker, operation: str
) -> None:
    """An operation on the ``default`` jobs, held in its transaction at its last statement (its
    notification): a claim of queue ``other`` meanwhile gets all 30 of its jobs, none of them locked
    by the operation, which then ends as it would have."""
    others, ids = await prepared(engine, operation)
    await blocker.hold_notifications()
    task = asyncio.create_task(OPERATIONS[operation][1](engine, ids))
    try:
        assert not await finished_or_waiting(task, blocker), f"{operation} wrote no notification"
        got = await engine.fetch_jobs("other", OTHERS, node=NODE, producer=PRODUCER, now=T0)
        assert sorted(job.id for job in got) == others
    finally:
        await blocker.conn.rollback()
        await asyncio.wait([task])
    assert await task == ids


@pytest.mark.parametrize("junk", ['{"a": 1}', '"text"', "7", "null"])
async def test_errors_that_are_not_a_list_start_afresh_and_a_plain_completion_leaves_them(
    engine: MysqlEngine, blocker: Blocker, junk: str
) -> None:
    """In one batch: an ack with an error over junk ``errors`` writes a list of that error; a plain
    completion over the same junk leaves it as it was; neither fails the batch."""
    _, ids = await prepared(engine, "ack")
    failed, done = ids[:2]
    table = f"{blocker.table}.oban_jobs"
    await blocker.execute(f"UPDATE {table} SET errors = %s WHERE id IN %s", (junk, (failed, done)))
    await blocker.conn.commit()
    acks = [Ack(failed, 1, JobState.RETRYABLE, schedule_in=30, error=ERROR), Ack(done, 1, JobState.COMPLETED)]
    assert sorted(await engine.ack_jobs(acks, now=T0)) == [failed, done]
    rows = await blocker.execute(
        f"SELECT id, state, errors FROM {table} WHERE id IN %s ORDER BY id", ((failed, done),)
    )
    assert [(int(i), s, orjson.loads(e)) for i, s, e in rows] == [
        (failed, "retryable", [ERROR]),
        (done, "completed", orjson.loads(junk)),
    ]


async def test_a_batch_of_errors_past_the_servers_packet_size_is_written_in_parts(
    engine: MysqlEngine, blocker: Blocker
) -> None:
    """Twenty errors of a megabyte each (20 MB, past MariaDB's default max_allowed_packet of 16 MB)
    in one batch: each job gets its own."""
    ((packet,),) = await blocker.execute("SELECT @@max_allowed_packet")
    _, ids = await prepared(engine, "ack")
    text = "é" * 500_000  # a megabyte in UTF-8
    assert len(ids) * len(text.encode()) > packet
    acks = [Ack(i, 1, JobState.DISCARDED, error={**ERROR, "error": f"{i}{text}"}) for i in ids]
    assert sorted(await engine.ack_jobs(acks, now=T0)) == ids
    read = (
        f"SELECT id, state, JSON_LENGTH(errors), LEFT(JSON_VALUE(errors, '$[0].error'), 2),"
        f" CHAR_LENGTH(JSON_VALUE(errors, '$[0].error')) FROM {blocker.table}.oban_jobs WHERE id IN %s"
    )
    rows = await blocker.execute(read, (tuple(ids),))
    assert sorted((int(r[0]), r[1], r[2], r[3], r[4]) for r in rows) == [
        (i, "discarded", 1, str(i)[:2], len(str(i)) + len(text)) for i in ids
    ]


@pytest.mark.parametrize("limit", [2, 10, 40, 1000])
def test_rows_go_in_arrays_of_at_most_the_limit_unless_one_is_longer(limit: int) -> None:
    rows = [[n, "x" * (n % 7), None] for n in range(25)]
    arrays = list(json_arrays(rows, limit))
    assert [row for array in arrays for row in orjson.loads(array)] == rows
    assert all(len(a.encode()) <= limit or len(orjson.loads(a)) == 1 for a in arrays)
    assert list(json_arrays([], limit)) == []
