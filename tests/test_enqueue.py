"""Enqueueing writes every field, schedules by the database clock, and notifies available queues."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from conveyor import Conveyor, JobRequest, JobState, ValidationError, job, worker
from conveyor.engine.postgres import PostgresEngine, schema
from tests.helpers import CHUNK, count_jobs, fetch_rows, insert_channel, listening, listening_sync

T0 = datetime(2031, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


@job(queue="mail", priority=2, max_attempts=5, tags=["welcome", "email"], meta={"team": "growth"})
async def send_welcome(to: str, count: int) -> None:
    pass


@job
def plain(n: int) -> int:
    return n


@worker(queue="reports", max_attempts=3)
class BuildReport:
    def process(self, job: Any) -> None:
        pass


async def test_enqueue_stores_every_field(app: Conveyor, dsn: str, prefix: str) -> None:
    job_id = await app.enqueue(send_welcome.new(to="ada@example.com", count=3))
    assert isinstance(job_id, int)

    found = await app.get_job(job_id)
    assert found is not None
    assert found.id == job_id
    assert found.state is JobState.AVAILABLE
    assert found.worker == "tests.test_enqueue.send_welcome"
    assert found.queue == "mail"
    assert found.priority == 2
    assert found.max_attempts == 5
    assert found.tags == ("welcome", "email")
    assert found.meta == {"team": "growth"}
    assert found.args == {"to": "ada@example.com", "count": 3}
    assert found.attempt == 0
    assert found.errors == ()
    assert found.attempted_by == ()
    assert found.inserted_at.tzinfo is UTC and found.scheduled_at.tzinfo is UTC
    assert found.scheduled_at == found.inserted_at
    assert abs(datetime.now(UTC) - found.inserted_at) < timedelta(seconds=30)
    assert found.attempted_at is found.completed_at is found.cancelled_at is found.discarded_at is None

    # The raw row is what Oban expects: naive UTC timestamps, jsonb args and meta, text[] tags.
    (row,) = fetch_rows(dsn, prefix)
    assert row["state"] == "available"
    assert row["args"] == {"to": "ada@example.com", "count": 3}
    assert row["tags"] == ["welcome", "email"]
    assert row["inserted_at"].tzinfo is None
    assert row["inserted_at"] == found.inserted_at.replace(tzinfo=None)


async def test_defaults_of_a_plain_job(app: Conveyor) -> None:
    found = await app.get_job(await app.enqueue(plain.new(n=1)))
    assert found is not None
    assert found.worker == "tests.test_enqueue.plain"
    assert (found.queue, found.priority, found.max_attempts) == ("default", 0, 20)
    assert found.tags == () and found.meta == {}


async def test_worker_class_gets_new(app: Conveyor) -> None:
    request = BuildReport.new(month="2031-03")  # type: ignore[attr-defined]
    assert isinstance(request, JobRequest)
    assert request.worker == "tests.test_enqueue.BuildReport"
    found = await app.get_job(await app.enqueue(request))
    assert found is not None
    assert found.worker == "tests.test_enqueue.BuildReport"
    assert (found.queue, found.max_attempts) == ("reports", 3)
    assert found.args == {"month": "2031-03"}


async def test_with_options_overrides_defaults(app: Conveyor) -> None:
    request = send_welcome.new(to="x", count=1).with_options(queue="urgent", priority=0, tags=["vip"])
    found = await app.get_job(await app.enqueue(request))
    assert found is not None
    assert (found.queue, found.priority, found.max_attempts, found.tags) == ("urgent", 0, 5, ("vip",))


async def test_request_by_worker_name_for_another_node(app: Conveyor) -> None:
    request = JobRequest("MyApp.Workers.Mailer", args={"id": 1}, queue="elixir")
    found = await app.get_job(await app.enqueue(request))
    assert found is not None
    assert (found.worker, found.queue, found.args) == ("MyApp.Workers.Mailer", "elixir", {"id": 1})


async def test_schedule_in_uses_database_clock(app: Conveyor, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT timezone('UTC', now())").fetchone()
        assert row is not None
        db_now = row[0].replace(tzinfo=UTC)
    found = await app.get_job(await app.enqueue(plain.new(n=1).with_options(schedule_in=3600)))
    assert found is not None
    assert found.state is JobState.SCHEDULED
    assert found.scheduled_at - found.inserted_at == timedelta(hours=1)
    assert abs(found.inserted_at - db_now) < timedelta(seconds=30)


def mixed_request(n: int) -> JobRequest:
    """A request whose every field depends on ``n``, so a row shows which request it came from."""
    when: dict[str, Any] = {}
    if n % 4 == 1:
        when = {"schedule_in": 60 + n}
    elif n % 4 == 2:
        when = {"scheduled_at": T0 - timedelta(days=1, microseconds=n)}
    elif n % 4 == 3:
        when = {"scheduled_at": T0 + timedelta(hours=2, microseconds=n)}
    return JobRequest(
        f"tests.Mixed{n % 5}",
        args={"n": n, "text": f"a 'quoted' \\ \"text\" ünï\tcode {n}", "nested": {"list": [n, None, 1.5]}},
        queue=f"q{n % 3}",
        priority=n % 10,
        max_attempts=1 + n % 30,
        tags=[f"t{n % 7}", "all"] if n % 2 else [],
        meta={"m": n} if n % 3 else {},
        **when,
    )


def expected_schedule(n: int) -> tuple[str, datetime]:
    if n % 4 == 1:
        return "scheduled", T0 + timedelta(seconds=60 + n)
    if n % 4 == 2:
        return "available", T0 - timedelta(days=1, microseconds=n)
    if n % 4 == 3:
        return "scheduled", T0 + timedelta(hours=2, microseconds=n)
    return "available", T0


@pytest.mark.parametrize("size", [50, 1_000])
async def test_enqueue_many_stores_every_field_in_input_order(
    app: Conveyor, dsn: str, prefix: str, size: int
) -> None:
    # Small and large batches may take different paths to the database: both must store the same.
    ids = await app.enqueue_many((mixed_request(n) for n in range(size)), now=T0)
    assert len(ids) == size and len(set(ids)) == size
    assert ids == sorted(ids)
    rows = {row["id"]: row for row in fetch_rows(dsn, prefix)}
    assert len(rows) == size
    for n, job_id in enumerate(ids):
        request, row = mixed_request(n), rows[job_id]
        state, scheduled_at = expected_schedule(n)
        assert row["worker"] == request.worker
        assert row["args"] == request.args
        assert row["meta"] == request.meta
        assert row["queue"] == request.queue
        assert row["priority"] == request.priority
        assert row["max_attempts"] == request.max_attempts
        assert tuple(row["tags"]) == request.tags
        assert row["state"] == state
        assert row["scheduled_at"] == scheduled_at.replace(tzinfo=None)
        assert row["inserted_at"] == T0.replace(tzinfo=None)
        assert (row["attempt"], row["errors"], row["attempted_by"]) == (0, [], [])
        assert (
            row["attempted_at"] is row["completed_at"] is row["cancelled_at"] is row["discarded_at"] is None
        )


TRICKY_TEXT = [
    "a,b",
    'say "hi"',
    "{braces}",
    "back\\slash",
    "NULL",
    "null",
    "tab\there",
    "line\nbreak",
    "é ü 中",
    " ",
]


@pytest.mark.parametrize("size", [1, 300])
async def test_awkward_text_survives_the_trip(app: Conveyor, dsn: str, prefix: str, size: int) -> None:
    # Text that array literals and COPY must quote or escape: commas, quotes, braces, backslashes,
    # the word NULL, tabs, newlines.
    tags = [t for t in TRICKY_TEXT if t.strip()]
    requests = [
        JobRequest(
            f"Elixir.My\\Worker\t{n}\n",
            args={"tricky": TRICKY_TEXT, "\\key\t": "\\N"},
            meta={"note": "\\."},
            tags=tags,
        )
        for n in range(size)
    ]
    ids = await app.enqueue_many(requests)
    rows = {row["id"]: row for row in fetch_rows(dsn, prefix)}
    for n, job_id in enumerate(ids):
        row = rows[job_id]
        assert row["worker"] == f"Elixir.My\\Worker\t{n}\n"
        assert row["args"] == {"tricky": TRICKY_TEXT, "\\key\t": "\\N"}
        assert row["meta"] == {"note": "\\."}
        # Stored as Oban stores tags: trimmed, lowercased ("NULL" and "null" are one tag).
        assert row["tags"] == [
            "a,b",
            'say "hi"',
            "{braces}",
            "back\\slash",
            "null",
            "tab\there",
            "line\nbreak",
            "é ü 中",
        ]
    found = await app.list_jobs(tags=["NULL", "a,b"], limit=1_000)
    assert sorted(j.id for j in found) == sorted(ids)


async def test_enqueue_many_of_nothing(app: Conveyor, dsn: str, prefix: str) -> None:
    assert await app.enqueue_many([]) == []
    assert await app.enqueue_many(iter(())) == []
    assert count_jobs(dsn, prefix) == 0


async def test_bulk_enqueue_of_100k_from_a_generator(app: Conveyor, dsn: str, prefix: str) -> None:
    total = 100_000

    def generate() -> Iterator[JobRequest]:
        for n in range(total):
            yield JobRequest("tests.bulk", args={"n": n}, queue="bulk")

    started = time.monotonic()
    ids = await app.enqueue_many(generate())
    elapsed = time.monotonic() - started
    assert len(ids) == total
    assert len(set(ids)) == total
    assert ids == sorted(ids)
    assert count_jobs(dsn, prefix) == total
    # Spot check the order: the n-th id holds the n-th request.
    for n in (0, CHUNK - 1, CHUNK, 77_777, total - 1):
        rows = fetch_rows(dsn, prefix, "id = %s", (ids[n],))
        assert rows[0]["args"] == {"n": n}
    assert elapsed < 20, f"100k jobs took {elapsed:.1f}s"


async def test_available_job_notifies_its_queue(app: Conveyor, dsn: str, prefix: str) -> None:
    async with listening(dsn, insert_channel(prefix)) as listener:
        await app.enqueue(send_welcome.new(to="x", count=1))
        payload = await listener.first()
    assert payload == '{"queue": "mail"}'
    assert json.loads(payload) == {"queue": "mail"}


@pytest.mark.parametrize("copies", [1, 300])
async def test_bulk_notifies_each_available_queue_once(
    app: Conveyor, dsn: str, prefix: str, copies: int
) -> None:
    async with listening(dsn, insert_channel(prefix)) as listener:
        await app.enqueue_many(
            [
                plain.new(n=1).with_options(queue="alpha"),
                plain.new(n=2).with_options(queue="beta"),
                plain.new(n=3).with_options(queue="alpha"),
                plain.new(n=4).with_options(queue="later", schedule_in=600),
            ]
            * copies
        )
        payloads = await listener.collect(0.3)
    assert sorted(payloads) == ['{"queue": "alpha"}', '{"queue": "beta"}']


async def test_notification_arrives_only_after_commit(app: Conveyor, dsn: str, prefix: str) -> None:
    async with (
        listening(dsn, insert_channel(prefix)) as listener,
        await psycopg.AsyncConnection.connect(dsn) as conn,
    ):
        job_id = await app.enqueue(plain.new(n=1).with_options(queue="txn"), conn=conn)
        assert await listener.collect(0.3) == []
        assert count_jobs(dsn, prefix) == 0
        await conn.commit()
        assert await listener.first() == '{"queue": "txn"}'
    found = await app.get_job(job_id)
    assert found is not None and found.queue == "txn"


async def test_app_opened_from_a_url(dsn: str, prefix: str) -> None:
    async with Conveyor(dsn, prefix=prefix) as app:
        assert await app.install() == schema.LATEST_VERSION
        job_id = await app.enqueue(plain.new(n=7))
        found = await app.get_job(job_id)
        assert found is not None and found.args == {"n": 7}


def test_sync_twins(dsn: str, prefix: str) -> None:
    app = Conveyor(dsn, prefix=prefix)
    try:
        assert app.install_sync() == schema.LATEST_VERSION
        with listening_sync(dsn, insert_channel(prefix)) as listener:
            job_id = app.enqueue_sync(send_welcome.new(to="sync", count=2))
            assert listener.first() == '{"queue": "mail"}'
        found = app.get_job_sync(job_id)
        assert found is not None
        assert found.worker == "tests.test_enqueue.send_welcome"
        assert found.args == {"to": "sync", "count": 2}

        ids = app.enqueue_many_sync(plain.new(n=n) for n in range(12_000))
        assert len(ids) == 12_000 and ids == sorted(ids)
        assert count_jobs(dsn, prefix) == 12_001
        last = app.get_job_sync(ids[-1])
        assert last is not None and last.args == {"n": 11_999}

        scheduled = app.enqueue_sync(plain.new(n=0).with_options(schedule_in=30), now=T0)
        found = app.get_job_sync(scheduled)
        assert found is not None
        assert found.state is JobState.SCHEDULED
        assert found.scheduled_at == T0 + timedelta(seconds=30)
    finally:
        app.close_sync()


async def test_copy_speaks_binary_to_a_table_conveyor_made(app: Conveyor, dsn: str) -> None:
    """The COPY path sends rows in the binary format (the server ingests it faster) when the table
    has the column types of Conveyor's migrations: what the rows above went through."""
    engine = await app.engine()
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(engine.sql["insert_clock"].encode(), {"now": None}).fetchone()  # type: ignore[attr-defined]
    assert row is not None and row[1] is True


