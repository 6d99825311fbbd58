"""Conveyor behind PgBouncer (Debian's 1.18, started by the tests, in front of the shared server) in
transaction and session mode: nodes drain exactly once, enqueuers work, no setting or prepared
statement is left on the pooler's server sessions, notifications come through ``listen_url``.

Pickup latency (enqueue to start of the run) is printed per mode: ``pytest -s -k latency``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from conveyor import Conveyor
from conveyor.cli.main import main
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres import schema as postgres_schema
from conveyor.errors import SchemaError, ValidationError
from tests import helpers
from tests import pooler_jobs as jobs
from tests.conftest import DSN
from tests.pgbouncer import Bouncer, start_pgbouncer
from tests.test_schema_upgrade import downgrade, recorded

#: The settings Conveyor sets on a direct connection (sessions.configure_session, sessions.hot_session).
WATCHED = ("enable_seqscan", "enable_bitmapscan", "plan_cache_mode", "jit", "synchronous_commit", "TimeZone")
POOL_SIZE = 6


@pytest.fixture(scope="module")
def bouncers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Bouncer]]:
    """One pgbouncer per mode for the module (each test uses its own schema behind them)."""
    directory = tmp_path_factory.mktemp("pgbouncer")
    with (
        start_pgbouncer(directory, "transaction", pool_size=POOL_SIZE) as transaction,
        start_pgbouncer(directory, "session", pool_size=3 * POOL_SIZE) as session,
    ):
        yield {"transaction": transaction, "session": session}


@pytest.fixture
async def schema(prefix: str) -> AsyncIterator[str]:
    """The test's schema, installed on a direct connection."""
    engine = PostgresEngine(DSN, prefix=prefix, max_connections=2, pooler="none")
    await engine.open()
    await engine.install()
    await engine.close()
    yield prefix


def node(dsn: str, prefix: str, **settings: Any) -> Conveyor:
    base = {"queues": {"pooled": 20}, "pool_size": 4, "shutdown_grace": 2.0}
    return helpers.make_app(dsn, prefix, **{**base, **settings})


async def wait_completed(prefix: str, count: int, timeout: float = 10.0) -> None:
    await helpers.poll(
        lambda: states(prefix)["completed"], lambda n: n >= count, timeout=timeout, what=f"{count} completed"
    )


async def wait_runs(key: str, count: int, timeout: float = 30.0) -> None:
    await helpers.poll(
        lambda: len(jobs.RUNS[key]), lambda n: n >= count, timeout=timeout, what=f"{count} runs"
    )


def states(prefix: str) -> Counter[str]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        query = sql.SQL("SELECT state::text, count(*) FROM {} GROUP BY 1").format(helpers.table(prefix))
        return Counter({state: count for state, count in conn.execute(query).fetchall()})


def server_sessions_state(bouncer: Bouncer, sessions: int) -> list[dict[str, Any]]:
    """The watched settings and the prepared statements of ``sessions`` server sessions of the
    pooler, seen from other clients: each holds a transaction open, so each has a session of its
    own, and together they cover every session the pool has (at most ``sessions``)."""
    clients = [psycopg.connect(bouncer.dsn(), autocommit=False) for _ in range(sessions)]
    try:
        seen = []
        for conn in clients:
            values: dict[str, Any] = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in WATCHED}  # type: ignore[index]
            row = conn.execute("SELECT count(*), pg_backend_pid() FROM pg_prepared_statements").fetchone()
            assert row is not None
            values["prepared"], values["pid"] = row
            seen.append(values)
        return seen
    finally:
        for conn in clients:
            conn.close()


def direct_defaults() -> dict[str, str]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        return {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in WATCHED}  # type: ignore[index]


