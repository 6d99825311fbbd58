"""Cluster duties on PostgreSQL: leadership, producers and rescue, lost claims, pruning, cron and
queue state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg

from conveyor.engine._aging import check_aging
from conveyor.engine._prune_plan import PruneBatch, cron_tick_age, prune_batches, ranked_rules
from conveyor.engine.postgres import schema
from conveyor.engine.postgres.core import PostgresCore
from conveyor.engine.postgres.rows import aware, naive_utc, request_record
from conveyor.fleet import (
    CronTick,
    LeaderInfo,
    ProducerBeat,
    ProducerInfo,
    QueueState,
    RescueResult,
    StoredCron,
    with_limits,
)
from conveyor.retention import Pruned, Retention


class PostgresCluster(PostgresCore):
    """Leadership, producer rows, rescue, ``still_executing``, ``lost_claims``, pruning, cron ticks
    and persisted queue state."""

    # -- leadership --------------------------------------------------------------------------
    async def elect_leader(
        self,
        name: str,
        node: str,
        ttl: float,
        *,
        now: datetime | None = None,
        take_from_foreign: bool = False,
        stale_after: float | None = None,
    ) -> LeaderInfo | None:
        params = {
            "name": name,
            "node": node,
            "ttl": ttl,
            "now": naive_utc(now),
            "take_from_foreign": take_from_foreign,
            "stale_after": stale_after,
        }
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["elect_leader"].encode(), params)
            row = await cur.fetchone()
        return LeaderInfo(row[0], row[1].replace(tzinfo=UTC)) if row else None

    async def resign_leader(self, name: str, node: str) -> bool:
        params = {"name": name, "node": node, "leader_channel": self.leader_channel}
        return bool(await self._fetch_ids(self.sql["resign_leader"], params))

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["get_leader"].encode(), {"name": name, "now": naive_utc(now)})
            row = await cur.fetchone()
        return LeaderInfo(row[0], row[1].replace(tzinfo=UTC), aware(row[2])) if row else None

    # -- producers and rescue ----------------------------------------------------------------
    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        if not beats:
            return
        records = [
            {"uuid": b.uuid, "queue": b.queue, "meta": b.meta, "holding": list(b.holding)} for b in beats
        ]
        params = {
            "name": name,
            "node": node,
            "producers": orjson.dumps(records).decode(),
            "now": naive_utc(now),
        }
        async with self.pool.connection() as conn:
            await conn.execute(self.sql["upsert_producers"].encode(), params)

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(self.sql["delete_producers"].encode(), {"uuids": list(uuids)})

    async def list_producers(self) -> list[ProducerInfo]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["list_producers"].encode())
            rows = await cur.fetchall()
        return [
            ProducerInfo(r[0], r[1], r[2], r[3], r[4], r[5].replace(tzinfo=UTC), r[6].replace(tzinfo=UTC))
            for r in rows
        ]

    async def age_priorities(self, *, after: float, limit: int, now: datetime | None = None) -> list[int]:
        check_aging(after, limit)
        params = {"after": float(after), "limit": limit, "now": naive_utc(now)}
        return await self._fetch_ids(self.sql["age_priorities"], params)

    async def rescue_jobs(
        self,
        *,
        timeout: float,
        backstop: float,
        limit: int = 1000,
        live: Sequence[str] = (),
        foreign_timeout: float | None = None,
        now: datetime | None = None,
    ) -> RescueResult:
        params = {
            "timeout": timeout,
            "foreign_timeout": foreign_timeout,
            "backstop": backstop,
            "limit": limit,
            "live": list(live),
            "now": naive_utc(now),
            "insert_channel": self.insert_channel,
        }
        if self.errors_type is None:  # not read yet (an engine used before its schema was checked)
            await self._detect_errors_type()
        append = schema.ERRORS_APPEND[self.errors_type or "jsonb"]
        statement = self.sql.compose("rescue_jobs", append_error=append)
        async with self.pool.connection() as conn:
            cur = await conn.execute(statement.encode(), params)
            rows = await cur.fetchall()
            forget = {
                "timeout": timeout,
                "foreign_timeout": foreign_timeout,
                "live": list(live),
                "now": naive_utc(now),
            }
            await conn.execute(self.sql["delete_dead_producers"].encode(), forget)
        return RescueResult(
            available=tuple(r[0] for r in rows if r[1] == "available"),
            discarded=tuple(r[0] for r in rows if r[1] == "discarded"),
        )

    # -- pruning -----------------------------------------------------------------------------
    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        """Delete at most ``limit`` final jobs the policy lets go, batch by batch (each statement
        commits on its own); return how many went, by state."""
        clock = naive_utc(now)
        pruned = Pruned()
        async with self.pool.connection() as conn:
            queues: list[str] = []
            if retention.keep_per_queue is not None:
                cur = await conn.execute(self.sql["final_queues"].encode())
                queues = [queue for (queue,) in await cur.fetchall()]
            for batch in prune_batches(retention, queues):
                if pruned.count >= limit:
                    return pruned
                pruned += await self._prune_batch(conn, batch, limit - pruned.count, clock)
            age = cron_tick_age(retention)
            if age is not None:
                await conn.execute(self.sql["prune_cron_ticks"].encode(), {"max_age": age, "now": clock})
            records = retention.workflow_records
            if records is not None:
                params = {"max_age": records, "now": clock}
                await conn.execute(self.sql["prune_workflow_records"].encode(), params)
        return pruned

    async def _prune_batch(
        self, conn: psycopg.AsyncConnection[Any], batch: PruneBatch, limit: int, now: datetime | None
    ) -> Pruned:
        name = "prune_by_age" if batch.keep is None else "prune_by_count"
        statement = self.sql.compose(
            name,
            governed="prune_governed",
            spared="prune_spared",
            waiting_step="waiting_step",
            deleted_columns="deleted_columns",
            record_workflows="record_workflows",
        )
        params = {
            **batch.flags(),
            "queue": batch.queue,
            "worker": batch.worker,
            "before": batch.before,
            "max_age": batch.max_age,
            "keep": batch.keep,
            "limit": limit,
            "now": now,
        }
        cur = await conn.execute(statement.encode(), params)
        return Pruned.of(await cur.fetchall())

    async def count_prunable(self, retention: Retention, *, now: datetime | None = None) -> Pruned:
        """How many final jobs ``prune_jobs`` would delete with this policy, by state."""
        params = {
            "rules": orjson.dumps(ranked_rules(retention)).decode(),
            "max_age": retention.max_age,
            "keep_per_queue": retention.keep_per_queue,
            "max_rows": retention.max_rows,
            "now": naive_utc(now),
        }
        statement = self.sql.compose("count_prunable", spared="prune_spared", waiting_step="waiting_step")
        async with self.pool.connection() as conn:
            cur = await conn.execute(statement.encode(), params)
            return Pruned.of(await cur.fetchall())

    # -- cron --------------------------------------------------------------------------------
    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick not handled before (by anyone); return the new job ids."""
        if not ticks:
            return []
        records = [request_record(t.request) | {"name": t.name, "tick": t.tick} for t in ticks]
        params = {
            "entries": orjson.dumps(records).decode(),
            "now": naive_utc(now),
            "insert_channel": self.insert_channel,
        }
        return await self._fetch_ids(self.sql["insert_cron_jobs"], params)

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["last_cron_ticks"].encode(), {"names": list(names)})
            return {row[0]: row[1].replace(tzinfo=UTC) for row in await cur.fetchall()}

    # -- stored cron entries ----------------------------------------------------------------
    async def list_crons(self) -> list[StoredCron]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["list_crons"].encode())
            rows = await cur.fetchall()
        return [StoredCron.from_row(row, aware) for row in rows]

    async def add_cron(self, cron: StoredCron) -> bool:
        return await self._write_cron("add_cron", cron)

    async def update_cron(self, cron: StoredCron) -> bool:
        return await self._write_cron("update_cron", cron)

    async def delete_cron(self, name: str) -> bool:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["delete_cron"].encode(), {"name": name})
            return bool(await cur.fetchall())

    async def _write_cron(self, statement: str, cron: StoredCron) -> bool:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql[statement].encode(), cron.params())
            return bool(await cur.fetchall())

    # -- queue state -------------------------------------------------------------------------
    async def save_queue_state(
        self,
        name: str,
        queue: str,
        *,
        paused: bool | None = None,
        limit: int | None = None,
        limits: Mapping[str, Any] | None = None,
    ) -> None:
        params = {"name": name, "queue": queue, "paused": paused, "limit": limit}
        async with self.pool.connection() as conn, conn.transaction():
            if paused is not None or limit is not None or not limits:
                await conn.execute(self.sql["save_queue_state"].encode(), params)
            if limits:
                given = params | {"limits": orjson.dumps(dict(limits)).decode()}
                await conn.execute(self.sql["save_queue_limits"].encode(), given)

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["load_queue_states"].encode(), {"name": name})
            states = {row[0]: QueueState(paused=row[1], limit=row[2]) for row in await cur.fetchall()}
            cur = await conn.execute(self.sql["load_queue_limits"].encode(), {"name": name})
            return with_limits(states, await cur.fetchall())

    async def still_executing(
        self, attempts: Sequence[tuple[int, int]], *, producers: Sequence[str] | None = None
    ) -> set[int]:
        if not attempts:
            return set()
        params = {
            "jobs": orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode(),
            "producers": None if producers is None else list(producers),
        }
        return set(await self._fetch_ids(self.sql["still_executing"], params))

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        if not producers:
            return []
        params = {"producers": list(producers), "older_than": older_than, "now": naive_utc(now)}
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["lost_claims"].encode(), params)
            return [(row[0], row[1]) for row in await cur.fetchall()]
