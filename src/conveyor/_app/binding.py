"""Which engine an app's call runs on: one engine per event loop.

An engine's pools belong to the loop that opened them. The app's own engine opens on the loop that
first uses it and is let go of once that loop has stopped; the ``_sync`` twins run on the app's
portal (a private event loop thread) with a second engine opened there; an operation on a caller's
connection (``conn=``) needs no pool at all, so the engine is only a statement builder then. The
waits of ``Conveyor.wait`` share one ``Waiters`` per engine and loop.

``enqueue_sync`` skips the portal where it can: the portal's engine, once open, makes the app's
blocking inserts (the optional role ``BlockingInserts``), which run in the caller's thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from conveyor._app.portal import Portal
from conveyor._app.waiters import Waiters
from conveyor.engine.base import Abandoning, Engine
from conveyor.engine.roles import BlockingInsert, BlockingInserts
from conveyor.engine.urls import engine_from_url
from conveyor.errors import ConveyorError
from conveyor.settings import Settings

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="Bound")
Operation = Callable[[Engine], Awaitable[T]]


class EngineBinding:
    """The engines of one app: its own, bound to one event loop at a time, and the portal's."""

    def __init__(self, settings: Settings, engine: Engine | None, *, on_leave: Callable[[], None]) -> None:
        if engine is None:
            # Build one engine now (connecting nothing) so a bad URL or prefix fails here, clearly.
            engine_from_settings(settings)
        self._factory: Callable[[], Engine] = (
            (lambda: engine_from_settings(settings)) if engine is None else (lambda: engine)
        )
        self._engine: Engine | None = engine
        #: False for an engine handed in (``engine=``): one object, kept even when its loop stops.
        self.owns_engine = engine is None
        #: The loop the app's own engine is open on.
        self.loop: asyncio.AbstractEventLoop | None = None
        self.portal = Portal()
        self._portal_engine: Engine | None = None
        #: The opening of the portal's engine, while it opens and after (``_portal_open``).
        self._portal_opening: asyncio.Future[Engine] | None = None
        #: The portal engine's blocking inserts (``blocking_inserts``), and the lock that makes them once.
        self._blocking: BlockingInsert | None = None
        self._blocking_lock = threading.Lock()
        self._no_blocking = False
        self._poll_interval, self._notifications = settings.poll_interval, settings.notifications
        #: Everyone waiting for jobs, per engine and event loop (the app's own, the portal's).
        self.waiters: dict[tuple[int, int], Waiters] = {}
        #: Called when the app lets go of a stopped loop, before its engine (the app's node lives there).
        self._on_leave = on_leave
        self._exit_hook = False
        #: Called before the app opens a connection of its own (conveyor.contrib.django points the
        #: app at Django's test database with it, or refuses): may raise to refuse.
        self.before_connect: Callable[[], None] | None = None

    def is_open(self) -> bool:
        """Has the app opened connections of its own (on some loop, or on the portal)?"""
        return self.loop is not None or self._portal_engine is not None

    def retarget(self, settings: Settings) -> None:
        """Use ``settings`` (another database) from now on; only before any connection is open."""
        if self.is_open():
            raise ConveyorError("an app cannot change databases once it has opened connections")
        engine_from_settings(settings)  # a bad URL fails here, as in __init__
        self._factory = lambda: engine_from_settings(settings)
        if self.owns_engine:
            self._engine = None  # a statement builder of the old settings, never opened

    async def engine(self) -> Engine:
        """The app's own engine, for the running event loop, opened on first use; on the portal
        (a ``_sync`` twin, or ``conveyor.testing``'s blocking helpers), the portal's engine."""
        loop = asyncio.get_running_loop()
        if self.before_connect is not None:
            self.before_connect()
        if self.portal.is_current():
            return await self._portal_open()
        if self.loop is not None and self.loop is not loop:
            if self.loop.is_running():
                raise ConveyorError(
                    "this Conveyor app is in use on an event loop that still runs (in another "
                    "thread); use the *_sync methods from other threads, or one app per loop"
                )
            self.leave_stopped_loop()
        if self._engine is None:
            self._engine = self._factory()
        await self._engine.open()
        self.loop = loop
        return self._engine

    def leave_stopped_loop(self) -> None:
        """The loop the app last ran on has stopped (a finished ``asyncio.run``, the previous
        pytest-asyncio test, a server reloaded): whatever lived on it went with it. Let go of it
        so the app opens again on the running loop; a node left running there is gone like a
        crashed one (its jobs are rescued)."""
        old = self.loop
        self.loop = None
        self._on_leave()
        if self._engine is not None:
            self.waiters.pop((id(self._engine), id(old)), None)
            if isinstance(self._engine, Abandoning):  # an optional role: a user's engine may lack it
                self._engine.abandon()
            if self.owns_engine:
                self._engine = None

    async def close(self) -> None:
        """Close the app's own engine (and its waits) on the loop it is open on, then the portal's."""
        if self._engine is not None and self.loop is not None:
            waiters = self.waiters.pop((id(self._engine), id(self.loop)), None)
            if waiters is not None:
                await waiters.stop()
            await self._engine.close()
            self.loop = None
            if self.owns_engine:
                self._engine = None  # a closed pool cannot reopen: build a fresh engine on next use
        self.close_sync()

    def close_sync(self) -> None:
        """Close the portal's engine and stop the portal; let go of a stopped loop's engine (one
        still running is left to ``close()``)."""
        if self.loop is not None and not self.loop.is_running():
            self.leave_stopped_loop()
        with self._blocking_lock:
            blocking, self._blocking = self._blocking, None
        if blocking is not None:
            blocking.close()
        if self._portal_engine is not None:
            waiters = self.waiters.pop((id(self._portal_engine), id(self.portal.loop)), None)
            if waiters is not None:
                self.portal.call(waiters.stop)
            self.portal.call(self._portal_engine.close)
            self._portal_engine = None
        self._portal_opening = None
        self.portal.stop()

    async def run(self, operation: Operation[T], conn: Any = None) -> T:
        """Run ``operation`` on the engine of the calling loop: the app's own, or the portal's. With
        a caller's ``conn`` the engine is only a statement builder: it is not opened."""
        if conn is not None:
            return await operation(self.statement_engine())
        return await operation(await self.engine())

    async def _portal_open(self) -> Engine:
        """The portal's engine, opened once: calls from several threads that arrive while it opens
        wait for that one opening (each used to see it set, and some used it before it was open)."""
        if self._portal_engine is not None:
            return self._portal_engine
        if self._portal_opening is None:
            if not self._exit_hook:
                # A plain script never calls close_sync(): close the portal's connections at
                # exit, while its thread still runs, instead of leaving tasks pending there.
                atexit.register(_close_at_exit, weakref.ref(self))
                self._exit_hook = True
            self._portal_opening = asyncio.ensure_future(self._open_new_portal_engine())
        return await asyncio.shield(self._portal_opening)

    async def _open_new_portal_engine(self) -> Engine:
        engine = self._factory()
        try:
            await engine.open()
        except BaseException:
            self._portal_opening = None  # the next call tries again
            raise
        self._portal_engine = engine
        return engine

    def blocking_inserts(self) -> BlockingInsert | None:
        """Inserts in the caller's thread (``BlockingInserts``), made on first use by the portal's
        engine (opened there: its probe tells a bad URL as the async API does); None when the app
        was handed its engine (bound to the loop that opened it) or the engine has no such role."""
        blocking = self._blocking
        if blocking is not None or not self.owns_engine or self._no_blocking:
            return blocking
        with self._blocking_lock:
            if self._blocking is None:
                engine = self.portal.call(self.run, _itself)
                if not isinstance(engine, BlockingInserts):
                    self._no_blocking = True
                    return None
                self._blocking = engine.blocking_inserts()
            return self._blocking

    def call_blocking(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Run a coroutine of the app from blocking code, and wait for its result.

        Usually on the portal, with an engine of its own. An engine handed in (``engine=``) is one
        object bound to the loop that opened it, so while that loop runs (a node's, with this call
        from one of its job threads) the call goes there: used from the portal's loop as well, its
        pool would mix two loops and hang (a thread job enqueueing on a test's ``engine=`` app)."""
        home = None if self.owns_engine else self.loop
        if home is None or not home.is_running() or _running_loop() is home:
            # (From the home loop itself, waiting on it would deadlock: the portal it is.)
            return self.portal.call(fn, *args, **kwargs)

        async def run() -> T:
            return await fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), home).result()

    def statement_engine(self) -> Engine:
        """The app's engine, for operations on a caller's connection (which need no pool)."""
        if self._engine is None:
            self._engine = self._factory()
        return self._engine

    def waiters_of(self, engine: Engine) -> Waiters:
        """The waits on ``engine`` from the running loop, started on first use."""
        key = (id(engine), id(asyncio.get_running_loop()))
        found = self.waiters.get(key)
        if found is None:
            found = self.waiters[key] = Waiters(
                engine, poll_interval=self._poll_interval, notifications=self._notifications
            )
        return found


