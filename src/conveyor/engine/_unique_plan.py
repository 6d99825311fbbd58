"""Unique requests within one insert, as every engine handles them before writing.

Each unique request gets its stored key (``Unique.key`` at the insert's clock) and its meta with the
markers (``unique.stored_meta``). Within one insert the first request with a key claims it and the
later ones collapse onto it: they are never sent, so no statement meets the same key twice. What the
database already holds is the engine's part (a lookup, or ON CONFLICT)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from conveyor.job import JobState
from conveyor.job_ids import JobIds, JobIdsBuilder
from conveyor.request import JobRequest
from conveyor.unique import Unique, stored_meta


@dataclass(slots=True)
class UniquePlan:
    #: Per request of the batch: its stored key, or None when it is not unique.
    keys: list[str | None] = field(default_factory=list)
    #: Keys first claimed in this batch, in order: the ones to look for in the database.
    claimed: list[str] = field(default_factory=list)
    #: The stored meta of each request that claimed a key, by ``id(request)``.
    metas: dict[int, bytes] = field(default_factory=dict)


def unique_plan(
    batch: Sequence[JobRequest], clock: datetime, first_of_key: dict[str, int], offset: int
) -> UniquePlan:
    """The keys of ``batch`` (whose first request is input position ``offset``). ``first_of_key``
    maps each key claimed so far in this insert to the input position that claimed it; it grows."""
    plan = UniquePlan()
    for index, request in enumerate(batch):
        unique = request.unique
        if unique is None:
            plan.keys.append(None)
            continue
        key = unique.key(unique.base_key(request), clock)
        plan.keys.append(key)
        if key not in first_of_key:
            first_of_key[key] = offset + index
            plan.claimed.append(key)
            plan.metas[id(request)] = stored_meta(request.meta_json, key, unique)
    return plan


def resolve_outcomes(
    count: int, collapsed: Mapping[int, int | str], new_ids: Iterable[int], first_of_key: Mapping[str, int]
) -> JobIds:
    """The ids of an insert of ``count`` requests in input order. ``collapsed`` maps the position
    of each request that was not written to the stored job it conflicted with (an int) or to the
    key of an earlier request of the insert whose id it shares (a str: a conflict too); the other
    positions are new rows, which took ``new_ids`` in order."""
    ids = JobIdsBuilder()
    if not collapsed:  # the common case: all new
        ids.extend_new(new_ids)
        return ids.build()
    fresh = iter(new_ids)
    for position in range(count):
        outcome = collapsed.get(position)
        if outcome is None:
            ids.append(next(fresh))
        elif isinstance(outcome, str):
            ids.append(ids[first_of_key[outcome]], conflict=True)
        else:
            ids.append(outcome, conflict=True)
    return ids.build()


def claims_by_insert(unique: Unique) -> bool:
    """Whether an insert alone can claim a key under ``unique`` (its unique index refusing the row
    when a stored job holds the key): the new row is in the index whichever state it starts in,
    available or scheduled, when both are among the states. Otherwise a stored twin in those states
    must be looked up (the new row stays out of the partial index), and a ``replace`` needs the
    stored job's id anyway."""
    states = unique.states
    return JobState.AVAILABLE in states and JobState.SCHEDULED in states and not unique.replace
