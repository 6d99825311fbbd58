"""The documented API of ``Conveyor`` for stored workflows: extend one, read its status, wait for
it, cancel it, retry its failed steps, read a step's dependency results. ``Conveyor`` inherits it;
the operations themselves are ``conveyor._app.workflow_actions``' and ``workflow_waits``'."""

from __future__ import annotations

from typing import Any

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor._app.relay import check_wait
from conveyor._app.workflow_actions import (
    cancel_workflow,
    check_workflow_id,
    dependency_results,
    extend_workflow,
    retry_workflow,
    step_of_current_job,
    workflow_status,
)
from conveyor._app.workflow_waits import wait_workflow
from conveyor.workflow import Workflow, WorkflowStatus


class WorkflowApi:
    """Stored workflows (part of ``Conveyor``)."""

    _binding: EngineBinding

    async def extend_workflow(self, workflow_id: str) -> Workflow:
        """A ``Workflow`` that adds steps to a stored one (a running step grafting more work): add
        steps, which may depend on the stored ones, then ``enqueue_many`` it."""
        return await self._binding.run(lambda e: extend_workflow(e, workflow_id))

    async def workflow_status(self, workflow_id: str) -> WorkflowStatus:
        """Where the workflow stands: each step's job by name, and the workflow's one ``state``,
        ``phase`` and ``progress`` (see ``WorkflowStatus``)."""
        return await self._binding.run(lambda e: workflow_status(e, workflow_id))

    async def dependency_results(self) -> dict[str, Any]:
        """Inside a workflow step: the recorded results of the steps it depends on, by name."""
        workflow_id, deps = step_of_current_job()
        return dependency_results(await self.workflow_status(workflow_id), deps)

    def dependency_results_sync(self) -> dict[str, Any]:
        """``dependency_results`` for a blocking (thread) step."""
        workflow_id, deps = step_of_current_job()  # read here: the job's context is this thread's
        return dependency_results(self._binding.call_blocking(self.workflow_status, workflow_id), deps)

    async def cancel_workflow(self, workflow_id: str) -> list[int]:
        """Cancel every unfinished step of the workflow; return the ids cancelled. Steps waiting to
        run only on some ending of their dependencies (``run_if``: a batch's ``on_cancelled`` and
        ``on_exhausted``) are left to settle, so they run as when those steps are cancelled."""
        return await self._binding.run(lambda e: cancel_workflow(e, workflow_id))

    async def retry_workflow(self, workflow_id: str) -> list[int]:
        """Run the cancelled and discarded steps again, each once its dependencies have completed."""
        return await self._binding.run(lambda e: retry_workflow(e, workflow_id))

    async def wait_workflow(self, workflow_id: str, *, timeout: float | None = None) -> WorkflowStatus:
        """Wait until every step of the workflow is final, whichever nodes run them, and return its
        ``WorkflowStatus`` then when it completed (``state`` completed: every step completed, or a
        batch callback left out by its condition).

        Raises ``WorkflowFailedError`` (a ``JobDiscardedError``) when a step was discarded and
        ``WorkflowCancelledError`` (a ``JobCancelledError``) when one was cancelled, each naming
        that step (``step``, ``job``); ``WorkflowNotFoundError`` for an id no step has; and
        ``WorkflowTimeoutError`` (a ``WaitTimeoutError``) after ``timeout`` seconds (None: no
        limit). A step's failed attempt that will be retried is not an end: the wait goes on. The
        workflow itself goes on either way. Woken by the steps' "ended" notifications, polled every
        ``poll_interval`` as well (as ``wait``)."""
        workflow_id = check_workflow_id(workflow_id)
        timeout = check_wait(timeout, True)
        return await self._binding.run(
            lambda e: wait_workflow(e, self._binding.waiters_of(e), workflow_id, timeout)
        )

    extend_workflow_sync = blocking_twin(extend_workflow)
    workflow_status_sync = blocking_twin(workflow_status)
    cancel_workflow_sync = blocking_twin(cancel_workflow)
    retry_workflow_sync = blocking_twin(retry_workflow)
    wait_workflow_sync = blocking_twin(wait_workflow)
