"""Producers' heartbeat rows, persisted queue states and stored queues on MySQL/MariaDB: what a
node reads and writes to run (leases and rescue: ``cluster.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine.mysql.connect import rerun_victims
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import aware, check_now, stored_json, utc_clock
from conveyor.fleet import ProducerBeat, ProducerInfo, QueueState, StoredQueue, with_limits


def kept_meta(beat: ProducerBeat, stored: Any) -> dict[str, Any]:
    """The meta a beat writes: its own, plus the jobs a cancel listed as stopping (meta.stopping)
    that the beat still holds; the others are forgotten."""
    stopping = stored.get("stopping") if isinstance(stored, dict) else None
    if not isinstance(stopping, list):
        return beat.meta
    held = [job_id for job_id in stopping if job_id in set(beat.holding)]
    return {**beat.meta, "stopping": held} if held else beat.meta


async def list_stopping(cursor: Any, files: SqlFiles, runs: Sequence[tuple[int, str | None]]) -> None:
    """List cancelled runs (job id, producer uuid) in their producers' rows (meta.stopping), in the
    cancel's transaction: until a producer's beat stops holding a job, the job keeps its ordered
    lock and its global slot. Only Conveyor's rows (meta.runtime) are written."""
    by_producer: dict[str, list[int]] = {}
    for job_id, producer in runs:
        if producer is not None:
            by_producer.setdefault(producer, []).append(job_id)
    if not by_producer:
        return
    await cursor.execute(files["producers_meta"], {"uuids": tuple(sorted(by_producer))})
    writes = []
    for uuid, stored in await cursor.fetchall():
        meta = stored_json(stored)
        if not isinstance(meta, dict) or meta.get("runtime") != "conveyor":
            continue
        listed = meta.get("stopping")
        stopping = [*(listed if isinstance(listed, list) else []), *by_producer[uuid]]
        writes.append((orjson.dumps({**meta, "stopping": stopping}).decode(), uuid))
    if writes:
        await cursor.executemany(files["producer_stopping"], writes)


class MysqlProducers(MysqlCore):
    """``record_producers``, ``delete_producers``, ``list_producers``, ``save_queue_state``,
    ``load_queue_states``, ``list_stored_queues``, ``still_executing``, ``lost_claims``."""

    async def still_executing(
        self, attempts: Sequence[tuple[int, int]], *, producers: Sequence[str] | None = None
    ) -> set[int]:
        if not attempts:
            return set()
        wanted = {(int(i), int(a)) for i, a in attempts}
        async with self.reading() as cursor:
            await cursor.execute(
                self.files["still_executing"], {"ids": tuple(sorted({i for i, _ in wanted}))}
            )
            rows = await cursor.fetchall()
        mine = None if producers is None else set(producers)
        return {
            int(row[0])
            for row in rows
            if (int(row[0]), row[1]) in wanted and (mine is None or row[2] in mine)
        }

    async def lost_claims(
        self, producers: Sequence[str], *, older_than: float, now: datetime | None = None
    ) -> list[tuple[int, int]]:
        check_now(now)
        if not producers:
            return []
        params = {
            "producers": tuple(producers),
            "claimed_before": utc_clock(now) - timedelta(seconds=older_than),
        }
        async with self.reading() as cursor:
            await cursor.execute(self.files["lost_claims"], params)
            return [(int(row[0]), int(row[1])) for row in await cursor.fetchall()]

    async def record_producers(
        self, name: str, node: str, beats: Sequence[ProducerBeat], *, now: datetime | None = None
    ) -> None:
        check_now(now)
        if not beats:
            return
        clock = utc_clock(now)
        files = self.files

        async def record() -> None:
            async with self.transaction() as cursor:
                await cursor.execute(files["producers_meta"], {"uuids": tuple(b.uuid for b in beats)})
                stored = {row[0]: stored_json(row[1]) for row in await cursor.fetchall()}
                rows = [
                    (
                        b.uuid,
                        name,
                        node,
                        b.queue,
                        orjson.dumps(kept_meta(b, stored.get(b.uuid))).decode(),
                        clock,
                        clock,
                    )
                    for b in beats
                ]
                await cursor.executemany(files["upsert_producer"], rows)

        # The locking read of rows not there yet (a node's first beat) locks the gap they go in:
        # first beats of nodes at once deadlock on their inserts, and the victim runs again.
        await rerun_victims(record)

    async def delete_producers(self, uuids: Sequence[str]) -> None:
        if not uuids:
            return
        async with self.transaction() as cursor:
            await cursor.execute(self.files["delete_producers"], {"uuids": tuple(uuids)})

    async def list_producers(self) -> list[ProducerInfo]:
        async with self.reading() as cursor:
            await cursor.execute(self.files["list_producers"])
            rows = await cursor.fetchall()
        return [
            ProducerInfo(
                r[0], r[1], r[2], r[3], stored_json(r[4]), r[5].replace(tzinfo=UTC), r[6].replace(tzinfo=UTC)
            )
            for r in rows
        ]

    async def save_queue_state(
        self,
        name: str,
        queue: str,
        *,
        paused: bool | None = None,
        limit: int | None = None,
        limits: Mapping[str, Any] | None = None,
    ) -> None:
        files = self.files
        params = {
            "name": name,
            "queue": queue,
            "paused": None if paused is None else bool(paused),
            "limit": limit,
            "now": utc_clock(None),
        }
        async with self.transaction() as cursor:
            if paused is not None or limit is not None or not limits:
                await cursor.execute(files["save_queue_state"], params)
            if limits:
                await cursor.execute(files["load_queue_limits"], {"name": name})
                kept = [row for row in await cursor.fetchall() if row[0] == queue]
                state = with_limits({queue: QueueState()}, kept)[queue]
                merged = orjson.dumps(state.limits | dict(limits)).decode()
                await cursor.execute(files["save_queue_limits"], params | {"limits": merged})

    async def load_queue_states(self, name: str) -> dict[str, QueueState]:
        files = self.files
        async with self.transaction() as cursor:
            await cursor.execute(files["load_queue_states"], {"name": name})
            states = {
                row[0]: QueueState(paused=None if row[1] is None else bool(row[1]), limit=row[2])
                for row in await cursor.fetchall()
            }
            await cursor.execute(files["load_queue_limits"], {"name": name})
            return with_limits(states, await cursor.fetchall())

    async def list_stored_queues(self) -> list[StoredQueue]:
        async with self.reading() as cursor:
            await cursor.execute(self.files["list_stored_queues"])
            rows = await cursor.fetchall()
        return [StoredQueue.from_row(row, aware) for row in rows]
