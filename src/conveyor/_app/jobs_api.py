"""The documented API of ``Conveyor`` for the jobs in the database: read, cancel, retry, delete,
count them, measure what finished and failed, and prune the final ones. ``Conveyor`` inherits it;
each method is a check of its arguments and one engine call (see ``conveyor.app`` for the naming)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, overload

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor._options import check_aware, check_job_id
from conveyor._runtime.clock import Clock
from conveyor._runtime.duties import prune_all
from conveyor.errors import JobNotFoundError, ValidationError
from conveyor.filters import JobFilter
from conveyor.job import Job
from conveyor.recorded import decode_result
from conveyor.retention import Pruned, Retention
from conveyor.settings import Settings
from conveyor.stats import EXACT_UP_TO, JobCount, JobStats, QueueCounts, StatsQuery, countable, exact_limit


class JobsApi:
    """Reading and changing stored jobs, counts and stats, retention (part of ``Conveyor``)."""

    settings: Settings
    clock: Clock
    _binding: EngineBinding

    async def get_job(self, job_id: int) -> Job | None:
        """The job with this id, or None."""
        job_id = check_job_id(job_id, "job_id")
        return await self._binding.run(lambda e: e.get_job(job_id))

    get_job_sync = blocking_twin(get_job)

    async def list_jobs(self, /, criteria: JobFilter | None = None, **filters: Any) -> list[Job]:
        """Jobs matching a filter (state, queue, worker, tags, ids), newest first, paged."""
        found = _criteria(criteria, filters)
        return await self._binding.run(lambda e: e.list_jobs(found))

    _list_jobs_sync = blocking_twin(list_jobs)

    def list_jobs_sync(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[Job]:
        """``list_jobs`` from plain code. With ``conn`` (a synchronous connection of yours, as
        ``enqueue_sync`` takes), read in your transaction: the jobs you enqueued there and have not
        committed are listed too."""
        if conn is None:
            return self._list_jobs_sync(criteria, **filters)
        return self._binding.statement_engine().list_jobs_sync(_criteria(criteria, filters), conn=conn)

    async def cancel_jobs(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[int]:
        """Cancel matching jobs that are not final; return the ids cancelled. With ``conn`` (an async
        connection or session of yours), inside your transaction: your commit makes it happen."""
        found = _criteria(criteria, filters)
        return await self._binding.run(lambda e: e.cancel_jobs(found, conn=conn), conn)

    cancel_jobs_sync = blocking_twin(cancel_jobs)

    async def retry_jobs(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[int]:
        """Make matching jobs available again now; return their ids. A workflow step goes on only
        once its dependencies finish (see ``Engine.retry_jobs``). ``conn``: as ``cancel_jobs``."""
        found = _criteria(criteria, filters)
        return await self._binding.run(lambda e: e.retry_jobs(found, conn=conn), conn)

    retry_jobs_sync = blocking_twin(retry_jobs)

    async def delete_jobs(
        self, /, criteria: JobFilter | None = None, *, conn: Any = None, **filters: Any
    ) -> list[int]:
        """Delete matching jobs that are not executing; return their ids. ``conn``: as
        ``cancel_jobs``."""
        found = _criteria(criteria, filters)
        return await self._binding.run(lambda e: e.delete_jobs(found, conn=conn), conn)

    delete_jobs_sync = blocking_twin(delete_jobs)

    @overload
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: Literal[False] = False,
        exact_up_to: None = None,
        **filters: Any,
    ) -> int: ...
    @overload
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: Literal[True],
        exact_up_to: int | None = None,
        **filters: Any,
    ) -> JobCount: ...
    @overload
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: bool,
        exact_up_to: int | None = None,
        **filters: Any,
    ) -> int | JobCount: ...
    async def count_jobs(
        self,
        /,
        criteria: JobFilter | None = None,
        *,
        estimate: bool = False,
        exact_up_to: int | None = None,
        **filters: Any,
    ) -> int | JobCount:
        """How many jobs match a filter (the criteria of ``list_jobs``, without ``limit``): exactly, as
        an int. With ``estimate=True``, a ``JobCount``: exact up to ``exact_up_to`` matches (default
        ``stats.EXACT_UP_TO``), an estimate marked as such above (or when an exact count would be
        slow), so the call stays fast on a table of millions of jobs."""
        if not isinstance(estimate, bool):
            raise ValidationError("estimate", estimate, "must be True or False")
        if exact_up_to is not None and not estimate:
            raise ValidationError("exact_up_to", exact_up_to, "applies only with estimate=True")
        limit = exact_limit(EXACT_UP_TO if exact_up_to is None else exact_up_to)
        found = _criteria(criteria, filters)
        countable(found)
        if estimate:
            return await self._binding.run(lambda e: e.estimate_jobs(found, exact_up_to=limit))
        return await self._binding.run(lambda e: e.count_jobs(found))

    count_jobs_sync = blocking_twin(count_jobs)

    async def queue_counts(self, *, now: datetime | None = None) -> list[QueueCounts]:
        """Per queue holding jobs, by name: the jobs in each state (some estimated on a large
        PostgreSQL table, see ``QueueCounts.estimated``) and the oldest available job's age."""
        if now is not None:
            check_aware("now", now)
        return await self._binding.run(lambda e: e.queue_counts(now=now))

    queue_counts_sync = blocking_twin(queue_counts)

    async def job_stats(
        self,
        *,
        window: float = 3600.0,
        bucket: float = 60.0,
        queues: str | Iterable[str] | None = None,
        now: datetime | None = None,
    ) -> JobStats:
        """What finished and what failed over the last ``window`` seconds, in buckets of ``bucket``
        seconds, for every queue or only ``queues``: see ``JobStats`` for each figure."""
        query = StatsQuery(window=window, bucket=bucket, queues=queues)  # type: ignore[arg-type]
        if now is not None:
            check_aware("now", now)
        return await self._binding.run(lambda e: e.job_stats(query, now=now))

    job_stats_sync = blocking_twin(job_stats)

    async def get_result(self, job_id: int) -> Any:
        """The value a completed job recorded; LookupError if it recorded none or does not exist."""
        return _result_of(job_id, await self.get_job(job_id))

    get_result_sync = blocking_twin(get_result)

    async def cancel_job(self, job_id: int) -> bool:
        """Cancel one job by id; False when it does not exist or is already final."""
        return bool(await self.cancel_jobs(ids=[job_id]))

    cancel_job_sync = blocking_twin(cancel_job)

    async def retry_job(self, job_id: int) -> bool:
        """Make one job available again now, by id; False when it does not exist or is executing or
        available already (see ``retry_jobs``)."""
        return bool(await self.retry_jobs(ids=[job_id]))

    retry_job_sync = blocking_twin(retry_job)

    async def delete_job(self, job_id: int) -> bool:
        """Delete one job by id; False when it does not exist or is executing (see ``delete_jobs``)."""
        return bool(await self.delete_jobs(ids=[job_id]))

    delete_job_sync = blocking_twin(delete_job)

    # -- retention ---------------------------------------------------------------------------
    async def prune(
        self,
        retention: Retention | None = None,
        *,
        now: datetime | None = None,
        on_batch: Callable[[Pruned], None] | None = None,
    ) -> Pruned:
        """Delete the final jobs ``retention`` (default: the settings' rules, ``prune_max_age``,
        ``prune_keep_per_queue`` and ``prune_max_rows``) lets go, now, in batches of
        ``prune_limit``; return how many went, by state. ``on_batch`` sees the running total after
        each batch (from the portal's thread in ``prune_sync``)."""
        policy = self.settings.retention if retention is None else _retention(retention)
        limit = self.settings.prune_limit
        moment = self.clock.database_now() if now is None else now
        return await self._binding.run(
            lambda e: prune_all(e, policy, limit=limit, now=moment, on_batch=on_batch)
        )

    async def count_prunable(
        self, retention: Retention | None = None, *, now: datetime | None = None
    ) -> Pruned:
        """How many final jobs ``prune`` would delete, by state, deleting nothing."""
        policy = self.settings.retention if retention is None else _retention(retention)
        moment = self.clock.database_now() if now is None else now
        return await self._binding.run(lambda e: e.count_prunable(policy, now=moment))

    prune_sync = blocking_twin(prune)
    count_prunable_sync = blocking_twin(count_prunable)


def _retention(value: Any) -> Retention:
    if not isinstance(value, Retention):
        raise ValidationError("retention", value, "must be a conveyor.Retention (or None for the settings')")
    return value


def _criteria(criteria: JobFilter | None, filters: dict[str, Any]) -> JobFilter:
    if criteria is not None and filters:
        raise ValidationError("filters", filters, "pass either a JobFilter or keyword filters, not both")
    return criteria if criteria is not None else JobFilter.build(**filters)


def _result_of(job_id: int, found: Job | None) -> Any:
    if found is None:
        raise JobNotFoundError(job_id)
    return decode_result(found.meta)
