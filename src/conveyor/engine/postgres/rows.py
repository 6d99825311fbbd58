"""Converting between Python values and ``oban_jobs`` rows (naive UTC timestamps, JSON, arrays)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from conveyor.errors import ValidationError
from conveyor.job import Job, JobState
from conveyor.request import JobRequest


def aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None else None


def naive_utc(value: datetime | None) -> datetime | None:
    """An aware datetime as the naive UTC value ``oban_jobs`` stores; None stays None."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None)


def job_from_row(row: Sequence[Any]) -> Job:
    """A ``Job`` from a row in ``job_columns.sql`` order."""
    return Job(
        id=row[0],
        state=JobState(row[1]),
        queue=row[2],
        worker=row[3],
        args=row[4],
        meta=row[5],
        tags=tuple(row[6]),
        errors=tuple(row[7]),
        attempt=row[8],
        max_attempts=row[9],
        priority=row[10],
        attempted_by=tuple(row[11]),
        inserted_at=row[12].replace(tzinfo=UTC),
        scheduled_at=row[13].replace(tzinfo=UTC),
        attempted_at=aware(row[14]),
        cancelled_at=aware(row[15]),
        completed_at=aware(row[16]),
        discarded_at=aware(row[17]),
    )


def request_record(request: JobRequest) -> dict[str, Any]:
    """One element of the JSON array that ``insert_jobs.sql`` reads with ``jsonb_to_recordset``."""
    return {
        "worker": request.worker,
        "queue": request.queue,
        # Already encoded during validation: embed the bytes instead of encoding twice.
        "args": orjson.Fragment(request.args_json),
        "meta": orjson.Fragment(request.meta_json),
        "tags": request.tags,
        "priority": request.priority,
        "max_attempts": request.max_attempts,
        "scheduled_at": request.scheduled_at_utc,
        "schedule_in": request.schedule_in,
    }


def chunked_payloads(requests: Iterable[JobRequest], size: int) -> Iterator[str]:
    """The JSON parameter of each insert statement, ``size`` jobs at most per statement.

    Requests are consumed lazily, so a generator of 100k requests never sits in memory at once.
    """
    chunk: list[dict[str, Any]] = []
    for request in requests:
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, "enqueue takes JobRequest values (from my_job.new(...))")
        chunk.append(request_record(request))
        if len(chunk) >= size:
            yield orjson.dumps(chunk).decode()
            chunk = []
    if chunk:
        yield orjson.dumps(chunk).decode()
