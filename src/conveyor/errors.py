"""Exceptions raised by Conveyor.

Every error that comes from bad input names the field (or worker, or option) and the value that was
wrong, so a caller can fix it without reading Conveyor's source.
"""

from __future__ import annotations

import sqlite3
from typing import Any


class ConveyorError(Exception):
    """Base class of every exception Conveyor raises on purpose."""


class ValidationError(ConveyorError, ValueError):
    """A job option, argument or setting has a value Conveyor cannot accept."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"invalid {field}={_safe_repr(value)}: {problem}")


def _safe_repr(value: Any) -> str:
    """``repr(value)``, or a plain one when that fails (a broken ``__repr__``, nesting too deep for
    repr): the error being reported must not be replaced by another."""
    try:
        return repr(value)
    except Exception:
        return object.__repr__(value)


class StepExistsError(ValidationError):
    """A workflow step of that name is stored already: names are unique within a workflow (a unique
    index keeps them so, so of two enqueues adding the same name at once, one is refused whole)."""


class UnknownOptionError(ValidationError):
    """An option name that Conveyor does not know was passed."""

    def __init__(self, option: str, value: Any, known: tuple[str, ...]) -> None:
        super().__init__(option, value, f"unknown option; expected one of {', '.join(known)}")


class WorkerNotFoundError(ConveyorError, LookupError):
    """A job's worker name does not resolve to an importable job definition."""

    def __init__(self, worker: str, reason: str) -> None:
        self.worker = worker
        self.reason = reason
        super().__init__(f"cannot resolve worker {worker!r}: {reason}")


class NodeNotFoundError(ConveyorError, LookupError):
    """A signal was addressed to a node that no live producer row names: nothing was sent."""

    def __init__(self, node: str, live: list[str]) -> None:
        self.node = node
        self.live = live
        known = ", ".join(live) if live else "none"
        super().__init__(f"no live node named {node!r} runs a queue (live nodes: {known}); nothing was sent")


class JobNotFoundError(ConveyorError, LookupError):
    """No job has the requested id."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job with id {job_id}")


class SchemaError(ConveyorError):
    """The database schema is missing, outdated or cannot be changed as asked."""


class UnsupportedConnectionError(ConveyorError, TypeError):
    """A caller-supplied connection or session is of a kind the engine cannot use."""

    def __init__(self, connection: Any, expected: str) -> None:
        self.connection = connection
        kind = type(connection)
        hint = ""
        if kind.__module__.startswith("django."):  # django.db.connection, or a DatabaseWrapper
            hint = (
                "; this is Django's connection: leave conn out (with conveyor.contrib.django, "
                "enqueue_sync already inserts through Django's connection, in its transaction)"
            )
        super().__init__(
            f"cannot enqueue through a {kind.__module__}.{kind.__qualname__}; expected {expected}{hint}"
        )


class CallerTransactionLockedError(ConveyorError, sqlite3.OperationalError):
    """SQLite: a write through a caller's connection (``conn=``) could not take the database's write
    lock inside the caller's open transaction, which began deferred (``BEGIN``, or sqlite3's implicit
    one) and has read. SQLite then refuses at once instead of waiting: another connection wrote
    since that read, or holds the lock. The fix is the caller's: ``BEGIN IMMEDIATE`` (the write lock
    is taken before anything is read). A ``sqlite3.OperationalError`` too, for code that catches it;
    ``__cause__`` is SQLite's own error."""


class EngineClosedError(ConveyorError, RuntimeError):
    """The engine was used before it was opened or after it was closed."""


class DatabaseUnreachableError(ConveyorError, ConnectionError):
    """The database could not be reached or refused the connection; the message gives its reason."""


