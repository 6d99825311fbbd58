"""The other roles the MySQL engine does not implement yet (see ``pending``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from conveyor.acks import Ack
from conveyor.engine.mysql.pending import pending
from conveyor.engine.roles.notifications import Listener, NotificationHandler
from conveyor.filters import JobFilter
from conveyor.fleet import QueuePoll
from conveyor.job import Job
from conveyor.limits import FetchLimits
from conveyor.request import JobRequest


class PendingRoles:
    """Every method of these roles, each raising ``PendingRoleError`` until the MySQL engine
    implements it (an implementation in a class before this one in the MRO replaces it)."""

    async def get_job(self, job_id: int) -> Job | None:
        raise pending("Jobs", "get_job")

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        raise pending("Jobs", "list_jobs")

    def list_jobs_sync(self, criteria: JobFilter, *, conn: Any) -> list[Job]:
        raise pending("Jobs", "list_jobs_sync")

    async def cancel_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        raise pending("Jobs", "cancel_jobs")

    async def retry_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        raise pending("Jobs", "retry_jobs")

    async def delete_jobs(self, criteria: JobFilter, *, conn: Any = None) -> list[int]:
        raise pending("Jobs", "delete_jobs")

    async def fetch_jobs(
        self,
        queue: str,
        demand: int,
        *,
        node: str,
        producer: str,
        now: datetime | None = None,
        limits: FetchLimits | None = None,
        ended: Sequence[tuple[int, int]] = (),
        dead_after: float | None = None,
    ) -> list[Job]:
        raise pending("HotPath", "fetch_jobs")

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        raise pending("HotPath", "ack_jobs")

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        raise pending("HotPath", "release_jobs")

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        raise pending("HotPath", "stage_jobs")

    async def waiting_queues(self, queues: Sequence[str]) -> set[str]:
        raise pending("Polling", "waiting_queues")

    async def poll_queues(self, name: str, queues: Sequence[str], *, awake: Sequence[str]) -> QueuePoll:
        raise pending("Polling", "poll_queues")

    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        raise pending("Notifications", "notify")

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> Listener:
        raise pending("Notifications", "listen")

    async def insert(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any = None,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> Sequence[int]:
        raise pending("Inserting", "insert")

    def insert_sync(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> Sequence[int]:
        raise pending("Inserting", "insert_sync")
