"""Chunk workers (Oban Pro's ``Chunk``): one call of the job's code for up to ``size`` jobs at once.

Each job stays its own row, claimed, rescued and acked on its own; only the call is shared (the
node gathers them, see ``conveyor._runtime.chunker``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from conveyor import _options as opt
from conveyor.errors import ValidationError


@dataclass(frozen=True, slots=True)
class Chunk:
    """``@job(chunk=Chunk(size=100, timeout=1.0))``: the code gets a list of up to ``size`` jobs of
    one queue, called as soon as that many are running on the node, or ``timeout`` seconds after the
    first of a chunk arrived with whatever has come by then."""

    size: int = 100
    timeout: float | timedelta = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValidationError("chunk size", self.size, "must be a whole number of jobs, at least 1")
        seconds = opt.check_delay("chunk timeout", self.timeout)
        if seconds <= 0:
            raise ValidationError("chunk timeout", self.timeout, "must be greater than 0 seconds")
        object.__setattr__(self, "timeout", seconds)

    @property
    def seconds(self) -> float:
        """The timeout in seconds (a ``timedelta`` given is stored as seconds)."""
        return self.timeout if isinstance(self.timeout, float) else self.timeout.total_seconds()


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What a chunk's code returns to end some of its jobs otherwise than completed: ``outcomes``
    maps a job's id to an exception (the job fails and is retried with backoff, or is discarded on
    its last attempt) or an outcome (``Snooze``, ``Cancel``, ``Discard``). Jobs left out complete.

    Raising instead of returning ends every job of the chunk the same way."""

    outcomes: Mapping[int, BaseException] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.outcomes, Mapping):
            raise ValidationError("ChunkResult outcomes", self.outcomes, "must map job ids to exceptions")
        for job_id, outcome in self.outcomes.items():
            if not isinstance(outcome, BaseException):
                raise ValidationError(
                    f"ChunkResult outcome of job {job_id}",
                    outcome,
                    "must be an exception or an outcome (Snooze, Cancel, Discard)",
                )
        object.__setattr__(self, "outcomes", dict(self.outcomes))


def check_chunk_options(name: str, options: dict[str, Any]) -> Chunk | None:
    """Take the ``chunk`` option out of a decorator's ``options``; refuse it with those a chunk
    worker cannot take."""
    chunk = options.pop("chunk", None)
    if chunk is None:
        return None
    if not isinstance(chunk, Chunk):
        raise ValidationError("chunk", chunk, "must be a Chunk(size=..., timeout=...)")
    if options.get("executor") == "process":  # the value of ExecutorKind.PROCESS too
        # The jobs of a chunk are gathered on the node's loop; one call cannot span processes.
        raise ValidationError("executor", "process", f"{name} is a chunk worker: use async or thread")
    if options.get("record"):
        raise ValidationError("record", True, f"{name} is a chunk worker: one return serves many jobs")
    return chunk
