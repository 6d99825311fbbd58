"""``enqueue_sync`` on an app of default settings (``Conveyor(url)``) inserts in the caller's thread,
on the engine's blocking connections (the optional role ``BlockingInserts``), not through the app's
portal loop: it keeps working while that loop is busy, from many threads at once, with the same
ids, unique conflicts, hooks, notifications and errors as ``enqueue``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest

from conveyor import Conveyor, ExistingJobId, JobId, JobRequest
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from tests.conformance.conftest import ADDRESSES
from tests.conformance.contract import listening, settle

T = TypeVar("T")
ELSEWHERE = "not-run-here"  # a queue no node runs: the jobs stay as inserted


def request(**args: object) -> JobRequest:
    return JobRequest("tests.elsewhere.Job", args=args, queue=ELSEWHERE)


@pytest.fixture
async def url_app(engine_name: str, any_engine: Engine) -> AsyncIterator[Conveyor]:
    """An app built from the URL of ``any_engine``'s database: it owns its engines."""
    url, prefix = ADDRESSES[engine_name](any_engine)
    app = Conveyor(url, prefix=prefix)
    yield app
    await app.close()


async def in_thread(call: Callable[[], T]) -> T:
    """``call()`` in a plain thread (no event loop there), as a web framework's worker runs it."""
    return await asyncio.to_thread(call)


async def test_enqueue_sync_goes_on_while_the_portal_loop_is_busy(url_app: Conveyor) -> None:
    first = await in_thread(lambda: url_app.enqueue_sync(request(n=0)))  # opens the portal's engine
    portal = url_app._binding.portal.loop
    assert portal is not None
    gate = threading.Event()
    portal.call_soon_threadsafe(gate.wait, 30)  # the portal's loop is stuck until the gate opens
    try:

        def enqueue_all() -> list[Any]:
            return [
                url_app.enqueue_sync(request(n=1)),
                url_app.enqueue_sync(request(n=2).with_options(unique={"period": None})),
                url_app.enqueue_sync(request(n=3).with_options(queueing_lock="lock-3")),
                *url_app.enqueue_many_sync([request(n=4), request(n=5)]),
            ]

        with ThreadPoolExecutor(1) as pool:
            ids = pool.submit(enqueue_all).result(timeout=20)
    finally:
        gate.set()
    assert all(type(i) is JobId and not i.conflict for i in ids)
    assert len(set(ids)) == 5 and min(ids) > first
    for job_id, n in zip(ids, [1, 2, 3, 4, 5], strict=True):
        job = await url_app.get_job(job_id)
        assert job is not None and job.args == {"n": n} and job.state == "available"


async def test_enqueue_sync_from_many_threads_at_once(url_app: Conveyor) -> None:
    def enqueue(n: int) -> JobId:
        return url_app.enqueue_sync(request(n=n))

    def enqueue_all() -> list[JobId]:
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(enqueue, range(60)))

    ids = await in_thread(enqueue_all)
    assert len(set(ids)) == 60
    for job_id, n in zip(ids, range(60), strict=True):
        job = await url_app.get_job(job_id)
        assert job is not None and job.args == {"n": n}


async def test_a_unique_enqueue_sync_finds_the_stored_job(url_app: Conveyor) -> None:
    unique = request(key=1).with_options(unique={"period": None})
    first = await in_thread(lambda: url_app.enqueue_sync(unique))
    again = await in_thread(lambda: url_app.enqueue_sync(unique))
    assert not first.conflict
    assert type(again) is ExistingJobId and again.conflict and again == first


async def test_enqueue_sync_applies_the_hooks_of_the_callers_context(url_app: Conveyor) -> None:
    def hook() -> Callable[[JobRequest], JobRequest]:
        name = threading.current_thread().name  # read where the call is made

        return lambda r: r.with_meta({**r.meta, "hooked": name})

    remove = url_app.before_enqueue(hook)
    try:
        job_id = await in_thread(lambda: url_app.enqueue_sync(request(n=1)))
    finally:
        remove()
    job = await url_app.get_job(job_id)
    assert job is not None and job.meta.get("hooked", "").startswith("asyncio")


async def test_enqueue_sync_wakes_listeners_of_its_queue(url_app: Conveyor, any_engine: Engine) -> None:
    async with listening(any_engine, ["insert", "signal"]) as heard:
        await settle(any_engine, heard, marker=-1)
        heard.items.clear()
        await in_thread(lambda: url_app.enqueue_sync(request(n=1)))
        await in_thread(lambda: url_app.enqueue_sync(request(n=2).with_options(schedule_in=60)))
        await heard.wait_for("insert", {"queue": ELSEWHERE})
        await settle(any_engine, heard)
    assert heard.on("insert") == [{"queue": ELSEWHERE}]  # the scheduled job woke nobody


async def test_enqueue_sync_refuses_what_is_not_a_request(url_app: Conveyor) -> None:
    with pytest.raises(ValidationError, match="JobRequest"):
        await in_thread(lambda: url_app.enqueue_many_sync(["not a request"]))  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="JobRequest"):
        await in_thread(lambda: url_app.enqueue_sync("not a request"))  # type: ignore[arg-type]


async def test_the_first_blocking_calls_of_many_threads_wait_for_one_opening(url_app: Conveyor) -> None:
    # Every thread's first call meets the portal's engine while it opens (not open yet for most).
    barrier = threading.Barrier(6)

    def first_call(_: int) -> int:
        barrier.wait(timeout=10)
        return url_app.count_jobs_sync()

    def call_all() -> list[int]:
        with ThreadPoolExecutor(6) as pool:
            return list(pool.map(first_call, range(6)))

    assert await in_thread(call_all) == [0] * 6


async def test_one_job_is_stored_as_a_batch_stores_it(url_app: Conveyor) -> None:
    # One job takes a statement of its own (PostgreSQL: insert_one_job.sql); a batch the general one.
    at = datetime(2030, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    options: list[dict[str, Any]] = [
        {"schedule_in": 60},
        {"scheduled_at": at},
        {"tags": ["a", "b"], "meta": {"m": 1}, "priority": 3, "max_attempts": 5},
    ]
    for option in options:
        one = request(n=1).with_options(**option)
        ids = [
            await url_app.enqueue(one),
            await in_thread(lambda one=one: url_app.enqueue_sync(one)),  # type: ignore[misc]
            *(await url_app.enqueue_many([one, one])),
        ]
        jobs = [await url_app.get_job(job_id) for job_id in ids]
        seen = {
            (j.state, j.tags, tuple(sorted(j.meta.items())), j.priority, j.max_attempts)
            for j in jobs
            if j is not None
        }
        assert len(seen) == 1 and len(jobs) == 4, (option, seen)
        delays = {round((j.scheduled_at - j.inserted_at).total_seconds()) for j in jobs if j is not None}
        if "schedule_in" in option:
            assert delays == {60} and {j.state for j in jobs if j is not None} == {"scheduled"}
        if "scheduled_at" in option:
            assert {j.scheduled_at for j in jobs if j is not None} == {at}
