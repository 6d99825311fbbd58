"""Cancelled runs that go on: cancelling an executing job marks it ``cancelled`` at once, but its run
may not stop at once (a thread job only gets a flag). Until the producer that runs it says the run is
over (its heartbeat stops holding the job), the job keeps its ordered lock and its global-limit
slot, so "one at a time" and the limit hold (issue 31.6)."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobFilter, JobRequest, JobState
from conveyor.engine.base import Engine
from conveyor.fleet import OWN_PRODUCER, ProducerBeat
from conveyor.limits import FetchLimits, GlobalLimit
from tests.conformance import hardening_jobs as hj
from tests.conformance.app.test_runtime_contract import wait_final
from tests.conformance.conftest import started_node
from tests.conformance.contract import PRODUCER, T0, WORKER, fetch, job, uid
from tests.helpers import poll


async def beat(engine: Engine, *holding: int, producer: str = PRODUCER, queue: str = "default") -> None:
    """The producer's heartbeat, saying which jobs its node still runs."""
    await engine.record_producers(
        "conveyor", "node", [ProducerBeat(producer, queue, OWN_PRODUCER, holding=holding)], now=T0
    )


def locked(key: str, n: int, **options: Any) -> JobRequest:
    return JobRequest(WORKER, args={"n": n}, lock=key, **options)


async def test_a_cancelled_run_keeps_its_lock_until_its_producer_lets_go(any_engine: Engine) -> None:
    await beat(any_engine)
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine) == [first]
    assert await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0) == [first]
    assert (await job(any_engine, first)).state is JobState.CANCELLED  # marked at once, as before
    assert await fetch(any_engine) == []  # its run goes on: the key stays taken
    await beat(any_engine, first)
    assert await fetch(any_engine) == []
    await beat(any_engine)  # the run is over
    assert await fetch(any_engine) == [second]


async def test_a_cancel_listed_before_the_nodes_next_beat_is_kept(any_engine: Engine) -> None:
    """A beat written after the cancel but saying nothing of the job (its node has not heard yet)
    would drop it: the node holds every job it still runs, cancelled or not."""
    await beat(any_engine)
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine) == [first]
    await beat(any_engine, first)  # running, not cancelled yet
    await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0)
    await beat(any_engine, first)
    assert await fetch(any_engine) == []
    await beat(any_engine, 999_999)  # another job: the cancelled one is over
    assert await fetch(any_engine) == [second]


async def test_a_cancelled_run_keeps_its_global_slot_until_its_producer_lets_go(any_engine: Engine) -> None:
    limits = FetchLimits(global_limit=GlobalLimit(1))
    await beat(any_engine, queue="capped")
    first, second = await any_engine.insert(
        [JobRequest(WORKER, args={"n": n}, queue="capped") for n in (1, 2)], now=T0
    )
    claim = await any_engine.fetch_jobs("capped", 5, node="node", producer=PRODUCER, now=T0, limits=limits)
    assert [j.id for j in claim] == [first]
    await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0)
    blocked = await any_engine.fetch_jobs("capped", 5, node="node", producer=PRODUCER, now=T0, limits=limits)
    assert list(blocked) == [] and blocked.capped  # type: ignore[attr-defined]
    await beat(any_engine, first, queue="capped")
    assert not await any_engine.fetch_jobs("capped", 5, node="node", producer=PRODUCER, now=T0, limits=limits)
    await beat(any_engine, queue="capped")
    claim = await any_engine.fetch_jobs("capped", 5, node="node", producer=PRODUCER, now=T0, limits=limits)
    assert [j.id for j in claim] == [second]


async def test_a_cancelled_run_keeps_its_partitioned_global_slot(any_engine: Engine) -> None:
    limits = FetchLimits(global_limit=GlobalLimit.build({"allowed": 1, "partition": {"args": ["t"]}}))
    await beat(any_engine, queue="parts")
    a1, a2, b1 = await any_engine.insert(
        [JobRequest(WORKER, args={"t": t, "n": n}, queue="parts") for t, n in (("a", 1), ("a", 2), ("b", 1))],
        now=T0,
    )
    claim = await any_engine.fetch_jobs("parts", 1, node="node", producer=PRODUCER, now=T0, limits=limits)
    assert [j.id for j in claim] == [a1]
    await any_engine.cancel_jobs(JobFilter(ids=(a1,)), now=T0)
    claim = await any_engine.fetch_jobs("parts", 5, node="node", producer=PRODUCER, now=T0, limits=limits)
    assert [j.id for j in claim] == [b1]  # partition "a" still runs a1
    await beat(any_engine, b1, queue="parts")
    claim = await any_engine.fetch_jobs("parts", 5, node="node", producer=PRODUCER, now=T0, limits=limits)
    assert [j.id for j in claim] == [a2]


