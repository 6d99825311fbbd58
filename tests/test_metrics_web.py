"""``/metrics`` in a web process, where no node runs, on both engines: the queue gauges come from the
database at scrape time (cached ``max_age`` seconds), and the endpoint added to a real Starlette or
FastAPI app answers ``/metrics`` itself, not with a 307 to ``/metrics/``. The OpenTelemetry exporter's
queue gauge reads the same cache, so it too has figures without a node."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.routing import Mount

from conveyor import Conveyor, JobRequest
from conveyor.contrib.prometheus import metrics
from tests.conftest import DSN


@pytest.fixture(params=["postgres", "sqlite"])
def web_app(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> Iterator[Conveyor]:
    """An app as a web process has it: installed, enqueueing, no node."""
    if request.param == "postgres":
        app = Conveyor(DSN, prefix=prefix)
    else:
        app = Conveyor(f"sqlite:///{tmp_path / 'web.db'}")
    app.install_sync()
    yield app
    app.close_sync()


def enqueue(app: Conveyor, queue: str, *, later: bool = False) -> None:
    at = datetime.now(UTC) + timedelta(hours=1) if later else None
    app.enqueue_sync(JobRequest("web.jobs.report", args={}, queue=queue, scheduled_at=at))


def client(site: object) -> httpx.AsyncClient:
    """A client of the ASGI app itself, as a server would call it (no network)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=site), base_url="http://web")


async def gauges(client: httpx.AsyncClient, path: str = "/metrics") -> dict[tuple[str, str], float]:
    response = await client.get(path, follow_redirects=False)
    assert response.status_code == 200, (response.status_code, response.headers)
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == "conveyor_queue_jobs":
                found[(sample.labels["queue"], sample.labels["state"])] = sample.value
    return found


async def test_a_web_process_exports_the_queue_gauges_from_the_database(web_app: Conveyor) -> None:
    for _ in range(2):
        enqueue(web_app, "default")
    enqueue(web_app, "mail", later=True)
    cached = metrics(web_app, max_age=3600.0)
    site = Starlette(routes=[cached.route()])
    async with client(site) as web:
        first = await gauges(web)
        assert first[("default", "available")] == 2
        assert first[("mail", "scheduled")] == 1
        assert first[("mail", "available")] == 0
        enqueue(web_app, "default")
        # Within max_age a scrape is answered from the cache: no query per scrape.
        assert (await gauges(web))[("default", "available")] == 2
    cached.close()


async def test_a_stale_cache_is_read_again_at_the_next_scrape(web_app: Conveyor) -> None:
    enqueue(web_app, "default")
    fresh = metrics(web_app, max_age=0.0)
    from fastapi import FastAPI  # here: only this test needs it, and importing it costs 0.4 s of CPU

    api = FastAPI()
    api.add_route("/metrics", fresh.asgi())
    async with client(api) as web:
        assert (await gauges(web))[("default", "available")] == 1
        enqueue(web_app, "default")
        assert (await gauges(web))[("default", "available")] == 2
    # Outside an ASGI server too (serve(), exposition()): the read blocks the caller, not a loop.
    enqueue(web_app, "default")
    assert 'conveyor_queue_jobs{queue="default",state="available"} 3.0' in fresh.exposition().decode()
    fresh.close()


async def test_the_route_answers_metrics_without_a_redirect() -> None:
    app = Conveyor("sqlite:///:memory:")
    served = metrics(app)
    site = Starlette(routes=[served.route(), Mount("/mounted", served.asgi())])
    async with client(site) as web:
        direct = await web.get("/metrics", follow_redirects=False)
        assert direct.status_code == 200 and "conveyor_queue_jobs" in direct.text
        # The reason route() exists: Starlette's router answers a mount's own path with a redirect.
        mounted = await web.get("/mounted", follow_redirects=False)
        assert mounted.status_code == 307 and mounted.headers["location"].endswith("/mounted/")
        assert (await web.head("/metrics")).status_code == 200
        assert (await web.post("/metrics")).status_code == 405
    served.close()
    app.close_sync()


def test_opentelemetry_reads_the_queue_gauge_from_the_database_without_a_node(web_app: Conveyor) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from conveyor.contrib.opentelemetry import instrument

    enqueue(web_app, "default")
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrumentation = instrument(web_app, meter_provider=provider)
    try:
        data = reader.get_metrics_data()
        assert data is not None
        points = {
            (p.attributes or {}).get("conveyor.state"): p.value
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "conveyor.queue.jobs"
            for p in metric.data.data_points
            if (p.attributes or {}).get("conveyor.queue") == "default"
        }
        assert points.get("available") == 1, points
    finally:
        instrumentation.uninstrument()
        provider.shutdown()
