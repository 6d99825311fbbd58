"""Jobs the fleet-control tests run on node subprocesses (``conveyor start --import tests.fleet_jobs``).

They run in other processes, so they report what they did to the test through the database: a
``fleet_marks`` table in the test's schema (created by the test) gets one row per thing a job wants
the test to see, stamped with the node (``$CONVEYOR_NODE``), the process id and the database clock.
Every job takes the ``dsn`` and ``prefix`` to write to.
"""

from __future__ import annotations

import asyncio
import os
import time

import psycopg
from psycopg import sql

from conveyor import current_job, job

#: Seconds the "hold" jobs run when nobody stops them: far longer than any test waits.
HOLD = 30.0

_INSERT = "INSERT INTO {} (job_id, node, mark, pid) VALUES (%s, %s, %s, %s)"


def marks_table(prefix: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(prefix), sql.Identifier("fleet_marks"))


def create_marks_sql(prefix: str) -> sql.Composed:
    return sql.SQL(
        "CREATE TABLE {} (job_id bigint NOT NULL, node text NOT NULL, mark text NOT NULL, "
        "pid integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
    ).format(marks_table(prefix))


def _node() -> str:
    return os.environ.get("CONVEYOR_NODE", "?")


def mark(dsn: str, prefix: str, what: str) -> None:
    """Record ``what`` for the running job (blocking: threads and worker processes)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(_INSERT).format(marks_table(prefix)), (current_job().id, _node(), what, os.getpid())
        )


async def mark_async(dsn: str, prefix: str, what: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(_INSERT).format(marks_table(prefix)), (current_job().id, _node(), what, os.getpid())
        )


# -- short jobs -----------------------------------------------------------------------------------
@job
async def noop() -> None:
    await asyncio.sleep(0)


@job(executor="process", record=True)
def noop_in_process() -> int:
    return os.getpid()


@job
async def sleep_for(seconds: float) -> None:
    await asyncio.sleep(seconds)


# -- concurrency: each run leaves a "start" and an "end" mark ---------------------------------------
@job
async def span(dsn: str, prefix: str, seconds: float) -> None:
    await mark_async(dsn, prefix, "start")
    await asyncio.sleep(seconds)
    await mark_async(dsn, prefix, "end")


@job
def span_in_thread(dsn: str, prefix: str, seconds: float) -> None:
    mark(dsn, prefix, "start")
    time.sleep(seconds)
    mark(dsn, prefix, "end")


# -- cancellation: "started" at once, then "finished" only if nobody stopped them -----------------------
@job
async def hold_async(dsn: str, prefix: str) -> None:
    await mark_async(dsn, prefix, "started")
    try:
        await asyncio.sleep(HOLD)
    except asyncio.CancelledError:
        await mark_async(dsn, prefix, "stopped")
        raise
    await mark_async(dsn, prefix, "finished")


@job
def hold_thread(dsn: str, prefix: str) -> None:
    mark(dsn, prefix, "started")
    deadline = time.monotonic() + HOLD
    while time.monotonic() < deadline:
        if current_job().is_cancelled():
            mark(dsn, prefix, "stopped")
            return
        time.sleep(0.02)
    mark(dsn, prefix, "finished")


@job(executor="process")
def hold_process(dsn: str, prefix: str) -> None:
    mark(dsn, prefix, "started")
    deadline = time.monotonic() + HOLD
    spins = 0
    while time.monotonic() < deadline:  # a CPU loop that never looks at its context
        spins += 1
        if spins % 100_000 == 0:
            time.sleep(0.001)  # two shared cores: leave the rest of the machine some air
    mark(dsn, prefix, "finished")
