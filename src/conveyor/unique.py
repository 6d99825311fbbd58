"""Unique jobs: the option that keeps a request from being inserted twice.

``Unique`` says what makes two requests the same job (``fields`` and ``keys``), for how long
(``period``), and while the stored job is in which states (``states``). The database enforces it: each
unique job carries ``meta["uniq_key"]`` (a hash of what identifies it, and the period's time bucket)
and ``meta["uniq_states"]`` (the states in which it blocks a twin), and a partial unique index covers
the rows whose current state is one of their ``uniq_states``. Two inserts of the same job at the same
moment, from any number of processes, leave one row; a job that leaves those states (completed and
pruned, cancelled, ...) frees its key for a new one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from conveyor.errors import ValidationError
from conveyor.job import JobState

if TYPE_CHECKING:
    from conveyor.request import JobRequest

#: What ``fields`` may name, and the default (as Oban).
FIELDS = ("worker", "queue", "args", "meta")
DEFAULT_FIELDS = ("worker", "queue", "args")
#: The named groups of states (Oban's names). ``successful`` is every state but cancelled and discarded.
STATE_GROUPS: dict[str, tuple[JobState, ...]] = {
    "all": tuple(JobState),
    "incomplete": (
        JobState.AVAILABLE,
        JobState.SCHEDULED,
        JobState.SUSPENDED,
        JobState.EXECUTING,
        JobState.RETRYABLE,
    ),
    "scheduled": (JobState.SCHEDULED,),
    "successful": tuple(s for s in JobState if s not in (JobState.CANCELLED, JobState.DISCARDED)),
}
DEFAULT_STATES = "successful"
#: A list of states must be one of two shapes, so that no job ever moves into its unique states while
#: a twin may hold its key. Waiting states only: a claimed job drops its markers (fetch_jobs.sql), so
#: it never comes back. Or every state a running job returns to: it never leaves. (Inserts and
#: retries meet twins knowingly; a retry gives way.)
WAITING_STATES = frozenset({JobState.SCHEDULED, JobState.SUSPENDED, JobState.AVAILABLE})
RUNNING_STATES = frozenset({JobState.AVAILABLE, JobState.SCHEDULED, JobState.EXECUTING, JobState.RETRYABLE})
#: ``queueing_lock``: unique while waiting to run.
QUEUEING_STATES = ("available", "scheduled")
#: Seconds a job stays unique by default (as Oban); None means as long as it is in its states.
DEFAULT_PERIOD = 60.0
#: The longest period taken (a century); use None for "forever".
MAX_PERIOD = 100 * 365 * 86400.0
#: Marks the key format, so another client's keys (Oban Pro's) never collide with ours.
KEY_VERSION = "cv1"
#: Option names, for the errors that name an unknown one.
OPTIONS = ("period", "fields", "keys", "states", "replace")
#: The fields ``replace`` may take from a conflicting request (as Oban).
REPLACE_FIELDS = ("args", "meta", "priority", "queue", "scheduled_at", "tags", "max_attempts")


@dataclass(frozen=True, slots=True)
class Unique:
    """How a job is unique. ``Unique()`` is the default of ``unique=True``: the same worker, queue and
    args within 60 seconds, while the stored job is in any state but cancelled or discarded."""

    period: float | None = DEFAULT_PERIOD
    fields: tuple[str, ...] = DEFAULT_FIELDS
    keys: tuple[str, ...] = ()
    states: tuple[JobState, ...] = STATE_GROUPS[DEFAULT_STATES]
    #: On a conflict, the fields to copy from the request onto the stored job, by the state it is
    #: in (``{"scheduled": ["scheduled_at"]}``); a job in a state not named is left as it is.
    replace: tuple[tuple[JobState, tuple[str, ...]], ...] = ()
    #: Set by ``queueing``: the key is this lock, whatever the job (``JobRequest.queueing_lock``).
    queueing_lock: str | None = None
    #: Made once, when the option is: the start of each key's hash, and ``states_json``, the
    #: states' names as JSON, the ``uniq_states`` marker (every unique insert encoded them again).
    _head: bytes = field(default=b"", init=False, repr=False, compare=False, hash=False)
    states_json: bytes = field(default=b"", init=False, repr=False, compare=False, hash=False)

    def __init__(
        self,
        period: float | timedelta | None = DEFAULT_PERIOD,
        fields: Iterable[str] = DEFAULT_FIELDS,
        keys: Iterable[str] = (),
        states: str | Iterable[str | JobState] = DEFAULT_STATES,
        replace: Mapping[str | JobState, Iterable[str]] | None = None,
    ) -> None:
        set_field = object.__setattr__
        set_field(self, "period", _check_period(period))
        set_field(self, "fields", _check_fields(fields))
        set_field(self, "keys", _check_keys(keys, self.fields))
        set_field(self, "states", _check_states(states))
        set_field(self, "replace", _check_replace(replace))
        set_field(self, "queueing_lock", None)
        self._encode()

    def _encode(self) -> None:
        """Set the encodings made once per option (``_head``, ``states_json``)."""
        names = self.state_names()
        head = orjson.dumps([self.period, names, list(self.fields), list(self.keys)])
        object.__setattr__(self, "_head", head + (b"q" if self.queueing_lock is not None else b""))
        object.__setattr__(self, "states_json", orjson.dumps(names))

    @classmethod
    def queueing(cls, lock: str) -> Unique:
        """The unique option behind ``queueing_lock=lock``: one waiting job per lock, in any queue,
        for as long as it waits."""
        unique = cls(period=None, states=QUEUEING_STATES)
        object.__setattr__(unique, "queueing_lock", lock)
        unique._encode()
        return unique

    @classmethod
    def build(cls, value: Any) -> Unique | None:
        """The ``unique`` option as given: None/False (not unique), True (the defaults), a mapping of
        ``Unique``'s arguments, or a ``Unique``."""
        if value is None or value is False:
            return None
        if value is True:
            return DEFAULT_UNIQUE
        if isinstance(value, Unique):
            return value
        if isinstance(value, Mapping):
            # Requests built in a loop pass equal dicts again and again: validate each shape once.
            try:
                cache_key = tuple(sorted((k, _frozen(v)) for k, v in value.items()))
                cached = _BUILT.get(cache_key)
            except TypeError:  # unhashable or unorderable: validate without the cache
                cache_key, cached = None, None
            if cached is not None:
                return cached
            unknown = sorted(str(k) for k in value if k not in OPTIONS)
            if unknown:
                raise ValidationError(
                    f"unique.{unknown[0]}",
                    value[unknown[0]],
                    f"unknown option; expected {', '.join(OPTIONS)}",
                )
            built = cls(**value)
            if cache_key is not None and len(_BUILT) < 256:
                _BUILT[cache_key] = built
            return built
        raise ValidationError("unique", value, "must be True, False, None, a mapping of options or a Unique")

    def state_names(self) -> list[str]:
        """The states as their names, in order."""
        return [state.value for state in self.states]

    def replace_spec(self) -> dict[str, list[str]]:
        """``replace`` as the engines read it: {state name: [field, ...]}."""
        return {state.value: list(fields) for state, fields in self.replace}

    def base_key(self, request: JobRequest) -> str:
        """What identifies ``request`` under this option (the period bucket is added at insert):
        a hash of the option itself and of the chosen fields, objects with their keys sorted."""
        digest = hashlib.blake2b(self._head, digest_size=16)
        if self.queueing_lock is not None:
            digest.update(b"queueing_lock:" + self.queueing_lock.encode())
            return f"{KEY_VERSION}:{digest.hexdigest()}"
        for name in self.fields:
            if name == "worker":
                part = request.worker.encode()
            elif name == "queue":
                part = request.queue.encode()
            else:
                values = request.args if name == "args" else request.meta
                chosen = {key: values.get(key) for key in self.keys} if self.keys else values
                part = orjson.dumps(chosen, option=orjson.OPT_SORT_KEYS)
            digest.update(b"%d:" % len(part))  # length-prefixed: no two splits read alike
            digest.update(part)
        return f"{KEY_VERSION}:{digest.hexdigest()}"

    def key(self, base: str, now: datetime) -> str:
        """The stored key: ``base`` and, with a period, the number of the period containing ``now``."""
        if self.period is None:
            return base
        return f"{base}.{bucket(now, self.period)}"


