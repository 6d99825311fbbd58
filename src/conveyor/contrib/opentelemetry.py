"""OpenTelemetry for one app (extra ``otel``: ``opentelemetry-api``; bring the SDK and an exporter).

``instrument(app)`` adds three things, and ``Instrumentation.uninstrument()`` takes them away:

- **Trace context on enqueue.** Every enqueue made while a span is active stores that span's W3C trace
  context in the job's meta under ``"otel"``: ``{"traceparent": "00-<trace>-<span>-01"}``, plus
  ``"tracestate"`` when there is one (about 70 bytes). Nothing is written when no span is active. It
  is an enqueue hook (``Conveyor.before_enqueue``), so single, bulk, workflow and unique inserts all
  carry it.
- **A span per run of a job**: kind CONSUMER, named ``conveyor.job <worker>``, a child of the span
  that enqueued the job (one trace from the request to the work it caused; with
  ``link_only=True`` each run starts a trace of its own, linked to the enqueuing span instead, for
  jobs whose runs are best seen apart from their cause). It is started before the job's code and ended
  after it, and made the current span meanwhile: spans the code creates nest inside it, for
  coroutine and thread jobs alike. A process job's code runs in another process, which this span
  cannot reach: ``enqueue_context(job)`` there gives the enqueuing context to start its spans in.
  Status ERROR with the exception recorded when the code failed (retryable, discarded or failed);
  a cancellation or a job given back at shutdown is not an error.
- **Metrics**: ``conveyor.jobs`` (counter of ended runs by queue, worker, outcome),
  ``conveyor.job.duration`` and ``conveyor.job.queue_time`` (histograms, seconds),
  ``conveyor.queue.jobs`` (gauge of jobs per queue and state, from ``queue_counts`` cached: see
  ``conveyor.contrib._job_gauges``) and ``conveyor.queue.executing`` (gauge of this node's running
  jobs per queue). Attributes: ``conveyor.queue``, ``conveyor.worker``, ``conveyor.outcome``,
  ``conveyor.state``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Link, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from conveyor.contrib._job_gauges import DEFAULT_MAX_AGE, Executing, QueueDepth
from conveyor.job import Job, JobState
from conveyor.request import JobRequest

if TYPE_CHECKING:
    from conveyor.app import Conveyor

#: The meta key holding a job's enqueuing trace context.
META_KEY = "otel"
#: Outcomes that mark the run's span as an error.
ERROR_OUTCOMES = frozenset({"retryable", "discarded", "failed"})

_PROPAGATOR = TraceContextTextMapPropagator()
#: The parent of a run whose job carries no trace context (contexts are immutable: one serves all).
_EMPTY = otel_context.Context()
#: The run this task is in: its span, the token that made it current, and the run outside it (a
#: job processed inline inside another job's code).
_RUN: ContextVar[tuple[int, trace.Span, object, Any] | None] = ContextVar("conveyor_otel_run", default=None)


def instrument(
    app: Conveyor,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    link_only: bool = False,
    max_age: float = DEFAULT_MAX_AGE,
) -> Instrumentation:
    """Trace and measure ``app``'s jobs (the global providers unless given others)."""
    return Instrumentation(
        app,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        link_only=link_only,
        max_age=max_age,
    )


def enqueue_context(job: Job) -> otel_context.Context:
    """The context the job was enqueued in (an empty one when its meta carries none or junk): start
    spans in it where the run's span is not current, as in a process job."""
    carrier = job.meta.get(META_KEY) if isinstance(job.meta, Mapping) else None
    if not isinstance(carrier, Mapping):
        return otel_context.Context()
    text = {key: value for key, value in carrier.items() if isinstance(value, str)}
    return _PROPAGATOR.extract(text, context=otel_context.Context())


