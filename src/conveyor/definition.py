"""Defining jobs: ``@job`` on a function and ``@worker`` on a class.

A definition is a frozen value attached to the decorated object. Nothing is registered globally: a
node finds a job's code again by importing the worker name stored in the row (see ``resolver``).
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from conveyor import _options as opt
from conveyor.arguments import Arguments
from conveyor.chunk import Chunk, check_chunk_options
from conveyor.cron_expression import CronExpression, load_zone
from conveyor.encryption import ENCRYPTED_WORKERS
from conveyor.errors import ValidationError
from conveyor.request import ENQUEUE_OPTIONS, JobRequest, check_option_names

if TYPE_CHECKING:
    from conveyor.app import Conveyor
    from conveyor.job import Job, JobId
    from conveyor.unique import Unique

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)

DEFINITION_ATTRIBUTE = "__conveyor_definition__"

#: Seconds to wait before the next attempt, given the job that just failed.
Backoff = Callable[["Job"], float]


class ExecutorKind(enum.StrEnum):
    """Where a job's code runs."""

    #: Coroutines on the event loop, plain functions in a thread.
    AUTO = "auto"
    #: The event loop (coroutine functions only).
    ASYNC = "async"
    #: A thread pool, so blocking code never stalls the loop.
    THREAD = "thread"
    #: A process pool, so CPU-bound code uses every core.
    PROCESS = "process"


#: Options that only the decorators take (they shape how the job runs, not the row).
RUN_OPTIONS = (
    "timeout",
    "backoff",
    "executor",
    "record",
    "name",
    "cron",
    "timezone",
    "encrypted",
    "chunk",
)

DECORATOR_OPTIONS = tuple(o for o in ENQUEUE_OPTIONS if o not in ("scheduled_at", "schedule_in"))


@dataclass(frozen=True, slots=True)
class JobDefinition:
    """Everything Conveyor knows about one kind of job."""

    #: The importable name stored in the ``worker`` column (``package.module.QualName``).
    name: str
    #: The decorated function, or the decorated class.
    target: Any
    is_class: bool
    is_async: bool
    defaults: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    backoff: Backoff | None = None
    executor: ExecutorKind = ExecutorKind.AUTO
    #: Store the return value as the job's recorded result.
    record: bool = False
    #: Insert this job on every tick of this cron expression (with the default args).
    cron: str | None = None
    timezone: str = "UTC"
    #: Store the args encrypted (``conveyor.encryption``, keys from ``Settings.encryption_keys``).
    encrypted: bool = False
    #: Run the code once for a list of jobs (``conveyor.chunk``); None: once per job.
    chunk: Chunk | None = None
    #: A function's signature and typed parameters (``conveyor.arguments``); None for a class.
    arguments: Arguments | None = field(default=None, repr=False, compare=False)
    #: A request with the defaults and no args (set at construction).
    template: JobRequest = field(init=False, repr=False, compare=False)

    def new(self, **args: Any) -> JobRequest:
        """A request for one job of this kind, with the definition's default options (a function's
        args bound to its signature and encoded by annotation)."""
        if self.arguments is not None:
            return self.template.with_args(self.arguments.bind((), args))
        return self.template.with_args(args)

    def call_args(self, stored: Mapping[str, Any]) -> Mapping[str, Any]:
        """The keyword arguments a run of a function job gets from its stored args."""
        return stored if self.arguments is None else self.arguments.decode(stored)

    def __post_init__(self) -> None:
        # Validated once here; ``new`` copies it and only checks the args.
        object.__setattr__(self, "template", JobRequest(worker=self.name, **self.defaults))


def _build_definition(target: Any, *, is_class: bool, is_async: bool, **options: Any) -> JobDefinition:
    check_option_names(options, DECORATOR_OPTIONS + RUN_OPTIONS)
    name = options.pop("name", None) or f"{target.__module__}.{target.__qualname__}"
    chunk = check_chunk_options(name, options)
    # A chunk's code takes the list of jobs, not their args: its args are stored as given.
    arguments = None if is_class or chunk is not None else Arguments(target, name)
    timeout = options.pop("timeout", None)
    if timeout is not None:
        timeout = opt.check_delay("timeout", timeout)
        if timeout == 0:
            raise ValidationError("timeout", timeout, "must be greater than 0")
    backoff = options.pop("backoff", None)
    if backoff is not None and not callable(backoff):
        raise ValidationError("backoff", backoff, "must be a callable taking the job, returning seconds")
    executor_option = options.pop("executor", ExecutorKind.AUTO)
    try:
        executor = ExecutorKind(executor_option)
    except ValueError:
        raise ValidationError(
            "executor", executor_option, f"must be one of {[k.value for k in ExecutorKind]}"
        ) from None
    if executor is ExecutorKind.ASYNC and not is_async:
        raise ValidationError("executor", "async", f"{name} is not a coroutine function")
    record = options.pop("record", False)
    if not isinstance(record, bool):
        raise ValidationError("record", record, "must be True or False")
    encrypted = options.pop("encrypted", False)
    if not isinstance(encrypted, bool):
        raise ValidationError("encrypted", encrypted, "must be True or False")
    if encrypted:
        ENCRYPTED_WORKERS.add(name)
    cron = options.pop("cron", None)
    timezone = options.pop("timezone", "UTC")
    if cron is not None or timezone != "UTC":
        if cron is not None:
            CronExpression.parse(cron)  # fail at import time, pointing at the bad field
        load_zone(timezone)
    return JobDefinition(
        name=name,
        target=target,
        is_class=is_class,
        is_async=is_async,
        defaults=options,
        timeout=timeout,
        backoff=backoff,
        executor=executor,
        record=record,
        encrypted=encrypted,
        chunk=chunk,
        cron=cron,
        timezone=timezone,
        arguments=arguments,
    )


