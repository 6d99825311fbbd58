"""The hot path role: what a busy node runs hundreds of times a second (claim, ack) and the
statements that move jobs between claimable and not (release, stage)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from conveyor.acks import Ack
from conveyor.job import Job
from conveyor.limits import FetchLimits


class HotPath(Protocol):
    """Fetch, ack, release and stage (``engine/*/hot_path.py``)."""

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
        """Claim up to ``demand`` (>= 0) available jobs of ``queue`` whose ``attempt`` is below
        ``max_attempts``, in (priority, scheduled_at, id) order, and return them in that order.

        Each claimed job becomes ``executing`` with ``attempt`` + 1, ``attempted_at`` = now and
        ``attempted_by`` = ``(node, producer)`` (rescue and ``lost_claims`` find a producer's jobs
        by it). Scheduled, retryable and final jobs are never claimed, whatever their time.
        Safe to call from many tasks, processes and nodes at once: no job is claimed twice.
        Sends no notification.

        ``limits`` adds caps counted across the fleet, which hold however many nodes fetch at once
        (claims of one queue under a cap are serialised): with ``global_limit``, the claim stops
        where the queue's executing jobs, on every node together, would exceed it; with ``rate``, it
        starts no more than ``rate.allowed`` less the starts recorded for the queue in the ``rate.period``
        seconds before now (any start recorded after that moment counts, later ones included), and
        records its own. Under limits the result is a ``Claimed`` list whose ``capped`` says whether a
        limit, rather than an empty queue, stopped the claim.

        ``ended`` lists (job id, attempt) of this node's jobs that have finished but whose acks may not
        be written yet: a global limit does not count them as running (a row still executing that
        attempt is one of them; once acked, or claimed again under a new attempt, it is not).

        ``dead_after`` (seconds): nor does it count the executing jobs of a producer whose row has
        ``fleet.OWN_PRODUCER`` and an ``updated_at`` more than ``dead_after`` before now (other than
        ``producer``): their node stopped beating, so their slots are free before the leader
        rescues them. None: every executing job counts."""

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        """Write many finished attempts at once; return the ids written (any order).

        An ack applies only while its job is still ``executing`` the same ``attempt`` and, given
        ``node``, while that node holds the claim (``attempted_by[0]``: a node acks only its own
        runs, even where a claim undone by a crash of the server was taken again elsewhere with the
        same attempt); any other ack (a stale or future attempt, another node's claim, a job
        cancelled, rescued, released, deleted or acked already, an unknown id) is skipped and
        changes nothing. What an applied ack writes:

        - ``state`` = the ack's; ``completed_at``/``discarded_at``/``cancelled_at`` = now for
          completed/discarded/cancelled; ``scheduled_at`` = now + ``schedule_in`` when given;
        - ``error``, when given, appended to ``errors``;
        - ``meta`` merged into the job's meta key by key (top level; a given key replaces the old
          value, nested objects included; null values are kept);
        - a snooze (``snoozed``) gives the attempt back (``attempt`` - 1) and counts
          ``meta["snoozed"]`` up by one (its ``meta`` is merged too).

        Values another client stored in ``errors``/``meta`` never make the batch fail. A batch
        holds one ack per attempt; given two for the same attempt, exactly one applies (which one
        is unspecified: PostgreSQL and SQLite pick differently) and the id is returned once.
        Notifies "ended" with the ids written."""

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        """Give executing (id, attempt) pairs back as available without spending the attempt
        (``attempt`` - 1), at shutdown. Pairs whose job is not executing that attempt are skipped.
        Return the ids released; notify "insert" once per queue among them."""

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        """Make up to ``limit`` (>= 0) due scheduled/retryable jobs (``scheduled_at`` <= now)
        available, earliest ``scheduled_at`` (then id) first. Return ``{queue: count}`` of the jobs
        staged (``{}`` for none) and notify "insert" once per queue among them, waking those
        queues' producers on every node."""