def engine_from_settings(settings: Settings) -> Engine:
    return engine_from_url(
        settings.database_url or "",
        prefix=settings.prefix,
        pool_size=settings.pool_size,
        synchronous_commit=settings.synchronous_commit,
        pooler=settings.pooler,
        listen_url=settings.listen_url,
    )


class Bound(Protocol):
    """What ``blocking_twin`` needs of the object whose method it doubles: ``Conveyor`` and its parts."""

    _binding: EngineBinding


def blocking_twin(method: Callable[Concatenate[S, P], Awaitable[T]]) -> Callable[Concatenate[S, P], T]:
    """The ``_sync`` twin of an async method: the same coroutine, run on the app's portal (a private
    event loop thread), where ``EngineBinding.run`` gives it the portal's own engine."""

    def twin(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._binding.call_blocking(method, self, *args, **kwargs)

    twin.__name__ = f"{method.__name__}_sync"
    twin.__qualname__ = f"Conveyor.{twin.__name__}"
    twin.__doc__ = f"Blocking twin of ``{method.__name__}`` (see the module's naming convention)."
    return twin


async def _itself(engine: Engine) -> Engine:
    return engine


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _close_at_exit(ref: weakref.ref[EngineBinding]) -> None:
    binding = ref()
    if binding is not None:
        with contextlib.suppress(Exception):
            binding.close_sync()
