"""What every page shares: the dashboard's settings and how a page is rendered.

Templates are Jinja2 with autoescaping on for every template: args, meta, errors, tags and worker
names are data from users and other clients, and are never marked safe. Links are built from the
route names and the request's ``root_path``, so the dashboard works under any prefix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jinja2
import orjson
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from conveyor._options import QUEUE_PATTERN
from conveyor.app import Conveyor
from conveyor.cron import CronEntry
from conveyor.encryption import shown_args
from conveyor.web.dashboard.security import Access, csrf_cookie, set_csrf_cookie

#: Notices an action leaves for the page it returns to: only these texts are ever shown.
NOTICES = {
    "cancel": "Cancelled {n} job(s).",
    "retry": "Retried {n} job(s).",
    "delete": "Deleted {n} job(s).",
    "pause": "Pause sent for queue {subject}.",
    "resume": "Resume sent for queue {subject}.",
    "scale": "Scale sent for queue {subject}.",
    "cron-pause": "Cron entry {subject} paused from the next tick.",
    "cron-resume": "Cron entry {subject} resumed from the next tick.",
    "cron-delete": "Stored cron entry {subject} deleted.",
}


@dataclass(frozen=True, slots=True)
class Dashboard:
    """One dashboard app: the Conveyor app it shows and its settings."""

    conveyor: Conveyor
    access: Access
    read_only: bool
    templates: Jinja2Templates
    #: Seconds between live refreshes of a page (0: none).
    refresh: float
    title: str
    crontab: Callable[[], list[CronEntry]]


@functools.cache
def environment() -> jinja2.Environment:
    """The dashboards' template environment, one per process: its settings, filters and globals are
    the same for every dashboard, and an environment compiles each template on first use (10-40 ms
    of CPU a template), which a new one per dashboard did again for every app."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("conveyor.web.dashboard", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = pretty_json
    env.filters["compact"] = compact_json
    env.filters["when"] = when
    env.filters["ago"] = ago
    env.filters["at"] = time_at
    env.filters["since"] = time_ago
    env.globals["path_for"] = path_for
    # Encrypted args are shown as such, never as their ciphertext (conveyor.encryption).
    env.globals["args_of"] = lambda job: shown_args(job.args, job.meta)
    return env


def pretty_json(value: Any) -> str:
    """Indented JSON for display (escaped by the template like any text)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def compact_json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


def _utc(value: datetime) -> datetime:
    """``value`` in UTC; a naive value is UTC already (as Oban stores every time)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def when(value: datetime | None) -> str:
    """``value`` as text that names its zone: ``2026-11-28 12:00:05 UTC``."""
    if value is None:
        return "—"
    return _utc(value).strftime("%Y-%m-%d %H:%M:%S UTC")


def machine_time(value: datetime) -> str:
    """``value`` as ISO 8601 in UTC with a ``Z``, for a ``<time datetime>`` (scripts read it)."""
    return _utc(value).isoformat().replace("+00:00", "Z")


def _instant(value: datetime | str | None) -> datetime | None:
    """A time as shown: a datetime, or the ISO text another client stored (an error's ``at``)."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return value if isinstance(value, datetime) else None


def time_at(value: datetime | str | None) -> Markup:
    """``<time datetime="...Z">2026-11-28 12:00:05 UTC</time>``; text that is no time stays as it is."""
    found = _instant(value)
    if found is None:
        return Markup("—") if value is None else escape(str(value))
    return Markup('<time datetime="{}">{}</time>').format(machine_time(found), when(found))


def time_ago(value: datetime | None) -> Markup:
    """``<time datetime="...Z" title="2026-11-28 12:00:05 UTC">12s ago</time>``."""
    if value is None:
        return Markup("—")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        machine_time(value), when(value), ago(_utc(value))
    )


def ago(value: datetime | None, now: datetime | None = None) -> str:
    """``value`` relative to now: ``12s ago``, ``in 3m``."""
    if value is None:
        return "—"
    seconds = ((now or datetime.now(UTC)) - value).total_seconds()
    span = abs(seconds)
    for size, unit in ((86_400, "d"), (3_600, "h"), (60, "m")):
        if span >= size:
            text = f"{int(span // size)}{unit}"
            break
    else:
        text = f"{int(span)}s"
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def route_path(request: Request, name: str, /, **params: Any) -> str:
    """The path of a route of this dashboard, behind the prefix it is mounted at. Found in the
    dashboard's own routes (an outer router may have named the mount anything) and prefixed with the
    request's ``root_path`` (set by ``Mount``, an ASGI server's ``--root-path``, or a dispatcher)."""
    found = request.app.url_path_for(name, **{k: str(v) for k, v in params.items()})
    return f"{request.scope.get('root_path', '')}{found}"


@jinja2.pass_context
def path_for(context: Mapping[str, Any], name: str, /, **params: Any) -> str:
    return route_path(context["request"], name, **params)


def render(
    dash: Dashboard,
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    status: int = 200,
) -> Response:
    """A page, with what every page shows (navigation, read-only mode, the CSRF token) and the
    session's CSRF cookie set when the browser has none yet."""
    cookie, new = csrf_cookie(request)
    done = request.query_params.get("done")
    notice = None
    if done in NOTICES:
        n = request.query_params.get("n", "0")
        subject = request.query_params.get("subject", "")
        subject = subject if QUEUE_PATTERN.fullmatch(subject) else "?"
        notice = NOTICES[done].format(n=n if n.isdigit() else "0", subject=subject)
    response = dash.templates.TemplateResponse(
        request,
        template,
        {
            "title": dash.title,
            "read_only": dash.read_only,
            "csrf_token": dash.access.csrf_token(cookie),
            "refresh": dash.refresh,
            "notice": notice,
            "token_login": dash.access.token is not None,
            "now": datetime.now(UTC),
            **context,
        },
        status_code=status,
    )
    if new:
        set_csrf_cookie(response, request, cookie)
    return response


def dashboard_of(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found
