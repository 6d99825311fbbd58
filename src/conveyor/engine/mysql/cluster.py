"""Leadership, rescue and priority aging on MySQL/MariaDB.

MySQL has no ``INSERT ... ON CONFLICT ... WHERE`` and no ``RETURNING``: the lease is taken by an
insert when nobody holds it, else read under a row lock and renewed or taken over in the
same transaction, the rules (expiry, another runtime's node, a Conveyor leader whose heartbeats
stopped) applied in Python. Rescue locks its orphans first (``SKIP LOCKED``), then writes each
one's errors entry and meta built in Python, where another client's junk cannot fail it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._aging import check_aging
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.hot_path import notify
from conveyor.engine.mysql.rows import aware, check_now, stored_json, utc_clock
from conveyor.fleet import LeaderInfo, RescueResult

#: What an ``IN %(...)s`` list holds when it is empty (MySQL has no empty list): no uuid is ''.
NOTHING = ("",)
#: The most a rescue counts up to in meta.rescued.
RESCUES_CAP = 1_000_000_000
#: Tries of elect_leader when the row it read went (a resign) between its statements.
ELECT_TRIES = 3


def rescued_meta(stored: Any) -> str:
    """The meta of a rescued job: the stored object (else a new one) with ``rescued`` counted up
    (from a number only, kept between 0 and ``RESCUES_CAP``)."""
    meta = dict(stored) if isinstance(stored, dict) else {}
    before = meta.get("rescued")
    count = 0
    if isinstance(before, int | float) and not isinstance(before, bool):
        count = int(max(0, min(before, RESCUES_CAP)))
    meta["rescued"] = count + 1
    return orjson.dumps(meta).decode()


def takes_over(
    rows: Sequence[Sequence[Any]],
    name: str,
    take_from_foreign: bool,
    stale_before: datetime | None,
) -> bool:
    """Whether a live lease may be taken from the node whose producer rows are ``rows``
    (instance, is Conveyor's, last heartbeat): that node is another runtime's only (a mixed fleet
    is led by a Conveyor node), or a Conveyor leader all of whose rows of this instance are older
    than ``stale_before`` (killed or frozen while leading)."""
    own = [bool(row[1]) for row in rows]
    if take_from_foreign and rows and not any(own):
        return True
    if stale_before is None:
        return False
    mine = [row for row in rows if row[0] == name and row[1]]
    return bool(mine) and all(row[2] < stale_before for row in mine)


class MysqlCluster(MysqlCore):
    """``elect_leader``, ``resign_leader``, ``get_leader``, ``rescue_jobs``, ``age_priorities``."""

    # -- leadership --------------------------------------------------------------------------
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
        check_now(now)
        clock = utc_clock(now)
        params = {"name": name, "node": node, "now": clock, "expires_at": clock + timedelta(seconds=ttl)}
        stale_before = None if stale_after is None else clock - timedelta(seconds=stale_after)
        files = self.files
        for _ in range(ELECT_TRIES):
            async with self.reading() as cursor:
                if await cursor.execute(files["leader_insert"], params):
                    return LeaderInfo(node, clock.replace(tzinfo=UTC))
            async with self.transaction() as cursor:
                await cursor.execute(files["leader_lock"], params)
                row = await cursor.fetchone()
                if row is None:
                    continue  # resigned meanwhile: insert again
                holder, started_at, expires_at = row
                if holder != node and not expires_at < clock:
                    await cursor.execute(files["leader_nodes_producers"], {"node": holder})
                    rows = await cursor.fetchall()
                    if not takes_over(rows, name, take_from_foreign, stale_before):
                        return None
                await cursor.execute(files["leader_take"], params)
            return LeaderInfo(node, (started_at if holder == node else clock).replace(tzinfo=UTC))
        return None

    async def resign_leader(self, name: str, node: str) -> bool:
        async with self.transaction() as cursor:
            if not await cursor.execute(self.files["resign_leader"], {"name": name, "node": node}):
                return False
            await notify(cursor, self, "leader", {"action": "resign", "node": node, "name": name})
        return True

    async def get_leader(self, name: str, *, now: datetime | None = None) -> LeaderInfo | None:
        check_now(now)
        async with self.reading() as cursor:
            await cursor.execute(self.files["get_leader"], {"name": name, "now": utc_clock(now)})
            row = await cursor.fetchone()
        return LeaderInfo(row[0], row[1].replace(tzinfo=UTC), aware(row[2])) if row else None

    # -- aging -------------------------------------------------------------------------------
    async def age_priorities(self, *, after: float, limit: int, now: datetime | None = None) -> list[int]:
        check_now(now)
        check_aging(after, limit)
        params = {"cutoff": utc_clock(now) - timedelta(seconds=after), "limit": limit}
        async with self.transaction() as cursor:
            await cursor.execute(self.files["age_targets"], params)
            ids = sorted(int(row[0]) for row in await cursor.fetchall())
            if ids:
                await cursor.execute(self.files["age_priorities"], {"ids": tuple(ids)})
        return ids

    # -- rescue ------------------------------------------------------------------------------
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
        check_now(now)
        clock = utc_clock(now)
        files = self.files
        dead_before = clock - timedelta(seconds=timeout)
        foreign_before = None if foreign_timeout is None else clock - timedelta(seconds=foreign_timeout)
        spared = set(live)
        available: list[int] = []
        discarded: list[int] = []
        # READ COMMITTED: the read of executing jobs then takes no gap locks, which would hold up
        # each claim meanwhile (its jobs enter that range of the index), and lets go at once of the
        # executing jobs it does not rescue.
        async with self.transaction(committed=True) as cursor:
            await cursor.execute(files["rescue_producers"])
            dead = tuple(
                uuid
                for uuid, own, updated_at in await cursor.fetchall()
                if uuid not in spared and updated_at < (dead_before if own else foreign_before or updated_at)
            )
            params = {
                "dead": dead or NOTHING,
                "backstop_before": clock - timedelta(seconds=backstop),
                "limit": limit,
            }
            await cursor.execute(files["rescue_targets"], params)
            rows = await cursor.fetchall()
            at = clock.replace(tzinfo=UTC).isoformat()
            writes = []
            queues: set[str] = set()
            for job_id, queue, attempt, max_attempts, meta, errors, node, producer in rows:
                who = node if node is not None else "unknown"
                if producer is not None and producer in dead:
                    reason = f"the node running this job ({who}) stopped sending heartbeats"
                else:
                    reason = f"executing for over {backstop:g} s with no heartbeat row of its node ({who})"
                spent = attempt >= max_attempts
                reason += "; discarded: no attempts left" if spent else "; rescued to run again"
                stored = stored_json(errors)
                entry = {"attempt": attempt, "at": at, "error": reason}
                written = orjson.dumps([*(stored if isinstance(stored, list) else []), entry]).decode()
                state = "discarded" if spent else "available"
                meta = rescued_meta(stored_json(meta))
                writes.append((state, clock if spent else None, written, meta, job_id))
                (discarded if spent else available).append(int(job_id))
                if not spent:
                    queues.add(queue)
            if writes:
                await cursor.executemany(files["rescue_write"], writes)
            for queue in sorted(queues):
                await notify(cursor, self, "insert", {"queue": queue})
            if dead:
                await cursor.execute(files["delete_dead_producers"], {"dead": dead})
        return RescueResult(available=tuple(sorted(available)), discarded=tuple(sorted(discarded)))
