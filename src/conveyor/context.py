"""What job code can learn about the job it runs: ``current_job()``."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from conveyor.job import Job

_current: contextvars.ContextVar[JobContext] = contextvars.ContextVar("conveyor_job")


@dataclass(slots=True)
class JobContext:
    """The running job and its cancellation flag.

    ``cancelled`` is set when the job is cancelled from anywhere in the fleet or hits its timeout;
    blocking code (threads, loops) should check it and return early.
    """

    job: Job
    # A plain flag: set from the loop, read from the job's thread (a bool read is atomic), and far
    # cheaper to create per job than a threading.Event.
    _cancelled: bool = False
    cancel_reason: str | None = None
    #: Where the job runs ("async", "thread", "process"), set by the runner.
    executor: str | None = None

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def meta(self) -> dict[str, object]:
        return self.job.meta

    @property
    def tags(self) -> tuple[str, ...]:
        return self.job.tags

    def is_cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str) -> None:
        """Someone asked for this job to stop: it will end ``cancelled``."""
        self.cancel_reason = reason
        self._cancelled = True

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_reason is not None

    def expire(self) -> None:
        """The job ran out of time: tell its code to stop (it ends as an error, not cancelled)."""
        self._cancelled = True


def current_job() -> JobContext:
    """The context of the job running in this task or thread; LookupError outside a job."""
    try:
        return _current.get()
    except LookupError:
        raise LookupError("current_job() was called outside a running Conveyor job") from None


def bind(context: JobContext) -> contextvars.Token[JobContext]:
    return _current.set(context)


def unbind(token: contextvars.Token[JobContext]) -> None:
    _current.reset(token)
