"""Running one job in the test's own process with a real job context: ``process_job`` (the job's
return value, or its exception) and inline mode's ``enqueue``."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from conveyor._runtime.invoke import BaseExceptionRaised, call_async, call_blocking
from conveyor.context import JobContext
from conveyor.current_app import current_app, using_app
from conveyor.definition import definition_of
from conveyor.errors import ValidationError
from conveyor.job import Job, JobState
from conveyor.job_ids import JobIds, JobIdsBuilder
from conveyor.outcomes import Outcome
from conveyor.request import JobRequest

if TYPE_CHECKING:
    from conveyor.app import Conveyor

# Ids of jobs run inline (never stored): counted per process, so two runs never share one.
_inline_ids = itertools.count(1)

#: The node name inline and processed jobs report in ``attempted_by``.
TEST_NODE = "conveyor-testing"


def job_of(target: JobRequest | Job | Any, job_id: int | None = None) -> Job:
    """The job a node would hand its code for ``target``: a stored ``Job`` as it is, a request as
    if just fetched (args and meta through JSON, attempt 1), a job function with no arguments."""
    if isinstance(target, Job):
        return target
    definition = definition_of(target) if not isinstance(target, JobRequest) else None
    if definition is not None:  # a job function or worker class: a run without arguments
        target = definition.new()
    if not isinstance(target, JobRequest):
        raise ValidationError(
            "job", target, "must be a JobRequest (my_job.new(...)), a Job or a job function"
        )
    now = datetime.now(UTC)
    return Job(
        id=next(_inline_ids) if job_id is None else job_id,
        state=JobState.EXECUTING,
        queue=target.queue,
        worker=target.worker,
        args=orjson.loads(target.args_json),
        meta=orjson.loads(target.meta_json),
        tags=target.tags,
        errors=(),
        attempt=1,
        max_attempts=target.max_attempts,
        priority=target.priority,
        attempted_by=(TEST_NODE,),
        inserted_at=now,
        scheduled_at=target.scheduled_at.astimezone(UTC) if target.scheduled_at else now,
        attempted_at=now,
    )


async def process_job(target: JobRequest | Job | Any, *, app: Conveyor | None = None) -> Any:
    """Run one job now, in this process, with a real job context (``current_job()``, ``progress``
    and ``receive`` work; progress is kept in the context only), and return what its code returned:
    a value, or an outcome it returned or raised (``Snooze``, ``Cancel``, ``Record`` ...). Its
    exception propagates. Thread and process jobs run in a thread. ``app`` (else the current app,
    if any) is the current app inside the job and resolves its worker name."""
    job = job_of(target)
    owner = app
    if owner is None:
        try:
            owner = current_app()
        except LookupError:
            owner = None
    definition = owner.resolver.resolve(job.worker) if owner is not None else _resolve(job.worker)
    context = JobContext(job, executor="async" if definition.is_async else "thread")
    try:
        if owner is not None:
            with using_app(owner):
                return await _run(definition, context, getattr(owner, "blocking_job_scope", None))
        return await _run(definition, context, None)
    except Outcome as outcome:
        return outcome
    except BaseExceptionRaised as exc:
        raise exc.original from None


def process_job_sync(target: JobRequest | Job | Any, *, app: Conveyor | None = None) -> Any:
    """``process_job`` from plain (non-async) code."""
    return asyncio.run(process_job(target, app=app))


async def _run(definition: Any, context: JobContext, scope: Any) -> Any:
    """The job on the loop, or in a thread inside the app's ``blocking_job_scope`` as a node runs it."""
    if definition.is_async:
        return await call_async(definition, context)
    run = contextvars.copy_context().run
    return await asyncio.to_thread(run, call_blocking, definition, context, scope)


def _resolve(worker: str) -> Any:
    from conveyor._resolver import import_definition

    return import_definition(worker)


async def run_inline(app: Conveyor, requests: list[JobRequest]) -> JobIds:
    """Inline mode's enqueue: each job runs at once, in order; the first exception stops the rest
    and propagates. Nothing is stored."""
    ids = JobIdsBuilder()
    for request in requests:
        job = job_of(request)
        await process_job(job, app=app)
        ids.append(job.id)
    return ids.build()
