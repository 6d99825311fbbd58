"""Relay on PostgreSQL: job states for waiters, stored progress, and signals to jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine.postgres.core import PostgresCore
from conveyor.engine.postgres.rows import naive_utc
from conveyor.job import JobState
from conveyor.job_ids import plain_ids


class PostgresRelay(PostgresCore):
    """``job_states``, ``record_progress``, ``signal_job``, ``wake_awaiting``."""

    async def job_states(self, ids: Sequence[int]) -> dict[int, JobState]:
        if not ids:
            return {}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["job_states"].encode(), {"ids": plain_ids(ids)})
            return {row[0]: JobState(row[1]) for row in await cur.fetchall()}

    async def record_progress(self, entries: Sequence[tuple[int, int, Mapping[str, Any]]]) -> list[int]:
        if not entries:
            return []
        given = orjson.dumps([{"id": i, "attempt": a, "progress": p} for i, a, p in entries]).decode()
        return sorted(await self._fetch_ids(self.sql["record_progress"], {"entries": given}))

    async def signal_job(
        self, job_id: int, message: bytes, *, now: datetime | None = None, limit: int = 1000
    ) -> tuple[JobState, int | None] | None:
        params = {
            "id": job_id,
            "message": message.decode(),
            "now": naive_utc(now),
            "limit": limit,
            "insert_channel": self.insert_channel,
            "inbox_channel": self.inbox_channel,
        }
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["signal_job"].encode(), params)
            row = await cur.fetchone()
        if row is None:
            return None
        return JobState(row[0]), row[1]

    async def wake_awaiting(self, ids: Sequence[int], *, now: datetime | None = None) -> list[int]:
        if not ids:
            return []
        params = {"ids": plain_ids(ids), "now": naive_utc(now), "insert_channel": self.insert_channel}
        return await self._fetch_ids(self.sql["wake_awaiting"], params)
