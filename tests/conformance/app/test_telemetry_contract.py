"""Telemetry and job logs on both engines: the catalogue's events with their fields, one log line per
job outcome (text and JSON), and handlers that fail without harming jobs or the node."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest

from conveyor import Conveyor, JobRequest, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.job import Job
from conveyor.limits import FetchLimits
from conveyor.log_formats import JsonFormatter
from tests.conformance import telemetry_jobs as tj
from tests.conformance.app.test_runtime_contract import wait_final
from tests.conformance.conftest import ADDRESSES
from tests.helpers import Events

WAITING = {JobState.COMPLETED, JobState.SCHEDULED, JobState.RETRYABLE}
FINISHED = {
    JobState.COMPLETED,
    JobState.SCHEDULED,
    JobState.RETRYABLE,
    JobState.DISCARDED,
    JobState.CANCELLED,
}


def runs(events: Events, job_id: int) -> list[tuple[str, dict[str, Any]]]:
    """The job events of one job, in order."""
    return [
        (name, data) for name, data in events.seen if name.startswith("job.") and data["job"].id == job_id
    ]


def ended(events: Events, job_id: int) -> tuple[str, dict[str, Any]]:
    """The one ``job.stop`` or ``job.exception`` of the job's only run, after its ``job.start``."""
    seen = runs(events, job_id)
    assert [name for name, _ in seen][:1] == ["job.start"], seen
    assert len(seen) == 2, seen
    name, data = seen[1]
    assert name in ("job.stop", "job.exception")
    start = seen[0][1]
    for key in ("job", "worker", "queue", "attempt", "max_attempts", "queue_time"):
        assert data[key] == start[key], key
    return name, data


def check_common(data: dict[str, Any], worker: Any, attempt: int = 1) -> None:
    job: Job = data["job"]
    assert data["worker"] == job.worker == worker.definition.name
    assert data["queue"] == "default" and data["attempt"] == attempt == job.attempt
    assert data["max_attempts"] == job.max_attempts
    assert job.attempted_at is not None
    expected = max(0.0, (job.attempted_at - job.scheduled_at).total_seconds())
    assert isinstance(data["queue_time"], float) and data["queue_time"] == expected
    assert 0 <= data["queue_time"] < 30
    assert isinstance(data["duration"], float) and 0 <= data["duration"] < 30
    ack = data["ack"]
    assert isinstance(ack, Ack) and ack.job_id == job.id and ack.state is data["state"]


