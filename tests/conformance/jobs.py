"""Jobs the runtime conformance tests run (importable by name, also from spawned processes)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from conveyor import Cancel, Record, Snooze, current_job, job


@job(queue="default")
async def async_ok(value: int) -> Record:
    await asyncio.sleep(0)
    return Record(value * 2)


@job(queue="default", record=True)
def thread_ok(value: int) -> int:
    time.sleep(0.01)
    return value + 1


@job(queue="default", executor="process", record=True)
def process_pid() -> int:
    return os.getpid()


@job(queue="default", max_attempts=2)
async def always_fails() -> None:
    raise RuntimeError("conformance failure")


@job(queue="default")
async def snoozes_once() -> Snooze | None:
    return None if current_job().meta.get("snoozed") else Snooze(0)


@job(queue="default")
def snoozes_with_meta() -> Snooze | None:
    """Snoozes once with meta of its own (as oban-py's Snooze can), then records what it saw."""
    meta = current_job().meta
    return None if meta.get("snoozed") else Snooze(0, meta={"why": "busy", "seen": [1]})


@job(queue="default")
async def cancels() -> Cancel:
    return Cancel("not needed")


#: How many ``probe`` jobs run at this moment in this process, and the most that ever did.
PROBE = {"now": 0, "peak": 0}


@job(queue="capped")
async def probe(pause: float) -> None:
    """Counts how many of its kind run at once (every node of a test shares this process)."""
    PROBE["now"] += 1
    PROBE["peak"] = max(PROBE["peak"], PROBE["now"])
    try:
        await asyncio.sleep(pause)
    finally:
        PROBE["now"] -= 1


#: (lock key, job id, "start" | "end") in the order they happened, in this process.
LOCK_LOG: list[tuple[str, int, str]] = []


@job(queue="locked")
async def locked_step(key: str, pause: float) -> None:
    """Logs its start and end, so a test can check that jobs of one lock never overlap."""
    job_id = current_job().job.id
    LOCK_LOG.append((key, job_id, "start"))
    try:
        await asyncio.sleep(pause)
    finally:
        LOCK_LOG.append((key, job_id, "end"))


#: When each ``rated_step`` started (this process's monotonic clock).
RATED_STARTS: list[float] = []


@job(queue="rated")
async def rated_step() -> None:
    RATED_STARTS.append(time.monotonic())


#: (label, "start" | "end") in the order they happened, in this process (workflow steps).
FLOW_LOG: list[tuple[str, str]] = []
#: What the workflow tests hand to their steps: the app (``app``) and switches (``fail``).
FLOW: dict[str, Any] = {}


@job(queue="flow", record=True)
async def flow_step(label: str, pause: float = 0.0) -> str:
    FLOW_LOG.append((label, "start"))
    try:
        await asyncio.sleep(pause)
        return label.upper()
    finally:
        FLOW_LOG.append((label, "end"))


@job(queue="flow", max_attempts=1)
async def flow_fails(label: str) -> None:
    FLOW_LOG.append((label, "start"))
    if FLOW.get("fail", True):
        raise RuntimeError(f"{label} failed")


@job(queue="flow", record=True)
async def flow_join(label: str) -> dict[str, Any]:
    """Reads the recorded results of the steps it depends on."""
    FLOW_LOG.append((label, "start"))
    return await FLOW["app"].dependency_results()


@job(queue="flow")
async def flow_graft(label: str, fan: int) -> None:
    """Adds ``fan`` steps to its own workflow, and one after them all (grafting)."""
    app = FLOW["app"]
    workflow = await app.extend_workflow(current_job().meta["workflow_id"])
    names = [f"{label}.{n}" for n in range(fan)]
    for name in names:
        workflow.add(name, flow_step.new(label=name), deps=[label])
    workflow.add(f"{label}.done", flow_step.new(label=f"{label}.done"), deps=names)
    await app.enqueue_many(workflow)


#: Each batch callback's kind and the counts it was given, in the order they ran.
CALLBACKS: list[tuple[str, dict[str, int]]] = []


@job(queue="flow")
async def flow_callback(kind: str) -> None:
    CALLBACKS.append((kind, dict(current_job().meta["deps_ended"])))  # type: ignore[call-overload]
