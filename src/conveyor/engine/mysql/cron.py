"""Cron ticks, stored cron entries (``oban_crons``) and declared queues (``oban_queues``) on
MySQL/MariaDB.

A cron job is inserted once per tick across every node: the tick's row in ``conveyor_cron_ticks``
is claimed by an insert on its primary key (name, tick), a no-op update when the row is there, in
the transaction that inserts the job: the one claim that wrote a row inserts the job, the others
see nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson

from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.hot_path import notify
from conveyor.engine.mysql.rows import aware, check_now, utc_clock
from conveyor.fleet import CronTick, StoredCron, StoredQueue


class MysqlCron(MysqlCore):
    """``insert_cron_jobs``, ``last_cron_ticks``, ``list_crons``, ``add_cron``, ``update_cron``,
    ``delete_cron``, ``put_stored_queue``, ``delete_stored_queue``."""

    # -- cron ticks --------------------------------------------------------------------------
    async def insert_cron_jobs(self, ticks: Sequence[CronTick], *, now: datetime | None = None) -> list[int]:
        """Insert the job of each tick not handled before (by anyone); return the new job ids."""
        check_now(now)
        if not ticks:
            return []
        clock = utc_clock(now)
        files = self.files
        ids: list[int] = []
        queues: set[str] = set()
        async with self.transaction() as cursor:
            for tick in sorted(ticks, key=lambda t: (t.name, t.tick)):  # one lock order
                claim = {"name": tick.name, "tick": tick.tick, "now": clock}
                if not await cursor.execute(files["claim_cron_tick"], claim):
                    continue
                request = tick.request
                params = {
                    "queue": request.queue,
                    "worker": request.worker,
                    "args": request.args_json.decode(),
                    "meta": request.meta_json.decode(),
                    "tags": orjson.dumps(request.tags).decode(),
                    "priority": request.priority,
                    "max_attempts": request.max_attempts,
                    "now": clock,
                }
                await cursor.execute(files["cron_job"], params)
                ids.append(int(cursor.lastrowid))
                queues.add(request.queue)
            for queue in sorted(queues):
                await notify(cursor, self, "insert", {"queue": queue})
        return sorted(ids)

    async def last_cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        if not names:
            return {}
        async with self.reading() as cursor:
            await cursor.execute(self.files["last_cron_ticks"], {"names": tuple(names)})
            return {row[0]: row[1].replace(tzinfo=UTC) for row in await cursor.fetchall()}

    # -- stored cron entries ----------------------------------------------------------------
    async def list_crons(self) -> list[StoredCron]:
        async with self.reading() as cursor:
            await cursor.execute(self.files["list_crons"])
            rows = await cursor.fetchall()
        return [StoredCron.from_row(row, aware) for row in rows]

    async def add_cron(self, cron: StoredCron) -> bool:
        return await self._write_cron("add_cron", cron)

    async def update_cron(self, cron: StoredCron) -> bool:
        return await self._write_cron("update_cron", cron)

    async def delete_cron(self, name: str) -> bool:
        async with self.transaction() as cursor:
            return bool(await cursor.execute(self.files["delete_cron"], {"name": name}))

    async def _write_cron(self, statement: str, cron: StoredCron) -> bool:
        params = cron.params() | {"now": utc_clock(None)}
        async with self.transaction() as cursor:
            return bool(await cursor.execute(self.files[statement], params))

    # -- declared queues ---------------------------------------------------------------------
    async def put_stored_queue(self, queue: StoredQueue) -> None:
        params = queue.params() | {"now": utc_clock(None)}
        async with self.transaction() as cursor:
            await cursor.execute(self.files["put_stored_queue"], params)

    async def delete_stored_queue(self, name: str) -> bool:
        async with self.transaction() as cursor:
            return bool(await cursor.execute(self.files["delete_stored_queue"], {"name": name}))
