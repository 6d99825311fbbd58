"""How an attempt ended, as the engine writes it back: one ``Ack`` per finished job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conveyor.job import JobState


@dataclass(frozen=True, slots=True)
class Ack:
    """The end of one attempt of one job.

    ``attempt`` guards the write: an ack applies only while the row is still ``executing`` the same
    attempt, so a job that was rescued and claimed again is never overwritten by a stale ack.
    """

    job_id: int
    attempt: int
    state: JobState
    #: Seconds from now until the job may run again (retryable and snoozed jobs).
    schedule_in: float | None = None
    #: An entry to append to ``errors``: {"attempt": n, "at": iso time, "error": text}.
    error: dict[str, Any] | None = None
    #: Keys to merge into ``meta`` (recorded results).
    meta: dict[str, Any] | None = None
    #: A snooze gives the attempt back and counts itself in ``meta.snoozed``.
    snoozed: bool = False

    def record(self) -> dict[str, Any]:
        """The JSON object the ack statements read."""
        return {
            "id": self.job_id,
            "attempt": self.attempt,
            "state": self.state.value,
            "schedule_in": self.schedule_in,
            "error": self.error,
            "meta": self.meta,
            "snoozed": self.snoozed,
        }
