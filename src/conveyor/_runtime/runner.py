"""Running one job to one ``Ack``: resolve its code, pick the executor, apply the timeout, and turn
the result (return, exception, outcome) into the state the job ends in."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
from collections.abc import Awaitable
from concurrent.futures import Executor
from dataclasses import replace
from typing import Any

from conveyor._oban_py import translate_result
from conveyor._resolver import Resolver
from conveyor._runtime.chunker import Chunker
from conveyor._runtime.clock import SYSTEM_CLOCK, Clock
from conveyor._runtime.invoke import call_async, call_blocking
from conveyor._runtime.job_report import JobReport
from conveyor._runtime.process_pool import ProcessPool, RemoteError
from conveyor._runtime.tracebacks import format_job_error
from conveyor._runtime.unfit import UNFIT_SINCE, ArgsDoNotFit, unfit_ack
from conveyor.acks import Ack, completed_ack, error_entry
from conveyor.backoff import default_backoff
from conveyor.context import JobContext
from conveyor.current_app import bind_app, bound_app, unbind_app
from conveyor.definition import ExecutorKind, JobDefinition
from conveyor.encryption import EncryptionError, Keyring, is_encrypted
from conveyor.errors import ConveyorError, WorkerNotFoundError
from conveyor.inbox import AWAITING, AwaitSignal
from conveyor.job import Job, JobState
from conveyor.outcomes import Cancel, Discard, Outcome, Record, Snooze
from conveyor.recorded import encode_result
from conveyor.telemetry import Telemetry

log = logging.getLogger("conveyor.job")

#: The kinds, and each one's ``value``, as plain names: on Python 3.11 reading an enum's member
#: from its class (``ExecutorKind.AUTO``) goes through a descriptor written in Python, about 0.1 us.
_AUTO, _ASYNC = ExecutorKind.AUTO, ExecutorKind.ASYNC
_THREAD, _PROCESS = ExecutorKind.THREAD, ExecutorKind.PROCESS
_KIND_VALUES = {kind: kind.value for kind in ExecutorKind}

#: The longest pause a custom backoff may ask for (longer ones are cut to it): 365 days.
MAX_BACKOFF_SECONDS = 365 * 86400.0


class JobTimeout(ConveyorError, TimeoutError):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"job exceeded its timeout of {seconds:g}s")


class UnreadableRow(ConveyorError):
    """The fetched row of a job could not be decoded (``Job.unreadable`` says why)."""


class JobRunner:
    """Executes jobs on the loop, in a thread pool or in a process pool."""

    def __init__(
        self,
        resolver: Resolver,
        telemetry: Telemetry,
        *,
        threads: Executor,
        processes: ProcessPool | None,
        clock: Clock = SYSTEM_CLOCK,
        app: Any = None,
        reraise: bool = False,
        unfit_patience: float = 0.0,
        encryption_keys: tuple[str, ...] = (),
    ) -> None:
        self.resolver = resolver
        #: The keys that read encrypted args (``Settings.encryption_keys``), made a keyring on first use.
        self.encryption_keys = encryption_keys
        self._keyring: Keyring | None = None
        #: Seconds a job that does not fit this node's code (worker not importable, args not fitting)
        #: is offered to the fleet again before it is discarded (``Settings.unfit_job_patience``).
        self.unfit_patience = unfit_patience
        #: The app whose node runs the jobs: their current app (``send.enqueue`` in a job uses it).
        self.app = app
        #: Let a job's exception out of ``run`` instead of turning it into a failed ack (testing's
        #: ``drain_queue(with_safety=False)``).
        self.reraise = reraise
        self.telemetry = telemetry
        #: The job.* events and the log line of each run.
        self.report = JobReport(telemetry)
        self.threads = threads
        self.processes = processes
        self.clock = clock
        #: Where the jobs of chunk workers wait for their shared call.
        self.chunker = Chunker(clock, threads, self.blocking_scope)

    def executor_for(self, definition: JobDefinition, queue_default: ExecutorKind) -> ExecutorKind:
        """The worker's own choice wins, then the queue's, then async-or-thread by the code's kind."""
        kind = definition.executor
        if kind is _AUTO:
            kind = queue_default
        if definition.chunk is not None and kind is _PROCESS:
            kind = _AUTO  # a chunk is gathered on the loop: a process queue runs it here
        if kind is _AUTO or (kind is _ASYNC and not definition.is_async):
            kind = _ASYNC if definition.is_async else _THREAD
        return kind

    async def run(self, context: JobContext, queue_default: ExecutorKind = ExecutorKind.AUTO) -> Ack:
        app = self.app
        # A node started inside ``async with app:`` runs its jobs in tasks that inherit the binding:
        # no contextvar set and reset per job then.
        token = bind_app(app) if app is not None and bound_app() is not app else None
        try:
            job = context.job
            report = self.report
            report.started(job)
            started = self.clock.monotonic()
            try:
                ack, error, reraise = await self._attempt(context, queue_default)
            except BaseException as exc:  # shutdown cancelled the run (the job is given back), or a bug
                report.ended(job, None, exc, self.clock.monotonic() - started)
                raise
            report.ended(job, ack, error, self.clock.monotonic() - started)
            if reraise and error is not None:
                raise error
            return ack
        finally:
            if token is not None:
                unbind_app(token)

    async def _attempt(
        self, context: JobContext, queue_default: ExecutorKind
    ) -> tuple[Ack, BaseException | None, bool]:
        """Run the job once: its ack, the exception that ended the run (None when the code returned
        or gave an outcome), and whether to let that exception out (``reraise``)."""
        job = context.job
        error: BaseException | None = None
        try:
            if job.unreadable is not None:
                raise UnreadableRow(job.unreadable)
            try:
                definition = self.resolver.resolve(job.worker)
            except WorkerNotFoundError as exc:  # another node's code may know it (a rolling deploy)
                # drain_queue(with_safety=False) lets it out, as it lets a job's own error out.
                return self._settled(job, self._unfit(job, str(exc))), exc, self.reraise
            if job.meta and is_encrypted(job.meta):
                try:
                    context.job = replace(job, args=self._decrypt(job))
                except EncryptionError as exc:  # another node may hold the key (a key being rolled out)
                    reason = f"encrypted args unreadable here: {exc}"
                    return self._settled(job, self._unfit(job, reason)), exc, self.reraise
            kind = self.executor_for(definition, queue_default)
            context.executor = _KIND_VALUES[kind]
            if definition.chunk is None and definition.timeout is None:
                value = await (
                    call_async(definition, context)
                    if kind is _ASYNC
                    else self._start(definition, kind, context)
                )
            else:
                value = await self._execute(definition, kind, context)
            ack = self._completed(job, definition, value)
        except asyncio.CancelledError as exc:
            if not context.cancel_requested and _cancelled_from_outside():
                raise  # shutdown: the node gives the job back instead
            # Cancelled on request, or the job's code raised CancelledError of its own accord (an
            # error like any other).
            ack = self._cancelled(job, context) if context.cancel_requested else self._failed(job, exc)
            error = exc
        except ArgsDoNotFit as exc:  # the args were made for other code (a rolling deploy)
            ack = self._unfit(job, exc.reason)
            error = exc
        except Outcome as outcome:
            ack = self._outcome(job, outcome)
        except UnreadableRow as exc:  # reading it again will not help: no more attempts
            ack = self._ended(job, JobState.DISCARDED, f"its row could not be read ({exc})")
            error = exc
        except BaseException as exc:
            # Job code may raise anything, SystemExit and KeyboardInterrupt included: it ends this
            # job, never the node (conveyor start stops on signals through the loop, not these).
            # A timeout only flags the context so the code can stop; it stays a failure.
            ack = self._cancelled(job, context) if context.cancel_requested else self._failed(job, exc)
            return self._settled(job, ack), exc, self.reraise and not context.cancel_requested
        else:
            if context.cancel_requested:  # a thread job told to stop has returned
                ack = self._cancelled(job, context)
        return self._settled(job, ack), error, False

    @staticmethod
    def _settled(job: Job, ack: Ack) -> Ack:
        if not job.meta:
            return ack
        if isinstance(job.meta.get(AWAITING), dict) and not (ack.meta and AWAITING in ack.meta):
            ack = with_meta(ack, {AWAITING: None})  # it waits for a signal no more
        if job.meta.get(UNFIT_SINCE) is not None and not (ack.meta and UNFIT_SINCE in ack.meta):
            ack = with_meta(ack, {UNFIT_SINCE: None})  # it fit here: a later misfit waits afresh
        return ack

    def _decrypt(self, job: Job) -> dict[str, Any]:
        """The plaintext args of an encrypted job, for its code only: the job the report and the
        telemetry events carry keeps its encrypted args."""
        if self._keyring is None:
            self._keyring = Keyring.from_setting(self.encryption_keys)
        return self._keyring.decrypt(job.args, job.meta)

    def _unfit(self, job: Job, reason: str) -> Ack:
        """A job this node's code cannot run: offered to the fleet again until its patience is
        spent, then discarded (see ``_runtime/unfit.py``)."""
        entry = functools.partial(self._error, job)
        return unfit_ack(job, reason, now=self.clock.now(), patience=self.unfit_patience, entry=entry)

    async def _execute(self, definition: JobDefinition, kind: ExecutorKind, context: JobContext) -> Any:
        """Run the job on its executor, within its timeout on the node's clock (every executor
        alike, so fake time in tests moves all of them)."""
        if definition.chunk is not None:  # its timeout bounds the shared call, not the gathering
            return await self.chunker.run(definition, kind, context)
        timeout = definition.timeout
        if timeout is None:
            return await self._start(definition, kind, context)
        deadline = self.clock.timeout(timeout)
        try:
            async with deadline:
                return await self._start(definition, kind, context)
        except TimeoutError:
            # Only our deadline is a timeout; a TimeoutError raised by the job's code is its error.
            if context.cancel_requested or not deadline.expired():
                raise
            # A thread cannot be stopped from outside: tell the job, free the slot. (A process
            # that outlives its deadline is killed and replaced by the pool.)
            context.expire()
            raise JobTimeout(timeout) from None

    def _start(self, definition: JobDefinition, kind: ExecutorKind, context: JobContext) -> Awaitable[Any]:
        if kind is _PROCESS:
            if self.processes is None:
                raise ConveyorError("this node has no process pool (set processes > 0)")
            return self.processes.run(definition.name, context.job, on_progress=_progress_of(context))
        if kind is _THREAD:
            loop = asyncio.get_running_loop()
            ctx = contextvars.copy_context()
            return loop.run_in_executor(
                self.threads, ctx.run, call_blocking, definition, context, self.blocking_scope()
            )
        return call_async(definition, context)

    def blocking_scope(self) -> Any:
        """What each thread job runs inside: the app's ``blocking_job_scope`` (per-thread upkeep)."""
        return getattr(self.app, "blocking_job_scope", None)

    # -- turning results into acks --------------------------------------------------------------
    def _completed(self, job: Job, definition: JobDefinition, value: Any) -> Ack:
        if value is None and not definition.record:  # most jobs: nothing to look into
            return completed_ack(job.id, job.attempt)
        value = translate_result(value)  # oban-py's Snooze, Cancel, Record
        if isinstance(value, Outcome):
            return self._outcome(job, value)
        if isinstance(value, Record):
            return Ack(job.id, job.attempt, JobState.COMPLETED, meta=encode_result(value.value))
        if definition.record:
            return Ack(job.id, job.attempt, JobState.COMPLETED, meta=encode_result(value))
        return completed_ack(job.id, job.attempt)

    def _outcome(self, job: Job, outcome: Outcome) -> Ack:
        if isinstance(outcome, AwaitSignal):
            # Let go of the slot until a signal wakes the job (see conveyor.inbox) or time is up.
            seconds = (outcome.until - self.clock.now()).total_seconds()
            return Ack(
                job.id,
                job.attempt,
                JobState.SCHEDULED,
                schedule_in=min(max(0.0, seconds), MAX_BACKOFF_SECONDS),
                snoozed=True,
                meta={AWAITING: outcome.marker()},
            )
        if isinstance(outcome, Snooze):
            return Ack(
                job.id,
                job.attempt,
                JobState.SCHEDULED,
                schedule_in=outcome.seconds,
                snoozed=True,
                meta=outcome.meta,
            )
        if isinstance(outcome, Cancel):
            return self._ended(job, JobState.CANCELLED, outcome.reason)
        if isinstance(outcome, Discard):
            return self._ended(job, JobState.DISCARDED, outcome.reason)
        return self._failed(job, outcome)

    def _cancelled(self, job: Job, context: JobContext) -> Ack:
        return self._ended(job, JobState.CANCELLED, context.cancel_reason or "cancelled")

    def _ended(self, job: Job, state: JobState, reason: str) -> Ack:
        return Ack(job.id, job.attempt, state, error=self._error(job, f"{state.value}: {reason}"))

    def _failed(self, job: Job, exc: BaseException) -> Ack:
        if isinstance(exc, RemoteError):
            text = exc.formatted
        elif isinstance(exc, JobTimeout):
            text = f"{type(exc).__name__}: {exc}"
        else:
            text = format_job_error(exc)
        error = self._error(job, text)
        if job.attempt >= job.max_attempts:
            return Ack(job.id, job.attempt, JobState.DISCARDED, error=error)
        return Ack(job.id, job.attempt, JobState.RETRYABLE, schedule_in=self._backoff(job), error=error)

    def _backoff(self, job: Job) -> float:
        try:
            if job.unreadable is not None:
                raise UnreadableRow(job.unreadable)
            definition = self.resolver.resolve(job.worker)
        except ConveyorError:
            definition = None
        if definition is not None and definition.backoff is not None:
            try:
                seconds = float(definition.backoff(job))
            except Exception:
                log.exception("backoff of %s failed; using the default", job.worker)
            else:
                if math.isfinite(seconds):
                    return min(max(0.0, seconds), MAX_BACKOFF_SECONDS)
                log.error("backoff of %s returned %r; using the default", job.worker, seconds)
        return default_backoff(job.attempt, job.max_attempts)

    def failure(self, job: Job, exc: BaseException) -> Ack:
        """The ack of a job whose run failed inside Conveyor itself: retried like a job error."""
        return self._failed(job, exc)

    def _error(self, job: Job, text: str) -> dict[str, Any]:
        return error_entry(job.attempt, self.clock.now(), text)


def with_meta(ack: Ack, meta: dict[str, Any]) -> Ack:
    """``ack`` that also merges ``meta`` into the job's meta."""
    return replace(ack, meta={**ack.meta, **meta} if ack.meta else meta)


def _progress_of(context: JobContext) -> Any:
    """What a worker process's progress reports go to: the job's context in this process."""

    def merge(fields: dict[str, Any]) -> None:
        context.progress.merge(fields, lambda _: None)  # checked in the worker process already
        if context.link is not None:
            context.link.progress_changed(context)

    return merge


def _cancelled_from_outside() -> bool:
    """Was the running task itself cancelled (task.cancel), rather than handed a CancelledError
    that job code raised?"""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
