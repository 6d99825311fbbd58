"""Serving the dashboard alone (``conveyor dashboard``): uvicorn, the loopback rule checked first."""

from __future__ import annotations

from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from conveyor.app import Conveyor
from conveyor.web.dashboard.app import dashboard_app
from conveyor.web.dashboard.security import check_exposure
from conveyor.web.starlette import conveyor_lifespan


def standalone_app(conveyor: Conveyor, **options: Any) -> Starlette:
    """The dashboard with a lifespan that opens ``conveyor`` when the server starts (a database
    that cannot be reached fails the start) and closes it at shutdown."""
    dashboard = dashboard_app(conveyor, **options)
    return Starlette(
        routes=[Mount("", app=dashboard)],
        lifespan=conveyor_lifespan(conveyor, make_default=False),
    )


def authenticated(options: dict[str, Any]) -> bool:
    return any(options.get(name) is not None for name in ("auth", "basic_auth", "token"))


def server(
    conveyor: Conveyor, *, host: str = "127.0.0.1", port: int = 8765, root_path: str = "", **options: Any
) -> uvicorn.Server:
    """A uvicorn server for the dashboard; ``InsecureDashboardError`` for a non-loopback ``host``
    without authentication."""
    check_exposure(host, authenticated=authenticated(options))
    config = uvicorn.Config(
        standalone_app(conveyor, **options),
        host=host,
        port=port,
        root_path=root_path,
        log_level="warning",
        access_log=False,
        server_header=False,
    )
    return uvicorn.Server(config)


def serve(conveyor: Conveyor, **options: Any) -> None:
    """Serve the dashboard until interrupted (see ``server``)."""
    server(conveyor, **options).run()