class JobEndedError(ConveyorError):
    """A job someone waited for (``Conveyor.wait``, ``relay``) ended without completing; ``job`` is
    the job as stored then (state, errors, meta)."""

    def __init__(self, job: Any, what: str, *, workflow: Any = None) -> None:
        self.job = job
        last = job.errors[-1].get("error") if job.errors and isinstance(job.errors[-1], dict) else None
        detail = f": {str(last).splitlines()[-1][:300]}" if last else ""
        where = ""
        if workflow is not None:
            where = f"workflow {workflow.id!r} {workflow.state.value} at step {workflow.failed_step!r}: "
        super().__init__(f"{where}job {job.id} ({job.worker}) {what}{detail}")


class JobCancelledError(JobEndedError):
    """The awaited job was cancelled."""

    def __init__(self, job: Any) -> None:
        super().__init__(job, "was cancelled")


class JobDiscardedError(JobEndedError):
    """The awaited job was discarded (its attempts ran out, or it discarded itself)."""

    def __init__(self, job: Any) -> None:
        super().__init__(job, "was discarded")


class JobFailedError(JobEndedError):
    """An attempt of the awaited job failed and it will be retried; raised unless the wait goes on
    through retries (``through_retries=True``)."""

    def __init__(self, job: Any) -> None:
        super().__init__(job, f"failed attempt {job.attempt} of {job.max_attempts} (it will be retried)")


class WorkflowCancelledError(JobCancelledError):
    """The awaited workflow (``Conveyor.wait_workflow``) ended cancelled; ``job`` is the step that
    did (``step`` its name), ``status`` the workflow's ``WorkflowStatus`` then."""

    def __init__(self, status: Any) -> None:
        self.status = status
        self.step: str = status.failed_step
        JobEndedError.__init__(self, status.steps[self.step], "was cancelled", workflow=status)


class WorkflowFailedError(JobDiscardedError):
    """The awaited workflow (``Conveyor.wait_workflow``) failed: a step was discarded. ``job`` is
    that step (``step`` its name), ``status`` the workflow's ``WorkflowStatus`` then."""

    def __init__(self, status: Any) -> None:
        self.status = status
        self.step: str = status.failed_step
        JobEndedError.__init__(self, status.steps[self.step], "was discarded", workflow=status)


class WorkflowNotFoundError(ConveyorError, LookupError):
    """No step of the requested workflow is stored (nor a record of its outcome)."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f"no workflow with id {workflow_id!r}")


class WaitTimeoutError(ConveyorError, TimeoutError):
    """Waiting for a job took longer than the timeout given. The job itself goes on: a wait never
    changes the job it waits for."""

    def __init__(self, job_id: int, timeout: float, state: Any) -> None:
        self.job_id = job_id
        self.timeout = timeout
        #: The job's state when the wait gave up, as last seen (None: not read yet).
        self.state = state
        seen = getattr(state, "value", state) or "not seen yet"
        super().__init__(f"job {job_id} did not finish within {timeout:g}s (it was {seen})")


class WorkflowTimeoutError(WaitTimeoutError):
    """Waiting for a workflow (``wait_workflow``) took longer than the timeout given; the workflow
    goes on. ``status`` is its ``WorkflowStatus`` as last read, ``state`` its ``WorkflowState``,
    ``job_id`` the step waited for last."""

    def __init__(self, status: Any, job_id: int, timeout: float) -> None:
        self.workflow_id: str = status.id
        self.status = status
        self.job_id = job_id
        self.timeout = timeout
        self.state = status.state
        waiting = ", ".join((*status.phase, *status.waiting)[:5])
        ConveyorError.__init__(
            self,
            f"workflow {status.id!r} did not finish within {timeout:g}s (it was {status.state.value}"
            f"{', at ' + waiting if waiting else ''})",
        )


class SignalTimeoutError(ConveyorError, TimeoutError):
    """Inside a job: no signal arrived within the time ``receive`` or ``wait_for_signal`` was given."""


def one_line(text: str) -> str:
    """``text`` on one line: the lines of a multi-line message joined, blanks collapsed."""
    return "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
