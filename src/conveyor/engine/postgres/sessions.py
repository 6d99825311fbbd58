"""What the engine's pooled sessions are set to on a direct connection: JSON read by orjson, times in
UTC, no JIT, and the hot pool's plan settings (``hot_session``). Behind a transaction pooler none of
the ``SET``s is made (``pooler.configure``)."""

from __future__ import annotations

from typing import Any

import orjson
import psycopg
from psycopg.adapt import Loader
from psycopg.types.json import set_json_loads


class _JsonTextLoader(Loader):
    """json and jsonb in text format, parsed by orjson straight from psycopg's buffer.

    psycopg's own JSON loader copies the buffer to bytes and calls the function from a Python method;
    with ``load`` being orjson's C function itself, a fetched job's args, meta and errors cost about
    a microsecond less each.
    """

    load = staticmethod(orjson.loads)  # type: ignore[assignment]


def json_loaders(conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any] | psycopg.Cursor[Any]) -> None:
    set_json_loads(orjson.loads, conn)  # binary format, should a statement ask for it
    conn.adapters.register_loader("json", _JsonTextLoader)
    conn.adapters.register_loader("jsonb", _JsonTextLoader)


async def configure_session(conn: psycopg.AsyncConnection[Any]) -> None:
    json_loaders(conn)
    # Job times come back as timestamptz (job_columns.sql); in a UTC session psycopg hands them over
    # with datetime.UTC attached. Every statement reads the clock as timezone('UTC', now()), so the
    # session zone changes nothing else.
    await conn.execute("SET TIME ZONE 'UTC'", prepare=False)
    # No JIT compilation: every statement here reads or writes a bounded number of rows, but on a
    # big table or behind a big backlog some plans cost more than jit_above_cost, and compiling
    # them costs more than running them (docs/decisions/postgres-jit-off.md has the figures).
    await conn.execute("SET jit = off", prepare=False)


def configure_session_sync(conn: psycopg.Connection[Any]) -> None:
    """``configure_session`` on a blocking connection (the engine's blocking pool: ``blocking``)."""
    json_loaders(conn)
    conn.execute("SET TIME ZONE 'UTC'", prepare=False)
    conn.execute("SET jit = off", prepare=False)


def hot_session(*, synchronous_commit: bool = True) -> dict[str, str]:
    """The settings of a hot pool's sessions, where only fetch_jobs.sql and ack_jobs.sql run (and
    settle_steps.sql after an ack that ended workflow steps).

    Each statement is written so that one generic plan fits every call: a custom plan per call costs
    0.1 to 0.2 ms of planning, more than a tenth of the statement. Sequential and bitmap scans are
    ruled out because a generic plan is kept until the statistics change: one made while the table
    was tiny (a seq scan, or a bitmap scan and a sort) would otherwise read the whole queue on every
    fetch once it has grown.

    With ``synchronous_commit`` (the default) the sessions keep the server's own setting. Without
    it, claims and acks commit without waiting for their WAL to reach the disk: that wait (about
    0.9 ms a commit on the test machine, as long as a claim of 20 jobs takes otherwise) is a third
    of a job's pickup latency. The price is paid only when the server crashes: the claims and acks
    of its last moments (up to three ``wal_writer_delay``, 0.6 s by default) can be undone. An
    undone ack runs its job again, as at-least-once allows; an undone claim makes a job that a node
    is already running available again, so a second run may overlap the first (see the delivery
    guide). Nothing is lost either way, and the database stays consistent.
    """
    settings = {"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off", "enable_bitmapscan": "off"}
    if not synchronous_commit:
        settings["synchronous_commit"] = "off"
    return settings


async def configure_hot_session(conn: psycopg.AsyncConnection[Any], *, session: dict[str, str]) -> None:
    await configure_session(conn)
    await conn.execute("; ".join(f"SET {name} = {value}" for name, value in session.items()), prepare=False)
