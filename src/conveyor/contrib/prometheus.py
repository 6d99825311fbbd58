"""Prometheus metrics of one app's jobs and queues (extra ``prometheus``: ``prometheus_client``).

``metrics(app)`` attaches telemetry handlers to the app and returns its ``PrometheusMetrics``, whose
``registry`` is the app's own ``CollectorRegistry`` (never the process-wide default one, so two apps in
one process keep their figures apart). Serve it with ``serve(port)`` (what ``conveyor start
--metrics-port`` does), add ``route()`` to a Starlette or FastAPI app (or ``asgi()`` as the endpoint of
a route of your own), or read ``exposition()``.

In a process where no node of the app runs (a web process), the job counters stay empty (no job runs
there) but the queue gauges are read from the database at scrape time, cached ``max_age`` seconds.

- ``conveyor_jobs_total{queue,worker,outcome}``: runs ended, by outcome (``completed``, ``snoozed``,
  ``retryable``, ``discarded``, ``cancelled``, ``released``, or ``failed`` when Conveyor itself failed)
- ``conveyor_job_duration_seconds{queue,worker}``: histogram of the runs' durations
- ``conveyor_job_queue_time_seconds{queue,worker}``: histogram of the time jobs waited, from their
  scheduled time to the start of the attempt
- ``conveyor_queue_jobs{queue,state}``: jobs per queue and state in the database (``queue_counts``,
  cached: see ``conveyor.contrib._job_gauges``; with or without a node in the process)
- ``conveyor_queue_executing{queue}``: jobs of the queue running on this node
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest, make_asgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector

from conveyor.contrib._job_gauges import DEFAULT_MAX_AGE, Executing, QueueDepth
from conveyor.contrib._tallies import Histograms
from conveyor.job import JobState

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from conveyor.app import Conveyor

#: Histogram buckets (seconds) of the durations and queue times: a millisecond to ten minutes.
BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)

_BY_APP: weakref.WeakKeyDictionary[Conveyor, PrometheusMetrics] = weakref.WeakKeyDictionary()


def metrics(app: Conveyor, *, max_age: float = DEFAULT_MAX_AGE) -> PrometheusMetrics:
    """The app's Prometheus metrics, attached on the first call (later calls return the same ones)."""
    found = _BY_APP.get(app)
    if found is None:
        found = _BY_APP[app] = PrometheusMetrics(app, max_age=max_age)
    return found


class PrometheusMetrics:
    """One app's metrics in a registry of their own."""

    def __init__(self, app: Conveyor, *, max_age: float = DEFAULT_MAX_AGE) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        # Tallied here and turned into metric families at each scrape (see ``_tallies``).
        self.durations = Histograms(BUCKETS)
        self.queue_times = Histograms(BUCKETS)
        self.ended: dict[tuple[str, str, str], int] = {}
        self.executing = Executing()
        self.depth = QueueDepth(app, max_age)
        self.registry.register(_JobCollector(self))
        self.registry.register(_QueueCollector(self.depth, self.executing))
        self._detach: list[Callable[[], None]] = [
            app.on("job.start", self._started),
            app.on("job.stop", self._ended),
            app.on("job.exception", self._ended),
            self.depth.attach(),
        ]
        self._servers: list[WSGIServer] = []

    def _started(self, event: str, data: dict[str, Any]) -> None:
        queue = data["queue"]
        self.executing.started(queue)
        self.queue_times.observe((queue, data["worker"]), data["queue_time"])

    def _ended(self, event: str, data: dict[str, Any]) -> None:
        queue, worker = data["queue"], data["worker"]
        self.executing.ended(queue)
        key = (queue, worker, data["outcome"])
        self.ended[key] = self.ended.get(key, 0) + 1
        self.durations.observe((queue, worker), data["duration"])

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)

    def asgi(self) -> MetricsEndpoint:
        """An ASGI app serving the metrics: the endpoint of a route at ``/metrics`` (see ``route``),
        e.g. ``api.add_route("/metrics", metrics(app).asgi())`` in FastAPI."""
        return MetricsEndpoint(self)

    def route(self, path: str = "/metrics") -> Any:
        """A Starlette route (``starlette.routing.Route``) serving the metrics at exactly ``path``:
        ``Starlette(routes=[metrics(app).route(), ...])`` or ``api.router.routes.append(...)``.

        A route, not a mount: Starlette and FastAPI mounts match only the paths below them
        (``/metrics/...``), so their router answers ``/metrics`` itself with a 307 redirect to
        ``/metrics/`` before the mounted app sees the request."""
        from starlette.routing import Route

        return Route(path, self.asgi(), methods=["GET", "HEAD"], name="conveyor_metrics")

    def serve(self, port: int, host: str = "127.0.0.1") -> WSGIServer:
        """Serve ``/metrics`` over HTTP on a daemon thread; raises ``OSError`` if the port is taken."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._servers.append(server)
        return server

    def close(self) -> None:
        """Detach from the app and stop the servers ``serve`` started."""
        for detach in self._detach:
            detach()
        self._detach.clear()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()


class MetricsEndpoint:
    """The ASGI app of ``PrometheusMetrics.asgi()``: prometheus_client's, after reading stale queue
    counts from the database in a worker thread (where no node runs: see ``_job_gauges``), so the
    query never blocks the web server's event loop. A class, not a function: Starlette's ``Route``
    takes it as an ASGI app rather than as a request handler."""

    def __init__(self, metrics: PrometheusMetrics) -> None:
        self.metrics = metrics
        self._app = make_asgi_app(metrics.registry)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        depth = self.metrics.depth
        if scope.get("type") == "http" and depth.stale():
            await asyncio.to_thread(depth.read)
        await self._app(scope, receive, send)


class _JobCollector(Collector):
    """The job counter and the two histograms, from the tallies."""

    def __init__(self, metrics: PrometheusMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        jobs = CounterMetricFamily(
            "conveyor_jobs",
            "Runs of jobs ended, by queue, worker and outcome",
            labels=("queue", "worker", "outcome"),
        )
        for labels, count in list(self.metrics.ended.items()):
            jobs.add_metric(labels, count)
        yield jobs
        yield _histogram(
            "conveyor_job_duration_seconds", "How long runs of jobs took", self.metrics.durations
        )
        yield _histogram(
            "conveyor_job_queue_time_seconds",
            "How long jobs waited from their scheduled time to the start of the attempt",
            self.metrics.queue_times,
        )


def _histogram(name: str, documentation: str, tallies: Histograms) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=("queue", "worker"))
    bounds = [*(repr(float(bound)) for bound in tallies.bounds), "+Inf"]
    for labels, tally in tallies.items():
        counts, total = tally.cumulative()
        family.add_metric(labels, list(zip(bounds, counts, strict=True)), total)
    return family


class _QueueCollector(Collector):
    """The gauges read at each scrape: jobs per queue and state, and executing on this node."""

    def __init__(self, depth: QueueDepth, executing: Executing) -> None:
        self.depth = depth
        self.executing = executing

    def collect(self) -> Iterable[Metric]:
        jobs = GaugeMetricFamily(
            "conveyor_queue_jobs", "Jobs per queue and state in the database", labels=("queue", "state")
        )
        for counts in self.depth.read():
            for state in JobState:
                jobs.add_metric((counts.queue, state.value), counts.count(state))
        executing = GaugeMetricFamily(
            "conveyor_queue_executing", "Jobs of the queue running on this node", labels=("queue",)
        )
        for queue, count in sorted(self.executing.snapshot().items()):
            executing.add_metric((queue,), count)
        return (jobs, executing)
