"""Converting between Python values and ``oban_jobs`` rows (naive UTC timestamps, JSON, arrays)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg import pq
from psycopg.adapt import Transformer

from conveyor._options import check_aware
from conveyor.engine._salvage import COLUMNS, UNREAD, describe, salvage_job
from conveyor.errors import ValidationError
from conveyor.job import Job, JobState, stored_job
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest


def aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None else None


def naive_utc(value: datetime | None) -> datetime | None:
    """An aware datetime as the naive UTC value ``oban_jobs`` stores; None stays None."""
    if value is None:
        return None
    # A naive value would be read as local time: refuse it, as scheduled_at does.
    check_aware("now", value)
    return value.astimezone(UTC).replace(tzinfo=None)


#: The enum labels as ``JobState`` members: a dict lookup is several times cheaper than ``JobState(x)``.
_STATES = {state.value: state for state in JobState}


def job_from_row(row: Sequence[Any]) -> Job:
    """A ``Job`` from a row in ``job_columns.sql`` order.

    This runs for every fetched job, so it does as little as it can: ``job_columns.sql`` returns the
    times as ``timestamptz`` (UTC sessions get them from psycopg's C loader already aware, far cheaper
    than a ``replace(tzinfo=...)`` each), and the fields go positionally, in ``Job``'s field order.

    ``errors`` arrives as a list of dicts either way: psycopg loads a JSON array (oban-py's ``jsonb``
    column) and a ``jsonb[]`` (Elixir Oban's) alike. In a table Elixir Oban created, ``tags``,
    ``attempted_by`` and ``meta`` are nullable (rows it inserted have no ``attempted_by`` until a
    fetch), so NULL reads as empty.
    """
    (
        job_id,
        state,
        queue,
        worker,
        args,
        meta,
        tags,
        errors,
        attempt,
        max_attempts,
        priority,
        attempted_by,
        inserted_at,
        scheduled_at,
        attempted_at,
        cancelled_at,
        completed_at,
        discarded_at,
    ) = row
    # Shapes another client may have broken; salvage_rows then reads the rows one by one.
    if type(args) is not dict or (meta is not None and type(meta) is not dict) or type(errors) is not list:
        raise Unfit(job_id)
    if errors and not all(type(e) is dict for e in errors):
        raise Unfit(job_id)
    return stored_job(
        job_id,
        _STATES[state],
        queue,
        worker,
        args,
        meta if meta is not None else {},
        tuple(tags) if tags is not None else (),
        tuple(errors),
        attempt,
        max_attempts,
        priority,
        tuple(attempted_by) if attempted_by is not None else (),
        inserted_at,
        scheduled_at,
        attempted_at,
        cancelled_at,
        completed_at,
        discarded_at,
    )


class Unfit(ValueError):
    """A row the fast path cannot take as it is (see ``read_jobs``)."""


def read_jobs(rows: Sequence[Sequence[Any]]) -> list[Job]:
    """The jobs of loaded rows; raises when any row needs ``salvage_rows``."""
    return [job_from_row(row) for row in rows]


def salvage_rows(cur: psycopg.AsyncCursor[Any]) -> list[Job]:
    """Every row of ``cur``'s result, decoded column by column (see ``conveyor.engine._salvage``).

    Runs only after the fast path failed on some row: psycopg loads a whole result at once, so one
    unloadable value (a ``1e400`` in args, an ``infinity`` timestamp) would otherwise lose them all.
    """
    result = cur.pgresult
    if result is None or cur.description is None:
        return []
    transformer = Transformer.from_context(cur)
    # The job's columns: a claim under limits adds one after them (``read_claim``).
    loaders = [
        transformer.get_loader(column.type_code, pq.Format(result.fformat(index)))
        for index, column in enumerate(cur.description[: len(COLUMNS)])
    ]
    jobs = []
    for row in range(result.ntuples):
        values: list[Any] = []
        problems: dict[str, str] = {}
        for index, loader in enumerate(loaders):
            raw = result.get_value(row, index)
            try:
                values.append(None if raw is None else loader.load(raw))
            except Exception as exc:
                values.append(UNREAD)
                problems[COLUMNS[index]] = describe(exc)
        if not problems:
            try:
                jobs.append(job_from_row(values))
                continue
            except Exception:  # a shape or a state the fast path refuses: salvage_job names it
                pass
        jobs.append(salvage_job(values, problems))
    return jobs


def last_value(cur: psycopg.AsyncCursor[Any]) -> Any:
    """The last column of the result's first row, loaded alone (a claim's flag beside its jobs,
    when they needed ``salvage_rows``); None without one."""
    result = cur.pgresult
    if result is None or not result.ntuples or not result.nfields:
        return None
    column = result.nfields - 1
    raw = result.get_value(0, column)
    if raw is None:
        return None
    loader = Transformer.from_context(cur).get_loader(result.ftype(column), pq.Format(result.fformat(column)))
    return loader.load(raw)


async def read_result(cur: psycopg.AsyncCursor[Any]) -> list[Job]:
    """The jobs of a statement's result. A row that cannot be decoded as it is comes back with
    ``Job.unreadable`` set (``salvage_rows``) instead of failing the rows around it."""
    try:
        return read_jobs(await cur.fetchall())
    except Exception:
        return salvage_rows(cur)


async def read_claim(cur: psycopg.AsyncCursor[Any]) -> tuple[list[Job], Any]:
    """The jobs of a claim whose rows end with one more column, the same on every row, and its
    value: such a claim returns one row without a job (its id NULL) when it claimed nothing."""
    try:
        rows = await cur.fetchall()
        if not rows:
            return [], None
        if rows[0][0] is None:
            return [], rows[0][-1]
        return read_jobs([row[:-1] for row in rows]), rows[0][-1]
    except Exception:
        return salvage_rows(cur), last_value(cur)


def request_record(request: JobRequest, meta: bytes | None = None) -> dict[str, Any]:
    """One element of the JSON array that ``insert_jobs.sql`` reads with ``jsonb_to_recordset``;
    ``meta`` replaces the request's (a unique job's, with its markers)."""
    return {
        "worker": request.worker,
        "queue": request.queue,
        # Already encoded during validation: embed the bytes instead of encoding twice.
        "args": orjson.Fragment(request.args_json),
        "meta": orjson.Fragment(request.meta_json if meta is None else meta),
        "tags": request.tags,
        "priority": request.priority,
        "max_attempts": request.max_attempts,
        "scheduled_at": request.scheduled_at_utc,
        "schedule_in": request.schedule_in,
    }


def one_job_params(request: JobRequest) -> dict[str, Any]:
    """The values of one job as the statements for a single job take them (``insert_one_job.sql``
    and its kin): parameters, not a JSON array to unpack. Sent by psycopg only (``Inserter``'s
    single-job path, never through asyncpg: see ``text_array``)."""
    return {
        "worker": request.worker,
        "queue": request.queue,
        "args": request.args_json.decode(),  # text: bytes would be sent as bytea
        "meta": request.meta_json.decode(),
        "tags": text_array(request.tags),
        "priority": request.priority,
        "max_attempts": request.max_attempts,
    }


def text_array(values: Sequence[str]) -> str:
    """Strings as an array literal, cast by the statement (``'{"a","b"}'::text[]``): a third of
    the cost of a list, which psycopg adapts item by item (each one quoted, so a string like NULL,
    a comma or a brace stays itself; backslashes and double quotes escaped). For psycopg only:
    asyncpg types the parameter as the array the statement casts to, and takes only a list."""
    if not values:
        return "{}"
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


def records_json(records: list[dict[str, Any]]) -> str:
    """The ``jobs`` parameter of ``insert_jobs.sql`` for these records."""
    return orjson.dumps(records).decode()


#: What a bulk insert says of an item that is not a ``JobRequest``.
NOT_A_REQUEST = "enqueue takes JobRequest values (from my_job.new(...))"


def take_requests(source: Iterator[Any], size: int) -> list[JobRequest]:
    """The next ``size`` requests at most from ``source``, each checked to be a ``JobRequest``."""
    batch = list(itertools.islice(source, size))
    for request in batch:
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, NOT_A_REQUEST)
    return batch


def request_chunks(requests: Iterator[Any], size: int) -> Iterator[list[JobRequest]]:
    """``requests`` in checked chunks of ``size``, taken lazily."""
    while chunk := take_requests(requests, size):
        yield chunk
        if len(chunk) < size:
            return


def single_insert_id(rows: list[tuple[Any, ...]]) -> JobIds:
    """The id from the row of a single job's statement: (id, notified) for a plain job, (id,
    inserted, key, notified) for a unique one, whose id is an ``ExistingJobId`` when a stored job
    held the key."""
    row = rows[0]
    return JobIds.one(row[0], existing=len(row) != 2 and not row[1])
