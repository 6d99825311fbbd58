"""What ``Conveyor`` does with stored workflows (the builder is ``conveyor/workflow.py``): enqueue
one, extend a running one, read its status, cancel it, retry its failed steps. Each is a few engine
calls."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from conveyor.context import current_job
from conveyor.engine.base import Engine
from conveyor.errors import StepExistsError, ValidationError
from conveyor.filters import JobFilter
from conveyor.job import ExistingJobId, Job, JobState
from conveyor.job_ids import WorkflowIds
from conveyor.request import JobRequest
from conveyor.workflow import RUN_IF, Workflow, WorkflowStatus, step_name

FAILED = (JobState.CANCELLED, JobState.DISCARDED)


def check_workflow_id(workflow_id: Any) -> str:
    if not isinstance(workflow_id, str) or not workflow_id or not workflow_id.isprintable():
        raise ValidationError("workflow_id", workflow_id, "must be a workflow's id (a non-empty string)")
    return workflow_id


async def enqueue_workflow(
    engine: Engine,
    workflow: Workflow,
    *,
    conn: Any = None,
    now: datetime | None = None,
    transform: Callable[[JobRequest], JobRequest] | None = None,
) -> WorkflowIds:
    """Insert every step atomically (those with dependencies suspended); steps added to a stored
    workflow whose dependencies already ended settle at once. ``transform``: the app's enqueue hooks."""
    requests, hold = workflow.requests()
    if transform is not None:
        requests = [transform(request) for request in requests]
    if workflow.lock is not None:
        return await _enqueue_locked(engine, workflow, requests, hold, conn, now)
    if workflow.existing:
        await _refuse_stored_names(engine, workflow)
    try:
        ids = await engine.insert(requests, conn=conn, now=now, hold=hold)
    except StepExistsError:
        # Another enqueue stored one of these names meanwhile (two running steps grafting alike),
        # or a new workflow was given the id of a stored one: the database refused this whole
        # insert; name the step, as the check above does.
        await _refuse_stored_names(engine, workflow)
        raise
    if workflow.existing and hold:
        # The stored steps they depend on list them from now on, so a settle after one of those
        # finds them; one that ended already is seen by the settle below, which runs after both
        # writes are committed (or in the caller's transaction): either way someone settles them.
        await engine.add_dependents(workflow.id, workflow.new_dependents(), conn=conn)
        await engine.settle_steps([int(ids[i]) for i in hold], now=now, conn=conn)
    return WorkflowIds.of(ids, (step.name for step in workflow.steps), workflow.id)


async def _enqueue_locked(
    engine: Engine,
    workflow: Workflow,
    requests: list[JobRequest],
    hold: list[int],
    conn: Any,
    now: datetime | None,
) -> WorkflowIds:
    """A workflow with a lock: inserted holding it, or the unfinished holder's steps returned."""
    if conn is not None:
        raise ValidationError(
            "conn",
            conn,
            f"a workflow with a lock ({workflow.lock!r}) is enqueued in a transaction of its own",
        )
    assert workflow.lock is not None
    try:
        found = await engine.insert_locked_workflow(
            requests, workflow_id=workflow.id, name=workflow.name, lock=workflow.lock, now=now, hold=hold
        )
    except StepExistsError:
        await _refuse_stored_names(engine, workflow)
        raise
    if not isinstance(found, str):
        return WorkflowIds.of(found, (step.name for step in workflow.steps), workflow.id)
    steps = [(name, job) for job in await engine.workflow_jobs(found) if (name := step_name(job)) is not None]
    ids = [ExistingJobId(job.id) for _, job in steps]
    return WorkflowIds.of(ids, (name for name, _ in steps), found, conflict=True)


async def _refuse_stored_names(engine: Engine, workflow: Workflow) -> None:
    """Raise ``StepExistsError`` naming the first step of ``workflow`` its stored namesake has."""
    stored = {step_name(job) for job in await engine.workflow_jobs(workflow.id)}
    clash = sorted(name for name in (s.name for s in workflow.steps) if name in stored)
    if clash:
        raise StepExistsError("name", clash[0], f"is already a step of workflow {workflow.id!r}")


async def extend_workflow(engine: Engine, workflow_id: str) -> Workflow:
    """A ``Workflow`` adding steps to the stored one: its new steps may depend on stored ones."""
    jobs = await engine.workflow_jobs(check_workflow_id(workflow_id))
    if not jobs:
        raise ValidationError("workflow_id", workflow_id, "no such workflow")
    names = [name for job in jobs if (name := step_name(job)) is not None]
    label = jobs[0].meta.get("workflow_name") if isinstance(jobs[0].meta, dict) else None
    return Workflow.adding_to(workflow_id, names, name=label if isinstance(label, str) else None)


async def workflow_status(engine: Engine, workflow_id: str) -> WorkflowStatus:
    jobs = await engine.workflow_jobs(check_workflow_id(workflow_id))
    # Read after the steps: a prune in between may count a step in both, never in neither.
    record = await engine.workflow_record(workflow_id)
    steps = {name: job for job in jobs if (name := step_name(job)) is not None}
    return WorkflowStatus(workflow_id, steps, record)


async def cancel_workflow(engine: Engine, workflow_id: str, *, now: datetime | None = None) -> list[int]:
    """Cancel every unfinished step (running ones too, wherever they run), except the steps that
    wait to run only on some ending of their dependencies (``run_if``: a batch's ``on_cancelled``
    and ``on_exhausted``): those handle how the work ended, cancelling included, so they are left
    to settle as when their dependencies are cancelled one by one (the settle after this cancel
    does it). Returns the ids cancelled here."""
    jobs = await engine.workflow_jobs(check_workflow_id(workflow_id))
    live = tuple(job.id for job in jobs if not job.state.is_final and not _handler(job))
    if not live:
        return []
    return await engine.cancel_jobs(JobFilter(ids=live, limit=len(live)), now=now)


def _handler(job: Job) -> bool:
    """A step still waiting to run only on some ending of its dependencies (``run_if``)."""
    return job.state is JobState.SUSPENDED and isinstance(job.meta, dict) and job.meta.get("run_if") in RUN_IF


async def retry_workflow(engine: Engine, workflow_id: str, *, now: datetime | None = None) -> list[int]:
    """Run the failed (cancelled or discarded) steps again: those whose dependencies all completed
    at once, the others once their dependencies complete again. Returns the steps retried.

    One ``retry_jobs`` of them all: it holds each step with dependencies in the same statement
    that makes its failed dependencies available again, then settles the held ones, so no sweep in
    between sees a step waiting on a dependency still failed (and cancels it anew)."""
    jobs = await engine.workflow_jobs(check_workflow_id(workflow_id))
    failed = tuple(job.id for job in jobs if job.state in FAILED and step_name(job) is not None)
    if not failed:
        return []
    return await engine.retry_jobs(JobFilter(ids=failed, limit=len(failed)), now=now)


def step_of_current_job() -> tuple[str, list[str]]:
    """The workflow of the job running in this context, and the names of the steps it depends on."""
    context = current_job()
    workflow_id, deps = context.meta.get("workflow_id"), context.meta.get("deps")
    if not isinstance(workflow_id, str) or not isinstance(deps, list):
        raise ValidationError("current_job", context.id, "is not a workflow step with dependencies")
    return workflow_id, [str(dep) for dep in deps]


def dependency_results(status: WorkflowStatus, deps: list[str]) -> dict[str, Any]:
    """The recorded results of the steps named ``deps``, by name (a step that recorded none: absent)."""
    results = status.results
    return {name: results[name] for name in deps if name in results}
