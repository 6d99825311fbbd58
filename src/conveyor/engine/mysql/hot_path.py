"""The hot path on MySQL/MariaDB: fetch, ack, release and stage, each one transaction.

MySQL's UPDATE returns no rows and cannot read its own table in a subquery, so each operation
first locks the rows it will change with a ``SELECT ... FOR UPDATE`` (``SKIP LOCKED`` for claims and
staging: rows another transaction holds are skipped, never waited for), then updates them by id.
Acks read the rows they apply to under that lock, merge ``errors`` and ``meta`` in Python, where
another client's junk in either column cannot make the statement fail, and write the batch in two
statements (``ack_writes.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from conveyor.acks import Ack
from conveyor.engine.mysql import fanout, limited, partitioned
from conveyor.engine.mysql.ack_writes import AckWrites
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.limited import LimitedClaim
from conveyor.engine.mysql.rows import check_now, read_jobs, utc_clock
from conveyor.engine.mysql.workflows import MysqlWorkflows
from conveyor.errors import ValidationError
from conveyor.job import Job
from conveyor.limits import Claimed, FetchLimits

#: Ids per notification on "ended" (as PostgreSQL, whose payloads are capped).
ENDED_CHUNK = 500


def fetch_order(job: Job) -> tuple[int, datetime, int]:
    return (job.priority, job.scheduled_at, job.id)


async def notify(cursor: Any, core: MysqlCore, channel: str, payload: dict[str, Any]) -> None:
    """A notification in the transaction of ``cursor``: sent when it commits."""
    await fanout.notify(cursor, core.files, channel, payload)


async def notify_ended(cursor: Any, core: MysqlCore, ids: Sequence[int]) -> None:
    """Announce jobs that ended (or were acked at all) to whoever waits for them."""
    for start in range(0, len(ids), ENDED_CHUNK):
        await notify(cursor, core, "ended", {"ids": list(ids[start : start + ENDED_CHUNK])})


class MysqlHotPath(MysqlWorkflows):
    """``fetch_jobs``, ``ack_jobs``, ``release_jobs``, ``stage_jobs``."""

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
        check_now(now)
        if isinstance(demand, bool) or not isinstance(demand, int) or demand < 0:
            raise ValidationError("demand", demand, "must be an integer >= 0")
        if demand == 0:
            return []
        if limits is not None and not limits.unlimited:
            claim = LimitedClaim(queue, demand, node, producer, utc_clock(now), limits, ended, dead_after)
            return await self._fetch_limited(claim)
        async with self.transaction() as cursor:
            rows = await self._claim(cursor, queue, demand, node, producer, utc_clock(now))
        jobs = read_jobs(rows)
        jobs.sort(key=fetch_order)
        return jobs

    async def _claim(
        self, cursor: Any, queue: str, demand: int, node: str, producer: str, clock: datetime
    ) -> Sequence[Any]:
        """Claim up to ``demand`` jobs of ``queue`` in the transaction of ``cursor``; their rows."""
        files = self.files
        await cursor.execute(
            files.compose("fetch_jobs", lock_free="lock_free"), {"queue": queue, "demand": demand}
        )
        ids = [int(row[0]) for row in await cursor.fetchall()]
        return await self._take(cursor, ids, node, producer, clock)

    async def _take(
        self, cursor: Any, ids: Sequence[int], node: str, producer: str, clock: datetime
    ) -> Sequence[Any]:
        """Claim the jobs ``ids`` (locked by the caller) in the transaction of ``cursor``; their rows."""
        if not ids:
            return []
        files = self.files
        params = {"ids": tuple(ids), "now": clock, "node": node, "producer": producer}
        await cursor.execute(files["claim_update"], params)
        await cursor.execute(files.compose("jobs_by_id", columns="job_columns"), {"ids": tuple(ids)})
        return list(await cursor.fetchall())

    async def _fetch_limited(self, claim: LimitedClaim) -> Claimed:
        """A claim under global and rate limits, under its queue's named lock (``limited.py``;
        ``partitioned.py`` for partitioned limits)."""
        async with self.transaction(keyed=True) as cursor:
            await limited.lock_queue(cursor, self.files, claim.queue)
            if claim.limits.partitioned:
                rows, capped = await self._claim_partitioned(cursor, claim)
            else:
                rows, capped = await self._claim_counted(cursor, claim)
        claimed = Claimed(sorted(read_jobs(rows), key=fetch_order))
        claimed.capped = capped
        return claimed

    async def _claim_counted(self, cursor: Any, claim: LimitedClaim) -> tuple[Sequence[Any], bool]:
        """Unpartitioned limits: the demand they leave, claimed as a plain fetch; its rows and
        whether a limit stopped it."""
        files, limits = self.files, claim.limits
        cap, rate = limits.global_limit, limits.rate
        taken = (await limited.running(cursor, files, claim)).total() if cap else None
        starts = (await limited.started(cursor, files, claim, rate.period))[""] if rate else None
        wanted = limited.allowed(limits, claim.demand, taken, starts)
        rows: Sequence[Any] = []
        if wanted:
            rows = await self._claim(cursor, claim.queue, wanted, claim.node, claim.producer, claim.clock)
        if rate is not None:
            await limited.record_starts(cursor, files, claim, {"": len(rows)}, rate.period)
        return rows, limited.capped(limits, taken, starts, len(rows))

    async def _claim_partitioned(self, cursor: Any, claim: LimitedClaim) -> tuple[Sequence[Any], bool]:
        """Partitioned limits: the jobs each partition's room leaves (``partitioned.py``); their rows
        and whether a limit stopped the claim (it took less than its demand while jobs wait)."""
        files = self.files
        chosen = await partitioned.candidates_to_claim(cursor, files, claim)
        ids = await partitioned.lock_chosen(cursor, files, chosen)
        rows = await self._take(cursor, ids, claim.node, claim.producer, claim.clock)
        rate = claim.limits.rate
        if rate is not None:
            took = set(ids)
            counts = Counter(rkey for job_id, _, rkey in chosen if job_id in took)
            await limited.record_starts(cursor, files, claim, counts, rate.period)
        waiting = len(rows) < claim.demand and await partitioned.still_waiting(cursor, files, claim.queue)
        return rows, waiting

    async def ack_jobs(
        self, acks: Sequence[Ack], *, now: datetime | None = None, node: str | None = None
    ) -> list[int]:
        check_now(now)
        if not acks:
            return []
        files = self.files
        async with self.transaction() as cursor:
            await cursor.execute(files["ack_targets"], {"ids": tuple(sorted({ack.job_id for ack in acks}))})
            targets = {int(row[0]): row for row in await cursor.fetchall()}
            writes = AckWrites.of(acks, targets, node, utc_clock(now))
            if writes.written:
                await writes.write(cursor, files)
                await notify_ended(cursor, self, writes.written)
        if writes.steps:  # after the commit: a settle that starts later sees this ack
            await self.settle_after(writes.steps, now)
        return writes.written

    async def release_jobs(self, attempts: Sequence[tuple[int, int]]) -> list[int]:
        if not attempts:
            return []
        wanted = {(int(i), int(a)) for i, a in attempts}
        files = self.files
        async with self.transaction() as cursor:
            await cursor.execute(files["release_targets"], {"ids": tuple(sorted({i for i, _ in wanted}))})
            rows = [row for row in await cursor.fetchall() if (int(row[0]), row[1]) in wanted]
            if not rows:
                return []
            ids = sorted(int(row[0]) for row in rows)
            await cursor.execute(files["release_jobs"], {"ids": tuple(ids)})
            for queue in sorted({row[2] for row in rows}):
                await notify(cursor, self, "insert", {"queue": queue})
        return ids

    async def stage_jobs(self, limit: int, *, now: datetime | None = None) -> dict[str, int]:
        check_now(now)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValidationError("limit", limit, "must be an integer >= 0")
        if limit == 0:
            return {}
        files = self.files
        # READ COMMITTED: the range read of due jobs then takes no gap locks, which would hold up
        # each claim meanwhile (its jobs enter the gap after the range, as "executing").
        async with self.transaction(committed=True) as cursor:
            await cursor.execute(files["stage_targets"], {"now": utc_clock(now), "limit": limit})
            rows = await cursor.fetchall()
            if not rows:
                return {}
            await cursor.execute(files["stage_jobs"], {"ids": tuple(int(row[0]) for row in rows)})
            staged = Counter(row[1] for row in rows)
            for queue in sorted(staged):
                await notify(cursor, self, "insert", {"queue": queue})
        return dict(staged)
