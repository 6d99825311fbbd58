"""Limits a fetch obeys beyond the producer's own free slots, counted across the whole fleet.

The producer knows only its own node; these are enforced by the engine inside the claiming
transaction, where every node's running jobs and recent starts are visible, so they hold with nodes
coming and going. Claims of a queue with limits are serialised (a lock per queue), so two nodes never
count the same free slot.

A limit may be *partitioned* (``Partition``): by worker and/or by listed args or meta keys, each
distinct value gets the whole limit to itself (e.g. 50 starts per second per tenant).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conveyor.errors import ValidationError

#: The longest rate-limit period taken: a day.
MAX_RATE_PERIOD = 86_400.0
#: The most keys a partition may list (args and meta together).
MAX_PARTITION_KEYS = 8
#: The fields a partition can use, as Oban Pro names them (``{"fields": [...], "keys": [...]}``).
PARTITION_FIELDS = ("worker", "args", "meta")


@dataclass(frozen=True, slots=True)
class Partition:
    """Which jobs share a limit: those with the same worker (``worker=True``) and the same values
    under the listed ``args`` and ``meta`` keys (a missing key counts as null). Given as ``"worker"``,
    ``{"worker": true, "args": ["tenant"], "meta": [...]}``, or Oban Pro's ``{"fields": ["worker",
    "args"], "keys": ["tenant"]}``."""

    worker: bool = False
    args: tuple[str, ...] = ()
    meta: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.worker, bool):
            raise ValidationError("partition.worker", self.worker, "must be true or false")
        for field in ("args", "meta"):
            keys = _partition_keys(f"partition.{field}", getattr(self, field))
            object.__setattr__(self, field, keys)
        if not (self.worker or self.args or self.meta):
            raise ValidationError(
                "partition", self.to_json(), "partitions by nothing; name worker, args keys or meta keys"
            )
        if len(self.args) + len(self.meta) > MAX_PARTITION_KEYS:
            raise ValidationError("partition", self.to_json(), f"lists more than {MAX_PARTITION_KEYS} keys")

    @classmethod
    def build(cls, value: Any, field: str = "partition") -> Partition | None:
        """A partition as given: None, a ``Partition``, ``"worker"`` or a mapping (see the class)."""
        if value is None or isinstance(value, Partition):
            return value
        try:
            if value == "worker":
                return cls(worker=True)
            if not isinstance(value, Mapping):
                raise ValidationError(
                    "partition", value, 'must be "worker" or {"worker": true, "args": [keys], "meta": [keys]}'
                )
            if "fields" in value or "keys" in value:
                return cls._from_fields(value)
            for key in value:
                if key not in PARTITION_FIELDS:
                    raise ValidationError(
                        f"partition.{key}",
                        value[key],
                        "unknown key; expected worker, args, meta (or fields, keys)",
                    )
            return cls(
                worker=value.get("worker", False), args=value.get("args", ()), meta=value.get("meta", ())
            )
        except ValidationError as exc:
            if field == "partition":
                raise
            named = field + exc.field.removeprefix("partition")
            raise ValidationError(named, exc.value, exc.problem) from None

    @classmethod
    def _from_fields(cls, value: Mapping[Any, Any]) -> Partition:
        """Oban Pro's form: ``fields`` among worker/args/meta, ``keys`` for the args/meta fields."""
        for key in value:
            if key not in ("fields", "keys"):
                raise ValidationError(f"partition.{key}", value[key], "unknown key; expected fields, keys")
        fields = value.get("fields")
        if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
            raise ValidationError(
                "partition.fields", fields, "must list some of worker, args, meta (keys need fields)"
            )
        for name in fields:
            if name not in PARTITION_FIELDS:
                problem = f"{name!r} is not one of worker, args, meta"
                raise ValidationError("partition.fields", fields, problem)
        keys = _partition_keys("partition.keys", value.get("keys", ()))
        if ("args" in fields or "meta" in fields) and not keys:
            problem = "fields args and meta need keys to read"
            raise ValidationError("partition.keys", value.get("keys"), problem)
        if keys and not ("args" in fields or "meta" in fields):
            problem = "keys need the field args or meta to read them from"
            raise ValidationError("partition.keys", keys, problem)
        return cls(
            worker="worker" in fields,
            args=keys if "args" in fields else (),
            meta=keys if "meta" in fields else (),
        )

    def to_json(self) -> dict[str, Any]:
        """Conveyor's own form, which ``build`` reads back."""
        shape: dict[str, Any] = {}
        if self.worker:
            shape["worker"] = True
        if self.args:
            shape["args"] = list(self.args)
        if self.meta:
            shape["meta"] = list(self.meta)
        return shape

    def describe(self) -> str:
        """For people: ``worker, args.tenant``."""
        parts = ["worker"] if self.worker else []
        parts += [f"args.{key}" for key in self.args] + [f"meta.{key}" for key in self.meta]
        return ", ".join(parts)


def _partition_keys(field: str, keys: Any) -> tuple[str, ...]:
    """Keys of args or meta to partition by: distinct, non-empty names of at most 255 characters.
    A double quote or backslash is refused: SQLite reads the key through a JSON path."""
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise ValidationError(field, keys, "must be a list of key names")
    for key in keys:
        if not isinstance(key, str) or not key or len(key) > 255:
            raise ValidationError(field, keys, f"{key!r} is not a key name (a non-empty string up to 255)")
        if '"' in key or "\\" in key or not key.isprintable() or not _encodable(key):
            problem = f"{key!r}: quotes, backslashes and control characters are refused"
            raise ValidationError(field, keys, problem)
    if len(set(keys)) != len(keys):
        raise ValidationError(field, keys, "lists a key twice")
    return tuple(keys)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _check_allowed(field: str, allowed: Any) -> None:
    if isinstance(allowed, bool) or not isinstance(allowed, int) or allowed < 1:
        raise ValidationError(field, allowed, "must be an integer >= 1")
    if allowed > 2**31 - 1:
        raise ValidationError(field, allowed, "must be at most 2147483647")


