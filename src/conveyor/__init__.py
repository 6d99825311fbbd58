"""Conveyor: job orchestration for Python, with jobs stored in PostgreSQL or SQLite, Oban-compatible."""

from conveyor.app import Conveyor
from conveyor.definition import ExecutorKind, JobDefinition, job, worker
from conveyor.errors import (
    ConveyorError,
    JobNotFoundError,
    SchemaError,
    UnknownOptionError,
    UnsupportedConnectionError,
    ValidationError,
    WorkerNotFoundError,
)
from conveyor.filters import JobFilter
from conveyor.job import Job, JobState
from conveyor.request import JobRequest

__all__ = [
    "Conveyor",
    "ConveyorError",
    "ExecutorKind",
    "Job",
    "JobDefinition",
    "JobFilter",
    "JobNotFoundError",
    "JobRequest",
    "JobState",
    "SchemaError",
    "UnknownOptionError",
    "UnsupportedConnectionError",
    "ValidationError",
    "WorkerNotFoundError",
    "job",
    "worker",
]
__version__ = "0.1.0"
