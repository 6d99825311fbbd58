"""What job code can return (or raise) to say how its attempt ended, besides plain success."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from conveyor import _options as opt
from conveyor._job_json import encode_mapping


class Outcome(Exception):
    """Base of the non-error outcomes. Return one from a job, or raise it from anywhere inside."""


class Snooze(Outcome):
    """Run this job again after ``seconds``, without spending an attempt; ``meta`` (a mapping of
    JSON values, as oban-py's ``Snooze`` takes) is merged into the job's meta."""

    def __init__(self, seconds: float | timedelta, meta: Mapping[str, Any] | None = None) -> None:
        self.seconds = opt.check_delay("snooze seconds", seconds)
        if meta is not None:
            encode_mapping("snooze meta", meta)  # refused here, naming it, not at the ack
        self.meta: dict[str, Any] | None = dict(meta) if meta else None
        super().__init__(f"snoozed for {self.seconds}s")

    def __reduce__(self) -> tuple[type[Snooze], tuple[float, dict[str, Any] | None]]:
        # Pickled back from a worker process by its fields, not by the message in ``args``.
        return (Snooze, (self.seconds, self.meta))


class Cancel(Outcome):
    """End this job as ``cancelled``; the reason is recorded in its errors."""

    def __init__(self, reason: str = "cancelled by the job") -> None:
        self.reason = reason
        super().__init__(reason)


class Discard(Outcome):
    """End this job as ``discarded`` (failed for good, no more attempts); the reason is recorded."""

    def __init__(self, reason: str = "discarded by the job") -> None:
        self.reason = reason
        super().__init__(reason)


class Record:
    """Complete the job and store ``value`` as its result (readable with ``app.get_result``)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Record({self.value!r})"
