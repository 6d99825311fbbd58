"""Notifications handed to the listeners of this process when their transaction commits.

Every notification is a row of ``conveyor_notifications``, which listeners poll (``listener.py``):
that is how other processes hear of it, up to a poll interval later. The listeners of the sending
process need not wait: each engine has the ``Hub`` of its server and database (one per process,
shared by every engine on them), and a transaction of the engine's own (``connect.transaction``)
collects what it notified (``Notes``) and hands it to the hub's listeners as soon as it commits,
each on its own event loop. A rollback sends nothing.

A listener must not hand the same row over again when its poll reads it: when the row is written,
before the commit, each listener the hub will deliver it to is told its id (``expect``) and skips
it when the poll comes to it, whichever comes first, the poll or the delivery. A commit that fails
takes the ids back (``forget``): the poll delivers such a row if it was committed after all.
Notifications written in a caller's transaction (``conn=``) reach every listener by the poll, the
engine not knowing when the caller commits.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from conveyor.engine import _payloads as payloads
from conveyor.engine._sqlfiles import SqlFiles


class Receiver(Protocol):
    """What the hub needs of a listener (``listener.MysqlListener``)."""

    def expect(self, row_id: int, channel: str) -> bool:
        """Whether this listener takes ``channel``; if so it skips row ``row_id`` in its poll."""

    def forget(self, row_id: int) -> None:
        """Row ``row_id`` will not be delivered by the hub: the poll hands it over if it comes."""

    def deliver(self, channel: str, payload: dict[str, Any]) -> None:
        """Hand a notification over, from any thread, to be handled on the listener's loop."""


class Hub:
    """The listeners of this process on one notifications table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: tuple[Receiver, ...] = ()

    def add(self, listener: Receiver) -> None:
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def remove(self, listener: Receiver) -> None:
        with self._lock:
            self._listeners = tuple(one for one in self._listeners if one is not listener)

    def expect(self, row_id: int, channel: str) -> tuple[Receiver, ...]:
        """The listeners that will get row ``row_id`` from the hub (each told to skip it)."""
        return tuple(listener for listener in self._listeners if listener.expect(row_id, channel))


_HUBS: weakref.WeakValueDictionary[tuple[str, int, str], Hub] = weakref.WeakValueDictionary()
_HUBS_LOCK = threading.Lock()


def hub_for(host: str, port: int, database: str) -> Hub:
    """The process's hub of a server's database (kept while an engine or a listener holds it)."""
    key = (host.lower(), port, database)
    with _HUBS_LOCK:
        hub = _HUBS.get(key)
        if hub is None:
            hub = _HUBS[key] = Hub()
        return hub


class Notes:
    """What one transaction notified, for the hub's listeners once it commits."""

    __slots__ = ("_hub", "_notes")

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._notes: list[tuple[int, str, dict[str, Any], tuple[Receiver, ...]]] = []

    def add(self, row_id: int, channel: str, payload: dict[str, Any]) -> None:
        receivers = self._hub.expect(row_id, channel)
        if receivers:
            self._notes.append((row_id, channel, payload, receivers))

    def send(self) -> None:
        """The transaction committed: deliver, in the order notified."""
        notes, self._notes = self._notes, []
        for _, channel, payload, receivers in notes:
            for receiver in receivers:
                receiver.deliver(channel, payload)

    def forget(self) -> None:
        """The transaction did not commit (or may not have): the poll decides."""
        notes, self._notes = self._notes, []
        for row_id, _, _, receivers in notes:
            for receiver in receivers:
                receiver.forget(row_id)


#: The notes of the transaction the running code is in, when it is one of the engine's own.
_NOTES: ContextVar[Notes | None] = ContextVar("conveyor_mysql_notes", default=None)


@contextmanager
def collecting(hub: Hub | None) -> Iterator[Notes | None]:
    """Collect the notifications written inside the block (``hub`` None: none, the poll delivers)."""
    notes = None if hub is None else Notes(hub)
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


async def notify(cursor: Any, files: SqlFiles, channel: str, payload: dict[str, Any]) -> None:
    """A notification in the transaction of ``cursor``: sent when it commits."""
    await cursor.execute(files["notify"], (channel, payloads.encode(payload)))
    notes = _NOTES.get()
    if notes is not None:
        notes.add(int(cursor.lastrowid), channel, payload)
