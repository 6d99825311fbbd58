"""Queues declared in the database (dynamic queues, ``oban_queues``) on SQLite."""

from __future__ import annotations

import sqlite3

from conveyor.engine.sqlite.core import FILES, SqliteCore
from conveyor.engine.sqlite.rows import parse_optional_time
from conveyor.fleet import StoredQueue


class SqliteStoredQueues(SqliteCore):
    """``list_stored_queues``, ``put_stored_queue``, ``delete_stored_queue``."""

    async def list_stored_queues(self) -> list[StoredQueue]:
        def run(conn: sqlite3.Connection) -> list[StoredQueue]:
            rows = conn.execute(FILES["list_stored_queues"]).fetchall()
            return [StoredQueue.from_row(row, parse_optional_time) for row in rows]

        return await self.database.read(run)

    async def put_stored_queue(self, queue: StoredQueue) -> None:
        statement, params = FILES["put_stored_queue"], queue.params()
        await self.database.write(lambda tx: tx.conn.execute(statement, params))

    async def delete_stored_queue(self, name: str) -> bool:
        statement, params = FILES["delete_stored_queue"], {"name": name}
        return bool(await self.database.write(lambda tx: tx.conn.execute(statement, params).fetchall()))
