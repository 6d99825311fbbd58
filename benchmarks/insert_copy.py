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

from common import Figures, Settings, fresh_app, job_requests, rate
from insert import BULK_JOBS, timed_bulk_insert

from conveyor.engine.postgres.copy_rows import COPY_COLUMNS, Pushback, copy_rows

#: Rounds of each variant, alternated (copy, Conveyor, copy, ...).
ROUNDS = 5
_TIMING = re.compile(rb"^Time: ([0-9.]+) ms", re.MULTILINE)


def write_rows_file(path: Path, jobs: int, *, binary: bool = False) -> int:
    """The rows Conveyor's COPY would send for ``job_requests(jobs)``, ids 1..jobs, in COPY's text
    (or binary) format, as ``insert_copy.sql`` reads them; returns the file's size in bytes."""
    formatter = copy_rows(datetime.now(UTC).replace(tzinfo=None), binary=binary)
    source = Pushback(job_requests(jobs))
    rows: list[bytes] = []
    while chunk := formatter.take(source, 5_000):
        rows += chunk
    with path.open("wb") as out:
        for block in formatter.blocks(rows, range(1, jobs + 1)):
            out.write(block)
        return out.tell()


async def psql_copy(dsn: str, table: str, path: Path, *, binary: bool = False) -> float:
    """Seconds that ``psql \\copy`` of ``path`` into ``table`` took, by psql's ``\\timing``."""
    options = " WITH (FORMAT binary)" if binary else ""
    command = f"\\copy {table} ({', '.join(COPY_COLUMNS)}) FROM '{path}'{options}"
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


async def _copy_round(settings: Settings, path: Path, jobs: int, *, binary: bool = False) -> float:
    async with fresh_app(settings) as app:
        engine = await app.engine()
        table = f"{engine.prefix}.oban_jobs"  # type: ignore[attr-defined]
        seconds = await psql_copy(settings.dsn, table, path, binary=binary)
    return rate(jobs, seconds)


async def insert_copy(settings: Settings) -> Figures:
    rounds = settings.round_count(ROUNDS)
    if settings.engine != "postgres":
        raise SystemExit("insert-copy compares with psql \\copy: PostgreSQL only")
    jobs = settings.job_count(BULK_JOBS)
    copy: list[float] = []
    copy_binary: list[float] = []
    conveyor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="conveyor-copy-") as folder:
        path, binary_path = Path(folder) / "jobs.copy", Path(folder) / "jobs.bin"
        size = write_rows_file(path, jobs)
        write_rows_file(binary_path, jobs, binary=True)
        for _ in range(rounds):
            copy.append(await _copy_round(settings, path, jobs))
            conveyor.append(rate(jobs, await timed_bulk_insert(settings, jobs)))
            copy_binary.append(await _copy_round(settings, binary_path, jobs, binary=True))
    return {
        "jobs": jobs,
        "file_mb": round(size / 1e6, 1),
        "rounds": rounds,
        "jobs_per_s": statistics.median(conveyor),
        "conveyor_range": [min(conveyor), max(conveyor)],
        "copy_jobs_per_s": statistics.median(copy),
        "copy_range": [min(copy), max(copy)],
        "ratio": round(statistics.median(conveyor) / statistics.median(copy), 3),
        "copy_binary_jobs_per_s": statistics.median(copy_binary),
        "copy_binary_range": [min(copy_binary), max(copy_binary)],
        "ratio_to_binary": round(statistics.median(conveyor) / statistics.median(copy_binary), 3),
    }
