"""``conveyor start``: run a node from the command line until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
import sys
from typing import Any

import click

from conveyor.app import Conveyor
from conveyor.cli.common import require_schema
from conveyor.engine.postgres.connect import one_line
from conveyor.errors import ConveyorError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


async def run_node(app: Conveyor) -> None:
    """Start the node, wait for SIGTERM/SIGINT, then shut down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await app.start()
    click.echo(
        f"conveyor node {app.settings.node} running queues "
        + ", ".join(f"{q.name}:{q.limit}" for q in app.settings.queues),
        err=True,
    )
    await stop.wait()
    click.echo("stopping: finishing running jobs...", err=True)
    await app.stop()


@click.command()
@click.option("--dsn", envvar="CONVEYOR_DATABASE_URL", help="Database URL (or $CONVEYOR_DATABASE_URL).")
@click.option("--prefix", default=None, help="PostgreSQL schema holding the tables.")
@click.option("--queues", "-q", default=None, help="Queues and limits, e.g. default:10,mail:5.")
@click.option("--import", "imports", multiple=True, help="Module or package whose jobs to load (repeatable).")
@click.option("--node", default=None, help="Node name (default: host-pid-random, unique per process).")
@click.option("--poll-interval", type=float, default=None, help="Seconds between polls.")
@click.option("--no-notifications", is_flag=True, help="Poll only; do not LISTEN.")
@click.option("--shutdown-grace", type=float, default=None, help="Seconds for running jobs at shutdown.")
@click.option("--config", "config_file", default=None, help="Config file (TOML).")
@click.option(
    "--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="INFO", show_default=True
)
def start(
    dsn: str | None,
    prefix: str | None,
    queues: str | None,
    imports: tuple[str, ...],
    node: str | None,
    poll_interval: float | None,
    no_notifications: bool,
    shutdown_grace: float | None,
    config_file: str | None,
    log_level: str,
) -> None:
    """Run a node: fetch and execute jobs of the given queues until stopped."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if "" not in sys.path:
        sys.path.insert(0, "")  # let --import find modules in the working directory
    settings: dict[str, Any] = {
        "prefix": prefix,
        "queues": queues,
        "imports": imports or None,
        "node": node,
        "poll_interval": poll_interval,
        "notifications": False if no_notifications else None,
        "shutdown_grace": shutdown_grace,
    }
    try:
        app = Conveyor.from_config(dsn, config_file=config_file, **settings)
    except ConveyorError as exc:
        raise click.UsageError(str(exc)) from None
    if not app.settings.queues:
        raise click.UsageError("no queues to run: pass --queues default:10 (or set CONVEYOR_QUEUES)")
    # The database answers and holds the schema: checked on one quick connection, before the pools.
    require_schema(app.settings.database_url, app.settings.prefix)
    for module in app.settings.imports:  # the node imports them again (from the module cache)
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as exc:
            detail = f": {one_line(str(exc))}" if str(exc) else ""
            raise click.ClickException(f"cannot import {module!r}: {type(exc).__name__}{detail}") from None
    asyncio.run(run_node(app))
