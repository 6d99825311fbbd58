"""``conveyor start --metrics-port`` on both engines, as Prometheus sees it: a node in a subprocess runs
jobs, ``/metrics`` is scraped over HTTP and parsed with ``prometheus_client.parser``, and the counts
by outcome, the histograms and the queue depth match what happened. A port in use is one clear line.
In-process: each app's metrics live in a registry of its own."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conveyor import Conveyor, JobRequest
from conveyor.contrib.prometheus import metrics
from tests.test_cli_errors import assert_one_line_error, conveyor
from tests.test_cli_start_app import Target, run_node, stop_node, target, wait_until

__all__ = ["target"]  # the fixture, imported for these tests

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def metrics_port(target: Target) -> int | None:
    log = (target.directory / "node.log").read_text()
    found = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", log)
    return int(found.group(1)) if found else None


def test_the_node_serves_job_counts_histograms_and_queue_depth(target: Target) -> None:
    done = [target.enqueue("world") for _ in range(3)]
    failed = [target.enqueue("nobody") for _ in range(2)]
    later = datetime.now(UTC) + timedelta(hours=1)
    for _ in range(2):
        target.app.enqueue_sync(JobRequest("user_jobs.greet", args={"name": "x"}, scheduled_at=later))
    node = run_node(target, "--import", "user_jobs", "-q", "default:2", "--metrics-port", "0")
    worker = {"queue": "default", "worker": "user_jobs.greet"}
    try:
        wait_until(lambda: metrics_port(target) is not None, "the metrics endpoint")
        port = metrics_port(target)
        assert port is not None
        seen: Samples = {}

        def settled() -> bool:
            nonlocal seen
            seen = scrape(port)
            return (
                value(seen, "conveyor_jobs_total", outcome="completed", **worker) == len(done)
                and value(seen, "conveyor_jobs_total", outcome="discarded", **worker) == len(failed)
                and value(seen, "conveyor_queue_jobs", queue="default", state="completed") == len(done)
            )

        wait_until(settled, "the scrape to show every run and the queue depth")
    finally:
        stop_node(node, target)
    assert value(seen, "conveyor_queue_jobs", queue="default", state="discarded") == len(failed)
    assert value(seen, "conveyor_queue_jobs", queue="default", state="scheduled") == 2
    assert value(seen, "conveyor_queue_jobs", queue="default", state="available") == 0
    assert value(seen, "conveyor_queue_executing", queue="default") == 0
    assert value(seen, "conveyor_job_duration_seconds_count", **worker) == 5
    assert value(seen, "conveyor_job_queue_time_seconds_count", **worker) == 5
    infinite = value(seen, "conveyor_job_duration_seconds_bucket", le="+Inf", **worker)
    assert infinite == 5
    assert (value(seen, "conveyor_job_duration_seconds_sum", **worker) or 0.0) >= 0.0
    assert not [key for key in seen if key[0] == "conveyor_jobs_total" and ("outcome", "retryable") in key[1]]


def test_a_port_in_use_is_one_line(target: Target) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        run = conveyor(
            "start", "-q", "default:1", "--metrics-port", str(port), cwd=target.directory, env=target.env
        )
    assert_one_line_error(run, "--metrics-port", f"127.0.0.1:{port}", "in use")
    assert time.monotonic() - started < 30


def test_two_apps_in_one_process_keep_their_metrics_apart() -> None:
    first, second = Conveyor("sqlite:///:memory:"), Conveyor("sqlite:///:memory:")
    ours, theirs = metrics(first), metrics(second)
    assert metrics(first) is ours and ours.registry is not theirs.registry
    data = {"queue": "q", "worker": "w", "attempt": 1, "queue_time": 0.5}
    first.telemetry.emit("job.start", **data)
    first.telemetry.emit("job.stop", **data, outcome="completed", duration=0.25)
    ours_text, theirs_text = ours.exposition().decode(), theirs.exposition().decode()
    assert 'conveyor_jobs_total{outcome="completed",queue="q",worker="w"} 1.0' in ours_text
    assert "conveyor_jobs_total{" not in theirs_text
    assert 'conveyor_job_queue_time_seconds_sum{queue="q",worker="w"} 0.5' in ours_text
    ours.close()
    first.telemetry.emit("job.stop", **data, outcome="completed", duration=0.25)
    assert 'conveyor_jobs_total{outcome="completed",queue="q",worker="w"} 1.0' in ours.exposition().decode()


def test_histogram_buckets_count_a_value_at_their_bound_and_below() -> None:
    app = Conveyor("sqlite:///:memory:")
    ours = metrics(app)
    data = {"queue": "q", "worker": "w", "attempt": 1}
    for seconds in (0.0005, 0.001, 0.0011, 1.0, 700.0):
        app.telemetry.emit("job.start", **data, queue_time=seconds)
        app.telemetry.emit("job.stop", **data, queue_time=seconds, outcome="completed", duration=seconds)
    text = ours.exposition().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    series = {"queue": "q", "worker": "w"}
    for name in ("conveyor_job_duration_seconds", "conveyor_job_queue_time_seconds"):
        assert value(samples, f"{name}_bucket", le="0.001", **series) == 2  # "le": at the bound too
        assert value(samples, f"{name}_bucket", le="0.005", **series) == 3
        assert value(samples, f"{name}_bucket", le="1.0", **series) == 4
        assert value(samples, f"{name}_bucket", le="600.0", **series) == 4
        assert value(samples, f"{name}_bucket", le="+Inf", **series) == 5
        assert value(samples, f"{name}_count", **series) == 5
        assert value(samples, f"{name}_sum", **series) == pytest.approx(701.0026)
    assert value(samples, "conveyor_jobs_total", outcome="completed", **series) == 5