@pytest.mark.parametrize("unique_at", [0, 499, 500, 1_700, 6_999])
async def test_copy_hands_a_unique_request_anywhere_in_the_stream_to_a_statement(
    app: Conveyor, dsn: str, prefix: str, unique_at: int
) -> None:
    """COPY goes in chunks that grow, the next formatted while the current one is written; a unique
    request stops whichever chunk meets it, wherever it falls. Every job is stored once, in order."""
    requests = [JobRequest("tests.bulk", args={"n": n}) for n in range(9_000)]
    requests.insert(unique_at, JobRequest("tests.bulk", args={"unique": True}, unique={"period": None}))
    ids = await app.enqueue_many(iter(requests))
    assert len(ids) == len(requests) == len(set(ids)) and ids == sorted(ids)
    assert not any(i.conflict for i in ids)
    stored = {row["id"]: row["args"] for row in fetch_rows(dsn, prefix)}
    assert [stored[i] for i in ids] == [dict(r.args) for r in requests]


async def test_a_bad_item_deep_in_a_copy_stream_writes_nothing(app: Conveyor, dsn: str, prefix: str) -> None:
    """An item that is not a request, met while an earlier chunk is being written: refused naming
    it, and the chunks already written are rolled back with the rest."""

    def stream() -> Iterator[Any]:
        for n in range(3_000):
            yield JobRequest("tests.bulk", args={"n": n})
        yield "not a request"

    with pytest.raises(ValidationError, match="not a request"):
        await app.enqueue_many(stream())
    assert count_jobs(dsn, prefix) == 0


