"""The blocking twins of the testing helpers, for plain (non-async) tests such as Django's.

Each runs its coroutine on the app's portal, as the app's own ``_sync`` methods do. Connections
the call had to open are closed before it returns, so that nothing a helper opened outlives the
test (Django's test runner drops the test database at the end, which open connections prevent).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
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
    """``drain_queue`` from plain code."""
    return _blocking(
        drain_queue,
        app,
        queue,
        with_recursion=with_recursion,
        with_safety=with_safety,
        with_scheduled=with_scheduled,
    )


def _blocking(helper: Callable[..., Awaitable[T]], app: Conveyor | None, *args: Any, **kwargs: Any) -> T:
    app = app or current_app()
    opened = app.connected
    try:
        return app.run_sync(helper, *args, app=app, **kwargs)
    finally:
        if not opened:
            app.close_sync()