class JobFunction(Generic[P, R]):
    """A function decorated with ``@job``: still callable as before, and able to make job requests
    (``new``) and enqueue them (``enqueue``, ``enqueue_sync``, ``relay``) on the current app (see
    ``conveyor.current_app``); ``options(...)`` names the app, the caller's connection or options."""

    def __init__(self, fn: Callable[P, R], definition: JobDefinition) -> None:
        self.fn = fn
        self.definition = definition
        functools.update_wrapper(self, fn)
        setattr(self, DEFINITION_ATTRIBUTE, definition)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def new(self, *args: P.args, **kwargs: P.kwargs) -> JobRequest:
        """A request to run this function later with these arguments, bound as a call would bind
        them (``ArgumentError``, a ``ValidationError``, when they do not fit)."""
        arguments = self.definition.arguments
        if arguments is None:  # a chunk worker: its code takes jobs, its args are stored as given
            if args:
                raise ValidationError(
                    "args", args, f"{self.definition.name} is a chunk worker: give its args as keywords"
                )
            return self.definition.template.with_args(dict(kwargs))
        return self.definition.template.with_args(arguments.bind(args, kwargs))

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """Enqueue a run with these arguments on the current app; return its id."""
        return await JobCall(self).enqueue(*args, **kwargs)

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> JobId:
        return JobCall(self).enqueue_sync(*args, **kwargs)

    async def relay(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Enqueue a run on the current app, wait for it and return what it recorded (see
        ``Conveyor.relay``; ``options(timeout=...)`` bounds the wait)."""
        return await JobCall(self).relay(*args, **kwargs)

    def relay_sync(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        return JobCall(self).relay_sync(*args, **kwargs)

    def options(
        self,
        *,
        app: Conveyor | None = None,
        conn: Any = None,
        timeout: float | None = None,
        through_retries: bool = False,
        **enqueue_options: Any,
    ) -> JobCall[P, R]:
        """The same job with an app (else the current one), a connection of the caller's (the
        insert joins its transaction), a relay ``timeout``, or options of the request (``queue``,
        ``schedule_in``, ``priority``, ``unique`` ...): ``send.options(queue="bulk").enqueue(...)``."""
        return JobCall(self, app, conn, timeout, through_retries, enqueue_options)

    def __repr__(self) -> str:
        return f"<job {self.definition.name}>"


class JobCall(Generic[P, R]):
    """A job function with the app, connection and options its enqueues use (``options(...)``)."""

    __slots__ = ("_app", "_conn", "_function", "_options", "_through_retries", "_timeout")

    def __init__(
        self,
        function: JobFunction[P, R],
        app: Conveyor | None = None,
        conn: Any = None,
        timeout: float | None = None,
        through_retries: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._function = function
        self._app = app
        self._conn = conn
        self._options = dict(options or {})
        if self._options:  # refused here, naming the option, not at the first enqueue
            function.definition.template.with_options(**self._options)
        if timeout is not None:
            timeout = opt.check_delay("timeout", timeout)
        if not isinstance(through_retries, bool):
            raise ValidationError("through_retries", through_retries, "must be True or False")
        self._timeout = timeout
        self._through_retries = through_retries

    def new(self, *args: P.args, **kwargs: P.kwargs) -> JobRequest:
        request = self._function.new(*args, **kwargs)
        return request.with_options(**self._options) if self._options else request

    def _target(self) -> Conveyor:
        if self._app is not None:
            return self._app
        from conveyor.current_app import current_app

        return current_app()

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> JobId:
        self._no_conn_argument(kwargs)
        request = self.new(*args, **kwargs)
        return await self._target().enqueue(request, conn=self._conn)

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> JobId:
        self._no_conn_argument(kwargs)
        request = self.new(*args, **kwargs)
        return self._target().enqueue_sync(request, conn=self._conn)

    def _no_conn_argument(self, kwargs: dict[str, Any]) -> None:
        """``send.enqueue_sync(..., conn=connection)``: the keyword arguments are the job's, and a
        connection is none a job can take (it would be stored as JSON): say where ``conn`` goes."""
        if "conn" not in kwargs or isinstance(kwargs["conn"], str | int | float | bool | list | dict | None):
            return
        arguments = self._function.definition.arguments
        if arguments is not None and "conn" in arguments.names:
            return  # the job's own parameter, which binding and encoding check
        raise ValidationError(
            "conn",
            kwargs["conn"],
            f"is not an argument of {self._function.definition.name} (enqueue's keyword arguments are "
            f"the job's): insert through your connection with "
            f".options(conn=conn).enqueue_sync(...); with conveyor.contrib.django leave it out, "
            f"enqueue_sync already uses Django's connection",
        )

    async def relay(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        request = self._relayed(args, kwargs)
        return await self._target().relay(
            request, timeout=self._timeout, through_retries=self._through_retries
        )

    def relay_sync(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        request = self._relayed(args, kwargs)
        return self._target().relay_sync(
            request, timeout=self._timeout, through_retries=self._through_retries
        )

    def _relayed(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> JobRequest:
        if self._conn is not None:
            raise ValidationError(
                "conn",
                self._conn,
                "a relay cannot wait inside your transaction: the job starts only once it commits",
            )
        return self.new(*args, **kwargs)


@overload
def job(fn: Callable[P, R], /) -> JobFunction[P, R]: ...
@overload
def job(
    *, chunk: Chunk, **options: Any
) -> Callable[[Callable[[list[Job]], Any]], JobFunction[..., Any]]: ...  # args as keywords
@overload
def job(
    *,
    queue: str = ...,
    priority: int = ...,
    max_attempts: int = ...,
    tags: list[str] | tuple[str, ...] = ...,
    meta: dict[str, Any] = ...,
    timeout: float | timedelta | None = ...,
    backoff: Backoff | None = ...,
    executor: ExecutorKind | str = ...,
    record: bool = ...,
    encrypted: bool = ...,
    chunk: None = ...,
    name: str | None = ...,
    cron: str | None = ...,
    timezone: str = ...,
    unique: Unique | bool | Mapping[str, Any] | None = ...,
    lock: str | None = ...,
    queueing_lock: str | None = ...,
) -> Callable[[Callable[P, R]], JobFunction[P, R]]: ...
def job(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Make a plain function (async or sync) a job; its keyword arguments are the job's args.

    ``@job`` or ``@job(queue="mail", max_attempts=5, timeout=30)``.
    """

    def decorate(fn: Callable[P, R]) -> JobFunction[P, R]:
        if not callable(fn) or inspect.isclass(fn):
            raise ValidationError("job", fn, "@job decorates functions; use @worker on classes")
        is_async = inspect.iscoroutinefunction(fn)
        definition = _build_definition(fn, is_class=False, is_async=is_async, **options)
        return JobFunction(fn, definition)

    return decorate(fn) if fn is not None else decorate