class Instrumentation:
    """The hook, handlers and instruments ``instrument`` attached to one app."""

    def __init__(
        self,
        app: Conveyor,
        *,
        tracer_provider: TracerProvider | None,
        meter_provider: MeterProvider | None,
        link_only: bool,
        max_age: float,
    ) -> None:
        self.link_only = link_only
        self.tracer = trace.get_tracer("conveyor", tracer_provider=tracer_provider)
        meter = metrics.get_meter("conveyor", meter_provider=meter_provider)
        # Counted here and observed at collection: an SDK counter's add costs a few microseconds per
        # job, a dict increment a tenth of one.
        self._ended_counts: dict[tuple[str, str, str], int] = {}
        meter.create_observable_counter(
            "conveyor.jobs", callbacks=[self._observe_jobs], unit="{job}", description="Runs of jobs ended"
        )
        self.duration = meter.create_histogram(
            "conveyor.job.duration", unit="s", description="How long runs of jobs took"
        )
        self.queue_time = meter.create_histogram(
            "conveyor.job.queue_time",
            unit="s",
            description="How long jobs waited from their scheduled time to the start of the attempt",
        )
        self.executing = Executing()
        self.depth = QueueDepth(app, max_age)
        meter.create_observable_gauge(
            "conveyor.queue.jobs",
            callbacks=[self._observe_depth],
            unit="{job}",
            description="Jobs per queue and state in the database",
        )
        meter.create_observable_gauge(
            "conveyor.queue.executing",
            callbacks=[self._observe_executing],
            unit="{job}",
            description="Jobs of the queue running on this node",
        )
        # Attribute dicts made once per key: the SDK takes them as they are.
        self._job_attributes: dict[tuple[str, str], dict[str, str]] = {}
        self._active = True
        self._detach: list[Callable[[], None]] = [
            app.before_enqueue(self._inject),
            app.on("job.start", self._started),
            app.on("job.stop", self._ended),
            app.on("job.exception", self._ended),
            self.depth.attach(),
        ]

    def uninstrument(self) -> None:
        """Detach everything (the metric instruments stay registered, reporting nothing more)."""
        self._active = False
        for detach in self._detach:
            detach()
        self._detach.clear()

    # -- enqueue ---------------------------------------------------------------------------------
    def _inject(self) -> Callable[[JobRequest], JobRequest] | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        if not carrier:
            return None  # no active span: nothing written
        return lambda request: request.with_meta({**request.meta, META_KEY: carrier})

    # -- runs --------------------------------------------------------------------------------------
    def _started(self, event: str, data: dict[str, Any]) -> None:
        job: Job = data["job"]
        queue, worker = data["queue"], data["worker"]
        self.executing.started(queue)
        self.queue_time.record(data["queue_time"], self._attributes(queue, worker))
        meta = job.meta
        # Most jobs were enqueued outside any span: no carrier to parse, the empty context shared.
        parent = _EMPTY if type(meta) is dict and META_KEY not in meta else enqueue_context(job)
        links: list[Link] = []
        if self.link_only:
            enqueuer = trace.get_current_span(parent).get_span_context()
            if enqueuer.is_valid:
                links.append(Link(enqueuer))
            parent = otel_context.Context()
        span = self.tracer.start_span(
            f"conveyor.job {worker}",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes={
                "messaging.system": "conveyor",
                "messaging.operation.type": "process",
                "messaging.destination.name": queue,
                "messaging.message.id": str(job.id),
                "conveyor.job.worker": worker,
                "conveyor.job.attempt": data["attempt"],
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        _RUN.set((job.id, span, token, _RUN.get()))

    def _ended(self, event: str, data: dict[str, Any]) -> None:
        queue, worker, outcome = data["queue"], data["worker"], data["outcome"]
        self.executing.ended(queue)
        key = (queue, worker, outcome)
        self._ended_counts[key] = self._ended_counts.get(key, 0) + 1
        self.duration.record(data["duration"], self._attributes(queue, worker))
        run = _RUN.get()
        if run is None or run[0] != data["job"].id:
            return  # started before the instrumentation
        _, span, token, outer = run
        _RUN.set(outer)
        try:
            if not span.is_recording():  # not sampled: nothing to write on it
                return
            state: JobState | None = data["state"]
            span.set_attribute("conveyor.job.outcome", outcome)
            if state is not None:
                span.set_attribute("conveyor.job.state", state.value)
            if outcome in ERROR_OUTCOMES and "exception" in data:
                error_type = data["error_type"]
                span.record_exception(data["exception"], attributes={"exception.type": error_type})
                span.set_status(Status(StatusCode.ERROR, f"{error_type}: {data['message']}"))
        finally:
            span.end()
            otel_context.detach(token)  # type: ignore[arg-type]

    def _attributes(self, queue: str, worker: str) -> dict[str, str]:
        key = (queue, worker)
        attributes = self._job_attributes.get(key)
        if attributes is None:
            attributes = self._job_attributes[key] = {"conveyor.queue": queue, "conveyor.worker": worker}
        return attributes

    # -- gauges ------------------------------------------------------------------------------------
    def _observe_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        if not self._active:
            return []
        return [
            Observation(counts.count(state), {"conveyor.queue": counts.queue, "conveyor.state": state.value})
            for counts in self.depth.read()
            for state in JobState
        ]

    def _observe_jobs(self, options: CallbackOptions) -> Iterable[Observation]:
        if not self._active:
            return []
        return [
            Observation(
                count, {"conveyor.queue": queue, "conveyor.worker": worker, "conveyor.outcome": outcome}
            )
            for (queue, worker, outcome), count in dict(self._ended_counts).items()
        ]

    def _observe_executing(self, options: CallbackOptions) -> Iterable[Observation]:
        if not self._active:
            return []
        return [
            Observation(count, {"conveyor.queue": queue})
            for queue, count in sorted(self.executing.snapshot().items())
        ]
