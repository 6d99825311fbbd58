"""Workflow records on PostgreSQL: written by the prune statements as they delete a workflow's
steps (record_workflows.sql), read back for ``workflow_status`` (``conveyor/workflow_record.py``)."""

from __future__ import annotations

from datetime import UTC

from conveyor.engine.postgres.core import PostgresCore
from conveyor.workflow_record import WorkflowRecord


class PostgresWorkflowRecords(PostgresCore):
    """``workflow_record``."""

    async def workflow_record(self, workflow_id: str) -> WorkflowRecord | None:
        async with self.pool.connection() as conn:
            cur = await conn.execute(self.sql["workflow_record"].encode(), {"workflow": workflow_id})
            row = await cur.fetchone()
        if row is None:
            return None
        times = tuple(t.replace(tzinfo=UTC) if t is not None else None for t in (row[5], row[6]))
        return WorkflowRecord.of(tuple(row), row[4] or {}, (times[0], times[1]))
