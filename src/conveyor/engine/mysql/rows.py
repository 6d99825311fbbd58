"""Converting between Python values and ``oban_jobs`` rows on MySQL/MariaDB.

Times are naive UTC ``DATETIME(6)`` (the session's time zone is UTC): the driver takes and returns
naive ``datetime`` values, made aware here. JSON columns come back as text (MariaDB's JSON is
LONGTEXT with a validity check). ``None`` for ``now`` means this machine's clock: the server's would
cost a round trip before every statement that needs it in Python.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor._options import check_aware
from conveyor.engine._salvage import read_or_salvage, salvage_columns
from conveyor.errors import ValidationError
from conveyor.job import Job, JobState, stored_job
from conveyor.request import JobRequest

#: Values per job in insert_jobs.sql: state, queue, worker, args, meta, tags, priority,
#: max_attempts, scheduled_at, inserted_at.
INSERT_COLUMNS = 10


def utc_clock(now: datetime | None) -> datetime:
    """``now`` (aware) as naive UTC, or the current time when None."""
    if now is None:
        return datetime.now(UTC).replace(tzinfo=None)
    check_aware("now", now)
    return now.astimezone(UTC).replace(tzinfo=None)


def check_now(now: datetime | None) -> None:
    """Refuse a naive ``now`` before any work is queued."""
    if now is not None:
        check_aware("now", now)


def stored_json(value: Any) -> Any:
    """A stored JSON column as Python, or None when it is not JSON (another client's text)."""
    try:
        return orjson.loads(value) if isinstance(value, str | bytes) else value
    except orjson.JSONDecodeError:
        return None


def id_array(ids: Iterable[int]) -> str:
    """Job ids as the JSON array a statement reads with ``JSON_TABLE`` (``delete_jobs.sql``)."""
    return orjson.dumps([int(job_id) for job_id in ids]).decode()


def aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def job_from_row(row: Sequence[Any]) -> Job:
    """A ``Job`` from a row in ``job_columns.sql`` order (raises on any row ``salvage_row`` must read)."""
    args, meta, tags, errors, attempted_by = (_json(row[i]) for i in (4, 5, 6, 7, 11))
    if type(args) is not dict or type(meta) is not dict or type(errors) is not list:
        raise ValueError(f"job {row[0]} needs salvage")
    if errors and not all(type(e) is dict for e in errors):
        raise ValueError(f"job {row[0]} needs salvage")
    if not (_text_list(tags) and _text_list(attempted_by)):
        raise ValueError(f"job {row[0]} needs salvage")
    for index in range(12, 18):
        if row[index] is not None and not isinstance(row[index], datetime):
            raise ValueError(f"job {row[0]} needs salvage")  # a zero date the driver left as text
    return stored_job(
        id=int(row[0]),
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
        inserted_at=row[12].replace(tzinfo=UTC),
        scheduled_at=row[13].replace(tzinfo=UTC),
        attempted_at=aware(row[14]),
        cancelled_at=aware(row[15]),
        completed_at=aware(row[16]),
        discarded_at=aware(row[17]),
    )


def _text_list(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


def read_jobs(rows: Sequence[Sequence[Any]]) -> list[Job]:
    """The jobs of ``rows``; a row that cannot be decoded as it is comes back with
    ``Job.unreadable`` set instead of failing the rows around it (``conveyor.engine._salvage``)."""
    return read_or_salvage(rows, job_from_row, salvage_row)


def _stored_time(raw: Any) -> datetime:
    if not isinstance(raw, datetime):
        raise ValueError(f"not a time: {raw!r}")
    return raw.replace(tzinfo=UTC)


def salvage_row(row: Sequence[Any]) -> Job:
    """One row decoded column by column (see ``conveyor.engine._salvage``)."""
    try:
        return job_from_row(row)
    except Exception:
        return salvage_columns(row, _json, _stored_time)


def take_requests(source: Iterator[Any], size: int) -> list[JobRequest]:
    """The next ``size`` requests at most from ``source``, each checked to be a ``JobRequest``."""
    batch = list(itertools.islice(source, size))
    for request in batch:
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, "enqueue takes JobRequest values (from my_job.new(...))")
    return batch


class InsertRows:
    """Turns requests into the values of ``insert_jobs.sql`` at the insert's clock: ``scheduled``
    when a job runs after the clock, else ``available`` (whose queues it collects, to notify)."""

    def __init__(self, clock: datetime) -> None:
        self.clock = clock
        self.available_queues: set[str] = set()

    def values(self, requests: Sequence[JobRequest], metas: Mapping[int, bytes] | None = None) -> list[Any]:
        """``INSERT_COLUMNS`` values per request, one flat list. ``metas`` replaces the meta of some
        requests (by ``id(request)``: unique ones)."""
        clock = self.clock
        values: list[Any] = []
        for request in requests:
            if request.scheduled_at is None and not request.schedule_in:
                state, run_at = "available", clock
            else:
                run_at = request.scheduled_at_utc or clock + timedelta(seconds=request.schedule_in or 0)
                state = "scheduled" if run_at > clock else "available"
            if state == "available":
                self.available_queues.add(request.queue)
            meta = metas.get(id(request), request.meta_json) if metas else request.meta_json
            values.extend(
                (
                    state,
                    request.queue,
                    request.worker,
                    request.args_json.decode(),
                    meta.decode(),
                    orjson.dumps(request.tags).decode(),
                    request.priority,
                    request.max_attempts,
                    run_at.replace(tzinfo=None),
                    clock,
                )
            )
        return values
