"""The hot path on PostgreSQL: fetch and ack (on the hot pool), release and stage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.acks import Ack
from conveyor.engine import _partitions
from conveyor.engine._partitions import KeySyntax, Shape
from conveyor.engine.postgres.core import CLAIM_PARTS, hot_text
from conveyor.engine.postgres.rows import naive_utc, read_claim, read_result
from conveyor.engine.postgres.workflows import PostgresWorkflows
from conveyor.job import Job, JobState
from conveyor.limits import Claimed, FetchLimits

#: Partition keys on PostgreSQL: a jsonb array of the worker and the values under the keys, as text.
KEYS = KeySyntax(
    read=lambda column, param: f"({column} -> %({param})s::text)",
    array=lambda items: f"jsonb_build_array({', '.join(items)})::text",
    param=lambda key: key,
)

#: Each state's ``value``, without the enum's ``value`` descriptor (written in Python) per ack.
_STATE_VALUES = {state: state.value for state in JobState}


def _int_array(values: list[int]) -> str:
    """Integers as an array literal, cast by the statement (``'{1,2}'::bigint[]``): a few hundred
    held acks a claim, several times cheaper to send than a list psycopg adapts item by item."""
    return "{" + ",".join(map(str, values)) + "}"


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
            "ended_ids": _int_array([job_id for job_id, _ in ended]),
            "ended_attempts": _int_array([attempt for _, attempt in ended]),
            "dead_after": dead_after,
            "global_limit": limits.global_limit.allowed if limits.global_limit else None,
            "rate_allowed": rate.allowed if rate else None,
            "rate_period": rate.period if rate else None,
        }
        if limits.partitioned:
            fetch = self._partitioned_statement(_partitions.limits_shape(limits))
            params |= _partitions.partitioned_params(KEYS, limits) | {"scan": _partitions.scan_size(demand)}
        else:
            fetch = self._fetch_limited_statement
        # Two statements in one round trip, no BEGIN or COMMIT: the lock, then the claim, which
        # records its starts and says whether a limit stopped it. The pipeline sends them before one
        # Sync, so they run in one implicit transaction, committed at the Sync (the lock is held
        # until then), and the claim still begins after the lock is granted, with a snapshot of its
        # own (test_hot_path shows a snapshot taken before the wait would overrun the limit).
        # Through a transaction pooler with settings to apply, an explicit transaction holds them.
        async with self.hot_pool.connection() as conn:
            async with conn.pipeline(), self.hot_transaction(conn):
                await conn.execute(self._lock_queue_statement, {"queue": queue})
                claim = await conn.execute(fetch, params)
            jobs, capped = await read_claim(claim)
        claimed = Claimed(jobs)
        claimed.capped = bool(capped)
        return claimed

    def _partitioned_statement(self, shapes: tuple[Shape, Shape]) -> bytes:
        """The claim for partitions of these shapes, composed once per shape."""
        found = self._partitioned.get(shapes)
        if found is None:
            composed = self.sql.compose("fetch_partitioned", record_starts="record_starts", **CLAIM_PARTS)
            found = self._partitioned[shapes] = hot_text(_partitions.render(composed, KEYS, shapes))
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
