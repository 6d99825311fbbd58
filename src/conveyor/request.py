"""A job that is asked for but not yet stored: the value that enqueue writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import orjson

from conveyor import _options as opt
from conveyor._job_json import encode_mapping
from conveyor.errors import UnknownOptionError, ValidationError
from conveyor.unique import Unique

#: Options a caller may set on one request (``with_options``) or as a worker's defaults.
ENQUEUE_OPTIONS = (
    "queue",
    "priority",
    "max_attempts",
    "tags",
    "meta",
    "scheduled_at",
    "schedule_in",
    "unique",
    "lock",
    "queueing_lock",
)


#: Meta keys Conveyor writes for unique jobs (``conveyor.unique``): a caller's own would fake one.
RESERVED_META = ("uniq_key", "uniq_states", "lock_key")

#: The default of args and meta: a fresh dict is made for each request that leaves them out.
_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, init=False)
class JobRequest:
    """An immutable, validated description of a job to insert.

    Build one with a job definition (``send_email.new(to=...)``) or directly with a worker name, e.g. to
    enqueue a job that an Elixir or oban-py node will run. Construction validates every field, so an
    invalid request never exists and a bulk enqueue fails before it writes anything.
    """

    worker: str
    args: Mapping[str, Any] = field(default_factory=dict)
    queue: str = opt.DEFAULT_QUEUE
    priority: int = opt.DEFAULT_PRIORITY
    max_attempts: int = opt.DEFAULT_MAX_ATTEMPTS
    tags: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Run no earlier than this (timezone-aware) moment.
    scheduled_at: datetime | None = None
    #: Run no earlier than this many seconds after the insert (database clock).
    schedule_in: float | None = None
    #: Insert only if no such job exists (see ``conveyor.unique``); None: always insert.
    unique: Unique | None = None
    #: An ordered lock: jobs with the same key run one at a time across the fleet, in enqueue order.
    lock: str | None = None
    #: At most one job with this key waits (available or scheduled) at a time: a second enqueue
    #: returns the waiting one's id as a conflict (a unique job over the waiting states).
    queueing_lock: str | None = None
    # The JSON of args and meta, encoded once at validation and reused by the insert.
    args_json: bytes = field(default=b"{}", init=False, repr=False, compare=False)
    meta_json: bytes = field(default=b"{}", init=False, repr=False, compare=False)

    # Written by hand rather than generated: a frozen dataclass's __init__ sets each field through
    # object.__setattr__, and then the checks set four of them again. Validating first and handing
    # the instance its finished __dict__ in one step halves the cost of a request, which bulk
    # inserts pay 100,000 times. The signature is the generated one's.
    def __init__(
        self,
        worker: str,
        args: Mapping[str, Any] = _EMPTY,
        queue: str = opt.DEFAULT_QUEUE,
        priority: int = opt.DEFAULT_PRIORITY,
        max_attempts: int = opt.DEFAULT_MAX_ATTEMPTS,
        tags: Iterable[str] = (),
        meta: Mapping[str, Any] = _EMPTY,
        scheduled_at: datetime | None = None,
        schedule_in: float | None = None,
        unique: Unique | bool | Mapping[str, Any] | None = None,
        lock: str | None = None,
        queueing_lock: str | None = None,
    ) -> None:
        if not isinstance(worker, str) or not worker.strip() or "\x00" in worker or not opt.is_utf8(worker):
            raise ValidationError(
                "worker", worker, "must be a non-empty string without NUL characters or lone surrogates"
            )
        if args is _EMPTY:
            args = {}
        args_json = encode_mapping("args", args)
        if meta is _EMPTY or (type(meta) is dict and not meta):
            meta, meta_json = {}, b"{}"
        else:
            meta_json = _encode_meta(meta)
        # The defaults themselves (the very objects) are known to be valid: most requests use them.
        if queue is not opt.DEFAULT_QUEUE:
            opt.check_queue(queue)
        if priority is not opt.DEFAULT_PRIORITY:
            opt.check_priority(priority)
        if max_attempts is not opt.DEFAULT_MAX_ATTEMPTS:
            opt.check_max_attempts(max_attempts)
        tags = () if tags == () else opt.check_tags(tags)
        if scheduled_at is not None:
            opt.check_aware("scheduled_at", scheduled_at)
            if schedule_in is not None:
                raise ValidationError("schedule_in", schedule_in, "cannot be combined with scheduled_at")
        if schedule_in is not None:
            schedule_in = opt.check_delay("schedule_in", schedule_in)
        if unique is not None:
            unique = Unique.build(unique)
        if queueing_lock is not None:
            queueing_lock = opt.check_lock_key("queueing_lock", queueing_lock)
            if unique is not None and unique.queueing_lock != queueing_lock:
                raise ValidationError(
                    "queueing_lock",
                    queueing_lock,
                    "is a unique job of its own: pass unique= or queueing_lock=, not both",
                )
            unique = Unique.queueing(queueing_lock)
        if lock is not None:
            lock = opt.check_lock_key("lock", lock)
            meta_json = _with_lock(meta_json, lock)
        _set_state(
            self,
            "__dict__",
            {
                "worker": worker,
                "args": args,
                "queue": queue,
                "priority": priority,
                "max_attempts": max_attempts,
                "tags": tags,
                "meta": meta,
                "scheduled_at": scheduled_at,
                "schedule_in": schedule_in,
                "unique": unique,
                "lock": lock,
                "queueing_lock": queueing_lock,
                "args_json": args_json,
                "meta_json": meta_json,
            },
        )

    def with_args(self, args: Mapping[str, Any]) -> JobRequest:
        """A copy with other args. Only the args are checked: everything else was validated when
        this request was built, so making many jobs of one kind stays cheap."""
        return self._copy_with(args=args, args_json=encode_mapping("args", args))

    def with_meta(self, meta: Mapping[str, Any]) -> JobRequest:
        """A copy with other meta (an ordered lock's key kept). Only the meta is checked, as in
        ``with_args``: enqueue hooks (``Conveyor.before_enqueue``) add a key to every request."""
        meta_json = _encode_meta(meta)
        if self.lock is not None:
            meta_json = _with_lock(meta_json, self.lock)
        return self._copy_with(meta=meta, meta_json=meta_json)

    def _copy_with(self, **checked: Any) -> JobRequest:
        """A copy with fields changed that the caller checked (the others stay as validated)."""
        copy = _new_request(JobRequest)
        _set_state(copy, "__dict__", {**self.__dict__, **checked})
        return copy

    def with_options(self, **options: Any) -> JobRequest:
        """A copy with some options changed: any of ``ENQUEUE_OPTIONS`` (``queue``, ``priority``,
        ``max_attempts``, ``tags``, ``meta``, ``scheduled_at``, ``schedule_in``, ``unique``, ``lock``,
        ``queueing_lock``), checked as the constructor checks them. Another name raises
        ``UnknownOptionError``. ``tags`` and ``meta`` replace the request's, they are not merged."""
        check_option_names(options)
        return dataclasses.replace(self, **options)

    @property
    def scheduled_at_utc(self) -> datetime | None:
        """``scheduled_at`` as a naive UTC datetime, the way ``oban_jobs`` stores time."""
        if self.scheduled_at is None:
            return None
        return self.scheduled_at.astimezone(UTC).replace(tzinfo=None)


def _encode_meta(meta: Mapping[str, Any]) -> bytes:
    meta_json = encode_mapping("meta", meta)
    for reserved in RESERVED_META:
        if reserved in meta:
            raise ValidationError(
                f"meta[{reserved!r}]",
                meta[reserved],
                "is reserved: Conveyor writes it for unique=, lock= and queueing_lock=",
            )
    return meta_json


def _with_lock(meta_json: bytes, lock: str) -> bytes:
    """The stored meta of a job with an ordered lock: the caller's, with ``lock_key`` last."""
    marker = orjson.dumps({"lock_key": lock})
    return marker if meta_json == b"{}" else meta_json[:-1] + b"," + marker[1:]


def check_requests(requests: Any) -> None:
    """Refuse what is not an iterable of requests (each one is checked as an insert takes it): a
    string, bytes or a mapping too, whose letters or keys would be offered as jobs."""
    if type(requests) is tuple or type(requests) is list:
        return  # what enqueue passes: no abstract-class checks (a microsecond of a single call)
    if isinstance(requests, str | bytes | bytearray | Mapping) or not isinstance(requests, Iterable):
        raise ValidationError(
            "requests",
            requests,
            "must be an iterable of JobRequest values (from my_job.new(...)), e.g. a list, or a Workflow",
        )


def request_stream(requests: Any) -> Iterator[Any]:
    """An iterator over ``requests``, checked by ``check_requests``."""
    check_requests(requests)
    return iter(requests)


def check_option_names(options: Mapping[str, Any], allowed: tuple[str, ...] = ENQUEUE_OPTIONS) -> None:
    for name, value in options.items():
        if name not in allowed:
            raise UnknownOptionError(name, value, allowed)


_set_state = object.__setattr__
_new_request = object.__new__
