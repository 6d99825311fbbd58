"""Who may use the dashboard, and how its actions are protected.

- Authentication: an ``auth=`` hook of yours (``request -> bool``, sync or async, or raising an
  ``HTTPException``), HTTP basic auth, or a bearer token (a browser presents it once on the login
  page and keeps a signed cookie). Any one configured method that admits a request lets it in.
- Without any of them the dashboard serves only on a loopback address: ``check_exposure`` refuses to
  start a server elsewhere, and the app refuses requests that reached it on another address.
- CSRF: every action is a POST that must carry the token of the browser's session, an HMAC of a
  random cookie (``SameSite=Strict``) under the dashboard's secret, in a form field or a header.
- Every response carries a strict Content-Security-Policy: no inline script runs, whatever the data.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import inspect
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.errors import ConveyorError, ValidationError

#: ``auth=``: a request → whether it may use the dashboard (or an ``HTTPException`` of its own).
AuthHook = Callable[[Request], bool | Awaitable[bool]]

CSRF_COOKIE = "conveyor_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SESSION_COOKIE = "conveyor_session"
#: The largest form an action accepts (a bulk selection of a page of ids fits many times over).
MAX_FORM_BYTES = 256 * 1024

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class InsecureDashboardError(ConveyorError):
    """The dashboard would be reachable beyond this machine with no authentication."""


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address or ``localhost``) only reaches this machine."""
    if not host:
        return False
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, *, authenticated: bool) -> None:
    """Refuse to serve on a non-loopback ``host`` without authentication."""
    if not authenticated and not is_loopback(host):
        raise InsecureDashboardError(
            f"refusing to serve the dashboard on {host} without authentication: give a token, "
            "basic auth or an auth hook, or bind 127.0.0.1"
        )


