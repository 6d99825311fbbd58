"""A FastAPI service that starts long work in a job and answers at once: ``POST /reports`` replies
202 with where to look, ``GET /reports/{id}`` shows the job's phase and progress while it runs,
``POST /reports/{id}/approve`` sends the job the decision it waits for (off its slot, for as long as
it takes), and ``GET /reports/{id}/result?wait=10`` waits for the result (202 while it runs).

The node runs inside the web app (the lifespan starts and stops it); in production the jobs would
usually run on ``conveyor start`` workers and the web app would only enqueue, read and signal: the
endpoints stay the same. The script plays the client itself, through httpx's ASGI transport.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from _support import DATABASE_URL, PREFIX
from fastapi import Body, FastAPI, HTTPException, Response

from conveyor import (
    Conveyor,
    JobNotFoundError,
    JobState,
    Record,
    ValidationError,
    WaitTimeoutError,
    job,
    progress,
    wait_for_signal,
)

# Progress is written at most every 0.2 s per job here (default 0.5 s): pages render fast.
conveyor = Conveyor(DATABASE_URL, prefix=PREFIX, queues={"reports": 5}, progress_interval=0.2)


@job(queue="reports")
async def build_report(pages: int) -> Record:
    # Waiting comes first: each run of the job starts again from the top (see the relay guide).
    await progress(phase="awaiting approval")
    decision = await wait_for_signal(timeout=3600)
    if not decision.get("approved"):
        return Record({"published": False, "by": decision.get("by")})
    for page in range(1, pages + 1):
        await asyncio.sleep(0.25)  # rendering a page
        await progress(phase="render", done=page, total=pages)
    await progress(phase="published")
    return Record({"published": True, "by": decision["by"], "url": f"/files/report-{pages}.pdf"})


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await conveyor.install()
    async with conveyor:  # starts the node; stops it gracefully at shutdown
        yield


api = FastAPI(lifespan=lifespan)


@api.post("/reports", status_code=202)
async def start_report(pages: int = Body(embed=True, ge=1, le=100)) -> dict[str, Any]:
    job_id = await conveyor.enqueue(build_report.new(pages=pages))
    return {"job_id": job_id, "status": f"/reports/{job_id}"}


@api.get("/reports/{job_id}")
async def report_status(job_id: int) -> dict[str, Any]:
    found = await conveyor.get_job(job_id)
    if found is None or found.worker != build_report.definition.name:
        raise HTTPException(404, f"no report {job_id}")
    return {"state": found.state, "progress": found.progress, "result": found.result}


@api.post("/reports/{job_id}/approve", status_code=202)
async def approve(
    job_id: int, by: str = Body(embed=True), approved: bool = Body(embed=True)
) -> dict[str, Any]:
    try:
        state = await conveyor.signal(job_id, {"by": by, "approved": approved})
    except JobNotFoundError:
        raise HTTPException(404, f"no report {job_id}") from None
    except ValidationError as exc:  # a finished job, a full inbox
        raise HTTPException(409, str(exc)) from None
    return {"state": state}


@api.get("/reports/{job_id}/result")
async def report_result(job_id: int, response: Response, wait: float = 0) -> dict[str, Any]:
    try:
        done = await conveyor.wait(job_id, timeout=min(wait, 30))
    except WaitTimeoutError as exc:
        response.status_code = 202  # not done yet: ask again
        return {"state": exc.state}
    except JobNotFoundError:
        raise HTTPException(404, f"no report {job_id}") from None
    return {"state": done.state, "result": done.result}


async def main() -> None:
    transport = httpx.ASGITransport(app=api)
    async with lifespan(api), httpx.AsyncClient(transport=transport, base_url="http://reports") as client:
        started = await client.post("/reports", json={"pages": 5})
        job_id = started.json()["job_id"]
        linked = started.json()["status"] == f"/reports/{job_id}"
        print(f"POST /reports -> {started.status_code}, status at /reports/<id>: {linked}")
        status = await poll(client, job_id, lambda s: s["state"] == JobState.SCHEDULED)
        print(f"waiting: state={status['state']} phase={status['progress']['phase']}")
        print(f"result so far -> {(await client.get(f'/reports/{job_id}/result')).status_code}")
        approved = await client.post(f"/reports/{job_id}/approve", json={"by": "ada", "approved": True})
        print(f"POST approve -> {approved.status_code} {approved.json()}")
        status = await poll(client, job_id, lambda s: s["progress"].get("phase") == "render")
        print(f"running: state={status['state']} phase=render, {status['progress']['total']} pages")
        result = await client.get(f"/reports/{job_id}/result", params={"wait": 10})
        print(f"GET result?wait=10 -> {result.status_code} {result.json()['result']}")
        print(f"final progress: {(await client.get(f'/reports/{job_id}')).json()['progress']}")
        again = await client.post(f"/reports/{job_id}/approve", json={"by": "bob", "approved": False})
        print(f"approve a finished report -> {again.status_code}: {again.json()['detail']}")
        print(f"unknown report -> {(await client.get('/reports/99999999')).status_code}")


async def poll(client: httpx.AsyncClient, job_id: int, ready: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while not ready(status := (await client.get(f"/reports/{job_id}")).json()):
        if time.monotonic() > deadline:
            raise TimeoutError(status)
        await asyncio.sleep(0.02)
    return status


if __name__ == "__main__":
    asyncio.run(main())
