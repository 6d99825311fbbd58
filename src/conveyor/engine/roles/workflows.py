"""The workflows role: suspended steps, settled when their dependencies end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from conveyor.job import Job, JobState
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest
from conveyor.workflow_record import WorkflowRecord


class Workflows(Protocol):
    """Workflow steps (``engine/*/workflows.py``)."""

    async def settle_steps(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: Any = None
    ) -> dict[int, JobState]:
        """Let suspended workflow steps go on where they can: those among ``ids``, and those that
        depend on the steps among ``ids``. A step goes on once none of its dependencies (``meta.deps``,
        names of steps with its ``meta.workflow_id``) is unfinished: it becomes ``available``
        (``scheduled`` when its ``scheduled_at`` is ahead), or ``cancelled`` when a dependency was
        cancelled, discarded or no longer exists, unless its meta says ``ignore_cancelled``,
        ``ignore_discarded`` or ``ignore_deleted``; a step cancelled so settles the steps after it.
        Returns the settled steps' new states. Notifies "insert" for queues that gained jobs.

        Run after the change that ended the dependencies is committed (``ack_jobs`` and
        ``cancel_jobs`` call it so): of two steps ending at once on two nodes, the settle that starts
        last sees both. A step goes on once, however many settles see it ready. With ``conn``, in
        the caller's transaction."""

    async def sweep_steps(self, *, now: datetime | None = None, limit: int = 10_000) -> dict[int, JobState]:
        """``settle_steps`` for every suspended step (up to ``limit``, in id order): what no ack
        settled (a node that died after its ack's commit, steps deleted by hand, another client's
        ack). The leader runs it on every stage."""

    async def hold_steps(self, ids: Sequence[int], *, conn: Any = None) -> list[int]:
        """Make the jobs among ``ids`` that are available, scheduled, cancelled or discarded
        ``suspended`` (a failed one gets one more attempt if it used them up, and loses its end
        time); return the ids held. A workflow retry sends failed steps back to wait with it."""

    async def add_dependents(
        self, workflow_id: str, added: Mapping[str, Sequence[str]], *, conn: Any = None
    ) -> None:
        """Steps added to a stored workflow: append the new names in ``added`` (stored step name ->
        new step names) to the ``meta.dependents`` of those stored steps."""

    async def workflow_jobs(self, workflow_id: str) -> list[Job]:
        """The steps of a workflow, in id order."""

    async def insert_locked_workflow(
        self,
        requests: Sequence[JobRequest],
        *,
        workflow_id: str,
        name: str | None,
        lock: str,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds | str:
        """Insert a new workflow's steps (as ``insert`` with ``hold``) holding ``lock``, unless an
        unfinished workflow (a step not completed, cancelled or discarded) holds it already: then
        insert nothing and return that workflow's id. One transaction, in which enqueuers of one
        lock go one at a time, so of any number racing, one inserts and the others get its id.
        A finished holder lets go of the lock here. Row in ``conveyor_workflows`` (migration 13)."""

    async def workflow_record(self, workflow_id: str) -> WorkflowRecord | None:
        """The record of how the workflow ended, kept once the pruner deleted steps of it
        (``conveyor_workflows``, migration 13); None when none was pruned (or the record expired).
        ``prune_jobs`` writes it as it deletes steps, in the same transaction, summing passes."""
