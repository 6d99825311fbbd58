"""Selecting jobs for listing and for bulk actions (cancel, retry, delete)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from conveyor import _options as opt
from conveyor.errors import ValidationError
from conveyor.job import JobState

MAX_PAGE = 10_000


def _tuple_of(field: str, value: Any, item: type) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (item, str)):
        value = (value,)
    if not isinstance(value, Iterable):
        raise ValidationError(field, value, f"must be a {item.__name__} or a list of them")
    items = tuple(value)
    for one in items:
        if not isinstance(one, item) or isinstance(one, bool):
            raise ValidationError(field, value, f"every item must be a {item.__name__}, got {one!r}")
    return items


#: The time ranges a filter can ask for, by the job column each one matches.
TIME_RANGES = {
    "scheduled": "scheduled_at",
    "attempted": "attempted_at",
    "completed": "completed_at",
}


def _check_suffix(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError("worker_suffix", value, "must be a string")
    if not value or value.startswith(".") or value.endswith("."):
        raise ValidationError(
            "worker_suffix", value, "must be the end of a worker name, e.g. 'SendEmail' or 'mail.SendEmail'"
        )
    if "\x00" in value:
        raise ValidationError("worker_suffix", value, "holds a NUL character (\\x00)")
    if not opt.is_utf8(value):
        raise ValidationError("worker_suffix", value, "holds a lone surrogate, which is not valid UTF-8")
    return value


#: Characters a key of ``args_contains`` may not hold: SQLite reaches each one through a JSON path.
PATH_CHARACTERS = frozenset('."[]$\\*')
MAX_ARGS_FILTER = 8_000


def _check_args_contains(value: Any) -> dict[str, Any] | None:
    """A JSON object of args to match, checked and copied (None: no such criterion)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError("args_contains", value, "must be a JSON object (a dict)")

    def check(node: Any, where: str) -> None:
        if isinstance(node, dict):
            for key, inner in node.items():
                if not isinstance(key, str) or not key or PATH_CHARACTERS & set(key) or "\x00" in key:
                    raise ValidationError(
                        "args_contains",
                        value,
                        f'key {key!r} at {where} must be a non-empty string without . " [ ] $ * or NUL',
                    )
                check(inner, f"{where}.{key}")
        elif isinstance(node, list | tuple):
            raise ValidationError("args_contains", value, f"{where} is a list: lists cannot be matched yet")

    check(value, "args")
    try:
        encoded = orjson.dumps(value)
    except TypeError as exc:
        raise ValidationError("args_contains", value, f"is not JSON: {exc}") from None
    if len(encoded) > MAX_ARGS_FILTER:
        raise ValidationError(
            "args_contains", value, f"is {len(encoded)} bytes as JSON; at most {MAX_ARGS_FILTER}"
        )
    copied: dict[str, Any] = orjson.loads(encoded)
    return copied


