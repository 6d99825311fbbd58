"""Running oban-py workers on a Conveyor node, unchanged: the migration path from oban-py.

oban-py (PyPI ``oban``, Python >= 3.12) is never imported here. Its workers are recognised by the
shape its decorators leave (checked against oban-py 0.7's ``oban/decorators.py``):

- ``@worker`` returns the class itself with ``_opts`` (the decorator's options, a dict),
  ``_oban_name`` (the instance's name, a str), and ``new``/``enqueue`` classmethods; the class
  defines ``process(self, job)``, usually a coroutine, and may define ``backoff(self, job)`` (seconds
  before the next attempt) and ``timeout(self, job)`` (seconds the attempt may run, or None).
- ``@job`` returns such a class built around the function, whose ``new`` is the function's
  signature-binding wrapper (``functools.wraps``: ``new.__wrapped__`` is the function). oban-py's
  ``process`` calls ``func(**job.args)`` on its event loop; here the function itself becomes the
  job, so a blocking one runs in a thread and a coroutine on the loop.

oban-py's worker names are ``f"{module}.{qualname}"``, what Conveyor stores and resolves too. A
worker's ``process`` gets an ``ObanJob``, an object of our own with the attributes (and
``cancelled()``) of oban-py's ``Job``. What it returns is translated by ``translate_result``:
oban-py's ``Snooze(seconds, meta)``, ``Cancel(reason)`` and ``Record(value)`` (recognised by their
module, ``oban.job``, and class name) become Conveyor's outcomes of the same meaning.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from conveyor.context import JobContext, current_job
from conveyor.definition import JobDefinition
from conveyor.job import Job
from conveyor.outcomes import Cancel, Record, Snooze

#: Where oban-py defines its result types.
RESULT_MODULE = "oban.job"
#: Where oban-py keeps the job ``oban.current_job()`` returns (a ContextVar, private to oban-py).
EXECUTOR_MODULE = "oban._executor"


def is_oban_worker(target: Any) -> bool:
    """Whether ``target`` is a class decorated with oban-py's ``@worker`` or ``@job``."""
    return (
        inspect.isclass(target)
        and isinstance(getattr(target, "_opts", None), dict)
        and isinstance(getattr(target, "_oban_name", None), str)
        and callable(getattr(target, "process", None))
        and callable(getattr(target, "new", None))
        and callable(getattr(target, "enqueue", None))
    )


def wrapped_function(worker: type) -> Callable[..., Any] | None:
    """The function an oban-py ``@job`` class was made around, or None for a ``@worker`` class."""
    function = getattr(getattr(worker, "new", None), "__wrapped__", None)
    if (
        callable(function)
        and getattr(function, "__qualname__", None) == worker.__qualname__
        and getattr(function, "__module__", None) == worker.__module__
    ):
        return function  # type: ignore[no-any-return]
    return None


def oban_definition(target: Any) -> JobDefinition | None:
    """A job definition that runs an oban-py worker class or ``@job`` function; None for anything
    else. The row's options (queue, attempts ...) are what oban-py or whoever enqueued stored."""
    if not is_oban_worker(target):
        return None
    name = f"{target.__module__}.{target.__qualname__}"
    function = wrapped_function(target)
    if function is not None:
        return JobDefinition(
            name=name,
            target=_function_job(function),
            is_class=False,
            is_async=inspect.iscoroutinefunction(function),
        )
    backoff = getattr(target, "backoff", None)
    return JobDefinition(
        name=name,
        target=functools.partial(ObanWorkerRun, target),
        is_class=True,
        is_async=True,
        backoff=functools.partial(_backoff, target) if callable(backoff) else None,
    )


