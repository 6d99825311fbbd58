"""The pages: overview, jobs, one job, nodes, cron. Each reads through the ``Conveyor`` API only."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from conveyor import _options as opt
from conveyor.cron import CronEntry
from conveyor.dynamic_cron import entry_of
from conveyor.errors import ValidationError
from conveyor.filters import JobFilter
from conveyor.fleet import QueueInfo
from conveyor.job import CANCELLABLE_STATES, RETRYABLE_STATES, Job, JobState
from conveyor.recorded import UnreadableResultError, decode_result
from conveyor.web.dashboard import counts
from conveyor.web.dashboard.charts import bar_chart
from conveyor.web.dashboard.context import dashboard_of, render, route_path
from conveyor.web.dashboard.graph import dependency_order, workflow_svg
from conveyor.web.dashboard.querying import PAGE_SIZES, TIME_FIELDS, JobQuery, parse_query
from conveyor.web.dashboard.schedule import CronRow, next_run
from conveyor.workflow import WorkflowStatus

STATES = [state.value for state in JobState]
#: The states the overview's queue table shows a column for.
COUNTED = [
    "available",
    "scheduled",
    "suspended",
    "retryable",
    "executing",
    "completed",
    "cancelled",
    "discarded",
]
#: How many ids a filtered jobs page looks through at most: a filter that matches few jobs must
#: not walk a table of millions to fill a page (the page offers to search the ids below instead).
SCAN_WINDOW = 100_000


async def overview(request: Request) -> Response:
    dash = dashboard_of(request)
    rows = await counts.queue_rows(dash.conveyor)
    activity = await counts.activity(dash.conveyor)
    charts = {
        "throughput": bar_chart(
            [(b.start, b.completed) for b in activity.buckets],
            label="jobs completed per minute",
            css="throughput",
        ),
        "errors": bar_chart(
            [(b.start, _rate(b.failed, b.completed)) for b in activity.buckets],
            label="error rate per minute",
            css="errors",
            unit="%",
            ceiling=100.0,
        ),
    }
    totals: dict[str, int] = {}
    for row in rows:
        for state, n in row.counts.items():
            totals[state.value] = totals.get(state.value, 0) + n
    nodes = sorted({p.node for row in rows for p in row.producers})
    return render(
        dash,
        request,
        "overview.html",
        {
            "page": "overview",
            "rows": rows,
            "states": STATES,
            "counted": COUNTED,
            "totals": totals,
            "activity": activity,
            "charts": charts,
            "activity_estimated": activity.estimated,
            "nodes": nodes,
            "leader": await dash.conveyor.leader(),
        },
    )


async def _window(conveyor: Any, query: JobQuery) -> tuple[int, int] | None:
    """The ids (above the first, below the second) a filtered page looks through, or None when it
    may look through them all (no filter, or fewer ids than the window below the page)."""
    if not query.filtered:
        return None
    top = query.before
    if top is None:
        newest = await conveyor.list_jobs(JobFilter(limit=1))
        if not newest:
            return None
        top = newest[0].id + 1
    floor = top - SCAN_WINDOW - 1
    return (floor, top) if floor > 0 else None


def _rate(failed: int, completed: int) -> float:
    done = failed + completed
    return 100.0 * failed / done if done else 0.0


async def jobs(request: Request) -> Response:
    dash = dashboard_of(request)
    query = parse_query({k: request.query_params.getlist(k) for k in request.query_params})
    window = await _window(dash.conveyor, query)
    found = await dash.conveyor.list_jobs(query.criteria(after=window[0] if window else None))
    older = query.link(before=found[-1].id) if len(found) == query.limit else None
    search_older = None
    if window is not None and older is None:
        search_older = query.link(before=window[0] + 1)
    return render(
        dash,
        request,
        "jobs.html",
        {
            "page": "jobs",
            "query": query,
            "jobs": found,
            "states": STATES,
            "page_sizes": PAGE_SIZES,
            "time_fields": TIME_FIELDS,
            "older": older,
            "window": window,
            "search_older": search_older,
            "newest": query.link(before=None) if query.before is not None else None,
            "queues": sorted({q.queue for q in await dash.conveyor.queues()} | set(query.queues)),
            "filter_params": query.params(paged=False),
            "next_path": request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        },
    )


async def job(request: Request) -> Response:
    dash = dashboard_of(request)
    raw = request.path_params["job_id"]
    try:
        job_id = opt.check_job_id(int(raw), "job_id")
    except ValueError:
        return _missing(request, f"{raw[:40]!r} is no job id", 400)
    found = await dash.conveyor.get_job(job_id)
    if found is None:
        return _missing(request, f"no job has id {job_id}", 404)
    workflow, graph, steps = await _workflow(dash.conveyor, found, request)
    result = _result(found)
    return render(
        dash,
        request,
        "job.html",
        {
            "page": "jobs",
            "job": found,
            "result": result,
            "meta": _meta_shown(found.meta, result),
            "progress_bar": _progress_bar(found.progress),
            "workflow": workflow,
            "graph": graph,
            "steps": steps,
            "can_cancel": found.state in CANCELLABLE_STATES,
            "can_retry": found.state in RETRYABLE_STATES,
            "can_delete": found.state is not JobState.EXECUTING,
            "errors": [_error_entry(e) for e in found.errors],
            "next_path": request.url.path,
        },
    )


def _missing(request: Request, what: str, status: int) -> Response:
    context = {"page": "jobs", "what": what}
    return render(dashboard_of(request), request, "missing.html", context, status=status)


def _result(found: Job) -> dict[str, Any] | None:
    """The recorded result to show: decoded, or why it cannot be; None when there is none."""
    try:
        return {"value": decode_result(found.meta)}
    except UnreadableResultError as exc:
        return {"problem": str(exc)}
    except LookupError:
        return None


def _meta_shown(meta: Any, result: dict[str, Any] | None) -> Any:
    """``meta`` as the page shows it: the recorded result's ``return`` (base64 of Erlang's term
    format, unreadable as it is) replaced by a note; the value itself is decoded, never executed,
    under "Recorded result". A ``return`` without ``"recorded": true`` is no result (Oban's
    convention), only the meta of whoever enqueued the job, and stays as it is."""
    if not isinstance(meta, dict) or "return" not in meta or not meta.get("recorded"):
        return meta
    raw = meta["return"]
    size = _encoded_size(raw) if isinstance(raw, str) else None
    what = f"recorded result, {size} bytes" if size is not None else "recorded result"
    if result is not None and "value" in result:
        note = f"({what}: decoded under Recorded result)"
    else:
        note = f"({what}: not shown, it cannot be decoded)"
    return {**meta, "return": note}


def _encoded_size(text: str) -> int:
    """How many bytes base64 ``text`` (padded or not) stands for."""
    digits = len(text.rstrip("="))
    return digits * 3 // 4


def _progress_bar(progress: dict[str, Any]) -> tuple[float, float, str] | None:
    """The bar's value and maximum, and its label: ``10 / 20`` (done of total) or ``45%``."""
    done, total = progress.get("done"), progress.get("total")
    numbers = (int, float)
    if (
        isinstance(done, numbers)
        and not isinstance(done, bool)
        and isinstance(total, numbers)
        and not isinstance(total, bool)
        and total > 0
    ):
        value = float(min(max(done, 0), total))
        return value, float(total), f"{_number(value)} / {_number(total)}"
    percent = progress.get("percent")
    if isinstance(percent, numbers) and not isinstance(percent, bool):
        value = float(min(max(percent, 0), 100))
        return value, 100.0, f"{_number(value)}%"
    return None


