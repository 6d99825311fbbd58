"""Jobs of the pooler tests (tests/test_pgbouncer.py): each run is recorded with its attempt and
the time it started, keyed by a ``key`` unique to each test."""

from __future__ import annotations

import time
from collections import defaultdict

from conveyor import current_job, job

#: (job id, attempt, time.time() at the start of the run), per test key.
RUNS: defaultdict[str, list[tuple[int, int, float]]] = defaultdict(list)


@job(queue="pooled")
async def record(key: str) -> None:
    context = current_job()
    RUNS[key].append((context.id, context.attempt, time.time()))
