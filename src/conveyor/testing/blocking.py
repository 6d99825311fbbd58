"""The blocking twins of the testing helpers, for plain (non-async) tests such as Django's.

Each runs its coroutine on the app's portal, as the app's own ``_sync`` methods do. Connections
the call had to open are closed before it returns, so that nothing a helper opened outlives the
test (Django's test runner drops the test database at the end, which open connections prevent).
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor.current_app import current_app
from conveyor.filters import MAX_PAGE, JobFilter
from conveyor.job import Job
from conveyor.testing.assertions import all_enqueued, matches, missing, query, unexpected
from conveyor.testing.drain import drain_queue

if TYPE_CHECKING:
    from conveyor.app import Conveyor

T = TypeVar("T")


def all_enqueued_sync(*, app: Conveyor | None = None, delta: float = 1.0, **filters: Any) -> list[Job]:
    """``all_enqueued`` from plain code. An app whose blocking enqueues go through a connection of
    the caller's (``sync_conn``: Django's) reads through it too, so it sees the jobs enqueued in the
    caller's transaction (a Django ``TestCase``'s) before they commit."""
    app = app or current_app()
    if app.sync_conn is None:
        return _blocking(all_enqueued, app, delta=delta, **filters)
    criteria, wanted = query(filters)
    conn = app.sync_conn()
    found: list[Job] = []
    before: int | None = None
    while True:
        page = app.list_jobs_sync(JobFilter(**criteria, limit=MAX_PAGE, before_id=before), conn=conn)
        found.extend(job for job in page if matches(job, wanted, delta))
        if len(page) < MAX_PAGE:
            return found
        before = page[-1].id


def assert_enqueued_sync(
    *, app: Conveyor | None = None, timeout: float = 0, delta: float = 1.0, **filters: Any
) -> Job:
    """``assert_enqueued`` from plain code (reading as ``all_enqueued_sync`` does)."""
    found = _poll(app, timeout, delta, filters)
    if not found:
        raise AssertionError(missing(filters, timeout, all_enqueued_sync(app=app)))
    return found[0]


def refute_enqueued_sync(
    *, app: Conveyor | None = None, timeout: float = 0, delta: float = 1.0, **filters: Any
) -> None:
    """``refute_enqueued`` from plain code (reading as ``all_enqueued_sync`` does)."""
    found = _poll(app, timeout, delta, filters)
    if found:
        raise AssertionError(unexpected(filters, found))


def _poll(app: Conveyor | None, timeout: float, delta: float, filters: dict[str, Any]) -> list[Job]:
    deadline = time.monotonic() + timeout
    while True:
        found = all_enqueued_sync(app=app, delta=delta, **filters)
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))


def drain_queue_sync(
    queue: str = "default",
    *,
    app: Conveyor | None = None,
    with_recursion: bool = True,
    with_safety: bool = False,
    with_scheduled: bool = True,
) -> dict[str, int]:
    """``drain_queue`` from plain code. Thread jobs run here, in the caller's thread, as
    ``process_job_sync`` runs them: they use the caller's own per-thread resources (Django's
    connection, which the test framework manages and closes), and nothing is left open in other
    threads."""
    app = app or current_app()
    here = CallerThread()
    options = {"with_recursion": with_recursion, "with_safety": with_safety, "with_scheduled": with_scheduled}

    def drain() -> dict[str, int]:
        try:
            return _blocking(drain_queue, app, queue, threads=here, **options)
        finally:
            here.stop()

    with ThreadPoolExecutor(1, thread_name_prefix="conveyor-drain-wait") as waiting:
        done = waiting.submit(contextvars.copy_context().run, drain)
        here.serve()
        return done.result()


def _blocking(helper: Callable[..., Awaitable[T]], app: Conveyor | None, *args: Any, **kwargs: Any) -> T:
    app = app or current_app()
    opened = app.connected
    try:
        return app.run_sync(helper, *args, app=app, **kwargs)
    finally:
        if not opened:
            app.close_sync()


class CallerThread(Executor):
    """An executor whose work runs in the thread that calls ``serve`` (the test's own)."""

    def __init__(self) -> None:
        self._work: SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            SimpleQueue()
        )

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self._work.put((future, functools.partial(fn, **kwargs), args))
        return future

    def stop(self) -> None:
        """Let ``serve`` return once the work submitted so far is done."""
        self._work.put(None)

    def serve(self) -> None:
        """Run the work submitted, here, until ``stop``."""
        while (item := self._work.get()) is not None:
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # the drain decides what a job's exception means
                future.set_exception(exc)
