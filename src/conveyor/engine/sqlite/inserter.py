"""Writing new jobs on SQLite: chunked, atomic, ids in input order, notifications included.

The steps are written once, as a generator that yields statements (``insert_steps``), and run by
three drivers: on the engine's writer connection (inside its ``BEGIN IMMEDIATE`` transaction), on a
caller's ``sqlite3`` connection, and on a caller's ``aiosqlite`` connection (awaiting each step).

The first job is inserted alone and SQLite picks its id; from then on the transaction holds the
write lock, so nobody else can insert and the remaining jobs take the following ids explicitly,
written with ``executemany`` a chunk of ``INSERT_CHUNK`` at a time. Requests are pulled from the
caller's iterable a chunk at a time too, so memory stays bounded whatever the size of the batch.
At the end, each queue that gained available jobs is notified on the "insert" channel in the same
transaction: a commit publishes the jobs and the notifications together, a rollback neither.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from conveyor.engine import payloads
from conveyor.engine.sqlite.rows import InsertRows, take_requests, time_text, utc_clock
from conveyor.engine.sqlite.schema import FILES
from conveyor.request import JobRequest

#: Jobs per ``executemany`` (and per chunk pulled from the caller's iterable).
INSERT_CHUNK = 5_000

INSERT_FIRST = FILES["insert_first"]
INSERT_JOB = FILES["insert_job"]
NOTIFY = FILES["notify"]

#: ("execute", sql, params) expects the fetched rows back; ("executemany", sql, rows) expects None.
Step = tuple[Literal["execute", "executemany"], str, Any]
Steps = Generator[Step, Any, "Inserted"]


@dataclass(frozen=True, slots=True)
class Inserted:
    ids: list[int]
    #: Queues that gained available jobs (notified on "insert").
    queues: list[str]
    #: The insert clock as stored text (notification rows are stamped with it).
    created: str


def insert_steps(
    first: list[JobRequest],
    rest: Iterator[Any],
    now: datetime | None,
    source: str | None,
    *,
    notify: bool = True,
) -> Steps:
    """The statements of one insert; ``first`` is the first chunk, already taken and checked.

    ``source`` is written into each notification row: the token of the process that delivers
    the notifications itself after the commit, or None when only the listeners' watchers can.
    ``notify=False`` leaves the rows out (an in-memory database: no other process reads them).
    """
    clock = utc_clock(now)
    builder = InsertRows(clock)
    ids: list[int] = []
    if not first:
        return Inserted(ids, [], builder.clock_text)
    (head,) = builder.rows(first[:1], None)
    returned = yield ("execute", INSERT_FIRST, head[1:])
    next_id = int(returned[0][0])
    ids.append(next_id)
    batch = first[1:]
    while True:
        if batch:
            next_id += 1
            yield ("executemany", INSERT_JOB, builder.rows(batch, next_id))
            ids.extend(range(next_id, next_id + len(batch)))
            next_id += len(batch) - 1
        batch = take_requests(rest, INSERT_CHUNK)
        if not batch:
            break
    queues = sorted(builder.available_queues)
    created = time_text(clock)
    for queue in queues if notify else ():
        yield ("execute", NOTIFY, ("insert", payloads.encode({"queue": queue}), source, created))
    return Inserted(ids, queues, created)


def split(requests: Iterable[JobRequest]) -> tuple[list[JobRequest], Iterator[Any]]:
    """The first chunk (checked) and the rest of ``requests``, still lazy."""
    source = iter(requests)
    return take_requests(source, INSERT_CHUNK), source


def run_sync(conn: Any, steps: Steps) -> Inserted:
    """Run the steps on a blocking ``sqlite3`` connection (ours or a caller's)."""
    result: Any = None
    while True:
        try:
            kind, statement, params = steps.send(result)
        except StopIteration as stop:
            inserted: Inserted = stop.value
            return inserted
        if kind == "execute":
            result = conn.execute(statement, params).fetchall()
        else:
            conn.executemany(statement, params)
            result = None


async def run_async(conn: Any, steps: Steps) -> Inserted:
    """Run the steps on an ``aiosqlite`` connection."""
    result: Any = None
    while True:
        try:
            kind, statement, params = steps.send(result)
        except StopIteration as stop:
            inserted: Inserted = stop.value
            return inserted
        if kind == "execute":
            cursor = await conn.execute(statement, params)
            result = await cursor.fetchall()
            await cursor.close()
        else:
            await conn.executemany(statement, params)
            result = None
