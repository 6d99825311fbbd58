"""``conveyor.contrib.opentelemetry`` on both engines with the SDK's in-memory span exporter and
metric reader: jobs enqueued inside a span carry its trace context, each run is a CONSUMER span
child of it (or linked to it) with the job's attributes, a failure is an ERROR span with the
exception recorded, spans made by coroutine and thread job code nest inside the run's span, and the
metrics count runs by outcome."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import SpanKind, StatusCode

from conveyor import Conveyor, JobRequest, JobState
from conveyor.contrib.opentelemetry import META_KEY, enqueue_context, instrument
from tests.conformance import otel_jobs
from tests.conformance.app.test_runtime_contract import wait_final


class Sdk:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("tests")

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        found = []
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found += [(dict(p.attributes or {}), p) for p in metric.data.data_points]
        return found


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    found = Sdk()
    otel_jobs.TRACER = found.tracer
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


def run_span(spans: list[ReadableSpan], job_id: int) -> ReadableSpan:
    [span] = [s for s in spans if s.attributes and s.attributes.get("messaging.message.id") == str(job_id)]
    return span


async def test_runs_are_spans_under_the_enqueuing_span_with_metrics(node_app: Conveyor, sdk: Sdk) -> None:
    instrumentation = instrument(
        node_app, tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider
    )
    with sdk.tracer.start_as_current_span("web request") as request_span:
        ids = await node_app.enqueue_many(
            [otel_jobs.traced_async.new(), otel_jobs.traced_thread.new(), otel_jobs.fails.new()]
        )
        process_id = await node_app.enqueue(otel_jobs.in_process.new())
    untraced = await node_app.enqueue(otel_jobs.traced_async.new())
    traced_async, traced_thread, failing = ids
    await wait_final(node_app, [traced_async, traced_thread, process_id, untraced], {JobState.COMPLETED})
    await wait_final(node_app, [failing], {JobState.DISCARDED})

    # The trace context is in meta, small; none without an active span.
    stored = await node_app.get_job(traced_async)
    assert stored is not None and set(stored.meta[META_KEY]) == {"traceparent"}
    trace_id = f"{request_span.get_span_context().trace_id:032x}"
    assert stored.meta[META_KEY]["traceparent"].split("-")[1] == trace_id
    plain = await node_app.get_job(untraced)
    assert plain is not None and META_KEY not in plain.meta
    process_job = await node_app.get_job(process_id)
    assert process_job is not None
    # The enqueuing context, for a process job's own spans.
    enqueuer = trace.get_current_span(enqueue_context(process_job)).get_span_context()
    assert enqueuer.span_id == request_span.get_span_context().span_id

    spans = sdk.finished()
    request_context = request_span.get_span_context()
    for job_id, worker in [
        (traced_async, "tests.conformance.otel_jobs.traced_async"),
        (traced_thread, "tests.conformance.otel_jobs.traced_thread"),
        (failing, "tests.conformance.otel_jobs.fails"),
        (process_id, "tests.conformance.otel_jobs.in_process"),
    ]:
        span = run_span(spans, job_id)
        assert span.name == f"conveyor.job {worker}" and span.kind is SpanKind.CONSUMER
        assert span.parent is not None and span.parent.span_id == request_context.span_id
        assert span.context is not None and span.context.trace_id == request_context.trace_id
        attributes = dict(span.attributes or {})
        assert attributes["messaging.system"] == "conveyor"
        assert attributes["messaging.destination.name"] == "default"
        assert attributes["messaging.message.id"] == str(job_id)
        assert attributes["conveyor.job.worker"] == worker and attributes["conveyor.job.attempt"] == 1
    assert run_span(spans, traced_async).status.status_code is StatusCode.UNSET
    assert run_span(spans, traced_async).attributes["conveyor.job.outcome"] == "completed"  # type: ignore[index]
    untraced_span = run_span(spans, untraced)
    assert untraced_span.parent is None  # a root of its own: no enqueuing context

    # Spans the job's code makes nest inside the run's span, in coroutine and thread jobs.
    for job_id, inner_name in [(traced_async, "inside async job"), (traced_thread, "inside thread job")]:
        run = run_span(spans, job_id)
        [inner] = [
            s for s in spans if s.name == inner_name and s.context.trace_id == request_context.trace_id
        ]  # type: ignore[union-attr]
        assert inner.parent is not None and run.context is not None
        assert inner.parent.span_id == run.context.span_id

    failed = run_span(spans, failing)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "LookupError: nothing here"
    assert (failed.attributes or {})["conveyor.job.outcome"] == "discarded"
    [exception] = [e for e in failed.events if e.name == "exception"]
    assert (exception.attributes or {})["exception.type"] == "LookupError"

    jobs = {
        (a["conveyor.worker"].rsplit(".", 1)[1], a["conveyor.outcome"]): p.value
        for a, p in sdk.points("conveyor.jobs")
    }
    assert jobs == {
        ("traced_async", "completed"): 2,
        ("traced_thread", "completed"): 1,
        ("in_process", "completed"): 1,
        ("fails", "discarded"): 1,
    }
    durations = {
        a["conveyor.worker"].rsplit(".", 1)[1]: p.count for a, p in sdk.points("conveyor.job.duration")
    }
    assert durations == {"traced_async": 2, "traced_thread": 1, "in_process": 1, "fails": 1}
    assert sum(p.count for _, p in sdk.points("conveyor.job.queue_time")) == 5
    assert {a["conveyor.queue"]: p.value for a, p in sdk.points("conveyor.queue.executing")} == {"default": 0}

    instrumentation.uninstrument()
    with sdk.tracer.start_as_current_span("after"):
        after = await node_app.enqueue(otel_jobs.traced_async.new())
    await wait_final(node_app, [after], {JobState.COMPLETED})
    found = await node_app.get_job(after)
    assert found is not None and META_KEY not in found.meta
    assert not [s for s in sdk.finished() if (s.attributes or {}).get("messaging.message.id") == str(after)]


async def test_link_only_starts_a_trace_per_run_linked_to_the_enqueuer(node_app: Conveyor, sdk: Sdk) -> None:
    instrument(
        node_app, tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider, link_only=True
    )
    with sdk.tracer.start_as_current_span("web request") as request_span:
        job_id = await node_app.enqueue(otel_jobs.traced_async.new())
    await wait_final(node_app, [job_id], {JobState.COMPLETED})
    span = run_span(sdk.finished(), job_id)
    request_context = request_span.get_span_context()
    assert span.parent is None and span.context is not None
    assert span.context.trace_id != request_context.trace_id
    assert [link.context.span_id for link in span.links] == [request_context.span_id]


async def test_junk_trace_context_in_meta_runs_the_job_as_a_root_span(node_app: Conveyor, sdk: Sdk) -> None:
    instrument(node_app, tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider)
    junk = [{"traceparent": "not a traceparent"}, "text", {"traceparent": 7}]
    ids = [
        await node_app.enqueue(JobRequest("tests.conformance.otel_jobs.traced_async", meta={META_KEY: value}))
        for value in junk
    ]
    await wait_final(node_app, ids, {JobState.COMPLETED})
    spans = sdk.finished()
    assert all(run_span(spans, job_id).parent is None for job_id in ids)


async def test_runs_sampled_out_export_nothing_and_still_count(node_app: Conveyor, sdk: Sdk) -> None:
    """With a sampler that drops every root, no run's span is recorded, spans made by the job's
    code are sampled out with it (children of its unsampled span), and the metrics count every run."""
    dropping = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    dropping.add_span_processor(SimpleSpanProcessor(sdk.spans))
    otel_jobs.TRACER = dropping.get_tracer("tests")
    instrument(node_app, tracer_provider=dropping, meter_provider=sdk.meter_provider)
    ids = [await node_app.enqueue(otel_jobs.traced_async.new()) for _ in range(3)]
    failing = await node_app.enqueue(otel_jobs.fails.new())
    await wait_final(node_app, ids, {JobState.COMPLETED})
    await wait_final(node_app, [failing], {JobState.DISCARDED})
    assert sdk.finished() == []
    jobs = {
        (a["conveyor.worker"].rsplit(".", 1)[1], a["conveyor.outcome"]): p.value
        for a, p in sdk.points("conveyor.jobs")
    }
    assert jobs == {("traced_async", "completed"): 3, ("fails", "discarded"): 1}
    assert sum(p.count for _, p in sdk.points("conveyor.job.duration")) == 4
    assert trace.get_current_span() is trace.INVALID_SPAN  # every run's context was let go
    dropping.shutdown()