class ObanJob:
    """What an oban-py worker gets as ``job``: oban-py's ``Job`` attributes, filled from the
    Conveyor job (timestamps aware UTC, as oban-py gives them), and ``cancelled()``."""

    __slots__ = (
        "_context",
        "args",
        "attempt",
        "attempted_at",
        "attempted_by",
        "cancelled_at",
        "completed_at",
        "discarded_at",
        "errors",
        "extra",
        "id",
        "inserted_at",
        "max_attempts",
        "meta",
        "priority",
        "queue",
        "scheduled_at",
        "state",
        "tags",
        "worker",
    )

    def __init__(self, job: Job, context: JobContext | None = None) -> None:
        self._context = context
        self.id: int = job.id
        self.state: str = job.state.value
        self.queue: str = job.queue
        self.worker: str = job.worker
        self.attempt: int = job.attempt
        self.max_attempts: int = job.max_attempts
        self.priority: int = job.priority
        self.args: dict[str, Any] = dict(job.args)
        self.meta: dict[str, Any] = dict(job.meta)
        self.errors: list[Any] = list(job.errors)
        self.tags: list[str] = list(job.tags)
        self.attempted_by: list[str] = list(job.attempted_by)
        self.inserted_at: datetime | None = job.inserted_at
        self.scheduled_at: datetime | None = job.scheduled_at
        self.attempted_at: datetime | None = job.attempted_at
        self.cancelled_at: datetime | None = job.cancelled_at
        self.completed_at: datetime | None = job.completed_at
        self.discarded_at: datetime | None = job.discarded_at
        self.extra: dict[str, Any] = {}

    def cancelled(self) -> bool:
        """Whether the job was asked to stop (cancelled, or out of time), as oban-py's."""
        return self._context is not None and self._context.is_cancelled()

    def __repr__(self) -> str:
        return f"ObanJob(id={self.id}, worker={self.worker}, queue={self.queue}, state={self.state})"


def _running() -> ObanJob:
    """The running job as an oban-py worker sees it (in a node, a test, a worker process)."""
    context = current_job()
    return ObanJob(context.job, context)


@contextmanager
def _as_oban_current(job: ObanJob) -> Iterator[None]:
    """Make ``oban.current_job()`` return ``job`` while the worker runs, as oban-py's executor
    does. oban-py keeps it in a private ContextVar; set only when oban-py is loaded and still keeps
    it there (otherwise ``current_job()`` stays None, as it does outside oban-py's executor)."""
    variable = getattr(sys.modules.get(EXECUTOR_MODULE), "_current_job", None)
    if not isinstance(variable, ContextVar):
        yield
        return
    token = variable.set(job)
    try:
        yield
    finally:
        variable.reset(token)


class ObanWorkerRun:
    """One run of an oban-py worker class: a fresh instance, ``timeout(job)`` applied, ``process``
    awaited (what it returns is translated by the runner, see ``translate_result``)."""

    __slots__ = ("worker",)

    def __init__(self, worker: type) -> None:
        self.worker = worker

    async def process(self, job: Job) -> Any:
        oban_job = _running()
        instance = self.worker()
        seconds = instance.timeout(oban_job) if callable(getattr(instance, "timeout", None)) else None
        with _as_oban_current(oban_job):
            try:
                async with asyncio.timeout(seconds) as deadline:
                    result = instance.process(oban_job)
                    return await result if inspect.isawaitable(result) else result
            except TimeoutError:
                if deadline.expired():
                    raise ObanTimeoutError(f"{job.worker} timed out after {seconds}s") from None
                raise


class ObanTimeoutError(TimeoutError):
    """An oban-py worker ran longer than its ``timeout(job)`` (oban-py's ``JobTimeoutError``):
    an error, retried with backoff."""


def _function_job(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function of an oban-py ``@job``, called with the job's args as keywords (as oban-py
    calls it) while ``oban.current_job()`` returns the running job."""
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def run_async(**args: Any) -> Any:
            with _as_oban_current(_running()):
                return await function(**args)

        return run_async

    @functools.wraps(function)
    def run(**args: Any) -> Any:
        with _as_oban_current(_running()):
            return function(**args)

    return run


def _backoff(worker: type, job: Job) -> float:
    """The worker's own ``backoff(job)`` (seconds), given the failed job as oban-py gives it."""
    return float(worker().backoff(ObanJob(job)))


def translate_result(value: Any) -> Any:
    """oban-py's ``Snooze``, ``Cancel`` and ``Record`` as Conveyor's outcomes; anything else as
    it is. Recognised by module and class name, so oban-py is never imported."""
    kind = type(value)
    if kind.__module__ != RESULT_MODULE:
        return value
    if kind.__name__ == "Snooze":
        meta = getattr(value, "meta", None)
        return Snooze(value.seconds, meta=meta if isinstance(meta, dict) else None)
    if kind.__name__ == "Cancel":
        return Cancel(str(value.reason))
    if kind.__name__ == "Record":
        return Record(value.value)
    return value
