"""The inserting role: jobs written atomically, on the engine's connections or a caller's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from conveyor.request import JobRequest


class Inserting(Protocol):
    """Writing jobs (``engine/*/inserter.py``)."""

    async def insert(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any = None,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> Sequence[int]:
        """Insert jobs atomically and return their ids in input order (an empty input: an empty
        sequence). The built-in engines return a ``JobIds``, gathered chunk by chunk at 8 bytes an
        id; ``Conveyor.enqueue_many`` makes one of any other sequence.

        A request that matches a job already stored, where a feature says it must not be inserted
        twice (unique jobs), gets that job's id as an ``ExistingJobId`` (``conflict`` True) in its
        place, and no row; every other id is a plain ``int`` (or a ``JobId``) of a new row.

        Each job is ``available`` when its ``scheduled_at`` (or ``now`` + ``schedule_in``; ``now``
        when neither is given) is at or before ``now``, else ``scheduled``; ``inserted_at`` is
        ``now``; ``attempt`` 0. Anything in ``requests`` that is not a ``JobRequest`` fails the whole
        call with a message naming ``JobRequest``; an iterable that raises midway writes nothing.
        Notifies "insert" once per queue that gained available jobs.

        With ``conn`` (a caller's connection or session) the insert joins the caller's transaction:
        their commit makes the jobs visible and sends the insert notifications, their rollback
        leaves nothing. Large inputs are written in bounded chunks, never one giant statement.

        ``hold`` lists input positions whose jobs are then made ``suspended`` in the same
        transaction (workflow steps with dependencies: no node fetches them until they settle).
        """

    def insert_sync(
        self,
        requests: Iterable[JobRequest],
        *,
        conn: Any,
        now: datetime | None = None,
        hold: Sequence[int] = (),
    ) -> Sequence[int]:
        """``insert`` through a caller's synchronous connection or session."""


class BlockingInsert(Protocol):
    """A blocking insert on the engine's own connections, made in the caller's thread."""

    def insert(self, requests: Iterable[JobRequest], *, now: datetime | None = None) -> Sequence[int]:
        """``Inserting.insert`` without ``conn`` or ``hold``, from a thread with no event loop of
        its own: same statements, same notifications, same errors."""

    def close(self) -> None:
        """Release what the blocking inserts hold. Calling it twice is harmless."""


@runtime_checkable
class BlockingInserts(Protocol):
    """An optional role: an open engine that can insert from a plain thread without an event loop.
    ``Conveyor.enqueue_sync`` (and ``enqueue_many_sync``) then run in the caller's thread instead
    of hopping to the app's portal loop and back, two thread switches a call; an engine without it
    is used through the portal."""

    def blocking_inserts(self) -> BlockingInsert:
        """An object that inserts in the calling thread (any thread, concurrently), valid until its
        ``close`` or the engine's; the caller closes it before the engine."""
