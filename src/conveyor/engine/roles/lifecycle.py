"""The lifecycle roles: opening and closing an engine, letting go of a dead event loop (optional),
and telling transient failures from refused statements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class Lifecycle(Protocol):
    """Acquiring and releasing an engine's connections."""

    #: Short engine name ("postgres", "sqlite"), used in messages and metrics.
    name: str

    async def open(self) -> None:
        """Acquire connections (and fail fast, with the reason, when the database cannot be reached).
        Calling it twice is harmless. Methods that use the engine's own connections raise
        ``EngineClosedError`` (a transient error) before ``open`` and after ``close``. An engine is
        not meant to be opened again after ``close``: build a new one."""

    async def close(self) -> None:
        """Release every connection. Calling it twice, or before ``open``, is harmless."""


@runtime_checkable
class Abandoning(Protocol):
    """An optional role: an engine whose connections belong to one event loop lets go of them
    without that loop. ``Conveyor`` calls ``abandon`` when an app is used from a new loop after
    the old one stopped, and only on an engine that has it (``isinstance(engine, Abandoning)``);
    an engine without it is simply opened again on the new loop."""

    def abandon(self) -> None:
        """Let go of what ``open`` acquired on an event loop that is gone (closed, or stopped for
        good), without that loop: close what can be closed synchronously, drop the rest. The engine
        can then be opened again on another loop (``Conveyor`` does this when an app is used from a
        new loop: a pytest-asyncio test after another, a second ``asyncio.run``)."""


class Failures(Protocol):
    """What a failure means: worth retrying unchanged or not, and how to say it to a user."""

    def is_transient(self, exc: BaseException) -> bool:
        """Is ``exc`` (raised by one of these methods) worth retrying unchanged?

        True when the database could not be reached, was busy, restarting or out of resources:
        the same statement may succeed later. False when the statement itself was refused (a value
        it carried is invalid): retrying it unchanged would fail forever, so the caller must
        isolate what is wrong (the acker splits its batch).
        """

    def explain(self, exc: BaseException) -> str | None:
        """One line telling a user what went wrong, for ``exc`` raised by this engine's database or
        driver (unreachable, refused the statement, no connection in time); None for any other
        exception. The CLI prints it instead of a traceback."""
