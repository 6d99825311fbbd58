"""Writing new jobs on SQLite: chunked, atomic, ids in input order, notifications included.

The steps are written once, as a generator that yields statements (``insert_steps``), and run by
three drivers: on the engine's writer connection (inside its ``BEGIN IMMEDIATE`` transaction), on a
caller's ``sqlite3`` connection, and on a caller's ``aiosqlite`` connection (awaiting each step).

* Requests are pulled from the caller's iterable ``INSERT_CHUNK`` at a time and turned into
  values, so memory stays bounded whatever the size of the batch. It all happens on the writer's
  thread: preparing the next chunk on a second thread while SQLite (without the GIL) inserts this
  one was measured slower, since both threads spend most of their time holding the GIL (a generator
  of 100,000 requests: 1.07-1.19 s in one thread, 1.17-1.42 s in two).
* The first job is inserted alone and SQLite picks its id. From then on the transaction holds the
  write lock, so nobody else inserts until it ends; the other jobs are written
  ``ROWS_PER_STATEMENT`` to a statement and take the following ids, in input order. One look at
  ``sqlite_sequence`` at the end confirms the ids were consecutive (else they are read back).
* Each queue that gained available jobs is notified on the "insert" channel in the same
  transaction: a commit publishes the jobs and the notifications together, a rollback neither.
"""

from __future__ import annotations

import functools
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from conveyor.engine import _payloads as payloads
from conveyor.engine._unique_plan import claims_by_insert, resolve_outcomes, unique_plan
from conveyor.engine.sqlite.rows import INSERT_COLUMNS, InsertRows, take_requests
from conveyor.engine.sqlite.schema import FILES
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest, request_stream

#: Jobs per chunk pulled from the caller's iterable and prepared at once.
INSERT_CHUNK = 5_000
#: Jobs per INSERT statement (ten parameters each, far below SQLite's limit of 32,766).
ROWS_PER_STATEMENT = 100

INSERT_FIRST = FILES["insert_first"]
LAST_ID = FILES["insert_last_id"]
IDS = FILES["insert_ids"]
NOTIFY = FILES["notify"]
REPLACE = FILES["replace_jobs"]
UNIQUE_LOOKUP = FILES.compose("unique_lookup", unique_predicate="unique_predicate")
UNIQUE_LOOKUP_ONE = FILES.compose("unique_lookup_one", unique_predicate="unique_predicate")
INSERT_UNIQUE_ONE = FILES.compose(
    "insert_unique_one", unique_key="unique_key", unique_predicate="unique_predicate"
)

#: ("execute", sql, params) expects the fetched rows back; ("executemany", sql, rows) expects None.
Step = tuple[Literal["execute", "executemany"], str, Any]
Steps = Generator[Step, Any, "Inserted"]


@dataclass(frozen=True, slots=True)
class Inserted:
    ids: JobIds
    #: Queues that gained available jobs (notified on "insert").
    queues: list[str]


@functools.cache
def insert_statement(rows: int) -> str:
    """``insert_jobs.sql`` for ``rows`` jobs."""
    group = "(" + ", ".join("?" * INSERT_COLUMNS) + ")"
    return FILES["insert_jobs"].replace("{values}", ", ".join([group] * rows))


def split(requests: Iterable[JobRequest]) -> tuple[list[JobRequest], Iterator[Any]]:
    """The first chunk (checked) and the rest of ``requests``, still lazy."""
    source = request_stream(requests)
    return take_requests(source, INSERT_CHUNK), source


def chunk_requests(first: list[JobRequest], rest: Iterator[Any]) -> Generator[list[JobRequest], None, None]:
    """Each chunk of requests, ``first`` (already taken) and then the rest."""
    batch = first
    while batch:
        yield batch
        if len(batch) < INSERT_CHUNK:
            return
        batch = take_requests(rest, INSERT_CHUNK)


