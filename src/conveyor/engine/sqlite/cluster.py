"""Cluster duties on SQLite: leadership, producers and rescue, lost claims, pruning, cron and queue
state."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from conveyor.engine._aging import check_aging
from conveyor.engine._prune_plan import PruneBatch, cron_tick_age, prune_batches, ranked_rules
from conveyor.engine.sqlite.core import FILES, SqliteCore, ago
from conveyor.engine.sqlite.database import Tx
from conveyor.engine.sqlite.rows import (
    check_now,
    later_text,
    parse_optional_time,
    parse_time,
    time_text,
    utc_clock,
)
from conveyor.engine.sqlite.workflow_records import record_workflows
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


class SqliteCluster(SqliteCore):
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
        check_now(now)
        statement = FILES.compose("elect_leader", own_producer="own_producer")

        def run(tx: Tx) -> Any:
            clock = utc_clock(now)
            params = {
                "name": name,
                "node": node,
                "now": time_text(clock),
                "expires_at": later_text(clock, ttl),
                "take_from_foreign": take_from_foreign,
                "stale_before": None if stale_after is None else ago(clock, stale_after),
            }
            return tx.conn.execute(statement, params).fetchone()

        row = await self.database.write(run)
        return LeaderInfo(row[0], parse_time(row[1])) if row else None

    async def resign_leader(self, name: str, node: str) -> bool:
        statement = FILES["resign_leader"]

        def run(tx: Tx) -> bool:
            rows = tx.conn.execute(statement, {"name": name, "node": node}).fetchall()
            clock = time_text(utc_clock(None))
            for resigned, by in rows:
                tx.notify("leader", {"action": "resign", "node": by, "name": resigned}, clock)
            return bool(rows)

        return await self.database.write(run)

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        check_now(now)
        statement = FILES["get_leader"]

        def run(conn: sqlite3.Connection) -> Any:
            return conn.execute(statement, {"name": name, "now": time_text(utc_clock(now))}).fetchone()

        row = await self.database.read(run)
        return LeaderInfo(row[0], parse_time(row[1]), parse_optional_time(row[2])) if row else None

    # -- producers and rescue ----------------------------------------------------------------
    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        check_now(now)
        if not beats:
            return
        records = orjson.dumps(
            [{"uuid": b.uuid, "queue": b.queue, "meta": b.meta, "holding": list(b.holding)} for b in beats]
        ).decode()
        statement = FILES["upsert_producers"]

        def run(tx: Tx) -> None:
            clock = time_text(utc_clock(now))
            tx.conn.execute(statement, {"name": name, "node": node, "producers": records, "now": clock})

        await self.database.write(run)

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        if not uuids:
            return
        params = {"uuids": orjson.dumps(list(uuids)).decode()}
        statement = FILES["delete_producers"]
        await self.database.write(lambda tx: tx.conn.execute(statement, params))

    async def list_producers(self) -> list[ProducerInfo]:
        statement = FILES["list_producers"]
        rows = await self.database.read(lambda conn: conn.execute(statement).fetchall())
        return [
            ProducerInfo(r[0], r[1], r[2], r[3], orjson.loads(r[4]), parse_time(r[5]), parse_time(r[6]))
            for r in rows
        ]

    async def age_priorities(self, *, after: float, limit: int, now: datetime | None = None) -> list[int]:
        check_now(now)
        check_aging(after, limit)
        statement = FILES["age_priorities"]

        def run(tx: Tx) -> list[int]:
            params = {"cutoff": ago(utc_clock(now), after), "limit": limit}
            return sorted(row[0] for row in tx.conn.execute(statement, params))

        return await self.database.write(run)

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
        check_now(now)
        rescue = FILES.compose("rescue_jobs", own_producer="own_producer")
        forget = FILES.compose("delete_dead_producers", own_producer="own_producer")
        live_json = orjson.dumps(list(live)).decode()

        def run(tx: Tx) -> list[Any]:
            clock = utc_clock(now)
            stamp = time_text(clock)
            dead = {
                "dead_before": ago(clock, timeout),
                "foreign_dead_before": None if foreign_timeout is None else ago(clock, foreign_timeout),
                "live": live_json,
            }
            params = {
                "now": stamp,
                # The errors entry's time, as the runner writes one (acks.error_entry).
                "at": clock.replace(tzinfo=UTC).isoformat(),
                "backstop_before": ago(clock, backstop),
                "backstop": f"{backstop:g}",
                "limit": limit,
                **dead,
            }
            rows = sorted(tx.conn.execute(rescue, params).fetchall())
            for queue in sorted({row[1] for row in rows if row[2] == "available"}):
                tx.notify("insert", {"queue": queue}, stamp)
            tx.conn.execute(forget, dead)
            return rows

        rows = await self.database.write(run)
        return RescueResult(
            available=tuple(r[0] for r in rows if r[2] == "available"),
            discarded=tuple(r[0] for r in rows if r[2] == "discarded"),
        )

    # -- pruning -----------------------------------------------------------------------------
    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        """Delete at most ``limit`` final jobs the policy lets go, batch by batch, in one write
        transaction; return how many went, by state."""
        check_now(now)

        def run(tx: Tx) -> Pruned:
            clock = utc_clock(now)
            conn = tx.conn
            pruned = Pruned()
            queues: list[str] = []
            if retention.keep_per_queue is not None:
                queues = [queue for (queue,) in conn.execute(FILES["final_queues"]).fetchall()]
            for batch in prune_batches(retention, queues):
                if pruned.count >= limit:
                    return pruned
                pruned += _prune_batch(conn, batch, limit - pruned.count, clock)
            age = cron_tick_age(retention)
            if age is not None:
                conn.execute(FILES["prune_cron_ticks"], {"cutoff": ago(clock, age)})
            if retention.workflow_records is not None:
                cutoff = ago(clock, retention.workflow_records)
                conn.execute(FILES["prune_workflow_records"], {"cutoff": cutoff})
            return pruned

        return await self.database.write(run)

    async def count_prunable(self, retention: Retention, *, now: datetime | None = None) -> Pruned:
        """How many final jobs ``prune_jobs`` would delete with this policy, by state."""
        check_now(now)
        clock = utc_clock(now)
        rules = [
            rule | {"cutoff": None if rule["max_age"] is None else ago(clock, rule["max_age"])}
            for rule in ranked_rules(retention)
        ]
        params = {
            "rules": orjson.dumps(rules).decode(),
            "cutoff": None if retention.max_age is None else ago(clock, retention.max_age),
            "keep_per_queue": retention.keep_per_queue,
            "max_rows": retention.max_rows,
        }
        statement = FILES.compose("count_prunable", spared="prune_spared")
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return Pruned.of(rows)

    # -- cron --------------------------------------------------------------------------------
    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick not handled before (by anyone); return the new job ids."""
        check_now(now)
        if not ticks:
            return []
        claim, insert = FILES["claim_cron_tick"], FILES["cron_job"]

        def run(tx: Tx) -> list[int]:
            clock = time_text(utc_clock(now))
            ids: list[int] = []
            queues: set[str] = set()
            for tick in ticks:
                claimed = tx.conn.execute(
                    claim, {"name": tick.name, "tick": time_text(tick.tick), "now": clock}
                ).fetchall()
                if not claimed:
                    continue
                request = tick.request
                params = {
                    "queue": request.queue,
                    "worker": request.worker,
                    "args": request.args_json.decode(),
                    "meta": request.meta_json.decode(),
                    "tags": orjson.dumps(request.tags).decode(),
                    "priority": request.priority,
                    "max_attempts": request.max_attempts,
                    "now": clock,
                }
                ids.append(tx.conn.execute(insert, params).fetchone()[0])
                queues.add(request.queue)
            for queue in sorted(queues):
                tx.notify("insert", {"queue": queue}, clock)
            return sorted(ids)

        return await self.database.write(run)

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        if not names:
            return {}
        params = {"names": orjson.dumps(list(names)).decode()}
        statement = FILES["last_cron_ticks"]
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return {row[0]: parse_time(row[1]) for row in rows}

    # -- stored cron entries ----------------------------------------------------------------
    async def list_crons(self) -> list[StoredCron]:
        statement = FILES["list_crons"]
        rows = await self.database.read(lambda conn: conn.execute(statement).fetchall())
        return [StoredCron.from_row(row, parse_optional_time) for row in rows]

    async def add_cron(self, cron: StoredCron) -> bool:
        return await self._write_cron("add_cron", cron)

    async def update_cron(self, cron: StoredCron) -> bool:
        return await self._write_cron("update_cron", cron)

    async def delete_cron(self, name: str) -> bool:
        statement, params = FILES["delete_cron"], {"name": name}
        return bool(await self.database.write(lambda tx: tx.conn.execute(statement, params).fetchall()))

    async def _write_cron(self, name: str, cron: StoredCron) -> bool:
        statement = FILES[name]
        params = cron.params()  # paused: sqlite3 stores a bool as the integer it is
        return bool(await self.database.write(lambda tx: tx.conn.execute(statement, params).fetchall()))

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
        statement = FILES["save_queue_state"]

        def run(tx: Tx) -> None:
            params = {
                "name": name,
                "queue": queue,
                "paused": None if paused is None else int(bool(paused)),
                "limit": limit,
                "now": time_text(utc_clock(None)),
            }
            if paused is not None or limit is not None or not limits:
                tx.conn.execute(statement, params)
            if limits:
                kept = tx.conn.execute(FILES["load_queue_limits"], {"name": name}).fetchall()
                state = with_limits({queue: QueueState()}, [r for r in kept if r[0] == queue])[queue]
                merged = orjson.dumps(state.limits | dict(limits)).decode()
                tx.conn.execute(FILES["save_queue_limits"], params | {"limits": merged})

        await self.database.write(run)

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        def run(conn: sqlite3.Connection) -> dict[str, QueueState]:
            rows = conn.execute(FILES["load_queue_states"], {"name": name}).fetchall()
            states = {
                row[0]: QueueState(paused=None if row[1] is None else bool(row[1]), limit=row[2])
                for row in rows
            }
            return with_limits(states, conn.execute(FILES["load_queue_limits"], {"name": name}).fetchall())

        return await self.database.read(run)

    async def still_executing(
        self, attempts: Sequence[tuple[int, int]], *, producers: Sequence[str] | None = None
    ) -> set[int]:
        if not attempts:
            return set()
        params = {
            "jobs": orjson.dumps([{"id": i, "attempt": a} for i, a in attempts]).decode(),
            "producers": None if producers is None else orjson.dumps(list(producers)).decode(),
        }
        statement = FILES["still_executing"]
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return {row[0] for row in rows}

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        check_now(now)
        if not producers:
            return []
        statement = FILES["lost_claims"]
        params = {
            "producers": orjson.dumps(list(producers)).decode(),
            "claimed_before": ago(utc_clock(now), older_than),
        }
        rows = await self.database.read(lambda conn: conn.execute(statement, params).fetchall())
        return [(row[0], row[1]) for row in rows]


def _prune_batch(conn: sqlite3.Connection, batch: PruneBatch, limit: int, clock: datetime) -> Pruned:
    """Run one batch of a prune; how many jobs it deleted, by state."""
    name = "prune_by_age" if batch.keep is None else "prune_by_count"
    params = {
        **batch.flags(),
        "queue": batch.queue,
        "worker": batch.worker,
        "before": batch.before,
        "cutoff": None if batch.max_age is None else ago(clock, batch.max_age),
        "keep": batch.keep,
        "limit": limit,
    }
    statement = FILES.compose(
        name, governed="prune_governed", spared="prune_spared", deleted_columns="deleted_columns"
    )
    deleted = conn.execute(statement, params).fetchall()
    record_workflows(conn, deleted)
    return Pruned.of((row[1], 1) for row in deleted)
