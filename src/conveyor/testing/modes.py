"""Testing modes: how an app treats enqueued jobs in a test.

- ``"disabled"`` (the default): as in production; an app with queues runs a node.
- ``"manual"``: jobs are stored and nothing runs them until the test drains a queue
  (``drain_queue``); no node starts, whatever the queues.
- ``"inline"``: ``enqueue`` runs each job at once, in the caller's process, and lets its exception
  out; nothing is stored (the ids returned are counted in memory).

An app's own mode is ``Conveyor(..., testing="manual")``; ``with mode("inline"):`` overrides every
app's mode inside the block (this task and what it starts).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from conveyor.errors import ValidationError

#: The testing modes an app takes (``Conveyor(testing=...)``, ``mode(...)``): "disabled" (jobs run on
#: nodes), "manual" (jobs are stored, run by ``drain_queue``), "inline" (jobs run at enqueue).
MODES = ("disabled", "manual", "inline")

_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("conveyor_testing_mode", default=None)


def check_mode(value: object) -> str:
    if value not in MODES:
        raise ValidationError("testing", value, f"must be one of {', '.join(MODES)}")
    return str(value)


@contextmanager
def mode(testing_mode: str) -> Iterator[None]:
    """Every app behaves as in ``testing_mode`` inside the block."""
    token = _override.set(check_mode(testing_mode))
    try:
        yield
    finally:
        _override.reset(token)


def effective_mode(own: str) -> str:
    """The mode an app with its own mode ``own`` is in right now."""
    return _override.get() or own