def _digest(secret: bytes, purpose: str, value: str) -> str:
    return hmac.new(secret, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Access:
    """The dashboard's authentication settings and its signing secret."""

    secret: bytes
    hook: AuthHook | None = None
    basic: tuple[str, str] | None = None
    token: str | None = None

    @classmethod
    def build(
        cls,
        *,
        auth: AuthHook | None,
        basic_auth: tuple[str, str] | None,
        token: str | None,
        secret: str | bytes | None,
    ) -> Access:
        if auth is not None and not callable(auth):
            raise ValidationError("auth", auth, "must be a callable taking the request")
        if basic_auth is not None:
            if (
                not isinstance(basic_auth, tuple | list)
                or len(basic_auth) != 2
                or not all(isinstance(part, str) and part for part in basic_auth)
                or ":" in basic_auth[0]
            ):
                raise ValidationError(
                    "basic_auth", "(hidden)", "must be a (user, password) pair of non-empty strings"
                )
            basic_auth = (basic_auth[0], basic_auth[1])
        if token is not None and (not isinstance(token, str) or len(token) < 8):
            raise ValidationError("token", "(hidden)", "must be a string of at least 8 characters")
        if secret is None:
            # One process's secret: a restart signs browsers out (pass secret= for several workers).
            key = secrets.token_bytes(32)
        elif isinstance(secret, str | bytes) and len(secret) >= 16:
            key = secret.encode() if isinstance(secret, str) else secret
        else:
            raise ValidationError("secret", "(hidden)", "must be a string or bytes of at least 16")
        return cls(secret=key, hook=auth, basic=basic_auth, token=token)

    @property
    def configured(self) -> bool:
        return self.hook is not None or self.basic is not None or self.token is not None

    # -- token sessions --------------------------------------------------------------------------
    def session_value(self) -> str:
        """The cookie a browser keeps once it presented the token (changes with the token)."""
        return _digest(self.secret, "session", hashlib.sha256((self.token or "").encode()).hexdigest())

    def token_matches(self, presented: str) -> bool:
        return self.token is not None and hmac.compare_digest(presented.encode(), self.token.encode())

    # -- CSRF ------------------------------------------------------------------------------------
    def csrf_token(self, cookie: str) -> str:
        return _digest(self.secret, "csrf", cookie)

    def csrf_valid(self, cookie: str | None, presented: str | None) -> bool:
        if not cookie or not presented:
            return False
        return hmac.compare_digest(self.csrf_token(cookie).encode(), presented.encode())

    # -- admission -------------------------------------------------------------------------------
    def _basic_ok(self, request: Request) -> bool:
        if self.basic is None:
            return False
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        user_ok = hmac.compare_digest(user.encode(), self.basic[0].encode())
        password_ok = hmac.compare_digest(password.encode(), self.basic[1].encode())
        return bool(sep) and user_ok and password_ok

    def _token_ok(self, request: Request) -> bool:
        if self.token is None:
            return False
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token_matches(presented.strip()):
            return True
        cookie = request.cookies.get(SESSION_COOKIE)
        return cookie is not None and hmac.compare_digest(cookie.encode(), self.session_value().encode())

    async def admits(self, request: Request) -> bool:
        if self._basic_ok(request) or self._token_ok(request):
            return True
        if self.hook is not None:
            verdict = self.hook(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return verdict is True
        return False

    def refusal(self, request: Request, login_path: str) -> Response:
        """What a request that was not admitted gets."""
        if self.basic is not None:
            return PlainTextResponse(
                "authentication required",
                status_code=401,
                headers={"www-authenticate": 'Basic realm="Conveyor dashboard", charset="UTF-8"'},
            )
        wants_page = request.method == "GET" and "text/html" in request.headers.get("accept", "")
        if self.token is not None and wants_page:
            return RedirectResponse(login_path, status_code=303)
        return PlainTextResponse("not allowed", status_code=401 if self.token is not None else 403)


class Guard:
    """ASGI middleware: security headers on every response, then admission (the loopback rule when
    no authentication is configured). Static files and the login page are open to everyone."""

    def __init__(self, app: ASGIApp, *, access: Access, open_paths: tuple[str, ...], login: str) -> None:
        self.app = app
        self.access = access
        self.open_paths = open_paths
        self.login = login

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        request = Request(scope, receive)
        if not route_path(scope).startswith(self.open_paths):
            refused = await self._refusal(request, scope)
            if refused is not None:
                await refused(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)

    async def _refusal(self, request: Request, scope: Scope) -> Response | None:
        if not self.access.configured:
            server = scope.get("server")
            if server is None or not is_loopback(str(server[0])):
                return PlainTextResponse(
                    "this dashboard has no authentication configured, so it answers only on a loopback "
                    "address; configure a token, basic auth or an auth hook",
                    status_code=403,
                )
            return None
        try:
            if await self.access.admits(request):
                return None
        except HTTPException as exc:  # the hook's own answer (a redirect to a login, a 401...)
            return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)
        base = scope.get("root_path", "")
        return self.access.refusal(request, f"{base}{self.login}")


def route_path(scope: Scope) -> str:
    """The request's path within the dashboard: without the ``root_path`` it is mounted at, which
    servers and dispatchers may or may not have left in ``path``."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


def csrf_cookie(request: Request) -> tuple[str, bool]:
    """The browser's CSRF cookie, and whether it is new (to be set on the response)."""
    found = request.cookies.get(CSRF_COOKIE)
    if found and 20 <= len(found) <= 100:
        return found, False
    return secrets.token_urlsafe(32), True


def set_csrf_cookie(response: Response, request: Request, value: str) -> None:
    response.set_cookie(
        CSRF_COOKIE,
        value,
        path=cookie_path(request),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def cookie_path(request: Request) -> str:
    return request.scope.get("root_path", "") or "/"


async def read_form(request: Request) -> dict[str, list[str]]:
    """An urlencoded form body (every value kept, blanks too); a larger body than
    ``MAX_FORM_BYTES`` or another encoding is refused with ``ValidationError``."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in ("application/x-www-form-urlencoded", ""):
        raise ValidationError("content-type", kind, "actions take an urlencoded form")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise ValidationError("form", f"{len(body)}+ bytes", f"larger than {MAX_FORM_BYTES} bytes")
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise ValidationError("form", "(bytes)", "is not UTF-8") from None
    return parse_qs(text, keep_blank_values=True, max_num_fields=20_000)


def csrf_ok(access: Access, request: Request, form: Mapping[str, list[str]]) -> bool:
    presented = request.headers.get(CSRF_HEADER) or first(form, CSRF_FIELD)
    return access.csrf_valid(request.cookies.get(CSRF_COOKIE), presented)


def first(form: Mapping[str, list[str]], name: str, default: Any = None) -> Any:
    values = form.get(name)
    return values[0] if values else default
