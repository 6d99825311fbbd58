"""Waiting for a whole workflow (``Conveyor.wait_workflow``): until every step is final, then its
one state decides (completed: returned; failed or cancelled: raised, naming the step).

It rides on the job waits (``_app/waiters.py``): it waits for one unfinished step at a time (the
last in insertion order, usually the workflow's end) through that step's notifications and the
shared poll, then reads the workflow again. So it costs what one job wait costs, plus one read of
the workflow each time a step it waited for ends, and it sees steps grafted meanwhile.
"""

from __future__ import annotations

import asyncio

from conveyor._app.waiters import Waiters
from conveyor._app.workflow_actions import workflow_status
from conveyor.engine.base import Engine
from conveyor.errors import (
    JobEndedError,
    JobNotFoundError,
    WaitTimeoutError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowTimeoutError,
)
from conveyor.workflow_state import WorkflowState, WorkflowStatus


async def wait_workflow(
    engine: Engine, waiters: Waiters, workflow_id: str, timeout: float | None
) -> WorkflowStatus:
    """The workflow's status once it completed (see ``Conveyor.wait_workflow``)."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    awaited = 0
    while True:
        status = await workflow_status(engine, workflow_id)
        state = status.state
        if state is None:
            raise WorkflowNotFoundError(workflow_id)
        if state is WorkflowState.COMPLETED:
            return status
        if state is WorkflowState.FAILED:
            raise WorkflowFailedError(status)
        if state is WorkflowState.CANCELLED:
            raise WorkflowCancelledError(status)
        # Still running: wait for its last unfinished step to be final, whatever its ending.
        awaited = next(job.id for job in reversed(list(status.steps.values())) if not job.state.is_final)
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            raise WorkflowTimeoutError(status, awaited, timeout or 0.0)
        try:
            await waiters.wait(awaited, remaining, True)
        except (JobEndedError, JobNotFoundError):
            pass  # it ended otherwise, or was deleted: the workflow's state tells what that means
        except WaitTimeoutError:
            raise WorkflowTimeoutError(status, awaited, timeout or 0.0) from None
