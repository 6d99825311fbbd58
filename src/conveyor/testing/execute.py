"""Running one job in the test's own process with a real job context: ``process_job`` (the job's
return value, or its exception) and inline mode's ``enqueue``."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import itertools
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from conveyor._runtime.invoke import BaseExceptionRaised, call_async, call_blocking
from conveyor.context import JobContext
from conveyor.current_app import current_app, using_app
from conveyor.definition import definition_of
from conveyor.encryption import Keyring, is_encrypted
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
    owner, definition, context = _prepare(target, app)
    try:
        with _as_current(owner):
            if definition.is_async:
                return await call_async(definition, context)
            run = contextvars.copy_context().run
            return await asyncio.to_thread(run, call_blocking, definition, context, _scope(owner))
    except Outcome as outcome:
        return outcome
    except BaseExceptionRaised as exc:
        raise exc.original from None


def process_job_sync(target: JobRequest | Job | Any, *, app: Conveyor | None = None) -> Any:
    """``process_job`` from plain (non-async) code. A blocking job runs right here, in the caller's
    thread: it sees what the caller's thread sees (the rows of a Django ``TestCase``'s transaction,
    on the thread's Django connection)."""
    owner, definition, context = _prepare(target, app)
    if definition.is_async:
        return asyncio.run(process_job(context.job, app=owner))
    try:
        with _as_current(owner):
            # No blocking_job_scope: the thread is the caller's, and so are its resources (Django's
            # scope would close the connection of the TestCase's transaction).
            return call_blocking(definition, context)
    except Outcome as outcome:
        return outcome
    except BaseExceptionRaised as exc:
        raise exc.original from None


def _prepare(target: JobRequest | Job | Any, app: Conveyor | None) -> tuple[Conveyor | None, Any, JobContext]:
    job = job_of(target)
    owner = app
    if owner is None:
        try:
            owner = current_app()
        except LookupError:
            owner = None
    definition = owner.resolver.resolve(job.worker) if owner is not None else _resolve(job.worker)
    if is_encrypted(job.meta):  # a stored encrypted job: its code gets the args decrypted, as on a node
        keys = owner.settings.encryption_keys if owner is not None else ()
        job = dataclasses.replace(job, args=Keyring.from_setting(keys).decrypt(job.args, job.meta))
    return owner, definition, JobContext(job, executor="async" if definition.is_async else "thread")


def _as_current(owner: Conveyor | None) -> AbstractContextManager[Any]:
    return nullcontext() if owner is None else using_app(owner)


def _scope(owner: Conveyor | None) -> Any:
    """The app's ``blocking_job_scope``: around a blocking job, as a node runs it."""
    return getattr(owner, "blocking_job_scope", None)


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


def run_inline_sync(app: Conveyor, requests: list[JobRequest]) -> JobIds:
    """Inline mode's blocking enqueue: each job runs in the caller's thread (``process_job_sync``),
    at once or when the app's ``defer_inline`` calls it (on commit, in Django)."""
    ids = JobIdsBuilder()
    jobs = [job_of(request) for request in requests]
    for job in jobs:
        ids.append(job.id)

    def run() -> None:
        for job in jobs:
            if app.resolver.resolve(job.worker).is_async:  # on the app's portal: the caller may be on a loop
                app.run_sync(process_job, job, app=app)
            else:
                process_job_sync(job, app=app)

    if app.defer_inline is None:
        run()
    else:
        app.defer_inline(run)
    return ids.build()
