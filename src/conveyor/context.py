"""What job code can learn about the job it runs: ``current_job()``."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from conveyor.job import Job

_current: contextvars.ContextVar[JobContext] = contextvars.ContextVar("conveyor_job")
_CREATING = threading.Lock()


class NodeLink(Protocol):
    """What a running job reaches its node through: stored progress and signals. The node's side is
    ``_runtime.job_link.JobLink``, one per node for all its jobs. A job run outside a node (a worker
    process, a test calling the function) has none."""

    def progress_changed(self, context: JobContext) -> None:
        """``context.progress`` changed (called from any thread): write it soon."""

    async def receive(self, context: JobContext, timeout: float | None) -> dict[str, Any]:
        """The job's next signal, waiting for it up to ``timeout`` seconds."""

    def run_on_loop(self, work: Any) -> Any:
        """Run a coroutine on the node's loop from a job's thread and return its result."""

    def now(self) -> datetime:
        """The wall time on the node's clock (a fake one in tests), timezone-aware UTC."""


class Progress:
    """The progress fields of one attempt, merged under a lock (coroutines and threads of one job
    may report at once; every field any of them sets is kept). ``version`` counts the merges, so the
    writer knows whether what it stored is the latest."""

    __slots__ = ("_lock", "fields", "version", "written")

    def __init__(self, stored: Mapping[str, Any]) -> None:
        self._lock = threading.Lock()
        self.fields: dict[str, Any] = dict(stored)
        self.version = 0
        self.written = 0

    def merge(self, update: Mapping[str, Any], check: Any) -> dict[str, Any]:
        """Merge ``update`` after ``check(merged)`` accepted the result; return the merged fields."""
        with self._lock:
            merged = {**self.fields, **update}
            check(merged)
            self.fields = merged
            self.version += 1
            return merged

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            return self.version, dict(self.fields)

    def unwritten(self) -> dict[str, Any] | None:
        """The fields when some merge is not stored yet, else None."""
        with self._lock:
            return dict(self.fields) if self.version != self.written else None


@dataclass(slots=True)
class Inbox:
    """The signals of one run of a job: those stored so far, and how many this run has received.
    Every run starts at the first message again (see ``conveyor.inbox``)."""

    messages: list[dict[str, Any]]
    position: int = 0


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
    #: The node's side of progress and signals; None outside a node.
    link: NodeLink | None = None
    _progress: Progress | None = None
    _inbox: Inbox | None = field(default=None, repr=False)

    @property
    def progress(self) -> Progress:
        """This attempt's progress, starting from what the job stored before."""
        if self._progress is None:
            with _CREATING:  # two threads of one job reporting first at once share one
                if self._progress is None:
                    self._progress = Progress(self.job.progress)
        return self._progress

    @property
    def inbox(self) -> Inbox:
        """The signals sent to this job (``app.signal(id, ...)``), read with ``receive``, ``signals`` or
        ``wait_for_signal``."""
        if self._inbox is None:
            self._inbox = Inbox(self.job.signals)
        return self._inbox

    @property
    def id(self) -> int:
        """The job's id."""
        return self.job.id

    @property
    def attempt(self) -> int:
        """The attempt running now, from 1."""
        return self.job.attempt

    @property
    def meta(self) -> dict[str, object]:
        """The job's meta as stored when it was fetched."""
        return self.job.meta

    @property
    def tags(self) -> tuple[str, ...]:
        """The job's tags."""
        return self.job.tags

    def is_cancelled(self) -> bool:
        """True once the job was cancelled (from anywhere in the fleet) or ran out of time: blocking code
        should check it and return early."""
        return self._cancelled

    def cancel(self, reason: str) -> None:
        """Someone asked for this job to stop: it will end ``cancelled``."""
        self.cancel_reason = reason
        self._cancelled = True

    @property
    def cancel_requested(self) -> bool:
        """True when the job was cancelled (not merely timed out): it will end ``cancelled``."""
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
