"""Converting between Python values and ``oban_jobs`` rows on SQLite.

Times are stored as naive UTC text with six fractional digits (``2026-11-22 10:00:00.123456``), so
text order is time order; JSON columns are text. ``None`` for ``now`` means this machine's clock,
read when the statement runs (SQLite has no server with a clock of its own).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor._options import check_aware
from conveyor.engine._salvage import read_or_salvage, salvage_columns
from conveyor.errors import ValidationError
from conveyor.job import Job, JobState, stored_job
from conveyor.request import JobRequest

#: Distinct tag lists remembered per insert; more are encoded each time.
_CACHE_LIMIT = 4096


def utc_clock(now: datetime | None) -> datetime:
    """``now`` (aware) as naive UTC, or the current time when None."""
    if now is None:
        return datetime.now(UTC).replace(tzinfo=None)
    check_aware("now", now)
    return now.astimezone(UTC).replace(tzinfo=None)


def check_now(now: datetime | None) -> None:
    """Refuse a naive ``now`` before any work is queued (the check repeats where it is used)."""
    if now is not None:
        check_aware("now", now)


def time_text(value: datetime) -> str:
    """A naive UTC datetime as stored: always with microseconds, so text order is time order."""
    return value.isoformat(" ", timespec="microseconds")


def clock_text(now: datetime | None) -> str:
    return time_text(utc_clock(now))


def later_text(clock: datetime, seconds: float | None) -> str | None:
    """The time ``seconds`` after ``clock`` as stored text, or None when ``seconds`` is None."""
    if seconds is None:
        return None
    return time_text(clock + timedelta(seconds=seconds))


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def parse_optional_time(text: str | None) -> datetime | None:
    return None if text is None else parse_time(text)


def job_from_row(row: Sequence[Any]) -> Job:
    """A ``Job`` from a row in ``job_columns.sql`` order (raises on any row ``salvage_row`` must read)."""
    loads = orjson.loads
    args, meta, errors = loads(row[4]), loads(row[5]), loads(row[7])
    # Shapes another client may have broken; salvage_row then names what is wrong.
    if type(args) is not dict or type(meta) is not dict or type(errors) is not list:
        raise ValueError(f"job {row[0]} needs salvage")
    if errors and not all(type(e) is dict for e in errors):
        raise ValueError(f"job {row[0]} needs salvage")
    tags, attempted_by = loads(row[6]), loads(row[11])
    if not (_text_list(tags) and _text_list(attempted_by)):
        raise ValueError(f"job {row[0]} needs salvage")
    return stored_job(
        id=row[0],
        state=JobState(row[1]),
        queue=row[2],
        worker=row[3],
        args=args,
        meta=meta,
        tags=tuple(tags),
        errors=tuple(errors),
        attempt=row[8],
        max_attempts=row[9],
        priority=row[10],
        attempted_by=tuple(attempted_by),
        inserted_at=parse_time(row[12]),
        scheduled_at=parse_time(row[13]),
        attempted_at=parse_optional_time(row[14]),
        cancelled_at=parse_optional_time(row[15]),
        completed_at=parse_optional_time(row[16]),
        discarded_at=parse_optional_time(row[17]),
    )


def _text_list(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def read_jobs(rows: Sequence[Sequence[Any]]) -> list[Job]:
    """The jobs of ``rows``; a row that cannot be decoded as it is comes back with
    ``Job.unreadable`` set instead of failing the rows around it (``conveyor.engine._salvage``)."""
    return read_or_salvage(rows, job_from_row, salvage_row)


def salvage_row(row: Sequence[Any]) -> Job:
    """One row decoded column by column (see ``conveyor.engine._salvage``)."""
    try:
        return job_from_row(row)
    except Exception:
        return salvage_columns(row, orjson.loads, parse_time)


def fetch_order(job: Job) -> tuple[int, datetime, int]:
    """The order fetch_jobs claims jobs in (RETURNING itself keeps no order)."""
    return (job.priority, job.scheduled_at, job.id)


def take_requests(source: Iterator[Any], size: int) -> list[JobRequest]:
    """The next ``size`` requests at most from ``source``, each checked to be a ``JobRequest``."""
    batch = list(itertools.islice(source, size))
    for request in batch:
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, "enqueue takes JobRequest values (from my_job.new(...))")
    return batch


#: Values per job in insert_first.sql and insert_jobs.sql: state, queue, worker, args, meta, tags,
#: priority, max_attempts, scheduled_at, inserted_at.
INSERT_COLUMNS = 10


class InsertRows:
    """Turns requests into the values of ``insert_jobs.sql``, given the clock of the insert.

    It decides each job's state as PostgreSQL's ``insert_jobs.sql`` does (``scheduled`` when it runs
    after the clock, else ``available``) and collects the queues that gained available jobs, so the
    caller can notify them. One instance serves one insert.
    """

    def __init__(self, clock: datetime) -> None:
        self.clock = clock
        self.clock_text = time_text(clock)
        self.available_queues: set[str] = set()
        self._tags: dict[tuple[str, ...], str] = {}

    def _tag_list(self, tags: tuple[str, ...]) -> str:
        found = self._tags.get(tags)
        if found is None:
            found = orjson.dumps(tags).decode()
            if len(self._tags) < _CACHE_LIMIT:
                self._tags[tags] = found
        return found

    def replacement(self, request: JobRequest, job_id: int) -> dict[str, Any]:
        """The record ``replace_jobs.sql`` reads for a unique request that met stored job ``job_id``."""
        assert request.unique is not None
        run = request.scheduled_at_utc or self.clock + timedelta(seconds=request.schedule_in or 0)
        return {
            "id": job_id,
            "replace": request.unique.replace_spec(),
            "queue": request.queue,
            "args": orjson.Fragment(request.args_json),
            "meta": orjson.Fragment(request.meta_json),
            "tags": request.tags,
            "priority": request.priority,
            "max_attempts": request.max_attempts,
            "run_at": time_text(run),
        }

    def values(self, requests: Sequence[JobRequest], metas: Mapping[int, bytes] | None = None) -> list[Any]:
        """``INSERT_COLUMNS`` values per request, one flat list (sliced into statements later).
        ``metas`` replaces the meta of some requests (by ``id(request)``: unique ones)."""
        clock, clock_text = self.clock, self.clock_text
        available = self.available_queues
        tag_list = self._tag_list
        values: list[Any] = []
        extend = values.extend
        for request in requests:
            queue = request.queue
            if request.scheduled_at is None and not request.schedule_in:
                state, run_at = "available", clock_text
                available.add(queue)
            else:
                run = request.scheduled_at_utc or clock + timedelta(seconds=request.schedule_in or 0)
                if run > clock:
                    state = "scheduled"
                else:
                    state = "available"
                    available.add(queue)
                run_at = time_text(run)
            extend(
                (
                    state,
                    queue,
                    request.worker,
                    request.args_json.decode(),
                    (metas.get(id(request), request.meta_json) if metas else request.meta_json).decode(),
                    tag_list(request.tags),
                    request.priority,
                    request.max_attempts,
                    run_at,
                    clock_text,
                )
            )
        return values
