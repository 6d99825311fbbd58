"""``conveyor jobs | job | signal | wait``: list and inspect jobs, signal one, wait for one."""

from __future__ import annotations

from typing import Any

import click
import orjson
from click.core import ParameterSource

from conveyor.cli.common import MAX_JOB_ID, build_app, database_options, json_option, print_json, print_table
from conveyor.cli.filters import build_filter, filter_options
from conveyor.cli.job_view import job_json, show_job
from conveyor.errors import JobNotFoundError
from conveyor.filters import MAX_PAGE
from conveyor.stats import JobCount


@click.command()
@database_options
@json_option
@filter_options
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, MAX_PAGE))
@click.option(
    "--before-id",
    type=click.IntRange(1, MAX_JOB_ID),
    default=None,
    help="Page: only jobs with a smaller id.",
)
@click.option("--wide", is_flag=True, help="More columns: priority, errors, attempted and completed.")
@click.option(
    "--count",
    "count_only",
    is_flag=True,
    help="Print only how many jobs match (no --limit): exact up to 10,000, else estimated, as ~N.",
)
@click.option("--exact", is_flag=True, help="With --count: count every match exactly, however many.")
def jobs(
    dsn: str | None,
    prefix: str | None,
    as_json: bool,
    filters: dict[str, Any],
    limit: int,
    before_id: int | None,
    wide: bool,
    count_only: bool,
    exact: bool,
) -> None:
    """List jobs, newest first."""
    # checked before connecting: a bad filter is a usage error
    limit_source = click.get_current_context().get_parameter_source("limit")
    if count_only and limit_source is ParameterSource.COMMANDLINE:
        raise click.UsageError("--count counts every match: leave out --limit")
    if exact and not count_only:
        raise click.UsageError("--exact applies to --count only")
    criteria = build_filter(filters, limit=None if count_only else limit, before_id=before_id)
    app = build_app(dsn, prefix)
    try:
        if count_only:
            _print_count(
                app.count_jobs_sync(criteria) if exact else app.count_jobs_sync(criteria, estimate=True),
                as_json,
            )
            return
        found = app.list_jobs_sync(criteria)
    finally:
        app.close_sync()
    if as_json:
        print_json([job_json(j) for j in found])
        return
    columns = ["id", "state", "queue", "worker", "attempt", "scheduled_at", "tags"]
    if wide:
        columns += ["priority", "errors", "attempted_at", "attempted_by", "completed_at"]
    rows = []
    for j in found:
        row: list[Any] = [
            j.id,
            j.state.value if j.unreadable is None else f"{j.state.value} (unreadable)",
            j.queue,
            j.worker,
            f"{j.attempt}/{j.max_attempts}",
            j.scheduled_at,
            ",".join(j.tags),
        ]
        if wide:
            row += [j.priority, len(j.errors), j.attempted_at, ",".join(j.attempted_by), j.completed_at]
        rows.append(row)
    print_table("Jobs", columns, rows)
    for j in found:
        if j.unreadable is not None:  # rows another client broke: say what is wrong with each
            click.echo(f"job {j.id}: its row could not be read: {j.unreadable}")


def _print_count(found: int | JobCount, as_json: bool) -> None:
    """A count: exact, or an estimate (``~N``; on stderr, how to have it exactly)."""
    counted = found if isinstance(found, JobCount) else JobCount(found)
    if as_json:
        print_json({"count": counted.count, "estimated": counted.estimated})
        return
    click.echo(str(counted))
    if counted.estimated:
        click.echo("~: estimated from the database's statistics (--exact counts every match)", err=True)


@click.command(name="job")
@database_options
@json_option
@click.argument("job_id", type=click.IntRange(1, MAX_JOB_ID))
def job_detail(dsn: str | None, prefix: str | None, as_json: bool, job_id: int) -> None:
    """Show one job: every field, args and meta, its errors with their tracebacks, its recorded
    result (decoded), progress and workflow step."""
    app = build_app(dsn, prefix)
    try:
        found = app.get_job_sync(job_id)
    finally:
        app.close_sync()
    if found is None:
        raise JobNotFoundError(job_id)
    shown = job_json(found)
    if as_json:
        print_json(shown)
        return
    show_job(found, shown)


@click.command(name="signal")
@database_options
@json_option
@click.argument("job_id", type=click.IntRange(1, MAX_JOB_ID))
@click.argument("message")
def signal_job(dsn: str | None, prefix: str | None, as_json: bool, job_id: int, message: str) -> None:
    """Send MESSAGE (a JSON object) to a job: a running job receives it at once, one waiting in
    wait_for_signal runs again."""
    try:
        decoded = orjson.loads(message)
    except orjson.JSONDecodeError as exc:
        raise click.UsageError(f"MESSAGE is not JSON: {exc}") from None
    app = build_app(dsn, prefix)
    try:
        state = app.signal_sync(job_id, decoded)
    finally:
        app.close_sync()
    if as_json:
        print_json({"job_id": job_id, "state": state.value})
    else:
        click.echo(f"signalled job {job_id} (now {state.value})")


@click.command(name="wait")
@database_options
@json_option
@click.argument("job_id", type=click.IntRange(1, MAX_JOB_ID))
@click.option(
    "--timeout", type=click.FloatRange(0, 86_400), default=None, help="Seconds (default: no limit)."
)
@click.option("--through-retries", is_flag=True, help="Keep waiting while failed attempts are retried.")
def wait_job(
    dsn: str | None,
    prefix: str | None,
    as_json: bool,
    job_id: int,
    timeout: float | None,
    through_retries: bool,
) -> None:
    """Wait until a job completes and print its recorded result; fail (exit 1) if it is cancelled,
    discarded, fails an attempt, or the timeout passes."""
    app = build_app(dsn, prefix)
    try:
        done = app.wait_sync(job_id, timeout=timeout, through_retries=through_retries)
    finally:
        app.close_sync()
    if as_json:
        print_json({"job_id": done.id, "state": done.state.value, "result": done.result})
    else:
        click.echo(f"job {done.id} completed: {done.result!r}")