async def test_every_run_emits_start_then_stop_or_exception(node_app: Conveyor) -> None:
    events = Events()
    node_app.on("job.", events)
    requests = {
        "completes": tj.completes.new(n=1),
        "thread": tj.completes_in_thread.new(n=2),
        "snoozes": tj.snoozes.new(),
        "cancels": tj.cancels.new(),
        "discards": tj.discards.new(),
        "fails": tj.fails.new(),
        "fails_finally": tj.fails_finally.new(),
        "times_out": tj.times_out.new(),
        "in_process": tj.fails_in_process.new(),
        "unknown": JobRequest("tests.conformance.telemetry_jobs.no_such_job"),
    }
    ids = dict(zip(requests, await node_app.enqueue_many(requests.values()), strict=True))
    await wait_final(node_app, list(ids.values()), FINISHED)
    await wait_final(node_app, [ids["completes"], ids["thread"]], {JobState.COMPLETED})

    # Returned, or returned or raised an outcome: job.stop.
    for key, worker in (("completes", tj.completes), ("thread", tj.completes_in_thread)):
        name, data = ended(events, ids[key])
        assert name == "job.stop"
        check_common(data, worker)
        assert data["state"] is JobState.COMPLETED and data["outcome"] == "completed"
        assert "error_type" not in data and "exception" not in data
    name, data = ended(events, ids["snoozes"])
    assert name == "job.stop" and data["outcome"] == "snoozed" and data["state"] is JobState.SCHEDULED
    check_common(data, tj.snoozes)
    assert data["ack"].schedule_in == 60
    name, data = ended(events, ids["cancels"])
    assert name == "job.stop" and data["outcome"] == "cancelled" and data["state"] is JobState.CANCELLED
    check_common(data, tj.cancels)
    name, data = ended(events, ids["discards"])
    assert name == "job.stop" and data["outcome"] == "discarded" and data["state"] is JobState.DISCARDED
    check_common(data, tj.discards)

    # Raised, timed out, or could not run: job.exception.
    name, data = ended(events, ids["fails"])
    assert name == "job.exception"
    check_common(data, tj.fails)
    assert data["state"] is JobState.RETRYABLE and data["outcome"] == "retryable"
    assert data["error_type"] == "ValueError" and data["message"] == "boom"
    assert isinstance(data["exception"], ValueError) and data["final"] is False
    name, data = ended(events, ids["fails_finally"])
    assert name == "job.exception"
    check_common(data, tj.fails_finally)
    assert data["state"] is JobState.DISCARDED and data["outcome"] == "discarded"
    assert data["error_type"] == "KeyError" and data["message"] == "'gone'" and data["final"] is True
    name, data = ended(events, ids["times_out"])
    assert name == "job.exception" and data["outcome"] == "retryable" and data["final"] is False
    check_common(data, tj.times_out)
    assert data["error_type"] == "JobTimeout" and "timeout of 0.2s" in data["message"]
    assert data["duration"] >= 0.2
    name, data = ended(events, ids["in_process"])  # named by what the worker process raised
    assert name == "job.exception" and data["outcome"] == "retryable"
    assert data["error_type"] == "ValueError" and data["message"] == "far away"
    # A worker this node cannot import: snoozed for another node (the attempt given back), as an
    # exception that is not final (offered again within a second: the first run's events).
    (first, _), (name, data) = runs(events, ids["unknown"])[:2]
    assert first == "job.start"
    assert name == "job.exception" and data["outcome"] == "snoozed" and data["final"] is False
    assert data["worker"] == "tests.conformance.telemetry_jobs.no_such_job"
    assert data["error_type"] == "WorkerNotFoundError" and "no_such_job" in data["message"]


async def test_a_cancelled_run_is_an_exception(node_app: Conveyor) -> None:
    events = Events()
    node_app.on("job.", events)
    job_id = await node_app.enqueue(tj.sleeps.new(seconds=30))
    await wait_final(node_app, [job_id], {JobState.EXECUTING})
    await events.wait("job.start")
    assert await node_app.cancel_job(job_id)
    await wait_final(node_app, [job_id], {JobState.CANCELLED})
    await events.wait("job.exception")
    name, data = ended(events, job_id)
    assert name == "job.exception" and data["outcome"] == "cancelled" and data["final"] is True
    assert data["state"] is JobState.CANCELLED and data["error_type"] == "CancelledError"


async def test_a_run_told_twice_to_stop_is_cancelled_once_and_its_clean_up_ends(node_app: Conveyor) -> None:
    # The pkill signal and the heartbeat (which finds the row no longer executing) can both tell
    # the producer to stop one run; the second must not cancel the job's clean-up.
    tj.CLEANED, tj.CLEANING = asyncio.Event(), asyncio.Event()
    events = Events()
    node_app.on("job.", events)
    job_id = await node_app.enqueue(tj.cleans_up.new())
    await wait_final(node_app, [job_id], {JobState.EXECUTING})
    await events.wait("job.start")
    assert node_app.node is not None
    producer = node_app.node.producers["default"]
    assert producer.cancel_job(job_id, "cancelled")
    await asyncio.wait_for(tj.CLEANING.wait(), 10)
    assert producer.cancel_job(job_id, "cancelled (the job is no longer executing)")
    await asyncio.wait_for(tj.CLEANED.wait(), 10)
    await events.wait("job.exception")
    name, data = ended(events, job_id)
    assert name == "job.exception" and data["outcome"] == "cancelled"


