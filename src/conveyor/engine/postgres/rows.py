"""Converting between Python values and ``oban_jobs`` rows (naive UTC timestamps, JSON, arrays)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import psycopg
from psycopg import pq
from psycopg.adapt import Transformer

from conveyor._options import check_aware
from conveyor.engine._salvage import COLUMNS, UNREAD, describe, salvage_job
from conveyor.errors import ValidationError
from conveyor.job import Job, JobState
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
    return Job(
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
    loaders = [
        transformer.get_loader(column.type_code, pq.Format(result.fformat(index)))
        for index, column in enumerate(cur.description)
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


def records_json(records: list[dict[str, Any]]) -> str:
    """The ``jobs`` parameter of ``insert_jobs.sql`` for these records."""
    return orjson.dumps(records).decode()


class Pushback(Iterator[Any]):
    """An iterator that can be handed back the item it just gave (the COPY path stops before a
    unique request, which goes through a statement instead). ``iterator()`` gives the plain iterator
    underneath for fast loops (``CopyRows.take``), with any handed-back item first."""

    __slots__ = ("_source",)

    def __init__(self, source: Iterator[Any]) -> None:
        self._source = source

    def __next__(self) -> Any:
        return next(self._source)

    def iterator(self) -> Iterator[Any]:
        return self._source

    def push(self, item: Any) -> None:
        self._source = itertools.chain((item,), self._source)


# -- COPY rows -------------------------------------------------------------------------------------
#: The ``oban_jobs`` columns that ``insert_copy.sql`` names, in the order ``CopyRows`` writes them.
COPY_COLUMNS = (
    "state",
    "queue",
    "worker",
    "args",
    "meta",
    "tags",
    "priority",
    "max_attempts",
    "scheduled_at",
    "inserted_at",
    "id",
)
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
#: Distinct kinds of job (see ``CopyRows``) remembered per insert; more are formatted each time.
_CACHE_LIMIT = 4096
NOT_A_REQUEST = "enqueue takes JobRequest values (from my_job.new(...))"


def copy_text(value: str) -> bytes:
    """``value`` as a field of COPY's text format (UTF-8, with its special characters escaped)."""
    return value.translate(_COPY_ESCAPES).encode()


def array_literal(values: Iterable[str]) -> str:
    """A ``text[]`` literal with every element quoted (so commas, braces and "NULL" stay text)."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


def timestamp_text(value: datetime) -> bytes:
    """A naive UTC datetime as PostgreSQL's ISO timestamp input."""
    return value.isoformat(" ").encode()


class CopyRows:
    """Formats requests as ``oban_jobs`` rows in COPY's text format, in two steps.

    ``take`` turns the next requests of a stream into rows lacking only their id, at once, so the
    requests themselves can be freed (a big batch of live request objects is far slower to build
    than a stream of short-lived ones); ``with_ids`` completes the rows once ids are reserved.

    The state is decided the way ``insert_jobs.sql`` does (``scheduled`` when the job runs after the
    clock, else ``available``), and the queues that gained available jobs are collected so the
    caller can notify them. One instance serves one insert, caching the escaped fields that jobs of
    one kind share (state, queue, worker, tags, priority, max_attempts).
    """

    def __init__(self, clock: datetime) -> None:
        self.clock = clock
        self._clock_text = timestamp_text(clock)
        self._tail = b"\t" + self._clock_text + b"\t"
        self.available_queues: set[str] = set()
        self._shared: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}

    def _shared_fields(self, key: tuple[Any, ...], request: JobRequest) -> tuple[bytes, bytes]:
        """The fields before args (state, queue, worker) and between meta and the times."""
        state = key[0]
        if state == b"available":
            self.available_queues.add(request.queue)
        head = b"%s\t%s\t%s\t" % (state, copy_text(request.queue), copy_text(request.worker))
        tags = copy_text(array_literal(request.tags))
        fields = (head, b"\t%s\t%d\t%d\t" % (tags, request.priority, request.max_attempts))
        if len(self._shared) < _CACHE_LIMIT:
            self._shared[key] = fields
        return fields

    def take(self, source: Pushback, size: int) -> list[bytes]:
        """The rows (without ids) of the next ``size`` requests at most from ``source``, stopping
        before a unique request (handed back to ``source``: COPY cannot skip a conflicting row)."""
        clock, clock_text, tail = self.clock, self._clock_text, self._tail
        shared, shared_fields = self._shared, self._shared_fields
        rows: list[bytes] = []
        append = rows.append
        for request in itertools.islice(source.iterator(), size):
            if not isinstance(request, JobRequest):
                raise ValidationError("job", request, NOT_A_REQUEST)
            if request.unique is not None:
                source.push(request)
                break
            if request.scheduled_at is None and not request.schedule_in:
                state, run_at = b"available", clock_text
            else:
                run = request.scheduled_at_utc or clock + timedelta(seconds=request.schedule_in or 0)
                state = b"scheduled" if run > clock else b"available"
                run_at = timestamp_text(run)
            key = (state, request.queue, request.worker, request.tags, request.priority, request.max_attempts)
            head, middle = shared.get(key) or shared_fields(key, request)
            args, meta = request.args_json, request.meta_json
            if b"\\" in args:  # JSON has no raw control characters: only backslashes need escaping.
                args = args.replace(b"\\", b"\\\\")
            if b"\\" in meta:
                meta = meta.replace(b"\\", b"\\\\")
            append(b"%s%s\t%s%s%s%s" % (head, args, meta, middle, run_at, tail))
        return rows

    @staticmethod
    def with_ids(rows: Sequence[bytes], ids: Sequence[int]) -> bytes:
        """COPY data: each row of ``take`` completed with its id, one line each."""
        return b"".join([b"%s%d\n" % pair for pair in zip(rows, ids, strict=True)])


def take_requests(source: Iterator[Any], size: int) -> list[JobRequest]:
    """The next ``size`` requests at most from ``source``, each checked to be a ``JobRequest``."""
    batch = list(itertools.islice(source, size))
    for request in batch:
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, NOT_A_REQUEST)
    return batch
