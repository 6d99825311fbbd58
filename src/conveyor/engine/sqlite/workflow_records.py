"""Workflow records on SQLite: written as the pruner deletes a workflow's steps (in the prune's
write transaction), read back for ``workflow_status`` (see ``conveyor/workflow_record.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from conveyor.engine.sqlite.core import FILES, SqliteCore
from conveyor.engine.sqlite.rows import parse_time
from conveyor.workflow_record import OUTCOMES, WorkflowRecord


def record_workflows(conn: sqlite3.Connection, deleted: Sequence[Sequence[Any]]) -> None:
    """Record the workflows of the steps among ``deleted`` (rows of deleted_columns.sql: id, state,
    workflow, name, workflow_name, run_if, inserted_at, ended_at), one row per workflow."""
    found: dict[str, dict[str, Any]] = {}
    for _job_id, state, workflow, name, workflow_name, run_if, inserted_at, ended_at in sorted(
        (row for row in deleted if row[2] is not None), key=lambda row: row[0]
    ):
        record = found.setdefault(
            workflow,
            {
                "id": workflow,
                "name": None,
                "outcome": 0,
                "failed_step": None,
                "inserted_at": inserted_at,
                "finished_at": ended_at,
                "counts": {"completed": 0, "cancelled": 0, "discarded": 0},
            },
        )
        record["name"] = record["name"] or workflow_name
        record["counts"][state] = record["counts"].get(state, 0) + 1
        record["inserted_at"] = min(record["inserted_at"], inserted_at)
        record["finished_at"] = max(record["finished_at"] or "", ended_at or "") or None
        # The worse outcome wins, with the first step (in id order) that had it.
        outcome = 2 if state == "discarded" else 1 if state == "cancelled" and not run_if else 0
        if outcome > record["outcome"]:
            record["outcome"], record["failed_step"] = outcome, name
    rows = [
        {
            **{k: v for k, v in r.items() if k != "outcome"},
            "state": OUTCOMES[r["outcome"]],
            "counts": orjson.dumps(r["counts"]).decode(),
        }
        for r in found.values()
    ]
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
