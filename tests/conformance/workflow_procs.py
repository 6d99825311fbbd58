"""Run in other processes by the workflow-lock race test: each enqueues a workflow with one lock."""

from __future__ import annotations

import asyncio
import multiprocessing.queues
import multiprocessing.synchronize

from conveyor import Conveyor, JobRequest, Workflow
from conveyor.engine.urls import engine_from_url


def build(lock: str) -> Workflow:
    step = JobRequest("tests.race.Job", args={}, queue="not-run-here")
    return Workflow(name="build", lock=lock).add("fetch", step).add("render", step, deps=["fetch"])


async def _enqueue(url: str, prefix: str, lock: str, start: multiprocessing.synchronize.Event) -> str:
    engine = engine_from_url(url, prefix=prefix, pool_size=2)
    await engine.open()
    app = Conveyor(engine=engine, testing="manual")
    try:
        start.wait(30)  # every process begins at once
        ids = await app.enqueue_many(build(lock))
        return f"{ids.workflow_id} {'conflict' if ids.conflict else 'new'}"
    finally:
        await app.close()
        await engine.close()


def enqueue_one(
    url: str,
    prefix: str,
    lock: str,
    start: multiprocessing.synchronize.Event,
    results: multiprocessing.queues.Queue[str],
) -> None:
    """Enqueue one locked workflow; put "<workflow id> new|conflict" (or the error)."""
    try:
        results.put(asyncio.run(_enqueue(url, prefix, lock, start)))
    except BaseException as exc:
        results.put(f"error {type(exc).__name__}: {exc}")
