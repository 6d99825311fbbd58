"""The actions: cancel, retry or delete jobs (picked, or every job a filter matches), pause, resume
or scale a queue, pause, resume or delete a cron entry (dynamic cron), and the token login. Each is
a POST carrying the session's CSRF token; a read-only dashboard refuses them all (403) before
reading anything else."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from conveyor import _options as opt
from conveyor.errors import ValidationError
from conveyor.filters import JobFilter
from conveyor.job import CANCELLABLE_STATES, RETRYABLE_STATES, JobState
from conveyor.web.dashboard import counts
from conveyor.web.dashboard.context import Dashboard, dashboard_of, render, route_path
from conveyor.web.dashboard.querying import parse_ids, parse_query
from conveyor.web.dashboard.security import SESSION_COOKIE, cookie_path, csrf_ok, first, read_form

JOB_ACTIONS = ("cancel", "retry", "delete")
QUEUE_ACTIONS = ("pause", "resume", "scale")
CRON_ACTIONS = ("pause", "resume", "delete")
#: The states each action can change a job from.
ACTS_ON = {
    "cancel": frozenset(CANCELLABLE_STATES),
    "retry": frozenset(RETRYABLE_STATES),
    "delete": frozenset(set(JobState) - {JobState.EXECUTING}),
}
MAX_LIMIT = 10_000


async def _accepted(
    dash: Dashboard, request: Request, *, action: bool = True
) -> dict[str, list[str]] | Response:
    """The form of an action, or the refusal: read-only (403), no valid CSRF token (403), a body
    that is no form (400)."""
    if action and dash.read_only:
        return PlainTextResponse("this dashboard is read-only", status_code=403)
    try:
        form = await read_form(request)
    except ValidationError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    if not csrf_ok(dash.access, request, form):
        return PlainTextResponse(
            "missing or invalid CSRF token: reload the page and try again", status_code=403
        )
    return form


def safe_next(request: Request, form: Mapping[str, list[str]], fallback: str) -> str:
    """The form's ``next`` when it is a path of this dashboard, else ``fallback``: an action never
    sends the browser elsewhere."""
    base = request.scope.get("root_path", "")
    target = str(first(form, "next", "") or "")
    parts = urlsplit(target)
    inside = (
        target.startswith(f"{base}/")
        and not target.startswith("//")
        and "\\" not in target
        and not any(ord(c) < 32 for c in target)
        and not parts.scheme
        and not parts.netloc
    )
    return target if inside else fallback


def back_to(request: Request, form: Mapping[str, list[str]], fallback: str, **done: str) -> RedirectResponse:
    """A 303 to the page the action came from, telling what was done."""
    parts = urlsplit(safe_next(request, form, fallback))
    path, query = parts.path, parts.query
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k not in ("done", "n", "subject")]
    kept += list(done.items())
    return RedirectResponse(f"{path}?{urlencode(kept)}", status_code=303)


def _eligible(criteria: JobFilter, action: str) -> JobFilter | None:
    """``criteria`` narrowed to the states ``action`` changes, or None when none is left."""
    states = [s for s in (criteria.states or tuple(JobState)) if s in ACTS_ON[action]]
    if not states:
        return None
    return dataclasses.replace(criteria, states=tuple(states), limit=None, before_id=None)


def _unknown(actions: tuple[str, ...]) -> Response:
    return PlainTextResponse(f"unknown action; expected one of {', '.join(actions)}", status_code=400)


async def job_action(request: Request) -> Response:
    dash = dashboard_of(request)
    form = await _accepted(dash, request)
    if isinstance(form, Response):
        return form
    action = first(form, "action")
    if action not in JOB_ACTIONS:
        return _unknown(JOB_ACTIONS)
    ids, problems = parse_ids(form.get("ids", []))
    query = parse_query(form)
    if problems or query.problems:
        return PlainTextResponse("; ".join([*problems, *query.problems]), status_code=400)
    picked = bool(form.get("ids"))
    if picked and not ids:
        return PlainTextResponse("no job picked", status_code=400)
    criteria = JobFilter(ids=tuple(ids)) if picked else query.criteria(paged=False)
    target = _eligible(criteria, action)
    jobs_page = route_path(request, "jobs")
    if first(form, "confirmed") != "yes":
        matching = (
            counts.Matching(0) if target is None else await counts.count_matching(dash.conveyor, target)
        )
        return render(
            dash,
            request,
            "confirm.html",
            {
                "page": "jobs",
                "action": action,
                "matching": matching,
                "picked": ids,
                "query": query,
                "filter_params": [] if picked else query.params(paged=False),
                "next_path": safe_next(request, form, jobs_page),
            },
        )
    done: list[int] = []
    if target is not None:
        done = await getattr(dash.conveyor, f"{action}_jobs")(target)
    return back_to(request, form, jobs_page, done=action, n=str(len(done)))


async def queue_action(request: Request) -> Response:
    dash = dashboard_of(request)
    form = await _accepted(dash, request)
    if isinstance(form, Response):
        return form
    action, queue = first(form, "action"), first(form, "queue", "")
    if action not in QUEUE_ACTIONS:
        return _unknown(QUEUE_ACTIONS)
    try:
        opt.check_queue(queue)
    except ValidationError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    if action == "scale":
        raw = str(first(form, "limit", "")).strip()
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            return PlainTextResponse(f"limit must be a whole number from 1 to {MAX_LIMIT}", status_code=400)
        await dash.conveyor.scale_queue(queue, int(raw))
    elif action == "pause":
        await dash.conveyor.pause_queue(queue)
    else:
        await dash.conveyor.resume_queue(queue)
    return back_to(request, form, route_path(request, "overview"), done=action, subject=queue)


async def cron_action(request: Request) -> Response:
    """Pause, resume or delete a cron entry through ``Conveyor.pause_cron`` and the others (an entry
    of the app's crontab is stored first, paused); the leader acts from its next tick."""
    dash = dashboard_of(request)
    form = await _accepted(dash, request)
    if isinstance(form, Response):
        return form
    action, name = first(form, "action"), str(first(form, "name", ""))
    if action not in CRON_ACTIONS:
        return _unknown(CRON_ACTIONS)
    change = {"pause": dash.conveyor.pause_cron, "resume": dash.conveyor.resume_cron}.get(action)
    try:
        await (dash.conveyor.delete_cron(name) if change is None else change(name))
    except ValidationError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    return back_to(request, form, route_path(request, "cron"), done=f"cron-{action}", subject=name)


async def login_page(request: Request) -> Response:
    dash = dashboard_of(request)
    if dash.access.token is None:
        return RedirectResponse(route_path(request, "overview"), status_code=303)
    return render(dash, request, "login.html", {"page": "login", "failed": False})


async def login(request: Request) -> Response:
    dash = dashboard_of(request)
    form = await _accepted(dash, request, action=False)
    if isinstance(form, Response):
        return form
    presented = str(first(form, "token", ""))
    if dash.access.token is None or not dash.access.token_matches(presented):
        return render(dash, request, "login.html", {"page": "login", "failed": True}, status=401)
    response = RedirectResponse(route_path(request, "overview"), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        dash.access.session_value(),
        path=cookie_path(request),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    dash = dashboard_of(request)
    form = await _accepted(dash, request, action=False)
    if isinstance(form, Response):
        return form
    response = RedirectResponse(route_path(request, "login_page"), status_code=303)
    response.delete_cookie(SESSION_COOKIE, path=cookie_path(request))
    return response
