"""Unique inserts with ``replace`` on MySQL/MariaDB: a request meeting a stored twin replaces the
fields it names for the twin's state (``Unique.replace``), computed in Python from the twin's row,
locked in the insert's transaction.

As on PostgreSQL: a new ``max_attempts`` at or below the attempts a waiting job made discards it
(with an errors entry saying why); a running job keeps its next attempt; a new time schedules an
available job when it is later than now. The twin's unique markers stay in its meta.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.mysql.rows import stored_json
from conveyor.request import JobRequest

WAITING = frozenset({"available", "scheduled", "retryable", "suspended"})
UNIQUE_MARKERS = ("uniq_key", "uniq_states")


def _run_at(request: JobRequest, clock: datetime) -> datetime:
    at = request.scheduled_at_utc
    if at is None:
        return clock + timedelta(seconds=request.schedule_in or 0)
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at


async def replace_jobs(
    cursor: Any, files: SqlFiles, clock: datetime, replacements: Sequence[tuple[JobRequest, int]]
) -> set[str]:
    """Replace the chosen fields of each stored job; the queues a job became available in."""
    if not replacements:
        return set()
    await cursor.execute(files["replace_targets"], (tuple(sorted({job_id for _, job_id in replacements})),))
    rows = {int(row[0]): row for row in await cursor.fetchall()}
    writes = []
    for request, job_id in replacements:
        row = rows.get(job_id)
        if row is None or request.unique is None:
            continue
        (
            _,
            state,
            attempt,
            args,
            meta,
            queue,
            tags,
            priority,
            max_attempts,
            scheduled_at,
            discarded_at,
            errors,
        ) = row
        fields = set(request.unique.replace_spec().get(state, ()))
        if not fields:
            continue
        stored_meta, stored_errors = meta, errors
        if "args" in fields:
            args = request.args_json.decode()
        if "meta" in fields:
            old = stored_json(stored_meta)
            kept = {k: old[k] for k in UNIQUE_MARKERS if isinstance(old, dict) and old.get(k) is not None}
            meta = orjson.dumps({**orjson.loads(request.meta_json), **kept}).decode()
        if "queue" in fields:
            queue = request.queue
        if "tags" in fields:
            tags = orjson.dumps(request.tags).decode()
        if "priority" in fields:
            priority = request.priority
        exhausted = "max_attempts" in fields and request.max_attempts <= attempt and state in WAITING
        if "max_attempts" in fields:
            wanted = request.max_attempts
            # A running job keeps its next attempt; a discarded one keeps attempt <= max_attempts.
            max_attempts = max(wanted, attempt + 1) if state == "executing" else max(wanted, attempt)
        run_at = _run_at(request, clock)
        if "scheduled_at" in fields:
            scheduled_at = run_at
        new_state = state
        if exhausted:
            new_state, discarded_at = "discarded", clock
            why = f"discarded: max_attempts replaced with {request.max_attempts} after {attempt} attempts"
            entry = {"attempt": attempt, "at": clock.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00"), "error": why}
            listed = stored_json(stored_errors)
            errors = orjson.dumps([*(listed if isinstance(listed, list) else []), entry]).decode()
        elif "scheduled_at" in fields and state == "available" and run_at > clock:
            new_state = "scheduled"
        writes.append(
            (
                args,
                meta,
                queue,
                tags,
                priority,
                max_attempts,
                scheduled_at,
                discarded_at,
                errors,
                new_state,
                job_id,
            )
        )
    if writes:
        await cursor.executemany(files["replace_write"], writes)
    return {w[2] for w in writes if w[9] == "available"}
