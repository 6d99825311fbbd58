"""The HTTP API. ``POST /projects/{slug}/builds`` stores the upload and enqueues its processing in
one transaction, then answers 202 with where to look; ``GET /builds/{id}`` reads the build's status
(which the job moves along) and the job's progress. Conveyor's ``jobs_router`` is mounted at
``/jobs`` for the job's own status and the nudge endpoint.

The app's node (if it has queues) runs inside the server, started by ``conveyor_lifespan``; a
web process built with ``make_conveyor(run_jobs=False)`` only enqueues and reads, and the jobs
run on ``conveyor start --import docverse.jobs`` workers: the endpoints stay the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from conveyor import Conveyor
from conveyor.web.starlette import conveyor_lifespan, jobs_router
from docverse.db import Database, database_of
from docverse.jobs import process_build
from docverse.models import Build, BuildStatus, Edition, edition_url
from docverse.schemas import SLUG_PATTERN, BuildAccepted, BuildUpload, BuildView, EditionView, JobView

router = APIRouter()
Slug = Annotated[str, Path(pattern=SLUG_PATTERN)]
EditionSlug = Annotated[str, Path(max_length=100)]
BuildId = Annotated[int, Path(ge=1, le=2**31 - 1)]  # the id column is a 32-bit integer


def get_conveyor(request: Request) -> Conveyor:
    conveyor: Conveyor = request.app.state.conveyor
    return conveyor


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session per request; whatever it did not commit is rolled back when the request ends."""
    database: Database = request.app.state.database
    async with database.sessions() as session:
        yield session


Session = Annotated[AsyncSession, Depends(get_session)]
App = Annotated[Conveyor, Depends(get_conveyor)]


@router.post("/projects/{slug}/builds", status_code=202)
async def upload_build(
    slug: Slug, upload: BuildUpload, session: Session, conveyor: App, response: Response
) -> BuildAccepted:
    build = Build(project=slug, git_ref=upload.git_ref, files=upload.files, status=BuildStatus.UPLOADED)
    session.add(build)
    await session.flush()  # the row gets its id; nothing is visible to anyone else yet
    # The job is written by this same transaction (conn=session): no worker can see it before the
    # row exists, and if anything below fails, the rollback takes the row and the job together.
    job_id = await process_build.options(app=conveyor, conn=session).enqueue(build_id=build.id)
    build.job_id = int(job_id)
    await session.commit()
    response.headers["Location"] = f"/builds/{build.id}"
    return BuildAccepted(
        id=build.id, status=build.status, status_url=f"/builds/{build.id}", job_url=f"/jobs/{job_id}"
    )


@router.get("/builds/{build_id}")
async def build_status(build_id: BuildId, session: Session, conveyor: App) -> BuildView:
    build = await session.get(Build, build_id)
    if build is None:
        raise HTTPException(404, f"no build {build_id}")
    job = await conveyor.get_job(build.job_id) if build.job_id is not None else None
    job_view = None
    if job is not None:  # (None once Conveyor pruned it)
        job_view = JobView(id=job.id, state=job.state, attempt=job.attempt, progress=job.progress)
    return BuildView(
        id=build.id,
        project=build.project,
        git_ref=build.git_ref,
        status=build.status,
        error=build.error,
        published_url=build.published_url,
        created_at=build.created_at,
        job=job_view,
    )


@router.get("/projects/{slug}/editions/{edition}")
async def edition_view(slug: Slug, edition: EditionSlug, session: Session) -> EditionView:
    found = await session.get(Edition, (slug, edition))
    if found is None:
        raise HTTPException(404, f"no edition {edition!r} of {slug!r}")
    return EditionView(project=slug, slug=edition, build_id=found.build_id, url=edition_url(slug, edition))


def create_api(conveyor: Conveyor) -> FastAPI:
    """The web app for ``conveyor``: its tables are in the same database (see ``database_of``)."""
    database = database_of(conveyor)
    open_conveyor = conveyor_lifespan(conveyor)  # opens the app (and its node) and makes it current

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        try:
            async with open_conveyor(api):
                yield
        finally:
            await database.dispose()  # after the node stopped: its last jobs still used it

    api = FastAPI(title="Docverse (a Conveyor example)", lifespan=lifespan)
    api.state.conveyor = conveyor
    api.state.database = database
    api.include_router(router)
    api.mount("/jobs", jobs_router(conveyor))
    return api
