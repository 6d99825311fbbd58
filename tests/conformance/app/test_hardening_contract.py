"""No job can stop a node or strand its batch: poisoned acks, odd errors and escaping BaseExceptions
end one job each (with the reason recorded) while every other job is written. Run on every engine."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobRequest, JobState
from conveyor._runtime.acker import Acker
from conveyor._runtime.clock import FakeClock
from conveyor._runtime.duties import Lifeline
from conveyor._runtime.heartbeat import Heartbeat
from conveyor._runtime.leadership import Leadership
from conveyor._runtime.runner import MAX_BACKOFF_SECONDS
from conveyor.acks import MAX_ERROR_CHARS, Ack
from conveyor.engine.base import Engine
from conveyor.errors import EngineClosedError
from conveyor.fleet import OWN_PRODUCER, ProducerBeat
from conveyor.telemetry import Telemetry
from tests.conformance import hardening_jobs as hj
from tests.conformance.app.test_runtime_contract import wait_final
from tests.conformance.conftest import started_node
from tests.helpers import poll

FINAL = {JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED}


async def claim(engine: Engine, count: int) -> list[int]:
    await engine.insert([JobRequest("tests.nowhere.Job", queue="acks") for _ in range(count)])
    jobs = await engine.fetch_jobs("acks", count, node="n1", producer=str(uuid.uuid4()))
    assert len(jobs) == count
    return [job.id for job in jobs]


# -- the acker: a refused ack is isolated, the rest of its batch is written -----------------------
async def test_engines_classify_failures(any_engine: Engine) -> None:
    assert any_engine.is_transient(EngineClosedError("closed"))
    assert not any_engine.is_transient(ValueError("a value the statement refused"))
    assert not any_engine.is_transient(TypeError("not serialisable"))


async def test_a_refused_ack_is_isolated_and_replaced(any_engine: Engine) -> None:
    ids = await claim(any_engine, 40)
    poisoned = {ids[3], ids[17], ids[39]}
    acker = Acker(any_engine, delay=0.05)
    await acker.start()
    for job_id in ids:
        # A lone surrogate cannot be encoded by any engine: the statement of the whole batch fails.
        meta = {"bad": "\ud800"} if job_id in poisoned else None
        acker.push(Ack(job_id, 1, JobState.COMPLETED, meta=meta))
    await asyncio.wait_for(acker.stop(), 10)
    assert acker.refused == len(poisoned)
    assert acker.written == len(ids)
    for job_id in ids:
        job = await any_engine.get_job(job_id)
        assert job is not None and job.state is JobState.COMPLETED, job
        if job_id in poisoned:
            assert "recorded" not in job.meta
            assert "could not write this attempt's outcome (completed)" in job.errors[-1]["error"]
        else:
            assert job.errors == ()


async def test_a_refused_error_entry_is_replaced_by_a_clean_one(any_engine: Engine) -> None:
    (job_id,) = await claim(any_engine, 1)
    acker = Acker(any_engine, delay=0.01)
    await acker.start()
    # An error entry the runner's sanitiser never made: unencodable, so the statement fails.
    acker.push(Ack(job_id, 1, JobState.RETRYABLE, schedule_in=1.0, error={"error": 1, "\ud800": 2}))
    await asyncio.wait_for(acker.stop(), 10)
    job = await any_engine.get_job(job_id)
    assert job is not None and job.state is JobState.RETRYABLE
    assert job.errors[-1]["attempt"] == 1
    assert "could not write this attempt's outcome (retryable)" in job.errors[-1]["error"]


class Unreachable:
    """The engine, but its first ``failures`` acks fail as if the database were away."""

    def __init__(self, engine: Engine, failures: int) -> None:
        self.engine = engine
        self.failures = failures
        self.calls: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        self.calls.append(len(acks))
        if len(self.calls) <= self.failures:
            raise EngineClosedError("the database is away")
        return await self.engine.ack_jobs(acks, now=now, node=node)


async def test_a_transient_failure_retries_the_whole_batch(any_engine: Engine) -> None:
    ids = await claim(any_engine, 3)
    flaky = Unreachable(any_engine, failures=3)
    acker = Acker(flaky, delay=0.01)  # type: ignore[arg-type]
    await acker.start()
    for job_id in ids:
        acker.push(Ack(job_id, 1, JobState.COMPLETED))
    await asyncio.wait_for(acker.stop(), 10)
    assert flaky.calls == [3, 3, 3, 3]  # never split, never replaced
    assert acker.written == 3 and acker.refused == 0
    for job_id in ids:
        job = await any_engine.get_job(job_id)
        assert job is not None and job.state is JobState.COMPLETED and job.errors == ()


class Refusing:
    """The engine, but its first ``failures`` acks are refused whatever they carry, with an error
    that is not transient (a statement the database will not run for now, as a transaction
    pooler's ``prepared statement does not exist`` or a read-only server)."""

    def __init__(self, engine: Engine, failures: int) -> None:
        self.engine = engine
        self.failures = failures
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("the statement was refused, whatever its data")
        return await self.engine.ack_jobs(acks, now=now, node=node)


async def test_an_ack_refused_whatever_it_carries_is_kept_and_written_later(any_engine: Engine) -> None:
    """Before: after the ack and both fallbacks were refused the ack was dropped, and the heartbeat
    gave the finished job back to run again. Now it stays held and is written once the cause passes."""
    (job_id,) = await claim(any_engine, 1)
    refusing = Refusing(any_engine, failures=3)  # the ack and both of its fallbacks
    acker = Acker(refusing, delay=0.01)  # type: ignore[arg-type]
    await acker.start()
    acker.push(Ack(job_id, 1, JobState.COMPLETED))
    await poll(lambda: refusing.calls, lambda n: n >= 3, timeout=5, what="the ack and its fallbacks")
    assert acker.held() == {job_id}  # still running as far as the heartbeat can tell
    await asyncio.wait_for(acker.stop(), 10)
    assert refusing.calls == 4  # then the ack as given, once the cause passed
    job = await any_engine.get_job(job_id)
    assert job is not None and job.state is JobState.COMPLETED and job.errors == ()


# -- a node: the triggers seen in the wild end one job each -------------------------------------
async def run_among_others(app: Conveyor, poisoned: list[JobRequest]) -> tuple[list[int], list[int]]:
    """Enqueue ``poisoned`` among 20 quick jobs in one batch; wait until all are past executing."""
    others = [hj.quick.new(n=i) for i in range(20)]
    ids = await app.enqueue_many(others[:10] + poisoned + others[10:])
    bad = ids[10 : 10 + len(poisoned)]
    good = ids[:10] + ids[10 + len(poisoned) :]
    await wait_final(app, good, {JobState.COMPLETED}, timeout=10)
    states = FINAL | {JobState.RETRYABLE, JobState.SCHEDULED}
    await wait_final(app, bad, states, timeout=10)
    return good, bad


async def test_snooze_over_junk_meta_counts_from_zero(node_app: Conveyor) -> None:
    request = hj.snoozes_over_junk_meta.new().with_options(meta={"snoozed": "x"})
    _, (job_id,) = await run_among_others(node_app, [request])
    await wait_final(node_app, [job_id], {JobState.COMPLETED}, timeout=10)
    job = await node_app.get_job(job_id)
    assert job is not None and job.meta["snoozed"] == 1 and job.attempt == 1


async def test_backoffs_are_clamped_or_replaced(node_app: Conveyor) -> None:
    before = datetime.now(UTC)
    _, bad = await run_among_others(
        node_app, [hj.huge_backoff.new(), hj.infinite_backoff.new(), hj.nan_backoff.new()]
    )
    huge, infinite, nan = [await node_app.get_job(i) for i in bad]
    assert huge is not None and huge.state is JobState.RETRYABLE
    expected = before + timedelta(seconds=MAX_BACKOFF_SECONDS)
    assert abs((huge.scheduled_at - expected).total_seconds()) < 60
    for job in (infinite, nan):  # the default backoff: 15 s + 2^1 s, with jitter
        assert job is not None and job.state is JobState.RETRYABLE
        assert timedelta(seconds=10) < job.scheduled_at - before < timedelta(seconds=30)


async def test_error_text_is_stored_safely(node_app: Conveyor, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="conveyor.job")
    _, bad = await run_among_others(
        node_app, [hj.nul_error.new(), hj.surrogate_error.new(), hj.huge_error.new()]
    )
    nul, surrogate, huge = [await node_app.get_job(i) for i in bad]
    assert nul is not None and nul.state is JobState.DISCARDED
    assert "ValueError: bad\\x00byte" in nul.errors[-1]["error"]
    assert surrogate is not None and surrogate.state is JobState.DISCARDED
    assert "lone \\ud800 surrogate" in surrogate.errors[-1]["error"]
    assert huge is not None and huge.state is JobState.DISCARDED
    text = huge.errors[-1]["error"]
    assert len(text) <= MAX_ERROR_CHARS + 100
    assert "characters cut]" in text and text.rstrip().endswith("tail")
    # The log lines are safe too: encodable, short, with the exception type and the final verdict.
    records = [
        r for r in caplog.records if r.name == "conveyor.job" and "attempt 1/1 failed" in r.getMessage()
    ]
    assert len(records) == 3
    for record in records:
        line = record.getMessage()
        line.encode("utf-8")
        assert len(line) < 1000 and "ValueError" in line and "discarded (no attempts left)" in line
        assert record.levelno == logging.ERROR


# -- a node: BaseExceptions from job code end that job, never the node ---------------------------
@pytest.mark.parametrize("kind", sorted(hj.ESCAPES))
async def test_base_exceptions_from_job_code_end_only_that_job(node_app: Conveyor, kind: str) -> None:
    requests = [hj.async_escape.new(kind=kind), hj.thread_escape.new(kind=kind)]
    if kind != "CustomBase":  # a class defined in a test module pickles; kept off the process pool
        requests.append(hj.process_escape.new(kind=kind))
    _, bad = await run_among_others(node_app, requests)
    for job_id in bad:
        job = await node_app.get_job(job_id)
        assert job is not None and job.state is JobState.DISCARDED, job
        assert kind in job.errors[-1]["error"]
    # The node still runs jobs afterwards.
    after = await node_app.enqueue(hj.quick.new(n=1))
    await wait_final(node_app, [after], {JobState.COMPLETED}, timeout=10)


async def test_a_module_that_exits_on_import_fails_its_jobs_only(node_app: Conveyor) -> None:
    request = JobRequest("tests.conformance.exits_on_import.job", max_attempts=1)
    _, (job_id,) = await run_among_others(node_app, [request])
    job = await node_app.get_job(job_id)
    # Not importable here: offered to other nodes again (unfit_job_patience), the reason recorded.
    assert job is not None and job.state in (JobState.SCHEDULED, JobState.AVAILABLE, JobState.EXECUTING)
    assert "SystemExit" in job.errors[-1]["error"] and job.meta["unfit_since"]


# -- rescue: robust against junk, never of a producer that may be alive --------------------------
async def orphan_of_a_dead_producer(
    engine: Engine, meta: dict[str, Any], mark: dict[str, Any] = OWN_PRODUCER
) -> int:
    dead = str(uuid.uuid4())
    long_ago = datetime.now(UTC) - timedelta(seconds=120)
    await engine.record_producers("app", "gone", [ProducerBeat(dead, "acks", mark)], now=long_ago)
    (job_id,) = await engine.insert([JobRequest("tests.nowhere.Job", queue="acks", meta=meta)])
    await engine.fetch_jobs("acks", 1, node="gone", producer=dead)
    return job_id


async def test_rescue_counts_over_junk_meta(any_engine: Engine) -> None:
    junk = await orphan_of_a_dead_producer(any_engine, {"rescued": "x"})
    other = await orphan_of_a_dead_producer(any_engine, {"rescued": 2})
    result = await any_engine.rescue_jobs(timeout=15, backstop=3600)
    assert result.available == (junk, other)
    assert (await any_engine.get_job(junk)).meta["rescued"] == 1  # type: ignore[union-attr]
    assert (await any_engine.get_job(other)).meta["rescued"] == 3  # type: ignore[union-attr]


async def test_the_lifeline_rescues_only_after_unbroken_contact(any_engine: Engine) -> None:
    telemetry = Telemetry()
    leadership = Leadership(any_engine, telemetry, name="app", node="me", ttl=30)
    leadership.is_leader = True
    clock = FakeClock()  # contact is measured on the heartbeat's clock
    heartbeat = Heartbeat(
        any_engine, [], name="app", node="me", interval=0.1, acker=Acker(any_engine), clock=clock
    )
    lifeline = Lifeline(
        any_engine,
        telemetry,
        leadership,
        interval=0.1,
        producer_timeout=0.5,
        backstop=3600,
        heartbeat=heartbeat,
        foreign_timeout=1.0,
    )
    orphan = await orphan_of_a_dead_producer(any_engine, {})
    foreign = await orphan_of_a_dead_producer(any_engine, {}, mark={})  # another runtime's row
    await lifeline.lead()  # no heartbeat has reached the database yet: no contact at all
    await heartbeat.tick()
    await lifeline.lead()  # in contact for less than producer_timeout
    assert (await any_engine.get_job(orphan)).state is JobState.EXECUTING  # type: ignore[union-attr]
    await clock.advance(0.6)
    await lifeline.lead()
    assert (await any_engine.get_job(orphan)).state is JobState.AVAILABLE  # type: ignore[union-attr]
    # Another runtime's producer waits for contact as long as its own, longer, timeout.
    assert (await any_engine.get_job(foreign)).state is JobState.EXECUTING  # type: ignore[union-attr]
    await clock.advance(0.5)
    await heartbeat.tick()
    await lifeline.lead()
    assert (await any_engine.get_job(foreign)).state is JobState.AVAILABLE  # type: ignore[union-attr]


async def test_a_claim_whose_reply_was_lost_is_given_back(engine_name: str, tmp_path: Path) -> None:
    """The fetch committed but its answer never reached the node: the node's heartbeat finds the
    job claimed for its live producer yet not running, and releases it (nobody else would)."""
    # The heartbeat looks for lost claims three times per producer_timeout: 3 s makes it once a
    # second (the default 15 s, once in 5 s).
    async with started_node(engine_name, tmp_path, heartbeat_interval=0.2, producer_timeout=3.0) as node_app:
        assert node_app.node is not None
        producer = node_app.node.producers["default"]
        engine = await node_app.engine()
        # Kept out of the node's queue so only the hand-made claim can take it.
        job_id = await node_app.enqueue(hj.quick.new(n=1).with_options(queue="elsewhere"))
        long_ago = datetime.now(UTC) - timedelta(seconds=60)
        (claimed,) = await engine.fetch_jobs(
            "elsewhere", 1, node=producer.node, producer=producer.uuid, now=long_ago
        )
        assert claimed.id == job_id and claimed.state is JobState.EXECUTING
        await wait_final(node_app, [job_id], {JobState.AVAILABLE}, timeout=10)
        job = await node_app.get_job(job_id)
        assert job is not None and job.attempt == 0  # the lost claim spent no attempt
        # A job claimed just now (its fetch may still be answering) is left alone.
        (fresh,) = await engine.fetch_jobs("elsewhere", 1, node=producer.node, producer=producer.uuid)
        await node_app.node.heartbeat.give_back_lost_claims()  # the heartbeat's look, now
        assert (await node_app.get_job(fresh.id)).state is JobState.EXECUTING  # type: ignore[union-attr]
