"""``conveyor jobs | cancel | retry | delete``: inspect and act on jobs."""

from __future__ import annotations

import click

from conveyor.cli.common import (
    MAX_JOB_ID,
    build_app,
    database_options,
    json_option,
    print_json,
    print_table,
)
from conveyor.errors import ValidationError
from conveyor.filters import JobFilter
from conveyor.job import JobState


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
