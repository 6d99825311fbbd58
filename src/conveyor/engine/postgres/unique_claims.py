"""Which unique requests of a PostgreSQL insert claim a key, and in what order.

``insert_unique_jobs.sql`` claims the keys of one statement in key order, whatever the batch's
order, so that two transactions claiming the same keys wait for each other at the first key they
share instead of deadlocking. An insert of several statements (more than ``INSERT_CHUNK`` requests,
or a COPY-sized batch with unique requests among plain ones) keeps that order across its statements
too: its unique requests are held back (``HeldUniques``) with ids reserved where they stand, and
claimed at the end of the insert, in key order from first statement to last. Holding them costs
memory for the unique requests of that one insert (never for the plain ones).

Keys are known here by their base (``Unique.base_key``): the statement adds the period's time
bucket from its own clock, the same for every statement of one insert (one transaction), so equal
bases mean equal keys, and bases sort as the keys do (a base has a fixed length).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from conveyor.engine.postgres.copy_rows import Pushback
from conveyor.engine.postgres.rows import NOT_A_REQUEST, one_job_params, request_record
from conveyor.errors import ValidationError
from conveyor.job import ExistingJobId
from conveyor.job_ids import JobIdsBuilder
from conveyor.request import JobRequest
from conveyor.unique import Unique


def unique_record(request: JobRequest, unique: Unique, base: str) -> dict[str, Any]:
    """The element of ``insert_unique_jobs.sql``'s ``jobs`` array for a request claiming ``base``."""
    record = request_record(request)
    record["uniq_base"] = base
    record["uniq_period"] = unique.period
    record["uniq_states"] = unique.state_names()
    return record


def one_unique_params(request: JobRequest, unique: Unique, base: str) -> dict[str, Any]:
    """The parameters of ``insert_one_unique.sql`` (less ``now`` and ``channel``) for ``request``
    claiming ``base`` alone."""
    return one_job_params(request) | {
        "scheduled_at": request.scheduled_at_utc,
        "schedule_in": request.schedule_in,
        "uniq_base": base,
        "uniq_period": unique.period,
        "uniq_states": unique.states_json.decode(),
    }


class UniqueClaims:
    """The unique keys of an insert made of one statement, and the ids they ended with.

    The first request with a key claims it; later ones are not sent and get the claimant's id as
    an ``ExistingJobId`` (a statement meeting one key twice would fail). What the table holds
    already is ``insert_unique_jobs.sql``'s ON CONFLICT."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def plan(self, chunk: list[JobRequest]) -> tuple[list[str | None], list[dict[str, Any]]]:
        """Each request's base key (None: not unique), and the records to send."""
        keys: list[str | None] = []
        records: list[dict[str, Any]] = []
        sending: set[str] = set()
        for request in chunk:
            unique = request.unique
            if unique is None:
                keys.append(None)
                records.append(request_record(request))
                continue
            base = unique.base_key(request)
            keys.append(base)
            if base not in self._ids and base not in sending:
                sending.add(base)
                records.append(unique_record(request, unique, base))
        return keys, records

    def resolve(self, keys: list[str | None], rows: list[tuple[Any, ...]]) -> tuple[list[int], list[int]]:
        """The chunk's ids in input order from the statement's rows (id, inserted, uniq_key, _),
        and the positions of the requests that claimed a key and met a stored job holding it."""
        claimed: dict[str, int] = {}
        fresh: list[int] = []
        wanted = set(keys)
        for job_id, inserted, key, _ in rows:
            base = None if key is None else key.partition(".")[0]
            if base is not None and base in wanted and base not in self._ids:
                claimed[base] = job_id if inserted else ExistingJobId(job_id)
            else:
                fresh.append(job_id)
        fresh.sort()  # new rows took ids in input order
        new = iter(fresh)
        ids: list[int] = []
        conflicted: list[int] = []
        for position, base in enumerate(keys):
            if base is None:
                ids.append(next(new))
            elif base in claimed:
                ids.append(claimed.pop(base))
                self._ids[base] = int(ids[-1])
                if isinstance(ids[-1], ExistingJobId):
                    conflicted.append(position)
            else:
                ids.append(ExistingJobId(self._ids[base]))
        return ids, conflicted


@dataclass(slots=True)
class HeldClaim:
    """The first request of an insert with a key, held back: its position in the insert, the id
    reserved for it there, and the positions of the later requests with the same key."""

    base: str
    position: int
    job_id: int
    request: JobRequest
    unique: Unique
    duplicates: list[int] = field(default_factory=list)


class HeldUniques:
    """The unique requests of an insert of several statements, claimed at its end in key order."""

    def __init__(self) -> None:
        self._claims: dict[str, HeldClaim] = {}

    def __bool__(self) -> bool:
        return bool(self._claims)

    def hold(self, position: int, job_id: int, request: JobRequest) -> None:
        """Hold back the unique ``request`` at ``position``, whose id ``job_id`` was reserved."""
        unique = request.unique
        assert unique is not None
        base = unique.base_key(request)
        claim = self._claims.get(base)
        if claim is None:
            self._claims[base] = HeldClaim(base, position, job_id, request, unique)
        else:
            claim.duplicates.append(position)

    def batches(self, size: int) -> Iterator[list[HeldClaim]]:
        """The claims in key order, ``size`` at most at a time (then forgotten)."""
        ordered = sorted(self._claims.values(), key=lambda claim: claim.base)
        self._claims = {}
        for start in range(0, len(ordered), size):
            yield ordered[start : start + size]

    @staticmethod
    def records(batch: list[HeldClaim]) -> list[dict[str, Any]]:
        """The records of ``insert_unique_jobs.sql`` for ``batch``, each with its reserved id."""
        return [unique_record(c.request, c.unique, c.base) | {"id": c.job_id} for c in batch]

    @staticmethod
    def settle(
        batch: list[HeldClaim], rows: list[tuple[Any, ...]], ids: JobIdsBuilder
    ) -> list[tuple[HeldClaim, int]]:
        """Put the ids of ``batch``'s requests and their duplicates into ``ids``, from the
        statement's rows (id, inserted, uniq_key, _); the claims that met a stored job holding
        their key, each with that job's id."""
        stored = {key.partition(".")[0]: (job_id, inserted) for job_id, inserted, key, _ in rows}
        conflicted: list[tuple[HeldClaim, int]] = []
        for claim in batch:
            job_id, inserted = stored[claim.base]
            if not inserted:
                ids.put(claim.position, job_id, conflict=True)
                conflicted.append((claim, job_id))
            for position in claim.duplicates:
                ids.put(position, job_id, conflict=True)
        return conflicted


def take_unique_run(source: Pushback, size: int) -> list[JobRequest]:
    """The unique requests at the head of ``source``, ``size`` at most (the first non-unique one is
    handed back)."""
    run: list[JobRequest] = []
    for request in source:
        if not isinstance(request, JobRequest):
            raise ValidationError("job", request, NOT_A_REQUEST)
        if request.unique is None:
            source.push(request)
            break
        run.append(request)
        if len(run) >= size:
            break
    return run
