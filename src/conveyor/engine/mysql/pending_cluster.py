"""The cluster roles the MySQL engine does not implement yet (see ``pending``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from conveyor.engine.mysql.pending import pending
from conveyor.fleet import (
    CronTick,
    LeaderInfo,
    ProducerBeat,
    ProducerInfo,
    QueueState,
    RescueResult,
    StoredCron,
    StoredQueue,
)
from conveyor.retention import Pruned, Retention


class PendingCluster:
    """Every method of these roles, each raising ``PendingRoleError`` until the MySQL engine
    implements it (an implementation in a class before this one in the MRO replaces it)."""

    async def elect_leader(
        self,
        name: str,
        node: str,
        ttl: float,
        *,
        now: datetime | None = None,
        take_from_foreign: bool = False,
        stale_after: float | None = None,
    ) -> LeaderInfo | None:
        raise pending("Leadership", "elect_leader")

    async def resign_leader(self, name: str, node: str) -> bool:
        raise pending("Leadership", "resign_leader")

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        raise pending("Leadership", "get_leader")

    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        raise pending("Producers", "record_producers")

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        raise pending("Producers", "delete_producers")

    async def list_producers(self) -> list[ProducerInfo]:
        raise pending("Producers", "list_producers")

    async def age_priorities(self, *, after: float, limit: int, now: datetime | None = None) -> list[int]:
        raise pending("Producers", "age_priorities")

    async def rescue_jobs(
        self,
        *,
        timeout: float,
        backstop: float,
        limit: int = 1000,
        live: Sequence[str] = (),
        foreign_timeout: float | None = None,
        now: datetime | None = None,
    ) -> RescueResult:
        raise pending("Producers", "rescue_jobs")

    async def still_executing(
        self, attempts: Sequence[tuple[int, int]], *, producers: Sequence[str] | None = None
    ) -> set[int]:
        raise pending("Producers", "still_executing")

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        raise pending("Producers", "lost_claims")

    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        raise pending("Pruning", "prune_jobs")

    async def count_prunable(self, retention: Retention, *, now: datetime | None = None) -> Pruned:
        raise pending("Pruning", "count_prunable")

    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        raise pending("Cron", "insert_cron_jobs")

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        raise pending("Cron", "last_cron_ticks")

    async def list_crons(self) -> list[StoredCron]:
        raise pending("StoredCrons", "list_crons")

    async def add_cron(self, cron: StoredCron) -> bool:
        raise pending("StoredCrons", "add_cron")

    async def update_cron(self, cron: StoredCron) -> bool:
        raise pending("StoredCrons", "update_cron")

    async def delete_cron(self, name: str) -> bool:
        raise pending("StoredCrons", "delete_cron")

    async def list_stored_queues(self) -> list[StoredQueue]:
        raise pending("StoredQueues", "list_stored_queues")

    async def put_stored_queue(self, queue: StoredQueue) -> None:
        raise pending("StoredQueues", "put_stored_queue")

    async def delete_stored_queue(self, name: str) -> bool:
        raise pending("StoredQueues", "delete_stored_queue")

    async def save_queue_state(
        self,
        name: str,
        queue: str,
        *,
        paused: bool | None = None,
        limit: int | None = None,
        limits: Mapping[str, Any] | None = None,
    ) -> None:
        raise pending("QueueStates", "save_queue_state")

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        raise pending("QueueStates", "load_queue_states")
