"""Rows of ``conveyor_workflows`` (migration 13) on MySQL/MariaDB: the lock an unfinished workflow
holds (``insert_locked_workflow``), and the record of how a pruned workflow ended
(``workflow_record``; see ``conveyor/workflow_record.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from conveyor.engine._sqlfiles import SqlFiles
from conveyor.engine._step_names import step_names_kept
from conveyor.engine._workflow_rows import workflow_rows
from conveyor.engine.mysql import inserter
from conveyor.engine.mysql.connect import rerun_victims
from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.rows import InsertRows, aware, check_now, utc_clock
from conveyor.job_ids import JobIds
from conveyor.request import JobRequest
from conveyor.workflow_record import WorkflowRecord

#: Seconds an enqueue waits for another enqueue of the same workflow lock.
LOCK_TIMEOUT = 30


async def record_workflows(cursor: Any, files: SqlFiles, deleted: Sequence[Sequence[Any]]) -> None:
    """Record, in the transaction of ``cursor``, the workflows of the steps among ``deleted`` (rows
    of id, state, workflow, name, workflow_name, run_if, inserted_at, ended_at; times naive UTC),
    one row per workflow: for the pruner, as it deletes steps."""
    rows = workflow_rows(deleted)
    if rows:
        await cursor.executemany(files["record_workflow"], rows)


class MysqlWorkflowRecords(MysqlCore):
    """``insert_locked_workflow``, ``workflow_record``."""

    _rows_per_statement: int = inserter.ROWS_PER_STATEMENT  # MysqlEngine.open sets it

    async def insert_locked_workflow(
        self,
        requests: Sequence[JobRequest],
        *,
        workflow_id: str,
        name: str | None,
        lock: str,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> JobIds | str:
        check_now(now)
        steps = list(requests)
        files = self.files
        # Enqueuers of one lock go one at a time: a named lock (hashed into MySQL's 64 characters),
        # released when the transaction ends; READ COMMITTED, so each sees what the previous one
        # committed.
        key = "conveyor:wf:" + hashlib.sha1(f"{files.prefix}:{lock}".encode()).hexdigest()

        async def enqueue() -> JobIds | str:
            async with self.transaction(keyed=True) as cursor:
                await cursor.execute("SELECT GET_LOCK(%s, %s)", (key, LOCK_TIMEOUT))
                ((taken,),) = await cursor.fetchall()
                if taken != 1:
                    raise TimeoutError(f"another enqueue held workflow lock {lock!r} for {LOCK_TIMEOUT} s")
                await cursor.execute(files["workflow_lock_release"], {"lock": lock})
                await cursor.execute(files["workflow_lock_holder"], {"lock": lock})
                holder = await cursor.fetchall()
                if holder:
                    return str(holder[0][0])
                clock = utc_clock(now)
                claim = {"id": workflow_id, "name": name, "lock": lock, "now": clock}
                await cursor.execute(files["workflow_lock_claim"], claim)
                done = await inserter.insert(
                    cursor,
                    files,
                    inserter.chunks(*inserter.split(steps)),
                    InsertRows(clock),
                    rows_per_statement=self._rows_per_statement,
                    hold=hold,
                )
            return done.ids

        # A deadlock's victim runs again: its requests are all in hand.
        with step_names_kept():
            return await rerun_victims(enqueue)

    async def workflow_record(self, workflow_id: str) -> WorkflowRecord | None:
        async with self.reading() as cursor:
            await cursor.execute(self.files["workflow_record"], {"workflow": workflow_id})
            rows = await cursor.fetchall()
        if not rows:
            return None
        row = tuple(rows[0])
        counts = orjson.loads(row[4]) if row[4] else {}
        return WorkflowRecord.of(
            row, counts if isinstance(counts, dict) else {}, (aware(row[5]), aware(row[6]))
        )
