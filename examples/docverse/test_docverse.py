"""The service's tests, with Conveyor's pytest plugin: ``conveyor_app`` gives each test an app on a
database of its own in manual mode (jobs are stored, and run only when the test drains a queue).

``process_build`` is tested in manual mode, not inline: inline mode would run the job inside
``enqueue``, before the request's transaction commits, where the job's own session cannot see the
build row yet. The cron cleanup enqueues from no transaction, so inline mode suits it.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from conveyor import Conveyor
from conveyor.cron import definitions_in, entries_for
from conveyor.engine.urls import is_sqlite_url
from conveyor.testing import all_enqueued, assert_enqueued, drain_queue, process_job, refute_enqueued
from docverse import jobs
from docverse.db import Database
from docverse.jobs import cleanup_builds, process_build
from docverse.models import Build, BuildStatus, Edition, utcnow
from docverse.settings import CLEANUP_CRON, JOB_MODULES, STALE_AFTER_DAYS, sqlalchemy_url
from docverse.web import get_session

SITE = {"index.html": "<h1>Docs</h1>", "guide/start.html": "<h1>Start</h1>", "style.css": "h1 {}"}


async def upload(client: httpx.AsyncClient, git_ref: str = "main", files: Any = None) -> dict[str, Any]:
    response = await client.post("/projects/docs/builds", json={"git_ref": git_ref, "files": files or SITE})
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def count_builds(database: Database) -> int:
    async with database.sessions() as session:
        return await session.scalar(select(func.count()).select_from(Build)) or 0


async def test_an_upload_is_accepted_and_its_processing_enqueued(client: httpx.AsyncClient) -> None:
    response = await client.post("/projects/docs/builds", json={"git_ref": "main", "files": SITE})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "uploaded"
    assert response.headers["location"] == body["status_url"] == f"/builds/{body['id']}"

    job = await assert_enqueued(worker=process_build, queue="builds", args={"build_id": body["id"]})
    assert body["job_url"] == f"/jobs/{job.id}"
    status = (await client.get(body["status_url"])).json()
    assert status["status"] == "uploaded"
    assert status["job"] == {"id": job.id, "state": "available", "attempt": 0, "progress": {}}
    assert (await client.get(body["job_url"])).status_code == 202  # Conveyor's router: not done yet


async def test_a_failed_request_leaves_neither_the_build_nor_its_job(
    api: FastAPI, database: Database, conveyor_app: Conveyor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = conveyor_app.settings
    jobs_table = "oban_jobs" if is_sqlite_url(settings.database_url) else f'"{settings.prefix}".oban_jobs'
    inside: dict[str, int] = {}

    async def failing_session() -> AsyncIterator[AsyncSession]:
        async with database.sessions() as session:

            async def lost_at_commit() -> None:
                """The connection is lost at commit, after the row and the job were written."""
                inside["builds"] = await session.scalar(select(func.count()).select_from(Build)) or 0
                inside["jobs"] = await session.scalar(text(f"SELECT count(*) FROM {jobs_table}")) or 0
                raise ConnectionError("connection lost at commit")

            # Patched on this one session (a subclass of AsyncSession would do as well).
            monkeypatch.setattr(session, "commit", lost_at_commit)
            yield session

    api.dependency_overrides[get_session] = failing_session
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://docverse.test") as client:
        response = await client.post("/projects/docs/builds", json={"git_ref": "main", "files": SITE})
    assert response.status_code == 500
    assert inside == {"builds": 1, "jobs": 1}  # both were written, in the request's transaction
    assert await count_builds(database) == 0  # and both went with its rollback
    await refute_enqueued(worker=process_build)


@pytest.mark.parametrize(
    ("path", "body", "problem"),
    [
        ("/projects/Not_A_Slug!/builds", {"git_ref": "main", "files": SITE}, "slug"),
        ("/projects/docs/builds", {"git_ref": "main", "files": {}}, "files"),
        ("/projects/docs/builds", {"git_ref": "main"}, "files"),
        ("/projects/docs/builds", {"git_ref": "-rf", "files": SITE}, "git_ref"),
        ("/projects/docs/builds", {"git_ref": "main", "files": {"../etc/passwd": "x"}}, "files"),
        ("/projects/docs/builds", {"git_ref": "main", "files": {"a.html": "\u0000"}}, "files"),
        ("/projects/docs/builds", {"git_ref": "main", "files": SITE, "extra": 1}, "extra"),
    ],
)
async def test_bad_uploads_are_refused_with_422(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], problem: str
) -> None:
    response = await client.post(path, json=body)
    assert response.status_code == 422
    assert problem in {str(part) for error in response.json()["detail"] for part in error["loc"]}
    await refute_enqueued(worker=process_build)


async def test_unknown_builds_and_editions(client: httpx.AsyncClient) -> None:
    assert (await client.get("/builds/12345")).status_code == 404
    assert (await client.get("/builds/0")).status_code == 422
    assert (await client.get(f"/builds/{2**40}")).status_code == 422
    assert (await client.get("/projects/docs/editions/main")).status_code == 404


async def test_draining_runs_the_phases_and_publishes_the_build(
    client: httpx.AsyncClient, database: Database
) -> None:
    build = await upload(client)
    assert await drain_queue("builds") == {
        "cancelled": 0,
        "completed": 1,
        "discarded": 0,
        "retryable": 0,
        "scheduled": 0,
    }

    status = (await client.get(build["status_url"])).json()
    assert status["status"] == "published" and status["error"] is None
    assert status["published_url"] == "/docs/v/main/"
    assert status["job"]["state"] == "completed"
    assert status["job"]["progress"] == {"phase": "published", "done": 2, "total": 2}
    assert (await client.get(build["job_url"])).json()["state"] == "completed"
    edition = (await client.get("/projects/docs/editions/main")).json()
    assert edition == {"project": "docs", "slug": "main", "build_id": build["id"], "url": "/docs/v/main/"}
    async with database.sessions() as session:
        stored = await session.get(Build, build["id"])
    assert stored is not None and stored.rendered is not None
    assert stored.rendered["guide/start.html"] == "<header>docs · main</header><h1>Start</h1>"
    assert stored.rendered["style.css"] == SITE["style.css"]


async def test_an_upload_without_an_index_fails_for_good(client: httpx.AsyncClient) -> None:
    build = await upload(client, files={"about.html": "<p>no index</p>"})
    counts = await drain_queue("builds")
    assert counts["discarded"] == 1 and counts["completed"] == 0
    status = (await client.get(build["status_url"])).json()
    assert status["status"] == "failed"
    assert status["error"] == "the upload has no index.html"
    assert status["job"]["state"] == "discarded"


async def test_a_build_deleted_before_its_turn_cancels_its_job(
    client: httpx.AsyncClient, database: Database
) -> None:
    build = await upload(client)
    async with database.sessions.begin() as session:
        await session.execute(delete(Build))  # an operator (or the cleanup) removed it
    counts = await drain_queue("builds")
    assert counts["cancelled"] == 1 and counts["completed"] == 0
    job = (await client.get(build["job_url"])).json()  # Conveyor's status route
    assert job["state"] == "cancelled" and "no longer exists" in job["error"]


async def test_a_build_that_keeps_crashing_fails_after_its_last_attempt(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_renderer(upload: jobs.Upload, page: str) -> str:
        raise RuntimeError("the theme is missing")

    monkeypatch.setattr(jobs, "with_banner", broken_renderer)
    build = await upload(client)
    counts = await drain_queue("builds", with_safety=True)  # failures are recorded, then retried
    assert counts["retryable"] == 2 and counts["discarded"] == 1
    status = (await client.get(build["status_url"])).json()
    assert status["status"] == "failed"
    assert status["error"] == "RuntimeError: the theme is missing"
    assert status["job"]["attempt"] == 3


async def test_an_edition_moves_only_to_newer_builds(
    client: httpx.AsyncClient, conveyor_app: Conveyor
) -> None:
    older, newer = await upload(client, "tickets/DM-1"), await upload(client, "tickets/DM-1")
    # The newer build finishes first (here: run at once, outside the queue); the older one after.
    newer_job = await conveyor_app.get_job(int(newer["job_url"].rsplit("/", 1)[1]))
    assert newer_job is not None
    await process_job(newer_job)
    await drain_queue("builds")  # the older one, then the newer one again: a rerun does no harm

    edition = (await client.get("/projects/docs/editions/tickets-DM-1")).json()
    assert edition["build_id"] == newer["id"]
    for build in (older, newer):
        assert (await client.get(build["status_url"])).json()["status"] == "published"


@pytest.mark.conveyor(testing="disabled", queues={"builds": 2})
async def test_with_a_node_the_status_follows_the_phases(client: httpx.AsyncClient) -> None:
    # A real node in the test's process (the lifespan starts it): the job runs as in production.
    build = await upload(client)
    seen: list[str] = []
    for _ in range(500):
        status = (await client.get(build["status_url"])).json()
        if not seen or seen[-1] != status["status"]:
            seen.append(status["status"])
        # The row says published just before the job's ack stores its end (and last progress).
        if status["status"] == "published" and status["job"]["state"] == "completed":
            break
        await asyncio.sleep(0.02)
    # In phase order; the polls may miss some (the first may come after the job started).
    assert seen[-1] == "published" and seen == [phase for phase in BuildStatus if phase in seen]
    assert status["job"]["progress"] == {"phase": "published", "done": 2, "total": 2}


@pytest.mark.conveyor(testing="inline")
async def test_the_cron_cleanup_deletes_only_stale_builds(database: Database) -> None:
    # What a node finds in JOB_MODULES (the imports setting) and schedules: this one entry.
    entries = entries_for(definitions_in(importlib.import_module(name) for name in JOB_MODULES))
    assert [(e.expression.text, e.request.worker, e.request.queue) for e in entries] == [
        (CLEANUP_CRON, cleanup_builds.definition.name, "maintenance")
    ]
    old = utcnow() - timedelta(days=STALE_AFTER_DAYS + 10)
    async with database.sessions.begin() as session:
        builds = {
            "served": Build(created_at=old, status=BuildStatus.PUBLISHED),
            "superseded": Build(created_at=old, status=BuildStatus.PUBLISHED),
            "failed": Build(created_at=old, status=BuildStatus.FAILED),
            "abandoned": Build(created_at=old, status=BuildStatus.UPLOADED),
            "recent": Build(created_at=utcnow() - timedelta(days=1), status=BuildStatus.FAILED),
        }
        for build in builds.values():
            build.project, build.git_ref, build.files = "docs", "main", SITE
        session.add_all(builds.values())
        await session.flush()
        session.add(Edition(project="docs", slug="main", build_id=builds["served"].id))

    await cleanup_builds.enqueue()  # as the cron entry inserts it: no args; inline mode runs it now
    async with database.sessions() as session:
        left = set(await session.scalars(select(Build.id)))
    assert left == {builds["served"].id, builds["recent"].id}
    assert await all_enqueued() == []  # inline: nothing was stored


def test_the_sqlalchemy_url_follows_conveyor_s() -> None:
    assert sqlalchemy_url("postgresql://app@db:5432/docs") == "postgresql+psycopg://app@db:5432/docs"
    assert sqlalchemy_url("postgres://app@db/docs") == "postgresql+psycopg://app@db/docs"
    assert sqlalchemy_url("sqlite:////var/lib/docverse.db") == "sqlite+aiosqlite:////var/lib/docverse.db"
    assert sqlalchemy_url("sqlite:///docverse.db") == "sqlite+aiosqlite:///docverse.db"
    with pytest.raises(ValueError, match="SQLite file"):
        sqlalchemy_url("sqlite://:memory:")
    with pytest.raises(ValueError, match="unsupported"):
        sqlalchemy_url("mysql://app@db/docs")
