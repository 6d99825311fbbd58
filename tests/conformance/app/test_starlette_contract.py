"""The Starlette/FastAPI integration on every engine: the lifespan opens the app and makes it
current, a handler enqueues with ``send.enqueue``, the jobs router answers 202 then 200."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from conveyor import Conveyor
from conveyor.current_app import default_app
from conveyor.engine.base import Engine
from conveyor.testing import drain_queue
from conveyor.web.starlette import conveyor_lifespan, jobs_router
from tests.conformance import api_jobs

if TYPE_CHECKING:
    from fastapi import FastAPI


def build(conveyor: Conveyor) -> FastAPI:
    # Imported here: only these tests need it, and importing it costs a worker 0.4 s of CPU.
    from fastapi import FastAPI

    api = FastAPI(lifespan=conveyor_lifespan(conveyor))

    @api.post("/greetings", status_code=202)
    async def greet(name: str) -> dict[str, Any]:
        job_id = await api_jobs.greet.enqueue(name)  # the current app: the lifespan's
        return {"job": job_id, "status": f"/jobs/{job_id}"}

    api.mount("/jobs", jobs_router(conveyor))
    return api


async def test_enqueue_then_poll_until_done(any_engine: Engine) -> None:
    conveyor = Conveyor(engine=any_engine, testing="manual")
    api = build(conveyor)
    async with conveyor_lifespan(conveyor)(api):
        assert default_app() is conveyor
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            created = await client.post("/greetings", params={"name": "ada"})
            assert created.status_code == 202
            status_url = created.json()["status"]
            waiting = await client.get(status_url)
            assert waiting.status_code == 202 and waiting.headers["retry-after"] == "1"
            assert waiting.json()["state"] == "available"
            await drain_queue(app=conveyor)
            done = await client.get(status_url)
            assert done.status_code == 200
            assert done.json() == {
                "id": created.json()["job"],
                "state": "completed",
                "attempt": 1,
                "max_attempts": 20,
                "progress": {},
                "result": "hello ada!",
            }
            failing = await conveyor.enqueue(api_jobs.fails.new("boom").with_options(max_attempts=1))
            await drain_queue(app=conveyor, with_safety=True)
            failed = await client.get(f"/jobs/{failing}")
            assert failed.status_code == 200 and failed.json()["state"] == "discarded"
            assert "RuntimeError: boom" in failed.json()["error"]
            assert (await client.get("/jobs/999999")).status_code == 404
            for bad in ("abc", "--5", "1.5", "-"):
                assert (await client.get(f"/jobs/{bad}")).status_code == 400, bad
            assert (await client.get("/jobs/99999999999999999999")).status_code == 400
            nudged = await client.post("/jobs/nudge", params={"queue": "default"})
            assert nudged.status_code == 202 and nudged.json() == {"nudged": "default"}
    assert default_app() is None


@pytest.mark.parametrize("make_default", [False])
async def test_the_lifespan_can_leave_the_default_alone(any_engine: Engine, make_default: bool) -> None:
    conveyor = Conveyor(engine=any_engine, testing="manual")
    async with conveyor_lifespan(conveyor, make_default=make_default)(None):
        assert default_app() is None
