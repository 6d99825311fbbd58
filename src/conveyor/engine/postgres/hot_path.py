"""The hot path on PostgreSQL: fetch and ack (on the hot pool), release and stage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine import _partitions
from conveyor.engine._partitions import KeySyntax, Shape
from conveyor.engine.postgres.core import CLAIM_PARTS, hot_text, read_result
from conveyor.engine.postgres.rows import naive_utc
from conveyor.engine.postgres.workflows import PostgresWorkflows
from conveyor.job import Job, JobState
from conveyor.limits import Claimed, FetchLimits, capped_by

#: Partition keys on PostgreSQL: a jsonb array of the worker and the values under the keys, as text.
KEYS = KeySyntax(
    read=lambda column, param: f"({column} -> %({param})s::text)",
    array=lambda items: f"jsonb_build_array({', '.join(items)})::text",
    param=lambda key: key,
)

#: Each state's ``value``, without the enum's ``value`` descriptor (written in Python) per ack.
_STATE_VALUES = {state: state.value for state in JobState}


def ack_record(ack: Ack) -> dict[str, Any]:
    """One element of the JSON array ``ack_jobs.sql`` reads with ``jsonb_to_recordset``."""
    return {
        "id": ack.job_id,
        "attempt": ack.attempt,
        "state": _STATE_VALUES[ack.state],
        "schedule_in": ack.schedule_in,
        "error": ack.error,
        "meta": ack.meta,
        "snoozed": ack.snoozed,
    }


class PostgresHotPath(PostgresWorkflows):
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
        ended: Sequence[tuple[int, int]] = (),
        dead_after: float | None = None,
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
                async with self.hot_transaction(conn):
                    cur = await conn.execute(self._fetch_statement, params)
                    rows = await read_result(cur)
                return rows
        # Fleet-wide limits: count and claim under the queue's lock, in a statement that starts
        # after the lock is taken (READ COMMITTED gives it a snapshot with every earlier claim).
        rate = limits.rate
        params |= {
            "ended_ids": [job_id for job_id, _ in ended],
            "ended_attempts": [attempt for _, attempt in ended],
            "dead_after": dead_after,
            "global_limit": limits.global_limit.allowed if limits.global_limit else None,
            "rate_allowed": rate.allowed if rate else None,
            "rate_period": rate.period if rate else None,
        }
        partitioned = limits.partitioned
        if partitioned:
            fetch, claim_left = self._partitioned_statements(_partitions.limits_shape(limits))
            params |= _partitions.partitioned_params(KEYS, limits) | {"scan": _partitions.scan_size(demand)}
        else:
            fetch, claim_left = self._fetch_limited_statement, self._claim_left_statement
        # One round trip for the lock, the claim (which records its starts), the count of what the
        # limits have left and the commit: the pipeline sends them together, the server runs them in
        # order. The results are read after the transaction block, so the COMMIT goes with them
        # (read inside it, the commit would be a second round trip).
        async with self.hot_pool.connection() as conn, conn.pipeline():
            async with conn.transaction():
                await self.set_local(conn)
                await conn.execute(self._lock_queue_statement, {"queue": queue})
                claim = await conn.execute(fetch, params)
                left = await conn.execute(claim_left, params)
            claimed = Claimed(await read_result(claim))
            row = await left.fetchone()
        if partitioned:
            claimed.capped = len(claimed) < demand and bool(row and row[0])
        else:
            running, started = (row[0], row[1]) if row else (None, None)
            claimed.capped = capped_by(limits, running, started)
        return claimed

    def _partitioned_statements(self, shapes: tuple[Shape, Shape]) -> tuple[bytes, bytes]:
        """The claim and its follow-up for partitions of these shapes, composed once per shape."""
        found = self._partitioned.get(shapes)
        if found is None:
            composed = self.sql.compose("fetch_partitioned", record_starts="record_starts", **CLAIM_PARTS)
            fetch = _partitions.render(composed, KEYS, shapes)
            left = self.sql.compose(
                "partitioned_claim_left", lock_free="lock_free", stopping_ids="stopping_ids"
            )
            found = self._partitioned[shapes] = (hot_text(fetch), hot_text(left))
        return found

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        if not acks:
            return []
        params = {
            "acks": orjson.dumps([ack_record(ack) for ack in acks]).decode(),
            "now": naive_utc(now),
            "node": node,
            "ended_channel": self.ended_channel,
        }
        statement = self._ack_statement or await self._detect_errors_type()
        async with self.hot_pool.connection() as conn:
            async with self.hot_transaction(conn):
                cur = await conn.execute(statement, params)
                rows = await cur.fetchall()
            steps = [row[0] for row in rows if row[1]]  # ended steps whose dependents may go on
            if steps:
                # On the same connection, after the ack's commit: no second checkout, and the
                # statement is prepared with one generic plan like the ack's.
                await self.settle_after(steps, now, own=conn)
        return [row[0] for row in rows]

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
