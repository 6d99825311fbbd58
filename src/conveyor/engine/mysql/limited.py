"""Claims under fleet-wide limits on MySQL/MariaDB: a global limit (jobs executing at once on all
nodes) and a rate limit (starts per period), each counted per partition when it has one.

Limited claims of one queue take a named lock (``queue_lock.sql``) in a READ COMMITTED transaction,
so they run one after the other and each counts what the previous one committed: the queue's
executing jobs (less those the caller says ended, and those of producers silent past
``dead_after``), the cancelled runs still going on, and the starts in the rate window, each by the
partition key it counts against ('' when the limit is not partitioned; ``partitioned.py`` claims
under partitioned limits).
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from conveyor.engine import _partitions
from conveyor.engine._partitions import KeySyntax, Shape
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.limits import FetchLimits, capped_by

#: Seconds a limited claim waits for the one before it on its queue.
QUEUE_LOCK_TIMEOUT = 30

#: Partition keys on MySQL/MariaDB: the SHA-1 (hex) of a JSON array of the worker and the values
#: under the keys (read through a quoted JSON path, given as a parameter; a missing key, a column
#: that is not an object and a JSON null all read as null). Hashed, so a key of any length fits
#: ``conveyor_queue_starts."partition"`` (255 characters) and compares alike under any collation.
KEYS = KeySyntax(
    read=lambda column, param: f"JSON_EXTRACT({column}, %({param})s)",
    array=lambda items: f"SHA1(JSON_ARRAY({', '.join(items)}))",
    param=lambda key: f'$."{key}"',
)


@dataclass(frozen=True, slots=True)
class LimitedClaim:
    """One claim under fleet-wide limits: what ``fetch_jobs`` was asked, ``clock`` as naive UTC."""

    queue: str
    demand: int
    node: str
    producer: str
    clock: datetime
    limits: FetchLimits
    ended: Sequence[tuple[int, int]]
    dead_after: float | None


@functools.lru_cache(maxsize=256)
def statement(files: SqlFiles, name: str, shapes: tuple[Shape, Shape], **parts: str) -> str:
    """File ``name`` (with ``parts`` composed in) with the partition keys of ``shapes`` filled in."""
    return _partitions.render(files.compose(name, **parts), KEYS, shapes)


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
    claim: LimitedClaim,
    shape: Shape = None,
    keys: Mapping[str, Any] | None = None,
) -> Counter[str]:
    """The slots of the global limit taken, by partition key (of ``shape``, whose key names are
    ``keys``): executing jobs still running, and cancelled runs that go on."""
    dead: set[str] = set()
    if claim.dead_after is not None:
        dead_before = claim.clock - timedelta(seconds=claim.dead_after)
        await cursor.execute(files["limited_dead"], {"dead_before": dead_before, "producer": claim.producer})
        dead = {row[0] for row in await cursor.fetchall()}
    over = {(int(i), int(a)) for i, a in claim.ended}
    params = {"queue": claim.queue, **(keys or {})}
    await cursor.execute(statement(files, "limited_running", (shape, None)), params)
    taken = Counter(
        key
        for job_id, attempt, owner, key in await cursor.fetchall()
        if (int(job_id), attempt) not in over and owner not in dead
    )
    await cursor.execute(statement(files, "limited_stopping", (shape, None)), params)
    for key, count in await cursor.fetchall():
        taken[key] += int(count)
    return taken


async def started(cursor: Any, files: SqlFiles, claim: LimitedClaim, period: float) -> Counter[str]:
    """The starts in the rate window, by partition key ('' for an unpartitioned limit's)."""
    window_start = claim.clock - timedelta(seconds=period)
    await cursor.execute(files["limited_started"], {"queue": claim.queue, "window_start": window_start})
    return Counter({key: int(count) for key, count in await cursor.fetchall()})


async def record_starts(
    cursor: Any, files: SqlFiles, claim: LimitedClaim, counts: Mapping[str, int], period: float
) -> None:
    """Record a claim's starts (``counts``: by partition key) and forget the rows past any window."""
    rows = [(claim.queue, key, claim.clock, count) for key, count in sorted(counts.items()) if count]
    if rows:
        await cursor.executemany(files["limited_record"], rows)
    forget_before = claim.clock - timedelta(seconds=2 * period + 60)
    await cursor.execute(files["limited_forget"], {"queue": claim.queue, "forget_before": forget_before})


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
