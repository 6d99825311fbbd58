"""The notifications role: logical channels, heard in this process and on other nodes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

#: Receives the logical channel name and the decoded payload of each notification.
NotificationHandler = Callable[[str, dict[str, Any]], None]


class Listener(Protocol):
    """What ``Engine.listen`` returns."""

    async def stop(self) -> None:
        """Stop delivering; the handler hears nothing more once this returns. Harmless twice."""


class Notifications(Protocol):
    """Sending and hearing notifications (``engine/*/listener.py``)."""

    async def notify(self, name: str, payload: dict[str, Any]) -> None:
        """Send ``payload`` (a JSON object) on the logical channel ``name`` ("insert", "signal",
        "leader", ...) to every listener of that channel, in this process and on other nodes.
        Notifications from one sender arrive in the order sent."""

    async def listen(self, names: Iterable[str], handler: NotificationHandler) -> Listener:
        """Deliver notifications on the named channels (only those) to ``handler(name, payload)``
        until the returned listener is stopped. The handler first gets
        ``("listener", {"event": "connected"})`` once listening has begun, and again after each
        reconnect, so the node can look again for what it missed. Delivery is best effort: polling
        stays the correctness guarantee."""