async def test_copy_reserves_ids_in_line_when_the_pool_has_no_second_connection(
    dsn: str, prefix: str, app: Conveyor
) -> None:
    """The next chunk's ids are reserved on a second connection of the pool while a COPY ends; a
    pool of one has none to give, and the insert reserves on its own connection instead."""
    engine = PostgresEngine(dsn, prefix=prefix, min_connections=1, max_connections=1)
    await engine.open()
    try:
        ids = await engine.insert(JobRequest("tests.bulk", args={"n": n}) for n in range(7_000))
    finally:
        await engine.close()
    assert len(set(ids)) == 7_000 and ids == sorted(ids)
    stored = {row["id"]: row["args"]["n"] for row in fetch_rows(dsn, prefix)}
    assert [stored[i] for i in ids] == list(range(7_000))


async def test_an_enqueue_cancelled_in_its_statement_inserts_nothing_and_keeps_the_pool(
    app: Conveyor, engine: PostgresEngine, dsn: str, prefix: str
) -> None:
    """The single insert takes and gives back its connection itself (not ``pool.connection()``): a
    task cancelled while its statement waits inserts nothing, and every connection comes back."""
    await app.enqueue(plain.new(n=0))  # the pool's first connection exists
    async with await psycopg.AsyncConnection.connect(dsn) as blocker:
        await blocker.execute(f"LOCK TABLE {prefix}.oban_jobs IN ACCESS EXCLUSIVE MODE")
        waiting = asyncio.create_task(app.enqueue(plain.new(n=1)))
        for _ in range(200):  # until the insert waits for the lock
            cur = await blocker.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (f"%{prefix}.oban_jobs%",),
            )
            if (await cur.fetchone() or (0,))[0]:
                break
            await asyncio.sleep(0.02)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await blocker.rollback()
    stats = engine.pool.get_stats()
    assert stats["pool_size"] == stats["pool_available"]  # none kept out of the pool
    ids = [await app.enqueue(plain.new(n=n)) for n in range(2, 2 + 3 * stats["pool_max"])]
    assert [row["args"]["n"] for row in fetch_rows(dsn, prefix)] == [0, *range(2, 2 + len(ids))]
