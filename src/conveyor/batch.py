"""Batches: a group of jobs, and callback jobs that run once when all of them have finished.

A batch is stored as a workflow (``conveyor.workflow``): its jobs are steps without dependencies
(``job-0``, ``job-1``, ...), each callback a step depending on all of them, named after its kind. The
engine settles a callback exactly once, when the last job ends, and writes how they ended into its
``meta["deps_ended"]`` (``{"completed": n, "cancelled": n, "discarded": n, "deleted": n}``), which the
callback reads through ``current_job().meta``.

Callbacks (each optional):

- ``on_completed``: every job completed;
- ``on_exhausted``: every job finished, and some did not complete (cancelled, discarded, deleted);
- ``on_discarded``: every job finished, and some were discarded;
- ``on_cancelled``: every job finished, and some were cancelled.

Cancelling the batch (``app.cancel_workflow(batch.id)``) cancels its unfinished jobs and leaves the
callbacks to settle as for any cancelled jobs: ``on_cancelled`` and ``on_exhausted`` run, once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from conveyor._options import check_lock_key
from conveyor.errors import ValidationError
from conveyor.request import JobRequest
from conveyor.workflow import POLICIES, Workflow

#: Each callback: the condition on how the jobs ended (None: all completed, the default policy).
CALLBACKS = {
    "on_completed": None,
    "on_exhausted": "any_failed",
    "on_discarded": "any_discarded",
    "on_cancelled": "any_cancelled",
}


@dataclass
class Batch:
    """Jobs enqueued together (``app.enqueue_many(batch)``) with callbacks when all have finished."""

    on_completed: JobRequest | None = None
    on_exhausted: JobRequest | None = None
    on_discarded: JobRequest | None = None
    on_cancelled: JobRequest | None = None
    name: str | None = None
    #: The batch's id (its workflow's): ``app.workflow_status(batch.id)`` follows it.
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    #: One unfinished batch per lock (``Workflow(lock=...)``): enqueueing it while another holding
    #: the lock is unfinished returns that one's ids as a conflict. None: no lock.
    lock: str | None = None
    _jobs: list[JobRequest] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.lock is not None:
            self.lock = check_lock_key("batch.lock", self.lock)
        for kind in CALLBACKS:
            callback = getattr(self, kind)
            if callback is not None and not isinstance(callback, JobRequest):
                raise ValidationError(kind, callback, "must be a JobRequest (e.g. report.new(...)) or None")

    def add(self, request: JobRequest) -> Batch:
        """Add one job to the batch; returns the batch, so calls chain. Anything but a ``JobRequest``
        raises ``ValidationError``."""
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, "must be a JobRequest (e.g. my_job.new(...))")
        self._jobs.append(request)
        return self

    def add_many(self, requests: Iterable[JobRequest]) -> Batch:
        """Add each request of ``requests`` in order (as ``add``); returns the batch."""
        for request in requests:
            self.add(request)
        return self

    def __len__(self) -> int:
        return len(self._jobs)

    def workflow(self) -> Workflow:
        """The batch as the workflow that stores it."""
        if not self._jobs:
            raise ValidationError("batch", self.name or self.id, "has no jobs")
        workflow = Workflow(name=self.name, id=self.id, lock=self.lock)
        names = [f"job-{n}" for n in range(len(self._jobs))]
        for name, request in zip(names, self._jobs, strict=True):
            workflow.add(name, request)
        for kind, condition in CALLBACKS.items():
            callback = getattr(self, kind)
            if callback is None:
                continue
            ignore = POLICIES if condition is not None else ()
            workflow.add(kind, callback, deps=names, ignore=ignore, run_if=condition)
        return workflow
