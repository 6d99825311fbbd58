"""Queues declared in the database (dynamic queues, ``oban_queues``) on PostgreSQL."""

from __future__ import annotations

from conveyor.engine.postgres.core import PostgresCore
from conveyor.engine.postgres.rows import aware
from conveyor.fleet import StoredQueue


class PostgresStoredQueues(PostgresCore):
    """``list_stored_queues``, ``put_stored_queue``, ``delete_stored_queue``."""

    async def list_stored_queues(self) -> list[StoredQueue]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["list_stored_queues"].encode())
            rows = await cur.fetchall()
        return [StoredQueue.from_row(row, aware) for row in rows]

    async def put_stored_queue(self, queue: StoredQueue) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(self.sql["put_stored_queue"].encode(), queue.params())

    async def delete_stored_queue(self, name: str) -> bool:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["delete_stored_queue"].encode(), {"name": name})
            return bool(await cur.fetchall())
