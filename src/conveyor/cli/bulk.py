"""``conveyor cancel | retry | delete``: act on jobs by id, or on every job a filter matches.

Given ids only, a command acts on those at once (the user named them). Given filter options, it
counts the matches, asks for confirmation (``--yes`` skips it; without a terminal to ask on it
refuses rather than wait), then acts in batches walking down the ids of the matches, with a
progress bar, and prints the total acted on.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from conveyor.app import Conveyor
from conveyor.cli.common import (
    MAX_JOB_ID,
    batch_progress,
    build_app,
    database_options,
    json_option,
    print_json,
)
from conveyor.cli.filters import build_filter, filter_options, is_empty
from conveyor.filters import JobFilter

#: What each verb did, for the messages.
PAST = {"cancel": "cancelled", "retry": "retried", "delete": "deleted"}
#: Jobs listed and acted on per round trip.
DEFAULT_BATCH = 1000


def act_in_batches(app: Conveyor, verb: str, criteria: JobFilter, batch: int, on_batch: Any) -> int:
    """Act on every job ``criteria`` matches, ``batch`` ids at a time from the newest down (a keyset
    on the id, so jobs the action moves out of the filter never shift a page); the number acted on."""
    act = getattr(app, f"{verb}_jobs_sync")
    done, seen, cursor = 0, 0, criteria.before_id
    while True:
        page = app.list_jobs_sync(dataclasses.replace(criteria, limit=batch, before_id=cursor))
        if not page:
            return done
        ids = tuple(job.id for job in page)
        # The filter applies again: a job that changed since it was listed is left alone.
        done += len(act(dataclasses.replace(criteria, ids=ids, before_id=None)))
        seen += len(ids)
        on_batch(seen)
        cursor = min(ids)


def require_terminal() -> None:
    """Refuse at once without a terminal to confirm on: a script or a cron job with nothing on its
    standard input would otherwise wait, or silently abort."""
    if not sys.stdin.isatty():
        raise click.UsageError("standard input is not a terminal to confirm on: add --yes to go ahead")


def _action(verb: str, help_text: str) -> click.Command:
    @click.command(name=verb, help=help_text)
    @database_options
    @json_option
    @click.argument("job_ids", nargs=-1, type=click.IntRange(1, MAX_JOB_ID))
    @filter_options
    @click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
    @click.option("--all", "everything", is_flag=True, help="Act on every job (no id and no filter given).")
    @click.option("--batch", default=DEFAULT_BATCH, show_default=True, type=click.IntRange(1, 10_000))
    def run(
        dsn: str | None,
        prefix: str | None,
        as_json: bool,
        job_ids: tuple[int, ...],
        filters: dict[str, Any],
        yes: bool,
        everything: bool,
        batch: int,
    ) -> None:
        if job_ids and is_empty(filters) and not everything:
            _by_ids(dsn, prefix, as_json, verb, job_ids)
            return
        if not job_ids and is_empty(filters) and not everything:
            raise click.UsageError(
                f"say which jobs to {verb}: give job ids or filter options, or --all for every job"
            )
        if everything and (job_ids or not is_empty(filters)):
            raise click.UsageError("--all acts on every job: leave out the ids and filter options")
        if as_json and not yes:
            raise click.UsageError("--json never asks: add --yes")
        criteria = build_filter(filters, ids=job_ids)
        if not yes:
            require_terminal()  # before connecting: nothing to wait for
        app = build_app(dsn, prefix)
        try:
            matched = app.count_jobs_sync(criteria)
            if not as_json:
                click.echo(f"{matched} jobs match")
            if matched and not yes:
                click.confirm(f"{verb.capitalize()} the jobs among them that allow it?", abort=True)
            with batch_progress(PAST[verb], matched, batch) as (progress, task):
                done = act_in_batches(
                    app, verb, criteria, batch, lambda seen: progress.update(task, completed=seen)
                )
        finally:
            app.close_sync()
        if as_json:
            print_json({"action": verb, "matched": matched, "count": done})
        else:
            click.echo(f"{PAST[verb]} {done} of {matched} matching jobs")

    return run


def _by_ids(dsn: str | None, prefix: str | None, as_json: bool, verb: str, job_ids: tuple[int, ...]) -> None:
    app = build_app(dsn, prefix)
    try:
        done = getattr(app, f"{verb}_jobs_sync")(ids=list(job_ids))
    finally:
        app.close_sync()
    skipped = sorted(set(job_ids) - set(done))
    if as_json:
        print_json({verb: done, "skipped": skipped})
        return
    click.echo(f"{PAST[verb]}: {', '.join(map(str, done)) or 'none'}")
    if skipped:
        click.echo(f"skipped (missing or not in a state that allows it): {', '.join(map(str, skipped))}")


cancel = _action(
    "cancel",
    "Cancel jobs by id or by filter (not final ones are cancelled; executing ones stop on their node).",
)
retry = _action("retry", "Make jobs available again now, by id or by filter.")
delete = _action("delete", "Delete jobs by id or by filter (executing jobs are left alone).")