#: ``Unique.build``'s validated options, by the frozen items of the mapping they came from.
_BUILT: dict[tuple[Any, ...], Unique] = {}


def _frozen(value: Any) -> Any:
    """``value`` hashable: lists and tuples as tuples (of frozen items); anything else as it is. The
    type is part of it, so 1, 1.0 and True never share an entry."""
    if isinstance(value, list | tuple):
        return ("seq", tuple(_frozen(item) for item in value))
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((k, _frozen(v)) for k, v in value.items())))
    return (type(value).__name__, value)


def bucket(now: datetime, period: float) -> int:
    """The number of the ``period``-long slice of time, counted from the Unix epoch, holding ``now``
    (naive UTC or aware). The engines' SQL computes the same from their clock."""
    seconds = (now.replace(tzinfo=None) - _EPOCH).total_seconds()
    return math.floor(seconds / period)


_EPOCH = datetime(1970, 1, 1)


def _check_period(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("unique.period", value, "must be seconds (a number or timedelta), or None")
    if not math.isfinite(value) or value <= 0 or value > MAX_PERIOD:
        raise ValidationError(
            "unique.period", value, "must be more than 0 seconds and at most a century (None: no limit)"
        )
    return float(value)


def _names(option: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValidationError(option, value, "must be a list of names")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValidationError(option, value, f"holds {name!r}; every entry must be a non-empty string")
    if len(set(names)) != len(names):
        raise ValidationError(option, value, "names an entry twice")
    return names


def _check_fields(value: Any) -> tuple[str, ...]:
    fields = _names("unique.fields", value)
    if not fields:
        raise ValidationError("unique.fields", value, f"must name at least one of {', '.join(FIELDS)}")
    for name in fields:
        if name not in FIELDS:
            raise ValidationError("unique.fields", value, f"{name!r} is not one of {', '.join(FIELDS)}")
    return tuple(name for name in FIELDS if name in fields)  # one order, whatever the caller's


def _check_keys(value: Any, fields: tuple[str, ...]) -> tuple[str, ...]:
    keys = _names("unique.keys", value)
    if keys and "args" not in fields and "meta" not in fields:
        raise ValidationError(
            "unique.keys", value, "picks keys of args or meta, so fields must include 'args' or 'meta'"
        )
    return tuple(sorted(keys))


def _check_states(value: Any) -> tuple[JobState, ...]:
    if isinstance(value, str):
        group = STATE_GROUPS.get(value)
        if group is None:
            raise ValidationError(
                "unique.states",
                value,
                f"is not a group of states; expected {', '.join(STATE_GROUPS)} or a list",
            )
        return group
    if not isinstance(value, Iterable):
        raise ValidationError("unique.states", value, "must be a group name or a list of states")
    states: list[JobState] = []
    for item in value:
        try:
            state = JobState(item)
        except ValueError:
            raise ValidationError(
                "unique.states",
                value,
                f"{item!r} is not a state; expected {', '.join(s.value for s in JobState)}",
            ) from None
        if state not in states:
            states.append(state)
    if not states:
        raise ValidationError("unique.states", value, "must hold at least one state")
    chosen = set(states)
    waiting_only = chosen <= WAITING_STATES and (
        JobState.AVAILABLE not in chosen or JobState.SCHEDULED in chosen
    )
    running_too = chosen >= RUNNING_STATES and (
        JobState.CANCELLED not in chosen or JobState.SUSPENDED in chosen
    )
    if not (waiting_only or running_too):
        raise ValidationError(
            "unique.states",
            value,
            "must either stay among the waiting states (scheduled, suspended, available; available "
            "only with scheduled), or include available, scheduled, executing and retryable (and "
            "suspended too with cancelled): a job moves between those by itself, and a twin inserted "
            "meanwhile would stop it",
        )
    return tuple(s for s in JobState if s in chosen)


def _check_replace(value: Any) -> tuple[tuple[JobState, tuple[str, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ValidationError("unique.replace", value, "must map states to lists of fields")
    result: list[tuple[JobState, tuple[str, ...]]] = []
    for state_name, fields in value.items():
        try:
            state = JobState(state_name)
        except ValueError:
            names = ", ".join(s.value for s in JobState)
            raise ValidationError(
                "unique.replace", value, f"{state_name!r} is not a state; expected {names}"
            ) from None
        chosen = _names("unique.replace", fields)
        for name in chosen:
            if name not in REPLACE_FIELDS:
                expected = ", ".join(REPLACE_FIELDS)
                raise ValidationError(
                    "unique.replace", value, f"{name!r} cannot be replaced; expected {expected}"
                )
        result.append((state, chosen))
    return tuple(sorted(result, key=lambda item: list(JobState).index(item[0])))


DEFAULT_UNIQUE = Unique()


def stored_meta(meta_json: bytes, key: str, unique: Unique) -> bytes:
    """``meta_json`` (a JSON object) with the unique markers of ``unique`` added last, so they win over
    any keys of the same name the caller put in meta."""
    markers = b'"uniq_key":' + orjson.dumps(key) + b',"uniq_states":' + unique.states_json + b"}"
    if meta_json == b"{}":
        return b"{" + markers
    return meta_json[:-1] + b"," + markers
