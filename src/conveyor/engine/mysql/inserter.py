"""Writing new jobs on MySQL/MariaDB: chunked, atomic, ids in input order, notifications included.

* Requests are pulled from the caller's iterable ``INSERT_CHUNK`` at a time, so memory stays bounded.
* Each multi-row INSERT takes consecutive ids in row order (``innodb_autoinc_lock_mode`` 0 or 1):
  the statement's first id (``lastrowid``) and its row count give them all without reading them
  back. Under mode 2 (MySQL 8's default) concurrent inserts may interleave ids, so the engine writes
  one row a statement there (``rows_per_statement``).
* Unique requests (``engine/_unique_plan.py``) are looked up with a locking read that also locks
  the gap of a key nobody holds (``unique_lookup.sql``), so two inserts of one key serialise; the
  UNIQUE index over ``conveyor_uniq_key`` guards writers that do not look.
* Each queue that gained available jobs is notified in the same transaction.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine._unique_plan import resolve_outcomes, unique_plan
from conveyor.engine.mysql import fanout
from conveyor.engine.mysql.replacing import replace_jobs
from conveyor.engine.mysql.rows import INSERT_COLUMNS, InsertRows, take_requests
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest, request_stream

#: Jobs per chunk pulled from the caller's iterable and prepared at once.
INSERT_CHUNK = 5_000
#: Jobs per INSERT statement (ten parameters each).
ROWS_PER_STATEMENT = 500


@dataclass(frozen=True, slots=True)
class Inserted:
    ids: JobIds
    #: Queues that gained available jobs (notified on "insert").
    queues: list[str]


@functools.cache
def _statement(files: SqlFiles, rows: int) -> str:
    group = "(" + ", ".join(["%s"] * INSERT_COLUMNS) + ")"
    return files["insert_jobs"].replace("{values}", ", ".join([group] * rows))


def split(requests: Iterable[JobRequest]) -> tuple[list[JobRequest], Iterator[Any]]:
    """The first chunk (checked) and the rest of ``requests``, still lazy."""
    source = request_stream(requests)
    return take_requests(source, INSERT_CHUNK), source


def chunks(first: list[JobRequest], rest: Iterator[Any]) -> Iterator[list[JobRequest]]:
    batch = first
    while batch:
        yield batch
        if len(batch) < INSERT_CHUNK:
            return
        batch = take_requests(rest, INSERT_CHUNK)


async def insert(
    cursor: Any,
    files: SqlFiles,
    batches: Iterator[list[JobRequest]],
    builder: InsertRows,
    *,
    rows_per_statement: int = ROWS_PER_STATEMENT,
    hold: Sequence[int] = (),
    taken: list[str] | None = None,
) -> Inserted:
    """Insert every batch on ``cursor`` (in its transaction), then hold the positions ``hold``
    (workflow steps with dependencies) and notify the queues that gained available jobs. The
    names of the unique keys' named locks it takes join ``taken`` (for ``unlock_keys``)."""
    new_ids: list[range] = []
    positions = 0
    #: Input positions not written: an int (a stored job's id) or a str (the key of an earlier
    #: request of this insert, whose id it shares).
    collapsed: dict[int, int | str] = {}
    first_of_key: dict[str, int] = {}
    for batch in batches:
        if not any(request.unique is not None for request in batch):
            values = builder.values(batch)
        else:
            writes, metas = await _unique_writes(
                cursor, files, batch, builder, first_of_key, collapsed, positions, taken
            )
            values = builder.values(writes, metas)
        positions += len(batch)
        width = INSERT_COLUMNS * rows_per_statement
        for start in range(0, len(values), width):
            part = values[start : start + width]
            await cursor.execute(_statement(files, len(part) // INSERT_COLUMNS), part)
            first = int(cursor.lastrowid)
            new_ids.append(range(first, first + len(part) // INSERT_COLUMNS))
    ids = resolve_outcomes(positions, collapsed, itertools.chain.from_iterable(new_ids), first_of_key)
    if hold:
        await cursor.execute(files["hold_jobs"], (tuple(int(ids[position]) for position in hold),))
    queues = sorted(builder.available_queues)
    for queue in queues:
        await fanout.notify(cursor, files, "insert", {"queue": queue})
    return Inserted(ids, queues)


#: Seconds an insert waits for another insert holding one of its unique keys.
KEY_LOCK_TIMEOUT = 30


async def _each_lock(cursor: Any, files: SqlFiles, name: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
    """What the function call of ``<name>_key.sql`` returns for each of ``args``, called in one
    statement (``<name>_keys.sql``) per hundred."""
    call = files[f"{name}_key"].strip()
    results: list[Any] = []
    for start in range(0, len(args), 100):
        part = args[start : start + 100]
        statement = files[f"{name}_keys"].replace("{calls}", ", ".join([call] * len(part)))
        await cursor.execute(statement, [value for values in part for value in values])
        (row,) = await cursor.fetchall()
        results.extend(row)
    return results


async def _lock_keys(cursor: Any, files: SqlFiles, keys: Sequence[str], taken: list[str] | None) -> None:
    """Take a named lock per unique key (hashed with the database into MySQL's 64 characters), in
    sorted order, so inserts sharing keys run one after the other and never deadlock; released
    when the transaction ends (``connect.transaction(keyed=True)``), or on a caller's session by
    ``unlock_keys`` (the names taken join ``taken``)."""
    names = sorted({"conveyor:" + hashlib.sha1(f"{files.prefix}:{key}".encode()).hexdigest() for key in keys})
    results = await _each_lock(cursor, files, "lock", [(name, KEY_LOCK_TIMEOUT) for name in names])
    if taken is not None:
        taken.extend(name for name, result in zip(names, results, strict=True) if result == 1)
    if not all(result == 1 for result in results):
        raise TimeoutError(f"another insert held a unique key for {KEY_LOCK_TIMEOUT} s")


async def unlock_keys(cursor: Any, files: SqlFiles, taken: Sequence[str]) -> None:
    """Let go of the unique keys' named locks an insert took on a caller's session, one release
    per lock taken: the session's other named locks (the application's own) stay held."""
    await _each_lock(cursor, files, "unlock", [(name,) for name in taken])


async def _unique_writes(
    cursor: Any,
    files: SqlFiles,
    batch: list[JobRequest],
    builder: InsertRows,
    first_of_key: dict[str, int],
    collapsed: dict[int, int | str],
    offset: int,
    taken: list[str] | None,
) -> tuple[list[JobRequest], dict[int, bytes]]:
    """The requests of a chunk holding unique ones that must be written, and their stored metas;
    those not written join ``collapsed``."""
    plan = unique_plan(batch, builder.clock, first_of_key, offset)
    existing: dict[str, int] = {}
    if plan.claimed:
        await _lock_keys(cursor, files, plan.claimed, taken)
        await cursor.execute(files["unique_lookup"], (tuple(plan.claimed),))
        existing = {str(key): int(job_id) for key, job_id in await cursor.fetchall()}
    writes: list[JobRequest] = []
    replacements: list[tuple[JobRequest, int]] = []
    for position, (request, key) in enumerate(zip(batch, plan.keys, strict=True), offset):
        if key is None:
            writes.append(request)
        elif key in existing:
            if first_of_key[key] == position and request.unique and request.unique.replace:
                replacements.append((request, existing[key]))
            collapsed[position] = existing[key]
        elif first_of_key[key] != position:
            collapsed[position] = key
        else:
            writes.append(request)
    builder.available_queues.update(await replace_jobs(cursor, files, builder.clock, replacements))
    return writes, plan.metas
