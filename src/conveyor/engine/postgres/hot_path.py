"""The hot path on PostgreSQL: fetch and ack (on the hot pool), release and stage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine.postgres.core import PostgresCore, read_result
from conveyor.engine.postgres.rows import naive_utc
from conveyor.job import Job
from conveyor.limits import Claimed, FetchLimits, capped_by


def ack_record(ack: Ack) -> dict[str, Any]:
    """One element of the JSON array ``ack_jobs.sql`` reads with ``jsonb_to_recordset``."""
    return {
        "id": ack.job_id,
        "attempt": ack.attempt,
        "state": ack.state.value,
        "schedule_in": ack.schedule_in,
        "error": ack.error,
        "meta": ack.meta,
        "snoozed": ack.snoozed,
    }


class PostgresHotPath(PostgresCore):
    """``fetch_jobs``, ``ack_jobs``, ``release_jobs``, ``stage_jobs``."""

    async def fetch_jobs(
        self,
        queue: str,
        demand: int,
        *,
        node: str,
        producer: str,
        now: datetime | None = None,
        limits: FetchLimits | None = None,
    ) -> list[Job]:
        params: dict[str, Any] = {
            "queue": queue,
            "demand": demand,
            "node": node,
            "producer": producer,
            "now": naive_utc(now),
        }
        if limits is None or limits.unlimited:
            async with self.hot_pool.connection() as conn:
                cur = await conn.execute(self._fetch_statement, params)
                return await read_result(cur)
        # Fleet-wide limits: count and claim under the queue's lock, in a statement that starts
        # after the lock is taken (READ COMMITTED gives it a snapshot with every earlier claim).
        rate = limits.rate
        params |= {
            "global_limit": limits.global_limit,
            "rate_allowed": rate.allowed if rate else None,
            "rate_period": rate.period if rate else None,
        }
        # One round trip for the lock, the claim (which records its starts) and the count of what the
        # limits have left: the pipeline sends them together, the server runs them in order.
        async with self.hot_pool.connection() as conn, conn.pipeline(), conn.transaction():
            await conn.execute(self._lock_queue_statement, {"queue": queue})
            claim = await conn.execute(self._fetch_limited_statement, params)
            left = await conn.execute(self._claim_left_statement, params)
            claimed = Claimed(await read_result(claim))
            row = await left.fetchone()
        running, started = (row[0], row[1]) if row else (None, None)
        claimed.capped = capped_by(limits, running, started)
        return claimed

    async def ack_jobs(self, acks: Sequence[Ack], *, now: datetime | None = None) -> list[int]:
        if not acks:
            return []
        params = {
            "acks": orjson.dumps([ack_record(ack) for ack in acks]).decode(),
            "now": naive_utc(now),
        }
        statement = self._ack_statement or await self._detect_errors_type()
        async with self.hot_pool.connection() as conn:
            cur = await conn.execute(statement, params)
            return [row[0] for row in await cur.fetchall()]

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        if not attempts:
            return []
        params = {
            "jobs": orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode(),
            "insert_channel": self.insert_channel,
        }
        return await self._fetch_ids(self.sql["release_jobs"], params)

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        params = {"limit": limit, "now": naive_utc(now), "insert_channel": self.insert_channel}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["stage_jobs"].encode(), params)
            return {row[0]: row[1] for row in await cur.fetchall()}
