"""Chunk workers (``@job(chunk=Chunk(...))``), for the chunk contract: each call is noted in
``CALLS`` by its first job's ``tag`` arg, as the sorted ``n`` args of the jobs it got."""

from __future__ import annotations

import asyncio
import threading

from conveyor import Cancel, Chunk, ChunkResult, Discard, Snooze, job, worker
from conveyor.job import Job

CALLS: dict[str, list[list[int]]] = {}
#: The thread each tag's last call ran in.
THREADS: dict[str, str] = {}


def _note(jobs: list[Job]) -> None:
    CALLS.setdefault(jobs[0].args["tag"], []).append(sorted(j.args["n"] for j in jobs))
    THREADS[jobs[0].args["tag"]] = threading.current_thread().name


@job(queue="chunky", max_attempts=3, chunk=Chunk(size=3, timeout=60))
async def gather(jobs: list[Job]) -> None:
    _note(jobs)


@job(queue="chunky", max_attempts=3, chunk=Chunk(size=5, timeout=60))
async def sort_out(jobs: list[Job]) -> ChunkResult:
    """Each job's ``do`` arg says how it ends: ``fail``, ``discard``, ``cancel``, ``snooze``, or
    (anything else) complete."""
    _note(jobs)
    made = {
        "fail": lambda: ValueError("bad row"),
        "discard": lambda: Discard("not ours"),
        "cancel": lambda: Cancel("withdrawn"),
        "snooze": lambda: Snooze(600),
    }
    return ChunkResult({j.id: made[j.args["do"]]() for j in jobs if j.args["do"] in made})


@job(queue="chunky", max_attempts=3, chunk=Chunk(size=2, timeout=60))
def fail_all(jobs: list[Job]) -> None:
    """A thread chunk whose error ends all its jobs."""
    _note(jobs)
    raise RuntimeError("the bulk insert failed")


@job(queue="chunky", max_attempts=3, timeout=5, chunk=Chunk(size=1, timeout=60))
async def too_slow(jobs: list[Job]) -> None:
    """A chunk that never ends by itself: its worker's timeout ends it."""
    _note(jobs)
    await asyncio.Event().wait()


@worker(queue="chunky", chunk=Chunk(size=2, timeout=60))
class GatherInThread:
    """A class chunk worker whose ``process`` gets the list (a blocking one: run in a thread)."""

    def process(self, jobs: list[Job]) -> None:
        _note(jobs)
