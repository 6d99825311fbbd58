"""``conveyor cron add|update|pause|resume|delete``: stored cron entries (dynamic cron), changed at
runtime. The leader of the fleet runs each change from its next tick; no node restarts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

from conveyor.app import Conveyor
from conveyor.cli.common import require_schema
from conveyor.errors import ConveyorError, ValidationError
from conveyor.fleet import StoredCron

F = TypeVar("F", bound=Callable[..., Any])


def connection_options(command: F) -> F:
    """The options that say which database (and app) a command changes, as ``conveyor cron`` has."""
    for option in reversed(
        [
            click.option("--app", "app_ref", default=None, metavar="MODULE:ATTR", help="Your own Conveyor."),
            click.option("--import", "imports", multiple=True, help="Module to import first (repeatable)."),
            click.option("--dsn", envvar="CONVEYOR_DATABASE_URL", default=None, help="Database URL."),
            click.option("--prefix", default=None, help="PostgreSQL schema holding the tables."),
            click.option("--config", "config_file", default=None, help="Config file (TOML)."),
            click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts."),
        ]
    ):
        command = option(command)
    return command


def job_options(command: F) -> F:
    """The fields of an entry besides its name, expression and worker."""
    for option in reversed(
        [
            click.option("--args", "args_json", default=None, help="The job's args as a JSON object."),
            click.option("--timezone", default=None, help="Time zone of the expression (default UTC)."),
            click.option("--queue", default=None, help="Queue of the jobs."),
            click.option("--priority", type=int, default=None, help="Priority of the jobs (0-9)."),
            click.option("--max-attempts", type=int, default=None, help="Attempts of each job."),
            click.option("--tag", "tags", multiple=True, help="Tag of the jobs (repeatable)."),
            click.option("--backfill/--no-backfill", default=None, help="Insert ticks missed while down."),
            click.option("--foreign", is_flag=True, help="The worker runs on another runtime."),
        ]
    ):
        command = option(command)
    return command


def _args(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise click.UsageError(f"invalid --args {text!r}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise click.UsageError(f"invalid --args {text!r}: must be a JSON object")
    return value


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """The job options given on the command line, named as ``add_cron`` takes them."""
    given = {key: options[key] for key in ("queue", "priority", "max_attempts") if options[key] is not None}
    if options["tags"]:
        given["tags"] = list(options["tags"])
    return given


def _change(connection: dict[str, Any], action: Callable[[Conveyor], StoredCron | None], done: str) -> None:
    """Run ``action`` on the app the options name and print the stored entry it returns."""
    from conveyor.cli.cron import _app  # imported here: cron.py imports this module for its group

    as_json = connection.pop("as_json")
    chosen = {key: connection[key] for key in ("dsn", "prefix", "config_file")}
    app = _app(connection["app_ref"], connection["imports"], chosen)
    try:
        if app.settings.database_url is not None:
            require_schema(app.settings.database_url, app.settings.prefix)
        cron = action(app)
    except ValidationError as exc:
        raise click.UsageError(str(exc)) from None
    except ConveyorError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        app.close_sync()
    if as_json:
        click.echo(orjson.dumps(_json(cron) if cron else {"deleted": done}).decode())
    elif cron is None:
        click.echo(f"deleted cron entry {done}")
    else:
        state = "paused" if cron.paused else "active"
        click.echo(f"{done} cron entry {cron.name}: {cron.expression} {cron.worker} ({state})")


def _json(cron: StoredCron) -> dict[str, Any]:
    return {
        "name": cron.name,
        "expression": cron.expression,
        "worker": cron.worker,
        "opts": cron.opts,
        "paused": cron.paused,
    }


def _connection(kwargs: dict[str, Any]) -> dict[str, Any]:
    keys = ("app_ref", "imports", "dsn", "prefix", "config_file", "as_json")
    return {key: kwargs.pop(key) for key in keys}


@click.command(name="add")
@click.argument("name")
@click.argument("expression")
@click.argument("worker")
@job_options
@click.option("--paused", is_flag=True, help="Store it paused.")
@connection_options
def add(name: str, expression: str, worker: str, **kwargs: Any) -> None:
    """Store a new cron entry NAME: WORKER (a job's dotted name) on every tick of EXPRESSION."""
    connection = _connection(kwargs)
    options = _options(kwargs)
    args = _args(kwargs["args_json"])
    _change(
        connection,
        lambda app: app.add_cron_sync(
            name,
            expression,
            worker,
            args,
            timezone=kwargs["timezone"] or "UTC",
            paused=kwargs["paused"],
            backfill=bool(kwargs["backfill"]),
            foreign=kwargs["foreign"],
            **options,
        ),
        "added",
    )


@click.command(name="update")
@click.argument("name")
@click.option("--expression", default=None, help="New cron expression.")
@click.option("--worker", default=None, help="New worker (a job's dotted name).")
@job_options
@connection_options
def update(name: str, expression: str | None, worker: str | None, **kwargs: Any) -> None:
    """Change the given fields of the cron entry NAME (one defined in code is stored first)."""
    connection = _connection(kwargs)
    options = _options(kwargs)
    args = _args(kwargs["args_json"])
    _change(
        connection,
        lambda app: app.update_cron_sync(
            name,
            expression=expression,
            worker=worker,
            args=args,
            timezone=kwargs["timezone"],
            backfill=kwargs["backfill"],
            foreign=kwargs["foreign"],
            **options,
        ),
        "updated",
    )


@click.command(name="pause")
@click.argument("name")
@connection_options
def pause(name: str, **kwargs: Any) -> None:
    """Stop inserting the jobs of the cron entry NAME from the next tick."""
    _change(_connection(kwargs), lambda app: app.pause_cron_sync(name), "paused")


@click.command(name="resume")
@click.argument("name")
@connection_options
def resume(name: str, **kwargs: Any) -> None:
    """Run the paused cron entry NAME again from the next tick."""
    _change(_connection(kwargs), lambda app: app.resume_cron_sync(name), "resumed")


@click.command(name="delete")
@click.argument("name")
@connection_options
def delete(name: str, **kwargs: Any) -> None:
    """Delete the stored cron entry NAME (an entry also in code runs as the code says again)."""

    def action(app: Conveyor) -> None:
        app.delete_cron_sync(name)

    _change(_connection(kwargs), action, name)


COMMANDS = (add, update, pause, resume, delete)
