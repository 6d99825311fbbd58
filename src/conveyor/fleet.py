"""Values describing the fleet: producers (a queue running on a node) and the leader."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from conveyor.limits import GlobalLimit, RateLimit
from conveyor.request import JobRequest


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One running queue on one node, as its heartbeat row says."""

    uuid: str
    name: str
    node: str
    queue: str
    meta: dict[str, Any]
    started_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ProducerBeat:
    """What a producer reports in each heartbeat."""

    uuid: str
    queue: str
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class LeaderInfo:
    node: str
    elected_at: datetime
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RescueResult:
    available: tuple[int, ...]
    discarded: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CronTick:
    """One due tick of one cron entry: the job to insert unless the tick was handled already."""

    name: str
    #: The tick's moment as naive UTC (the uniqueness key together with ``name``).
    tick: datetime
    request: JobRequest


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue's persisted settings; None means "as configured"."""

    paused: bool | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One queue on one live node, from its heartbeat."""

    node: str
    queue: str
    limit: int
    running: int
    paused: bool
    started_at: datetime
    updated_at: datetime
    #: The fleet-wide limits the node claims under (None where the queue has none).
    global_limit: GlobalLimit | None = None
    rate_limit: RateLimit | None = None
