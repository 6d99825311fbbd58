"""``telemetry``: what observing a node costs its drain throughput.

``drain`` of ``jobs`` no-op jobs (default 20,000) at C = 100 (or ``--concurrency``), in four
variants, in rounds whose order rotates so a drift of the shared machine's load weighs on each alike:

- ``plain``: no handler attached, logging at WARNING (the job lines are not built);
- ``handler``: a trivial handler attached to every event (prefix ``""``);
- ``log_text``: the job log lines at INFO, formatted as ``conveyor start`` writes them, to /dev/null;
- ``log_json``: the same as JSON lines (``--log-format json``);
- ``otel``: ``conveyor.contrib.opentelemetry`` with the SDK (a batch span processor feeding an exporter
  that drops the spans, a meter provider whose reader is never collected);
- ``otel_sampled``: the same with the SDK's ``ParentBasedTraceIdRatio(0.01)`` sampler (1% of the runs
  traced, as the OpenTelemetry guide advises for tiny jobs), the metrics unchanged;
- ``prometheus``: ``conveyor.contrib.prometheus`` metrics;
- ``otel_prometheus``: both.

Target: ``handler``, ``otel``, ``otel_sampled``, ``prometheus`` and ``otel_prometheus`` cost at most
5% of ``plain`` (ratio >= 0.95). The log variants are reported, not held to a target: one formatted
line per job is work a node does only when asked to.

On a shared machine a drain's rate swings by more than the few percent measured here, so the
scenario also times, in this process, what each variant adds to one job's run (its ``job.start``
and ``job.stop``, or its log line): ``*_us_per_job``, the best of several repeats, and
``*_share``, that time as a fraction of a job's time in the plain drain (1 / plain rate).
"""

from __future__ import annotations

import functools
import logging
import os
import statistics
import timeit
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from common import Figures, Settings
from drain import drain_once
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

from conveyor import Conveyor, Job, JobState
from conveyor._runtime.job_report import JobReport
from conveyor.acks import Ack
from conveyor.cli.logs import configure_logging
from conveyor.contrib import opentelemetry, prometheus

TELEMETRY_JOBS = 10_000
TELEMETRY_CONCURRENCY = 100
TELEMETRY_ROUNDS = 6
#: Runs of a job's report per timing, and timings (the best is kept: the least disturbed).
REPORTS = 5_000
REPORT_REPEATS = 7


def ignore(event: str, data: dict[str, Any]) -> None:
    """The trivial handler: what attaching costs, whatever a real handler then does."""


def attach_everywhere(app: Conveyor) -> None:
    app.on("", ignore)


@contextmanager
def job_logging(log_format: str | None) -> Iterator[None]:
    """Logging as ``conveyor start`` sets it up (``configure_logging``), to /dev/null: at INFO in
    ``log_format``, or at WARNING (no job line is built) when None. Put back as it was afterwards."""
    root = logging.getLogger()
    knobs = ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing")
    saved = (root.level, root.handlers[:], {name: getattr(logging, name) for name in knobs})
    with open(os.devnull, "w") as sink:
        root.handlers[:] = []
        configure_logging("INFO" if log_format else "WARNING", log_format or "text", sink)
        try:
            yield
        finally:
            root.setLevel(saved[0])
            root.handlers[:] = saved[1]
            for name, value in saved[2].items():
                setattr(logging, name, value)


