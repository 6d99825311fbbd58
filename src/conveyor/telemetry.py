"""Telemetry: named events with data, delivered to handlers attached to one app.

Events: ``job.start``, ``job.stop`` (with state and duration), ``node.start``, ``node.stop``,
``stager.staged``, and the cluster duties' events. Handlers run inline on the emitting task, so they
must be quick; an exception in a handler is logged and never reaches the job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("conveyor.telemetry")

Handler = Callable[[str, dict[str, Any]], None]


class Telemetry:
    def __init__(self) -> None:
        self._handlers: list[tuple[str, Handler]] = []

    def attach(self, handler: Handler, prefix: str = "") -> Callable[[], None]:
        """Call ``handler(event, data)`` for every event whose name starts with ``prefix``.

        Returns a function that detaches the handler.
        """
        entry = (prefix, handler)
        self._handlers.append(entry)
        return lambda: self._handlers.remove(entry) if entry in self._handlers else None

    def emit(self, event: str, **data: Any) -> None:
        if not self._handlers:  # the hot path pays nothing when nobody listens
            return
        for prefix, handler in tuple(self._handlers):
            if event.startswith(prefix):
                try:
                    handler(event, data)
                except Exception:
                    log.exception("telemetry handler %r failed on %s", handler, event)
