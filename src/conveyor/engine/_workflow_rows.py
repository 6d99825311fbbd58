"""The rows of ``conveyor_workflows`` the MySQL/MariaDB and SQLite pruners write as they delete a
workflow's steps (PostgreSQL's prune statements build them in SQL: ``record_workflows.sql``); each
engine's ``record_workflow.sql`` adds them to what earlier passes recorded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from conveyor.workflow_record import OUTCOMES


def workflow_rows(deleted: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """One row per workflow of the steps among ``deleted`` (rows of id, state, workflow, name,
    workflow_name, run_if, inserted_at, ended_at, times as the engine stores them: values that
    compare in time order), the parameters of ``record_workflow.sql``; other jobs are left out."""
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
        ends = [end for end in (record["finished_at"], ended_at) if end is not None]
        record["finished_at"] = max(ends) if ends else None
        # The worse outcome wins, with the first step (in id order) that had it.
        outcome = 2 if state == "discarded" else 1 if state == "cancelled" and not run_if else 0
        if outcome > record["outcome"]:
            record["outcome"], record["failed_step"] = outcome, name
    return [
        {
            **{k: v for k, v in r.items() if k != "outcome"},
            "state": OUTCOMES[r["outcome"]],
            "counts": orjson.dumps(r["counts"]).decode(),
        }
        for r in found.values()
    ]
