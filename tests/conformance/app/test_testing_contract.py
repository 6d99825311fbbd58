"""``conveyor.testing`` on every engine: modes, ``process_job``, ``drain_queue`` and the
assertions on enqueued jobs."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from conveyor import Cancel, Conveyor, JobState, Record, Snooze, Workflow
from conveyor.engine.base import Engine
from conveyor.errors import ConveyorError, UnsupportedConnectionError, ValidationError
from conveyor.testing import (
    all_enqueued,
    all_enqueued_sync,
    assert_enqueued,
    assert_enqueued_sync,
    drain_queue,
    drain_queue_sync,
    mode,
    process_job,
    process_job_sync,
    refute_enqueued,
    refute_enqueued_sync,
)
from tests.conformance import api_jobs
from tests.conformance.conftest import ADDRESSES
from tests.helpers import holds

NOTHING = {"cancelled": 0, "completed": 0, "discarded": 0, "retryable": 0, "scheduled": 0}


@pytest.fixture
async def app(any_engine: Engine) -> AsyncIterator[Conveyor]:
    api_jobs.SEEN.clear()
    app = Conveyor(engine=any_engine, testing="manual", queues={"default": 2})
    with app.as_current():
        yield app
    await app.close()


# -- process_job ------------------------------------------------------------------------------
async def test_process_job_runs_the_code_with_a_real_context_and_returns_its_value() -> None:
    found = await process_job(api_jobs.reports.new())
    assert found["attempt"] == 1 and found["args"] == {} and isinstance(found["id"], int)
    assert await process_job(api_jobs.greet.new("ada")) == "hello ada!"
    assert await process_job(api_jobs.blocking_reports.new()) == api_jobs.blocking_reports.definition.name
    assert await process_job(api_jobs.squared.new(5)) == 25  # a process job, run in a thread here
    assert isinstance(await process_job(api_jobs.snoozes), Snooze)  # a job function alone: no args


async def test_process_job_returns_outcomes_and_lets_exceptions_out() -> None:
    assert isinstance(await process_job(api_jobs.snoozes.new()), Snooze)
    cancelled = await process_job(api_jobs.cancels.new())
    assert isinstance(cancelled, Cancel) and cancelled.reason == "not wanted"
    assert isinstance(await process_job(api_jobs.records.new(3)), Record)
    with pytest.raises(RuntimeError, match="boom"):
        await process_job(api_jobs.fails.new("boom"))
    with pytest.raises(SystemExit):
        await process_job(api_jobs.exits.new())
    with pytest.raises(ValidationError, match="must be a JobRequest"):
        await process_job("nope")


def test_process_job_sync_runs_from_plain_code() -> None:
    assert process_job_sync(api_jobs.greet.new("bob")) == "hello bob!"


# -- modes ------------------------------------------------------------------------------------
async def test_manual_mode_stores_jobs_and_starts_no_node(app: Conveyor) -> None:
    await app.start()
    assert app.node is None
    job_id = await api_jobs.greet.enqueue("ada")
    await holds(
        lambda: app.get_job(job_id),
        lambda stored: stored is not None and stored.state is JobState.AVAILABLE,
        during=0.2,
        what="a manual-mode app runs nothing",
    )


async def test_inline_mode_runs_jobs_at_enqueue_and_lets_exceptions_out(app: Conveyor) -> None:
    with mode("inline"):
        first = await api_jobs.child.enqueue(n=1)
        second = api_jobs.child.enqueue_sync(n=2)
        with pytest.raises(RuntimeError, match="inline boom"):
            await api_jobs.fails.enqueue("inline boom")
        with pytest.raises(ConveyorError, match="inline testing runs single jobs"):
            await app.enqueue_many(Workflow().add("a", api_jobs.child.new(n=3)))
    assert api_jobs.SEEN["children"] == [1, 2] and first != second
    assert await app.list_jobs() == []  # nothing stored
    await api_jobs.child.enqueue(n=4)  # manual again outside the block
    assert api_jobs.SEEN["children"] == [1, 2]


async def test_inline_mode_wins_over_a_sync_connection(any_engine: Engine) -> None:
    """An app whose blocking inserts go through a caller's connection (``sync_conn``, as Django's
    integration sets) still runs jobs inline in inline mode, and never asks for the connection;
    outside it, the connection given is the one used."""
    api_jobs.SEEN.clear()
    asked: list[int] = []

    def connection() -> object:
        asked.append(1)
        return object()  # not a connection: using it fails, which shows it was used

    app = Conveyor(engine=any_engine, testing="inline", sync_conn=connection)
    try:
        with app.as_current():
            api_jobs.child.enqueue_sync(n=7)
            app.enqueue_sync(api_jobs.child.new(n=8), conn=object())
            assert api_jobs.SEEN["children"] == [7, 8] and asked == []
            with mode("manual"), pytest.raises(UnsupportedConnectionError):
                api_jobs.child.enqueue_sync(n=9)
        assert asked == [1]
    finally:
        await app.close()


async def test_steps_grafted_from_blocking_code_keep_the_apps_own_connection(any_engine: Engine) -> None:
    """With a default blocking connection (``sync_conn``), steps added to a stored workflow still go
    through the app (the async path that reads the stored steps), never through that connection."""
    asked: list[int] = []

    def connection() -> object:
        asked.append(1)
        return object()

    app = Conveyor(engine=any_engine, testing="manual", sync_conn=connection)
    try:
        flow = Workflow().add("a", api_jobs.child.new(n=1))
        await app.enqueue_many(flow)
        graft = (await app.extend_workflow(flow.id)).add("b", api_jobs.child.new(n=2), deps=["a"])
        (added,) = await asyncio.to_thread(app.enqueue_many_sync, graft)
        stored = await app.get_job(added)
        assert stored is not None and stored.state is JobState.SUSPENDED and asked == []
    finally:
        await app.close()


async def test_a_blocking_job_scope_wraps_each_thread_job_in_its_thread(any_engine: Engine) -> None:
    api_jobs.SEEN.clear()

    @contextlib.contextmanager
    def scope() -> Iterator[None]:
        api_jobs.SEEN.setdefault("events", []).append(("enter", threading.get_ident()))
        yield
        api_jobs.SEEN["events"].append(("exit", threading.get_ident()))

    app = Conveyor(engine=any_engine, testing="manual", blocking_job_scope=scope)
    try:
        with app.as_current():
            await api_jobs.greet_in_thread.enqueue("ada")
            assert (await drain_queue("other"))["completed"] == 1
            assert await process_job(api_jobs.greet_in_thread.new("bob")) == "bob"
    finally:
        await app.close()
    events = api_jobs.SEEN["events"]
    assert [kind for kind, _ in events] == ["enter", "job", "exit"] * 2
    drained, processed = events[:3], events[3:]  # each run in one thread, never the test's
    assert all(len({thread for _, thread in run}) == 1 for run in (drained, processed))
    assert threading.get_ident() not in {thread for _, thread in events}


def test_a_bad_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="testing"):
        Conveyor("sqlite:///:memory:", testing="auto")
    with pytest.raises(ValidationError, match="testing"), mode("sometimes"):
        pass


# -- drain_queue ------------------------------------------------------------------------------
async def test_the_helpers_blocking_twins_work_from_plain_code_and_close_what_they_open(
    engine_name: str, any_engine: Engine
) -> None:
    """``assert_enqueued_sync`` and the others, as a plain (Django, say) test calls them, on an app of
    its own URL: the connections they open are closed when they return (a test database with
    connections left open cannot be dropped)."""
    url, prefix = ADDRESSES[engine_name](any_engine)
    api_jobs.SEEN.clear()
    app = Conveyor(url, prefix=prefix, testing="manual")

    def plain() -> None:
        with app.as_current():
            job_id = api_jobs.greet.enqueue_sync("ada")
            api_jobs.parent_in_thread.enqueue_sync(children=2)
            app.close_sync()  # the enqueues' connections: what follows opens its own
            job = assert_enqueued_sync(worker=api_jobs.greet, args={"name": "ada"})
            assert job.id == job_id and not app.connected
            refute_enqueued_sync(worker=api_jobs.child)
            with pytest.raises(AssertionError, match=r"no job matching \{'worker': 'nobody'\}"):
                assert_enqueued_sync(worker="nobody")
            with pytest.raises(AssertionError, match="expected no job matching"):
                refute_enqueued_sync(worker=api_jobs.greet)
            assert len(all_enqueued_sync()) == 2
            assert drain_queue_sync() == {**NOTHING, "completed": 4}  # with the 2 children
            assert sorted(api_jobs.SEEN["children"]) == [0, 1] and not app.connected
            assert all_enqueued_sync() == []

    try:
        await asyncio.to_thread(plain)
    finally:
        app.close_sync()


async def test_drain_counts_how_each_attempt_ended(app: Conveyor) -> None:
    await api_jobs.greet.enqueue("a")
    await api_jobs.snoozes.enqueue()
    await api_jobs.cancels.enqueue()
    failing = await api_jobs.fails.options(max_attempts=1).enqueue("once")
    retried = await api_jobs.fails.enqueue("twice")
    counts = await drain_queue(with_safety=True, with_scheduled=False)
    assert counts == {
        **NOTHING,
        "completed": 1,
        "scheduled": 1,
        "cancelled": 1,
        "discarded": 1,
        "retryable": 1,
    }
    discarded, retryable = await app.get_job(failing), await app.get_job(retried)
    assert discarded is not None and discarded.state is JobState.DISCARDED
    assert retryable is not None and retryable.state is JobState.RETRYABLE
    assert "RuntimeError: twice" in retryable.errors[-1]["error"]


async def test_drain_without_safety_records_the_attempt_and_raises(app: Conveyor) -> None:
    job_id = await api_jobs.fails.enqueue("loud")
    with pytest.raises(RuntimeError, match="loud"):
        await drain_queue()
    stored = await app.get_job(job_id)
    assert stored is not None and stored.state is JobState.RETRYABLE and stored.attempt == 1


async def test_drain_without_safety_lets_a_jobs_system_exit_out_as_raised(app: Conveyor) -> None:
    job_id = await api_jobs.exits.enqueue()
    with pytest.raises(SystemExit):
        await drain_queue()
    stored = await app.get_job(job_id)
    assert stored is not None and stored.state is JobState.RETRYABLE
    assert "SystemExit" in stored.errors[-1]["error"]


async def test_drain_with_scheduled_runs_retries_until_they_end(app: Conveyor) -> None:
    job_id = await api_jobs.fails.enqueue("again")  # max_attempts 3
    later = await api_jobs.greet.options(schedule_in=3600).enqueue("later")
    counts = await drain_queue(with_safety=True)
    assert counts == {**NOTHING, "retryable": 2, "discarded": 1, "completed": 1}
    stored, scheduled = await app.get_job(job_id), await app.get_job(later)
    assert stored is not None and stored.state is JobState.DISCARDED and stored.attempt == 3
    assert scheduled is not None and scheduled.state is JobState.COMPLETED


async def test_drain_with_recursion_runs_what_jobs_enqueue(app: Conveyor) -> None:
    await api_jobs.parent.enqueue(children=3)
    assert await drain_queue(with_recursion=False) == {**NOTHING, "completed": 1}
    assert len(await all_enqueued(worker=api_jobs.child)) == 3  # left by the single pass
    assert await drain_queue() == {**NOTHING, "completed": 3}
    assert sorted(api_jobs.SEEN["children"]) == [0, 1, 2]


async def test_drain_runs_a_workflow_in_order(app: Conveyor) -> None:
    workflow = (
        Workflow()
        .add("a", api_jobs.child.new(n=1))
        .add("b", api_jobs.child.new(n=2), deps=["a"])
        .add("c", api_jobs.child.new(n=3), deps=["b"])
    )
    await app.enqueue_many(workflow)
    assert await drain_queue() == {**NOTHING, "completed": 3}
    assert api_jobs.SEEN["children"] == [1, 2, 3]


async def test_drain_runs_thread_and_process_jobs_here(app: Conveyor) -> None:
    await api_jobs.greet_in_thread.enqueue("t")
    squared = await api_jobs.squared.enqueue(6)
    assert await drain_queue("other") == {**NOTHING, "completed": 1}
    assert await drain_queue() == {**NOTHING, "completed": 1}
    assert api_jobs.SEEN["threads"] == ["t"] and await app.get_result(squared) == 36


async def test_drain_stores_the_progress_jobs_report(app: Conveyor) -> None:
    job_id = await api_jobs.reports.enqueue()
    assert (await drain_queue("default"))["completed"] == 1
    stored = await app.get_job(job_id)
    assert stored is not None and stored.progress == {"phase": "one", "done": 1}


async def test_drain_refuses_a_bad_queue_name(app: Conveyor) -> None:
    with pytest.raises(ValidationError):
        await drain_queue("")


# -- assertions -------------------------------------------------------------------------------
async def test_assertions_match_partially(app: Conveyor) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    await api_jobs.greet.options(tags=["mail", "vip"], meta={"source": "api", "n": 1}).enqueue("ada", "?")
    await api_jobs.greet.options(scheduled_at=when).enqueue("bob")
    await api_jobs.child.enqueue(n=1)
    found = await assert_enqueued(worker=api_jobs.greet, args={"name": "ada"})
    assert found.args == {"name": "ada", "punctuation": "?"}
    await assert_enqueued(worker=api_jobs.greet.definition.name, meta={"source": "api"}, tags=["vip"])
    await assert_enqueued(args={"name": "bob"}, scheduled_at=when, state="scheduled")
    await refute_enqueued(args={"name": "bob"}, scheduled_at=when + timedelta(minutes=5))
    await refute_enqueued(worker=api_jobs.greet, args={"name": "cy"})
    await refute_enqueued(queue="other")
    assert len(await all_enqueued(worker=api_jobs.greet)) == 2
    assert [job.args for job in await all_enqueued(worker=api_jobs.child)] == [{"n": 1}]


async def test_a_failed_assertion_lists_what_is_enqueued(app: Conveyor) -> None:
    await api_jobs.greet.enqueue("ada")
    with pytest.raises(AssertionError) as failed:
        await assert_enqueued(worker=api_jobs.greet, args={"name": "bob"})
    assert "no job matching" in str(failed.value) and "'name': 'ada'" in str(failed.value)
    with pytest.raises(AssertionError, match="expected no job matching"):
        await refute_enqueued(worker=api_jobs.greet)


async def test_assert_enqueued_waits_up_to_its_timeout(app: Conveyor) -> None:
    async def later() -> None:
        await asyncio.sleep(0.15)
        await api_jobs.greet.enqueue("late")

    task = asyncio.create_task(later())
    await assert_enqueued(args={"name": "late"}, timeout=5)
    await task
    with pytest.raises(AssertionError, match=r"within 0\.1s"):
        await assert_enqueued(args={"name": "never"}, timeout=0.1)


async def test_bad_filters_are_refused(app: Conveyor) -> None:
    with pytest.raises(ValidationError, match="unknown filter"):
        await all_enqueued(wrker="x")
    with pytest.raises(ValidationError, match="args"):
        await all_enqueued(args=["name"])
    with pytest.raises(ValidationError, match="worker"):
        await all_enqueued(worker=42)
    with pytest.raises(ValidationError, match="must be a job state"):
        await all_enqueued(state="running")
