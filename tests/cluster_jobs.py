"""Jobs the cluster tests run. They live in an importable module so nodes in other processes
(``conveyor start --import tests.cluster_jobs``) resolve them from the ``worker`` column.

Nothing here carries ``cron=``: importing this module must not add entries to a node's crontab.
"""

from __future__ import annotations

import asyncio
import os
import time

import psycopg
from psycopg import sql

from conveyor import Chunk, current_job, job
from conveyor.job import Job


def _table(prefix: str, name: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(prefix), sql.Identifier(name))


def _create_start_log(dsn: str, prefix: str, name: str, more: str = "") -> None:
    """A table of job starts: which job, which process, which attempt, when (and ``more`` columns)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (job_id bigint NOT NULL, pid integer NOT NULL, attempt integer NOT NULL,"
                " started_at timestamptz NOT NULL DEFAULT clock_timestamp()" + more + ")"
            ).format(_table(prefix, name))
        )


def runs_table(prefix: str) -> sql.Composed:
    return _table(prefix, "runs")


def create_runs_table(dsn: str, prefix: str) -> None:
    """The table ``record_run`` writes to: one row per start of a job, whichever process ran it."""
    _create_start_log(dsn, prefix, "runs")


@job(queue="default")
async def record_run(dsn: str, prefix: str, first: float, later: float = 0.0) -> None:
    """Record this start in ``<prefix>.runs``, then sleep ``first`` seconds on the first attempt
    and ``later`` seconds on any later one (so a rescued run finishes quickly)."""
    context = current_job()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("INSERT INTO {} (job_id, pid, attempt) VALUES (%s, %s, %s)").format(runs_table(prefix)),
            (context.id, os.getpid(), context.attempt),
        )
    await asyncio.sleep(first if context.attempt == 1 else later)


@job(queue="default")
async def noop(n: int = 0) -> int:
    return n


@job(queue="default")
async def cron_tick(label: str = "", x: int = 0) -> str:
    return label


def spans_table(prefix: str) -> sql.Composed:
    return _table(prefix, "spans")


def create_spans_table(dsn: str, prefix: str) -> None:
    """The table ``record_span`` writes to: when each start of a job began and ended, and where."""
    _create_start_log(dsn, prefix, "spans", ", ended_at timestamptz")


@job(queue="limited")
async def record_span(dsn: str, prefix: str, seconds: float) -> None:
    """Record when this start began, sleep ``seconds``, record when it ended (in ``<prefix>.spans``).
    Both records fall inside the time the job's row is executing, so overlapping spans never
    outnumber the jobs the database counts as running."""
    context = current_job()
    table = spans_table(prefix)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("INSERT INTO {} (job_id, pid, attempt) VALUES (%s, %s, %s)").format(table),
            (context.id, os.getpid(), context.attempt),
        )
        await asyncio.sleep(seconds)
        await conn.execute(
            sql.SQL("UPDATE {} SET ended_at = clock_timestamp() WHERE job_id = %s AND attempt = %s").format(
                table
            ),
            (context.id, context.attempt),
        )


@job(queue="limited")
async def sleep_step(seconds: float) -> None:
    """A workflow step that only takes time (the SQLite fault test reads everything from the rows)."""
    await asyncio.sleep(seconds)


@job(queue="limited")
async def sleeps_first(first: float, later: float = 0.0) -> int:
    """Sleep ``first`` seconds on the first attempt and ``later`` on any later one (a rescued run
    ends quickly); return the attempt. Needs no table, so it runs on any engine."""
    context = current_job()
    await asyncio.sleep(first if context.attempt == 1 else later)
    return context.attempt


@job(queue="chunked", chunk=Chunk(size=3, timeout=0.2))
def record_chunk(jobs: list[Job]) -> None:
    """A chunk worker: append a start of each of its jobs (``job_id pid attempt``) to the file named
    by the ``log`` arg (any engine's processes can), then sleep 30 s when its jobs are on their
    first attempt (a node to kill mid-chunk). A thread chunk worker."""
    with open(jobs[0].args["log"], "a") as log:
        log.writelines(f"{one.id} {os.getpid()} {one.attempt}\n" for one in jobs)
    if any(one.attempt == 1 for one in jobs):
        time.sleep(30)
