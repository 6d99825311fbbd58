"""The dashboard as a Django view: ``path("jobs/", include("conveyor.contrib.django.urls"))``.

The view lets in who ``settings.CONVEYOR["dashboard"]["allow"]`` admits (Django's staff by
default), sends a signed-out visitor to ``LOGIN_URL``, and hands the request to the dashboard's
ASGI app (``conveyor.web.dashboard``) on the app's portal, so Django's test client, middleware and
plain WSGI servers all reach it. The dashboard keeps its own CSRF protection (signed tokens in its
forms), so Django's is waived for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from conveyor.contrib.django.config import dashboard_options

#: Set in the ASGI scope by the view once Django let the request in: the dashboard's auth hook.
ADMITTED = "conveyor.django.admitted"

_built: dict[str, Any] = {}


def staff(request: HttpRequest) -> bool:
    """The default ``allow``: an active staff user (Django's admin asks the same)."""
    user = request.user
    return bool(user.is_active and user.is_staff)


def allow_check() -> Callable[[HttpRequest], bool]:
    allow = dashboard_options().get("allow", staff)
    if isinstance(allow, str):
        try:
            allow = import_string(allow)
        except ImportError as exc:
            raise ImproperlyConfigured(f"settings.CONVEYOR['dashboard']['allow']: {exc}") from None
    if not callable(allow):
        raise ImproperlyConfigured(
            f"settings.CONVEYOR['dashboard']['allow'] must be a function taking the request (or its "
            f"dotted path), not {allow!r}"
        )
    return allow  # type: ignore[no-any-return]


def _asgi_app() -> Any:
    if "app" not in _built:
        from conveyor.contrib.django import get_app
        from conveyor.web.dashboard import dashboard_app

        options = {k: v for k, v in dashboard_options().items() if k != "allow"}
        _built["app"] = dashboard_app(
            get_app(),
            auth=lambda request: request.scope.get(ADMITTED) is True,
            secret=f"conveyor-dashboard:{settings.SECRET_KEY}",
            **options,
        )
    return _built["app"]


def dashboard(request: HttpRequest, path: str = "") -> HttpResponse:
    """Every page and action of the dashboard, below the prefix its URLs were included at."""
    if not hasattr(request, "user"):
        raise ImproperlyConfigured(
            "the Conveyor dashboard checks Django's user: add 'django.contrib.auth' to INSTALLED_APPS "
            "and AuthenticationMiddleware to MIDDLEWARE (or set settings.CONVEYOR['dashboard']['allow'])"
        )
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not allow_check()(request):
        raise PermissionDenied("the Conveyor dashboard is for staff users")
    from conveyor.contrib.django import get_app

    app = get_app()
    opened = app.connected
    try:
        status, headers, body = app.run_sync(_call, _asgi_app(), _scope(request, path), request.body)
    finally:
        if not opened:  # as Django closes its connections after each request (CONN_MAX_AGE 0)
            app.close_sync()
    response = HttpResponse(body, status=status)
    for name, value in headers:
        if name.lower() == "content-length":
            continue  # Django sets it
        if name.lower() == "set-cookie":
            _set_cookie(response, value)
        else:
            response[name] = value
    return response


# The dashboard checks its own CSRF tokens (signed, in its forms): Django's would refuse its posts.
dashboard.csrf_exempt = True  # type: ignore[attr-defined]


def _scope(request: HttpRequest, path: str) -> dict[str, Any]:
    full = request.path
    root = full[: len(full) - len(path)].rstrip("/") if path else full.rstrip("/")
    headers = [
        (key[5:].replace("_", "-").lower().encode("latin-1"), str(value).encode("latin-1"))
        for key, value in request.META.items()
        if key.startswith("HTTP_")
    ]
    for key, name in (("CONTENT_TYPE", b"content-type"), ("CONTENT_LENGTH", b"content-length")):
        if request.META.get(key):
            headers.append((name, str(request.META[key]).encode("latin-1")))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": full,
        "raw_path": full.encode(),
        "root_path": root,
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR") or "", 0),
        "server": (request.get_host().split(":")[0], int(request.get_port() or 80)),
        ADMITTED: True,
    }


async def _call(app: Any, scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request through the ASGI app, its response gathered (the dashboard streams nothing)."""
    sent = False
    status = 500
    headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            headers.extend((k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)


def _set_cookie(response: HttpResponse, header: str) -> None:
    """A Set-Cookie header of the dashboard's, onto Django's response (which keeps cookies apart)."""
    from http.cookies import SimpleCookie

    parsed: SimpleCookie = SimpleCookie()
    parsed.load(header)
    for name, morsel in parsed.items():
        response.cookies[name] = morsel.value
        for key in ("path", "httponly", "samesite", "max-age", "expires", "secure"):
            if morsel[key]:
                response.cookies[name][key] = morsel[key]
