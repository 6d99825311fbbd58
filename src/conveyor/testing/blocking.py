"""The blocking twins of the testing helpers, for plain (non-async) tests such as Django's.

Each runs its coroutine on the app's portal, as the app's own ``_sync`` methods do. Connections
the call had to open are closed before it returns, so that nothing a helper opened outlives the
test (Django's test runner drops the test database at the end, which open connections prevent).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor.current_app import current_app
from conveyor.job import Job
from conveyor.testing.assertions import all_enqueued, assert_enqueued, refute_enqueued
from conveyor.testing.drain import drain_queue

if TYPE_CHECKING:
    from conveyor.app import Conveyor

T = TypeVar("T")


def all_enqueued_sync(*, app: Conveyor | None = None, delta: float = 1.0, **filters: Any) -> list[Job]:
    """``all_enqueued`` from plain code."""
    return _blocking(all_enqueued, app, delta=delta, **filters)


def assert_enqueued_sync(
    *, app: Conveyor | None = None, timeout: float = 0, delta: float = 1.0, **filters: Any
) -> Job:
    """``assert_enqueued`` from plain code."""
    return _blocking(assert_enqueued, app, timeout=timeout, delta=delta, **filters)


def refute_enqueued_sync(
    *, app: Conveyor | None = None, timeout: float = 0, delta: float = 1.0, **filters: Any
) -> None:
    """``refute_enqueued`` from plain code."""
    _blocking(refute_enqueued, app, timeout=timeout, delta=delta, **filters)


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
