"""Workflow steps on PostgreSQL: settling suspended steps once their dependencies have finished, and
reading a workflow's steps (``conveyor/workflow.py``)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
import psycopg

from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.core import PostgresCore
from conveyor.engine.postgres.rows import naive_utc
from conveyor.job import Job, JobState
from conveyor.job_ids import plain_ids

log = logging.getLogger("conveyor.workflows")

#: Where settle.sql and sweep_steps.sql look a dependency's state up (step_state.sql): the workflow
#: and the step name, as expressions of the statement's rows.
STEP_LOOKUPS = {
    "step_state_pending": ("c.workflow", "(c.deps ->> i)"),
    "step_state_ended": ("r.workflow", "dn.name"),
    "step_state_sweep": ("(c.meta ->> 'workflow_id')", "dn.name"),
}

#: Runs one statement and returns its rows (on our connection or a caller's).
Fetch = Callable[[bytes, dict[str, Any]], Awaitable[Sequence[tuple[Any, ...]]]]

#: Dependents of each given step settled by the first statement of a settle, and at most by each
#: later one (the slice doubles): a fan-out's first steps are committed, and start, while the rest
#: are settled.
FIRST_SLICE = 500
LAST_SLICE = 4000

#: Steps settled per sweep statement.
SWEEP_BATCH = 500


class PostgresWorkflows(PostgresCore):
    """``settle_steps``, ``sweep_steps``, ``workflow_jobs``."""

    def _settle_statement(self, name: str) -> bytes:
        found = self._settle_statements.get(name)
        if found is None:
            parts = {"settle": "settle", "waiting_step": "waiting_step"}
            text = self.sql.compose(name, **parts, step_meta="step_meta", step_policy="step_policy")
            lookup = self.sql["step_state"].strip()
            for placeholder, (workflow, step) in STEP_LOOKUPS.items():
                filled = lookup.replace("{workflow}", workflow).replace("{step}", step)
                text = text.replace("{" + placeholder + "}", filled)
            found = self._settle_statements[name] = text.encode()
        return found

    async def settle_steps(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: Any = None
    ) -> dict[int, JobState]:
        if conn is not None:
            driver = await foreign.async_driver_connection(conn)
            return await self._settle(ids, now, functools.partial(foreign.fetch_rows, driver))
        async with self.pool.connection() as own:
            return await self._settle(ids, now, functools.partial(_fetch_all, own))

    async def _settle(self, ids: Sequence[int], now: datetime | None, fetch: Fetch) -> dict[int, JobState]:
        settled: dict[int, JobState] = {}
        statement = self._settle_statement("settle_steps")
        given = plain_ids(ids)
        while given:
            cancelled: list[int] = []
            skip, take, more = 0, FIRST_SLICE, True
            while more:
                params = {
                    "ids": given,
                    "skip": skip,
                    "take": take,
                    "now": naive_utc(now),
                    "channel": self.insert_channel,
                }
                rows = await fetch(statement, params)
                more = bool(rows and rows[0][2])
                found = {row[0]: JobState(row[1]) for row in rows if row[0] is not None}
                settled |= found
                cancelled += [job_id for job_id, state in found.items() if state is JobState.CANCELLED]
                skip, take = skip + take, min(take * 2, LAST_SLICE)
            # A step cancelled because of its dependency ends too: the steps after it settle next.
            given = cancelled
        return settled

    async def settle_after(
        self,
        ids: Sequence[int],
        now: datetime | None,
        conn: Any = None,
        *,
        own: psycopg.AsyncConnection[Any] | None = None,
    ) -> dict[int, JobState]:
        """``settle_steps`` after a change to ``ids`` was written (on the caller's ``conn``, or on
        ``own``, the engine's connection that wrote it); what it settled. A failure is logged, not
        raised (nothing settled): the change stands, and the leader's sweep settles what this did not."""
        try:
            if own is not None:
                return await self._settle(ids, now, functools.partial(_fetch_all, own))
            return await self.settle_steps(ids, now=now, conn=conn)
        except Exception as exc:
            if conn is not None:  # the caller's transaction failed with it: theirs to see
                raise
            log.warning("settling the steps after jobs %s failed (%r); the sweep will", list(ids)[:10], exc)
            return {}

    async def sweep_steps(self, *, now: datetime | None = None, limit: int = 10_000) -> dict[int, JobState]:
        settled: dict[int, JobState] = {}
        statement = self._settle_statement("sweep_steps")
        after, seen = 0, 0
        while seen < limit:
            params = {
                "after": after,
                "limit": SWEEP_BATCH,
                "now": naive_utc(now),
                "channel": self.insert_channel,
            }
            async with self.pool.connection() as conn:
                page = await conn.execute(
                    self.sql.compose("sweep_page", waiting_step="waiting_step").encode(), params
                )
                bounds = await page.fetchone()
            if bounds is None or bounds[0] is None:
                break
            rows = await self._rows(statement, params, None)
            settled |= {row[0]: JobState(row[1]) for row in rows}
            after, seen = bounds[0], seen + bounds[1]
            if bounds[1] < SWEEP_BATCH:
                break
        cancelled = [job_id for job_id, state in settled.items() if state is JobState.CANCELLED]
        if cancelled:
            settled |= await self.settle_steps(cancelled, now=now)
        return settled

    async def hold_steps(self, ids: Sequence[int], *, conn: Any = None) -> list[int]:
        rows = await self._rows(self.sql["hold_jobs"].encode(), {"ids": plain_ids(ids)}, conn)
        return sorted(row[0] for row in rows)

    async def add_dependents(
        self, workflow_id: str, added: Mapping[str, Sequence[str]], *, conn: Any = None
    ) -> None:
        params = {
            "workflow": workflow_id,
            "added": orjson.dumps({k: list(v) for k, v in added.items()}).decode(),
        }
        await self._rows(self.sql["add_dependents"].encode(), params, conn)

    async def workflow_jobs(self, workflow_id: str) -> list[Job]:
        statement = self.sql.compose("workflow_jobs", columns="job_columns")
        return await self._fetch_jobs(statement, {"workflow": workflow_id})

    async def _rows(self, statement: bytes, params: dict[str, Any], conn: Any) -> list[tuple[Any, ...]]:
        if conn is not None:
            driver = await foreign.async_driver_connection(conn)
            return await foreign.fetch_rows(driver, statement, params)
        async with self.pool.connection() as own:
            cur = await own.execute(statement, params)
            return list(await cur.fetchall())


async def _fetch_all(
    conn: psycopg.AsyncConnection[Any], statement: bytes, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    cur = await conn.execute(statement, params)
    return list(await cur.fetchall())
