"""The hot path on SQLite: fetch, ack, release and stage, each one write transaction."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine.sqlite.core import FILES, SqliteCore
from conveyor.engine.sqlite.database import Tx
from conveyor.engine.sqlite.rows import check_now, fetch_order, later_text, read_jobs, time_text, utc_clock
from conveyor.errors import ValidationError
from conveyor.job import Job
from conveyor.limits import Claimed, FetchLimits, capped_by

RATE_RECORD = FILES["rate_starts_record"]
RATE_FORGET = FILES["rate_starts_forget"]
CLAIM_LEFT = FILES["limited_claim_left"]


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
        if limits is None or limits.unlimited:

            def run(tx: Tx) -> list[Any]:
                return tx.conn.execute(statement, params | {"now": time_text(utc_clock(now))}).fetchall()

            jobs = read_jobs(await self.database.write(run))
            jobs.sort(key=fetch_order)
            return jobs
        # One writer at a time: the counts in the statement see every process's claims.
        rate = limits.rate
        params |= {
            "global_limit": limits.global_limit,
            "rate_allowed": rate.allowed if rate else None,
        }
        limited = self._fetch_limited

        def run_limited(tx: Tx) -> tuple[list[Any], tuple[Any, ...]]:
            clock = utc_clock(now)
            window_start = time_text(clock - timedelta(seconds=rate.period)) if rate else None
            # Rows are forgotten a margin past the window, as on PostgreSQL (record_starts.sql).
            forget_before = time_text(clock - timedelta(seconds=2 * rate.period + 60)) if rate else None
            values = params | {
                "now": time_text(clock),
                "window_start": window_start,
                "forget_before": forget_before,
            }
            rows = tx.conn.execute(limited, values).fetchall()
            if rate is not None:
                if rows:
                    tx.conn.execute(RATE_RECORD, values | {"started": len(rows)})
                tx.conn.execute(RATE_FORGET, values)
            left = tx.conn.execute(CLAIM_LEFT, values).fetchone()
            return rows, tuple(left) if left else (None, None)

        rows, (running, started) = await self.database.write(run_limited)
        claimed = Claimed(sorted(read_jobs(rows), key=fetch_order))
        claimed.capped = capped_by(limits, running, started)
        return claimed

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
