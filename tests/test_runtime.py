"""The runtime against a real PostgreSQL: nodes fetch, run and ack jobs, and every way an attempt can
end (value, error, outcome, timeout, crash, shutdown) leaves the row in the state Oban expects."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from conveyor import Conveyor, Job, JobState
from conveyor.engine.postgres import PostgresEngine
from tests import helpers
from tests import runtime_jobs as jobs
from tests.helpers import holds, table

ROOT = Path(__file__).resolve().parent.parent
#: Seconds of slack for timing assertions (two CPU cores, a shared database).
SLACK = 0.5


# -- helpers --------------------------------------------------------------------------------------
def make_app(dsn: str, prefix: str, **settings: Any) -> Conveyor:
    """``helpers.make_app`` with room for ten jobs, faster staging and a longer shutdown grace."""
    runtime = {"queues": {"default": 10}, "stage_interval": 0.1, "shutdown_grace": 2.0}
    return helpers.make_app(dsn, prefix, **{**runtime, **settings})


@asynccontextmanager
async def running(dsn: str, prefix: str, **settings: Any) -> AsyncIterator[Conveyor]:
    app = make_app(dsn, prefix, **settings)
    async with app:
        yield app


@asynccontextmanager
async def running_idle(dsn: str, prefix: str, **settings: Any) -> AsyncIterator[Conveyor]:
    """``running``, once every queue's producer has made its first fetch (at start) and found
    nothing: the node is idle, its next poll ``poll_interval`` away."""
    app = make_app(dsn, prefix, **settings)
    fetches = helpers.Events()
    app.on("producer.fetch", fetches)
    async with app:
        queues = {queue.name for queue in app.settings.queues}
        await fetches.wait("producer.fetch", lambda seen: {data["queue"] for data in seen} >= queues)
        yield app


def new_key() -> str:
    return uuid.uuid4().hex


async def wait_for_job(engine: PostgresEngine, job_id: int, *states: JobState, timeout: float = 10.0) -> Job:
    """Poll until the job reaches one of ``states``; fail with its last state otherwise."""
    found = await helpers.poll(
        lambda: engine.get_job(job_id),
        lambda job: job is not None and job.state in states,
        timeout=timeout,
        what=f"job {job_id} in one of {states}",
    )
    assert found is not None
    return found


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    await helpers.poll(condition, timeout=timeout, what=what, every=0.01)


async def state_counts(engine: PostgresEngine) -> dict[str, int]:
    async with engine.pool.connection() as conn:
        cur = await conn.execute(
            sql.SQL("SELECT state::text, count(*) FROM {} GROUP BY state").format(table(engine.prefix))
        )
        return {state: int(count) for state, count in await cur.fetchall()}


async def wait_for_counts(engine: PostgresEngine, expected: dict[str, int], timeout: float = 15.0) -> None:
    await helpers.poll(
        lambda: state_counts(engine), lambda c: c == expected, timeout=timeout, what=f"states {expected}"
    )


async def query(engine: PostgresEngine, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``text`` with ``{jobs}`` standing for the test's ``oban_jobs`` table."""
    async with engine.pool.connection() as conn:
        cur = await conn.execute(sql.SQL(text).format(jobs=table(engine.prefix)), params)
        return await cur.fetchall() if cur.description else []


def error_gap(found: Job) -> float:
    """Seconds between the last error's timestamp and the job's next scheduled run."""
    at = datetime.fromisoformat(found.errors[-1]["at"])
    return (found.scheduled_at - at).total_seconds()


# -- completing -----------------------------------------------------------------------------------
async def test_async_job_completes_and_records_its_return_value(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.add.new(a=2, b=3))
        done = await wait_for_job(engine, job_id, JobState.COMPLETED)
        assert await app.get_result(job_id) == 5
    assert done.attempt == 1
    assert done.errors == ()
    assert done.completed_at is not None and done.attempted_at is not None
    assert done.attempted_at <= done.completed_at
    assert done.attempted_by[0] == app.settings.node
    assert done.meta["recorded"] is True


async def test_sync_job_runs_in_a_worker_thread(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.multiply_in_thread.new(a=6, b=7))
        await wait_for_job(engine, job_id, JobState.COMPLETED)
        result = await app.get_result(job_id)
    assert result["product"] == 42
    assert result["thread"].startswith("conveyor-job")


