"""Relay on SQLite: job states for waiters, stored progress, and signals to jobs."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.sqlite.core import FILES, SqliteCore
from conveyor.engine.sqlite.database import Tx
from conveyor.engine.sqlite.rows import check_now, time_text, utc_clock
from conveyor.job import FINAL_STATES, JobState


class SqliteRelay(SqliteCore):
    """``job_states``, ``record_progress``, ``signal_job``, ``wake_awaiting``."""

    async def job_states(self, ids: Sequence[int]) -> dict[int, JobState]:
        if not ids:
            return {}
        params = {"ids": orjson.dumps(list(ids)).decode()}
        statement = FILES["job_states"]

        def run(conn: sqlite3.Connection) -> list[Any]:
            return conn.execute(statement, params).fetchall()

        return {row[0]: JobState(row[1]) for row in await self.database.read(run)}

    async def record_progress(self, entries: Sequence[tuple[int, int, Mapping[str, Any]]]) -> list[int]:
        if not entries:
            return []
        given = orjson.dumps([{"id": i, "attempt": a, "progress": p} for i, a, p in entries]).decode()
        statement = FILES["record_progress"]

        def run(tx: Tx) -> list[int]:
            return sorted(row[0] for row in tx.conn.execute(statement, {"entries": given}).fetchall())

        return await self.database.write(run)

    async def signal_job(
        self, job_id: int, message: bytes, *, now: datetime | None = None, limit: int = 1000
    ) -> tuple[JobState, int | None] | None:
        check_now(now)
        value = orjson.loads(message)

        def run(tx: Tx) -> tuple[JobState, int | None] | None:
            row = tx.conn.execute(FILES["signal_target"], {"id": job_id}).fetchone()
            if row is None:
                return None
            state, queue, meta = JobState(row[0]), row[1], _object(row[2])
            inbox = meta.get("signals")
            inbox = inbox if isinstance(inbox, list) else []
            position = sum(1 for item in inbox if isinstance(item, dict))
            if state in FINAL_STATES or position >= limit:
                return state, None
            meta["signals"] = [*inbox, value]
            wake = state is JobState.SCHEDULED and isinstance(meta.get("awaiting_signal"), dict)
            clock = time_text(utc_clock(now))
            params = {"id": job_id, "meta": orjson.dumps(meta).decode(), "wake": wake, "now": clock}
            tx.conn.execute(FILES["signal_write"], params)
            if wake:
                tx.notify("insert", {"queue": queue}, clock)
                return JobState.AVAILABLE, position
            if state is JobState.EXECUTING:
                tx.notify("inbox", {"job_id": job_id}, clock)
            return state, position

        return await self.database.write(run)

    async def wake_awaiting(self, ids: Sequence[int], *, now: datetime | None = None) -> list[int]:
        check_now(now)
        if not ids:
            return []
        statement = FILES["wake_awaiting"]

        def run(tx: Tx) -> list[int]:
            clock = time_text(utc_clock(now))
            rows = tx.conn.execute(
                statement, {"ids": orjson.dumps(list(ids)).decode(), "now": clock}
            ).fetchall()
            for queue in sorted({row[1] for row in rows}):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(row[0] for row in rows)

        return await self.database.write(run)


def _object(text: Any) -> dict[str, Any]:
    """A job's meta as a dict; another client's junk (not JSON, not an object) reads as empty."""
    try:
        value = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
