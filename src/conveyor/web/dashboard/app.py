"""``dashboard_app``: the dashboard as an ASGI app to mount under any prefix, or to serve alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from conveyor.app import Conveyor
from conveyor.cron import CronEntry
from conveyor.errors import ValidationError
from conveyor.web.dashboard import actions, pages
from conveyor.web.dashboard.context import Dashboard, environment
from conveyor.web.dashboard.security import Access, AuthHook, Guard

STATIC = Path(__file__).parent / "static"


def dashboard_app(
    conveyor: Conveyor,
    *,
    auth: AuthHook | None = None,
    basic_auth: tuple[str, str] | None = None,
    token: str | None = None,
    read_only: bool = False,
    secret: str | bytes | None = None,
    crontab: list[CronEntry] | Callable[[], list[CronEntry]] | None = None,
    refresh: float = 5.0,
    title: str = "Conveyor",
) -> Starlette:
    """The dashboard of ``conveyor``'s database, as an ASGI app.

    Mount it where you like (``api.mount("/jobs", dashboard_app(app, auth=is_staff))``); links
    follow the mount's prefix. Authentication: ``auth`` (a callable taking the Starlette request and
    returning True to let it in, sync or async; it may raise an ``HTTPException`` of its own),
    ``basic_auth=(user, password)``, or ``token`` (sent as ``Authorization: Bearer``, or typed once
    on the login page); any configured one admits a request. With none, the dashboard answers only
    requests that reached it on a loopback address. ``read_only`` hides every action and refuses
    them (403). ``secret`` signs the CSRF tokens and login cookies: give the same one to every
    process serving the dashboard (default: random per process). The cron page lists the entries the
    live nodes announce in their heartbeats (``conveyor.fleet_crontab()``: no need to import the job
    modules here), then those of ``crontab`` that none announces (default: ``conveyor.crontab()``,
    this app's own configured ones). ``refresh``: seconds
    between live updates of an open page (0: off).
    """
    if not isinstance(conveyor, Conveyor):
        raise ValidationError("conveyor", conveyor, "must be a Conveyor app")
    if isinstance(refresh, bool) or not isinstance(refresh, int | float) or not 0 <= refresh <= 3600:
        raise ValidationError("refresh", refresh, "must be a number of seconds from 0 to 3600")
    if not isinstance(read_only, bool):
        raise ValidationError("read_only", read_only, "must be True or False")
    access = Access.build(auth=auth, basic_auth=basic_auth, token=token, secret=secret)
    entries: Callable[[], list[CronEntry]]
    if crontab is None:
        entries = conveyor.crontab
    elif callable(crontab):
        entries = crontab
    else:
        fixed = list(crontab)
        if not all(isinstance(entry, CronEntry) for entry in fixed):
            raise ValidationError("crontab", crontab, "must hold CronEntry values")
        entries = lambda: fixed  # noqa: E731
    templates = Jinja2Templates(env=environment())
    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/jobs", pages.jobs, name="jobs"),
        Route("/jobs/{job_id}", pages.job, name="job"),
        Route("/nodes", pages.nodes, name="nodes"),
        Route("/cron", pages.cron, name="cron"),
        Route("/actions/jobs", actions.job_action, methods=["POST"], name="job_action"),
        Route("/actions/queues", actions.queue_action, methods=["POST"], name="queue_action"),
        Route("/actions/cron", actions.cron_action, methods=["POST"], name="cron_action"),
        Route("/login", actions.login_page, methods=["GET"], name="login_page"),
        Route("/login", actions.login, methods=["POST"], name="login"),
        Route("/logout", actions.logout, methods=["POST"], name="logout"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, access=access, open_paths=("/static/", "/login"), login="/login")],
    )
    app.state.dashboard = Dashboard(
        conveyor=conveyor,
        access=access,
        read_only=read_only,
        templates=templates,
        refresh=float(refresh),
        title=title,
        crontab=entries,
    )
    return app
