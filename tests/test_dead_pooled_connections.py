"""PostgreSQL: a long-lived client whose pooled connections were terminated (a database restart, a
failover, an operator's ``pg_terminate_backend``) does not fail its next call (issue 31.12).

Each test's app connects under an application_name of its own, so terminating its backends from
another connection touches nobody else on the shared server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from conveyor import Conveyor, JobFilter, JobRequest, JobState
from conveyor.engine.postgres import PostgresEngine
from tests.conftest import DSN
from tests.helpers import poll


def named(name: str) -> str:
    return f"{DSN}{'&' if '?' in DSN else '?'}application_name={name}"


async def terminate(name: str) -> int:
    """Terminate every backend connected as ``name``; return how many, once they are gone.

    It waits for the terminated backends themselves, not for the name to vanish: a pool that refills
    at once (the blocking pool keeps its minimum) connects under the same name meanwhile."""
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT array_agg(pid) FROM (SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND pid <> pg_backend_pid() OFFSET 0) AS t WHERE pg_terminate_backend(pid)",
            (name,),
        )
        row = await cur.fetchone()
        pids: list[int] = list(row[0] or []) if row is not None else []

        async def left() -> Any:
            cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,))
            return await cur.fetchone()

        await poll(
            left, lambda found: found is not None and found[0] == 0, what="the backends to go", every=0.01
        )
        return len(pids)


CALLS: dict[str, Callable[[Conveyor, int], Awaitable[Any]]] = {
    "get_job": lambda app, job_id: app.get_job(job_id),
    "list_jobs": lambda app, job_id: app.list_jobs(JobFilter(ids=(job_id,))),
    "enqueue": lambda app, job_id: app.enqueue(JobRequest("a.b")),
    "enqueue_many": lambda app, job_id: app.enqueue_many([JobRequest("a.b")] * 300),
    "enqueue_sync": lambda app, job_id: asyncio.to_thread(app.enqueue_sync, JobRequest("a.b")),
    "get_job_sync": lambda app, job_id: asyncio.to_thread(app.get_job_sync, job_id),
    "cancel_jobs": lambda app, job_id: app.cancel_jobs(JobFilter(ids=(job_id,))),
}


@pytest.mark.parametrize("call", sorted(CALLS))
async def test_the_first_call_after_the_pools_connections_were_terminated_succeeds(
    prefix: str, call: str
) -> None:
    name = f"conveyor_dead_{uuid.uuid4().hex[:10]}"
    app = Conveyor(named(name), prefix=prefix)
    try:
        await app.install()
        job_id = await app.enqueue(JobRequest("a.b"))
        await CALLS[call](app, job_id)  # every pool the call uses holds a connection now
        for _ in range(2):  # terminated twice: the replacements are checked as well
            assert await terminate(name) >= 1
            await CALLS[call](app, job_id)
        job = await app.get_job(job_id)
        assert job is not None and job.state in (JobState.AVAILABLE, JobState.CANCELLED)
    finally:
        await app.close()


async def test_the_hot_pool_survives_terminated_connections(prefix: str) -> None:
    name = f"conveyor_dead_{uuid.uuid4().hex[:10]}"
    engine = PostgresEngine(named(name), prefix=prefix, max_connections=4)
    await engine.open()
    try:
        await engine.install()
        await engine.insert([JobRequest("a.b"), JobRequest("a.b")])
        await engine.fetch_jobs("default", 1, node="n", producer=str(uuid.uuid4()))
        assert await terminate(name) >= 1
        (job,) = await engine.fetch_jobs("default", 1, node="n", producer=str(uuid.uuid4()))
        assert job.state is JobState.EXECUTING
    finally:
        await engine.close()
