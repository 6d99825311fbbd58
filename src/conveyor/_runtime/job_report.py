"""What a node tells about each run of a job: the ``job.*`` telemetry events and one log line per
outcome on the ``conveyor.job`` logger.

Both cost nothing when nobody wants them: the event's data is built only when a handler listens to
it, and the log line only when its level is enabled. Log records carry the job's fields as
``extra`` attributes (job_id, worker, queue, attempt, max_attempts, state, outcome, duration_ms,
queue_time_ms, error_type), which the JSON log format (``conveyor.log_formats``) writes as keys.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from conveyor._runtime.invoke import BaseExceptionRaised
from conveyor._runtime.process_pool import RemoteError
from conveyor.acks import Ack, safe_error_text
from conveyor.job import Job, JobState
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.job")

#: The most of a job's exception message one log line or event carries (the stored error keeps up to
#: 16,000 characters).
SUMMARY_CHARS = 500

#: The outcome of an ack, by its state (a scheduled ack is a snooze).
OUTCOMES = {
    JobState.COMPLETED: "completed",
    JobState.SCHEDULED: "snoozed",
    JobState.RETRYABLE: "retryable",
    JobState.DISCARDED: "discarded",
    JobState.CANCELLED: "cancelled",
    JobState.AVAILABLE: "released",
}
#: On Python 3.11 ``JobState.COMPLETED`` goes through a descriptor written in Python each time.
_COMPLETED = JobState.COMPLETED


class JobReport:
    """Emits the events of a run and logs its outcome."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    def started(self, job: Job) -> None:
        if self.telemetry.listens("job.start"):
            self.telemetry.dispatch("job.start", job_fields(job))

    def ended(self, job: Job, ack: Ack | None, error: BaseException | None, duration: float) -> None:
        """The run of ``job`` ended with ``ack`` (None: no ack, the job is given back or Conveyor
        failed), ended by ``error`` when the code raised or could not run."""
        event = "job.stop" if error is None else "job.exception"
        level = _level(job, ack, error)
        listening = self.telemetry.listens(event)
        logging_it = level is not None and log.isEnabledFor(level)
        if not (listening or logging_it):
            return
        state = ack.state if ack is not None else (JobState.AVAILABLE if _released(error) else None)
        data = job_fields(job)
        data["duration"] = duration
        data["state"] = state
        data["outcome"] = OUTCOMES[state] if state is not None else "failed"
        data["ack"] = ack
        if error is not None:
            data["error_type"], data["message"] = describe_error(error)
            data["exception"] = error
            data["final"] = state in (JobState.DISCARDED, JobState.CANCELLED)
        if listening:
            self.telemetry.dispatch(event, data)
        if logging_it and level is not None:
            _log(level, data, ack)


def job_fields(job: Job) -> dict[str, Any]:
    """The fields every job event has (a new dict each time: handlers may keep it)."""
    return {
        "job": job,
        "worker": job.worker,
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "queue_time": _queue_time(job),
    }


def _queue_time(job: Job) -> float:
    """Seconds the job waited: from its scheduled time to the start of this attempt, never below 0.

    ``attempted_at`` is the start of the claiming transaction, which can begin before the insert
    commits (a limited queue's claim first waits for the queue's lock), so a job can look started
    before it was scheduled; metrics histograms refuse negative values."""
    if job.attempted_at is None:
        return 0.0
    return max(0.0, (job.attempted_at - job.scheduled_at).total_seconds())


def _released(error: BaseException | None) -> bool:
    return isinstance(error, asyncio.CancelledError)


def _level(job: Job, ack: Ack | None, error: BaseException | None) -> int | None:
    """The level of the outcome's log line (None: not logged here; Conveyor's own failures are
    logged where they are caught)."""
    if ack is None:
        return logging.INFO if _released(error) else None
    state = ack.state
    if state is _COMPLETED:  # the common case first, with no enum member read from its class
        return logging.INFO
    if state is JobState.RETRYABLE or (state is JobState.SCHEDULED and error is not None):
        return logging.WARNING  # a failed attempt, or a job this node's code does not fit
    if state is JobState.DISCARDED:
        # A failure with no attempts left, or a row that cannot be read: the job is lost, unlike a
        # ``Discard`` the code chose.
        return logging.ERROR if error is not None else logging.WARNING
    return logging.INFO


def describe_error(error: BaseException) -> tuple[str, str]:
    """The exception's class name and its message, made safe and short for a log line. A worker
    process's error and a ``BaseException`` carried out of job code are named by what was raised."""
    if isinstance(error, BaseExceptionRaised):
        error = error.original
    if isinstance(error, RemoteError):
        name, _, message = error.description.partition(": ")
        if not name.isidentifier():
            name, message = type(error).__name__, error.description
    else:
        name, message = type(error).__name__, str(error)
    message = safe_error_text(message)
    if len(message) > SUMMARY_CHARS:
        message = f"{message[:SUMMARY_CHARS]}... [{len(message) - SUMMARY_CHARS} characters more]"
    return name, message


def _log(level: int, fields: dict[str, Any], ack: Ack | None) -> None:
    job: Job = fields["job"]
    state: JobState | None = fields["state"]
    outcome: str = fields["outcome"]
    duration: float = fields["duration"]
    error_type: str | None = fields.get("error_type")
    extra = {
        "job_id": job.id,
        "worker": job.worker,
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "state": state.value if state is not None else None,
        "outcome": outcome,
        "duration_ms": round(duration * 1000, 3),
        "queue_time_ms": round(fields["queue_time"] * 1000, 3),
        "error_type": error_type,
    }
    head = f"job {job.id} ({job.worker}) {outcome}"
    attempt = f"attempt {job.attempt}/{job.max_attempts}"
    took = f"in {_seconds(duration)}"
    error = f"{error_type}: {fields['message']}" if error_type is not None else None
    wait = ack.schedule_in if ack is not None and ack.schedule_in is not None else 0.0
    if outcome == "completed":
        text = f"{head} {took}, queued {_seconds(fields['queue_time'])} ({attempt})"
    elif outcome == "snoozed" and error is not None:  # it does not fit this node's code
        text = f"{head} for {_seconds(wait)} ({attempt} not spent): {error}"
    elif outcome == "snoozed":
        text = f"{head} for {_seconds(wait)} ({attempt}, {took})"
    elif outcome == "retryable":
        text = f"{head}: {attempt} failed {took}, retrying in {_seconds(wait)}: {error}"
    elif outcome == "released":
        text = f"{head} at shutdown after {_seconds(duration)}; it runs again ({attempt} not spent)"
    elif error is not None and outcome == "discarded":
        reason = "no attempts left" if job.attempt >= job.max_attempts else "it cannot run"
        text = f"{head} ({reason}): {attempt} failed {took}: {error}"
    else:  # cancelled or discarded by the code's outcome, or cancelled while it ran
        text = f"{head} ({attempt}, {took}): {_reason(ack)}"
    log.log(level, "%s", text, extra=extra)


def _reason(ack: Ack | None) -> str:
    """The reason an ack that ends a job records (``"cancelled: <reason>"``), short and safe."""
    text = ack.error.get("error") if ack is not None and ack.error else None
    if not isinstance(text, str):
        return "no reason given"
    _, _, reason = text.partition(": ")
    reason = safe_error_text(reason or text)
    return reason if len(reason) <= SUMMARY_CHARS else f"{reason[:SUMMARY_CHARS]}..."


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:.1f}ms"
    return f"{value:.2f}s" if value < 100 else f"{value:.0f}s"
