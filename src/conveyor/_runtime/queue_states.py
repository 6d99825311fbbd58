"""Persisted queue states as a node follows them: applied whole when a queue starts, then only what
changed since the node last looked (each poll brings them: ``Engine.poll_queues``). So a persisted
pause or limit whose signal a node missed still reaches it, and a change made without ``persist``
lasts until the persisted value it departs from changes."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from conveyor.fleet import QueueState


@dataclass(frozen=True, slots=True)
class StateChange:
    """What to apply to one queue: a pause or resume, a local limit, fleet-wide limits (as a scale
    signal carries them); None or empty for a part that did not change."""

    queue: str
    paused: bool | None = None
    limit: int | None = None
    limits: dict[str, Any] = field(default_factory=dict)


class PersistedStates:
    """The persisted state of each queue as the node last applied it."""

    def __init__(self) -> None:
        self._seen: dict[str, QueueState] = {}

    def applied(self, queue: str, state: QueueState) -> None:
        """``state`` was applied whole (the queue started)."""
        self._seen[queue] = state

    def changes(self, states: dict[str, QueueState], queues: Collection[str]) -> list[StateChange]:
        """The parts of ``states`` (of the ``queues`` the node runs) that changed since last seen."""
        found = []
        for queue, state in states.items():
            seen = self._seen.get(queue, QueueState())
            if queue not in queues or state == seen:
                continue
            self._seen[queue] = state
            found.append(
                StateChange(
                    queue,
                    paused=state.paused if state.paused != seen.paused else None,
                    limit=state.limit if state.limit != seen.limit else None,
                    limits={k: v for k, v in state.limits.items() if seen.limits.get(k, ...) != v},
                )
            )
        return found
