"""Signals to jobs: messages sent to a job from anywhere in the fleet (``Conveyor.signal``), and
what the job does with them.

A message is a small JSON object. It is stored with the job (``meta["signals"]``, in the order sent,
``Job.signals``), so it is never lost: a job receives every message sent to it, whether it was
running, waiting or not yet started when the message came. A running job is told at once through a
notification (``<prefix>.oban_inbox``, payload ``{"job_id": id}``), polling being the fallback.

Each run of a job starts again at the first message: the first ``receive``/``wait_for_signal`` of a
run returns message 1, the second message 2, and so on. A job run again (after ``wait_for_signal``
let go of its slot, a retry, or a crash) so sees the same messages in the same order, and code that
waits for a decision finds it on every later run. Act on a message idempotently.

* ``await receive(timeout)``: the next message, waiting while holding the job's slot.
* ``async for message in signals(timeout)``: every message as it comes, until none comes within
  ``timeout`` (or the job ends).
* ``await wait_for_signal(timeout)``: the next message if it is there; else the job lets go of its
  slot (it is snoozed, without spending an attempt) and runs again when a message arrives, or when
  ``timeout`` has passed, when this call then raises ``SignalTimeoutError``. Code before the call runs
  again on the next run: put the call first, or make what precedes it idempotent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from conveyor._job_json import encode_mapping
from conveyor._options import check_delay
from conveyor.context import JobContext, current_job
from conveyor.errors import ConveyorError, SignalTimeoutError, ValidationError
from conveyor.outcomes import Outcome

#: The most one message may hold, as JSON.
MAX_MESSAGE_BYTES = 8_000
#: The most messages one job keeps; a signal beyond them is refused.
MAX_MESSAGES = 1_000
#: How long ``wait_for_signal()`` without a timeout lets a job wait.
FOREVER = timedelta(days=365)
#: The meta key where a job that let go of its slot records what it waits for.
AWAITING = "awaiting_signal"


def encode_message(message: Any) -> bytes:
    """The JSON of a message, refused with a clear error unless it is a small JSON object."""
    encoded = encode_mapping("message", message)
    if len(encoded) > MAX_MESSAGE_BYTES:
        raise ValidationError(
            "message", message, f"is {len(encoded)} bytes as JSON; at most {MAX_MESSAGE_BYTES}"
        )
    return encoded


class AwaitSignal(Outcome):
    """Raised by ``wait_for_signal`` when the message is not there yet: the node snoozes the job
    until ``until`` and records ``position`` (``meta["awaiting_signal"]``), so a signal wakes it."""

    def __init__(self, position: int, until: datetime) -> None:
        self.position = position
        self.until = until
        super().__init__(f"waiting for signal {position + 1} until {until.isoformat()}")

    def __reduce__(self) -> tuple[type[AwaitSignal], tuple[int, datetime]]:
        return (AwaitSignal, (self.position, self.until))

    def marker(self) -> dict[str, Any]:
        return {"position": self.position, "until": self.until.isoformat()}


def take_next(context: JobContext) -> dict[str, Any] | None:
    inbox = context.inbox
    if inbox.position < len(inbox.messages):
        inbox.position += 1
        return inbox.messages[inbox.position - 1]
    return None


async def receive(timeout: float | None = None) -> dict[str, Any]:
    """The job's next message, waiting for it (holding the job's slot) up to ``timeout`` seconds
    (None: as long as the job runs); ``SignalTimeoutError`` when none came."""
    context, found, timeout = _receiving("receive", timeout)
    if found is not None:
        return found
    assert context.link is not None
    return await context.link.receive(context, timeout)


def receive_sync(timeout: float | None = None) -> dict[str, Any]:
    """``receive`` for blocking jobs, from the job's thread."""
    context, found, timeout = _receiving("receive_sync", timeout)
    if found is not None:
        return found
    assert context.link is not None
    message: dict[str, Any] = context.link.run_on_loop(context.link.receive(context, timeout))
    return message


def _receiving(name: str, timeout: float | None) -> tuple[JobContext, dict[str, Any] | None, float | None]:
    """The running job, its next message if it is there, and the checked timeout; refuses to wait
    where nothing can wake the job (no node: a worker process, a direct call)."""
    context = current_job()
    found = take_next(context)
    if found is None:
        if timeout is not None:
            timeout = check_delay("timeout", timeout)
        if context.link is None:
            raise ConveyorError(f"{name}() can wait only in a job a node runs; use wait_for_signal")
    return context, found, timeout


async def signals(timeout: float | None = None) -> AsyncIterator[dict[str, Any]]:
    """Every message as it comes; ends when none came within ``timeout`` seconds."""
    while True:
        try:
            yield await receive(timeout)
        except SignalTimeoutError:
            return


def _await_next(timeout: float | None) -> dict[str, Any]:
    context = current_job()
    found = take_next(context)
    if found is not None:
        return found
    wait = FOREVER if timeout is None else timedelta(seconds=check_delay("timeout", timeout))
    position = context.inbox.position
    # The node's clock, so a wait's deadline is on the same time as the snooze the runner computes.
    now = context.link.now() if context.link is not None else datetime.now(UTC)
    until = _recorded_until(context, position)
    if until is not None and until <= now:
        raise SignalTimeoutError(f"no signal came for job {context.id} by {until.isoformat()}")
    raise AwaitSignal(position, until if until is not None else now + wait)


def _recorded_until(context: JobContext, position: int) -> datetime | None:
    """When an earlier run waiting for the same message gave up, as it recorded it; None if no run
    waited for it (or the record is not one we wrote)."""
    marker = context.meta.get(AWAITING)
    if not isinstance(marker, dict) or marker.get("position") != position:
        return None
    try:
        until = datetime.fromisoformat(str(marker.get("until")))
    except ValueError:
        return None
    return until if until.tzinfo is not None else until.replace(tzinfo=UTC)


async def wait_for_signal(timeout: float | None = None) -> dict[str, Any]:
    """The job's next message; when it is not there yet, let go of the slot until it comes (see the
    module doc). ``timeout`` seconds (None: a year) from the first run that waited for it."""
    return _await_next(timeout)


def wait_for_signal_sync(timeout: float | None = None) -> dict[str, Any]:
    """``wait_for_signal`` for blocking jobs (threads and processes)."""
    return _await_next(timeout)
