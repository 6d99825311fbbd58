"""The settings of one queue (``QueueSettings``) and the forms ``queues`` may take in arguments,
environment variables and config files (``parse_queues``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from conveyor import _options as opt
from conveyor.definition import ExecutorKind
from conveyor.errors import ValidationError
from conveyor.limits import FetchLimits, GlobalLimit, RateLimit


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """One queue of a node: its local ``limit`` and executor, and the fleet-wide limits its fetches
    obey (``global_limit``, ``rate_limit``: see ``conveyor.limits``)."""

    name: str
    limit: int = 10
    #: Default executor for the queue's jobs (a worker's own choice wins).
    executor: ExecutorKind = ExecutorKind.AUTO
    #: Jobs of the queue running at once on all nodes together (None: only ``limit`` per node):
    #: an int, or ``{"allowed": n, "partition": ...}`` for a limit per partition.
    global_limit: GlobalLimit | None = None
    #: Starts of the queue's jobs per period on all nodes together: ``{"allowed": n, "period": s}``
    #: (and ``"partition"`` for a limit per partition).
    rate_limit: RateLimit | None = None

    def __post_init__(self) -> None:
        opt.check_queue(self.name)
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValidationError(f"queues.{self.name}.limit", self.limit, "must be an integer >= 1")
        try:
            object.__setattr__(self, "rate_limit", RateLimit.build(self.rate_limit))
            object.__setattr__(self, "global_limit", GlobalLimit.build(self.global_limit))
        except ValidationError as exc:
            raise ValidationError(f"queues.{self.name}.{exc.field}", exc.value, exc.problem) from None
        try:
            object.__setattr__(self, "executor", ExecutorKind(self.executor))
        except ValueError:
            raise ValidationError(
                f"queues.{self.name}.executor",
                self.executor,
                f"must be one of {[k.value for k in ExecutorKind]}",
            ) from None


#: The keys a queue entry given as a mapping may have.
QUEUE_KEYS = ("limit", "executor", "global_limit", "rate_limit")


def parse_queues(value: Any) -> tuple[QueueSettings, ...]:
    """Queues from ``"default:10,mail:5"``, a list of names or specs, or a mapping of name to limit
    or to ``{"limit": n, "executor": "process", "global_limit": m, "rate_limit": {"allowed": a,
    "period": s, "partition": {"args": ["tenant"]}}}``."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, Mapping):
        items = []
        for name, spec in value.items():
            if isinstance(spec, Mapping):
                unknown = sorted(str(key) for key in spec if key not in QUEUE_KEYS)
                if unknown:
                    raise ValidationError(
                        f"queues.{name}.{unknown[0]}",
                        spec[unknown[0]],
                        f"unknown key in a queue entry; expected {', '.join(QUEUE_KEYS)}",
                    )
                items.append(QueueSettings(name, **dict(spec)))
            else:
                items.append(QueueSettings(name, spec))
        return tuple(items)
    if isinstance(value, bytes) or not isinstance(value, Iterable):
        raise ValidationError(
            "queues", value, "must be 'name:limit,...', a list of such names, or a mapping of name to limit"
        )
    result = []
    for item in value:
        if isinstance(item, QueueSettings):
            result.append(item)
            continue
        if not isinstance(item, str):
            raise ValidationError("queues", item, "must be 'name' or 'name:limit'")
        name, _, limit = item.strip().partition(":")
        try:
            result.append(QueueSettings(name.strip(), int(limit) if limit else 10))
        except ValueError as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError("queues", item, "the limit after ':' must be an integer") from None
    return tuple(result)


def fetch_limits(queue: QueueSettings) -> FetchLimits:
    """The fleet-wide limits a producer of ``queue`` passes to each fetch."""
    return FetchLimits(global_limit=queue.global_limit, rate=queue.rate_limit)
