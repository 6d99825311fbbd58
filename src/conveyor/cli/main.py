"""``conveyor``: schema management, ``start`` (a node), queue control and job commands.

Every failure ends as one line on standard error (``Error: ...``) and a non-zero exit status; the
traceback is shown only with ``conveyor --debug COMMAND``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from conveyor.engine.base import SchemaReport
    from conveyor.settings import Settings

#: The commands defined in other modules, by name: "module:attribute". Each module is imported when
#: its command runs (or ``--help`` lists it), so a command pays only for the imports it uses:
#: ``conveyor start`` loads neither rich nor the other commands, ``conveyor --version`` nothing of
#: Conveyor's. A subprocess that runs one command starts sooner (the CLI tests run hundreds).
LAZY_COMMANDS = {
    "start": "conveyor.cli.start:start",
    "queues": "conveyor.cli.fleet:queues",
    "pause": "conveyor.cli.fleet:pause",
    "resume": "conveyor.cli.fleet:resume",
    "scale": "conveyor.cli.fleet:scale",
    "stop": "conveyor.cli.fleet:stop",
    "jobs": "conveyor.cli.jobs:jobs",
    "job": "conveyor.cli.jobs:job_detail",
    "cancel": "conveyor.cli.bulk:cancel",
    "retry": "conveyor.cli.bulk:retry",
    "delete": "conveyor.cli.bulk:delete",
    "signal": "conveyor.cli.jobs:signal_job",
    "wait": "conveyor.cli.jobs:wait_job",
    "prune": "conveyor.cli.prune:prune",
    "stats": "conveyor.cli.stats:stats",
    "cron": "conveyor.cli.cron:cron",
    "declare": "conveyor.cli.declare:declare",
    "undeclare": "conveyor.cli.declare:undeclare",
    "declared": "conveyor.cli.declare:declared",
    "workflow": "conveyor.cli.workflows:workflow",
    "dashboard": "conveyor.cli.dashboard:dashboard",
}


DSN_OPTION = click.option(
    "--dsn",
    envvar="CONVEYOR_DATABASE_URL",
    default=None,
    help="Database URL, e.g. postgresql://user@localhost/app or sqlite:///jobs.db "
    "(or $CONVEYOR_DATABASE_URL; default: sqlite:///conveyor.db in the working directory).",
)
PREFIX_OPTION = click.option(
    "--prefix",
    default=None,
    help="PostgreSQL schema that holds the Oban tables (or $CONVEYOR_PREFIX; default: public).",
)
CONFIG_OPTION = click.option(
    "--config",
    "config_file",
    default=None,
    help="Config file (TOML); default: conveyor.toml, else [tool.conveyor] in pyproject.toml.",
)


def schema_settings(dsn: str | None, prefix: str | None, config_file: str | None) -> Settings:
    """The settings the schema commands act on: options, then $CONVEYOR_*, then the config file,
    as for every other command (``database_url`` None: the default SQLite file)."""
    from conveyor.errors import ConveyorError
    from conveyor.settings import load_settings

    try:
        return load_settings({"database_url": dsn, "prefix": prefix}, config_file=config_file)
    except ConveyorError as exc:
        raise click.UsageError(str(exc)) from None


def schema_target(dsn: str | None, prefix: str | None, config_file: str | None) -> tuple[str | None, str]:
    """The database URL and prefix the schema commands act on (see ``schema_settings``)."""
    settings = schema_settings(dsn, prefix, config_file)
    return settings.database_url, settings.prefix


class ConveyorGroup(click.Group):
    """Turns any exception a command lets through into one line and exit status 1 (click's own
    usage errors keep their status 2), unless ``--debug`` asks for the traceback; finds the commands
    of ``LAZY_COMMANDS`` when they are asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            module, _, attribute = LAZY_COMMANDS[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command) and command.name == cmd_name, LAZY_COMMANDS[cmd_name]
            self.add_command(command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            from conveyor.cli.common import describe

            raise click.ClickException(describe(exc)) from None


@click.group(cls=ConveyorGroup)
@click.version_option(package_name="conveyor")
@click.option("--debug", is_flag=True, help="Show the full traceback when a command fails.")
def main(debug: bool) -> None:
    """Conveyor: jobs stored in your database."""


async def _migrate(settings: Settings) -> int:
    """Migrate as the nodes would connect: behind a transaction pooler (``pooler``, declared or
    found) the engine migrates on ``listen_url``, the direct URL, or refuses (``PostgresEngine.install``)."""
    from conveyor.engine.urls import engine_from_url

    engine = engine_from_url(
        settings.database_url,
        prefix=settings.prefix,
        pool_size=1,
        pooler=settings.pooler,
        listen_url=settings.listen_url,
    )
    await engine.open()
    try:
        return await engine.install()
    finally:
        await engine.close()


def _recreated(state: SchemaReport) -> str:
    return f"recreated {', '.join(state.missing)}" if state.missing else ""


@main.command()
@DSN_OPTION
@PREFIX_OPTION
@CONFIG_OPTION
@click.option("--print-sql", is_flag=True, help="Print the SQL instead of running it.")
def install(dsn: str | None, prefix: str | None, config_file: str | None, print_sql: bool) -> None:
    """Create the schema, or bring it up to date. Safe to run again."""
    from conveyor.cli.common import inspect_database, run_blocking
    from conveyor.engine.urls import install_sql

    settings = schema_settings(dsn, prefix, config_file)
    dsn, prefix = settings.database_url, settings.prefix
    if print_sql:
        click.echo(install_sql(dsn, prefix))
        return
    state = inspect_database(dsn, prefix, create=True)
    before, after = state.version, run_blocking(_migrate(settings))
    if before == after and state.missing:
        click.echo(f"schema {prefix!r} repaired at version {after}: {_recreated(state)}")
    elif before == after:
        click.echo(f"schema {prefix!r} already at version {after}")
    else:
        click.echo(f"schema {prefix!r} installed at version {after} (was {before or 'absent'})")


@main.command()
@DSN_OPTION
@PREFIX_OPTION
@CONFIG_OPTION
@click.option("--dry-run", is_flag=True, help="Print which migrations would run, and how, changing nothing.")
def migrate(dsn: str | None, prefix: str | None, config_file: str | None, dry_run: bool) -> None:
    """Apply the migrations that are missing (same as install on an existing schema)."""
    from conveyor.cli.common import inspect_database, run_blocking, schema_engine

    settings = schema_settings(dsn, prefix, config_file)
    dsn, prefix = settings.database_url, settings.prefix
    state = inspect_database(dsn, prefix, create=not dry_run)
    if dry_run:
        click.echo(run_blocking(schema_engine(dsn, prefix).migration_plan()))
        return
    if state.missing:
        click.echo(
            f"schema {prefix!r} at version {state.version} lacks {', '.join(state.missing)}: recreating them"
        )
    elif state.version != state.latest:
        count = state.latest - (state.version or 0)
        click.echo(
            f"schema {prefix!r}: version {state.version or 'absent'} → {state.latest}: "
            f"applying {count} migration{'s' if count != 1 else ''}"
        )
    after = run_blocking(_migrate(settings))
    if state.version == after and not state.missing:
        click.echo(f"schema {prefix!r} already at version {after}")
    else:
        click.echo(f"schema {prefix!r} now at version {after}")


async def _uninstall(dsn: str | None, prefix: str) -> None:
    from conveyor.engine.urls import engine_from_url

    engine = engine_from_url(dsn, prefix=prefix, pool_size=1)
    await engine.open()
    try:
        await engine.uninstall()
    finally:
        await engine.close()


@main.command()
@DSN_OPTION
@PREFIX_OPTION
@CONFIG_OPTION
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def uninstall(dsn: str | None, prefix: str | None, config_file: str | None, yes: bool) -> None:
    """Drop the job tables and every job in them."""
    from conveyor.cli.common import inspect_database, run_blocking

    dsn, prefix = schema_target(dsn, prefix, config_file)
    inspect_database(dsn, prefix)  # the database answers (a SQLite file exists) before we ask
    if not yes:
        click.confirm(f"Drop oban_jobs and every Conveyor table in {prefix!r}?", abort=True)
    run_blocking(_uninstall(dsn, prefix))
    click.echo(f"schema objects removed from {prefix!r}")