async def test_a_dead_producers_cancelled_runs_let_go_with_its_row(any_engine: Engine) -> None:
    other = uid(77)
    await beat(any_engine, producer=other)
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine, producer=other) == [first]
    await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0)
    assert await fetch(any_engine) == []
    await any_engine.delete_producers([other])  # a clean stop, or the leader forgetting a dead node
    assert await fetch(any_engine) == [second]


async def test_a_cancel_of_a_job_no_producer_row_names_holds_nothing(any_engine: Engine) -> None:
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine, producer=uid(5)) == [first]  # a claimer that writes no row
    await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0)
    assert await fetch(any_engine) == [second]


# -- on a node: a blocking job that ignores its cancel flag ------------------------------------------
def limited(kind: str, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node's queues and the jobs' options for one kind of "one at a time"."""
    if kind == "lock":
        return {"default": 5}, {"lock": key}
    return {"default": {"limit": 5, "global_limit": 1}}, {}


async def cancel_while_it_runs(app: Conveyor, key: str, options: dict[str, Any]) -> tuple[int, int]:
    """Start a thread job that ignores its flag, enqueue a second one behind it, cancel the first."""
    first = await app.enqueue(hj.thread_ignores_cancel.new(key=key, n=1).with_options(**options))
    await wait_final(app, [first], {JobState.EXECUTING})
    second = await app.enqueue(hj.thread_records.new(key=key, n=2).with_options(**options))
    assert await app.cancel_job(first)
    assert (await job(await app.engine(), first)).state is JobState.CANCELLED
    return first, second


async def heartbeats(engine: Engine, count: int) -> None:
    """Until the node has beaten ``count`` times from now (its producers' rows, newly dated)."""
    seen: set[datetime] = set()

    async def beats() -> int:
        seen.add(max(p.updated_at for p in await engine.list_producers()))
        return len(seen)

    await poll(beats, lambda n: n > count, what=f"{count} heartbeats")


@pytest.mark.parametrize("kind", ["lock", "global_limit"])
async def test_a_cancelled_thread_job_holds_its_turn_until_its_thread_returns(
    engine_name: str, tmp_path: Path, kind: str
) -> None:
    key = uuid.uuid4().hex
    hj.THREAD_RELEASE[key] = threading.Event()
    queues, options = limited(kind, key)
    # Polls 10 s apart: the second job starts because the run's end wakes the node, not by a poll.
    settings = {"queues": queues, "heartbeat_interval": 0.2, "poll_interval": 10.0}
    async with started_node(engine_name, tmp_path, **settings) as app:
        _, second = await cancel_while_it_runs(app, key, options)
        await heartbeats(await app.engine(), 5)  # the first one's thread still runs meanwhile
        assert (await job(await app.engine(), second)).state is JobState.AVAILABLE
        hj.THREAD_RELEASE[key].set()
        await wait_final(app, [second], {JobState.COMPLETED}, timeout=3)
    assert [run for run in hj.RUNS if run[1] == key] == [
        ("start", key, 1),
        ("end", key, 1),
        ("start", key, 2),
        ("end", key, 2),
    ]


async def test_a_thread_that_never_returns_is_let_go_after_the_cancel_grace(
    engine_name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = uuid.uuid4().hex
    hj.THREAD_RELEASE[key] = threading.Event()
    queues, options = limited("lock", key)
    settings = {"queues": queues, "heartbeat_interval": 0.2, "cancel_grace": 0.5}
    try:
        with caplog.at_level(logging.WARNING, logger="conveyor.producer"):
            async with started_node(engine_name, tmp_path, **settings) as app:
                first, second = await cancel_while_it_runs(app, key, options)
                await wait_final(app, [second], {JobState.COMPLETED})
                assert [run for run in hj.RUNS if run[1] == key][:3] == [
                    ("start", key, 1),
                    ("start", key, 2),
                    ("end", key, 2),
                ]
                assert any(
                    f"job {first} was cancelled" in r.getMessage() and "let go" in r.getMessage()
                    for r in caplog.records
                )
    finally:
        hj.THREAD_RELEASE[key].set()


async def test_a_cancel_of_a_job_another_runtime_runs_holds_nothing(any_engine: Engine) -> None:
    """An oban-py producer's row is never listed: its beats know nothing of the list, so nothing
    would ever let go."""
    foreign = uid(9)
    await any_engine.record_producers(
        "Oban", "py", [ProducerBeat(foreign, "default", {"local_limit": 5})], now=T0
    )
    first, second = await any_engine.insert([locked("k", 1), locked("k", 2)], now=T0)
    assert await fetch(any_engine, producer=foreign) == [first]
    await any_engine.cancel_jobs(JobFilter(ids=(first,)), now=T0)
    assert await fetch(any_engine) == [second]
    (row,) = [p for p in await any_engine.list_producers() if p.uuid == foreign]
    assert "stopping" not in row.meta