async def test_worker_classes_complete(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    async with running(dsn, prefix) as app:
        sync_id = await app.enqueue(jobs.Greeter.new(name="ada"))  # type: ignore[attr-defined]
        async_id = await app.enqueue(jobs.AsyncGreeter.new(name="bob"))  # type: ignore[attr-defined]
        await wait_for_job(engine, sync_id, JobState.COMPLETED)
        await wait_for_job(engine, async_id, JobState.COMPLETED)
        assert await app.get_result(sync_id) == "hello ada"
        assert await app.get_result(async_id) == {"greeting": "hi bob", "attempt": 1}


RECORDABLE: list[Any] = [
    None,
    True,
    False,
    0,
    255,
    256,
    -1,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    2**62,
    -(2**63),
    1.5,
    -0.25,
    1e300,
    "",
    "héllo wörld ✓ 日本語 🚀",
    [],
    [1, "two", 3.0, None, [True, False]],
    {},
    {"nested": {"list": [1, {"deep": "value"}], "empty": {}}, "unicode ✓": "ok"},
]


async def test_recorded_values_round_trip_through_the_database(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    async with running(dsn, prefix, queues={"default": 20}) as app:
        async_ids = await app.enqueue_many(jobs.record_value.new(value=v) for v in RECORDABLE)
        thread_ids = await app.enqueue_many(jobs.record_value_in_thread.new(value=v) for v in RECORDABLE)
        for job_id in async_ids + thread_ids:
            await wait_for_job(engine, job_id, JobState.COMPLETED)
        for ids in (async_ids, thread_ids):
            results = [await app.get_result(job_id) for job_id in ids]
            assert results == RECORDABLE
            # Equal is not enough for booleans and None: 1 == True, 0 == False.
            assert [type(r) for r in results] == [type(v) for v in RECORDABLE]


async def test_big_integers_recorded_and_meta_kept(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.record_value.new(value={"n": 1}).with_options(meta={"x": 1}))
        await wait_for_job(engine, job_id, JobState.COMPLETED)
        # Numbers beyond 64 bits cannot be job args (JSON), but a job may return them.
        big_id = await app.enqueue(jobs.add.new(a=2**62, b=2**62))
        await wait_for_job(engine, big_id, JobState.COMPLETED)
        assert await app.get_result(big_id) == 2**63
        # Recording merges into meta without losing what the job was enqueued with.
        found = await app.get_job(job_id)
        assert found is not None and found.meta["x"] == 1


async def test_job_without_recorded_result(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    key = new_key()
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.noop.new(key=key))
        await wait_for_job(engine, job_id, JobState.COMPLETED)
        with pytest.raises(LookupError):
            await app.get_result(job_id)
    assert jobs.RUNS[key] == [job_id]


# -- errors and backoff ---------------------------------------------------------------------------
async def test_error_makes_the_job_retryable_with_an_error_entry_and_backoff(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    before = datetime.now(UTC)
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.fail.new(message="boom 42"))
        found = await wait_for_job(engine, job_id, JobState.RETRYABLE)
    after = datetime.now(UTC)
    assert found.attempt == 1
    assert found.max_attempts == 3
    (entry,) = found.errors
    assert entry["attempt"] == 1
    at = datetime.fromisoformat(entry["at"])
    assert before - timedelta(seconds=SLACK) <= at <= after + timedelta(seconds=SLACK)
    assert "Traceback (most recent call last)" in entry["error"]
    assert "runtime_jobs.py" in entry["error"]
    assert "ValueError: boom 42" in entry["error"]
    base = 15 + 2**1
    assert base - 0.05 <= error_gap(found) <= base * 1.1 + SLACK
    assert found.completed_at is None and found.discarded_at is None


async def test_exhausted_attempts_discard_the_job(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.fail.new(message="again").with_options(max_attempts=2))
        first = await wait_for_job(engine, job_id, JobState.RETRYABLE)
        assert first.attempt == 1 and first.discarded_at is None
        assert await app.retry_job(job_id)  # run the second (last) attempt now, not in 17 s
        final = await wait_for_job(engine, job_id, JobState.DISCARDED)
    assert final.attempt == 2
    assert [e["attempt"] for e in final.errors] == [1, 2]
    assert all("ValueError: again" in e["error"] for e in final.errors)
    assert final.discarded_at is not None
    assert final.completed_at is None


async def test_worker_backoff_overrides_the_default(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.fail_with_backoff.new(message="custom"))
        found = await wait_for_job(engine, job_id, JobState.RETRYABLE)
    assert 123 - 0.05 <= error_gap(found) <= 123 + SLACK
    assert "RuntimeError: custom" in found.errors[0]["error"]


@pytest.mark.parametrize("worker_job", [jobs.raise_own_timeout_error, jobs.raise_own_timeout_error_in_thread])
async def test_a_jobs_own_timeout_error_is_an_ordinary_error(
    dsn: str, prefix: str, engine: PostgresEngine, worker_job: Any
) -> None:
    """Without a job timeout, a TimeoutError raised by the job's code is its error, not a timeout."""
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(worker_job.new())
        found = await wait_for_job(engine, job_id, JobState.RETRYABLE, JobState.CANCELLED, JobState.DISCARDED)
    assert found.state is JobState.RETRYABLE
    (entry,) = found.errors
    assert "TimeoutError: the upstream service timed out" in entry["error"]
    assert "exceeded its timeout" not in entry["error"]


# -- outcomes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("raised", [False, True], ids=["returned", "raised"])
async def test_snooze_reschedules_without_spending_an_attempt(
    dsn: str, prefix: str, engine: PostgresEngine, raised: bool
) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.snoozer.new(times=5, seconds=60, raised=raised))
        found = await wait_for_job(engine, job_id, JobState.SCHEDULED)
    assert found.attempt == 0
    assert found.meta["snoozed"] == 1
    assert found.errors == ()
    assert found.attempted_at is not None
    gap = (found.scheduled_at - found.attempted_at).total_seconds()
    assert 60 <= gap <= 60 + SLACK


@pytest.mark.parametrize("raised", [False, True], ids=["returned", "raised"])
async def test_snoozing_twice_counts_two_snoozes(
    dsn: str, prefix: str, engine: PostgresEngine, raised: bool
) -> None:
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.snoozer.new(times=2, seconds=0.1, raised=raised))
        found = await wait_for_job(engine, job_id, JobState.COMPLETED)
    assert found.meta["snoozed"] == 2
    assert found.attempt == 1  # three runs, one attempt spent
    assert found.errors == ()


