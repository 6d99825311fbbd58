"""Polling on every engine: one poll per node tells which queues hold claimable jobs
(``Engine.waiting_queues``), wakes only those producers, and alone (notifications off) still runs
every job of every queue; idle queues cost no fetch."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from conveyor.fleet import QueueState
from tests.conformance import jobs
from tests.conformance.app.test_runtime_contract import wait_final
from tests.conformance.conftest import started_node
from tests.helpers import Events, Ticks

QUEUES = [f"q{n}" for n in range(30)]


async def test_waiting_queues_names_the_queues_with_claimable_jobs(any_engine: Engine) -> None:
    await any_engine.insert(
        [
            jobs.async_ok.new(value=1).with_options(queue="ready"),
            jobs.async_ok.new(value=2).with_options(queue="ready"),
            jobs.async_ok.new(value=3).with_options(queue="later", schedule_in=3600),
            jobs.async_ok.new(value=4).with_options(queue="taken"),
            jobs.async_ok.new(value=5).with_options(queue="done"),
        ]
    )
    (taken,) = await any_engine.fetch_jobs("taken", 1, node="n", producer="p")
    (done,) = await any_engine.fetch_jobs("done", 1, node="n", producer="p")
    await any_engine.ack_jobs([Ack(done.id, done.attempt, JobState.COMPLETED)])

    asked = ["ready", "later", "taken", "done", "never-used"]
    assert await any_engine.waiting_queues(asked) == {"ready"}
    assert await any_engine.waiting_queues(["later", "taken"]) == set()
    assert await any_engine.waiting_queues([]) == set()
    assert taken.state is JobState.EXECUTING


async def test_waiting_queues_sees_jobs_due_and_made_available_by_staging(any_engine: Engine) -> None:
    await any_engine.insert([jobs.async_ok.new(value=1).with_options(queue="soon", schedule_in=60)])
    assert await any_engine.waiting_queues(["soon"]) == set()
    await any_engine.stage_jobs(10)  # not due yet: stays scheduled
    assert await any_engine.waiting_queues(["soon"]) == set()
    await any_engine.stage_jobs(10, now=datetime.now(UTC) + timedelta(seconds=61))  # due: staged
    assert await any_engine.waiting_queues(["soon"]) == {"soon"}


async def test_waiting_queues_refuses_a_string_and_bad_names(any_engine: Engine) -> None:
    with pytest.raises(ValidationError, match="queues"):
        await any_engine.waiting_queues("default")
    with pytest.raises(ValidationError, match="queues"):
        await any_engine.waiting_queues(["default", ""])
    with pytest.raises(ValidationError, match="queues"):
        await any_engine.waiting_queues(["default", 7])  # type: ignore[list-item]


async def test_poll_queues_reads_the_waiting_queues_and_the_persisted_states_at_once(
    any_engine: Engine,
) -> None:
    await any_engine.insert([jobs.async_ok.new(value=n).with_options(queue=q) for n, q in enumerate("abc")])
    await any_engine.save_queue_state("conveyor", "a", paused=True)
    await any_engine.save_queue_state("conveyor", "b", limit=3, limits={"global_limit": 2})
    await any_engine.save_queue_state("other", "b", limit=9)  # another instance's
    await any_engine.save_queue_state("conveyor", "elsewhere", limit=4)  # a queue not asked about
    poll = await any_engine.poll_queues("conveyor", ["a", "b", "c", "d"], awake=["b", "c", "d"])
    assert poll.waiting == {"b", "c"}  # "a" holds a job but was not asked about: it is paused
    assert poll.states == {
        "a": QueueState(paused=True),
        "b": QueueState(limit=3, limits={"global_limit": 2}),
    }
    assert poll.states == {
        q: s for q, s in (await any_engine.load_queue_states("conveyor")).items() if q in "abcd"
    }
    empty = await any_engine.poll_queues("conveyor", [], awake=[])
    assert empty.waiting == frozenset() and empty.states == {}
    with pytest.raises(ValidationError, match="queues"):
        await any_engine.poll_queues("conveyor", "a", awake=[])


def polling_node(engine_name: str, tmp_path: Path, **options: Any) -> AbstractAsyncContextManager[Conveyor]:
    """A node with ``QUEUES`` (limit 2 each), polling every 0.1 s and deaf to notifications: only
    the poll can wake its producers."""
    return started_node(
        engine_name, tmp_path, queues=dict.fromkeys(QUEUES, 2), notifications=False, **options
    )


def fetches(app: Conveyor) -> list[str]:
    """The queue of each fetch the node makes from now on."""
    seen: list[str] = []
    app.on("producer.fetch", lambda event, data: seen.append(data["queue"]))
    return seen


async def test_polling_alone_runs_every_queues_jobs(engine_name: str, tmp_path: Path) -> None:
    async with polling_node(engine_name, tmp_path) as app:
        # Five jobs in each of ten queues (more than a queue's limit of 2), inserted by another
        # client of the database while the node runs: no notification reaches the node.
        other = Conveyor(engine=await app.engine())
        requests = [
            jobs.async_ok.new(value=n).with_options(queue=queue) for queue in QUEUES[::3] for n in range(5)
        ]
        ids = await other.enqueue_many(requests)
        await wait_final(app, ids, {JobState.COMPLETED})
        assert await (await app.engine()).waiting_queues(QUEUES) == set()


async def test_idle_queues_cost_no_fetch_and_only_queues_with_jobs_are_woken(
    engine_name: str, tmp_path: Path
) -> None:
    first = Events()
    async with polling_node(engine_name, tmp_path, telemetry={"producer.fetch": first}) as app:
        # Each producer's first fetch, at start, is over.
        await first.wait("producer.fetch", lambda done: {data["queue"] for data in done} >= set(QUEUES))
        seen = fetches(app)
        assert app.node is not None
        await Ticks(app.node.poller).more(5, "five polls of thirty idle queues")
        assert seen == []
        (job_id,) = await app.enqueue_many([jobs.async_ok.new(value=1).with_options(queue="q7")])
        await wait_final(app, [job_id], {JobState.COMPLETED})
        assert set(seen) == {"q7"}


async def test_a_paused_queue_is_not_polled_and_runs_once_resumed(engine_name: str, tmp_path: Path) -> None:
    async with polling_node(engine_name, tmp_path) as app:
        assert app.node is not None
        app.node.pause("q1")
        seen = fetches(app)
        polls = Ticks(app.node.poller)
        # Inserted together: the poll that wakes q2 for its job sees q1's too, had it asked.
        job_id, marker = await app.enqueue_many(
            [jobs.async_ok.new(value=1).with_options(queue=queue) for queue in ("q1", "q2")]
        )
        await wait_final(app, [marker], {JobState.COMPLETED})
        await polls.more(2, "two more polls")
        job = await app.get_job(job_id)
        assert job is not None and job.state is JobState.AVAILABLE
        assert "q1" not in seen
        app.node.resume("q1")
        await wait_final(app, [job_id], {JobState.COMPLETED})


async def test_a_full_queue_takes_its_backlog_as_slots_free(engine_name: str, tmp_path: Path) -> None:
    # Limit 2, twelve jobs that each hold their slot a moment: the poll finds the queue full and
    # waiting; each freed slot fetches again, and every job runs exactly once.
    async with polling_node(engine_name, tmp_path) as app:
        ids = await app.enqueue_many([jobs.probe.new(pause=0.05).with_options(queue="q2") for _ in range(12)])
        await wait_final(app, ids, {JobState.COMPLETED})
        for job_id in ids:
            job = await app.get_job(job_id)
            assert job is not None and job.attempt == 1
