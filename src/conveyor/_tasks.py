"""Waiting for a background task to end without losing the caller's own cancellation."""

from __future__ import annotations

import asyncio
from typing import Any


async def join(task: asyncio.Future[Any]) -> None:
    """Wait until ``task`` (told to stop, or cancelled) has ended; its own cancellation is expected.

    ``suppress(CancelledError)`` around the await would also swallow a cancellation of the *caller*:
    cancelling a task that awaits another cancels the awaited one, and both raise CancelledError.
    The caller would then carry on as if never cancelled, and an event loop's shutdown, which cancels
    every task and waits for them all, could wait for it forever. So the error is re-raised when the
    caller itself is being cancelled.
    """
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
