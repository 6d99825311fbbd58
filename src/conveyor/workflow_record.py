"""``WorkflowRecord``: how a workflow ended, kept after its steps are pruned (``conveyor_workflows``,
migration 13), as the engines read it back for ``workflow_status``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conveyor.job import JobState

#: A record's outcomes, worst last: of steps pruned in several passes, the worse outcome wins.
OUTCOMES = ("completed", "cancelled", "failed")


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """The compact record of a workflow whose steps the pruner deleted: written as it deletes them
    (summed over passes), kept for ``prune_workflow_records`` seconds after the workflow ended."""

    #: The workflow's id.
    id: str
    #: Its name (``Workflow(name=...)``), if it had one.
    name: str | None
    #: How the pruned steps ended, as ``WorkflowState`` names it: ``"completed"``, ``"cancelled"``
    #: or ``"failed"``.
    state: str
    #: The step that failed it (the first discarded, else the first cancelled), or None.
    failed_step: str | None
    #: How many of its steps were pruned, by final state.
    counts: dict[JobState, int] = field(default_factory=dict)
    #: When its first pruned step was inserted, and when its last pruned step ended (UTC).
    inserted_at: datetime | None = None
    finished_at: datetime | None = None

    @classmethod
    def of(
        cls, row: tuple[Any, ...], counts: dict[str, Any], times: tuple[datetime | None, datetime | None]
    ) -> WorkflowRecord:
        """A record from its row (id, name, state, failed_step, ...), counts and times decoded."""
        return cls(
            id=str(row[0]),
            name=row[1],
            state=str(row[2]),
            failed_step=row[3],
            counts={JobState(k): int(v) for k, v in counts.items() if int(v)},
            inserted_at=times[0],
            finished_at=times[1],
        )

    @property
    def steps(self) -> int:
        """How many of its steps were pruned."""
        return sum(self.counts.values())
