"""``Conveyor``: the application object that enqueues, manages and (later) runs jobs.

Naming convention: every operation is a coroutine with a plain name (``enqueue``, ``get_job``)
and has a blocking twin with the same name plus ``_sync`` (``enqueue_sync``, ``get_job_sync``).
The blocking twins run on a private event loop thread, so they work anywhere.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from contextvars import Token
from datetime import datetime
from typing import Any, TypeVar, overload

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor._app.cron_api import CronApi
from conveyor._app.enqueuer import EnqueueHook, Enqueuer
from conveyor._app.fleet_api import FleetApi
from conveyor._app.jobs_api import JobsApi
from conveyor._app.node_launch import launch_node
from conveyor._app.queues_api import DeclaredQueuesApi
from conveyor._app.relay import check_wait, signal_job
from conveyor._app.workflow_api import WorkflowApi
from conveyor._options import check_job_id
from conveyor._resolver import Resolver
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.node import Node
from conveyor.batch import Batch
from conveyor.cron import CronEntry, definitions_in, entries_for
from conveyor.current_app import bind_app, set_default_app, unbind_app, using_app
from conveyor.engine.base import Engine
from conveyor.engine.urls import default_database_url
from conveyor.job import Job, JobId, JobState
from conveyor.job_ids import JobIds, WorkflowIds
from conveyor.request import JobRequest
from conveyor.settings import load_settings
from conveyor.telemetry import Handler, Telemetry
from conveyor.testing.modes import check_mode, effective_mode
from conveyor.workflow import Workflow

H = TypeVar("H", bound=Handler)
T = TypeVar("T")


class Conveyor(FleetApi, JobsApi, CronApi, DeclaredQueuesApi, WorkflowApi):
    """Enqueue, manage and run jobs stored in a database.

    ``Conveyor("postgresql://localhost/app", queues={"default": 10})``. Settings come from the
    arguments, then ``CONVEYOR_*`` environment variables, then a config file (see
    ``conveyor.settings``). ``async with app:`` opens the database and, when the app has queues,
    runs a node until the block ends. Known jobs may be passed in ``jobs`` so their worker names
    resolve without importing (jobs defined in ``__main__``, or names another Oban node uses).

    The role is explicit: ``Conveyor(...)`` runs a node only for ``queues`` given as an argument.
    Queues in the config file or ``CONVEYOR_QUEUES`` belong to worker processes: ``conveyor start``
    and ``Conveyor.from_config(...)`` use them, a plain ``Conveyor()`` (say, in a web app) ignores
    them and only enqueues and manages jobs.
    """

    @classmethod
    def from_config(
        cls,
        database_url: str | None = None,
        *,
        engine: Engine | None = None,
        jobs: Iterable[Any] = (),
        config_file: str | None = None,
        **settings: Any,
    ) -> Conveyor:
        """An app with the node the configuration describes: like ``Conveyor(...)``, but the queues
        of the config file and of ``CONVEYOR_QUEUES`` apply too (an argument still wins). This is
        what ``conveyor start`` builds; use it for a worker process started from your own code."""
        return cls(
            database_url,
            engine=engine,
            jobs=jobs,
            config_file=config_file,
            configured_queues=True,
            **settings,
        )

    def __init__(
        self,
        database_url: str | None = None,
        *,
        engine: Engine | None = None,
        jobs: Iterable[Any] = (),
        config_file: str | None = None,
        configured_queues: bool = False,
        clock: Clock | None = None,
        testing: str = "disabled",
        sync_conn: Callable[[], Any] | None = None,
        blocking_job_scope: Callable[[], AbstractContextManager[Any]] | None = None,
        **settings: Any,
    ) -> None:
        #: The connection ``enqueue_sync``/``enqueue_many_sync`` use when given no ``conn``: called
        #: in the caller's thread each time (conveyor.contrib.django passes Django's, so jobs join
        #: ``transaction.atomic()``). None: the app's own connection, committed at once.
        self.sync_conn = sync_conn
        #: Entered in the job's thread around each blocking (thread) job: per-thread resources the
        #: job code uses (conveyor.contrib.django closes Django's stale connections with it).
        self.blocking_job_scope = blocking_job_scope
        #: Inline mode's blocking enqueues hand it each job's run, to call now or later (None: now).
        #: conveyor.contrib.django defers it to the commit of the caller's ``transaction.atomic()``.
        self.defer_inline: Callable[[Callable[[], None]], None] | None = None
        #: The node's clock (``conveyor.testing``-style fake time in tests); the real one by default.
        self.clock: Clock = clock or SYSTEM_CLOCK
        #: The testing mode: "disabled", "manual" or "inline" (see ``conveyor.testing.modes``).
        self.testing = check_mode(testing)
        #: Every setting, validated (``Settings``): arguments, then environment, then config file.
        self.settings = load_settings(
            {"database_url": database_url, **settings},
            config_file=config_file,
            configured_queues=configured_queues,
        )
        if engine is None and self.settings.database_url is None:
            # Nothing configured: the default SQLite file, conveyor.db in the working directory.
            self.settings = dataclasses.replace(self.settings, database_url=default_database_url())
        self._binding = EngineBinding(self.settings, engine, on_leave=self._abandon_node)
        #: Finds the job definition of a worker name (the ``jobs`` given, else by import).
        self.resolver = Resolver(jobs)
        #: The app's events and their handlers (``app.on(...)``; docs/guides/telemetry.md).
        self.telemetry = Telemetry()
        self._enqueuer = Enqueuer(self, self._binding)
        #: The node running this app's queues once started; None without queues, in the "manual" and
        #: "inline" testing modes, and once stopped.
        self.node: Node | None = None
        self._entered: list[Token[Conveyor | None]] = []

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Conveyor:
        await self.start()
        # Inside the block this is the current app (send.enqueue(...) and the testing helpers).
        self._entered.append(bind_app(self))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._entered:
            unbind_app(self._entered.pop())
        await self.stop()

    # -- telemetry ---------------------------------------------------------------------------
    @overload
    def on(self, prefix: str, handler: Handler) -> Callable[[], None]: ...
    @overload
    def on(self, prefix: str) -> Callable[[H], H]: ...
    def on(self, prefix: str, handler: Handler | None = None) -> Any:
        """Call ``handler(event, data)`` for every telemetry event whose name starts with ``prefix``
        (``"job."``, ``"job.exception"``; ``""`` for all; see ``conveyor.telemetry`` for the events).

        ``app.on("job.", handler)`` returns a function that detaches it; without a handler it is a
        decorator that attaches the function and returns it unchanged::

            @app.on("job.exception")
            def report(event: str, data: dict[str, Any]) -> None: ...
        """
        if handler is not None:
            return self.telemetry.attach(handler, prefix)

        def attach(function: H) -> H:
            self.telemetry.attach(function, prefix)
            return function

        return attach

    def as_current(self) -> AbstractContextManager[Conveyor]:
        """``with app.as_current():`` makes this the app ``send.enqueue(...)`` uses in the block
        (see ``conveyor.current_app``)."""
        return using_app(self)

    def make_default(self) -> Conveyor:
        """Make this the process's default app: ``send.enqueue(...)`` uses it wherever no other app
        is current. Explicit, once, at startup (a web app's module, a worker's entry point)."""
        set_default_app(self)
        return self

    async def start(self) -> None:
        """Open the database and, when queues are configured, start this process's node (its
        process pool's workers start first, while the database opens)."""
        if self.node is not None:
            # A node left running on an event loop that has since stopped is let go here, by the
            # binding, so that a new one is built on this loop.
            await self.engine()
        if self.settings.queues and self.node is None and effective_mode(self.testing) == "disabled":
            await launch_node(self)
        else:
            await self.engine()

    def crontab(self) -> list[CronEntry]:
        """The cron entries this app's node runs: the configured ``crontab``, then the ``@job(cron=...)``
        jobs it knows (``jobs=``) or finds in the modules of ``imports``."""
        modules = [importlib.import_module(module) for module in self.settings.imports]
        return [
            *self.settings.crontab,
            *entries_for([*self.resolver.definitions(), *definitions_in(modules)]),
        ]

    async def stop(self, grace: float | None = None) -> None:
        """Stop the node gracefully (running jobs get ``grace`` seconds), then close connections."""
        if self.node is not None:
            await self.node.stop(grace)
            self.node = None
        await self.close()

    async def engine(self) -> Engine:
        """The engine for the running event loop, opened on first use."""
        return await self._binding.engine()

    def use_database(self, database_url: str) -> None:
        """Point the app at another database, before it has opened any connection of its own
        (conveyor.contrib.django follows Django's test database so); a ``ConveyorError`` after."""
        settings = dataclasses.replace(self.settings, database_url=database_url)
        self._binding.retarget(settings)
        self.settings = settings

    def run_sync(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """Run the coroutine function ``fn`` from blocking code, as the ``_sync`` twins do (on the
        app's portal), and return its result; ``conveyor.testing``'s ``_sync`` helpers use it."""
        return self._binding.call_blocking(fn, *args, **kwargs)

    @property
    def connected(self) -> bool:
        """Has the app opened connections of its own (closed again by ``close``/``close_sync``)?"""
        return self._binding.is_open()

    @property
    def before_connect(self) -> Callable[[], None] | None:
        """Called before each use of the app's own connections; may raise to refuse, or call
        ``use_database`` (conveyor.contrib.django follows Django's test database with it)."""
        return self._binding.before_connect

    @before_connect.setter
    def before_connect(self, hook: Callable[[], None] | None) -> None:
        self._binding.before_connect = hook

    def _abandon_node(self) -> None:
        """The app's loop has stopped (see ``EngineBinding.leave_stopped_loop``): so has its node."""
        if self.node is not None:
            self.node.abandon()
            self.node = None

    async def close(self) -> None:
        """Close the connections opened by the async API and by the ``_sync`` twins. Optional
        between event loops (the app lets go of a stopped loop by itself); call it (or
        ``close_sync()`` from plain code) when the program is done with the app."""
        await self._binding.close()

    def close_sync(self) -> None:
        """Close the connections of the ``_sync`` twins, and let go of those the async API opened
        on an event loop that has stopped since (one still running is left to ``close()``)."""
        self._binding.close_sync()

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        """Create or upgrade the database schema; return the version installed."""
        return await self._binding.run(lambda e: e.install())

    install_sync = blocking_twin(install)

    # -- enqueueing --------------------------------------------------------------------------
    async def enqueue(self, request: JobRequest, *, conn: Any = None, now: datetime | None = None) -> JobId:
        """Insert one job and return its id (a ``JobId``: an int whose ``conflict`` says whether it
        is an existing job the request matched). With ``conn``, inside the caller's transaction."""
        ids = await self.enqueue_many((request,), conn=conn, now=now)
        return ids[0]

    def enqueue_sync(self, request: JobRequest, *, conn: Any = None, now: datetime | None = None) -> JobId:
        """Blocking twin of ``enqueue``. Without ``conn``, the app's ``sync_conn`` (if set) gives the
        connection whose transaction the insert joins."""
        return self.enqueue_many_sync((request,), conn=conn, now=now)[0]

    @overload
    async def enqueue_many(
        self, requests: Workflow | Batch, *, conn: Any = None, now: datetime | None = None
    ) -> WorkflowIds: ...

    @overload
    async def enqueue_many(
        self, requests: Iterable[JobRequest], *, conn: Any = None, now: datetime | None = None
    ) -> JobIds: ...

    async def enqueue_many(
        self,
        requests: Iterable[JobRequest] | Workflow | Batch,
        *,
        conn: Any = None,
        now: datetime | None = None,
    ) -> JobIds:
        """Insert many jobs atomically, streamed in chunks; return their ids in order, as a
        ``JobIds`` (an immutable sequence of ``JobId`` values, 8 bytes an id). A ``Workflow`` (or
        ``Batch``) inserts its steps, in the order they were added (see ``conveyor.workflow``), and
        returns a ``WorkflowIds``: that ``JobIds`` plus ``by_name``, each step's id by name."""
        return await self._enqueuer.enqueue_many(requests, conn, now, self._enqueuer.transform())

    @overload
    def enqueue_many_sync(
        self, requests: Workflow | Batch, *, conn: Any = None, now: datetime | None = None
    ) -> WorkflowIds: ...

    @overload
    def enqueue_many_sync(
        self, requests: Iterable[JobRequest], *, conn: Any = None, now: datetime | None = None
    ) -> JobIds: ...

    def enqueue_many_sync(
        self,
        requests: Iterable[JobRequest] | Workflow | Batch,
        *,
        conn: Any = None,
        now: datetime | None = None,
    ) -> JobIds:
        """Blocking twin of ``enqueue_many``. Without ``conn``, the app's ``sync_conn`` (if set) gives the
        connection whose transaction the insert joins."""
        return self._enqueuer.enqueue_many_sync(requests, conn, now)

    def before_enqueue(self, hook: EnqueueHook) -> Callable[[], None]:
        """Let ``hook`` change the requests of every enqueue (single, bulk, workflow, unique, inline):
        called once per call, in the caller's context, before the insert, it returns a function
        applied to each request (``JobRequest.with_meta`` is the cheap way to add a meta key), or
        None to leave them as they are. Hooks apply in the order they were added. Returns a function
        that removes the hook."""
        return self._enqueuer.add_hook(hook)

    # -- relay: waiting for jobs, signals to jobs ------------------------------------------------
    async def wait(self, job_id: int, *, timeout: float | None = None, through_retries: bool = False) -> Job:
        """Wait until the job completes and return it as stored then (``Job.result`` holds what it
        recorded, ``Job.progress`` what it reported), whichever node runs it.

        Raises ``JobCancelledError``/``JobDiscardedError`` when it ends so, ``JobFailedError`` when an
        attempt fails (unless ``through_retries``: then the wait goes on until the job is final),
        ``JobNotFoundError`` for an id no job has (or a job deleted meanwhile), and
        ``WaitTimeoutError`` after ``timeout`` seconds (None: no limit); the job itself goes on
        either way. Woken by the "ended" notification, polled every ``poll_interval`` as well."""
        job_id = check_job_id(job_id, "job_id")
        timeout = check_wait(timeout, through_retries)
        return await self._binding.run(
            lambda e: self._binding.waiters_of(e).wait(job_id, timeout, through_retries)
        )

    async def relay(
        self, request: JobRequest, *, timeout: float | None = None, through_retries: bool = False
    ) -> Any:
        """Enqueue ``request``, wait for it (see ``wait``) and return the value it recorded (None
        when it recorded nothing: give the job ``record=True`` or return ``Record(value)``)."""
        timeout = check_wait(timeout, through_retries)

        async def relay(engine: Engine) -> Job:
            return await self._binding.waiters_of(engine).relay(
                lambda: self.enqueue(request), timeout, through_retries
            )

        return (await self._binding.run(relay)).result

    async def signal(self, job_id: int, message: Mapping[str, Any]) -> JobState:
        """Send ``message`` (a JSON object of at most 8,000 bytes) to a job, from anywhere: it is
        stored with the job (``Job.signals``) and a running job is told at once; a job that let go
        of its slot in ``wait_for_signal`` runs again. Return the job's state afterwards. A final
        job, or one holding 1,000 messages already, refuses it (``ValidationError``)."""
        job_id = check_job_id(job_id, "job_id")
        return await self._binding.run(lambda e: signal_job(e, job_id, message))

    wait_sync = blocking_twin(wait)
    relay_sync = blocking_twin(relay)
    signal_sync = blocking_twin(signal)
