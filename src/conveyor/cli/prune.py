"""``conveyor prune``: delete finished jobs now, by the configured retention rules or by options."""

from __future__ import annotations

import click

from conveyor.app import Conveyor
from conveyor.cli.app_ref import load_app, refuse_app_chosen
from conveyor.cli.common import (
    batch_progress,
    build_app,
    database_options,
    json_option,
    print_json,
    require_schema,
)
from conveyor.errors import ValidationError
from conveyor.job import JobState
from conveyor.retention import MAX_ROWS, PRUNABLE_STATES, Pruned, PruneRule, Retention, parse_duration

#: How each option names the rule field it sets, for error messages.
OPTION_OF = {"max_age": "--max-age", "max_rows": "--max-rows", "queue": "--queue", "worker": "--worker"}


def _selected(
    max_age: str | None, max_rows: int | None, states: tuple[str, ...], queue: str | None, worker: str | None
) -> Retention | None:
    """The policy the options describe (one rule; jobs it does not select are kept), or None when
    no option selects anything: then the configured policy applies."""
    if max_age is None and max_rows is None and not states and queue is None and worker is None:
        return None
    if max_age is None and max_rows is None:
        raise click.UsageError("say which of the selected jobs go: give --max-age, --max-rows or both")
    try:
        age = None if max_age is None else parse_duration(max_age, "max_age")
        rule = PruneRule(
            queue=queue,
            worker=worker,
            states=tuple(JobState(s) for s in states) or PRUNABLE_STATES,
            max_age=age,
            max_rows=max_rows,
        )
    except ValidationError as exc:
        option = OPTION_OF.get(exc.field, f"--{exc.field}")
        raise click.UsageError(f"invalid {option} {exc.value!r}: {exc.problem}") from None
    return Retention(max_age=None, rules=(rule,))


def _counts(pruned: Pruned) -> str:
    return ", ".join(f"{state} {n}" for state, n in pruned.by_state().items() if n) or "none"


@click.command()
@click.option(
    "--app",
    "app_ref",
    default=None,
    metavar="MODULE:ATTR",
    help="Prune by your own Conveyor's retention rules (or a function returning it), e.g. myapp.worker:app.",
)
@database_options
@click.option(
    "--config",
    "config_file",
    default=None,
    help="Config file with the retention rules (default: conveyor.toml, else pyproject.toml).",
)
@json_option
@click.option(
    "--max-age",
    default=None,
    metavar="DURATION",
    help="Delete selected jobs that ended longer ago: seconds, or 45s, 30m, 12h, 7d, 2w, 1d12h.",
)
@click.option(
    "--max-rows",
    type=click.IntRange(0, MAX_ROWS),
    default=None,
    help="Keep only the newest N of the selected jobs.",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in PRUNABLE_STATES]),
    help="Select jobs in this final state (repeatable; default: all three).",
)
@click.option("--queue", default=None, help="Select only this queue's jobs.")
@click.option("--worker", default=None, help="Select only this worker's jobs.")
@click.option("--dry-run", is_flag=True, help="Print how many jobs would go, deleting nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def prune(
    app_ref: str | None,
    dsn: str | None,
    prefix: str | None,
    config_file: str | None,
    as_json: bool,
    max_age: str | None,
    max_rows: int | None,
    states: tuple[str, ...],
    queue: str | None,
    worker: str | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Delete finished (completed, cancelled, discarded) jobs now.

    Without options, by the configured retention: prune_rules, prune_max_age, prune_keep_per_queue
    and prune_max_rows (with --app, your app's, set in Python or its config). With --max-age and/or
    --max-rows, only the final jobs that --queue, --worker and --state select (all by default) are
    pruned, and nothing else.
    """
    chosen = _selected(max_age, max_rows, states, queue, worker)
    if as_json and not (yes or dry_run):
        raise click.UsageError("--json never asks: add --yes (or --dry-run)")
    if app_ref is None:
        app = build_app(dsn, prefix, config_file=config_file)
    else:
        app = _user_app(app_ref, {"dsn": dsn, "prefix": prefix, "config_file": config_file})
    try:
        retention = app.settings.retention if chosen is None else chosen
        total = None
        if dry_run or not yes:
            total = app.count_prunable_sync(retention)
            if dry_run:
                _report(total, as_json, dry_run=True)
                return
            if not total.count:
                click.echo("nothing to prune")
                return
            click.confirm(f"Delete {total.count} finished jobs ({_counts(total)})?", abort=True)
        count = None if total is None else total.count
        with batch_progress("pruning", count, app.settings.prune_limit) as (progress, task):
            pruned = app.prune_sync(
                retention, on_batch=lambda done: progress.update(task, completed=done.count)
            )
    finally:
        app.close_sync()
    _report(pruned, as_json, dry_run=False)


def _user_app(reference: str, given: dict[str, str | None]) -> Conveyor:
    """The app ``--app`` names: its database, its prefix and its retention rules, however it set
    them (in Python, from its config file or the environment)."""
    refuse_app_chosen(reference, given)
    app = load_app(reference)
    if app._binding.owns_engine:
        # An app built on an engine object of its own is checked when it first connects.
        require_schema(app.settings.database_url, app.settings.prefix)
    return app


def _report(pruned: Pruned, as_json: bool, *, dry_run: bool) -> None:
    if as_json:
        print_json({"dry_run": dry_run, "count": pruned.count, **pruned.by_state()})
    elif dry_run:
        click.echo(f"would delete {pruned.count} finished jobs ({_counts(pruned)})")
    else:
        click.echo(f"deleted {pruned.count} finished jobs ({_counts(pruned)})")
