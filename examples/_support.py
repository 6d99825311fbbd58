"""What the examples share: where the database is, which schema they use, and waiting for jobs.

Every example reads the database URL from ``CONVEYOR_DATABASE_URL`` and the PostgreSQL schema that
holds its tables from ``CONVEYOR_PREFIX``, so they never touch your ``public`` schema.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable

from conveyor import Conveyor, Job

DATABASE_URL = os.environ.get("CONVEYOR_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
PREFIX = os.environ.get("CONVEYOR_PREFIX", "conveyor_examples")


async def wait_until_final(app: Conveyor, ids: Iterable[int], timeout: float = 30.0) -> list[Job]:
    """Poll until every job is completed, discarded or cancelled; return the jobs in ``ids`` order."""
    wanted = list(ids)
    deadline = time.monotonic() + timeout
    while True:
        jobs = {j.id: j for j in await app.list_jobs(ids=wanted, limit=len(wanted))}
        if len(jobs) == len(wanted) and all(j.state.is_final for j in jobs.values()):
            return [jobs[i] for i in wanted]
        if time.monotonic() > deadline:
            states = {i: jobs[i].state.value if i in jobs else "missing" for i in wanted}
            raise TimeoutError(f"jobs did not finish in {timeout}s: {states}")
        await asyncio.sleep(0.05)