@overload
def worker(cls: C, /) -> C: ...
@overload
def worker(**options: Any) -> Callable[[C], C]: ...
def worker(cls: Any = None, /, **options: Any) -> Any:
    """Make a class with a ``process(self, job)`` method (async or sync) a job.

    The class gains ``new(**args)`` to build requests; each run gets a fresh instance.
    """

    def decorate(cls: C) -> C:
        if not inspect.isclass(cls):
            raise ValidationError("worker", cls, "@worker decorates classes; use @job on functions")
        process = getattr(cls, "process", None)
        if not callable(process):
            raise ValidationError("worker", cls.__qualname__, "the class must define process(self, job)")
        is_async = inspect.iscoroutinefunction(process)
        definition = _build_definition(cls, is_class=True, is_async=is_async, **options)
        setattr(cls, DEFINITION_ATTRIBUTE, definition)
        from conveyor._oban_py import is_oban_worker

        if is_oban_worker(cls):  # over oban-py's @worker or @job: its new/enqueue forms keep working
            from conveyor._oban_dual import add_oban_style_methods

            add_oban_style_methods(cls, definition)
        else:
            cls.new = staticmethod(definition.new)  # type: ignore[attr-defined]
        return cls

    return decorate(cls) if cls is not None else decorate


def definition_of(target: Any) -> JobDefinition | None:
    """The definition attached to a decorated function or class, if any."""
    found = getattr(target, DEFINITION_ATTRIBUTE, None)
    return found if isinstance(found, JobDefinition) else None
