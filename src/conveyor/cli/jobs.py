"""``conveyor jobs | job | cancel | retry | delete | signal | wait``: inspect and act on jobs."""

from __future__ import annotations

from typing import Any

import click
import orjson

from conveyor.cli.common import (
    MAX_JOB_ID,
    build_app,
    database_options,
    json_option,
    print_json,
    print_table,
)
from conveyor.errors import ConveyorError, JobNotFoundError, ValidationError
from conveyor.filters import JobFilter
from conveyor.job import Job, JobState


@click.command()
@database_options
@json_option
@click.option("--state", "states", multiple=True, type=click.Choice([s.value for s in JobState]))
@click.option("--queue", "queues", multiple=True)
@click.option("--worker", "workers", multiple=True)
@click.option("--tag", "tags", multiple=True, help="Jobs carrying all of these tags.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--before-id",
    type=click.IntRange(1, MAX_JOB_ID),
    default=None,
    help="Page: only jobs with a smaller id.",
)
def jobs(
    dsn: str | None,
    prefix: str | None,
    as_json: bool,
    states: tuple[str, ...],
    queues: tuple[str, ...],
    workers: tuple[str, ...],
    tags: tuple[str, ...],
    limit: int,
    before_id: int | None,
) -> None:
    """List jobs, newest first."""
    try:  # checked before connecting: a bad filter is a usage error
        criteria = JobFilter.build(
            states=states, queues=queues, workers=workers, tags=tags, limit=limit, before_id=before_id
        )
    except ValidationError as exc:
        raise click.UsageError(str(exc)) from None
    app = build_app(dsn, prefix)
    try:
        found = app.list_jobs_sync(criteria)
    finally:
        app.close_sync()
    if as_json:
        print_json(found)
        return
    rows = [
        (
            j.id,
            j.state.value if j.unreadable is None else f"{j.state.value} (unreadable)",
            j.queue,
            j.worker,
            f"{j.attempt}/{j.max_attempts}",
            j.scheduled_at,
            ",".join(j.tags),
        )
        for j in found
    ]
    print_table("Jobs", ("id", "state", "queue", "worker", "attempt", "scheduled_at", "tags"), rows)
    for j in found:
        if j.unreadable is not None:  # rows another client broke: say what is wrong with each
            click.echo(f"job {j.id}: its row could not be read: {j.unreadable}")


def _action(verb: str, help_text: str) -> click.Command:
    @click.command(name=verb, help=help_text)
    @database_options
    @json_option
    @click.argument("job_ids", nargs=-1, required=True, type=click.IntRange(1, MAX_JOB_ID))
    def run(dsn: str | None, prefix: str | None, as_json: bool, job_ids: tuple[int, ...]) -> None:
        app = build_app(dsn, prefix)
        try:
            done = getattr(app, f"{verb}_jobs_sync")(ids=list(job_ids))
        finally:
            app.close_sync()
        skipped = sorted(set(job_ids) - set(done))
        if as_json:
            print_json({verb: done, "skipped": skipped})
            return
        past = {"cancel": "cancelled", "retry": "retried", "delete": "deleted"}[verb]
        click.echo(f"{past}: {', '.join(map(str, done)) or 'none'}")
        if skipped:
            click.echo(f"skipped (missing or not in a state that allows it): {', '.join(map(str, skipped))}")

    return run


cancel = _action("cancel", "Cancel jobs by id; executing ones are stopped on their node.")
retry = _action("retry", "Make jobs available again now.")
delete = _action("delete", "Delete jobs by id (executing jobs are left alone).")


@click.command(name="job")
@database_options
@json_option
@click.argument("job_id", type=click.IntRange(1, MAX_JOB_ID))
def job_detail(dsn: str | None, prefix: str | None, as_json: bool, job_id: int) -> None:
    """Show one job: its fields, progress, signals, recorded result and last error."""
    app = build_app(dsn, prefix)
    try:
        found = app.get_job_sync(job_id)
    finally:
        app.close_sync()
    if found is None:
        raise JobNotFoundError(job_id)
    try:
        result: Any = found.result
    except ConveyorError as exc:  # another client's value that cannot be decoded: say so
        result = f"(unreadable: {exc})"
    if as_json:
        print_json(
            {**_plain_job(found), "progress": found.progress, "signals": found.signals, "result": result}
        )
        return
    rows: list[tuple[str, Any]] = [
        ("id", found.id),
        ("state", found.state.value),
        ("queue", found.queue),
        ("worker", found.worker),
        ("attempt", f"{found.attempt}/{found.max_attempts}"),
        ("args", orjson.dumps(found.args).decode()),
        ("tags", ",".join(found.tags)),
        ("scheduled_at", found.scheduled_at),
        ("attempted_at", found.attempted_at),
        ("progress", orjson.dumps(found.progress).decode() if found.progress else ""),
        ("signals", len(found.signals)),
        ("result", repr(result) if result is not None else ""),
        ("last error", str(found.errors[-1].get("error", ""))[-500:] if found.errors else ""),
    ]
    print_table(f"Job {found.id}", ("field", "value"), rows)
    if found.unreadable is not None:
        click.echo(f"its row could not be read: {found.unreadable}")


def _plain_job(job: Job) -> dict[str, Any]:
    return {field: getattr(job, field) for field in job.__dataclass_fields__}


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
