"""The relay role: progress, signals to jobs, and the states that waiting for jobs reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from conveyor.job import JobState


class Relay(Protocol):
    """Progress, signals and job states (``engine/*/relay.py``)."""

    async def job_states(self, ids: Sequence[int]) -> dict[int, JobState]:
        """The state of each job among ``ids`` that exists (a missing id: no such job)."""

    async def record_progress(self, entries: Sequence[tuple[int, int, Mapping[str, Any]]]) -> list[int]:
        """Store each (job id, attempt, fields) as the job's ``meta["progress"]`` (replacing the
        object there; the other meta keys stay), only while the job is executing that attempt.
        Return the ids written. Sends no notification."""

    async def signal_job(
        self, job_id: int, message: bytes, *, now: datetime | None = None, limit: int = 1000
    ) -> tuple[JobState, int | None] | None:
        """Append ``message`` (a JSON object, encoded) to the job's ``meta["signals"]`` array unless
        the job is final or already holds ``limit`` messages. Return None when no job has this id,
        else the job's state afterwards and the message's position in the array (counting its JSON
        objects only), or None in its place when it was not appended.

        A ``scheduled`` job whose ``meta["awaiting_signal"]`` is an object becomes ``available``
        now (``scheduled_at`` = now; notify "insert"); an ``executing`` job's node is told on
        "inbox". One transaction."""

    async def wake_awaiting(self, ids: Sequence[int], *, now: datetime | None = None) -> list[int]:
        """Make available now the ``scheduled`` jobs among ``ids`` whose ``meta["awaiting_signal"]``
        has a ``position`` below the number of JSON objects in ``meta["signals"]``: a message they
        wait for came while they were letting go of their slot. Return the ids woken; notify
        "insert" for their queues."""
