"""The cluster roles: what nodes sharing one database coordinate through it (``engine/*/cluster.py``).

``Cluster`` gathers them; a runtime service that needs one duty can name the narrower role."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

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


class Leadership(Protocol):
    """The leader lease, one per instance name (``_runtime/leadership.py``)."""

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
        """Take or renew the lease ``name`` for ``ttl`` seconds; None when another node holds it.

        A lease held by ``node`` is renewed (``expires_at`` = now + ttl, ``elected_at`` kept); one
        held by another node is taken only once strictly past its ``expires_at`` (``elected_at`` =
        now). Leases of different names are independent. With ``take_from_foreign`` (a mixed
        fleet), a live lease is taken at once from a node of another runtime: one that has producer
        rows and none with ``fleet.OWN_PRODUCER`` (an oban-py node). With ``stale_after``, a live
        lease is also taken from a node whose heartbeats stopped: it has producer rows of this
        instance with ``fleet.OWN_PRODUCER`` and every one of them is more than ``stale_after``
        seconds old (a node killed or frozen while leading; rescue judges the same rows dead)."""

    async def resign_leader(self, name: str, node: str) -> bool:
        """Drop the lease ``name`` if ``node`` holds it, and announce it on "leader"
        (``{"action": "resign", "node": node, "name": name}``) so another node takes over at once.
        Return whether a lease was dropped (False, and no notification, otherwise)."""

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        """The holder of the lease ``name`` while ``now`` <= its ``expires_at``, else None."""


class Producers(Protocol):
    """Heartbeat rows, the rescue of dead producers' jobs, and what a node's claims became
    (``_runtime/heartbeat.py``, ``_runtime/duties.py``)."""

    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        """Insert or refresh the heartbeat rows of a node's producers (by uuid): a new row starts
        with ``started_at`` = ``updated_at`` = now; a known one gets the beat's meta and
        ``updated_at`` = now. An empty ``beats`` does nothing.

        The row also keeps the jobs a cancel stopped while the producer ran them (``cancel_jobs``
        lists them): those still in the beat's ``holding`` stay listed, the others are forgotten.
        A listed job, whatever its state, keeps its ordered lock and counts against its queue's
        global limit in ``fetch_jobs``, so a run that cannot stop at once (a thread) is never
        overlapped; deleting the row (a clean stop, or the leader forgetting a dead node) lets go."""

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        """Delete these producers' rows (a clean stop); unknown uuids are ignored."""

    async def list_producers(self) -> list[ProducerInfo]:
        """Every producer row, by node then queue."""

    async def age_priorities(self, *, after: float, limit: int, now: datetime | None = None) -> list[int]:
        """Priority aging: raise by one step (``priority`` - 1; 0 is the highest) the priority of up
        to ``limit`` available jobs with ``priority`` > 0 that have waited since ``scheduled_at``
        more than ``after`` seconds before now, oldest first; return their ids. Each call is one
        step: called every interval, a job keeps gaining a step per call while it waits."""

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
        """Rescue up to ``limit`` orphaned executing jobs (lowest ids first) and return them.

        Orphans are the executing jobs of dead producers and, as a backstop, executing jobs with no
        producer row at all claimed more than ``backstop`` seconds ago (dated by ``scheduled_at``
        when another client left ``attempted_at`` NULL: no attempt begins before its job is due).
        A producer row whose meta
        holds ``"runtime": "conveyor"`` (``fleet.OWN_PRODUCER``) is dead when its ``updated_at`` is
        more than ``timeout`` seconds before now; any other row (another runtime's: oban-py,
        Elixir Oban) when it is more than ``foreign_timeout`` seconds old, and never while
        ``foreign_timeout`` is None (meta that is not an object counts as another runtime's). A
        job whose producer row is fresh is never touched, however long it runs; producers whose
        uuid is in ``live`` (the caller's own, known to be running) are never dead, however old
        their rows.

        A rescued job becomes ``available`` (its attempt stays spent) or, when ``attempt`` >=
        ``max_attempts``, ``discarded`` with ``discarded_at`` = now; either way ``meta["rescued"]``
        counts up by one and an entry ``{"attempt", "at", "error"}`` is appended to ``errors``: the
        attempt, now (ISO 8601, UTC), and why (the node, from ``attempted_by``, stopped sending
        heartbeats, or the backstop; rescued or discarded). Notify "insert" once per queue that got
        available jobs. Then delete the dead producers (outside ``live``) that own no executing job
        any more; one that still does (beyond ``limit``) stays until a later pass rescues the rest."""

    async def still_executing(
        self, attempts: Sequence[tuple[int, int]], *, producers: Sequence[str] | None = None
    ) -> set[int]:
        """The ids among ``attempts`` (job id, attempt) whose rows are still executing that attempt
        (the others were cancelled, deleted, or rescued and maybe claimed again, behind the
        caller's back); with ``producers``, only where the claim is one of theirs
        (``attempted_by``'s second item): a claim that a crash of the server undid can be taken
        again elsewhere with the same attempt."""

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        """(id, attempt) of the jobs executing for these producers (by ``attempted_by``), claimed
        more than ``older_than`` seconds before now (strictly); ``[]`` for no producers. A producer
        that is not running one of them lost the reply to the fetch that claimed it (the claim
        committed, the answer never came) and gives it back."""


