"""The relay contract: job states for waiters, stored progress, signals to jobs, waking jobs that wait
for a signal, and the "ended" and "inbox" notifications (every engine alike)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import orjson
import pytest

from conveyor import JobFilter, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from tests.conformance.contract import T0, Heard, job, listening, put, req, settle

CHANNELS = ["insert", "signal", "ended", "inbox"]


@pytest.fixture
async def heard(any_engine: Engine) -> AsyncIterator[Heard]:
    async with listening(any_engine, CHANNELS) as heard:
        yield heard


def message(**fields: object) -> bytes:
    return orjson.dumps(fields)


async def test_job_states_reports_existing_jobs_only(any_engine: Engine) -> None:
    running = await put(any_engine, JobState.EXECUTING)
    waiting = await put(any_engine, JobState.SCHEDULED)
    done = await put(any_engine, JobState.COMPLETED)
    found = await any_engine.job_states([running, waiting, done, 999_999])
    assert found == {running: JobState.EXECUTING, waiting: JobState.SCHEDULED, done: JobState.COMPLETED}
    assert await any_engine.job_states([]) == {}


async def test_progress_is_stored_only_for_the_attempt_that_runs(any_engine: Engine) -> None:
    running = await put(any_engine, JobState.EXECUTING, meta={"keep": 1, "progress": {"old": True}})
    done = await put(any_engine, JobState.COMPLETED)
    written = await any_engine.record_progress(
        [(running, 1, {"done": 3, "total": 10}), (running + 1000, 1, {"x": 1}), (done, 1, {"late": 1})]
    )
    assert written == [running]
    stored = await job(any_engine, running)
    assert stored.progress == {"done": 3, "total": 10}  # replaced whole: the node sends every field
    assert stored.meta["keep"] == 1
    assert "progress" not in (await job(any_engine, done)).meta
    assert await any_engine.record_progress([(running, 2, {"stale": 1})]) == []  # another attempt
    assert await any_engine.record_progress([]) == []


async def test_an_ack_keeps_the_progress_and_merges_a_snooze_meta(any_engine: Engine, heard: Heard) -> None:
    finished = await put(any_engine, JobState.EXECUTING)
    snoozing = await put(any_engine, JobState.EXECUTING, meta={"snoozed": 2})
    await any_engine.record_progress([(finished, 1, {"phase": "render"})])
    acks = [
        Ack(finished, 1, JobState.COMPLETED),
        Ack(snoozing, 1, JobState.SCHEDULED, schedule_in=60, snoozed=True, meta={"marker": {"a": 1}}),
    ]
    assert sorted(await any_engine.ack_jobs(acks, now=T0)) == [finished, snoozing]
    assert (await job(any_engine, finished)).progress == {"phase": "render"}
    snoozed = await job(any_engine, snoozing)
    assert snoozed.meta["snoozed"] == 3 and snoozed.meta["marker"] == {"a": 1}
    await settle(any_engine, heard)
    assert sorted(i for payload in heard.on("ended") for i in payload["ids"]) == [finished, snoozing]


async def test_cancel_announces_the_cancelled_ids(any_engine: Engine, heard: Heard) -> None:
    running = await put(any_engine, JobState.EXECUTING)
    waiting = await put(any_engine, JobState.AVAILABLE)
    done = await put(any_engine, JobState.COMPLETED)
    assert await any_engine.cancel_jobs(JobFilter(ids=(running, waiting, done)), now=T0) == [running, waiting]
    await settle(any_engine, heard)
    assert heard.on("ended")[-1] == {"ids": [running, waiting]}  # (the one before: done's ack)


async def test_ended_notifications_hold_500_ids_at_most(any_engine: Engine, heard: Heard) -> None:
    ids = await any_engine.insert([req() for _ in range(1200)], now=T0)
    claimed = await any_engine.fetch_jobs("default", 1200, node="n", producer="p", now=T0)
    assert len(claimed) == 1200
    await any_engine.ack_jobs([Ack(j.id, 1, JobState.COMPLETED) for j in claimed], now=T0)
    await settle(any_engine, heard)
    sizes = [len(payload["ids"]) for payload in heard.on("ended")]
    assert max(sizes) <= 500 and sum(sizes) == 1200
    assert sorted(i for payload in heard.on("ended") for i in payload["ids"]) == sorted(ids)


async def test_signals_are_appended_in_order_and_told_to_a_running_job(
    any_engine: Engine, heard: Heard
) -> None:
    running = await put(any_engine, JobState.EXECUTING)
    assert await any_engine.signal_job(running, message(n=1), now=T0) == (JobState.EXECUTING, 0)
    assert await any_engine.signal_job(running, message(n=2), now=T0) == (JobState.EXECUTING, 1)
    assert (await job(any_engine, running)).signals == [{"n": 1}, {"n": 2}]
    await settle(any_engine, heard)
    assert heard.on("inbox") == [{"job_id": running}, {"job_id": running}]


async def test_signals_reach_jobs_not_yet_running_and_wake_only_those_that_wait(
    any_engine: Engine, heard: Heard
) -> None:
    waiting = await put(any_engine, JobState.AVAILABLE)
    later = await put(any_engine, JobState.SCHEDULED)
    awaiting = await put(
        any_engine, JobState.SCHEDULED, meta={"awaiting_signal": {"position": 0, "until": "x"}}
    )
    await settle(any_engine, heard)
    before = len(heard.on("insert"))
    assert await any_engine.signal_job(waiting, message(a=1), now=T0) == (JobState.AVAILABLE, 0)
    assert await any_engine.signal_job(later, message(a=1), now=T0) == (JobState.SCHEDULED, 0)
    assert await any_engine.signal_job(awaiting, message(a=1), now=T0) == (JobState.AVAILABLE, 0)
    woken = await job(any_engine, awaiting)
    assert woken.state is JobState.AVAILABLE and woken.scheduled_at == T0
    assert (await job(any_engine, later)).scheduled_at > T0
    await settle(any_engine, heard, 1)
    assert heard.on("insert")[before:] == [{"queue": "default"}]
    assert heard.on("inbox") == []


async def test_final_jobs_and_full_inboxes_refuse_signals(any_engine: Engine) -> None:
    done = await put(any_engine, JobState.COMPLETED)
    assert await any_engine.signal_job(done, message(a=1), now=T0) == (JobState.COMPLETED, None)
    assert (await job(any_engine, done)).signals == []
    full = await put(any_engine, JobState.AVAILABLE)
    assert await any_engine.signal_job(full, message(a=1), limit=2) == (JobState.AVAILABLE, 0)
    assert await any_engine.signal_job(full, message(a=2), limit=2) == (JobState.AVAILABLE, 1)
    assert await any_engine.signal_job(full, message(a=3), limit=2) == (JobState.AVAILABLE, None)
    assert (await job(any_engine, full)).signals == [{"a": 1}, {"a": 2}]
    assert await any_engine.signal_job(999_999, message(a=1)) is None


async def test_signals_survive_junk_another_client_stored(any_engine: Engine) -> None:
    """An inbox that is not an array is started afresh; entries that are not objects are kept but
    not counted, so positions count the messages a job can receive."""
    not_a_list = await put(any_engine, JobState.AVAILABLE, meta={"signals": "junk"})
    mixed = await put(any_engine, JobState.AVAILABLE, meta={"signals": [1, "x", {"a": 0}, None]})
    assert await any_engine.signal_job(not_a_list, message(a=1)) == (JobState.AVAILABLE, 0)
    assert await any_engine.signal_job(mixed, message(a=1)) == (JobState.AVAILABLE, 1)
    assert (await job(any_engine, mixed)).signals == [{"a": 0}, {"a": 1}]


async def test_wake_awaiting_wakes_a_job_whose_message_came_while_it_let_go(
    any_engine: Engine, heard: Heard
) -> None:
    ids = []
    for meta in (
        {"awaiting_signal": {"position": 0}, "signals": [{"a": 1}]},  # its message is there
        {"awaiting_signal": {"position": 1}, "signals": [{"a": 1}]},  # it waits for a second one
        {"awaiting_signal": {"position": 0}},  # no inbox yet
        {"awaiting_signal": {"position": "0"}, "signals": [{"a": 1}]},  # junk position
        {"awaiting_signal": None, "signals": [{"a": 1}]},  # not waiting any more
        {"awaiting_signal": {"position": 0}, "signals": "junk"},
    ):
        ids.append(await put(any_engine, JobState.SCHEDULED, meta=meta))
    running = await put(
        any_engine, JobState.EXECUTING, meta={"awaiting_signal": {"position": 0}, "signals": [{"a": 1}]}
    )
    await settle(any_engine, heard)
    before = len(heard.on("insert"))
    assert await any_engine.wake_awaiting([*ids, running], now=T0 + timedelta(seconds=5)) == [ids[0]]
    woken = await job(any_engine, ids[0])
    assert woken.state is JobState.AVAILABLE and woken.scheduled_at == T0 + timedelta(seconds=5)
    assert await any_engine.wake_awaiting([], now=T0) == []
    await settle(any_engine, heard, 1)
    assert heard.on("insert")[before:] == [{"queue": "default"}]
