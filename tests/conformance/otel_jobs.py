"""Jobs that make spans of their own, for the OpenTelemetry tests: ``TRACER`` is set by the test to
a tracer of its SDK provider (job code finds it here, in the node's process)."""

from __future__ import annotations

import os

from opentelemetry import trace

from conveyor import job

TRACER: trace.Tracer = trace.NoOpTracer()


@job(queue="default", max_attempts=1)
async def traced_async() -> None:
    with TRACER.start_as_current_span("inside async job"):
        pass


@job(queue="default", max_attempts=1)
def traced_thread() -> None:
    with TRACER.start_as_current_span("inside thread job"):
        pass


@job(queue="default", max_attempts=1)
async def fails() -> None:
    raise LookupError("nothing here")


@job(queue="default", max_attempts=1, executor="process")
def in_process() -> int:
    return os.getpid()
