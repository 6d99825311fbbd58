"""The background work: each uploaded build goes through three phases in one job (ingest, render,
publish), and a cron entry deletes the builds nobody serves any more.

Each phase writes the build's status in a short transaction of its own, so ``GET /builds/{id}``
shows it while the job runs, and reports the phase as the job's progress. A retry runs the job
from the top: every phase only overwrites what it owns, so running one twice does no harm.
"""

from __future__ import annotations

import asyncio
import html
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update

from conveyor import Cancel, Discard, current_job, job, progress
from conveyor.current_app import current_app
from docverse.db import Database, database_of
from docverse.models import Build, BuildStatus, Edition, edition_slug, edition_url, utcnow
from docverse.settings import CLEANUP_CRON, STALE_AFTER_DAYS

INDEX = "index.html"


@dataclass(frozen=True, slots=True)
class Upload:
    build_id: int
    project: str
    git_ref: str
    files: dict[str, str]


@job(queue="builds", max_attempts=3)
async def process_build(build_id: int) -> None:
    """Ingest, render and publish build ``build_id``."""
    database = database_of(current_app())  # the app running this job knows the database
    try:
        upload = await ingest(database, build_id)
        rendered = await render(database, upload)
        await publish(database, upload, rendered)
    except (Cancel, Discard):
        raise  # the job's own decisions: the build's status already says why
    except Exception as exc:
        this = current_job().job
        if this.attempt >= this.max_attempts:  # no retry left: tell the client to stop waiting
            await set_status(database, build_id, BuildStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise


async def ingest(database: Database, build_id: int) -> Upload:
    await progress(phase="ingest")
    async with database.sessions() as session:
        build = await session.get(Build, build_id)
    if build is None:  # deleted (by an operator, or the cleanup) before its turn came
        raise Cancel(f"build {build_id} no longer exists")
    if INDEX not in build.files:  # no retry can fix the upload: fail the build for good
        await set_status(database, build_id, BuildStatus.FAILED, error=f"the upload has no {INDEX}")
        raise Discard(f"build {build_id} has no {INDEX}")
    await set_status(database, build_id, BuildStatus.INGESTING)
    return Upload(build_id, build.project, build.git_ref, build.files)


async def render(database: Database, upload: Upload) -> dict[str, str]:
    await set_status(database, upload.build_id, BuildStatus.RENDERING)
    pages = sorted(name for name in upload.files if name.endswith(".html"))
    rendered = dict(upload.files)  # other files (styles, images) are published as uploaded
    for done, name in enumerate(pages, 1):
        await asyncio.sleep(0.02)  # rendering takes a moment
        rendered[name] = with_banner(upload, upload.files[name])
        await progress(phase="render", done=done, total=len(pages))
    await set_status(database, upload.build_id, BuildStatus.PUBLISHING, rendered=rendered)
    return rendered


async def publish(database: Database, upload: Upload, rendered: dict[str, str]) -> None:
    """Point the git ref's edition at this build and mark it published, in one transaction."""
    await progress(phase="publish")
    slug = edition_slug(upload.git_ref)
    async with database.sessions.begin() as session:
        edition = await session.get(Edition, (upload.project, slug))
        if edition is None:
            session.add(Edition(project=upload.project, slug=slug, build_id=upload.build_id))
        elif edition.build_id < upload.build_id:  # never back to an older upload that finished late
            edition.build_id = upload.build_id
        await session.execute(
            update(Build)
            .where(Build.id == upload.build_id)
            .values(status=BuildStatus.PUBLISHED, published_url=edition_url(upload.project, slug))
        )
    await progress(phase="published")


def with_banner(upload: Upload, page: str) -> str:
    banner = f"<header>{html.escape(upload.project)} · {html.escape(upload.git_ref)}</header>"
    return banner + page


async def set_status(database: Database, build_id: int, status: BuildStatus, **values: Any) -> None:
    async with database.sessions.begin() as session:
        await session.execute(update(Build).where(Build.id == build_id).values(status=status, **values))


@job(queue="maintenance", cron=CLEANUP_CRON, record=True)
async def cleanup_builds(max_age_days: int = STALE_AFTER_DAYS) -> int:
    """Delete the builds older than ``max_age_days`` that no edition serves (superseded, failed or
    abandoned uploads); record how many went. The cron entry runs it with the default."""
    cutoff = utcnow() - timedelta(days=max_age_days)
    served = select(Edition.build_id)
    async with database_of(current_app()).sessions.begin() as session:
        deleted = await session.scalars(
            delete(Build).where(Build.created_at < cutoff, Build.id.not_in(served)).returning(Build.id)
        )
        return len(deleted.all())
