"""Values describing the fleet: producers (a queue running on a node) and the leader."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson

from conveyor.limits import GlobalLimit, RateLimit
from conveyor.request import JobRequest

#: What Conveyor's producer rows carry in their meta, so a rescuer tells them from the rows of other
#: runtimes on the database (oban-py, Elixir Oban), which beat on other schedules.
OWN_PRODUCER: dict[str, Any] = {"runtime": "conveyor"}
#: How an engine reads a timestamp column back (its driver's value, or SQLite's text) as an aware UTC
#: datetime; None stays None.
TimeDecoder = Callable[[Any], datetime | None]


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

    @property
    def is_conveyor(self) -> bool:
        """Whether a Conveyor node wrote this row (else another runtime did: oban-py, Elixir)."""
        return isinstance(self.meta, dict) and bool(self.meta.get("runtime") == OWN_PRODUCER["runtime"])

    def alive(self, now: datetime, timeout: float, foreign_timeout: float) -> bool:
        """Whether the row is fresh: refreshed within ``timeout`` seconds of ``now`` if Conveyor's,
        within ``foreign_timeout`` if another runtime's."""
        limit = timeout if self.is_conveyor else foreign_timeout
        return self.updated_at >= now - timedelta(seconds=limit)


@dataclass(frozen=True, slots=True)
class ProducerBeat:
    """What a producer reports in each heartbeat."""

    uuid: str
    queue: str
    meta: dict[str, Any]
    #: The jobs whose runs this producer still holds (runs on): a cancelled job among them keeps its
    #: ordered lock and global-limit slot (``Engine.record_producers``).
    holding: tuple[int, ...] = ()


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
    #: Fleet-wide limits kept by ``scale --persist``, as a scale signal carries them
    #: (``global_limit``, ``rate_limit``; a key holding None lifts that limit).
    limits: dict[str, Any] = field(default_factory=dict)


def with_limits(states: dict[str, QueueState], rows: Iterable[Sequence[Any]]) -> dict[str, QueueState]:
    """``states`` with the kept fleet-wide limits of each (queue, limits) row: limits as a mapping
    or JSON text; anything else (another tool's junk) is left out."""
    result = dict(states)
    for queue, limits in rows:
        if isinstance(limits, str | bytes):
            try:
                limits = orjson.loads(limits)
            except orjson.JSONDecodeError:
                continue
        if isinstance(limits, dict) and limits:
            result[queue] = dataclasses.replace(result.get(queue, QueueState()), limits=limits)
    return result


@dataclass(frozen=True, slots=True)
class QueuePoll:
    """A node's one poll (``Engine.poll_queues``): the queues holding jobs a fetch could claim, and
    the persisted states of its queues (so a pause or limit whose signal it missed still reaches it)."""

    waiting: frozenset[str]
    states: dict[str, QueueState]


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


@dataclass(frozen=True, slots=True)
class StoredCron:
    """A cron entry stored in the database (``oban_crons``, Oban Pro DynamicCron's table), as the
    engines read and write it: ``opts`` holds the entry's args, time zone, back-fill and the job
    options it was given. ``conveyor.dynamic_cron`` turns one into a ``CronEntry``."""

    name: str
    expression: str
    worker: str
    opts: dict[str, Any] = field(default_factory=dict)
    paused: bool = False
    inserted_at: datetime | None = None
    updated_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any], decode_time: TimeDecoder) -> StoredCron:
        """An entry from its row as every engine's ``list_crons.sql`` selects it (name, expression,
        worker, opts, paused, inserted_at, updated_at); only the times are read the engine's way."""
        return cls(
            name=row[0],
            expression=row[1],
            worker=row[2],
            opts=json_mapping(row[3]),
            paused=bool(row[4]),
            inserted_at=decode_time(row[5]),
            updated_at=decode_time(row[6]),
        )

    def params(self) -> dict[str, Any]:
        """The parameters every engine's ``add_cron.sql`` and ``update_cron.sql`` take (opts as
        JSON text; the times are the statements')."""
        opts = orjson.dumps(self.opts).decode()
        return {
            "name": self.name,
            "expression": self.expression,
            "worker": self.worker,
            "opts": opts,
            "paused": bool(self.paused),
        }


@dataclass(frozen=True, slots=True)
class StoredQueue:
    """A queue declared in the database (``oban_queues``, Oban Pro DynamicQueues' table), as the
    engines read and write it: ``opts`` holds its limits and pause (``local_limit``,
    ``global_limit``, ``rate_limit``, ``paused``), ``only`` which nodes run it (``{"nodes": [...]}``;
    empty: every node). ``conveyor.dynamic_queues`` checks and reads them."""

    name: str
    opts: dict[str, Any] = field(default_factory=dict)
    only: dict[str, Any] = field(default_factory=dict)
    updated_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any], decode_time: TimeDecoder) -> StoredQueue:
        """A queue from its row as every engine's ``list_stored_queues.sql`` selects it (name, opts,
        only, updated_at); only the time is read the engine's way."""
        opts, only = json_mapping(row[1]), json_mapping(row[2])
        return cls(name=row[0], opts=opts, only=only, updated_at=decode_time(row[3]))

    def params(self) -> dict[str, Any]:
        """The parameters every engine's ``put_stored_queue.sql`` takes (opts and only as JSON text)."""
        return {
            "name": self.name,
            "opts": orjson.dumps(self.opts).decode(),
            "only": orjson.dumps(self.only).decode(),
        }


def json_mapping(value: object) -> dict[str, Any]:
    """A JSON column of Conveyor's own tables (jsonb already decoded by the driver, or text) as a
    dict; anything else {}. A row may have been written by another client (Oban Pro, a hand edit):
    a column that is not a JSON object reads as an empty one, so one bad row never stops the
    listing of the others."""
    if isinstance(value, str | bytes):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}
