"""``conveyor cron``: the app's cron entries (as ``conveyor start`` would schedule them, those stored
in the database included), their next run times and the last tick a leader inserted for each; its
subcommands (``cron_edit``) change the stored ones."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click
from click.core import ParameterSource

from conveyor.app import Conveyor
from conveyor.cli.app_ref import load_app
from conveyor.cli.common import print_json, print_table, require_schema
from conveyor.cli.cron_edit import COMMANDS
from conveyor.cron import MAX_BACKFILL_SPAN, CronEntry
from conveyor.dynamic_cron import entry_of
from conveyor.errors import ConveyorError
from conveyor.settings import with_overrides

#: How far ahead next run times are looked for (an entry for 29 February may have none).
HORIZON = timedelta(days=366)


def next_runs(entry: CronEntry, now: datetime, count: int) -> list[datetime]:
    """The next ``count`` ticks of ``entry`` after ``now`` within ``HORIZON`` (``ticks`` looks at
    most ``MAX_BACKFILL_SPAN`` back from its end, so the horizon is walked a span at a time)."""
    found: list[datetime] = []
    start, end = now, now + HORIZON
    while start < end and len(found) < count:
        stop = min(start + MAX_BACKFILL_SPAN, end)
        for tick in entry.ticks(start, stop):
            found.append(tick)
            if len(found) == count:
                break
        start = stop
    return found


def _app(app_ref: str | None, imports: tuple[str, ...], chosen: dict[str, str | None]) -> Conveyor:
    if "" not in sys.path:
        sys.path.insert(0, "")  # like `conveyor start`: modules in the working directory load
    if app_ref is None:
        try:
            return Conveyor.from_config(
                chosen["dsn"],
                config_file=chosen["config_file"],
                prefix=chosen["prefix"],
                imports=imports or None,
            )
        except ConveyorError as exc:
            raise click.UsageError(str(exc)) from None
    context = click.get_current_context()
    for name, value in chosen.items():
        if value is not None and context.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            option = "--config" if name == "config_file" else f"--{name}"
            raise click.UsageError(
                f"{option} cannot be used with --app: the app {app_ref} chose its database"
            )
    app = load_app(app_ref)
    if imports:
        app.settings = with_overrides(app.settings, {"imports": (*app.settings.imports, *imports)})
    return app


def _entry_json(
    entry: CronEntry, runs: list[datetime], last: datetime | None, stored: bool, paused: bool
) -> dict[str, Any]:
    return {
        "name": entry.name,
        "expression": entry.expression.text,
        "timezone": entry.timezone,
        "worker": entry.request.worker,
        "queue": entry.request.queue,
        "args": entry.request.args,
        "next_runs": runs,
        "last_tick": last,
        "stored": stored,
        "paused": paused,
    }


def _listed(app: Conveyor) -> list[tuple[CronEntry, bool, bool]]:
    """(entry, stored, paused) of every entry: the code's, each replaced by the stored entry of its
    name, then the other stored ones; a stored row no entry can be made of is named on stderr."""
    listed: dict[str, tuple[CronEntry, bool, bool]] = {e.name: (e, False, False) for e in app.crontab()}
    for cron in app.stored_crons_sync():
        try:
            listed[cron.name] = (entry_of(cron), True, cron.paused)
        except Exception as exc:  # a row of another client: said, not fatal to the listing
            click.echo(f"stored cron entry {cron.name!r} is skipped by the leader: {exc}", err=True)
    return list(listed.values())


@click.group(name="cron", invoke_without_command=True)
@click.option(
    "--app", "app_ref", default=None, metavar="MODULE:ATTR", help="Your own Conveyor, as for start."
)
@click.option(
    "--import", "imports", multiple=True, help="Module whose @job(cron=...) jobs to list (repeatable)."
)
@click.option("--dsn", envvar="CONVEYOR_DATABASE_URL", default=None, help="Database URL.")
@click.option("--prefix", default=None, help="PostgreSQL schema holding the tables.")
@click.option("--config", "config_file", default=None, help="Config file (TOML) with the crontab.")
@click.option("--next", "count", default=3, show_default=True, type=click.IntRange(1, 100), help="Next runs.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def cron(
    context: click.Context,
    app_ref: str | None,
    imports: tuple[str, ...],
    dsn: str | None,
    prefix: str | None,
    config_file: str | None,
    count: int,
    as_json: bool,
) -> None:
    """The cron entries a node would schedule (the config file's crontab, the @job(cron=...) jobs of
    --import or --app, and those stored in the database), their next run times and the last tick
    inserted. The subcommands add, change, pause, resume and delete stored entries."""
    if context.invoked_subcommand is not None:
        return
    app = _app(app_ref, imports, {"dsn": dsn, "prefix": prefix, "config_file": config_file})
    try:
        app.crontab()
    except (Exception, SystemExit) as exc:
        raise click.ClickException(f"cannot load the cron entries: {type(exc).__name__}: {exc}") from None
    if app.settings.database_url is not None:
        require_schema(app.settings.database_url, app.settings.prefix)
    try:
        listed = _listed(app)
        last = app.last_cron_ticks_sync([entry.name for entry, _, _ in listed]) if listed else {}
    finally:
        app.close_sync()
    now = datetime.now(UTC)
    shown = [
        _entry_json(entry, next_runs(entry, now, count), last.get(entry.name), stored, paused)
        for entry, stored, paused in listed
    ]
    if as_json:
        print_json(shown)
        return
    if not shown:
        click.echo("no cron entries (give --import or --app, a crontab in the config file, or add one)")
        return
    rows = [
        (
            item["name"] + (" (paused)" if item["paused"] else " (stored)" if item["stored"] else ""),
            item["expression"],
            item["timezone"],
            item["queue"],
            "\n".join(run.strftime("%Y-%m-%d %H:%M %Z") for run in item["next_runs"]) or "none within a year",
            item["last_tick"] or "never",
        )
        for item in shown
    ]
    print_table("Cron", ("name", "schedule", "time zone", "queue", "next runs (UTC)", "last tick"), rows)


for _command in COMMANDS:
    cron.add_command(_command)
