"""oban-py workers for tests/test_oban_mixed.py, written for oban-py and run unchanged by both runtimes.

Both an oban-py node (tests/oban_py/driver.py) and a Conveyor node (``conveyor start --import
tests.oban_py.mixed_workers`` under .venv-oban's Python 3.12) import this module; Conveyor
recognises the workers by the shape oban-py's decorators give them.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from oban import Cancel, Job, Record, Snooze, current_job, job, worker


def log_line(path: str, *fields: object) -> None:
    """Append one line with one write call (O_APPEND: concurrent runs never interleave a line)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (" ".join(str(f) for f in fields) + "\n").encode())
    finally:
        os.close(fd)


@worker(queue="mixed")
class RunLog:
    """Logs the start and end of each run with the job id, attempt and the running process's pid;
    ``sleep`` awaits (the loop stays free), ``block`` blocks the event loop as sync code would,
    ``first_sleep`` awaits on the first attempt only."""

    async def process(self, job: Job) -> None:
        path = job.args["log"]
        log_line(path, "start", job.id, job.attempt, os.getpid())
        if job.args.get("block"):
            time.sleep(job.args["block"])  # noqa: ASYNC251 - a blocking job, on purpose
        if job.args.get("sleep"):
            await asyncio.sleep(job.args["sleep"])
        if job.args.get("first_sleep") and job.attempt == 1:
            await asyncio.sleep(job.args["first_sleep"])
        log_line(path, "end", job.id, job.attempt, os.getpid())


@worker(queue="outcomes")
class SnoozeOnce:
    """Snoozes its first run for an hour, with meta of its own, as oban-py's Snooze allows."""

    async def process(self, job: Job) -> Snooze | None:
        if not job.meta.get("snoozed"):
            return Snooze(3600, meta={"why": "busy"})
        return None


@worker(queue="outcomes")
class CancelIt:
    async def process(self, job: Job) -> Cancel:
        return Cancel(f"not today, {job.args['who']}")


@worker(queue="outcomes")
class RecordIt:
    async def process(self, job: Job) -> Record:
        return Record({"sum": sum(job.args["numbers"]), "attempt": job.attempt, "tags": job.tags})


@worker(queue="outcomes", max_attempts=3)
class FailsWithBackoff:
    """Fails; its own backoff puts the next attempt 1000 seconds out."""

    async def process(self, job: Job) -> None:
        raise RuntimeError(f"failure on attempt {job.attempt}")

    def backoff(self, job: Job) -> int:
        return 1000 * job.attempt


@worker(queue="outcomes")
class TooSlow:
    """Its own timeout ends it after 0.2 s: an error, retried."""

    async def process(self, job: Job) -> None:
        await asyncio.sleep(5)

    def timeout(self, job: Job) -> float:
        return 0.2


@job(queue="outcomes")
def multiply(a: int, b: int) -> Record:
    """A function job: the args come as keywords; current_job() is the running job."""
    running: Any = current_job()
    return Record({"product": a * b, "attempt": running.attempt if running else None})


@job(queue="outcomes")
async def snooze_function(seconds: int) -> Snooze:
    return Snooze(seconds)
