"""The hot path on SQLite: fetch, ack, release and stage, each one write transaction."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine.sqlite.core import FILES, SqliteCore
from conveyor.engine.sqlite.database import Tx
from conveyor.engine.sqlite.rows import check_now, fetch_order, later_text, read_jobs, time_text, utc_clock
from conveyor.errors import ValidationError
from conveyor.job import Job
from conveyor.limits import FetchLimits


class SqliteHotPath(SqliteCore):
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
        check_now(now)
        if isinstance(demand, bool) or not isinstance(demand, int) or demand < 0:
            raise ValidationError("demand", demand, "must be an integer >= 0")
        if demand == 0:
            return []
        statement = self._fetch
        params: dict[str, Any] = {"queue": queue, "demand": demand, "node": node, "producer": producer}
        if limits is not None and not limits.unlimited:
            # One writer at a time: the count in the statement sees every process's claims.
            statement = self._fetch_global
            params["global_limit"] = limits.global_limit

        def run(tx: Tx) -> list[Any]:
            return tx.conn.execute(statement, params | {"now": time_text(utc_clock(now))}).fetchall()

        jobs = read_jobs(await self.database.write(run))
        jobs.sort(key=fetch_order)
        return jobs

    async def ack_jobs(self, acks: Sequence[Ack], *, now: datetime | None = None) -> list[int]:
        check_now(now)
        if not acks:
            return []
        statement = FILES["ack_jobs"]

        def run(tx: Tx) -> list[int]:
            clock = utc_clock(now)
            records = [
                {
                    "id": ack.job_id,
                    "attempt": ack.attempt,
                    "state": ack.state.value,
                    "scheduled_at": later_text(clock, ack.schedule_in),
                    "error": ack.error,
                    "meta": ack.meta,
                    "snoozed": ack.snoozed,
                }
                for ack in acks
            ]
            params = {"acks": orjson.dumps(records).decode(), "now": time_text(clock)}
            return [row[0] for row in tx.conn.execute(statement, params).fetchall()]

        return await self.database.write(run)

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        if not attempts:
            return []
        given = orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode()
        statement = FILES["release_jobs"]

        def run(tx: Tx) -> list[int]:
            rows = tx.conn.execute(statement, {"jobs": given}).fetchall()
            clock = time_text(utc_clock(None))
            for queue in sorted({row[1] for row in rows}):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(row[0] for row in rows)

        return await self.database.write(run)

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        check_now(now)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValidationError("limit", limit, "must be an integer >= 0")
        statement = FILES["stage_jobs"]

        def run(tx: Tx) -> dict[str, int]:
            clock = time_text(utc_clock(now))
            staged = Counter(row[0] for row in tx.conn.execute(statement, {"now": clock, "limit": limit}))
            for queue in sorted(staged):
                tx.notify("insert", {"queue": queue}, clock)
            return dict(staged)

        return await self.database.write(run)
