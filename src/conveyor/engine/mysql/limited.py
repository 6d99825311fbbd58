"""Claims under fleet-wide limits on MySQL/MariaDB: a global limit (jobs executing at once on all
nodes) and a rate limit (starts per period), unpartitioned.

Limited claims of one queue take a named lock (``queue_lock.sql``) in a READ COMMITTED transaction,
so they run one after the other and each counts what the previous one committed: the queue's
executing jobs (less those the caller says ended, and those of producers silent past
``dead_after``), the cancelled runs still going on, and the starts in the rate window. Partitioned
limits are pending.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from conveyor.engine._sqlfiles import SqlFiles
from conveyor.limits import FetchLimits, capped_by

#: Seconds a limited claim waits for the one before it on its queue.
QUEUE_LOCK_TIMEOUT = 30


def lock_name(files: SqlFiles, queue: str) -> str:
    return "conveyor:queue:" + hashlib.sha1(f"{files.prefix}:{queue}".encode()).hexdigest()


async def lock_queue(cursor: Any, files: SqlFiles, queue: str) -> None:
    await cursor.execute(files["queue_lock"], (lock_name(files, queue), QUEUE_LOCK_TIMEOUT))
    (row,) = await cursor.fetchall()
    if row[0] != 1:
        raise TimeoutError(f"another claim held queue {queue!r}'s limits for {QUEUE_LOCK_TIMEOUT} s")


async def running(
    cursor: Any,
    files: SqlFiles,
    queue: str,
    *,
    producer: str,
    clock: datetime,
    ended: Sequence[tuple[int, int]],
    dead_after: float | None,
) -> int:
    """The slots of the global limit taken: executing jobs still running, and cancelled runs that go on."""
    dead: set[str] = set()
    if dead_after is not None:
        params = {"dead_before": clock - timedelta(seconds=dead_after), "producer": producer}
        await cursor.execute(files["limited_dead"], params)
        dead = {row[0] for row in await cursor.fetchall()}
    over = {(int(i), int(a)) for i, a in ended}
    await cursor.execute(files["limited_running"], {"queue": queue})
    count = sum(
        1
        for job_id, attempt, owner in await cursor.fetchall()
        if (int(job_id), attempt) not in over and owner not in dead
    )
    await cursor.execute(files["limited_stopping"], {"queue": queue})
    (row,) = await cursor.fetchall()
    return count + int(row[0])


async def started(cursor: Any, files: SqlFiles, queue: str, window_start: datetime) -> int:
    await cursor.execute(files["limited_started"], {"queue": queue, "window_start": window_start})
    (row,) = await cursor.fetchall()
    return int(row[0])


async def record_starts(
    cursor: Any, files: SqlFiles, queue: str, clock: datetime, count: int, period: float
) -> None:
    if count:
        await cursor.execute(files["limited_record"], {"queue": queue, "now": clock, "started": count})
    forget_before = clock - timedelta(seconds=2 * period + 60)
    await cursor.execute(files["limited_forget"], {"queue": queue, "forget_before": forget_before})


def allowed(limits: FetchLimits, demand: int, taken: int | None, starts: int | None) -> int:
    """The demand the limits leave."""
    if limits.global_limit is not None and taken is not None:
        demand = min(demand, limits.global_limit.allowed - taken)
    if limits.rate is not None and starts is not None:
        demand = min(demand, limits.rate.allowed - starts)
    return max(demand, 0)


def capped(limits: FetchLimits, taken: int | None, starts: int | None, claimed: int) -> bool:
    return capped_by(
        limits, None if taken is None else taken + claimed, None if starts is None else starts + claimed
    )
