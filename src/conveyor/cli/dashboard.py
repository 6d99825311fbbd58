"""``conveyor dashboard``: serve the web dashboard of a database (needs ``conveyor[web]``)."""

from __future__ import annotations

import click

from conveyor.cli.common import build_app, database_options


@click.command()
@database_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option(
    "--token",
    envvar="CONVEYOR_DASHBOARD_TOKEN",
    default=None,
    help="Require this token (or $CONVEYOR_DASHBOARD_TOKEN): the login page asks for it once, "
    "scripts send 'Authorization: Bearer TOKEN'.",
)
@click.option(
    "--basic-auth",
    envvar="CONVEYOR_DASHBOARD_BASIC_AUTH",
    default=None,
    metavar="USER:PASSWORD",
    help="Require HTTP basic auth (or $CONVEYOR_DASHBOARD_BASIC_AUTH).",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing (no actions).")
@click.option(
    "--secret",
    envvar="CONVEYOR_DASHBOARD_SECRET",
    default=None,
    help="Key that signs CSRF tokens and login cookies (or $CONVEYOR_DASHBOARD_SECRET; "
    "default: random, so a restart signs browsers out).",
)
@click.option("--root-path", default="", help="URL prefix a reverse proxy serves the dashboard under.")
def dashboard(
    dsn: str | None,
    prefix: str | None,
    host: str,
    port: int,
    token: str | None,
    basic_auth: str | None,
    read_only: bool,
    secret: str | None,
    root_path: str,
) -> None:
    """Serve the web dashboard: queues, jobs, nodes and cron, with actions unless --read-only.

    Off a loopback address it refuses to start without --token or --basic-auth."""
    try:
        from conveyor.web.dashboard.security import InsecureDashboardError, check_exposure
        from conveyor.web.dashboard.server import server
    except ImportError as exc:  # the web extra is missing
        raise click.ClickException(f"the dashboard needs conveyor[web]: {exc}") from None
    credentials = None
    if basic_auth is not None:
        user, sep, password = basic_auth.partition(":")
        if not sep or not user or not password:
            raise click.BadParameter("must be USER:PASSWORD", param_hint="--basic-auth")
        credentials = (user, password)
    if root_path and (not root_path.startswith("/") or root_path.endswith("/")):
        raise click.BadParameter(
            "must start with '/' and not end with one, e.g. /jobs", param_hint="--root-path"
        )
    try:
        check_exposure(host, authenticated=token is not None or credentials is not None)
    except InsecureDashboardError as exc:
        click.echo(f"Error: {exc}", err=True)  # one line, as a refusal to start should be
        raise SystemExit(2) from None
    app = build_app(dsn, prefix)
    options = {"token": token, "basic_auth": credentials, "read_only": read_only, "secret": secret}
    try:
        found = server(app, host=host, port=port, root_path=root_path, **options)
    except Exception as exc:
        raise click.UsageError(str(exc)) from None
    where = f"http://{host if ':' not in host else f'[{host}]'}:{port}{root_path}/"
    mode = "read-only" if read_only else "actions on"
    click.echo(f"Conveyor dashboard on {where} ({mode}); Ctrl-C stops it")
    found.run()