def _number(value: float) -> str:
    """A count as people write it: ``10``, not ``10.0``; fractions to two places at most."""
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0")


def _error_entry(entry: Any) -> dict[str, Any]:
    """One entry of ``errors``; another client may have stored anything there."""
    if isinstance(entry, dict):
        return {"attempt": entry.get("attempt"), "at": entry.get("at"), "error": entry.get("error", entry)}
    return {"attempt": None, "at": None, "error": entry}


async def _workflow(conveyor: Any, found: Job, request: Request) -> tuple[WorkflowStatus | None, Any, Any]:
    """The job's workflow, its graph, and its steps in dependency order (or Nones)."""
    workflow_id = found.meta.get("workflow_id") if isinstance(found.meta, dict) else None
    if not isinstance(workflow_id, str):
        return None, None, []
    try:
        status: WorkflowStatus = await conveyor.workflow_status(workflow_id)
    except ValidationError:
        return None, None, []
    graph = workflow_svg(status.steps, lambda job_id: route_path(request, "job", job_id=job_id))
    return status, graph, dependency_order(status.steps)


async def nodes(request: Request) -> Response:
    dash = dashboard_of(request)
    by_node: dict[str, list[QueueInfo]] = {}
    for info in await dash.conveyor.queues():
        by_node.setdefault(info.node, []).append(info)
    return render(
        dash,
        request,
        "nodes.html",
        {"page": "nodes", "nodes": sorted(by_node.items()), "leader": await dash.conveyor.leader()},
    )


async def cron(request: Request) -> Response:
    """The entries the live nodes announce (what runs, whatever this process imported), then those
    of this app's own configuration that no live node announces, each replaced by the entry stored
    in the database under its name (dynamic cron), then the other stored entries."""
    dash = dashboard_of(request)
    listed = {found.entry.name: (found.entry, found.nodes) for found in await dash.conveyor.fleet_crontab()}
    for entry in dash.crontab():
        listed.setdefault(entry.name, (entry, ()))
    stored: dict[str, tuple[CronEntry, bool]] = {}
    for row in await dash.conveyor.stored_crons():
        with contextlib.suppress(Exception):  # a row no entry can be made of: the leader skips it too
            stored[row.name] = (entry_of(row), row.paused)
    names = [*listed, *(name for name in stored if name not in listed)]
    last = await dash.conveyor.cron_ticks(names) if names else {}
    now = datetime.now(UTC)
    rows = []
    for name in names:
        # A name is announced or configured (``listed``), stored, or both; stored wins.
        entry, paused = stored[name] if name in stored else (listed[name][0], False)
        nodes = listed[name][1] if name in listed else ()
        upcoming = None if paused else next_run(entry, now)
        rows.append(CronRow(entry, last.get(name), upcoming, nodes, stored=name in stored, paused=paused))
    return render(dash, request, "cron.html", {"page": "cron", "rows": rows})