# -- draining --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["transaction", "session"])
async def test_nodes_drain_exactly_once_and_leave_no_session_state(
    bouncers: dict[str, Bouncer], schema: str, mode: str
) -> None:
    bouncer = bouncers[mode]
    key = uuid.uuid4().hex
    # The web process: not told of the pooler ("auto"); small inserts past psycopg's prepare
    # threshold, and one bulk insert (COPY).
    enqueuer = Conveyor(bouncer.dsn(), prefix=schema)
    try:
        for _ in range(20):
            await enqueuer.enqueue(jobs.record.new(key=key))
        await enqueuer.enqueue_many([jobs.record.new(key=key) for _ in range(480)])
    finally:
        await enqueuer.close()
    # Two nodes, one of them with synchronous_commit off (SET LOCAL in each fetch and ack).
    told = {"pooler": "transaction"} if mode == "transaction" else {"pooler": "session"}
    first = node(bouncer.dsn(), schema, **told)
    second = node(bouncer.dsn(), schema, synchronous_commit=False)  # "auto"
    began = time.monotonic()
    async with first, second:
        await wait_runs(key, 500)
        print(f"\n{mode} mode: two nodes drained 500 jobs in {time.monotonic() - began:.2f} s")
        await wait_completed(schema, 500)
    runs = jobs.RUNS[key]
    assert len(runs) == 500 and len({job_id for job_id, _, _ in runs}) == 500, "a job ran twice"
    assert {attempt for _, attempt, _ in runs} == {1}
    assert states(schema) == Counter({"completed": 500})
    defaults = direct_defaults()
    for session in server_sessions_state(bouncer, POOL_SIZE):
        assert {name: session[name] for name in WATCHED} == defaults, session
        assert session["prepared"] == 0, session


