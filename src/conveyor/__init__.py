"""Conveyor: job orchestration for Python, with jobs stored in PostgreSQL or SQLite, Oban-compatible."""

from conveyor._runtime.clock import Clock, FakeClock, SystemClock
from conveyor.app import Conveyor
from conveyor.batch import Batch
from conveyor.context import JobContext, current_job
from conveyor.current_app import NoCurrentAppError, current_app
from conveyor.definition import ExecutorKind, JobDefinition, job, worker
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
    UnknownOptionError,
    UnsupportedConnectionError,
    ValidationError,
    WaitTimeoutError,
    WorkerNotFoundError,
)
from conveyor.filters import JobFilter
from conveyor.inbox import receive, receive_sync, signals, wait_for_signal, wait_for_signal_sync
from conveyor.job import ExistingJobId, Job, JobId, JobState
from conveyor.outcomes import Cancel, Discard, Record, Snooze
from conveyor.progress import progress, progress_sync
from conveyor.queue_settings import QueueSettings
from conveyor.request import JobRequest
from conveyor.retention import Pruned, PruneRule, Retention
from conveyor.settings import Settings
from conveyor.stats import JobCount, JobStats, QueueCounts, StatsBucket, StatsQuery
from conveyor.unique import Unique
from conveyor.workflow import Workflow, WorkflowStatus

__all__ = [
    "Batch",
    "Cancel",
    "Clock",
    "Conveyor",
    "ConveyorError",
    "DatabaseUnreachableError",
    "Discard",
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
    "SystemClock",
    "Unique",
    "UnknownOptionError",
    "UnsupportedConnectionError",
    "ValidationError",
    "WaitTimeoutError",
    "WorkerNotFoundError",
    "Workflow",
    "WorkflowStatus",
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
__version__ = "0.1.0"