class _DropSpans(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


#: The share of runs the ``otel_sampled`` variant traces.
SAMPLED_RATIO = 0.01


@functools.cache
def _sdk(sampled: bool = False) -> tuple[TracerProvider, MeterProvider]:
    """One SDK per variant for every run (its span processor's thread is started once)."""
    tracer_provider = (
        TracerProvider(sampler=ParentBasedTraceIdRatio(SAMPLED_RATIO)) if sampled else TracerProvider()
    )
    tracer_provider.add_span_processor(BatchSpanProcessor(_DropSpans()))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


def attach_otel(app: Conveyor, sampled: bool = False) -> None:
    tracer_provider, meter_provider = _sdk(sampled)
    opentelemetry.instrument(app, tracer_provider=tracer_provider, meter_provider=meter_provider)


def attach_otel_sampled(app: Conveyor) -> None:
    attach_otel(app, sampled=True)


def attach_prometheus(app: Conveyor) -> None:
    prometheus.metrics(app)


def attach_both(app: Conveyor) -> None:
    attach_otel(app)
    attach_prometheus(app)


#: Each variant: the log format (None: job lines off) and what to do to the app before it starts.
VARIANTS: dict[str, tuple[str | None, Callable[[Conveyor], object] | None]] = {
    "plain": (None, None),
    "handler": (None, attach_everywhere),
    "log_text": ("text", None),
    "log_json": ("json", None),
    "otel": (None, attach_otel),
    "otel_sampled": (None, attach_otel_sampled),
    "prometheus": (None, attach_prometheus),
    "otel_prometheus": (None, attach_both),
}


def report_cost(
    log_format: str | None,
    prepare: Callable[[Conveyor], object] | None,
    repeats: int = REPORT_REPEATS,
    number: int = REPORTS,
) -> float:
    """Microseconds one job's ``job.start`` and ``job.stop`` (and log line) take in this variant."""
    app = Conveyor("sqlite:///:memory:")  # never opened: only its telemetry is used
    if prepare is not None:
        prepare(app)
    report = JobReport(app.telemetry)
    now = datetime.now(UTC)
    job = Job(
        id=1, state=JobState.EXECUTING, queue="default", worker="bench_jobs.noop", args={}, meta={},
        tags=(), errors=(), attempt=1, max_attempts=20, priority=0, attempted_by=("node", "uuid"),
        inserted_at=now, scheduled_at=now - timedelta(seconds=1), attempted_at=now,
    )  # fmt: skip
    ack = Ack(1, 1, JobState.COMPLETED)

    def run() -> None:
        report.started(job)
        report.ended(job, ack, None, 0.001)

    with job_logging(log_format):
        return min(timeit.repeat(run, number=number, repeat=repeats)) / number * 1e6


async def telemetry(settings: Settings) -> Figures:
    rounds = settings.round_count(TELEMETRY_ROUNDS)
    jobs = settings.job_count(TELEMETRY_JOBS)
    concurrency = settings.concurrency or TELEMETRY_CONCURRENCY
    names = list(VARIANTS)
    measured: dict[str, list[float]] = {name: [] for name in names}
    #: Each variant's rate over plain's in the same round: less noisy than a ratio of medians.
    paired: dict[str, list[float]] = {name: [] for name in names[1:]}
    for round_number in range(rounds):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            log_format, prepare = VARIANTS[name]
            with job_logging(log_format):
                figures = await drain_once(settings, jobs, concurrency, prepare=prepare)
            measured[name].append(figures["jobs_per_s"])
        for name in paired:
            paired[name].append(measured[name][-1] / measured["plain"][-1])
    plain = statistics.median(measured["plain"])
    result: Figures = {"jobs": jobs, "concurrency": concurrency, "rounds": rounds}
    # Fewer rounds asked for (a smoke test), fewer and shorter timings of the report too (never fewer
    # than two): a tenth of the runs still tells a handler's or a log line's tens of microseconds
    # from plain's few.
    smoke = settings.rounds is not None
    repeats = max(2, min(rounds, REPORT_REPEATS)) if smoke else REPORT_REPEATS
    number = REPORTS // 10 if smoke else REPORTS
    costs = {name: report_cost(*VARIANTS[name], repeats=repeats, number=number) for name in names}
    job_us = 1e6 / plain
    for name, cost in costs.items():
        result[f"{name}_us_per_job"] = round(cost, 2)
        if name != "plain":
            result[f"{name}_share"] = round((cost - costs["plain"]) / job_us, 4)
    for name, rates in measured.items():
        result[f"{name}_jobs_per_s"] = statistics.median(rates)
        result[f"{name}_range"] = [min(rates), max(rates)]
        if name != "plain":
            result[f"{name}_ratio"] = round(statistics.median(rates) / plain, 3)
            result[f"{name}_round_ratios"] = [round(ratio, 3) for ratio in paired[name]]
            result[f"{name}_paired_ratio"] = round(statistics.median(paired[name]), 3)
    return result