async def test_auto_treats_a_pooler_as_a_transaction_pooler(
    bouncers: dict[str, Bouncer], schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    direct = PostgresEngine(DSN, prefix=schema, max_connections=1)
    await direct.open()
    assert not direct.transaction_pooled
    await direct.close()
    with caplog.at_level(logging.WARNING, logger="conveyor.engine"):
        for bouncer in bouncers.values():
            engine = PostgresEngine(bouncer.dsn(), prefix=schema, max_connections=1)
            await engine.open()
            assert engine.transaction_pooled
            job = (await engine.insert([jobs.record.new(key="x")]))[0]
            found = await engine.get_job(job)
            assert found is not None and found.inserted_at.utcoffset() == timedelta(0)  # UTC
            await engine.close()
    assert "goes through a connection pooler" in caplog.text


async def test_a_pooler_found_at_run_time_is_survived_and_no_job_runs_twice(
    bouncers: dict[str, Bouncer], schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Declared "session" but behind a transaction pooler: the hot path's prepared statements fail
    (missing on the session reached, or another statement bound). Those errors say the statement did
    not run: they are retried, the engine stops preparing, and no finished job is given back."""
    bouncer = bouncers["transaction"]
    key = uuid.uuid4().hex
    async with node(bouncer.dsn(), schema, pooler="session", notifications=False) as app:
        await app.enqueue_many([jobs.record.new(key=key) for _ in range(200)])
        await wait_runs(key, 200)
        await wait_completed(schema, 200)
        engine = await app.engine()
        assert isinstance(engine, PostgresEngine)
        pooled = engine.transaction_pooled
    runs = jobs.RUNS[key]
    assert len(runs) == 200 and len({job_id for job_id, _, _ in runs}) == 200, "a job ran twice"
    assert states(schema) == Counter({"completed": 200})
    if pooled:  # it met a pooler error (most runs do; the order of sessions decides)
        assert "as it does through a transaction pooler" in caplog.text


# -- notifications ---------------------------------------------------------------------------------
async def pickup(app: Conveyor, key: str, count: int = 5) -> list[float]:
    """Seconds from enqueue to the start of the run, for ``count`` jobs enqueued one at a time
    into an idle queue."""

    def idle() -> bool:
        """Nothing running, fetching or waiting to be acked: the last job is over."""
        assert app.node is not None
        producers = app.node.producers.values()
        return not app.node.acker.held() and not any(p.running or p.fetching for p in producers)

    latencies = []
    for _ in range(count):
        await helpers.poll(idle, what="the node idle again")
        before = len(jobs.RUNS[key])
        began = time.time()
        await app.enqueue(jobs.record.new(key=key))
        await wait_runs(key, before + 1, timeout=10)
        latencies.append(jobs.RUNS[key][-1][2] - began)
    return latencies


async def test_listen_url_brings_notifications_through_a_transaction_pooler(
    bouncers: dict[str, Bouncer], schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    bouncer = bouncers["transaction"]
    key = uuid.uuid4().hex
    # A poll every 30 s: a pickup within seconds came from a notification.
    async with node(bouncer.dsn(), schema, pooler="transaction", listen_url=DSN, poll_interval=30) as app:
        latencies = await pickup(app, key)
    assert max(latencies) < 5
    assert "notifications are off" not in caplog.text
    print(f"\npickup through PgBouncer (transaction mode, listen_url): {report(latencies)}")


async def test_without_listen_url_nodes_poll_and_say_so(
    bouncers: dict[str, Bouncer], schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    bouncer = bouncers["transaction"]
    key = uuid.uuid4().hex
    with caplog.at_level(logging.WARNING, logger="conveyor.engine"):
        async with node(bouncer.dsn(), schema, pooler="transaction", poll_interval=0.5) as app:
            latencies = await pickup(app, key)
    assert caplog.text.count("notifications are off") == 1
    assert "poll_interval" in caplog.text and "listen_url" in caplog.text
    print(f"\npickup through PgBouncer (transaction mode, polling every 0.5 s): {report(latencies)}")


async def test_a_session_pooler_passes_notifications(bouncers: dict[str, Bouncer], schema: str) -> None:
    bouncer = bouncers["session"]
    key = uuid.uuid4().hex
    async with node(bouncer.dsn(), schema, pooler="session", poll_interval=30) as app:
        latencies = await pickup(app, key)
    assert max(latencies) < 5
    print(f"\npickup through PgBouncer (session mode, LISTEN through it): {report(latencies)}")


async def test_pickup_on_a_direct_connection_for_comparison(schema: str) -> None:
    key = uuid.uuid4().hex
    async with node(DSN, schema, pooler="none", poll_interval=30) as app:
        latencies = await pickup(app, key)
    print(f"\npickup on a direct connection: {report(latencies)}")


def report(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    return f"median {ordered[len(ordered) // 2] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"


# -- migrations ------------------------------------------------------------------------------------
def advisory_locks(prefix: str) -> list[tuple[Any, ...]]:
    """The migration locks of ``prefix`` held on the server (``migration_runner.migration_lock``),
    by any session."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        query = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND objid = %s"
        key = (postgres_schema.MIGRATION_LOCK_KEY, zlib.crc32(prefix.encode()))
        return conn.execute(query, key).fetchall()


@pytest.mark.parametrize("pooler", ["transaction", "auto"])
async def test_migrations_through_a_transaction_pooler_are_refused_without_a_direct_url(
    bouncers: dict[str, Bouncer], schema: str, pooler: str
) -> None:
    """A migration holds a session advisory lock and session settings across its steps: through a
    transaction pooler the lock would stay on a server session that other clients get next, and
    every later migration wait for it forever. Refused in one line, before anything runs."""
    downgrade(DSN, schema, 3)
    engine = PostgresEngine(bouncers["transaction"].dsn(), prefix=schema, max_connections=1, pooler=pooler)
    await engine.open()
    try:
        with pytest.raises(SchemaError, match="cannot migrate") as refused:
            await engine.install()
    finally:
        await engine.close()
    message = str(refused.value)
    assert "\n" not in message and "listen_url" in message and "--dsn" in message
    assert ('pooler = "session"' in message) is (pooler == "auto")
    assert recorded(DSN, schema)[-1] == 3
    assert advisory_locks(schema) == []


async def test_migrations_through_a_transaction_pooler_run_on_listen_url(
    bouncers: dict[str, Bouncer], schema: str
) -> None:
    """With ``listen_url`` (the direct URL) the steps run there: the index build that waits for an
    open write is seen on the direct session, and no lock is left on any session afterwards."""
    downgrade(DSN, schema, 3)
    direct = f"{DSN}?application_name=conveyor-direct-migrator"
    engine = PostgresEngine(
        bouncers["transaction"].dsn(),
        prefix=schema,
        max_connections=2,
        pooler="transaction",
        listen_url=direct,
    )
    await engine.open()
    writer = await psycopg.AsyncConnection.connect(DSN)
    try:
        await writer.execute(f"INSERT INTO \"{schema}\".oban_jobs (worker) VALUES ('tests.Open')".encode())
        upgrade = asyncio.create_task(engine.install())
        names = await build_sessions(schema)
        await writer.commit()
        assert await asyncio.wait_for(upgrade, 60) == postgres_schema.LATEST_VERSION
    finally:
        await writer.close()
        await engine.close()
    assert names == ["conveyor-direct-migrator"]
    assert recorded(DSN, schema) == list(range(1, postgres_schema.LATEST_VERSION + 1))
    assert advisory_locks(schema) == []


async def build_sessions(prefix: str) -> list[str]:
    """The application names of the sessions running an index build of ``prefix``, once one waits."""

    def waiting() -> list[str]:
        with psycopg.connect(DSN, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT application_name FROM pg_stat_activity WHERE query ILIKE %s AND query ILIKE %s "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
                ("%CREATE%INDEX%", f"%{prefix}%"),
            ).fetchall()
        return [str(name) for (name,) in rows]

    return await helpers.poll(waiting, timeout=20, what="an index build to wait", every=0.05)


def test_cli_migrate_through_a_transaction_pooler(bouncers: dict[str, Bouncer], schema: str) -> None:
    """``conveyor migrate`` reads ``pooler`` and ``listen_url`` as nodes do: refused in one line
    without the direct URL, done with it."""
    downgrade(DSN, schema, 3)
    args = ["migrate", "--dsn", bouncers["transaction"].dsn(), "--prefix", schema]
    env = {"CONVEYOR_POOLER": "transaction", "CONVEYOR_LISTEN_URL": None}
    refused = CliRunner().invoke(main, args, env=env)
    assert refused.exit_code == 1
    error = [line for line in refused.output.splitlines() if line.startswith("Error")]
    assert len(error) == 1 and "cannot migrate" in error[0] and "listen_url" in error[0], refused.output
    assert recorded(DSN, schema)[-1] == 3

    done = CliRunner().invoke(main, args, env={**env, "CONVEYOR_LISTEN_URL": DSN})
    assert done.exit_code == 0, done.output
    assert f"now at version {postgres_schema.LATEST_VERSION}" in done.output
    assert recorded(DSN, schema) == list(range(1, postgres_schema.LATEST_VERSION + 1))


async def test_a_session_pooler_migrates_through_itself(bouncers: dict[str, Bouncer], schema: str) -> None:
    downgrade(DSN, schema, 3)
    engine = PostgresEngine(bouncers["session"].dsn(), prefix=schema, max_connections=1, pooler="session")
    await engine.open()
    try:
        assert await engine.install() == postgres_schema.LATEST_VERSION
    finally:
        await engine.close()
    assert advisory_locks(schema) == []


# -- settings --------------------------------------------------------------------------------------
def test_pooler_and_listen_url_are_checked() -> None:
    with pytest.raises(ValidationError, match=r"pooler.*must be one of auto, none, session, transaction"):
        Conveyor(DSN, pooler="pgbouncer")
    with pytest.raises(ValidationError, match="listen_url"):
        Conveyor(DSN, listen_url="")
    with pytest.raises(ValidationError, match="pooler"):
        PostgresEngine(DSN, pooler="yes")
    app = Conveyor(DSN, pooler="Transaction", listen_url="postgresql+psycopg://postgres@127.0.0.1/test")
    assert app.settings.pooler == "transaction"


def test_pooler_errors_are_transient() -> None:
    engine = PostgresEngine(DSN, pooler="none")
    for error in (
        psycopg.errors.InvalidSqlStatementName('prepared statement "_pg3_1" does not exist'),
        psycopg.errors.DuplicatePreparedStatement('prepared statement "_pg3_0" already exists'),
        psycopg.errors.ProtocolViolation("bind message supplies 5 parameters, but prepared statement"),
    ):
        assert engine.is_transient(error)
    assert engine.transaction_pooled  # and the engine prepares nothing from now on
