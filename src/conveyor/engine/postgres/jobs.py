"""Managing jobs on PostgreSQL: get, list, cancel, retry, delete."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import psycopg

from conveyor.engine.postgres import foreign
from conveyor.engine.postgres.rows import naive_utc, read_jobs
from conveyor.engine.postgres.sessions import json_loaders
from conveyor.engine.postgres.workflows import PostgresWorkflows
from conveyor.filters import JobFilter
from conveyor.job import Job, JobState

#: Runs of ``retake_unique.sql`` at most: each failed one saw a twin commit (then seen by the next).
RETAKE_ATTEMPTS = 5
#: The errors after which ``retake_unique.sql`` runs again: a twin committed while it waited (unique
#: violation), or its wait crossed another transaction's (deadlock; see retake_unique.sql).
GIVE_WAY_STATES = frozenset({"23505", "40P01"})


def filter_params(criteria: JobFilter) -> dict[str, Any]:
    """The parameters of ``job_filter.sql`` (and ``limit``) for ``criteria``; None leaves a criterion out."""
    return {
        "ids": list(criteria.ids) or None,
        "every_state": not criteria.states,
        **{f"state_{state.value}": state in criteria.states for state in JobState},
        "queues": list(criteria.queues) or None,
        "workers": list(criteria.workers) or None,
        "tags": list(criteria.tags) or None,
        "before_id": criteria.before_id,
        "after_id": criteria.after_id,
        "args_contains": None
        if criteria.args_contains is None
        else orjson.dumps(criteria.args_contains).decode(),
        "limit": criteria.limit,
        "worker_suffix": criteria.worker_suffix,
        "worker_pattern": None if criteria.worker_suffix is None else suffix_pattern(criteria.worker_suffix),
        "scheduled_after": naive_utc(criteria.scheduled_after),
        "scheduled_before": naive_utc(criteria.scheduled_before),
        "attempted_after": naive_utc(criteria.attempted_after),
        "attempted_before": naive_utc(criteria.attempted_before),
        "completed_after": naive_utc(criteria.completed_after),
        "completed_before": naive_utc(criteria.completed_before),
    }


def suffix_pattern(suffix: str) -> str:
    """The LIKE pattern of the workers whose name ends with ``.`` and ``suffix`` (its ``%``, ``_``
    and backslashes escaped: they match only themselves)."""
    escaped = suffix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%.{escaped}"


class PostgresJobs(PostgresWorkflows):
    """``get_job``, ``list_jobs``, ``cancel_jobs``, ``retry_jobs``, ``delete_jobs``."""

    async def get_job(self, job_id: int) -> Job | None:
        statement = self.sql.compose("get_job", columns="job_columns")
        jobs = await self._fetch_jobs(statement, {"id": job_id})
        return jobs[0] if jobs else None

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        statement = self.sql.compose("list_jobs", columns="job_columns", filter="job_filter")
        params = filter_params(criteria)
        if params["limit"] is None:
            params["limit"] = 100
        return await self._fetch_jobs(statement, params)

    def list_jobs_sync(self, criteria: JobFilter, *, conn: Any) -> list[Job]:
        statement = self.sql.compose("list_jobs", columns="job_columns", filter="job_filter")
        params = filter_params(criteria)
        if params["limit"] is None:
            params["limit"] = 100
        # A cursor of our own (a caller's may be client-side, as Django's are), reading JSON as ours
        # do whatever loaders the caller's connection registered (Django reads jsonb as text).
        with psycopg.Cursor(foreign.sync_driver_connection(conn)) as cur:
            json_loaders(cur)
            cur.execute(statement.encode(), params)
            return read_jobs(cur.fetchall())

    async def cancel_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        params = filter_params(criteria) | {
            "now": naive_utc(now),
            "signal_channel": self.signal_channel,
            "ended_channel": self.ended_channel,
        }
        ids = await self._fetch_ids(self.sql.compose("cancel_jobs", filter="job_filter"), params, conn)
        if ids:
            # Cancelled steps end: the steps that depend on them settle now (in the caller's
            # transaction with conn; a settle that misses a concurrent change is the sweep's).
            await self.settle_after(ids, now, conn)
        return ids

    async def retry_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        params = filter_params(criteria) | {
            "now": naive_utc(now),
            "insert_channel": self.insert_channel,
        }
        if conn is not None:
            rows = await self._retry_on(await foreign.async_driver_connection(conn), params)
        else:
            async with self.pool.connection() as own:
                rows = await self._retry_on(own, params)
        held = [row[0] for row in rows if row[1] == JobState.SUSPENDED.value]
        # Steps held until their dependencies finish settle now, after the retry is written (in the
        # caller's transaction with conn): those whose dependencies completed go on at once, those
        # whose dependency stays failed are cancelled again by their policy, and are not retried.
        settled = await self.settle_after(held, now, conn) if held else {}
        return [row[0] for row in rows if settled.get(row[0]) is not JobState.CANCELLED]

    async def _retry_on(self, driver: foreign.AsyncDriver, params: dict[str, Any]) -> list[Any]:
        """``retry_jobs.sql``, then ``retake_unique.sql`` for the unique jobs that may keep their
        key, in one transaction (or a savepoint of the caller's); the rows (id, state, ...)."""
        statement = self.sql.compose("retry_jobs", filter="job_filter", unique_predicate="unique_predicate")
        async with foreign.atomic_async(driver):
            rows = await foreign.fetch_rows(driver, statement.encode(), params)
            retaking = [
                {"id": job_id, "uniq_key": key, "markers": orjson.Fragment(markers)}
                for job_id, _, key, markers, _ in rows
                if key is not None
            ]
            if retaking:
                await self._retake_unique(driver, orjson.dumps(retaking).decode())
        return list(rows)

    async def _retake_unique(self, driver: foreign.AsyncDriver, jobs: str) -> None:
        """Give retried unique jobs their markers back, in a savepoint run again each time a twin
        committed meanwhile (now seen, its job gives way); after ``RETAKE_ATTEMPTS`` the rest give
        way too. Never an error for a twin: the unique guide promises a retry gives way."""
        statement = self.sql.compose("retake_unique", unique_predicate="unique_predicate").encode()
        for _ in range(RETAKE_ATTEMPTS):
            try:
                async with foreign.atomic_async(driver):
                    await foreign.fetch_rows(driver, statement, {"jobs": jobs})
                return
            except Exception as exc:
                if getattr(exc, "sqlstate", None) not in GIVE_WAY_STATES:
                    raise

    async def delete_jobs(self, criteria: JobFilter, *, conn: Any = None) -> list[int]:
        params = filter_params(criteria)
        statement = self.sql.compose("delete_jobs", filter="job_filter")
        return sorted(await self._fetch_ids(statement, params, conn))