@dataclass(frozen=True, slots=True)
class GlobalLimit:
    """At most ``allowed`` jobs of the queue execute at once on all nodes together (per partition
    when one is given). Given as an int or ``{"allowed": n, "partition": ...}``."""

    allowed: int
    partition: Partition | None = None

    def __post_init__(self) -> None:
        _check_allowed("global_limit", self.allowed)
        object.__setattr__(self, "partition", Partition.build(self.partition, "global_limit.partition"))

    @classmethod
    def build(cls, value: Any) -> GlobalLimit | None:
        if value is None or isinstance(value, GlobalLimit):
            return value
        if isinstance(value, Mapping):
            for key in value:
                if key not in ("allowed", "partition"):
                    raise ValidationError(
                        f"global_limit.{key}", value[key], "unknown key; expected allowed, partition"
                    )
            if "allowed" not in value:
                raise ValidationError("global_limit.allowed", None, "is required")
            _check_allowed("global_limit.allowed", value["allowed"])
            return cls(value["allowed"], value.get("partition"))
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(
                "global_limit", value, 'must be an integer >= 1, {"allowed": n, "partition": ...} or None'
            )
        return cls(value)

    def to_json(self) -> int | dict[str, Any]:
        """As signals and producer rows carry it: the bare number when unpartitioned (Oban Pro's)."""
        if self.partition is None:
            return self.allowed
        return {"allowed": self.allowed, "partition": self.partition.to_json()}

    def describe(self) -> str:
        return str(self.allowed) + (f" per {self.partition.describe()}" if self.partition else "")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``allowed`` jobs of the queue *start* in any ``period`` seconds (a sliding window), on
    all nodes together (per partition when one is given). Every start counts, whatever the job's
    outcome."""

    allowed: int
    period: float = 1.0
    partition: Partition | None = None

    def __post_init__(self) -> None:
        allowed, period = self.allowed, self.period
        _check_allowed("rate_limit.allowed", allowed)
        if isinstance(period, bool) or not isinstance(period, int | float):
            raise ValidationError("rate_limit.period", period, "must be a number of seconds")
        if not math.isfinite(period) or not 0 < period <= MAX_RATE_PERIOD:
            raise ValidationError(
                "rate_limit.period", period, "must be more than 0 and at most a day (86400)"
            )
        object.__setattr__(self, "period", float(period))
        object.__setattr__(self, "partition", Partition.build(self.partition, "rate_limit.partition"))

    @classmethod
    def build(cls, value: Any) -> RateLimit | None:
        """``rate_limit`` as given: None, a ``RateLimit``, or ``{"allowed": n, "period": seconds,
        "partition": ...}``."""
        if value is None or isinstance(value, RateLimit):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError("rate_limit", value, 'must be {"allowed": n, "period": seconds} or None')
        for key in value:
            if key not in ("allowed", "period", "partition"):
                raise ValidationError(
                    f"rate_limit.{key}", value[key], "unknown key; expected allowed, period, partition"
                )
        if "allowed" not in value:
            raise ValidationError("rate_limit.allowed", None, "is required")
        return cls(**dict(value))

    def to_json(self) -> dict[str, Any]:
        """As signals and producer rows carry it (Oban Pro's names); ``build`` reads it back."""
        shape: dict[str, Any] = {"allowed": self.allowed, "period": self.period}
        if self.partition is not None:
            shape["partition"] = self.partition.to_json()
        return shape

    def describe(self) -> str:
        text = f"{self.allowed}/{self.period:g}s"
        return text + (f" per {self.partition.describe()}" if self.partition else "")

    @property
    def spacing(self) -> float:
        """The average time between starts the limit allows."""
        return self.period / self.allowed


@dataclass(frozen=True, slots=True)
class FetchLimits:
    #: At most so many jobs of the queue executing at once on all nodes together (None: no cap);
    #: an int is taken as an unpartitioned limit. Jobs of a dead node count until rescue gives
    #: them back.
    global_limit: GlobalLimit | None = None
    #: At most so many starts per period, on all nodes together (None: no limit).
    rate: RateLimit | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "global_limit", GlobalLimit.build(self.global_limit))
        if self.rate is not None and not isinstance(self.rate, RateLimit):
            raise ValidationError("rate", self.rate, "must be a RateLimit or None")

    @property
    def unlimited(self) -> bool:
        return self.global_limit is None and self.rate is None

    @property
    def partitioned(self) -> bool:
        """Does a limit count per partition (and so need the ranking claim)?"""
        return bool(
            (self.global_limit and self.global_limit.partition) or (self.rate and self.rate.partition)
        )


NO_LIMITS = FetchLimits()


class Claimed(list[Any]):
    """What ``fetch_jobs`` returns under limits: the claimed jobs, and whether a limit (not an empty
    queue) stopped the claim, so the producer tries again soon instead of at its next poll."""

    capped: bool = False


def capped_by(limits: FetchLimits, running: int | None, started: int | None) -> bool:
    """Did an unpartitioned limit stop the claim? ``running``: the queue's executing jobs after it
    (for the global limit); ``started``: its starts in the rate window, this claim's included (None:
    no such limit)."""
    cap = limits.global_limit
    if cap is not None and running is not None and running >= cap.allowed:
        return True
    return limits.rate is not None and started is not None and started >= limits.rate.allowed
