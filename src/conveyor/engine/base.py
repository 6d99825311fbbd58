"""The engine seam: the one interface through which Conveyor touches a database.

An engine owns every statement (insert, fetch, ack, stage, prune, rescue, leadership, notifications,
job queries, queue state). The app and the runtime depend on this Protocol only, so a new database
slots in by implementing it and passing the shared conformance tests.

Every time-dependent operation takes an optional ``now`` (a timezone-aware datetime). ``None`` means
the database's own clock; tests pass a value to control time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from conveyor.acks import Ack
from conveyor.filters import JobFilter
from conveyor.fleet import CronTick, LeaderInfo, ProducerBeat, ProducerInfo, QueueState, RescueResult
from conveyor.job import Job
from conveyor.request import JobRequest

#: Receives the logical channel name and the decoded payload of each notification.
NotificationHandler = Callable[[str, dict[str, Any]], None]


@runtime_checkable
class Engine(Protocol):
    """What every database engine provides. See ``docs/architecture.md`` for how it is used."""

    #: Short engine name ("postgres", "sqlite"), used in messages and metrics.
    name: str

    async def open(self) -> None:
        """Acquire connections. Calling it twice is harmless."""

    async def close(self) -> None:
        """Release every connection."""

    # -- schema ------------------------------------------------------------------------------
    async def install(self) -> int:
        """Create or upgrade the schema (idempotent); return the schema version now installed."""

    async def uninstall(self) -> None:
        """Drop every object the schema installed."""

    async def schema_version(self) -> int | None:
        """The installed schema version, or None when nothing is installed."""

    async def check_schema(self) -> None:
        """Raise SchemaError, saying what to run, unless the schema is installed and current."""

    # -- inserting ---------------------------------------------------------------------------
    async def insert(
        self, requests: Iterable[JobRequest], *, conn: Any = None, now: datetime | None = None
    ) -> list[int]:
        """Insert jobs atomically and return their ids in order.

        With ``conn`` (a caller's connection or session) the insert joins the caller's transaction:
        their commit makes the jobs visible and sends the insert notifications, their rollback
        leaves nothing. Large inputs are written in bounded chunks, never one giant statement.
        """

    def insert_sync(
        self, requests: Iterable[JobRequest], *, conn: Any, now: datetime | None = None
    ) -> list[int]:
        """``insert`` through a caller's synchronous connection or session."""

    # -- managing jobs -----------------------------------------------------------------------
    async def get_job(self, job_id: int) -> Job | None: ...

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        """Matching jobs, newest (highest id) first."""

    async def cancel_jobs(self, criteria: JobFilter, *, now: datetime | None = None) -> list[int]:
        """Cancel every matching job that is not final yet; return the ids cancelled."""

    async def retry_jobs(self, criteria: JobFilter, *, now: datetime | None = None) -> list[int]:
        """Make every matching job that is not available or executing available now."""

    async def delete_jobs(self, criteria: JobFilter) -> list[int]:
        """Delete every matching job that is not executing; return the ids deleted."""

    # -- the hot path ------------------------------------------------------------------------
    async def fetch_jobs(
        self, queue: str, demand: int, *, node: str, producer: str, now: datetime | None = None
    ) -> list[Job]:
        """Claim up to ``demand`` available jobs of ``queue`` (priority, scheduled_at, id order),
        marking them executing by ``[node, producer]`` and spending one attempt each. Safe to call
        from many nodes at once: no job is ever claimed twice."""

    async def ack_jobs(self, acks: Sequence[Ack], *, now: datetime | None = None) -> list[int]:
        """Write many finished attempts in one statement; return the ids written. An ack whose
        job is no longer executing that attempt is skipped."""

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        """Give executing (id, attempt) pairs back as available without spending the attempt."""

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        """Make up to ``limit`` due scheduled/retryable jobs available; return counts per queue and
        wake those queues' producers on every node."""

    # -- notifications -----------------------------------------------------------------------
    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        """Send ``payload`` on the logical channel ``name`` ("insert", "signal", ...)."""

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> Listener:
        """Deliver notifications on the named channels to ``handler(name, payload)`` until the
        returned listener is stopped. After a reconnect the handler gets ("listener", {...}) so the
        node can look again for what it missed."""

    # -- leadership --------------------------------------------------------------------------
    async def elect_leader(
        self, name: str, node: str, ttl: float, *, now: datetime | None = None
    ) -> LeaderInfo | None:
        """Take or renew the lease ``name`` for ``ttl`` seconds; None when another node holds it."""

    async def resign_leader(self, name: str, node: str) -> bool:
        """Drop our lease and announce it on the leader channel."""

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None: ...

    # -- producers, rescue, pruning, cron ------------------------------------------------------
    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        """Insert or refresh the heartbeat rows of a node's producers."""

    async def delete_producers(self, uuids: Sequence[str]) -> None: ...

    async def list_producers(self) -> list[ProducerInfo]: ...

    async def rescue_jobs(
        self,
        *,
        timeout: float,
        backstop: float,
        limit: int = 1000,
        live: Sequence[str] = (),
        now: datetime | None = None,
    ) -> RescueResult:
        """Make jobs of producers silent for ``timeout`` seconds available again (discarded when
        exhausted); as a backstop, also executing jobs with no producer row older than ``backstop``.
        Producers whose uuid is in ``live`` (the caller's own, known to be running) are never dead,
        however old their rows; dead producers that own no executing job any more are deleted."""

    async def prune_jobs(
        self, *, max_age: float, limit: int, keep_per_queue: int | None = None, now: datetime | None = None
    ) -> int:
        """Delete one bounded batch of final jobs older than ``max_age``; return the count."""

    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick that nobody inserted before; return the new ids."""

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        """The latest tick recorded for each named cron entry."""

    # -- queue state -------------------------------------------------------------------------
    async def save_queue_state(
        self, name: str, queue: str, *, paused: bool | None = None, limit: int | None = None
    ) -> None:
        """Persist a pause or a limit so nodes starting the queue later apply it."""

    async def load_queue_states(self, name: str) -> dict[str, QueueState]: ...

    async def still_executing(self, attempts: Sequence[tuple[int, int]]) -> set[int]:
        """The ids among ``attempts`` (job id, attempt) whose rows are still executing that attempt
        (the others were cancelled, deleted, or rescued and maybe claimed again, behind the
        caller's back)."""

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        """(id, attempt) of the jobs executing for these producers, claimed more than ``older_than``
        seconds ago. A producer that is not running one of them lost the reply to the fetch that
        claimed it (the claim committed, the answer never came) and gives it back."""

    # -- failures ----------------------------------------------------------------------------
    def is_transient(self, exc: BaseException) -> bool:
        """Is ``exc`` (raised by one of these methods) worth retrying unchanged?

        True when the database could not be reached, was busy, restarting or out of resources:
        the same statement may succeed later. False when the statement itself was refused (a value
        it carried is invalid): retrying it unchanged would fail forever, so the caller must
        isolate what is wrong (the acker splits its batch).
        """


class Listener(Protocol):
    async def stop(self) -> None: ...
