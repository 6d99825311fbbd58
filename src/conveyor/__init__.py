"""Conveyor: job orchestration for Python, with jobs stored in PostgreSQL or SQLite, Oban-compatible."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Three public names are also the names of submodules (``conveyor.job``, ``conveyor.progress``,
# ``conveyor.current_app``): importing such a submodule sets the package's attribute to the module,
# so these are bound here, after their submodules are loaded, and stay bound to the function.
from conveyor.current_app import current_app
from conveyor.definition import job
from conveyor.progress import progress

if TYPE_CHECKING:
    from conveyor._runtime.clock import Clock, FakeClock, SystemClock
    from conveyor.app import Conveyor
    from conveyor.batch import Batch
    from conveyor.chunk import Chunk, ChunkResult
    from conveyor.context import JobContext, current_job
    from conveyor.current_app import NoCurrentAppError, current_app
    from conveyor.definition import ExecutorKind, JobDefinition, job, worker
    from conveyor.encryption import EncryptionError
    from conveyor.errors import (
        ConveyorError,
        DatabaseUnreachableError,
        JobCancelledError,
        JobDiscardedError,
        JobEndedError,
        JobFailedError,
        JobNotFoundError,
        NodeNotFoundError,
        SchemaError,
        SignalTimeoutError,
        StepExistsError,
        UnknownOptionError,
        UnsupportedConnectionError,
        ValidationError,
        WaitTimeoutError,
        WorkerNotFoundError,
        WorkflowCancelledError,
        WorkflowFailedError,
        WorkflowNotFoundError,
        WorkflowTimeoutError,
    )
    from conveyor.filters import JobFilter
    from conveyor.inbox import receive, receive_sync, signals, wait_for_signal, wait_for_signal_sync
    from conveyor.job import ExistingJobId, Job, JobId, JobState
    from conveyor.job_ids import JobIds, WorkflowIds
    from conveyor.outcomes import Cancel, Discard, Record, Snooze
    from conveyor.progress import progress, progress_sync
    from conveyor.queue_settings import QueueSettings
    from conveyor.request import JobRequest
    from conveyor.retention import Pruned, PruneRule, Retention
    from conveyor.settings import Settings
    from conveyor.stats import JobCount, JobStats, QueueCounts, StatsBucket, StatsQuery
    from conveyor.unique import Unique
    from conveyor.workflow import Workflow, WorkflowStatus
    from conveyor.workflow_record import WorkflowRecord
    from conveyor.workflow_state import WorkflowState

#: Where each other public name lives. They are imported on first use (PEP 562): importing the whole
#: package costs about 180 ms, and a process that needs a few names (a process-pool worker loading a
#: job module that says ``from conveyor import job``) should not pay it before its first job.
_LOCATIONS = {
    "Batch": "conveyor.batch",
    "Cancel": "conveyor.outcomes",
    "Chunk": "conveyor.chunk",
    "ChunkResult": "conveyor.chunk",
    "EncryptionError": "conveyor.encryption",
    "Clock": "conveyor._runtime.clock",
    "Conveyor": "conveyor.app",
    "ConveyorError": "conveyor.errors",
    "DatabaseUnreachableError": "conveyor.errors",
    "Discard": "conveyor.outcomes",
    "ExecutorKind": "conveyor.definition",
    "ExistingJobId": "conveyor.job",
    "FakeClock": "conveyor._runtime.clock",
    "Job": "conveyor.job",
    "JobCancelledError": "conveyor.errors",
    "JobContext": "conveyor.context",
    "JobCount": "conveyor.stats",
    "JobDefinition": "conveyor.definition",
    "JobDiscardedError": "conveyor.errors",
    "JobEndedError": "conveyor.errors",
    "JobFailedError": "conveyor.errors",
    "JobFilter": "conveyor.filters",
    "JobId": "conveyor.job",
    "JobIds": "conveyor.job_ids",
    "WorkflowIds": "conveyor.job_ids",
    "JobNotFoundError": "conveyor.errors",
    "JobRequest": "conveyor.request",
    "JobState": "conveyor.job",
    "JobStats": "conveyor.stats",
    "NoCurrentAppError": "conveyor.current_app",
    "NodeNotFoundError": "conveyor.errors",
    "PruneRule": "conveyor.retention",
    "Pruned": "conveyor.retention",
    "QueueCounts": "conveyor.stats",
    "QueueSettings": "conveyor.queue_settings",
    "Record": "conveyor.outcomes",
    "Retention": "conveyor.retention",
    "SchemaError": "conveyor.errors",
    "Settings": "conveyor.settings",
    "SignalTimeoutError": "conveyor.errors",
    "Snooze": "conveyor.outcomes",
    "StatsBucket": "conveyor.stats",
    "StatsQuery": "conveyor.stats",
    "StepExistsError": "conveyor.errors",
    "SystemClock": "conveyor._runtime.clock",
    "Unique": "conveyor.unique",
    "UnknownOptionError": "conveyor.errors",
    "UnsupportedConnectionError": "conveyor.errors",
    "ValidationError": "conveyor.errors",
    "WaitTimeoutError": "conveyor.errors",
    "WorkflowCancelledError": "conveyor.errors",
    "WorkflowFailedError": "conveyor.errors",
    "WorkflowNotFoundError": "conveyor.errors",
    "WorkflowTimeoutError": "conveyor.errors",
    "WorkerNotFoundError": "conveyor.errors",
    "Workflow": "conveyor.workflow",
    "WorkflowRecord": "conveyor.workflow_record",
    "WorkflowState": "conveyor.workflow_state",
    "WorkflowStatus": "conveyor.workflow",
    "current_app": "conveyor.current_app",
    "current_job": "conveyor.context",
    "job": "conveyor.definition",
    "progress": "conveyor.progress",
    "progress_sync": "conveyor.progress",
    "receive": "conveyor.inbox",
    "receive_sync": "conveyor.inbox",
    "signals": "conveyor.inbox",
    "wait_for_signal": "conveyor.inbox",
    "wait_for_signal_sync": "conveyor.inbox",
    "worker": "conveyor.definition",
}


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'conveyor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Batch",
    "Cancel",
    "Chunk",
    "ChunkResult",
    "Clock",
    "Conveyor",
    "ConveyorError",
    "DatabaseUnreachableError",
    "Discard",
    "EncryptionError",
    "ExecutorKind",
    "ExistingJobId",
    "FakeClock",
    "Job",
    "JobCancelledError",
    "JobContext",
    "JobCount",
    "JobDefinition",
    "JobDiscardedError",
    "JobEndedError",
    "JobFailedError",
    "JobFilter",
    "JobId",
    "JobIds",
    "JobNotFoundError",
    "JobRequest",
    "JobState",
    "JobStats",
    "NoCurrentAppError",
    "NodeNotFoundError",
    "PruneRule",
    "Pruned",
    "QueueCounts",
    "QueueSettings",
    "Record",
    "Retention",
    "SchemaError",
    "Settings",
    "SignalTimeoutError",
    "Snooze",
    "StatsBucket",
    "StatsQuery",
    "StepExistsError",
    "SystemClock",
    "Unique",
    "UnknownOptionError",
    "UnsupportedConnectionError",
    "ValidationError",
    "WaitTimeoutError",
    "WorkerNotFoundError",
    "Workflow",
    "WorkflowCancelledError",
    "WorkflowFailedError",
    "WorkflowIds",
    "WorkflowNotFoundError",
    "WorkflowRecord",
    "WorkflowState",
    "WorkflowStatus",
    "WorkflowTimeoutError",
    "current_app",
    "current_job",
    "job",
    "progress",
    "progress_sync",
    "receive",
    "receive_sync",
    "signals",
    "wait_for_signal",
    "wait_for_signal_sync",
    "worker",
]
#: The release (docs/versioning.md); the package metadata's version is read from here at build time.
__version__ = "0.1.0"
