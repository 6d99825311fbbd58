"""The polling role: a node's one poll for all its queues."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from conveyor.fleet import QueuePoll


class Polling(Protocol):
    """Which queues hold claimable jobs, with the persisted queue states (``_runtime/poller.py``)."""

    async def waiting_queues(self, queues: Sequence[str]) -> set[str]:
        """Which of ``queues`` hold jobs a fetch could claim now (available, attempts left): a
        node's one poll for all its queues (``_runtime/poller.py``). A read: it changes nothing,
        and costs about one index probe per queue whatever the size of the table. Jobs inserted by
        any client, notified or not, are seen. A string instead of a list of names, or an invalid
        name, is refused with a ValidationError."""

    async def poll_queues(self, name: str, queues: Sequence[str], *, awake: Sequence[str]) -> QueuePoll:
        """A node's one poll, as one read (one transaction on a server: the node's idle cost): which
        of ``awake`` hold jobs a fetch could claim (as ``waiting_queues``), and the persisted states
        of the instance ``name`` for those of ``queues`` that have one (as ``load_queue_states``).
        Bad names are refused as ``waiting_queues`` refuses them."""
