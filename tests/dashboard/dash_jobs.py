"""Jobs the dashboard tests enqueue (importable by name, from nodes and drains alike)."""

from __future__ import annotations

import asyncio

from conveyor import job, progress

#: Tells the browser tests' XSS payloads apart from anything the page writes itself.
PAYLOADS = (
    "<script>window.__xss = 1; alert('xss')</script>",
    '"><img src=x onerror="window.__xss=2;alert(2)">',
    "<svg onload=alert(3)>",
)


@job(record=True)
async def tally(count: int) -> dict[str, int]:
    """Reports progress, then records a result."""
    await progress(done=count, total=count * 2, phase="halfway")
    return {"counted": count}


@job(max_attempts=1)
async def explode(message: str) -> None:
    raise RuntimeError(message)


@job()
async def nap(seconds: float) -> None:
    await asyncio.sleep(seconds)


@job(max_attempts=1, executor="process")
def explode_in_process(message: str) -> None:
    """Fails in a worker process of the node's pool (a plain function)."""
    raise ValueError(message)


@job(max_attempts=1, executor="process")
async def explode_async_in_process(message: str) -> None:
    """Fails in a worker process, under the ``asyncio.run`` the process drives a coroutine with."""
    await asyncio.sleep(0)
    raise ValueError(message)


@job(max_attempts=1, executor="thread")
def explode_in_thread(message: str) -> None:
    raise ValueError(message)


@job(max_attempts=1, executor="process")
def exit_in_process(message: str) -> None:
    """Raises a ``BaseException`` (Conveyor carries it out of the job's code in an error of its own)."""
    raise SystemExit(message)
