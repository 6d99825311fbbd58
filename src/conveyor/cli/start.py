"""``conveyor start``: run a node from the command line until SIGTERM or SIGINT.

The node is built from the options and the configuration (``Conveyor.from_config``), or is the
user's own app (``--app module:attr``: its jobs, telemetry handlers, crontab and settings), to which
only the options about running this process's node apply (see ``app_ref.APP_CHOSEN`` for the
refused ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import click

from conveyor.app import Conveyor
from conveyor.cli.app_ref import load_app, refuse_app_chosen
from conveyor.cli.common import require_schema
from conveyor.cli.logs import configure_logging
from conveyor.errors import ConveyorError, one_line
from conveyor.settings import LOG_FORMATS, LOG_LEVELS, with_overrides
from conveyor.testing.modes import effective_mode

log = logging.getLogger("conveyor.cli")

#: The exit status of a node that stopped but left threads running: a thread job still running at
#: the end of ``shutdown_grace`` (its job was given back), or a thread a job started and never ended.
EXIT_THREADS_LEFT = 3
#: Seconds the stopped node waits for its threads to end before leaving them behind.
THREADS_WAIT = 1.0


async def run_node(app: Conveyor) -> tuple[int, ...]:
    """Start the node, wait for SIGTERM/SIGINT, then shut down gracefully. Return the ids of the
    jobs still running at the shutdown deadline (given back to run again)."""
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
    node = app.node
    await app.stop()
    return node.abandoned if node is not None else ()


def exit_if_threads_remain(abandoned: Sequence[int], wait: float = THREADS_WAIT) -> None:
    """End the process now if threads that would keep it alive are still running.

    A thread cannot be stopped from outside: a thread job deaf to its expiry, or a non-daemon thread
    a job started, would keep the interpreter waiting at exit (it joins such threads, and the pool's
    workers) until someone sends SIGKILL. The jobs were given back already and every ack written, so
    after ``wait`` seconds for them to end, say which jobs and threads were left behind, flush the
    logs and leave with ``EXIT_THREADS_LEFT``."""
    deadline = time.monotonic() + wait
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    left = [t.name for t in threading.enumerate() if t is not current and not t.daemon and t.is_alive()]
    if not left:
        return
    jobs = ", ".join(str(job_id) for job_id in abandoned) or "none"
    log.error(
        "exiting with %d threads still running after the shutdown (%s); abandoned jobs: %s "
        "(given back: they run again elsewhere)",
        len(left),
        ", ".join(left),
        jobs,
    )
    logging.shutdown()  # flush every handler: os._exit skips the interpreter's cleanup
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_THREADS_LEFT)


@click.command()
@click.option(
    "--app",
    "app_ref",
    default=None,
    metavar="MODULE:ATTR",
    help="Run your own Conveyor (or a function returning one), e.g. myapp.worker:app.",
)
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
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default=None,
    help="Logging level (or $CONVEYOR_LOG_LEVEL; default: INFO).",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS, case_sensitive=False),
    default=None,
    help="text, or json: one JSON object per line (or $CONVEYOR_LOG_FORMAT; default: text).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (needs conveyor[prometheus]).",
)
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True, help="Address the metrics endpoint listens on."
)
def start(
    app_ref: str | None,
    dsn: str | None,
    prefix: str | None,
    queues: str | None,
    imports: tuple[str, ...],
    node: str | None,
    poll_interval: float | None,
    no_notifications: bool,
    shutdown_grace: float | None,
    config_file: str | None,
    log_level: str | None,
    log_format: str | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run a node: fetch and execute jobs of the given queues until stopped."""
    if "" not in sys.path:
        sys.path.insert(0, "")  # let --import and --app find modules in the working directory
    settings: dict[str, Any] = {
        "queues": queues,
        "node": node,
        "poll_interval": poll_interval,
        "notifications": False if no_notifications else None,
        "shutdown_grace": shutdown_grace,
        "log_level": log_level,
        "log_format": log_format,
    }
    if app_ref is not None:
        chosen = {"dsn": dsn, "prefix": prefix, "config_file": config_file}
        app = _user_app(app_ref, settings, imports, chosen)
    else:
        try:
            app = Conveyor.from_config(
                dsn, config_file=config_file, prefix=prefix, imports=imports or None, **settings
            )
        except ConveyorError as exc:
            raise click.UsageError(str(exc)) from None
    if not configure_logging(app.settings.log_level, app.settings.log_format) and (log_level or log_format):
        click.echo("logging was set up by --app's module: --log-level and --log-format ignored", err=True)
    if not app.settings.queues:
        where = "--queues default:10, or give your app queues" if app_ref else "--queues default:10"
        raise click.UsageError(f"no queues to run: pass {where} (or set CONVEYOR_QUEUES)")
    if app_ref is None or app._binding.owns_engine:
        # The database answers and holds the schema: checked on one quick connection, before the
        # pools. (An app built on an engine object of its own is checked when it starts.)
        # A node waits a while for a server with no free connection slot, as its engine does.
        require_schema(app.settings.database_url, app.settings.prefix, patient=True)
    for module in app.settings.imports:  # the node imports them again (from the module cache)
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as exc:
            detail = f": {one_line(str(exc))}" if str(exc) else ""
            raise click.ClickException(f"cannot import {module!r}: {type(exc).__name__}{detail}") from None
    server = None if metrics_port is None else serve_metrics(app, metrics_host, metrics_port)
    try:
        abandoned = asyncio.run(run_node(app))
    finally:
        if server is not None:
            server.shutdown()
    exit_if_threads_remain(abandoned)


def serve_metrics(app: Conveyor, host: str, port: int) -> Any:
    """Start the app's Prometheus endpoint; a missing extra or a taken port is one clear line."""
    try:
        from conveyor.contrib.prometheus import metrics
    except ImportError as exc:
        raise click.ClickException(
            f"--metrics-port needs prometheus_client ({exc}): pip install 'conveyor[prometheus]'"
        ) from None
    try:
        server = metrics(app).serve(port, host)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise click.ClickException(f"--metrics-port: cannot listen on {host}:{port}: {reason}") from None
    click.echo(f"metrics at http://{host}:{server.server_port}/metrics", err=True)
    return server


def _user_app(
    reference: str, settings: dict[str, Any], imports: tuple[str, ...], refused: dict[str, str | None]
) -> Conveyor:
    """The app ``--app`` names, with this command's node options applied to its settings."""
    refuse_app_chosen(reference, refused)
    app = load_app(reference)
    if effective_mode(app.testing) != "disabled":
        raise click.ClickException(
            f"--app {reference}: the app is in testing mode {app.testing!r}, which runs no node"
        )
    changes = {**settings, "imports": (*app.settings.imports, *imports) if imports else None}
    try:
        app.settings = with_overrides(app.settings, changes)
    except ConveyorError as exc:
        raise click.UsageError(str(exc)) from None
    return app