async def test_node_events_and_a_run_given_back_at_shutdown(engine_name: str, any_engine: Engine) -> None:
    url, prefix = ADDRESSES[engine_name](any_engine)  # an app with an engine of its own, closed by stop()
    app = Conveyor(url, prefix=prefix, queues={"default": 2}, poll_interval=0.1, leadership=False, node="n-1")
    events = Events()
    app.on("", events)
    await app.start()
    job_id = await app.enqueue(tj.sleeps.new(seconds=30))
    await wait_final(app, [job_id], {JobState.EXECUTING})
    await events.wait("job.start")
    await app.stop(grace=0.1)
    assert events.named("node.start") == [{"node": "n-1", "name": "conveyor", "queues": ["default"]}]
    assert events.named("node.stop") == [{"node": "n-1", "name": "conveyor", "released": 1}]
    name, data = ended(events, job_id)
    assert name == "job.exception" and data["outcome"] == "released" and data["final"] is False
    assert data["state"] is JobState.AVAILABLE and data["ack"] is None
    assert data["error_type"] == "CancelledError"
    stored = await any_engine.get_job(job_id)
    assert stored is not None and stored.state is JobState.AVAILABLE
    order = [
        name for name, _ in events.seen if name in ("node.start", "job.start", "job.exception", "node.stop")
    ]
    assert order == ["node.start", "job.start", "job.exception", "node.stop"]


async def test_fetch_and_ack_events(node_app: Conveyor) -> None:
    events = Events()
    node_app.on("producer.", events)
    node_app.on("acker.", events)
    ids = await node_app.enqueue_many(tj.completes.new(n=n) for n in range(12))
    await wait_final(node_app, ids, {JobState.COMPLETED})
    await events.wait("acker.acked", lambda acked: sum(a["count"] for a in acked) >= 12)
    fetches = events.named("producer.fetch")
    assert sum(f["count"] for f in fetches) == 12
    for fetch in fetches:
        assert fetch["node"] == node_app.settings.node and fetch["queue"] == "default"
        assert 1 <= fetch["demand"] <= 5 and 0 <= fetch["count"] <= fetch["demand"]
        assert isinstance(fetch["duration"], float) and fetch["duration"] >= 0
        assert fetch["capped"] is False
    acked = events.named("acker.acked")
    assert sum(a["count"] for a in acked) == 12 and sum(a["applied"] for a in acked) == 12
    assert sum(a["states"]["completed"] for a in acked) == 12
    assert all(set(a["states"]) == {"completed"} and a["duration"] >= 0 for a in acked)


async def test_signal_and_queue_events(node_app: Conveyor) -> None:
    events = Events()
    node_app.on("node.", events)
    node_app.on("queue.", events)
    node = node_app.settings.node
    await node_app.pause_queue("default")
    # Applied here at once, then received as a notification.
    signals = await events.wait(
        "node.signal", lambda seen: {s["from"] for s in seen} == {"local", "notification"}
    )
    for signal in signals:
        assert signal["node"] == node and signal["action"] == "pause" and signal["queue"] == "default"
        assert signal["ident"] == "any" and signal["job_id"] is None
        assert signal["payload"]["action"] == "pause"
    # Applied twice (here at once, then from the notification), changed once.
    assert events.named("queue.paused") == [{"node": node, "queue": "default"}]
    await node_app.resume_queue("default")
    await node_app.scale_queue("default", 7)
    await events.wait("queue.scaled")
    assert events.named("queue.resumed") == [{"node": node, "queue": "default"}]
    assert events.named("queue.scaled") == [
        {"node": node, "queue": "default", "limit": 7, "previous": 5, "limits": FetchLimits()}
    ]
    await node_app.start_queue("extra", limit=2)
    await events.wait("queue.started")
    assert events.named("queue.started") == [{"node": node, "queue": "extra", "limit": 2}]
    await node_app.stop_queue("extra")
    await events.wait("queue.stopped")
    assert events.named("queue.stopped") == [{"node": node, "queue": "extra"}]


