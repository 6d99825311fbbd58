"""Where a stored workflow stands as a whole (``app.workflow_status``): each step's job, and one
state, phase and progress for the workflow, derived from its steps."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conveyor.job import Job, JobState
from conveyor.recorded import UnreadableResultError, decode_result
from conveyor.workflow_record import OUTCOMES, WorkflowRecord

#: The steps waiting in line to run (queued, or between attempts): with the running ones, the phase.
READY_STATES = (JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE)


class WorkflowState(enum.StrEnum):
    """One state for a whole workflow, from its steps' states (in this order of precedence):

    - ``running``: some step is not final (suspended, available, scheduled, executing, retryable);
    - ``failed``: every step is final and some step was discarded (its attempts ran out, or it
      discarded itself): the steps after it were cancelled by their policy, or ran if it ignores that;
    - ``cancelled``: every step is final, none was discarded, and some step was cancelled (by hand,
      by ``cancel_workflow``, by returning ``Cancel``, or after a cancelled dependency). A step with
      ``run_if`` (a batch's callbacks) cancelled because its condition did not hold is not counted:
      that is how its workflow completes;
    - ``completed``: every step is final and every one completed (but those ``run_if`` steps).
    """

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


def _skipped(job: Job) -> bool:
    """A ``run_if`` step cancelled because how its dependencies ended did not call for it."""
    return job.state is JobState.CANCELLED and isinstance(job.meta, dict) and "run_if" in job.meta


def step_fraction(job: Job) -> float:
    """How far one step is, from 0 to 1: 1 once final; else what it reported (``done`` of ``total``,
    or ``percent``), clamped; 0 when it reported neither."""
    if job.state.is_final:
        return 1.0
    progress = job.progress
    done, total, percent = progress.get("done"), progress.get("total"), progress.get("percent")
    done, total, percent = _number(done), _number(total), _number(percent)
    if done is not None and total is not None and total > 0:
        return min(max(done / total, 0.0), 1.0)
    if percent is not None:
        return min(max(percent / 100, 0.0), 1.0)
    return 0.0


def _number(value: Any) -> float | None:
    """``value`` as a number when it is one (a bool is not)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class WorkflowStatus:
    """Where a workflow stands, as ``app.workflow_status(workflow_id)`` read it: each step's job by
    name, and what follows from them: one ``state`` for the whole workflow, its ``phase`` (the
    steps running or ready to), its ``progress`` (0 to 1), ``counts``, ``finished``, ``results``.

    A snapshot: read it again for news. A workflow id with no steps stored gives empty ``steps``
    and a ``state`` of None.
    """

    #: The workflow's id (``Workflow.id``, a batch's ``Batch.id``).
    id: str
    #: ``Mapping[str, Job]``: each step's ``Job`` (its state, attempt, errors, meta) by step name, a
    #: sub-workflow's steps named ``"<sub-workflow>.<step>"``; in the order the steps were inserted
    #: (by job id), steps added later by ``extend_workflow`` last.
    steps: Mapping[str, Job]
    #: How the workflow's pruned steps ended (``WorkflowRecord``), kept after the pruner deleted
    #: them: with every step pruned, ``state``, ``counts``, ``failed_step``, ``finished`` and
    #: ``progress`` come from it. None when no step of it was pruned.
    record: WorkflowRecord | None = None

    @property
    def counts(self) -> dict[JobState, int]:
        """How many steps are in each state (states with no step are left out), pruned steps
        counted from the ``record``."""
        counts: dict[JobState, int] = dict(self.record.counts) if self.record is not None else {}
        for job in self.steps.values():
            counts[job.state] = counts.get(job.state, 0) + 1
        return counts

    @property
    def states(self) -> dict[str, JobState]:
        """Each step's state by name."""
        return {name: job.state for name, job in self.steps.items()}

    @property
    def finished(self) -> bool:
        """True when the workflow has steps and every one is in a final state (completed, cancelled
        or discarded)."""
        if not self.steps:
            return self.record is not None
        return all(job.state.is_final for job in self.steps.values())

    @property
    def state(self) -> WorkflowState | None:
        """The workflow's one state (see ``WorkflowState`` for how it follows from the steps'), or
        None when no step of it is stored."""
        if not self.steps and self.record is None:
            return None
        if not self.finished:
            return WorkflowState.RUNNING
        return self._outcome()[0]

    def _outcome(self) -> tuple[WorkflowState, str | None]:
        """The finished workflow's state and failed step: the worse of the stored steps' and the
        record's (failed over cancelled over completed)."""
        found: tuple[WorkflowState, str | None] = (WorkflowState.COMPLETED, None)
        discarded = [name for name, job in self.steps.items() if job.state is JobState.DISCARDED]
        cancelled = [
            name for name, job in self.steps.items() if job.state is JobState.CANCELLED and not _skipped(job)
        ]
        if discarded:
            found = (WorkflowState.FAILED, discarded[0])
        elif cancelled:
            found = (WorkflowState.CANCELLED, cancelled[0])
        record = self.record
        if record is not None and OUTCOMES.index(record.state) > OUTCOMES.index(found[0].value):
            return WorkflowState(record.state), record.failed_step
        return found

    @property
    def failed_step(self) -> str | None:
        """The step that made the workflow fail, in insertion order: the first discarded step, else
        the first cancelled one (``run_if`` steps whose condition did not hold aside); None if none."""
        return self._outcome()[1]

    @property
    def running(self) -> tuple[str, ...]:
        """The steps executing now, by name."""
        return tuple(name for name, job in self.steps.items() if job.state is JobState.EXECUTING)

    @property
    def ready(self) -> tuple[str, ...]:
        """The steps whose dependencies have ended that wait for a node: available, scheduled, or
        retryable (between attempts)."""
        return tuple(name for name, job in self.steps.items() if job.state in READY_STATES)

    @property
    def waiting(self) -> tuple[str, ...]:
        """The steps still waiting for their dependencies (``suspended``)."""
        return tuple(name for name, job in self.steps.items() if job.state is JobState.SUSPENDED)

    @property
    def phase(self) -> tuple[str, ...]:
        """The current phase: the steps running or ready to run (``running`` then ``ready``); empty
        when the workflow is finished (or only waiting steps are left, for a moment)."""
        return self.running + self.ready

    @property
    def progress(self) -> float:
        """How far the workflow is, from 0.0 to 1.0: the mean over its steps of each step's part
        (1 for a final step; ``done`` / ``total``, or ``percent`` / 100, as it reported with
        ``progress(...)`` for a step under way; 0 for one that reported neither). 0.0 with no steps."""
        pruned = self.record.steps if self.record is not None else 0  # final: 1 each
        if not self.steps:
            return 1.0 if pruned else 0.0
        done = sum(step_fraction(job) for job in self.steps.values()) + pruned
        return done / (len(self.steps) + pruned)

    @property
    def results(self) -> dict[str, Any]:
        """The recorded result of each step that recorded one (``Record``, ``record=True``), by
        name; a result that cannot be decoded is left out."""
        found: dict[str, Any] = {}
        for name, job in self.steps.items():
            try:
                found[name] = decode_result(job.meta)
            except (LookupError, UnreadableResultError):
                continue
        return found
