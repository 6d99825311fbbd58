"""Pruning on MySQL/MariaDB: the plan of ``engine/_prune_plan.py``, batch by batch.

MySQL's ``DELETE`` cannot read the table it deletes from in a subquery, and returns no rows: each
batch locks the ids it will delete with a ``SELECT ... FOR UPDATE`` (by their state, bounded), then
deletes them by id, in one transaction per prune, recording the workflows of the steps it deleted
(``workflow_records.record_workflows``) in that transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._prune_plan import PruneBatch, cron_tick_age, prune_batches, ranked_rules
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import check_now, id_array, utc_clock
from conveyor.engine.mysql.workflow_records import record_workflows
from conveyor.retention import Pruned, Retention

#: The time column each final state ends at.
ENDED = {"completed": "completed_at", "cancelled": "cancelled_at", "discarded": "discarded_at"}


class MysqlPruning(MysqlCore):
    """``prune_jobs``, ``count_prunable``."""

    def _prune_statement(self, name: str) -> str:
        return self.files.compose(
            name, governed="prune_governed", spared="prune_spared", deleted_columns="deleted_columns"
        )

    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        """Delete at most ``limit`` final jobs the policy lets go, batch by batch, in one
        transaction; return how many went, by state."""
        check_now(now)
        clock = utc_clock(now)
        files = self.files
        pruned = Pruned()
        # READ COMMITTED: the rows a batch scans and does not take are let go at once (claims skip
        # locked rows, available jobs among them under REPEATABLE READ).
        async with self.transaction(committed=True) as cursor:
            queues: list[str] = []
            if retention.keep_per_queue is not None:
                await cursor.execute(files["final_queues"])
                queues = sorted(row[0] for row in await cursor.fetchall())
            for batch in prune_batches(retention, queues):
                if pruned.count >= limit:
                    return pruned
                pruned += await self._prune_batch(cursor, batch, limit - pruned.count, clock)
            age = cron_tick_age(retention)
            if age is not None:
                await cursor.execute(files["prune_cron_ticks"], {"cutoff": clock - timedelta(seconds=age)})
            if retention.workflow_records is not None:
                cutoff = clock - timedelta(seconds=retention.workflow_records)
                await cursor.execute(files["prune_workflow_records"], {"cutoff": cutoff})
        return pruned

    async def _prune_batch(self, cursor: Any, batch: PruneBatch, limit: int, clock: datetime) -> Pruned:
        scope = {"queue": batch.queue, "worker": batch.worker, "before": batch.before}
        rows: list[Any] = []
        if batch.keep is None:
            assert batch.max_age is not None
            cutoff = clock - timedelta(seconds=batch.max_age)
            for state in (s for s in ENDED if s in batch.states):
                if len(rows) >= limit:
                    break
                statement = self._prune_statement("prune_by_age").replace("{ended}", ENDED[state])
                params = scope | {"state": state, "cutoff": cutoff, "limit": limit - len(rows)}
                await cursor.execute(statement, params)
                rows += await cursor.fetchall()
        else:
            params = scope | {"states": tuple(batch.states), "keep": batch.keep, "limit": limit}
            await cursor.execute(self._prune_statement("prune_by_count"), params)
            rows = list(await cursor.fetchall())
        if rows:
            await cursor.execute(self.files["delete_jobs"], {"ids": id_array(int(row[0]) for row in rows)})
            await record_workflows(cursor, self.files, rows)
        return Pruned.of((row[1], 1) for row in rows)

    async def count_prunable(self, retention: Retention, *, now: datetime | None = None) -> Pruned:
        """How many final jobs ``prune_jobs`` would delete with this policy, by state."""
        check_now(now)
        clock = utc_clock(now)

        def cutoff(max_age: float | None) -> str | None:
            return None if max_age is None else str(clock - timedelta(seconds=max_age))

        rules = [rule | {"cutoff": cutoff(rule["max_age"])} for rule in ranked_rules(retention)]
        params = {
            "rules": orjson.dumps(rules).decode(),
            "cutoff": None if retention.max_age is None else clock - timedelta(seconds=retention.max_age),
            "keep_per_queue": retention.keep_per_queue,
            "max_rows": retention.max_rows,
        }
        statement = self.files.compose("count_prunable", spared="prune_spared")
        async with self.reading() as cursor:
            await cursor.execute(statement, params)
            return Pruned.of(await cursor.fetchall())
