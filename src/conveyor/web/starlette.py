"""Starlette and FastAPI integration (``pip install 'conveyor[web]'``): a lifespan that opens the app
for a web process and makes it current, and a router with the nudge endpoint and a job-status
endpoint for the 202-then-poll pattern.

```python
app = Conveyor(DATABASE_URL)  # a web process: enqueues, runs no node
api = FastAPI(lifespan=conveyor_lifespan(app))
api.mount("/jobs", jobs_router(app))  # POST /jobs/nudge, GET /jobs/{id}
```
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from conveyor._options import check_job_id
from conveyor.app import Conveyor
from conveyor.current_app import current_app, default_app, set_default_app
from conveyor.errors import ValidationError
from conveyor.job import JobState
from conveyor.recorded import UnreadableResultError, decode_result
from conveyor.web.nudge import NudgeEndpoint

#: Seconds a client is told to wait before polling an unfinished job again.
RETRY_AFTER = 1


def conveyor_lifespan(
    conveyor: Conveyor, *, make_default: bool = True
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A ``lifespan=`` for Starlette or FastAPI: opens the app when the server starts (a database
    that cannot be reached fails the start, with the reason), makes it the default app while the
    server runs (``send.enqueue(...)`` in request handlers finds it; ``make_default=False`` leaves
    the default alone), and closes it at shutdown. An app with queues also runs its node there."""

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        previous = default_app()
        await conveyor.start()
        if make_default:
            set_default_app(conveyor)
        try:
            yield
        finally:
            if make_default:
                set_default_app(previous)
            await conveyor.stop()

    return lifespan


def jobs_router(conveyor: Conveyor | None = None, *, status: bool = True, nudge: bool = True) -> Router:
    """Routes to mount (``api.mount("/jobs", jobs_router(app))``), on ``conveyor`` or else the
    current app at each request:

    - ``POST /nudge?queue=mail``: see ``NudgeEndpoint``.
    - ``GET /{id}``: the job's ``id``, ``state``, ``attempt``, ``max_attempts``, ``progress`` and,
      once completed, its recorded ``result``; once it failed for good, its last ``error``. ``202``
      with ``Retry-After`` while the job has not finished, ``200`` when it has (whatever its state),
      ``404`` for an unknown id, ``400`` for one that is no job id. Args and meta are not shown: mount
      it behind your own authentication, like any route that names your data.
    """

    def app_now() -> Conveyor:
        return conveyor if conveyor is not None else current_app()

    async def job_status(request: Request) -> Response:
        raw = request.path_params["job_id"]
        try:
            job_id = check_job_id(int(raw), "job_id")
        except ValueError as exc:  # no integer, or beyond 64 bits (a ValidationError)
            problem = str(exc) if isinstance(exc, ValidationError) else f"{raw!r} is no job id"
            return JSONResponse({"error": problem}, status_code=400)
        job = await app_now().get_job(job_id)
        if job is None:
            return JSONResponse({"error": f"no job has id {job_id}"}, status_code=404)
        body: dict[str, Any] = {
            "id": job.id,
            "state": job.state.value,
            "attempt": job.attempt,
            "max_attempts": job.max_attempts,
            "progress": job.progress,
        }
        if job.state is JobState.COMPLETED:
            try:
                body["result"] = decode_result(job.meta)
            except UnreadableResultError as exc:  # another client's bytes: say so, not a 500
                body["result"], body["result_error"] = None, str(exc)
            except LookupError:
                body["result"] = None
        elif job.state.is_final and job.errors:
            last = job.errors[-1]  # another client's row may hold anything there
            body["error"] = last.get("error") if isinstance(last, dict) else str(last)
        if not job.state.is_final:
            return JSONResponse(body, status_code=202, headers={"Retry-After": str(RETRY_AFTER)})
        return JSONResponse(body)

    routes: list[Any] = []
    if nudge:
        routes.append(Route("/nudge", _LazyNudge(app_now)))  # an ASGI app: it answers every method
    if status:
        routes.append(Route("/{job_id}", job_status, methods=["GET"]))
    return Router(routes=routes)


class _LazyNudge:
    """``NudgeEndpoint`` on the app found at each request."""

    def __init__(self, app_now: Callable[[], Conveyor]) -> None:
        self.app_now = app_now

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await NudgeEndpoint(self.app_now())(scope, receive, send)
