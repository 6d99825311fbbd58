"""A job that is asked for but not yet stored: the value that enqueue writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from conveyor import options as opt
from conveyor.errors import UnknownOptionError, ValidationError

#: Options a caller may set on one request (``with_options``) or as a worker's defaults.
ENQUEUE_OPTIONS = (
    "queue",
    "priority",
    "max_attempts",
    "tags",
    "meta",
    "scheduled_at",
    "schedule_in",
)


@dataclass(frozen=True, slots=True)
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
    # The JSON of args and meta, encoded once at validation and reused by the insert.
    args_json: bytes = field(default=b"{}", init=False, repr=False, compare=False)
    meta_json: bytes = field(default=b"{}", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.worker, str) or not self.worker.strip() or "\x00" in self.worker:
            raise ValidationError("worker", self.worker, "must be a non-empty string without NUL characters")
        object.__setattr__(self, "args_json", opt.encode_mapping("args", self.args))
        object.__setattr__(self, "meta_json", opt.encode_mapping("meta", self.meta))
        opt.check_queue(self.queue)
        opt.check_priority(self.priority)
        opt.check_max_attempts(self.max_attempts)
        object.__setattr__(self, "tags", opt.check_tags(self.tags))
        if self.scheduled_at is not None:
            opt.check_aware("scheduled_at", self.scheduled_at)
            if self.schedule_in is not None:
                raise ValidationError("schedule_in", self.schedule_in, "cannot be combined with scheduled_at")
        if self.schedule_in is not None:
            delay = opt.check_delay("schedule_in", self.schedule_in)
            object.__setattr__(self, "schedule_in", delay)

    def with_args(self, args: Mapping[str, Any]) -> JobRequest:
        """A copy with other args. Only the args are checked: everything else was validated when
        this request was built, so making many jobs of one kind stays cheap."""
        copy = object.__new__(JobRequest)
        for name in _COPIED_FIELDS:
            object.__setattr__(copy, name, getattr(self, name))
        object.__setattr__(copy, "args", args)
        object.__setattr__(copy, "args_json", opt.encode_mapping("args", args))
        return copy

    def with_options(self, **options: Any) -> JobRequest:
        """Return a copy with some options changed (queue, priority, scheduled_at, ...)."""
        check_option_names(options)
        return dataclasses.replace(self, **options)

    @property
    def scheduled_at_utc(self) -> datetime | None:
        """``scheduled_at`` as a naive UTC datetime, the way ``oban_jobs`` stores time."""
        if self.scheduled_at is None:
            return None
        return self.scheduled_at.astimezone(UTC).replace(tzinfo=None)


def check_option_names(options: Mapping[str, Any], allowed: tuple[str, ...] = ENQUEUE_OPTIONS) -> None:
    for name, value in options.items():
        if name not in allowed:
            raise UnknownOptionError(name, value, allowed)


_COPIED_FIELDS = tuple(f.name for f in dataclasses.fields(JobRequest) if f.name not in ("args", "args_json"))
