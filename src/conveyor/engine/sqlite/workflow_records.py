"""Workflow records on SQLite: written as the pruner deletes a workflow's steps (in the prune's
write transaction), read back for ``workflow_status`` (see ``conveyor/workflow_record.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from conveyor.engine._workflow_rows import workflow_rows
from conveyor.engine.sqlite.core import FILES, SqliteCore
from conveyor.engine.sqlite.rows import parse_time
from conveyor.workflow_record import WorkflowRecord


def record_workflows(conn: sqlite3.Connection, deleted: Sequence[Sequence[Any]]) -> None:
    """Record the workflows of the steps among ``deleted`` (rows of deleted_columns.sql: id, state,
    workflow, name, workflow_name, run_if, inserted_at, ended_at), one row per workflow."""
    rows = workflow_rows(deleted)
    if rows:
        conn.executemany(FILES["record_workflow"], rows)


class SqliteWorkflowRecords(SqliteCore):
    """``workflow_record``."""

    async def workflow_record(self, workflow_id: str) -> WorkflowRecord | None:
        statement = FILES["workflow_record"]
        row = await self.database.read(lambda c: c.execute(statement, {"workflow": workflow_id}).fetchone())
        if row is None:
            return None
        times = (parse_time(row[5]) if row[5] else None, parse_time(row[6]) if row[6] else None)
        return WorkflowRecord.of(tuple(row), orjson.loads(row[4] or "{}"), times)
