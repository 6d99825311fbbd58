"""Tracebacks recorded for a job's failed attempt, as its author wants to read them: from the job's
own code down, without the frames of Conveyor (and of the ``asyncio.run`` it drives a coroutine
with) that called it. Imported by worker processes, so it imports little."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import traceback
from types import TracebackType

from conveyor._runtime.invoke import BaseExceptionRaised

#: Where the frames that call a job's code live: Conveyor's package, asyncio's (a coroutine job in a
#: thread or a worker process runs under ``asyncio.run``) and the thread pool's.
_CALLERS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (os.path.dirname(__file__), asyncio.__file__, concurrent.futures.__file__)
)


def _ours(tb: TracebackType) -> bool:
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_CALLERS)


def job_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the first frame that is not a caller's; all of ``tb`` when every frame is (the
    error is then Conveyor's own, such as a worker that cannot be imported, and its frames tell why)."""
    found = tb
    while found is not None and _ours(found):
        found = found.tb_next
    return found if found is not None else tb


def format_job_error(exc: BaseException) -> str:
    """``exc`` formatted as ``traceback.format_exception`` does (its causes and contexts too), its
    own frames starting at the job's code. A ``BaseException`` the job raised (``SystemExit``...) is
    shown as raised, not inside the ordinary error that carried it out (``BaseExceptionRaised``)."""
    if isinstance(exc, BaseExceptionRaised):
        exc = exc.original
    lines = traceback.format_exception(type(exc), exc, job_frames(exc.__traceback__))
    return "".join(lines)
