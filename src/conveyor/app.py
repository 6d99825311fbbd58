"""``Conveyor``: the application object that enqueues, manages and (later) runs jobs.

Naming convention: every operation is a coroutine with a plain name (``enqueue``, ``get_job``)
and has a blocking twin with the same name plus ``_sync`` (``enqueue_sync``, ``get_job_sync``).
The blocking twins run on a private event loop thread, so they work anywhere.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import Token
from datetime import datetime
from types import EllipsisType
from typing import Any, Literal, TypeVar, overload

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor._app.control import list_queues, scale_changes, send_queue_signal
from conveyor._app.enqueuer import EnqueueHook, Enqueuer
from conveyor._app.workflow_actions import cancel_workflow, extend_workflow, retry_workflow, workflow_status
from conveyor._options import check_aware, check_delay, check_job_id, check_queue, check_texts
from conveyor._resolver import Resolver
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.duties import prune_all
from conveyor._runtime.node import Node
from conveyor.batch import Batch
from conveyor.context import current_job
from conveyor.cron import CronEntry, definitions_in, entries_for
from conveyor.current_app import bind_app, set_default_app, unbind_app, using_app
from conveyor.engine.base import Engine
from conveyor.engines import default_database_url
from conveyor.errors import JobNotFoundError, ValidationError
from conveyor.filters import JobFilter
from conveyor.fleet import LeaderInfo, QueueInfo
from conveyor.inbox import MAX_MESSAGES, encode_message
from conveyor.job import FINAL_STATES, Job, JobId, JobState
from conveyor.job_ids import JobIds
from conveyor.limits import GlobalLimit, RateLimit
from conveyor.recorded import decode_result
from conveyor.request import JobRequest
from conveyor.retention import Pruned, Retention
from conveyor.settings import load_settings
from conveyor.stats import EXACT_UP_TO, JobCount, JobStats, QueueCounts, StatsQuery, countable, exact_limit
from conveyor.telemetry import Handler, Telemetry
from conveyor.testing.modes import check_mode, effective_mode
from conveyor.workflow import Workflow, WorkflowStatus

H = TypeVar("H", bound=Handler)


class Conveyor:
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
        #: The node's clock (``conveyor.testing``-style fake time in tests); the real one by default.
        self.clock: Clock = clock or SYSTEM_CLOCK
        #: The testing mode: "disabled", "manual" or "inline" (see ``conveyor.testing.modes``).
        self.testing = check_mode(testing)
        self.settings = load_settings(
            {"database_url": database_url, **settings},
            config_file=config_file,
            configured_queues=configured_queues,
        )
        if engine is None and self.settings.database_url is None:
            # Nothing configured: the default SQLite file, conveyor.db in the working directory.
            self.settings = dataclasses.replace(self.settings, database_url=default_database_url())
        self._binding = EngineBinding(self.settings, engine, on_leave=self._abandon_node)
        #: Every operation reaches the database through this: the engine of the calling loop.
        self._run = self._binding.run
        self.resolver = Resolver(jobs)
        self.telemetry = Telemetry()
        self._enqueuer = Enqueuer(self, self._binding)
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
        """Open the database and, when queues are configured, start this process's node."""
        engine = await self.engine()
        if self.settings.queues and self.node is None and effective_mode(self.testing) == "disabled":
            node = Node(
                self.settings,
                engine,
                self.resolver,
                self.telemetry,
                crontab=self.crontab(),
                clock=self.clock,
                app=self,
            )
            # Process workers take ~70 ms to import what they need: let them start while the schema
            # is checked (a round trip of several ms).
            await node.start_pool()
            try:
                await engine.check_schema()
            except BaseException:
                await node.stop_pool()
                raise
            self.node = node
            await node.start()

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

    async def last_cron_ticks(self, names: Iterable[str]) -> dict[str, datetime]:
        """The latest tick a leader inserted for each named cron entry (entries never run: absent)."""
        wanted = check_texts("names", names)
        return await self._run(lambda e: e.last_cron_ticks(wanted))

    last_cron_ticks_sync = blocking_twin(last_cron_ticks)

    async def engine(self) -> Engine:
        """The engine for the running event loop, opened on first use."""
        return await self._binding.engine()

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

    # -- fleet control -----------------------------------------------------------------------
    async def pause_queue(self, queue: str, *, node: str | None = None, persist: bool = False) -> None:
        """Pause ``queue`` ("*" for all) on every node, or on ``node``: running jobs finish and are
        acked, nothing new is fetched. ``persist`` keeps the pause across restarts. A ``node`` is
        reached whichever runtime runs it (Conveyor or oban-py); one that no live producer row
        names raises ``NodeNotFoundError`` (nothing is sent). The other queue methods alike."""
        await self._signal("pause", queue, node=node, persist=persist)

    async def resume_queue(self, queue: str, *, node: str | None = None, persist: bool = False) -> None:
        await self._signal("resume", queue, node=node, persist=persist)

    async def scale_queue(
        self,
        queue: str,
        limit: int | None = None,
        *,
        global_limit: int | GlobalLimit | Mapping[str, Any] | EllipsisType | None = ...,
        rate_limit: RateLimit | Mapping[str, Any] | EllipsisType | None = ...,
        node: str | None = None,
        persist: bool = False,
    ) -> None:
        """Change the local limit (concurrency) of ``queue`` on every node, or on ``node``, and/or its
        fleet-wide limits: ``global_limit`` (an int, or None to lift it) and ``rate_limit``
        (``{"allowed": n, "period": s}``, or None to lift it), each with an optional ``partition``;
        left out, they stay as they are. ``persist`` keeps the changes across restarts: a node
        starting the queue applies them over its configuration."""
        changes = scale_changes(limit, global_limit, rate_limit)
        await self._signal("scale", queue, node=node, limit=limit, persist=persist, limits=changes)

    async def start_queue(self, queue: str, limit: int, *, node: str | None = None) -> None:
        """Start running ``queue`` with ``limit`` on every node, or on ``node``."""
        await self._signal("start", queue, node=node, limit=limit)

    async def stop_queue(self, queue: str, *, node: str | None = None) -> None:
        """Stop ``queue`` on every node, or on ``node``; running jobs finish first."""
        await self._signal("stop", queue, node=node)

    async def queues(self) -> list[QueueInfo]:
        """Every queue on every live node: limit, running count, paused flag."""
        return await self._run(lambda e: list_queues(e, self.settings))

    async def leader(self) -> LeaderInfo | None:
        """The node that leads this instance (``settings.name``) now, or None when none does."""
        return await self._run(lambda e: e.get_leader(self.settings.name))

    async def cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        """The latest tick the fleet ran of each named cron entry (aware UTC); an entry that never
        ticked is absent."""
        wanted = check_texts("names", names)
        return await self._run(lambda e: e.last_cron_ticks(wanted))

    pause_queue_sync = blocking_twin(pause_queue)
    resume_queue_sync = blocking_twin(resume_queue)
    scale_queue_sync = blocking_twin(scale_queue)
    start_queue_sync = blocking_twin(start_queue)
    stop_queue_sync = blocking_twin(stop_queue)
    queues_sync = blocking_twin(queues)
    leader_sync = blocking_twin(leader)
    cron_ticks_sync = blocking_twin(cron_ticks)

    async def _signal(self, action: str, queue: str, **options: Any) -> None:
        node = self._local_node()
        await self._run(lambda e: send_queue_signal(e, self.settings, node, action, queue, **options))

    async def nudge(self, queue: str | None = None) -> None:
        """Make producers fetch now: this node's directly, every node's through a notification."""
        if queue is not None:
            check_queue(queue)
        node = self._local_node()
        if node is not None:
            node.nudge(queue)
        await self._run(lambda e: e.notify("insert", {"queue": queue or "*"}))

    nudge_sync = blocking_twin(nudge)

    def _local_node(self) -> Node | None:
        """This process's node, when the caller runs on its loop; from the portal (a ``_sync``
        twin) the node is reached like any other, through the database: it lives on another loop."""
        return None if self._binding.portal.is_current() else self.node

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        """Create or upgrade the database schema; return the version installed."""
        return await self._run(lambda e: e.install())

    install_sync = blocking_twin(install)

    # -- enqueueing --------------------------------------------------------------------------
    async def enqueue(self, request: JobRequest, *, conn: Any = None, now: datetime | None = None) -> JobId:
        """Insert one job and return its id (a ``JobId``: an int whose ``conflict`` says whether it
        is an existing job the request matched). With ``conn``, inside the caller's transaction."""
        ids = await self.enqueue_many((request,), conn=conn, now=now)
        return ids[0]

    def enqueue_sync(self, request: JobRequest, *, conn: Any = None, now: datetime | None = None) -> JobId:
        return self.enqueue_many_sync((request,), conn=conn, now=now)[0]

    async def enqueue_many(
        self,
        requests: Iterable[JobRequest] | Workflow | Batch,
        *,
        conn: Any = None,
        now: datetime | None = None,
    ) -> JobIds:
        """Insert many jobs atomically, streamed in chunks; return their ids in order, as a
        ``JobIds`` (an immutable sequence of ``JobId`` values, 8 bytes an id). A ``Workflow``
        inserts its steps, in the order they were added (see ``conveyor.workflow``)."""
        return await self._enqueuer.enqueue_many(requests, conn, now, self._enqueuer.transform())

    def enqueue_many_sync(
        self,
        requests: Iterable[JobRequest] | Workflow | Batch,
        *,
        conn: Any = None,
        now: datetime | None = None,
    ) -> JobIds:
        return self._enqueuer.enqueue_many_sync(requests, conn, now)

    def before_enqueue(self, hook: EnqueueHook) -> Callable[[], None]:
        """Let ``hook`` change the requests of every enqueue (single, bulk, workflow, unique, inline):
        called once per call, in the caller's context, before the insert, it returns a function
        applied to each request (``JobRequest.with_meta`` is the cheap way to add a meta key), or
        None to leave them as they are. Hooks apply in the order they were added. Returns a function
        that removes the hook."""
        return self._enqueuer.add_hook(hook)

    # -- workflows ---------------------------------------------------------------------------
    async def extend_workflow(self, workflow_id: str) -> Workflow:
        """A ``Workflow`` that adds steps to a stored one (a running step grafting more work): add
        steps, which may depend on the stored ones, then ``enqueue_many`` it."""
        return await self._run(lambda e: extend_workflow(e, workflow_id))

    async def workflow_status(self, workflow_id: str) -> WorkflowStatus:
        """Each step's job by name, and counts by state."""
        return await self._run(lambda e: workflow_status(e, workflow_id))

    async def dependency_results(self) -> dict[str, Any]:
        """Inside a workflow step: the recorded results of the steps it depends on, by name."""
        workflow_id, deps = _step_of_current_job()
        results = (await self.workflow_status(workflow_id)).results
        return {name: results[name] for name in deps if name in results}

    def dependency_results_sync(self) -> dict[str, Any]:
        """``dependency_results`` for a blocking (thread) step."""
        workflow_id, deps = _step_of_current_job()  # read here: the job's context is this thread's
        results = self._binding.call_blocking(self.workflow_status, workflow_id).results
        return {name: results[name] for name in deps if name in results}

    async def cancel_workflow(self, workflow_id: str) -> list[int]:
        """Cancel every unfinished step of the workflow; return the ids cancelled. Steps waiting to
        run only on some ending of their dependencies (``run_if``: a batch's ``on_cancelled`` and
        ``on_exhausted``) are left to settle, so they run as when those steps are cancelled."""
        return await self._run(lambda e: cancel_workflow(e, workflow_id))

    async def retry_workflow(self, workflow_id: str) -> list[int]:
        """Run the cancelled and discarded steps again, each once its dependencies have completed."""
        return await self._run(lambda e: retry_workflow(e, workflow_id))

    extend_workflow_sync = blocking_twin(extend_workflow)
    workflow_status_sync = blocking_twin(workflow_status)
    cancel_workflow_sync = blocking_twin(cancel_workflow)
    retry_workflow_sync = blocking_twin(retry_workflow)

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
        if timeout is not None:
            timeout = check_delay("timeout", timeout)
        if not isinstance(through_retries, bool):
            raise ValidationError("through_retries", through_retries, "must be True or False")
        return await self._run(lambda e: self._binding.waiters_of(e).wait(job_id, timeout, through_retries))

    async def relay(
        self, request: JobRequest, *, timeout: float | None = None, through_retries: bool = False
    ) -> Any:
        """Enqueue ``request``, wait for it (see ``wait``) and return the value it recorded (None
        when it recorded nothing: give the job ``record=True`` or return ``Record(value)``)."""
        if timeout is not None:
            timeout = check_delay("timeout", timeout)
        if not isinstance(through_retries, bool):
            raise ValidationError("through_retries", through_retries, "must be True or False")

        async def relay(engine: Engine) -> Job:
            return await self._binding.waiters_of(engine).relay(
                lambda: self.enqueue(request), timeout, through_retries
            )

        return (await self._run(relay)).result

    async def signal(self, job_id: int, message: Mapping[str, Any]) -> JobState:
        """Send ``message`` (a JSON object of at most 8,000 bytes) to a job, from anywhere: it is
        stored with the job (``Job.signals``) and a running job is told at once; a job that let go
        of its slot in ``wait_for_signal`` runs again. Return the job's state afterwards. A final
        job, or one holding 1,000 messages already, refuses it (``ValidationError``)."""
        job_id = check_job_id(job_id, "job_id")
        encoded = encode_message(message)
        found = await self._run(lambda e: e.signal_job(job_id, encoded, limit=MAX_MESSAGES))
        if found is None:
            raise JobNotFoundError(job_id)
        state, position = found
        if position is None:
            problem = (
                f"job {job_id} is {state.value}: a finished job receives no signals"
                if state in FINAL_STATES
                else f"job {job_id} already holds {MAX_MESSAGES} signals"
            )
            raise ValidationError("job_id" if state in FINAL_STATES else "message", job_id, problem)
        return state

    wait_sync = blocking_twin(wait)
    relay_sync = blocking_twin(relay)
    signal_sync = blocking_twin(signal)

    # -- managing jobs -----------------------------------------------------------------------
    async def get_job(self, job_id: int) -> Job | None:
        """The job with this id, or None."""
        job_id = check_job_id(job_id, "job_id")
        return await self._run(lambda e: e.get_job(job_id))

    get_job_sync = blocking_twin(get_job)

    async def list_jobs(self, /, criteria: JobFilter | None = None, **filters: Any) -> list[Job]:
        """Jobs matching a filter (state, queue, worker, tags, ids), newest first, paged."""
        found = _criteria(criteria, filters)
        return await self._run(lambda e: e.list_jobs(found))

    list_jobs_sync = blocking_twin(list_jobs)

    async def cancel_jobs(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[int]:
        """Cancel matching jobs that are not final; return the ids cancelled. With ``conn`` (an async
        connection or session of yours), inside your transaction: your commit makes it happen."""
        found = _criteria(criteria, filters)
        return await self._run(lambda e: e.cancel_jobs(found, conn=conn), conn)

    cancel_jobs_sync = blocking_twin(cancel_jobs)

    async def retry_jobs(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[int]:
        """Make matching jobs available again now; return their ids. A workflow step goes on only
        once its dependencies finish (see ``Engine.retry_jobs``). ``conn``: as ``cancel_jobs``."""
        found = _criteria(criteria, filters)
        return await self._run(lambda e: e.retry_jobs(found, conn=conn), conn)

    retry_jobs_sync = blocking_twin(retry_jobs)

    async def delete_jobs(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[int]:
        """Delete matching jobs that are not executing; return their ids. ``conn``: as
        ``cancel_jobs``."""
        found = _criteria(criteria, filters)
        return await self._run(lambda e: e.delete_jobs(found, conn=conn), conn)

    delete_jobs_sync = blocking_twin(delete_jobs)

    @overload
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: Literal[False] = False,
        exact_up_to: None = None,
        **filters: Any,
    ) -> int: ...
    @overload
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: Literal[True],
        exact_up_to: int | None = None,
        **filters: Any,
    ) -> JobCount: ...
    @overload
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: bool,
        exact_up_to: int | None = None,
        **filters: Any,
    ) -> int | JobCount: ...
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: bool = False,
        exact_up_to: int | None = None,
        **filters: Any,
    ) -> int | JobCount:
        """How many jobs match a filter (the criteria of ``list_jobs``, without ``limit``): exactly, as
        an int. With ``estimate=True``, a ``JobCount``: exact up to ``exact_up_to`` matches (default
        ``stats.EXACT_UP_TO``), an estimate marked as such above (or when an exact count would be
        slow), so the call stays fast on a table of millions of jobs."""
        if not isinstance(estimate, bool):
            raise ValidationError("estimate", estimate, "must be True or False")
        if exact_up_to is not None and not estimate:
            raise ValidationError("exact_up_to", exact_up_to, "applies only with estimate=True")
        limit = exact_limit(EXACT_UP_TO if exact_up_to is None else exact_up_to)
        found = _criteria(criteria, filters)
        countable(found)
        if estimate:
            return await self._run(lambda e: e.estimate_jobs(found, exact_up_to=limit))
        return await self._run(lambda e: e.count_jobs(found))

    count_jobs_sync = blocking_twin(count_jobs)

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        """Per queue holding jobs, by name: the jobs in each state (some estimated on a large
        PostgreSQL table, see ``QueueCounts.estimated``) and the oldest available job's age."""
        if now is not None:
            check_aware("now", now)
        return await self._run(lambda e: e.queue_counts(now=now))

    queue_counts_sync = blocking_twin(queue_counts)

    async def job_stats(
        self,
        *,
        window: float = 3600.0,
        bucket: float = 60.0,
        queues: str | Iterable[str] | None = None,
        now: datetime | None = None,
    ) -> JobStats:
        """What finished and what failed over the last ``window`` seconds, in buckets of ``bucket``
        seconds, for every queue or only ``queues``: see ``JobStats`` for each figure."""
        query = StatsQuery(window=window, bucket=bucket, queues=queues)  # type: ignore[arg-type]
        if now is not None:
            check_aware("now", now)
        return await self._run(lambda e: e.job_stats(query, now=now))

    job_stats_sync = blocking_twin(job_stats)

    async def get_result(self, job_id: int) -> Any:
        """The value a completed job recorded; LookupError if it recorded none or does not exist."""
        return _result_of(job_id, await self.get_job(job_id))

    get_result_sync = blocking_twin(get_result)

    async def cancel_job(self, job_id: int) -> bool:
        """Cancel one job by id; False when it does not exist or is already final."""
        return bool(await self.cancel_jobs(ids=[job_id]))

    cancel_job_sync = blocking_twin(cancel_job)

    async def retry_job(self, job_id: int) -> bool:
        return bool(await self.retry_jobs(ids=[job_id]))

    retry_job_sync = blocking_twin(retry_job)

    async def delete_job(self, job_id: int) -> bool:
        return bool(await self.delete_jobs(ids=[job_id]))

    delete_job_sync = blocking_twin(delete_job)

    # -- retention ---------------------------------------------------------------------------
    async def prune(
        self,
        retention: Retention | None = None,
        *,
        now: datetime | None = None,
        on_batch: Callable[[Pruned], None] | None = None,
    ) -> Pruned:
        """Delete the final jobs ``retention`` (default: the settings' rules, ``prune_max_age``,
        ``prune_keep_per_queue`` and ``prune_max_rows``) lets go, now, in batches of
        ``prune_limit``; return how many went, by state. ``on_batch`` sees the running total after
        each batch (from the portal's thread in ``prune_sync``)."""
        policy = self.settings.retention if retention is None else _retention(retention)
        limit = self.settings.prune_limit
        moment = self.clock.database_now() if now is None else now
        return await self._run(lambda e: prune_all(e, policy, limit=limit, now=moment, on_batch=on_batch))

    async def count_prunable(
        self, retention: Retention | None = None, *, now: datetime | None = None
    ) -> Pruned:
        """How many final jobs ``prune`` would delete, by state, deleting nothing."""
        policy = self.settings.retention if retention is None else _retention(retention)
        moment = self.clock.database_now() if now is None else now
        return await self._run(lambda e: e.count_prunable(policy, now=moment))

    prune_sync = blocking_twin(prune)
    count_prunable_sync = blocking_twin(count_prunable)


def _step_of_current_job() -> tuple[str, list[str]]:
    context = current_job()
    workflow_id, deps = context.meta.get("workflow_id"), context.meta.get("deps")
    if not isinstance(workflow_id, str) or not isinstance(deps, list):
        raise ValidationError("current_job", context.id, "is not a workflow step with dependencies")
    return workflow_id, [str(dep) for dep in deps]


def _retention(value: Any) -> Retention:
    if not isinstance(value, Retention):
        raise ValidationError("retention", value, "must be a conveyor.Retention (or None for the settings')")
    return value


def _criteria(criteria: JobFilter | None, filters: dict[str, Any]) -> JobFilter:
    if criteria is not None and filters:
        raise ValidationError("filters", filters, "pass either a JobFilter or keyword filters, not both")
    return criteria if criteria is not None else JobFilter.build(**filters)


def _result_of(job_id: int, found: Job | None) -> Any:
    if found is None:
        raise JobNotFoundError(job_id)
    return decode_result(found.meta)
