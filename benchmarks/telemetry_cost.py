"""``telemetry``: what observing a node costs its drain throughput.

``drain`` of ``jobs`` no-op jobs (default 20,000) at C = 100 (or ``--concurrency``), in four
variants, in rounds whose order rotates so a drift of the shared machine's load weighs on each alike:

- ``plain``: no handler attached, logging at WARNING (the job lines are not built);
- ``handler``: a trivial handler attached to every event (prefix ``""``);
- ``log_text``: the job log lines at INFO, formatted as ``conveyor start`` writes them, to /dev/null;
- ``log_json``: the same as JSON lines (``--log-format json``).

Target: ``handler`` costs at most 5% of ``plain`` (ratio >= 0.95). The log variants are reported,
not held to a target: one formatted line per job is work a node does only when asked to.
"""

from __future__ import annotations

import logging
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from common import Figures, Settings
from runtime import drain_once

from conveyor import Conveyor
from conveyor.log_formats import TEXT_FORMAT, JsonFormatter

TELEMETRY_JOBS = 20_000
TELEMETRY_CONCURRENCY = 100
TELEMETRY_ROUNDS = 3


def ignore(event: str, data: dict[str, Any]) -> None:
    """The trivial handler: what attaching costs, whatever a real handler then does."""


def attach_everywhere(app: Conveyor) -> None:
    app.on("", ignore)


@contextmanager
def job_logging(formatter: logging.Formatter | None) -> Iterator[None]:
    """Root logging as ``conveyor start`` sets it up, to /dev/null: at INFO with ``formatter``, or at
    WARNING (no job line is built) when None."""
    root = logging.getLogger()
    saved = (root.level, root.handlers[:])
    with open(os.devnull, "w") as sink:
        handler = logging.StreamHandler(sink)
        handler.setFormatter(formatter or logging.Formatter(TEXT_FORMAT))
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO if formatter is not None else logging.WARNING)
        try:
            yield
        finally:
            root.setLevel(saved[0])
            root.handlers[:] = saved[1]


#: Each variant: the logging formatter (None: job lines off) and what to do to the app before it starts.
VARIANTS: dict[str, tuple[logging.Formatter | None, Callable[[Conveyor], object] | None]] = {
    "plain": (None, None),
    "handler": (None, attach_everywhere),
    "log_text": (logging.Formatter(TEXT_FORMAT), None),
    "log_json": (JsonFormatter(), None),
}


async def telemetry(settings: Settings) -> Figures:
    jobs = settings.job_count(TELEMETRY_JOBS)
    concurrency = settings.concurrency or TELEMETRY_CONCURRENCY
    names = list(VARIANTS)
    measured: dict[str, list[float]] = {name: [] for name in names}
    for round_number in range(TELEMETRY_ROUNDS):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            formatter, prepare = VARIANTS[name]
            with job_logging(formatter):
                figures = await drain_once(settings, jobs, concurrency, prepare=prepare)
            measured[name].append(figures["jobs_per_s"])
    plain = statistics.median(measured["plain"])
    result: Figures = {"jobs": jobs, "concurrency": concurrency, "rounds": TELEMETRY_ROUNDS}
    for name, rates in measured.items():
        result[f"{name}_jobs_per_s"] = statistics.median(rates)
        result[f"{name}_range"] = [min(rates), max(rates)]
        if name != "plain":
            result[f"{name}_ratio"] = round(statistics.median(rates) / plain, 3)
    return result