def _normalised_tags(tags: tuple[str, ...]) -> tuple[str, ...]:
    """Filter tags as stored tags are (``_options.check_tags``). A blank one is refused rather than
    dropped: no job carries it, and dropping it would widen a cancel or delete to more jobs."""
    normal = tuple(dict.fromkeys(opt.normalise_tag(tag) for tag in tags))
    if "" in normal:
        raise ValidationError("tags", tags, "holds a blank tag; no job carries one")
    return normal


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs to act on. Empty criteria match everything; criteria combine with AND.

    ``tags`` matches jobs carrying all of the given tags, compared as Oban stores them (trimmed and
    lowercased: ``"VIP "`` finds jobs tagged ``vip``). Listing pages newest first: pass the last
    id you saw as ``before_id`` to get the next page. ``after_id`` keeps ids above it: with
    ``before_id`` it bounds how many rows a listing may walk (a window of ids), whatever it matches.

    ``worker_suffix`` matches a worker whose name is it or ends with ``.`` and it: ``SendEmail``
    matches ``app.mail.SendEmail``, not ``app.mail.ResendEmail``. The time ranges take aware
    datetimes: ``*_after`` keeps jobs at or after it, ``*_before`` jobs strictly before it, on
    ``scheduled_at``, ``attempted_at`` (never attempted: no match) and ``completed_at``.
    ``args_contains`` (a JSON object) matches jobs whose args hold each of its keys with an equal
    value, nested objects matched the same way (containment: ``{"user": {"id": 7}}`` matches args
    ``{"user": {"id": 7, "name": "ada"}, "n": 1}``); numbers compare as numbers. Lists cannot be
    matched yet, and keys may not hold ``. " [ ] $ *``.
    ``completed_after``/``completed_before`` match completed jobs only: no other state has a
    ``completed_at`` (a retry clears it), and saying so lets the database use its index of
    completed jobs.
    """

    ids: tuple[int, ...] = ()
    states: tuple[JobState, ...] = ()
    queues: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    limit: int | None = None
    before_id: int | None = None
    worker_suffix: str | None = None
    scheduled_after: datetime | None = None
    scheduled_before: datetime | None = None
    attempted_after: datetime | None = None
    attempted_before: datetime | None = None
    completed_after: datetime | None = None
    completed_before: datetime | None = None
    after_id: int | None = None
    args_contains: dict[str, Any] | None = None

    if TYPE_CHECKING:
        # What the constructor takes, for type checkers: one value or any iterable of them where
        # the fields hold tuples (__post_init__ makes the tuples; a state's name becomes a JobState).
        def __init__(
            self,
            ids: int | Iterable[int] | None = (),
            states: JobState | str | Iterable[JobState | str] | None = (),
            queues: str | Iterable[str] | None = (),
            workers: str | Iterable[str] | None = (),
            tags: str | Iterable[str] | None = (),
            limit: int | None = None,
            before_id: int | None = None,
            worker_suffix: str | None = None,
            scheduled_after: datetime | None = None,
            scheduled_before: datetime | None = None,
            attempted_after: datetime | None = None,
            attempted_before: datetime | None = None,
            completed_after: datetime | None = None,
            completed_before: datetime | None = None,
            after_id: int | None = None,
            args_contains: dict[str, Any] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        ids = tuple(opt.check_job_id(job_id, "ids") for job_id in _tuple_of("ids", self.ids, int))
        object.__setattr__(self, "ids", ids)
        try:
            states = tuple(JobState(s) for s in _tuple_of("states", self.states, str))
        except ValueError as exc:
            raise ValidationError(
                "states", self.states, f"{exc}; expected some of {[s.value for s in JobState]}"
            ) from None
        object.__setattr__(self, "states", states)
        queues = _tuple_of("queues", self.queues, str)
        for queue in queues:
            opt.check_queue(queue, "queues")
        object.__setattr__(self, "queues", queues)
        for name in ("workers", "tags"):
            texts = _tuple_of(name, getattr(self, name), str)
            if any("\x00" in text for text in texts):  # no stored worker or tag holds one
                raise ValidationError(name, texts, "holds a NUL character (\\x00)")
            if not all(opt.is_utf8(text) for text in texts):  # nor one a database cannot take
                raise ValidationError(name, texts, "holds a lone surrogate, which is not valid UTF-8")
            if name == "tags":
                texts = _normalised_tags(texts)
            object.__setattr__(self, name, texts)
        if self.limit is not None and (
            isinstance(self.limit, bool) or not isinstance(self.limit, int) or not 1 <= self.limit <= MAX_PAGE
        ):
            raise ValidationError("limit", self.limit, f"must be an integer from 1 to {MAX_PAGE}")
        if self.before_id is not None:
            opt.check_job_id(self.before_id, "before_id")
        if self.after_id is not None:
            opt.check_job_id(self.after_id, "after_id")
        _check_suffix(self.worker_suffix)
        object.__setattr__(self, "args_contains", _check_args_contains(self.args_contains))
        for name in TIME_RANGES:
            after, before = f"{name}_after", f"{name}_before"
            start, end = getattr(self, after), getattr(self, before)
            if start is not None:
                opt.check_aware(after, start)
            if end is not None:
                opt.check_aware(before, end)
            if start is not None and end is not None and start >= end:
                raise ValidationError(after, start, f"must be earlier than {before}={end!r}")

    def time_ranges(self) -> dict[str, tuple[datetime | None, datetime | None]]:
        """The time ranges asked for, by the column they match: (after or None, before or None)."""
        ranges: dict[str, tuple[datetime | None, datetime | None]] = {}
        for name, column in TIME_RANGES.items():
            start, end = getattr(self, f"{name}_after"), getattr(self, f"{name}_before")
            if start is not None or end is not None:
                ranges[column] = (start, end)
        return ranges

    @classmethod
    def build(cls, **criteria: Any) -> JobFilter:
        """A filter from keyword criteria, where single values may stand for one-item lists."""
        known = tuple(cls.__dataclass_fields__)
        for name, value in criteria.items():
            if name not in known:
                raise ValidationError(name, value, f"unknown filter; expected one of {', '.join(known)}")
        return cls(**criteria)
