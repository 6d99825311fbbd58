"""Telemetry's handler registry (no database): routing by prefix, attaching and detaching, the
rate-limited log of a failing handler; the JSON log format; the log settings."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from conveyor import Conveyor, JobState
from conveyor import telemetry as telemetry_module
from conveyor._runtime.invoke import BaseExceptionRaised
from conveyor._runtime.job_report import describe_error, job_fields
from conveyor._runtime.process_pool import RemoteError
from conveyor.errors import ValidationError
from conveyor.job import Job
from conveyor.log_formats import JsonFormatter
from conveyor.settings import load_settings
from conveyor.telemetry import Telemetry
from tests.helpers import Events


def test_handlers_get_the_events_their_prefix_names() -> None:
    telemetry = Telemetry()
    everything, jobs, stops = Events(), Events(), Events()
    telemetry.attach(everything)
    telemetry.attach(jobs, "job.")
    detach = telemetry.attach(stops, prefix="job.stop")
    assert telemetry.listens("job.stop") and telemetry.listens("node.start")
    telemetry.emit("job.start", n=1)
    telemetry.emit("job.stop", n=2)
    telemetry.emit("node.start", n=3)
    assert everything.seen == [("job.start", {"n": 1}), ("job.stop", {"n": 2}), ("node.start", {"n": 3})]
    assert jobs.seen == [("job.start", {"n": 1}), ("job.stop", {"n": 2})]
    assert stops.seen == [("job.stop", {"n": 2})]
    detach()
    detach()  # again: nothing more happens
    telemetry.emit("job.stop", n=4)
    assert stops.seen == [("job.stop", {"n": 2})] and jobs.named("job.stop") == [{"n": 2}, {"n": 4}]


def test_nobody_listening_is_known_before_any_data_is_built() -> None:
    telemetry = Telemetry()
    assert not telemetry.listens("job.start")
    detach = telemetry.attach(Events(), "node.")
    assert not telemetry.listens("job.start") and telemetry.listens("node.stop")
    detach()
    assert not telemetry.listens("node.stop")


def test_attach_refuses_what_cannot_be_a_handler() -> None:
    telemetry = Telemetry()
    with pytest.raises(ValidationError, match="handler"):
        telemetry.attach("print")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="prefix"):
        telemetry.attach(Events(), prefix=None)  # type: ignore[arg-type]


def test_app_on_attaches_directly_or_as_a_decorator(tmp_path: Path) -> None:
    app = Conveyor(f"sqlite:///{tmp_path / 'on.db'}")
    seen: list[str] = []

    @app.on("job.")
    def record(event: str, data: dict[str, Any]) -> None:
        seen.append(event)

    assert callable(record) and record.__name__ == "record"  # the decorator gives the function back
    events = Events()
    detach = app.on("node.", events)
    app.telemetry.emit("job.stop")
    app.telemetry.emit("node.start", node="n")
    detach()
    app.telemetry.emit("node.stop", node="n")
    assert seen == ["job.stop"] and events.seen == [("node.start", {"node": "n"})]


@pytest.mark.parametrize("error", [ValueError("bug"), SystemExit(2), KeyboardInterrupt()])
def test_a_failing_handler_is_logged_once_then_at_most_once_per_interval(
    error: BaseException, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interval runs on a clock of the test's own: on a loaded machine 500 emits could outlast
    # any real interval short enough for a test.
    now = [1000.0]
    monkeypatch.setattr(telemetry_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(telemetry_module, "FAILURE_LOG_INTERVAL", 0.2)
    caplog.set_level(logging.ERROR, logger="conveyor.telemetry")
    telemetry = Telemetry()

    def broken(event: str, data: dict[str, Any]) -> None:
        raise error

    after = Events()
    telemetry.attach(broken)
    telemetry.attach(after)
    for n in range(500):
        telemetry.emit("job.stop", n=n)
    assert len(after.seen) == 500  # the next handler is not held back
    assert len(caplog.records) == 1
    first = caplog.records[0]
    assert "failed on job.stop" in first.getMessage() and first.exc_info is not None
    assert first.exc_info[1] is error
    now[0] += 0.25
    telemetry.emit("job.start")
    assert len(caplog.records) == 2
    summary = caplog.records[1].getMessage()
    assert "failed 500 more times" in summary and f"the last on job.start: {type(error).__name__}" in summary
    telemetry.emit("job.start")
    assert len(caplog.records) == 2


def test_the_json_formatter_writes_any_record() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "lone %s", ("\ud800",), None)
    record.__dict__.update(big=2**70, thing=object(), nested={"a": [1, "\ud800"]}, job_id=7)
    line = orjson.loads(JsonFormatter().format(record))
    assert list(line)[:4] == ["ts", "level", "logger", "message"]
    assert line["message"] == "lone \\ud800" and line["big"] == str(2**70) and line["job_id"] == 7
    assert line["thing"].startswith("<object object") and "\\ud800" in line["nested"]
    try:
        raise RuntimeError("inside")
    except RuntimeError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = orjson.loads(JsonFormatter().format(failed))
    assert line["level"] == "ERROR" and "RuntimeError: inside" in line["exception"]


def test_the_json_formatter_finds_each_shape_of_records_extras() -> None:
    """Extras are found once per shape of record (its attribute names): records of other shapes
    through the same formatter get their own, in the order given, and never replace its keys."""
    formatter = JsonFormatter()

    def line(**extra: object) -> dict[str, object]:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        record.__dict__.update(extra)
        return orjson.loads(formatter.format(record))

    for _ in range(2):  # the second time from what the first found
        assert list(line(job_id=1, queue="q"))[4:] == ["job_id", "queue"]
        assert list(line(queue="q", job_id=1))[4:] == ["queue", "job_id"]
        plain = line()
        assert list(plain) == ["ts", "level", "logger", "message"]
        clash = line(level="mine", other=2)
        assert clash["level"] == "INFO" and clash["other"] == 2


# -- the log settings ----------------------------------------------------------------------------
def test_log_settings_come_from_arguments_environment_and_file(tmp_path: Path) -> None:
    default = load_settings(cwd=tmp_path, environ={})
    assert (default.log_level, default.log_format) == ("INFO", "text")
    (tmp_path / "conveyor.toml").write_text('log_level = "warning"\nlog_format = "json"\n')
    from_file = load_settings(cwd=tmp_path, environ={})
    assert (from_file.log_level, from_file.log_format) == ("WARNING", "json")
    environ = {"CONVEYOR_LOG_LEVEL": "debug", "CONVEYOR_LOG_FORMAT": "TEXT"}
    from_env = load_settings(cwd=tmp_path, environ=environ)
    assert (from_env.log_level, from_env.log_format) == ("DEBUG", "text")
    given = load_settings({"log_level": "ERROR"}, cwd=tmp_path, environ=environ)
    assert (given.log_level, given.log_format) == ("ERROR", "text")


@pytest.mark.parametrize(
    ("source", "value", "named"),
    [
        ("argument", {"log_level": "LOUD"}, "log_level"),
        ("argument", {"log_format": "xml"}, "log_format"),
        ("argument", {"log_level": 10}, "log_level"),
        ("environment", {"CONVEYOR_LOG_LEVEL": "verbose"}, "CONVEYOR_LOG_LEVEL"),
        ("environment", {"CONVEYOR_LOG_FORMAT": "yaml"}, "CONVEYOR_LOG_FORMAT"),
        ("file", 'log_format = "logfmt"', "log_format"),
        ("file", "log_level = 20", "log_level"),
    ],
)
def test_bad_log_settings_are_refused_by_name(source: str, value: Any, named: str, tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as raised:
        if source == "argument":
            load_settings(value, cwd=tmp_path, environ={})
        elif source == "environment":
            load_settings(cwd=tmp_path, environ=value)
        else:
            (tmp_path / "conveyor.toml").write_text(value + "\n")
            load_settings(cwd=tmp_path, environ={})
    assert raised.value.field == named
    assert "must be one of" in str(raised.value)


def test_errors_are_named_by_what_the_job_raised() -> None:
    assert describe_error(BaseExceptionRaised(SystemExit(3))) == ("SystemExit", "3")
    assert describe_error(RemoteError("ValueError: far away", "Traceback ...")) == ("ValueError", "far away")
    assert describe_error(RemoteError("result could not be sent back", "...")) == (
        "RemoteError",
        "result could not be sent back",
    )
    name, message = describe_error(ValueError("lone \ud800 " + "x" * 10_000))
    assert name == "ValueError" and message.startswith("lone \\ud800 x")
    assert message.endswith("characters more]") and len(message) < 600
    message.encode("utf-8")


def test_queue_time_is_never_negative() -> None:
    """A claim's transaction can start before the insert it claims commits (CI's OpenTelemetry run saw
    a histogram refuse the negative value); the wait then counts as none."""
    at = datetime(2026, 11, 28, 12, 0, 0)
    job = Job(
        id=1,
        state=JobState.EXECUTING,
        queue="q",
        worker="w",
        args={},
        meta={},
        tags=(),
        errors=(),
        attempt=1,
        max_attempts=3,
        priority=0,
        attempted_by=(),
        inserted_at=at,
        scheduled_at=at,
    )
    early = replace(job, attempted_at=at - timedelta(milliseconds=3))
    late = replace(job, attempted_at=at + timedelta(milliseconds=250))
    assert job_fields(early)["queue_time"] == 0.0
    assert job_fields(late)["queue_time"] == 0.25
    assert job_fields(job)["queue_time"] == 0.0
