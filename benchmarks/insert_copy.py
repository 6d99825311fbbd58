"""``insert-copy``: Conveyor's bulk insert against ``psql \\copy`` of the same rows, in one run.

The reference is the floor of any client: the same 100,000 rows (the columns and values Conveyor's
COPY path writes, ids included, formatted by ``copy_rows.TextRows`` into a file before any clock starts)
loaded by ``psql \\copy`` into a fresh ``oban_jobs`` of the same schema (a newly installed prefix:
same indexes, triggers and defaults). psql's own ``\\timing`` is the figure, so its start-up and
connection are not counted; its transaction (autocommit) and commit are.

Conveyor's side is ``enqueue_many`` of a generator of 100,000 ``JobRequest`` values, each built
during the call as an application would, on a fresh schema with a warmed-up pool: validation,
encoding, id reservation, COPY, notification and commit are all inside the clock.

The two alternate for ``ROUNDS`` rounds each; the figures are the median rate and range of each and
the ratio of the medians (target: Conveyor >= 0.8x ``\\copy``). PostgreSQL only.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from common import Figures, Settings, Stopwatch, fresh_app, job_requests, rate
from insert import BULK_JOBS, _warm_up

from conveyor.engine.postgres.copy_rows import COPY_COLUMNS, Pushback, TextRows

#: Rounds of each variant, alternated (copy, Conveyor, copy, ...).
ROUNDS = 5
_TIMING = re.compile(rb"^Time: ([0-9.]+) ms", re.MULTILINE)


def write_rows_file(path: Path, jobs: int) -> int:
    """The rows Conveyor's COPY would send for ``job_requests(jobs)``, ids 1..jobs, in COPY's text
    format (what ``insert_copy.sql`` reads); returns the file's size in bytes."""
    formatter = TextRows(datetime.now(UTC).replace(tzinfo=None))
    source = Pushback(job_requests(jobs))
    next_id = 1
    with path.open("wb") as out:
        while rows := formatter.take(source, 5_000):
            out.write(formatter.block(rows, range(next_id, next_id + len(rows))))
            next_id += len(rows)
        return out.tell()


async def psql_copy(dsn: str, table: str, path: Path) -> float:
    """Seconds that ``psql \\copy`` of ``path`` into ``table`` took, by psql's ``\\timing``."""
    command = f"\\copy {table} ({', '.join(COPY_COLUMNS)}) FROM '{path}'"
    process = await asyncio.create_subprocess_exec(
        "psql",
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        dsn,
        "-c",
        "\\timing on",
        "-c",
        command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    found = _TIMING.search(out)
    if process.returncode != 0 or found is None:
        raise RuntimeError(f"psql \\copy failed ({process.returncode}): {err.decode()}{out.decode()}")
    return float(found.group(1)) / 1000


async def _copy_round(settings: Settings, path: Path, jobs: int) -> float:
    async with fresh_app(settings) as app:
        engine = await app.engine()
        seconds = await psql_copy(settings.dsn, f"{engine.prefix}.oban_jobs", path)  # type: ignore[attr-defined]
    return rate(jobs, seconds)


async def _conveyor_round(settings: Settings, jobs: int) -> float:
    async with fresh_app(settings) as app:
        await _warm_up(app)
        with Stopwatch() as watch:
            ids = await app.enqueue_many(job_requests(jobs))
    if len(ids) != jobs:
        raise AssertionError(f"inserted {len(ids)} jobs, expected {jobs}")
    return rate(jobs, watch.seconds)


async def insert_copy(settings: Settings) -> Figures:
    if settings.engine != "postgres":
        raise SystemExit("insert-copy compares with psql \\copy: PostgreSQL only")
    jobs = settings.job_count(BULK_JOBS)
    copy: list[float] = []
    conveyor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="conveyor-copy-") as folder:
        path = Path(folder) / "jobs.copy"
        size = write_rows_file(path, jobs)
        for _ in range(ROUNDS):
            copy.append(await _copy_round(settings, path, jobs))
            conveyor.append(await _conveyor_round(settings, jobs))
    return {
        "jobs": jobs,
        "file_mb": round(size / 1e6, 1),
        "rounds": ROUNDS,
        "jobs_per_s": statistics.median(conveyor),
        "conveyor_range": [min(conveyor), max(conveyor)],
        "copy_jobs_per_s": statistics.median(copy),
        "copy_range": [min(copy), max(copy)],
        "ratio": round(statistics.median(conveyor) / statistics.median(copy), 3),
    }
