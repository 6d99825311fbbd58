"""The jobs role: reading and managing stored jobs by id or filter."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from conveyor.filters import JobFilter
from conveyor.job import Job


class Jobs(Protocol):
    """Get, list, cancel, retry and delete jobs (``engine/*/jobs.py``)."""

    async def get_job(self, job_id: int) -> Job | None:
        """The job with this id, or None. A row that cannot be decoded still comes back, with
        ``Job.unreadable`` saying why."""

    async def list_jobs(self, criteria: JobFilter) -> list[Job]:
        """Matching jobs, newest (highest id) first, at most ``criteria.limit`` (100 when None).

        Criteria combine with AND; each list matches any of its values, except ``tags``, which
        matches jobs carrying all of them; ``before_id`` keeps ids below it (the next page),
        ``after_id`` ids above it."""

    def list_jobs_sync(self, criteria: JobFilter, *, conn: Any) -> list[Job]:
        """``list_jobs`` through a caller's synchronous connection (as ``insert_sync`` takes), in its
        transaction: the jobs it inserted and has not committed are listed too."""

    async def cancel_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        """Cancel every matching job that is not final yet (available, scheduled, retryable,
        executing): state ``cancelled``, ``cancelled_at`` = now. Final jobs are left alone. With
        ``criteria.limit``, the lowest matching ids go first. Return the ids cancelled, ascending.

        For each job that was executing, send ``{"action": "pkill", "job_id": id}`` on "signal" so
        its node stops it; that node's late ack no longer applies (the row is not executing). List
        each such job in its producer's row (by ``attempted_by[1]``, the producer uuid), so it keeps
        its ordered lock and global-limit slot until that producer's beats stop holding it (see
        ``record_producers``).

        ``conn``, here and in ``retry_jobs``/``delete_jobs``: a caller's async connection or
        session, as ``insert`` takes; the change and its notifications then belong to the caller's
        transaction (commit publishes both, rollback leaves nothing)."""

    async def retry_jobs(
        self, criteria: JobFilter, *, now: datetime | None = None, conn: Any = None
    ) -> list[int]:
        """Make every matching job that is not available or executing available now:
        ``scheduled_at`` = now, ``completed_at``/``cancelled_at``/``discarded_at`` cleared,
        ``attempt`` and ``errors`` kept, and ``max_attempts`` raised to ``attempt + 1`` if the job
        had used them all up (one more try). With ``criteria.limit``, the lowest ids go first.
        Return the ids retried, ascending; notify "insert" once per queue among them.

        A workflow step with dependencies never goes on before they finish: a ``suspended`` one is
        left alone (it waits already); any other is held ``suspended`` instead, in the same
        statement or transaction as the rest, then settled (``settle_steps``) once that is written:
        it goes on at once if its dependencies completed, waits if one is unfinished (a dependency
        this call retried too), or is cancelled again by its policy if one stays failed, and then
        is not among the ids returned."""

    async def delete_jobs(self, criteria: JobFilter, *, conn: Any = None) -> list[int]:
        """Delete every matching job that is not executing (its node still owns it); with
        ``criteria.limit``, the lowest ids first. Return the ids deleted, ascending."""
