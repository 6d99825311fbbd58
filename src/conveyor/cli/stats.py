"""``conveyor stats``: per queue, the jobs in each state (estimates marked), how long the oldest
available job has waited, throughput and error rate over a window, and what the live nodes run."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import click

from conveyor.cli.common import build_app, database_options, json_option, print_json, print_table
from conveyor.errors import ValidationError
from conveyor.fleet import QueueInfo
from conveyor.job import JobState
from conveyor.retention import parse_duration
from conveyor.stats import JobStats, QueueCounts

#: Buckets the window is read in (``job_stats`` needs some; only the totals are shown).
BUCKETS = 60


def _window(text: str) -> float:
    try:
        seconds = parse_duration(text, "window")
    except ValidationError as exc:
        raise click.UsageError(f"invalid --window {text!r}: {exc.problem}") from None
    if not 60 <= seconds <= 7 * 86_400:
        raise click.UsageError(f"invalid --window {text!r}: must be from 1m to 7d")
    return seconds


def _figures(stats: JobStats) -> dict[str, Any]:
    return {
        "completed": stats.completed,
        "retried": stats.retried,
        "discarded": stats.discarded,
        "cancelled": stats.cancelled,
        "throughput_per_minute": stats.throughput * 60,
        "error_rate": stats.error_rate,
        "estimated": stats.estimated,
    }


def _nodes(infos: list[QueueInfo]) -> dict[str, dict[str, Any]]:
    """Per queue, over the live nodes running it: jobs running, the sum of limits, nodes paused."""
    found: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"nodes": 0, "running": 0, "limit": 0, "paused": 0}
    )
    for info in infos:
        entry = found[info.queue]
        entry["nodes"] += 1
        entry["running"] += info.running
        entry["limit"] += info.limit
        entry["paused"] += int(info.paused)
    return dict(found)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


@click.command()
@database_options
@json_option
@click.option("--window", default="1h", show_default=True, help="Throughput and errors over: 30m, 1h, 1d...")
def stats(dsn: str | None, prefix: str | None, as_json: bool, window: str) -> None:
    """Jobs per queue and state, the oldest available job's wait, throughput and error rate over
    --window, and the running count, limit and paused nodes of each queue."""
    seconds = _window(window)
    app = build_app(dsn, prefix)
    try:
        counts = app.queue_counts_sync()
        nodes = _nodes(app.queues_sync())
        names = sorted({c.queue for c in counts} | set(nodes))
        bucket = seconds / BUCKETS
        per_queue = {name: app.job_stats_sync(window=seconds, bucket=bucket, queues=[name]) for name in names}
        overall = app.job_stats_sync(window=seconds, bucket=bucket)
    finally:
        app.close_sync()
    by_queue = {c.queue: c for c in counts}
    report = {
        "window": seconds,
        "queues": [_queue_json(name, by_queue.get(name), per_queue[name], nodes.get(name)) for name in names],
        "total": _figures(overall),
    }
    if as_json:
        print_json(report)
        return
    _print(report, window)


def _queue_json(
    name: str, counts: QueueCounts | None, window: JobStats, nodes: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "queue": name,
        "counts": {state.value: counts.count(state) if counts else 0 for state in JobState},
        "estimated_states": sorted(s.value for s in counts.estimated) if counts else [],
        "oldest_available_age": counts.oldest_available_age if counts else None,
        **_figures(window),
        "nodes": nodes or {"nodes": 0, "running": 0, "limit": 0, "paused": 0},
    }


def _print(report: dict[str, Any], window: str) -> None:
    states = [s.value for s in JobState]
    rows = []
    for queue in report["queues"]:
        estimated = set(queue["estimated_states"])
        nodes = queue["nodes"]
        rows.append(
            [
                queue["queue"],
                *(f"~{queue['counts'][s]}" if s in estimated else queue["counts"][s] for s in states),
                _age(queue["oldest_available_age"]),
                f"{queue['throughput_per_minute']:.1f}",
                f"{queue['error_rate']:.1%}",
                f"{nodes['running']}/{nodes['limit']}" if nodes["nodes"] else "no node",
                f"{nodes['paused']}/{nodes['nodes']}" if nodes["paused"] else "",
            ]
        )
    columns = [
        "queue",
        *states,
        "oldest available",
        f"done/min ({window})",
        f"errors ({window})",
        "running/limit",
        "paused",
    ]
    print_table("Queues", columns, rows)
    total = report["total"]
    mark = " (estimated)" if total["estimated"] else ""
    click.echo(
        f"last {window}: {total['completed']} completed, {total['retried']} retried, "
        f"{total['discarded']} discarded, {total['cancelled']} cancelled; "
        f"{total['throughput_per_minute']:.1f} jobs/min, error rate {total['error_rate']:.1%}{mark}"
    )
    if any(q["estimated_states"] for q in report["queues"]):
        click.echo("~: estimated count (a large table: PostgreSQL's planner estimate)")