@pytest.mark.parametrize("kind", ["cancel", "discard"])
@pytest.mark.parametrize("raised", [False, True], ids=["returned", "raised"])
@pytest.mark.parametrize("executor", ["async", "thread"])
async def test_cancel_and_discard_outcomes(
    dsn: str, prefix: str, engine: PostgresEngine, kind: str, raised: bool, executor: str
) -> None:
    target = jobs.ender if executor == "async" else jobs.ender_in_thread
    reason = f"{kind} because reasons ✓"
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(target.new(kind=kind, reason=reason, raised=raised))
        found = await wait_for_job(engine, job_id, JobState.CANCELLED, JobState.DISCARDED, JobState.RETRYABLE)
    (entry,) = found.errors
    assert reason in entry["error"]
    assert entry["attempt"] == 1
    if kind == "cancel":
        assert found.state is JobState.CANCELLED
        assert found.cancelled_at is not None and found.discarded_at is None
    else:
        assert found.state is JobState.DISCARDED
        assert found.discarded_at is not None and found.cancelled_at is None
    assert found.attempt == 1 < found.max_attempts  # ended for good although attempts remain


async def test_outcomes_from_process_jobs(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    """Outcomes cross the process boundary: returned or raised in a worker process."""
    async with running(dsn, prefix, processes=1) as app:
        ids = {
            (kind, raised): await app.enqueue(
                jobs.ender_in_process.new(kind=kind, reason=f"{kind}-{raised}", raised=raised)
            )
            for kind in ("cancel", "discard")
            for raised in (False, True)
        }
        snooze_id = await app.enqueue(jobs.snoozer_in_process.new(seconds=60))
        ends = {
            key: await wait_for_job(
                engine, job_id, JobState.CANCELLED, JobState.DISCARDED, JobState.RETRYABLE, timeout=20
            )
            for key, job_id in ids.items()
        }
        snoozed = await wait_for_job(engine, snooze_id, JobState.SCHEDULED, JobState.RETRYABLE, timeout=20)
    for (kind, raised), found in ends.items():
        expected = JobState.CANCELLED if kind == "cancel" else JobState.DISCARDED
        assert found.state is expected, found.errors
        assert f"{kind}-{raised}" in found.errors[0]["error"]
    assert snoozed.state is JobState.SCHEDULED, snoozed.errors
    assert snoozed.attempt == 0 and snoozed.meta["snoozed"] == 1


# -- timeouts -------------------------------------------------------------------------------------
async def test_async_job_timeout_is_a_retryable_error(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    async with running(dsn, prefix) as app:
        started = time.monotonic()
        job_id = await app.enqueue(jobs.slow_async.new(seconds=5))
        found = await wait_for_job(engine, job_id, JobState.RETRYABLE, JobState.CANCELLED, JobState.DISCARDED)
        elapsed = time.monotonic() - started
    assert found.state is JobState.RETRYABLE
    assert elapsed < 0.3 + 1.5
    (entry,) = found.errors
    assert "timeout" in entry["error"]
    assert "0.3s" in entry["error"]


async def test_thread_job_timeout_flags_the_job_as_cancelled(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    key = new_key()
    async with running(dsn, prefix) as app:
        job_id = await app.enqueue(jobs.thread_waits_for_cancel.new(key=key))
        found = await wait_for_job(engine, job_id, JobState.RETRYABLE, JobState.CANCELLED, JobState.DISCARDED)
        # The thread notices the flag and returns long before its 5 s safety limit.
        await wait_until(lambda: key in jobs.EVENTS, timeout=2, what="the thread job to notice")
    assert jobs.EVENTS.pop(key)["cancelled"] is True
    # A timeout is a failed attempt, retried like any error, whatever the executor.
    assert found.state is JobState.RETRYABLE
    assert "timeout" in found.errors[0]["error"]


# -- current_job() --------------------------------------------------------------------------------
async def test_current_job_in_every_executor(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    options: dict[str, Any] = {"tags": ["alpha", "beta"], "meta": {"origin": "test", "n": 3}}
    async with running(dsn, prefix, processes=1) as app:
        ids = {
            "async": await app.enqueue(jobs.context_async.new().with_options(**options)),
            "thread": await app.enqueue(jobs.context_thread.new().with_options(**options)),
            "process": await app.enqueue(jobs.context_process.new().with_options(**options)),
        }
        seen = {}
        for executor, job_id in ids.items():
            await wait_for_job(engine, job_id, JobState.COMPLETED, timeout=20)
            seen[executor] = await app.get_result(job_id)
    for executor, job_id in ids.items():
        assert seen[executor]["id"] == job_id
        assert seen[executor]["attempt"] == 1
        assert seen[executor]["tags"] == ["alpha", "beta"]
        assert seen[executor]["meta"] == {"origin": "test", "n": 3}
    assert seen["async"]["pid"] == os.getpid()
    assert seen["thread"]["pid"] == os.getpid()
    assert seen["thread"]["thread"].startswith("conveyor-job")
    assert seen["process"]["pid"] != os.getpid()


def test_current_job_outside_a_job() -> None:
    with pytest.raises(LookupError, match="outside a running Conveyor job"):
        jobs.describe_current()


# -- executors ------------------------------------------------------------------------------------
async def test_blocking_job_does_not_delay_async_jobs(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    block_key, key = new_key(), new_key()
    async with running(dsn, prefix, queues={"blocking": 1, "default": 20}, shutdown_grace=5) as app:
        blocking_id = await app.enqueue(jobs.blocking_sleep.new(key=block_key, seconds=2))
        await wait_until(lambda: block_key in jobs.EVENTS, what="the blocking job to start")
        started = time.monotonic()
        await app.enqueue_many(jobs.mark_started.new(key=key) for _ in range(20))
        await wait_until(lambda: len(jobs.RUNS[key]) == 20, timeout=5, what="20 async jobs")
        elapsed = time.monotonic() - started
        blocking = await engine.get_job(blocking_id)
        assert blocking is not None and blocking.state is JobState.EXECUTING
        await wait_for_job(engine, blocking_id, JobState.COMPLETED)
    assert elapsed < 1.0, f"async jobs took {elapsed:.2f}s next to a blocking job"
    jobs.EVENTS.pop(block_key)


async def test_process_executor_survives_a_crashing_process(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    async with running(dsn, prefix, processes=1) as app:
        first = await app.enqueue(jobs.process_pid.new())
        await wait_for_job(engine, first, JobState.COMPLETED, timeout=20)
        first_pid = await app.get_result(first)

        crash = await app.enqueue(jobs.process_crash.new())
        crashed = await wait_for_job(engine, crash, JobState.RETRYABLE, JobState.DISCARDED, timeout=20)

        after = await app.enqueue(jobs.process_pid.new())
        await wait_for_job(engine, after, JobState.COMPLETED, timeout=20)
        after_pid = await app.get_result(after)
    assert isinstance(first_pid, int) and first_pid != os.getpid()
    assert crashed.state is JobState.RETRYABLE
    (entry,) = crashed.errors
    assert "worker process" in entry["error"] and "exited" in entry["error"]
    # The dead process was replaced by a new one.
    assert isinstance(after_pid, int) and after_pid not in (os.getpid(), first_pid)


async def test_process_pool_starts_with_the_node_when_a_known_job_runs_in_a_process(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    """No queue says ``executor="process"``, but a job the app knows does: its workers start with the
    node (before any job is fetched), so the first process job does not wait for them."""
    async with running(dsn, prefix, processes=2, jobs=[jobs.process_pid]) as app:
        assert app.node is not None
        pool = app.node.processes
        await wait_until(lambda: len(pool._all) == 2, timeout=5, what="two workers")
        assert all(worker.is_alive() for worker in pool._all)
        job_id = await app.enqueue(jobs.process_pid.new())
        await wait_for_job(engine, job_id, JobState.COMPLETED, timeout=20)
        assert await app.get_result(job_id) in {worker.pid for worker in pool._all}


async def test_process_pool_starts_with_the_first_job_when_nothing_asks_for_it(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    async with running(dsn, prefix, processes=1) as app:
        assert app.node is not None
        assert not app.node.processes._all
        job_id = await app.enqueue(jobs.process_pid.new())
        await wait_for_job(engine, job_id, JobState.COMPLETED, timeout=20)
        assert len(app.node.processes._all) == 1


async def test_process_workers_start_before_the_schema_check_and_stop_when_it_fails(
    dsn: str, prefix: str
) -> None:
    """The app starts the pool's workers before it checks the schema (their imports overlap that
    round trip); when the check fails, they are stopped with it."""
    app = make_app(dsn, prefix, queues={"cpu": {"limit": 2, "executor": "process"}}, processes=2)
    await helpers.assert_failed_start_leaves_no_workers(app)


MAIN_SCRIPT = """
import asyncio, json, os
with open(os.environ["MARKS"], "a") as marks:
    marks.write(f"{os.getpid()} {__name__}\\n")
from conveyor import Conveyor, job
from tests import runtime_jobs

@job(record=True, executor="process")
def in_main() -> int:
    return os.getpid()

def marks() -> list[str]:
    with open(os.environ["MARKS"]) as lines:
        return lines.read().split()

async def main() -> None:
    app = Conveyor(os.environ["DSN"], prefix=os.environ["PREFIX"], queues={"default": 2}, processes=1)
    await app.install()
    async with app:
        first = await app.wait(await app.enqueue(runtime_jobs.process_pid.new()), timeout=30)
        seen = {"node": os.getpid(), "module_job": first.result, "marks_then": marks()}
        second = await app.wait(await app.enqueue(in_main.new()), timeout=30)
        print(json.dumps({**seen, "main_job": second.result, "marks": marks()}))

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_worker_processes_run_the_main_script_only_for_a_job_defined_there(
    dsn: str, prefix: str, tmp_path: Path
) -> None:
    """A worker process does not import the node's main script (and what it imports) for a job of
    another module; a job defined in the script still runs, the script loaded as ``__mp_main__``
    without its ``if __name__ == "__main__"`` block."""
    script, marks = tmp_path / "node_script.py", tmp_path / "marks.txt"
    script.write_text(MAIN_SCRIPT)
    env = {**os.environ, "MARKS": str(marks), "DSN": dsn, "PREFIX": prefix, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    node, worker = str(seen["node"]), str(seen["module_job"])
    # The job of another module ran in a worker that had not run the script.
    assert worker != node
    assert seen["marks_then"] == [node, "__main__"]
    # The job defined in the script ran in the same worker, which loaded the script for it.
    assert str(seen["main_job"]) == worker
    assert seen["marks"] == [node, "__main__", worker, "__mp_main__"]


async def test_a_job_claimed_again_while_it_runs_is_not_started_twice(
    dsn: str, prefix: str, engine: PostgresEngine, caplog: pytest.LogCaptureFixture
) -> None:
    # What a crash of the server can do with synchronous_commit off: the claim of a running job is
    # undone (the row is available again, its attempt given back) and the same producer claims it
    # anew. The run under way goes on and acks it; no second run starts beside it.
    key = new_key()
    async with running(dsn, prefix, synchronous_commit=False) as app:
        job_id = await app.enqueue(jobs.counted_sleep.new(key=key, seconds=1.5))
        await wait_for_job(engine, job_id, JobState.EXECUTING)
        await query(
            engine,
            "UPDATE {jobs} SET state = 'available', attempt = attempt - 1, attempted_by = ARRAY[]::text[]"
            " WHERE id = %s",
            (job_id,),
        )
        other = await app.enqueue(jobs.noop.new(key=key))  # its notification wakes the producer

        async def runs() -> list[int]:
            return list(jobs.RUNS[key])

        await helpers.poll(runs, lambda ids: other in ids, timeout=5, what="the other job's run")
        claimed = await engine.get_job(job_id)
        assert claimed is not None and claimed.state is JobState.EXECUTING and claimed.attempt == 1
        done = await wait_for_job(engine, job_id, JobState.COMPLETED)
    assert done.attempt == 1 and done.errors == ()
    assert jobs.RUNS[key] == [job_id, other]  # one run of each
    assert f"job {job_id} was claimed again while it runs on this node" in caplog.text


async def claim_as_another_node(engine: PostgresEngine, job_id: int) -> None:
    """Play another node that took the same attempt of a running job after an undone claim."""
    await query(
        engine,
        "UPDATE {jobs} SET attempted_by = ARRAY['other-node', 'other-producer'] WHERE id = %s",
        (job_id,),
    )


async def assert_claimed_by_another_node(engine: PostgresEngine, job_id: int) -> None:
    """The row is still the other node's claim of attempt 1: nothing from this node ended it."""
    found = await engine.get_job(job_id)
    assert found is not None and found.state is JobState.EXECUTING and found.attempt == 1
    assert found.attempted_by == ("other-node", "other-producer")


async def test_a_job_whose_row_is_no_longer_its_attempt_is_stopped_without_an_ack(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    # The heartbeat finds the row of a running job no longer executing this attempt (here: moved to
    # the future, as no fetch would take it again) and stops the run. By the time the run ends,
    # another node has claimed the same attempt, which only an undone claim allows (a crash of the
    # server with synchronous_commit off). A cancel ack of attempt 1 would now end that node's run;
    # the stopped run writes none.
    key = new_key()
    async with running(dsn, prefix, heartbeat_interval=0.2) as app:
        job_id = await app.enqueue(jobs.claimed_elsewhere_when_stopped.new(key=key, dsn=dsn, prefix=prefix))
        await wait_for_job(engine, job_id, JobState.EXECUTING)
        await query(
            engine,
            "UPDATE {jobs} SET state = 'scheduled', attempt = 0, scheduled_at = now() + interval '1 hour'"
            " WHERE id = %s",
            (job_id,),
        )

        async def stopped() -> Any:
            return jobs.EVENTS.get(key)

        await helpers.poll(stopped, lambda seen: seen == "stopped", timeout=10, what="the run to stop")
        assert app.node is not None
        producer, acker = app.node.producers["default"], app.node.acker
        # The run's task is over once the producer forgets it; it pushes its ack (if any) in the same
        # step, so nothing waiting or being written now means no ack ever: no ack window to wait out.
        await helpers.poll(lambda: not producer.running, what="the run's task to end")
        assert acker.written == 0 and not acker.held()
    await assert_claimed_by_another_node(engine, job_id)


@pytest.mark.parametrize("first", ["heartbeat", "run"])
async def test_a_job_claimed_elsewhere_with_the_same_attempt_is_left_to_the_other_node(
    dsn: str, prefix: str, engine: PostgresEngine, first: str
) -> None:
    # An undone claim taken again by another node's producer, same attempt. When the heartbeat
    # looks first, it tells that claim from this node's own by attempted_by, stops the run here and
    # writes no ack. When the run ends first, its ack reaches the database, which applies an ack
    # only to a claim of the node that sends it. Either way the other node's run ends the job.
    key = new_key()
    interval, seconds = (0.2, 30.0) if first == "heartbeat" else (10.0, 0.5)
    async with running(dsn, prefix, heartbeat_interval=interval) as app:
        job_id = await app.enqueue(jobs.long_sleep.new(key=key, seconds=seconds))
        await wait_for_job(engine, job_id, JobState.EXECUTING)
        await claim_as_another_node(engine, job_id)
        assert app.node is not None
        producer, acker = app.node.producers["default"], app.node.acker
        sent = 0 if first == "heartbeat" else 1

        async def here() -> tuple[int, int]:
            return len(producer.running), acker.written

        await helpers.poll(here, lambda seen: seen == (0, sent), timeout=10, what="the run to end here")
        # The run's task pushed its ack (if any) in the step that forgot it: none waits now, so no
        # other ack will come (no ack window to wait out).
        assert acker.written == sent and not acker.held()
        assert jobs.EVENTS[key] == ("started" if first == "heartbeat" else "finished")
    await assert_claimed_by_another_node(engine, job_id)


# -- shutdown -------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_graceful_shutdown_under_load_loses_and_repeats_nothing(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    total = 2000
    key = new_key()
    rng = random.Random(1234)
    settings: dict[str, Any] = {"queues": {"default": 20}, "shutdown_grace": 5}
    app = make_app(dsn, prefix, **settings)
    await app.start()
    try:
        await app.enqueue_many(jobs.short_run.new(key=key, ms=rng.uniform(1, 5)) for _ in range(total))
        await wait_until(lambda: len(jobs.RUNS[key]) >= total // 4, what="a quarter of the jobs")
    finally:
        await app.stop(grace=5)
    counts = await state_counts(engine)
    assert set(counts) <= {"completed", "available"}, counts
    assert sum(counts.values()) == total
    assert counts.get("available", 0) > 0, "stopped too late to test anything; use more jobs"
    completed = {row[0] for row in await query(engine, "SELECT id FROM {jobs} WHERE state = 'completed'")}
    assert completed == set(jobs.RUNS[key]), "every finished run was acked, and only those"
    assert len(jobs.RUNS[key]) == len(completed)
    left = await query(engine, "SELECT count(*) FROM {jobs} WHERE state = 'available' AND attempt <> 0")
    assert left == [(0,)], "jobs given back keep their attempts"

    async with running(dsn, prefix, **settings):
        await wait_for_counts(engine, {"completed": total})
    runs = jobs.RUNS.pop(key)
    assert len(runs) == total and len(set(runs)) == total
    assert await query(engine, "SELECT DISTINCT attempt FROM {jobs}") == [(1,)]


async def test_job_running_at_the_shutdown_deadline_is_given_back(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    key = new_key()
    app = make_app(dsn, prefix)
    await app.start()
    try:
        job_id = await app.enqueue(jobs.long_sleep.new(key=key, seconds=10))
        await wait_until(lambda: jobs.EVENTS.get(key) == "started", what="the long job to start")
        executing = await engine.get_job(job_id)
        assert executing is not None and executing.state is JobState.EXECUTING and executing.attempt == 1
    finally:
        started = time.monotonic()
        await app.stop(grace=0.2)
        stopping = time.monotonic() - started
    assert stopping < 0.2 + 1.5
    assert jobs.EVENTS.pop(key) == "started"  # cancelled, never finished
    released = await engine.get_job(job_id)
    assert released is not None
    assert released.state is JobState.AVAILABLE
    assert released.attempt == 0
    assert released.errors == ()
    assert released.completed_at is None


# -- waking producers -----------------------------------------------------------------------------
async def test_polling_alone_runs_jobs_without_notifications(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    key = new_key()
    async with running(dsn, prefix, notifications=False, poll_interval=0.2) as app:
        ids = await app.enqueue_many(jobs.mark_started.new(key=key) for _ in range(5))
        for job_id in ids:
            await wait_for_job(engine, job_id, JobState.COMPLETED, timeout=5)
    assert sorted(jobs.RUNS.pop(key)) == ids


async def test_notification_starts_a_job_on_an_idle_node_at_once(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    key = new_key()
    async with running_idle(dsn, prefix, poll_interval=30, stage_interval=30) as app:  # next poll: 30 s
        started = time.monotonic()
        job_id = await app.enqueue(jobs.mark_started.new(key=key))
        await wait_until(lambda: key in jobs.EVENTS, timeout=5, what="the job to start")
        latency = jobs.EVENTS.pop(key) - started
        await wait_for_job(engine, job_id, JobState.COMPLETED)
    assert latency < 0.5


async def test_nudge_wakes_producers(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    local_key, remote_key = new_key(), new_key()
    # Local nudge: no notifications at all, a 30 s poll.
    async with running_idle(dsn, prefix, notifications=False, poll_interval=30, stage_interval=30) as app:
        await app.enqueue(jobs.mark_started.new(key=local_key))
        await holds(
            lambda: local_key not in jobs.EVENTS,
            during=0.5,
            what="polling or a notification ran it: the test proves nothing",
        )
        started = time.monotonic()
        await app.nudge("default")
        await wait_until(lambda: local_key in jobs.EVENTS, timeout=5, what="the nudged job")
        assert jobs.EVENTS.pop(local_key) - started < 0.5

    # Remote nudge: another app (no queues) wakes this node through a notification.
    async with running_idle(dsn, prefix, poll_interval=30, stage_interval=30):
        await query(  # a raw INSERT sends no notification
            engine,
            "INSERT INTO {jobs} (state, queue, worker, args) VALUES ('available', 'default', %s, %s)",
            (jobs.mark_started.definition.name, f'{{"key": "{remote_key}"}}'),
        )
        await holds(
            lambda: remote_key not in jobs.EVENTS, during=0.5, what="polling ran it: the test proves nothing"
        )
        other = Conveyor(dsn, prefix=prefix)
        try:
            started = time.monotonic()
            await other.nudge("default")
            await wait_until(lambda: remote_key in jobs.EVENTS, timeout=5, what="the remotely nudged job")
        finally:
            await other.close()
        assert jobs.EVENTS.pop(remote_key) - started < 0.5


async def test_scheduled_job_runs_when_due(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    key = new_key()
    async with running_idle(dsn, prefix, poll_interval=30, stage_interval=0.1) as app:
        started = time.monotonic()
        job_id = await app.enqueue(jobs.mark_started.new(key=key).with_options(schedule_in=1))
        scheduled = await engine.get_job(job_id)
        assert scheduled is not None and scheduled.state is JobState.SCHEDULED
        await wait_until(lambda: key in jobs.EVENTS, timeout=5, what="the scheduled job")
        delay = jobs.EVENTS.pop(key) - started
        await wait_for_job(engine, job_id, JobState.COMPLETED)
    assert 1.0 <= delay < 1.0 + SLACK + 0.1


# -- a fleet --------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_two_nodes_run_every_job_exactly_once(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    total = 10_000
    key = new_key()
    settings: dict[str, Any] = {"queues": {"default": 20}, "poll_interval": 0.5}
    async with (
        running(dsn, prefix, node=f"node-a-{key[:6]}", **settings),
        running(dsn, prefix, node=f"node-b-{key[:6]}", **settings),
    ):
        await app_insert(dsn, prefix, (jobs.noop.new(key=key) for _ in range(total)))
        await wait_until(lambda: len(jobs.RUNS[key]) >= total, timeout=60, what="every job to run")
        await wait_for_counts(engine, {"completed": total})
    runs = jobs.RUNS.pop(key)
    assert len(runs) == total and len(set(runs)) == total
    assert await query(engine, "SELECT DISTINCT attempt FROM {jobs}") == [(1,)]
    per_node = dict(await query(engine, "SELECT attempted_by[1], count(*) FROM {jobs} GROUP BY 1"))
    assert set(per_node) == {f"node-a-{key[:6]}", f"node-b-{key[:6]}"}
    assert min(per_node.values()) >= total // 10, per_node


async def app_insert(dsn: str, prefix: str, requests: Any) -> list[int]:
    """Enqueue through an app that runs no node."""
    app = Conveyor(dsn, prefix=prefix)
    try:
        return await app.enqueue_many(requests)
    finally:
        await app.close()


# -- the command line -----------------------------------------------------------------------------
async def test_cli_start_runs_jobs_and_stops_on_sigterm(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    job_id = (await app_insert(dsn, prefix, [jobs.add.new(a=20, b=22)]))[0]
    command = Path(sys.executable).with_name("conveyor")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    log_path = tmp_path / "node.log"
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(command),
            "start",
            "--dsn",
            dsn,
            "--prefix",
            prefix,
            "-q",
            "default:5",
            "--import",
            "tests.runtime_jobs",
            "--poll-interval",
            "0.2",
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
        )
        try:
            done = await wait_for_job(engine, job_id, JobState.COMPLETED, timeout=20)
            assert done.attempted_by[0] != ""
            process.send_signal(signal.SIGTERM)
            started = time.monotonic()
            code = await asyncio.wait_for(process.wait(), 10)
            stopping = time.monotonic() - started
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    output = log_path.read_text()
    assert code == 0, output
    assert stopping < 5, output
    assert "running queues default:5" in output
    probe = Conveyor(dsn, prefix=prefix)
    try:
        assert await probe.get_result(job_id) == 42
    finally:
        await probe.close()