class Failing:
    """A handler that raises ``error`` on every event it gets."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.calls = 0

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        self.calls += 1
        raise self.error

    def __repr__(self) -> str:
        return f"Failing({type(self.error).__name__})"


async def test_failing_handlers_never_reach_jobs_or_the_node(
    node_app: Conveyor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="conveyor.telemetry")
    handlers = [Failing(ValueError("handler bug")), Failing(SystemExit(3)), Failing(KeyboardInterrupt())]
    for handler in handlers:
        node_app.on("", handler)
    events = Events()
    node_app.on("", events)  # attached after the failing ones: still gets every event
    ids = await node_app.enqueue_many([*(tj.completes.new(n=n) for n in range(10)), tj.fails.new()])
    await wait_final(node_app, ids, {JobState.COMPLETED, JobState.RETRYABLE})
    await node_app.pause_queue("default")
    await node_app.resume_queue("default")
    await events.wait("queue.resumed")
    assert [(await node_app.get_job(i)).state for i in ids[:10]] == [JobState.COMPLETED] * 10  # type: ignore[union-attr]
    assert len(events.named("job.stop")) == 10 and len(events.named("job.exception")) == 1
    assert node_app.node is not None and node_app.node.started
    # Every failure counted, each handler logged once (the next line would come a minute later).
    for handler in handlers:
        assert handler.calls >= 22
        logged = [
            r for r in caplog.records if r.name == "conveyor.telemetry" and repr(handler) in r.getMessage()
        ]
        assert len(logged) == 1, [r.getMessage() for r in logged]
        assert logged[0].exc_info is not None and logged[0].exc_info[1] is handler.error


async def test_one_log_line_per_outcome(node_app: Conveyor, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="conveyor.job")
    requests = {
        "completes": tj.completes.new(n=1),
        "snoozes": tj.snoozes.new(),
        "cancels": tj.cancels.new(),
        "discards": tj.discards.new(),
        "fails": tj.fails.new(),
        "fails_finally": tj.fails_finally.new(),
    }
    ids = dict(zip(requests, await node_app.enqueue_many(requests.values()), strict=True))
    await wait_final(node_app, list(ids.values()), FINISHED)
    await wait_final(node_app, [ids["completes"]], {JobState.COMPLETED})
    by_job: dict[int, list[logging.LogRecord]] = {}
    for record in caplog.records:
        if record.name == "conveyor.job":
            by_job.setdefault(getattr(record, "job_id", -1), []).append(record)
    assert set(by_job) == set(ids.values()), {k: [r.getMessage() for r in v] for k, v in by_job.items()}
    lines = {key: by_job[job_id] for key, job_id in ids.items()}
    assert all(len(records) == 1 for records in lines.values())
    expected = {
        "completes": (logging.INFO, "completed", ["completed in ", ", queued ", "(attempt 1/20)"]),
        "snoozes": (logging.INFO, "scheduled", ["snoozed for 60.00s (attempt 1/20"]),
        "cancels": (logging.INFO, "cancelled", ["cancelled (attempt 1/20", "not needed any more"]),
        "discards": (logging.WARNING, "discarded", ["discarded (attempt 1/20", "the input is bad"]),
        "fails": (
            logging.WARNING,
            "retryable",
            ["attempt 1/3 failed in ", "retrying in ", "ValueError: boom"],
        ),
        "fails_finally": (logging.ERROR, "discarded", ["discarded (no attempts left)", "KeyError: 'gone'"]),
    }
    formatter = JsonFormatter()
    for key, (level, state, fragments) in expected.items():
        (record,) = lines[key]
        message = record.getMessage()
        assert record.levelno == level, (key, message)
        assert message.startswith(f"job {ids[key]} (tests.conformance.telemetry_jobs.{key}) "), message
        for fragment in fragments:
            assert fragment in message, (key, message)
        # The job's fields as keys of the JSON line.
        line = orjson.loads(formatter.format(record))
        assert line["level"] == logging.getLevelName(level) and line["logger"] == "conveyor.job"
        assert line["message"] == message and line["ts"].endswith("+00:00")
        assert line["job_id"] == ids[key] and line["worker"].endswith(f".{key}")
        assert line["queue"] == "default" and line["attempt"] == 1 and line["state"] == state
        assert line["duration_ms"] >= 0 and line["queue_time_ms"] >= 0
        assert line["error_type"] == {"fails": "ValueError", "fails_finally": "KeyError"}.get(key)


async def test_job_logs_cost_nothing_when_disabled(
    node_app: Conveyor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="conveyor.job")
    ids = await node_app.enqueue_many([tj.completes.new(n=1), tj.fails.new()])
    await wait_final(node_app, ids, {JobState.COMPLETED, JobState.RETRYABLE})
    logged = [r for r in caplog.records if r.name == "conveyor.job"]
    assert [getattr(r, "job_id", None) for r in logged] == [ids[1]]
