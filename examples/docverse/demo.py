"""The whole Docverse flow once, against a real node: the web app starts with its node in this
process, a client uploads builds through the API and polls them until they are published (or
failed), then the cleanup deletes what no edition serves. Run it from ``examples/``:

    CONVEYOR_DATABASE_URL=sqlite:///docverse.db python -m docverse.demo

The client is httpx on the app's ASGI interface: the same requests a real client would send.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from conveyor import JobState
from docverse.db import database_of
from docverse.jobs import cleanup_builds
from docverse.models import BuildStatus
from docverse.settings import make_conveyor
from docverse.web import create_api

SITE = {
    "index.html": "<h1>Pipelines</h1>",
    "install.html": "<h1>Installing</h1>",
    "style.css": "h1 { color: teal }",
}
BUILDS = "/projects/pipelines/builds"


async def main() -> None:
    conveyor = make_conveyor(run_jobs=True)
    database = database_of(conveyor)
    # Deploy steps: Conveyor's schema, then the service's tables, both empty for this run.
    await conveyor.install()
    await conveyor.delete_jobs()
    await database.drop_tables()
    await database.create_tables()
    api = create_api(conveyor)
    transport = httpx.ASGITransport(app=api)
    async with (
        api.router.lifespan_context(api),  # opens the app and starts its node
        httpx.AsyncClient(transport=transport, base_url="http://docverse") as client,
    ):
        response = await client.post(BUILDS, json={"git_ref": "main", "files": SITE})
        first = response.json()
        print(f"POST a build of main -> {response.status_code} {first['status']}")
        print(f"Location is its status URL: {response.headers['location'] == first['status_url']}")
        seen, build = await follow(client, first["status_url"])
        print(f"statuses seen in phase order: {seen == [p for p in BuildStatus if p in seen]}")
        print(f"build: {build['status']}, served at {build['published_url']}")
        job, progress = build["job"], build["job"]["progress"]
        print(f"job: {job['state']}, phase={progress['phase']}, {progress['done']}/{progress['total']} pages")
        print(f"GET /jobs/<id> -> {(await client.get(first['job_url'])).status_code}")

        response = await client.post(BUILDS, json={"git_ref": "draft", "files": {"a.html": "A"}})
        _, failed = await follow(client, response.json()["status_url"])
        print(f"no index.html -> {response.status_code}, then {failed['status']}: {failed['error']}")
        bad_slug = await client.post("/projects/No_Such!/builds", json={"git_ref": "main", "files": SITE})
        no_files = await client.post(BUILDS, json={"git_ref": "main", "files": {}})
        print(f"bad project slug -> {bad_slug.status_code}; no files -> {no_files.status_code}")

        second = (await client.post(BUILDS, json={"git_ref": "main", "files": SITE})).json()
        await follow(client, second["status_url"])
        edition = (await client.get("/projects/pipelines/editions/main")).json()
        print(f"edition main now serves the newer build: {edition['build_id'] == second['id']}")

        # What the hourly cron entry does, run now with no grace period: every build no edition
        # serves goes (the superseded first build and the failed one).
        deleted = await cleanup_builds.options(app=conveyor, timeout=10).relay(max_age_days=0)
        gone = (await client.get(first["status_url"])).status_code
        kept = (await client.get(second["status_url"])).status_code
        print(f"cleanup deleted {deleted} builds; first build -> {gone}, served build -> {kept}")


async def follow(client: httpx.AsyncClient, url: str) -> tuple[list[str], dict[str, Any]]:
    """Poll a build until it is published or failed and its job has ended; return the statuses
    seen and the last answer."""
    seen: list[str] = []
    deadline = time.monotonic() + 20
    while True:
        build = (await client.get(url)).json()
        if not seen or seen[-1] != build["status"]:
            seen.append(build["status"])
        # The row reaches its last status just before the job's ack records the job's end.
        if BuildStatus(build["status"]).is_final and JobState(build["job"]["state"]).is_final:
            return seen, build
        if time.monotonic() > deadline:
            raise TimeoutError(build)
        await asyncio.sleep(0.02)


if __name__ == "__main__":
    asyncio.run(main())
