"""Drive oban-py 0.7 for tests/test_oban_compat.py, in a subprocess running under .venv-oban.

    .venv-oban/bin/python tests/oban_py/driver.py COMMAND '{"dsn": ..., "prefix": ..., ...}'

Every command prints JSON lines on stdout: events (``{"event": "ready", ...}``) and last
``{"event": "result", ...}``. Logs go to stderr. Only oban-py's public API is used, except where noted.

Commands:
  install  create the schema and run oban-py's ``oban.schema.install`` there.
  enqueue  insert ``jobs`` (Job keyword dicts) with a client-mode Oban; result: the jobs.
  get      read ``ids`` with ``Oban.get_job``; result: the jobs (null when missing).
  encode   ``Record(value).encoded`` for each of ``values``: the text oban-py stores in meta["return"].
  decode   oban-py's decoding (not public API: ``oban._recorded``) of each meta["return"] text in ``texts``.
  run      start Oban with ``queues``, optionally enqueue ``insert`` first, emit "ready", wait until the
           jobs ``ids`` (given, inserted, or read as a JSON list from stdin when ``ids_from_stdin``) are
           final or ``timeout`` passes, stop; result: those jobs plus the producer and leader rows seen
           while running and the insert notifications oban-py's notifier decoded.
  serve    run an oban-py node (``node``, ``queues`` as {name: limit}, ``lifeline``, ``refresher`` and
           ``stager`` options, ``leader_interval``) until a line "stop" arrives on stdin (or it is
           killed); emit "ready" (with its pid), then "leader" whenever its leadership changes, and a
           result once stopped.
  signal   send ``action`` ("pause" or "resume") for ``queue`` to ``node`` through oban-py's API.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from oban import Job, Oban, Record
from oban.schema import install
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

# The repository root, so oban-py can import workers named ``tests.oban_py.workers.<Name>``.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

FINAL_STATES = {"completed", "discarded", "cancelled"}
JOB_FIELDS = (
    "id",
    "state",
    "queue",
    "worker",
    "attempt",
    "max_attempts",
    "priority",
    "args",
    "meta",
    "errors",
    "tags",
    "attempted_by",
    "inserted_at",
    "scheduled_at",
    "attempted_at",
    "cancelled_at",
    "completed_at",
    "discarded_at",
)


def emit(event: str, **data: Any) -> None:
    # The standard json module: exact for big integers, and str() for datetimes and UUIDs.
    sys.stdout.write(json.dumps({"event": event, **data}, default=str) + "\n")
    sys.stdout.flush()


def job_dict(job: Job | None) -> dict[str, Any] | None:
    if job is None:
        return None
    return {name: getattr(job, name) for name in JOB_FIELDS}


async def open_pool(dsn: str, max_size: int = 6, **kwargs: Any) -> AsyncConnectionPool:
    pool = AsyncConnectionPool(dsn, min_size=1, max_size=max_size, open=False, kwargs=kwargs)
    await pool.open(wait=True, timeout=10)
    return pool


async def table_rows(pool: AsyncConnectionPool, prefix: str, table: str) -> list[dict[str, Any]]:
    query = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(prefix), sql.Identifier(table))
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query)
        return await cur.fetchall()


async def cmd_install(opts: dict[str, Any]) -> dict[str, Any]:
    dsn, prefix = opts["dsn"], opts["prefix"]
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(prefix)))
    # oban-py's install.sql qualifies the enum and tables with the prefix, but looks for an existing
    # enum in current_schema() and creates oban_count_estimate unqualified. Run it the only way that
    # works for a non-public prefix: with the prefix as the search path.
    pool = await open_pool(dsn, options=f"-c search_path={prefix}")
    try:
        await install(pool, prefix=prefix)
    finally:
        await pool.close()
    return {"installed": prefix}


@asynccontextmanager
async def client(opts: dict[str, Any]) -> AsyncIterator[Oban]:
    """A client-mode Oban (no queues) on the ``dsn`` and ``prefix`` of ``opts``."""
    pool = await open_pool(opts["dsn"])
    try:
        yield Oban(pool=pool, prefix=opts["prefix"])
    finally:
        await pool.close()


async def cmd_enqueue(opts: dict[str, Any]) -> dict[str, Any]:
    async with client(opts) as oban:
        jobs = await oban.enqueue_many([Job(**spec) for spec in opts["jobs"]])
        return {"jobs": [job_dict(job) for job in jobs]}


async def cmd_get(opts: dict[str, Any]) -> dict[str, Any]:
    async with client(opts) as oban:
        return {"jobs": [job_dict(await oban.get_job(job_id)) for job_id in opts["ids"]]}


async def cmd_encode(opts: dict[str, Any]) -> dict[str, Any]:
    return {"texts": [Record(value).encoded for value in opts["values"]]}


async def cmd_decode(opts: dict[str, Any]) -> dict[str, Any]:
    from oban._recorded import decode_recorded

    return {"values": [decode_recorded(text) for text in opts["texts"]]}


async def wait_final(oban: Oban, ids: list[int], timeout: float) -> list[Job | None]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = [await oban.get_job(job_id) for job_id in ids]
        if all(job is not None and job.state in FINAL_STATES for job in jobs):
            return jobs
        if time.monotonic() > deadline:
            return jobs
        await asyncio.sleep(0.05)


async def cmd_run(opts: dict[str, Any]) -> dict[str, Any]:
    prefix = opts["prefix"]
    pool = await open_pool(opts["dsn"])
    observed: list[dict[str, Any]] = []
    try:
        oban = Oban(
            pool=pool,
            prefix=prefix,
            node=opts.get("node", "oban-py-compat"),
            queues={queue: 5 for queue in opts.get("queues", ["compat"])},
            # Staging polls for due jobs; a long interval leaves the insert notification as the
            # only thing that can wake a producer after the first pass at start.
            stager={"interval": opts.get("stager_interval", 1.0)},
            shutdown_grace_period=2.0,
        )
        inserted = await oban.enqueue_many([Job(**spec) for spec in opts.get("insert", [])])
        async with oban:
            # Not public API: oban-py's notifier, to see what it decodes from the insert channel.
            # Waiting on it also guarantees LISTEN is in place before "ready" is announced.
            notifier = getattr(oban, "_notifier", None)
            if notifier is not None:
                await notifier.listen(
                    "insert", lambda _channel, payload: observed.append(payload), wait=True, timeout=5
                )
            else:
                await asyncio.sleep(0.5)
            producers = await table_rows(pool, prefix, "oban_producers")
            emit("ready", producers=producers, inserted=[job_dict(job) for job in inserted])

            ids: list[int] = list(opts.get("ids", [])) + [job.id for job in inserted if job.id]
            if opts.get("ids_from_stdin"):
                line = await asyncio.to_thread(sys.stdin.readline)
                ids += json.loads(line)
            started = time.monotonic()
            jobs = await wait_final(oban, ids, opts.get("timeout", 10.0))
            waited = time.monotonic() - started
            leaders = await table_rows(pool, prefix, "oban_leaders")
        return {
            "jobs": [job_dict(job) for job in jobs],
            "producers": producers,
            "leaders": leaders,
            "observed_inserts": observed,
            "waited": waited,
        }
    finally:
        await pool.close()


async def cmd_serve(opts: dict[str, Any]) -> dict[str, Any]:
    # oban-py takes no leader interval in its options (30 s, its lease as long): a test shortens it
    # through oban-py's extension point for building the leader (not public API).
    from oban._extensions import put_ext
    from oban._leader import Leader

    interval = float(opts.get("leader_interval", 30.0))
    put_ext("leader.build", lambda config, **kwargs: Leader(interval=interval, **config, **kwargs))
    import tests.oban_py.mixed_workers  # noqa: F401 - register the workers, as an oban-py app would

    pool = await open_pool(opts["dsn"], max_size=10)  # a server node: queues, leader, refresher
    try:
        oban = Oban(
            pool=pool,
            prefix=opts["prefix"],
            node=opts["node"],
            queues=opts["queues"],
            lifeline=opts.get("lifeline"),
            refresher=opts.get("refresher"),
            stager=opts.get("stager"),
            shutdown_grace_period=1.0,
        )
        async with oban:
            emit("ready", pid=os.getpid(), node=opts["node"])
            leading = None
            stop = asyncio.ensure_future(asyncio.to_thread(sys.stdin.readline))
            while not stop.done():
                if oban.is_leader != leading:
                    leading = oban.is_leader
                    emit("leader", is_leader=leading)
                await asyncio.wait([stop], timeout=0.02)
        return {"stopped": opts["node"]}
    finally:
        await pool.close()


async def cmd_signal(opts: dict[str, Any]) -> dict[str, Any]:
    async with client(opts) as oban:
        method = {"pause": oban.pause_queue, "resume": oban.resume_queue}[opts["action"]]
        await method(opts["queue"], node=opts["node"])
        return {"sent": opts["action"]}


COMMANDS = {
    "install": cmd_install,
    "enqueue": cmd_enqueue,
    "get": cmd_get,
    "encode": cmd_encode,
    "decode": cmd_decode,
    "run": cmd_run,
    "serve": cmd_serve,
    "signal": cmd_signal,
}


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    command, opts = sys.argv[1], json.loads(sys.argv[2])
    result = asyncio.run(COMMANDS[command](opts))
    emit("result", **result)


if __name__ == "__main__":
    main()
