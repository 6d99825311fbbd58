"""Jobs of the fault tests. Each run appends a ``start`` line when it begins and an ``end`` line when
its handler has finished, to a log file shared by every node process; the test reads that log to
find lost jobs, double runs and when processing resumed.

A line is ``<event> <job id> <attempt> <pid> <monotonic> <wall>``. ``time.monotonic()`` is the
machine's CLOCK_MONOTONIC, the same in every process, so the test compares it with its own clock.
Each line is one ``write`` on a file opened with ``O_APPEND``: lines from concurrent processes never
interleave, and a line written before a SIGKILL is in the file.
"""

from __future__ import annotations

import asyncio
import os
import time

from conveyor import current_job, job


def log_line(path: str, event: str) -> None:
    context = current_job()
    line = f"{event} {context.id} {context.attempt} {os.getpid()} {time.monotonic():.6f} {time.time():.6f}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@job(queue="default", max_attempts=20)
async def logged(log: str, seconds: float = 0.0) -> None:
    """Log the start, sleep ``seconds``, log the end."""
    log_line(log, "start")
    await asyncio.sleep(seconds)
    log_line(log, "end")