def insert_steps(
    chunks: Iterator[list[JobRequest]], builder: InsertRows, source: str | None, *, notify: bool = True
) -> Steps:
    """The statements of one insert, fed each chunk of requests.

    Unique requests (``JobRequest.unique``) are looked up first, a chunk at a time: one whose key a
    stored job holds, or an earlier request of this insert, is not written and gets that job's id as
    an ``ExistingJobId``. The transaction holds the write lock, so nothing can come between the look
    and the insert; the unique index (v004_unique_jobs.sql) guards writers that do not look.

    ``source`` is written into each notification row: the token of the process that delivers
    the notifications itself after the commit, or None when only the listeners' watchers can.
    ``notify=False`` leaves the rows out (an in-memory database: no other process reads them).
    """
    first_id: int | None = None
    total = 0
    width = INSERT_COLUMNS * ROWS_PER_STATEMENT
    positions = 0  # requests taken so far
    #: The input positions of the requests not written, each with an int (an existing job's id) or
    #: a str (the key of an earlier request of this insert, whose id it shares). Every other
    #: position is a new row, and they took the new ids in order.
    collapsed: dict[int, int | str] = {}
    first_of_key: dict[str, int] = {}  # key -> input position of the request that claimed it
    for batch in chunks:
        if not any(request.unique is not None for request in batch):  # the common case: all new
            values = builder.values(batch)
        else:
            writes, metas = yield from unique_writes(batch, builder, first_of_key, collapsed, positions)
            values = builder.values(writes, metas)
        positions += len(batch)
        if not values:
            continue
        start = 0
        if first_id is None:
            returned = yield ("execute", INSERT_FIRST, values[:INSERT_COLUMNS])
            first_id = int(returned[0][0])
            start = INSERT_COLUMNS
        full_end = start + (len(values) - start) // width * width
        if full_end > start:
            groups = [values[i : i + width] for i in range(start, full_end, width)]
            yield ("executemany", insert_statement(ROWS_PER_STATEMENT), groups)
        if full_end < len(values):
            yield ("execute", insert_statement((len(values) - full_end) // INSERT_COLUMNS), values[full_end:])
        total += len(values) // INSERT_COLUMNS
    new_ids: Sequence[int] = ()
    if first_id is not None and total == 1:
        new_ids = (first_id,)  # RETURNING gave it: nothing to check (one statement fewer an enqueue)
    elif first_id is not None:
        last = yield ("execute", LAST_ID, ())
        if last and last[0][0] == first_id + total - 1:
            new_ids = range(first_id, first_id + total)
        else:  # not consecutive (a trigger inserted rows too?): read them back, in id order
            new_ids = [row[0] for row in (yield ("execute", IDS, (first_id, total)))]
    queues = sorted(builder.available_queues)
    for queue_name in queues if notify else ():
        payload = payloads.encode({"queue": queue_name})
        yield ("execute", NOTIFY, ("insert", payload, source, builder.clock_text))
    return Inserted(resolve_outcomes(positions, collapsed, new_ids, first_of_key), queues)


def write_sync(
    conn: Any,
    first: list[JobRequest],
    rest: Iterator[Any],
    builder: InsertRows,
    source: str | None,
    *,
    notify: bool = True,
    hold: Sequence[int] = (),
) -> Inserted:
    """Insert ``first`` and then ``rest`` on a blocking connection (the engine's writer or a
    caller's ``sqlite3`` connection), inside the transaction it holds: ``insert_one`` for a lone
    request it can write, else the steps."""
    if len(first) == 1 and not hold and (first[0].unique is None or claims_by_insert(first[0].unique)):
        return insert_one(conn, first[0], builder, source, notify=notify)  # split took all there was
    steps = insert_steps(chunk_requests(first, rest), builder, source, notify=notify)
    return run_sync(conn, holding(steps, hold))


def insert_one(
    conn: Any, request: JobRequest, builder: InsertRows, source: str | None, *, notify: bool
) -> Inserted:
    """What ``insert_steps`` does for one plain request, or one unique request whose insert alone
    claims its key (``claims_by_insert``): the call a web request makes, run on a blocking
    connection without the steps' generators, a tenth of the call's time. The
    insert, which returns the id (a unique one's returns nothing when a stored job holds its key,
    which is looked up then), and the queue's notification row when the job is available."""
    unique = request.unique
    if unique is None:
        returned = conn.execute(INSERT_FIRST, builder.values((request,))).fetchall()
    else:
        plan = unique_plan((request,), builder.clock, {}, 0)
        returned = conn.execute(INSERT_UNIQUE_ONE, builder.values((request,), plan.metas)).fetchall()
        if not returned:
            found = conn.execute(UNIQUE_LOOKUP_ONE, (plan.claimed[0],)).fetchall()
            if not found:
                raise RuntimeError(f"the unique index refused key {plan.claimed[0]!r}, which no job holds")
            return Inserted(JobIds.one(int(found[0][1]), existing=True), [])  # nothing written
    queues = sorted(builder.available_queues)
    for queue_name in queues if notify else ():
        payload = payloads.encode({"queue": queue_name})
        conn.execute(NOTIFY, ("insert", payload, source, builder.clock_text))
    return Inserted(JobIds.one(int(returned[0][0])), queues)


def unique_writes(
    batch: list[JobRequest],
    builder: InsertRows,
    first_of_key: dict[str, int],
    collapsed: dict[int, int | str],
    offset: int,
) -> Generator[Step, Any, tuple[list[JobRequest], dict[int, bytes]]]:
    """The requests of a chunk holding unique ones that must be written, and their stored metas.
    The chunk's first request is input position ``offset``; those not written join ``collapsed``
    (see ``insert_steps``). The stored jobs the claimed keys already have are looked up first, and
    replaced where the request says so."""
    plan = unique_plan(batch, builder.clock, first_of_key, offset)
    existing: dict[str, int] = {}
    if plan.claimed:
        if len(plan.claimed) == 1:
            found = yield ("execute", UNIQUE_LOOKUP_ONE, (plan.claimed[0],))
        else:
            found = yield ("execute", UNIQUE_LOOKUP, (orjson.dumps(plan.claimed).decode(),))
        existing = {str(key): int(job_id) for key, job_id in found}
    writes: list[JobRequest] = []
    replacing: list[dict[str, Any]] = []
    for position, (request, key) in enumerate(zip(batch, plan.keys, strict=True), offset):
        if key is None:
            writes.append(request)
        elif key in existing:
            if first_of_key[key] == position and request.unique and request.unique.replace:
                replacing.append(builder.replacement(request, existing[key]))
            collapsed[position] = existing[key]
        elif first_of_key[key] != position:
            collapsed[position] = key
        else:
            writes.append(request)
    if replacing:
        params = {"jobs": orjson.dumps(replacing).decode(), "now": builder.clock_text}
        yield ("execute", REPLACE, params)
    return writes, plan.metas


def holding(steps: Steps, hold: Sequence[int]) -> Steps:
    """``steps``, then the jobs at the positions in ``hold`` held suspended (workflow steps with
    dependencies), in the same transaction."""
    inserted = yield from steps
    if hold:
        ids = orjson.dumps([int(inserted.ids[position]) for position in hold]).decode()
        yield ("execute", FILES["hold_jobs"], {"ids": ids})
    return inserted


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