class Pruning(Protocol):
    """Deleting finished jobs a ``Retention`` lets go (``Pruner``, ``conveyor prune``)."""

    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        """Delete at most ``limit`` final jobs that ``retention`` lets go; return how many went,
        by state. Fewer than ``limit`` means nothing more is due (rows other transactions hold
        locked are skipped until a later call).

        Only completed, cancelled and discarded jobs are ever deleted, in statements of one bounded
        batch each (``engine/_prune_plan.py`` gives the order). Each final job is governed by the
        first rule of ``retention.ordered`` that matches its queue, worker and state, else by the
        defaults. A governed job goes when it ended (``completed_at``/``cancelled_at``/
        ``discarded_at``) more than the rule's ``max_age`` seconds before now, or, among the jobs
        of its rule that are young enough to stay, when it is not one of the newest ``max_rows``
        (highest ids; for the defaults, ``keep_per_queue`` per queue). Then, with
        ``retention.max_rows``, the final jobs beyond that many newest of those left go too. A
        finished workflow step (``meta.workflow_id``) is never deleted while a step of its workflow
        is ``suspended``, and it counts in no rule's rows. Also forget cron ticks older than
        ``max(retention.max_age, 1 day)`` (none when it is None), except each entry's latest
        (``last_cron_ticks`` stays right)."""

    async def count_prunable(self, retention: Retention, *, now: datetime | None = None) -> Pruned:
        """How many final jobs calling ``prune_jobs`` until it comes back short would delete, by
        state, changing nothing (barring jobs that end or age in between)."""


class Cron(Protocol):
    """Cron ticks, each inserted once across the fleet (``CronScheduler``)."""

    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick (name, tick moment) that nobody handled before; return
        the new ids, ascending.

        A tick is claimed by recording it, so concurrent leaders and repeated calls insert it
        once, and a tick listed twice in one call is one job. Each job is inserted ``available``
        with ``scheduled_at`` = ``inserted_at`` = now and the request's queue, worker, args, meta,
        tags, priority and max_attempts. Notify "insert" once per queue that got a job. Recorded
        ticks are kept until ``prune_jobs`` forgets them (see there)."""

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        """The latest tick recorded for each named cron entry (aware UTC); entries never ticked
        are absent."""


class StoredCrons(Protocol):
    """Cron entries stored in the database (``oban_crons``), read by the leader at every tick."""

    async def list_crons(self) -> list[StoredCron]:
        """Every stored entry, by name (``opts`` decoded, times aware UTC)."""

    async def add_cron(self, cron: StoredCron) -> bool:
        """Store a new entry; False (and nothing changed) when one of that name exists."""

    async def update_cron(self, cron: StoredCron) -> bool:
        """Replace the expression, worker, opts and paused flag of the entry named ``cron.name``
        (its ``lock_version`` goes up by one, ``updated_at`` is now); False when none exists."""

    async def delete_cron(self, name: str) -> bool:
        """Delete the stored entry ``name``; False when none existed. Its ticks stay recorded."""


class StoredQueues(Protocol):
    """Queues declared in the database (``oban_queues``), which nodes start and stop at runtime."""

    async def list_stored_queues(self) -> list[StoredQueue]:
        """Every declared queue, by name (``opts`` and ``only`` decoded: a value that is not a JSON
        object reads as empty; ``updated_at`` aware UTC)."""

    async def put_stored_queue(self, queue: StoredQueue) -> None:
        """Declare ``queue.name`` with its ``opts`` and ``only``, or replace its declaration."""

    async def delete_stored_queue(self, name: str) -> bool:
        """Forget the declared queue ``name``; False when none was declared."""


class QueueStates(Protocol):
    """Persisted pauses and limits of queues (fleet control)."""

    async def save_queue_state(
        self,
        name: str,
        queue: str,
        *,
        paused: bool | None = None,
        limit: int | None = None,
        limits: Mapping[str, Any] | None = None,
    ) -> None:
        """Persist a pause, a limit or fleet-wide limits of ``queue`` for the instance ``name`` so
        nodes starting the queue later apply them. None leaves that part as it was; ``limits`` (as a
        scale signal carries them) replace the keys they name and keep the others."""

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        """Every persisted queue state of the instance ``name``, by queue (parts never saved are
        None)."""


class Cluster(Leadership, Producers, Pruning, Cron, StoredCrons, StoredQueues, QueueStates, Protocol):
    """Every cluster duty."""
