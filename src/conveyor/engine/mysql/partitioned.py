"""Claims under partitioned fleet limits on MySQL/MariaDB (``conveyor.limits.Partition``): every
partition (a worker, a tenant...) has the whole global or rate limit to itself.

Under the queue's named lock, in the same READ COMMITTED transaction as the unpartitioned claim
(``limited.py``), so each claim counts what the one before it committed:

1. the slots of the global limit taken and the starts in the rate window, by partition key;
2. up to ``scan_size(demand)`` waiting jobs in fetch order with their keys, those of partitions
   with no room left out in SQL (``partitioned_candidates.sql``), so a saturated partition never
   fills the scan;
3. in order, each candidate within its rate partition's room (its place in line among that
   partition's candidates), then within its global partition's room, up to the demand: the rule of
   PostgreSQL's ``fetch_partitioned.sql``, so the engines claim the same jobs.

The chosen jobs are then locked (``lock_chosen``: still waiting, ``SKIP LOCKED``) and claimed by the
caller, which records their starts by rate key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from conveyor.engine import _partitions
from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.mysql import limited
from conveyor.engine.mysql.limited import LimitedClaim
from conveyor.limits import FetchLimits

#: Leads each list of full partitions (a key is '' or 40 hex digits, never this): ``NOT IN ()``
#: would be a syntax error.
NO_KEY = "-"

#: (id, global key, rate key) of a waiting job.
Candidate = tuple[int, str, str]


def choose(
    candidates: Sequence[Candidate],
    demand: int,
    limits: FetchLimits,
    taken: Counter[str],
    starts: Counter[str],
) -> list[Candidate]:
    """The candidates (in fetch order) a claim takes: each within its rate partition's room, counted
    by its place among that partition's candidates, then within its global partition's room. A job
    the global limit holds back has still taken its place in the rate line, so the claim may take
    fewer than it could, never more (as on PostgreSQL)."""
    cap, rate = limits.global_limit, limits.rate
    in_rate: Counter[str] = Counter()
    in_global: Counter[str] = Counter()
    chosen: list[Candidate] = []
    for candidate in candidates:
        _, gkey, rkey = candidate
        if rate is not None:
            in_rate[rkey] += 1
            if in_rate[rkey] > rate.allowed - starts[rkey]:
                continue
        if cap is not None:
            in_global[gkey] += 1
            if in_global[gkey] > cap.allowed - taken[gkey]:
                continue
        chosen.append(candidate)
        if len(chosen) == demand:
            break
    return chosen


async def candidates_to_claim(cursor: Any, files: SqlFiles, claim: LimitedClaim) -> list[Candidate]:
    """The waiting jobs ``claim`` takes (its queue's lock held)."""
    limits = claim.limits
    cap, rate = limits.global_limit, limits.rate
    shapes = _partitions.limits_shape(limits)
    keys = _partitions.partitioned_params(limited.KEYS, limits)
    taken: Counter[str] = Counter()
    if cap is not None:
        taken = await limited.running(cursor, files, claim, shapes[0], keys)
    starts: Counter[str] = Counter()
    if rate is not None:
        starts = await limited.started(cursor, files, claim, rate.period)
    params = keys | {
        "queue": claim.queue,
        "scan": _partitions.scan_size(claim.demand),
        "global_full": (NO_KEY, *sorted(k for k, n in taken.items() if cap and n >= cap.allowed)),
        "rate_full": (NO_KEY, *sorted(k for k, n in starts.items() if rate and n >= rate.allowed)),
    }
    text = limited.statement(files, "partitioned_candidates", shapes, lock_free="lock_free")
    await cursor.execute(text, params)
    found = [(int(row[0]), row[1], row[2]) for row in await cursor.fetchall()]
    return choose(found, claim.demand, limits, taken, starts)


async def lock_chosen(cursor: Any, files: SqlFiles, chosen: Sequence[Candidate]) -> list[int]:
    """The ids of the ``chosen`` jobs still waiting, locked (one another transaction holds is skipped)."""
    if not chosen:
        return []
    await cursor.execute(files["partitioned_take"], {"ids": tuple(job_id for job_id, _, _ in chosen)})
    return [int(row[0]) for row in await cursor.fetchall()]


async def still_waiting(cursor: Any, files: SqlFiles, queue: str) -> bool:
    """Do jobs of ``queue`` wait that could run now (no ordered lock holds them)?"""
    await cursor.execute(files.compose("partitioned_waiting", lock_free="lock_free"), {"queue": queue})
    (row,) = await cursor.fetchall()
    return bool(row[0])
