"""Relay on MySQL/MariaDB: job states for waiters, stored progress, and signals to jobs.

Each write locks the rows it changes (``FOR UPDATE``), reads their meta, changes it in Python and
writes it back in the same transaction: another client's junk in meta reads as an empty object and
never makes the statement fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.hot_path import notify
from conveyor.engine.mysql.rows import check_now, utc_clock
from conveyor.job import FINAL_STATES, JobState


def _object(text: Any) -> dict[str, Any]:
    """A job's meta as a dict; another client's junk (not JSON, not an object) reads as empty."""
    try:
        value = orjson.loads(text) if isinstance(text, str | bytes) else text
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _message_came(meta: dict[str, Any]) -> bool:
    """Whether the message a job let go of its slot to wait for (awaiting_signal.position) is in
    its inbox (the objects in ``signals``)."""
    awaiting, inbox = meta.get("awaiting_signal"), meta.get("signals")
    if not isinstance(awaiting, dict) or not isinstance(inbox, list):
        return False
    position = awaiting.get("position")
    if isinstance(position, bool) or not isinstance(position, int | float):
        return False
    return position < sum(1 for item in inbox if isinstance(item, dict))


class MysqlRelay(MysqlCore):
    """``job_states``, ``record_progress``, ``signal_job``, ``wake_awaiting``."""

    async def job_states(self, ids: Sequence[int]) -> dict[int, JobState]:
        if not ids:
            return {}
        async with self.reading() as cursor:
            await cursor.execute(self.files["job_states"], (tuple(int(i) for i in ids),))
            return {int(row[0]): JobState(row[1]) for row in await cursor.fetchall()}

    async def record_progress(self, entries: Sequence[tuple[int, int, Mapping[str, Any]]]) -> list[int]:
        if not entries:
            return []
        reported = {int(job_id): (attempt, progress) for job_id, attempt, progress in entries}
        async with self.transaction() as cursor:
            await cursor.execute(self.files["progress_targets"], (tuple(sorted(reported)),))
            writes: list[dict[str, Any]] = []
            for job_id, attempt, meta in await cursor.fetchall():
                wanted, progress = reported[int(job_id)]
                if attempt == wanted:
                    written = {**_object(meta), "progress": progress}
                    writes.append({"id": int(job_id), "meta": orjson.dumps(written).decode()})
            if writes:
                await cursor.executemany(self.files["write_meta"], writes)
        return sorted(int(write["id"]) for write in writes)

    async def signal_job(
        self, job_id: int, message: bytes, *, now: datetime | None = None, limit: int = 1000
    ) -> tuple[JobState, int | None] | None:
        check_now(now)
        value = orjson.loads(message)
        async with self.transaction() as cursor:
            await cursor.execute(self.files["signal_target"], {"id": job_id})
            rows = await cursor.fetchall()
            if not rows:
                return None
            state, queue, meta = JobState(rows[0][0]), rows[0][1], _object(rows[0][2])
            inbox = meta.get("signals")
            inbox = inbox if isinstance(inbox, list) else []
            position = sum(1 for item in inbox if isinstance(item, dict))
            if state in FINAL_STATES or position >= limit:
                return state, None
            meta["signals"] = [*inbox, value]
            wake = state is JobState.SCHEDULED and isinstance(meta.get("awaiting_signal"), dict)
            params = {"id": job_id, "meta": orjson.dumps(meta).decode(), "wake": wake, "now": utc_clock(now)}
            await cursor.execute(self.files["signal_write"], params)
            if wake:
                await notify(cursor, self, "insert", {"queue": queue})
                return JobState.AVAILABLE, position
            if state is JobState.EXECUTING:
                await notify(cursor, self, "inbox", {"job_id": job_id})
            return state, position

    async def wake_awaiting(self, ids: Sequence[int], *, now: datetime | None = None) -> list[int]:
        check_now(now)
        if not ids:
            return []
        async with self.transaction() as cursor:
            await cursor.execute(self.files["wake_targets"], (tuple(int(i) for i in ids),))
            rows = [row for row in await cursor.fetchall() if _message_came(_object(row[2]))]
            if not rows:
                return []
            woken = sorted(int(row[0]) for row in rows)
            await cursor.execute(self.files["wake_jobs"], {"ids": tuple(woken), "now": utc_clock(now)})
            for queue in sorted({row[1] for row in rows}):
                await notify(cursor, self, "insert", {"queue": queue})
        return woken
